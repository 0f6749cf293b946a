//! `volcanic chat` on a terminal: the real binary on a pseudo-terminal (expectrl), with the
//! Faux provider, asserting on what the screen gets and on what reached the session's journal.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;
use expectrl::{Eof, Regex, Session, WaitStatus};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/workspace")
}

/// A chat on a pseudo-terminal, with a clean environment and its state in `state`.
struct Screen {
    session: Session,
    /// Everything the terminal has shown so far.
    seen: Vec<u8>,
}

impl Screen {
    fn start(state: &Path, env: &[(&str, &str)], args: &[&str]) -> Screen {
        let mut cmd = Command::cargo_bin("volcanic").unwrap();
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", state)
            .env("TERM", "xterm-256color")
            .arg("chat")
            .arg("--state-dir")
            .arg(state)
            .args(args);
        for (key, value) in env {
            cmd.env(key, value);
        }
        let mut session = Session::spawn(cmd).unwrap();
        session.set_expect_timeout(Some(Duration::from_secs(30)));
        let mut screen = Screen { session, seen: Vec::new() };
        screen.expect("volcanic chat: session");
        screen
    }

    fn faux(state: &Path, env: &[(&str, &str)]) -> Screen {
        let workspace = examples();
        Screen::start(state, env, &["--faux", "--workspace", workspace.to_str().unwrap()])
    }

    /// Waits for `pattern` (a regex) on the screen; panics with what was seen when it does not
    /// come in time.
    fn expect(&mut self, pattern: &str) {
        match self.session.expect(Regex(pattern)) {
            Ok(found) => {
                self.seen.extend_from_slice(found.before());
                self.seen.extend_from_slice(found.get(0).unwrap_or_default());
            }
            Err(e) => panic!("{pattern:?} did not show ({e}); the screen had: {}", self.text()),
        }
    }

    /// Types `text` (raw bytes: `\r` is Enter) into the line being edited.
    fn send(&mut self, text: &str) {
        self.session.send(text).unwrap();
    }

    /// Waits for the next prompt (the editor has the terminal: it has turned bracketed paste
    /// on), then types `text`. Lines typed ahead of the prompt could be read in one go.
    fn at_prompt(&mut self, text: &str) {
        self.expect("\u{1b}\\[\\?2004h");
        self.send(text);
    }

    /// Types `/exit` at the next prompt, reads the screen to its end and returns the exit code.
    fn exit(mut self) -> (i32, String) {
        self.at_prompt("/exit\r");
        self.finish()
    }

    /// Reads the screen to its end; the exit code and everything shown.
    fn finish(mut self) -> (i32, String) {
        match self.session.expect(Eof) {
            Ok(found) => {
                self.seen.extend_from_slice(found.before());
                self.seen.extend_from_slice(found.get(0).unwrap_or_default());
            }
            Err(e) => panic!("the chat did not end ({e}); the screen had: {}", self.text()),
        }
        let code = match self.session.get_process().wait().unwrap() {
            WaitStatus::Exited(_, code) => code,
            other => panic!("the chat ended by {other:?}"),
        };
        (code, self.text())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }
}

/// The texts of the user messages in the session's journal.
fn user_messages(journal: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(journal).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|entry| entry["type"] == "message" && entry["message"]["role"] == "user")
        .map(|entry| entry["message"]["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn journal(state: &Path) -> PathBuf {
    state.join("sessions/chat-main/session.jsonl")
}

/// Colour and other graphic renditions: `ESC [ … m`.
fn has_colour(text: &str) -> bool {
    let mut rest = text;
    while let Some(at) = rest.find("\u{1b}[") {
        let after = &rest[at + 2..];
        let params = after.bytes().take_while(|b| b.is_ascii_digit() || *b == b';').count();
        if after.as_bytes().get(params) == Some(&b'm') {
            return true;
        }
        rest = after;
    }
    false
}

#[test]
fn terminal_help_is_answered_here_and_never_reaches_the_model() {
    let state = tempfile::tempdir().unwrap();
    let mut screen = Screen::faux(state.path(), &[]);
    screen.at_prompt("/help\r");
    screen.expect("/compact");
    screen.expect("quit \\(also");
    screen.at_prompt("hello\r");
    screen.expect("echo: hello");
    let (code, seen) = screen.exit();
    assert_eq!(code, 0, "{seen}");
    assert!(seen.contains("/new"), "{seen}");
    assert!(seen.contains("Alt-Enter"), "the keys are listed on a terminal: {seen}");
    assert!(!seen.contains("echo: /help"), "{seen}");
    assert_eq!(user_messages(&journal(state.path())), ["hello"]);
}

#[test]
fn terminal_new_starts_a_fresh_conversation_and_keeps_the_old_one() {
    let state = tempfile::tempdir().unwrap();
    let mut screen = Screen::faux(state.path(), &[]);
    screen.at_prompt("first\r");
    screen.expect("echo: first");
    screen.at_prompt("/new\r");
    screen.expect("Fresh conversation started");
    screen.at_prompt("second\r");
    screen.expect("echo: second");
    let (code, seen) = screen.exit();
    assert_eq!(code, 0, "{seen}");
    assert_eq!(user_messages(&journal(state.path())), ["second"]);
    let folder = state.path().join("sessions/chat-main");
    let archived: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".archived"))
        .collect();
    assert_eq!(archived.len(), 1, "{archived:?}");
    assert_eq!(user_messages(&archived[0]), ["first"]);
}

