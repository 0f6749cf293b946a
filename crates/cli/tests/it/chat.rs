//! `volcanic chat` end to end with the Faux provider.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/workspace")
}

/// `volcanic chat` with a clean environment: no provider keys, state in a temp dir.
fn chat(state: &Path) -> Command {
    let mut cmd = Command::cargo_bin("volcanic").unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state)
        .arg("chat")
        .arg("--state-dir")
        .arg(state);
    cmd
}

#[test]
fn chat_faux_echo_prints_answer_and_exits_0() {
    let state = tempfile::tempdir().unwrap();
    let out = chat(state.path())
        .arg("--faux")
        .arg("--workspace")
        .arg(examples())
        .arg("hello")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "echo: hello\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn chat_faux_bash_directive_shows_tool_and_prints_ok() {
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let prompt = r#"faux> {"steps":[{"tool":"bash","args":{"command":"echo hi"}},{"text":"ok"}]}"#;
    let out = chat(state.path())
        .arg("--faux")
        .arg("--workspace")
        .arg(ws.path())
        .arg(prompt)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "· bash echo hi\n");
    assert!(out.status.success());
}

#[test]
fn chat_without_provider_exits_2_saying_what_to_set() {
    let state = tempfile::tempdir().unwrap();
    let out = chat(state.path()).arg("--workspace").arg(examples()).arg("hello").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("volcanic: no model provider configured"), "{stderr}");
    assert!(stderr.contains("ANTHROPIC_API_KEY") && stderr.contains("--faux"));
    assert!(out.stdout.is_empty());
}

#[test]
fn chat_bad_config_exits_2_naming_the_key() {
    let state = tempfile::tempdir().unwrap();
    let out = chat(state.path())
        .env("Agent__MaxTurns", "three")
        .args(["--faux", "--workspace"])
        .arg(examples())
        .arg("hello")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("volcanic: bad configuration: agent.max_turns:"), "{stderr}");
}

#[test]
fn chat_failed_run_exits_1_with_the_error() {
    let state = tempfile::tempdir().unwrap();
    let out = chat(state.path())
        .args(["--faux", "--workspace"])
        .arg(examples())
        .arg(r#"faux> {"steps":[{"error":"the model is down"}]}"#)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "volcanic: the run failed: the model is down\n"
    );
}

#[test]
fn chat_resumes_the_named_session() {
    let state = tempfile::tempdir().unwrap();
    for text in ["first message", "second message"] {
        let out = chat(state.path())
            .args(["--faux", "--session", "notes", "--workspace"])
            .arg(examples())
            .arg(text)
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    let journal =
        std::fs::read_to_string(state.path().join("sessions/chat-notes/session.jsonl")).unwrap();
    assert!(journal.contains("first message") && journal.contains("second message"));
    assert_eq!(journal.lines().filter(|l| l.contains("\"type\":\"session\"")).count(), 1);
}

#[test]
fn chat_faux_script_file_is_used() {
    let state = tempfile::tempdir().unwrap();
    let script = state.path().join("script.json");
    std::fs::write(&script, r#"{"rules":[{"match":"weather","steps":[{"text":"sunny"}]}]}"#)
        .unwrap();
    let out = chat(state.path())
        .args(["--faux", "--faux-script"])
        .arg(&script)
        .arg("--workspace")
        .arg(examples())
        .arg("what's the weather")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "sunny\n");
    std::fs::write(&script, "{not json").unwrap();
    let out = chat(state.path())
        .args(["--faux", "--faux-script"])
        .arg(&script)
        .arg("x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn chat_interactive_reads_lines_until_exit() {
    let state = tempfile::tempdir().unwrap();
    let mut child = chat(state.path())
        .args(["--faux", "--workspace"])
        .arg(examples())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"one\n\ntwo\n/exit\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "echo: one\necho: two\n");
}

#[test]
fn chat_ctrl_c_aborts_the_run_not_the_program() {
    let state = tempfile::tempdir().unwrap();
    let mut child = chat(state.path())
        .args(["--faux", "--workspace"])
        .arg(examples())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"faux> {\"steps\":[{\"tool\":\"bash\",\"args\":{\"command\":\"sleep 30\"}}]}\n")
        .unwrap();
    // Wait until the tool line shows that the run is under way.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.contains("· bash sleep 30")) {
        seen.push(rx.recv_timeout(Duration::from_secs(20)).expect("tool line"));
    }
    let status = Command::new("kill").arg("-INT").arg(child.id().to_string()).status().unwrap();
    assert!(status.success());
    while !seen.iter().any(|l: &String| l.contains("(aborted)")) {
        seen.push(rx.recv_timeout(Duration::from_secs(10)).expect("aborted line"));
    }
    // Still alive: a new message gets an answer.
    stdin.write_all(b"still here\n").unwrap();
    drop(stdin);
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{seen:?}");
    assert!(stdout.contains("echo: still here"), "{stdout}");
}

#[test]
fn chat_closed_stdout_exits_quietly() {
    let state = tempfile::tempdir().unwrap();
    let mut child = chat(state.path())
        .args(["--faux", "--workspace"])
        .arg(examples())
        .arg(r#"faux> {"steps":[{"text":"a long answer streamed slowly","chunk":2,"delay_ms":5}]}"#)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

#[test]
fn chat_sigterm_stops_the_run_and_its_processes() {
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let pid_file = ws.path().join("sleep.pid");
    // A duration no other process uses, to find the sleep from outside: its pid as bash sees it
    // is a pid of the sandbox's own namespace.
    let duration = format!("300.{}", std::process::id());
    let prompt = format!(
        r#"faux> {{"steps":[{{"tool":"bash","args":{{"command":"sleep {duration} & echo $! > {}; wait"}}}}]}}"#,
        pid_file.display()
    );
    let mut child = chat(state.path())
        .args(["--faux", "--workspace"])
        .arg(ws.path())
        .arg(prompt)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&pid_file).map(|s| s.trim().is_empty()).unwrap_or(true) {
        assert!(std::time::Instant::now() < deadline, "the tool did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let cmdline = format!("sleep\0{duration}\0");
    let sleeping = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            std::fs::read_to_string(entry.path().join("cmdline")).is_ok_and(|c| c == cmdline)
                && !stat.contains(") Z ")
        })
    };
    // `$!` is known once bash has forked; the child may not have exec'd `sleep` yet.
    while !sleeping() {
        assert!(std::time::Instant::now() < deadline, "the sleep is not visible from outside");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap().success()
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while sleeping() {
        assert!(std::time::Instant::now() < deadline, "sleep {duration} outlived volcanic chat");
        std::thread::sleep(Duration::from_millis(20));
    }
}
