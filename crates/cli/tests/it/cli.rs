//! The command line itself, through the real binary: `--version`, the help's command list and
//! examples, the A2A client's protocol flag (`--a2a-version`, not `--version`), and the shell
//! completion scripts of `volcanic completions` (the bash one run by bash).

use std::process::{Command, Output};

use assert_cmd::cargo::CommandCargoExt;

fn volcanic(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(dir.path())
        .args(args)
        .output()
        .unwrap()
}

fn stdout_of(args: &[&str]) -> String {
    let out = volcanic(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The commands `volcanic --help` lists, in its order.
const COMMANDS: &[&str] = &[
    "serve",
    "chat",
    "telegram",
    "a2a",
    "callers",
    "approvals",
    "approve",
    "deny",
    "usage",
    "completions",
];

#[test]
fn version_prints_the_binarys_version() {
    let stdout = stdout_of(&["--version"]);
    assert_eq!(stdout.trim(), format!("volcanic {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn a2a_takes_the_protocol_version_as_a2a_version_and_leaves_version_to_volcanic() {
    let help = stdout_of(&["a2a", "--help"]);
    assert!(help.contains("--a2a-version <VERSION>"), "{help}");
    assert!(!help.contains("--version <VERSION>"), "{help}");
    // The old spelling is not an option of `volcanic a2a` any more: clap refuses it (exit 2)
    // instead of reading it as the protocol version.
    let old = volcanic(&["a2a", "card", "http://127.0.0.1:9", "--version", "1.0"]);
    assert_eq!(old.status.code(), Some(2), "{}", String::from_utf8_lossy(&old.stderr));
    // The new one parses: the card fetch then fails (nothing listens on port 9), exit 1.
    let new = volcanic(&["a2a", "card", "http://127.0.0.1:9", "--a2a-version", "1.0"]);
    assert_eq!(new.status.code(), Some(1), "{}", String::from_utf8_lossy(&new.stderr));
}

#[test]
fn help_names_every_command_in_its_about_line_lists_them_in_groups_and_shows_examples() {
    let help = stdout_of(&["--help"]);
    let about = help.split("\n\n").next().unwrap().replace('\n', " ");
    let mut listed = Vec::new();
    for line in help.lines() {
        let Some(rest) = line.strip_prefix("  ") else { continue };
        let name = rest.split_whitespace().next().unwrap_or_default();
        if COMMANDS.contains(&name) {
            listed.push(name);
        }
    }
    assert_eq!(listed, COMMANDS, "{help}");
    for command in COMMANDS {
        assert!(about.contains(command), "the about line misses {command}: {about}");
    }
    assert!(help.contains("Run your assistant:"), "{help}");
    assert!(help.contains("Examples:\n  volcanic serve --faux"), "{help}");
    assert!(!help.contains("sandbox-"), "internal commands stay hidden: {help}");
    for command in COMMANDS {
        let help = stdout_of(&[command, "--help"]);
        assert!(help.contains("Example"), "`volcanic {command} --help` has no example: {help}");
        assert!(help.contains(&format!("volcanic {command} ")), "{help}");
    }
}

#[test]
fn completions_print_a_script_naming_every_command_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        for command in COMMANDS {
            assert!(script.contains(command), "{shell} script misses {command}");
        }
        assert!(script.contains("a2a-version"), "{shell} script misses the a2a options");
        assert!(!script.contains("sandbox-tool-host"), "{shell} script offers an internal command");
    }
    let unknown = volcanic(&["completions", "tcsh"]);
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn the_bash_script_completes_commands_and_options_in_bash() {
    let script = stdout_of(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("volcanic.bash");
    std::fs::write(&path, script).unwrap();
    // What bash does on <Tab>: the line's words, the word under the cursor, the function the
    // script registered for `volcanic`; the candidates end up in COMPREPLY.
    let complete = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let program = format!(
            "source {}; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT={}; \
             complete -p volcanic >/dev/null || exit 3; \
             func=$(complete -p volcanic | sed -E 's/.*-F ([^ ]+).*/\\1/'); \
             \"$func\" volcanic \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            path.display(),
            words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" "),
            words.len() - 1,
            line.len(),
        );
        let out = Command::new("bash").arg("--norc").arg("-c").arg(&program).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{line}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let commands = complete("volcanic se");
    assert_eq!(commands.trim(), "serve", "{commands}");
    let options = complete("volcanic a2a send --a2a");
    assert!(options.lines().any(|l| l.trim() == "--a2a-version"), "{options}");
}