#[test]
fn terminal_paste_continued_lines_and_alt_enter_make_one_message_each() {
    let state = tempfile::tempdir().unwrap();
    let mut screen = Screen::faux(state.path(), &[]);
    // A bracketed paste of two lines, then Enter.
    screen.at_prompt("\u{1b}[200~line one\rline two\u{1b}[201~");
    screen.send("\r");
    screen.expect("echo: line one");
    screen.expect("line two");
    // A trailing backslash continues the message on the next line.
    screen.at_prompt("part one \\\r");
    screen.send("part two\r");
    screen.expect("part two");
    // So does Alt-Enter (ESC then Enter).
    screen.at_prompt("alt one\u{1b}\ralt two\r");
    screen.expect("alt two");
    // Tab completes a command.
    screen.at_prompt("/hel\t\r");
    screen.expect("quit \\(also");
    let (code, seen) = screen.exit();
    assert_eq!(code, 0, "{seen}");
    assert_eq!(
        user_messages(&journal(state.path())),
        ["line one\nline two", "part one \npart two", "alt one\nalt two"],
        "{seen}"
    );
}

#[test]
fn terminal_shows_thinking_and_tool_progress() {
    let state = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut screen = Screen::start(
        state.path(),
        &[],
        &["--faux", "--workspace", workspace.path().to_str().unwrap()],
    );
    screen.at_prompt(r#"faux> {"steps":[{"text":"slow answer","delay_ms":1500}]}"#);
    screen.send("\r");
    screen.expect("thinking…");
    screen.expect("slow answer");
    screen.at_prompt(
        r#"faux> {"steps":[{"tool":"bash","args":{"command":"sleep 1.5"}},{"text":"all done"}]}"#,
    );
    screen.send("\r");
    screen.expect("bash sleep 1.5");
    screen.expect("all done");
    let (code, seen) = screen.exit();
    assert_eq!(code, 0, "{seen}");
}

#[test]
fn terminal_colour_follows_no_color() {
    let state = tempfile::tempdir().unwrap();
    let mut screen = Screen::faux(state.path(), &[]);
    screen.at_prompt("/help\r");
    screen.expect("quit \\(also");
    let (code, coloured) = screen.exit();
    assert_eq!(code, 0, "{coloured}");
    assert!(has_colour(&coloured), "a colour terminal gets colour: {coloured:?}");

    let state = tempfile::tempdir().unwrap();
    let mut screen = Screen::faux(state.path(), &[("NO_COLOR", "1")]);
    screen.at_prompt("/help\r");
    screen.expect("quit \\(also");
    screen.at_prompt(r#"faux> {"steps":[{"error":"the model is down"}]}"#);
    screen.send("\r");
    screen.expect("the run failed");
    let (code, plain) = screen.exit();
    assert_eq!(code, 0, "{plain}");
    assert!(!has_colour(&plain), "NO_COLOR: no colour codes: {plain:?}");
}

/// A port nothing listens on: bound, then let go.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn terminal_unreachable_model_is_reported_once_with_a_hint() {
    let state = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let base = format!("http://127.0.0.1:{}/v1", closed_port());
    let env = [
        ("Provider__Kind", "openai"),
        ("Provider__BaseUrl", base.as_str()),
        ("Agent__MaxRetries", "1"),
    ];
    let mut screen =
        Screen::start(state.path(), &env, &["--workspace", workspace.path().to_str().unwrap()]);
    screen.at_prompt("hello\r");
    screen.expect("the run failed");
    screen.expect(r"running\?");
    let (code, seen) = screen.exit();
    assert_eq!(code, 0, "{seen}");
    let hint = format!("is {base} running?");
    assert_eq!(seen.matches(&hint).count(), 1, "{seen}");
    assert_eq!(seen.matches("the run failed").count(), 1, "{seen}");
    assert!(!seen.contains("WARN"), "no log line besides the report: {seen}");
}

#[test]
fn piped_unreachable_model_is_reported_once_with_a_hint() {
    let state = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let base = format!("http://127.0.0.1:{}/v1", closed_port());
    let out = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state.path())
        .env("Provider__Kind", "openai")
        .env("Provider__BaseUrl", &base)
        .env("Agent__MaxRetries", "1")
        .arg("chat")
        .arg("--state-dir")
        .arg(state.path())
        .arg("--workspace")
        .arg(workspace.path())
        .arg("hello")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "a retry line, the failure, the hint: {stderr}");
    assert!(lines[0].starts_with("· model call failed ("), "{stderr}");
    assert!(lines[1].starts_with("volcanic: the run failed: openai: request failed: "), "{stderr}");
    assert_eq!(
        lines[2],
        format!("  is {base} running? (the model server Provider__BaseUrl names)")
    );
}

#[test]
fn terminal_ctrl_c_at_the_prompt_drops_the_line_and_twice_quits() {
    let state = tempfile::tempdir().unwrap();
    let mut screen = Screen::faux(state.path(), &[]);
    screen.at_prompt("half a thought\u{3}");
    screen.expect(r"Ctrl-C again or Ctrl-D quits");
    screen.at_prompt("\u{3}");
    let (code, seen) = screen.finish();
    assert_eq!(code, 130, "{seen}");
    assert!(user_messages(&journal(state.path())).is_empty(), "nothing was sent: {seen}");

    let mut screen = Screen::faux(state.path(), &[]);
    screen.at_prompt("\u{4}");
    let (code, seen) = screen.finish();
    assert_eq!(code, 0, "Ctrl-D quits: {seen}");
}

#[test]
fn terminal_history_is_kept_across_chats() {
    let state = tempfile::tempdir().unwrap();
    let mut screen = Screen::faux(state.path(), &[]);
    screen.at_prompt("remember me\r");
    screen.expect("echo: remember me");
    let (code, seen) = screen.exit();
    assert_eq!(code, 0, "{seen}");
    let history = state.path().join("chat-history");
    let text = std::fs::read_to_string(&history).unwrap();
    assert!(text.contains("remember me"), "{text}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&history).unwrap().permissions(),
    );
    assert_eq!(mode & 0o077, 0, "only the owner reads it: {mode:o}");

    // Up recalls the last message (`/exit`), Up again the one before it.
    let mut screen = Screen::faux(state.path(), &[]);
    screen.at_prompt("\u{1b}[A\u{1b}[A\r");
    screen.expect("echo: remember me");
    let (code, seen) = screen.exit();
    assert_eq!(code, 0, "{seen}");
    assert_eq!(user_messages(&journal(state.path())), ["remember me", "remember me"]);
}

#[test]
fn terminal_sigterm_at_the_prompt_leaves_the_terminal_as_it_was() {
    // The editor's read cannot be interrupted: told to stop while it waits for a line, the chat
    // must put the terminal's settings back itself, or the shell is left in raw mode. A shell on
    // the same terminal runs the chat, then shows the terminal's settings (`stty -a`).
    let state = tempfile::tempdir().unwrap();
    let bin = Command::cargo_bin("volcanic").unwrap().get_program().to_owned();
    let mut cmd = Command::new("sh");
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state.path())
        .env("TERM", "xterm-256color")
        .arg("-c")
        .arg(r#"echo "before: $(stty -g)"; "$0" chat --state-dir "$1" --faux --workspace "$2"; echo "exit=$?"; echo "after: $(stty -g)""#)
        .arg(bin)
        .arg(state.path())
        .arg(examples());
    let mut session = Session::spawn(cmd).unwrap();
    session.set_expect_timeout(Some(Duration::from_secs(30)));
    let mut screen = Screen { session, seen: Vec::new() };
    screen.expect("\u{1b}\\[\\?2004h");
    let shell = screen.session.get_process().pid().to_string();
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
    let chat = children.split_whitespace().next().expect("the shell runs the chat").to_string();
    assert!(Command::new("kill").args(["-TERM", &chat]).status().unwrap().success());
    screen.expect("exit=143");
    let (_, seen) = screen.finish();
    // `stty -g`: every setting, in a form stty reads back.
    let settings = |label: &str| {
        let at = seen.find(label).map(|at| at + label.len()).unwrap_or(seen.len());
        seen[at..].split_whitespace().next().unwrap_or_default().to_string()
    };
    let (before, after) = (settings("before: "), settings("after: "));
    assert!(!before.is_empty(), "{seen}");
    assert_eq!(before, after, "the terminal was left changed: {seen}");
}
