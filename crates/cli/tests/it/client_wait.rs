//! What a text-mode `volcanic a2a send` shows while it waits and when it is done, against
//! `volcanic serve --faux`: the task id as soon as the agent names it (a spinner on a terminal),
//! how to follow a `--no-wait` task, an answer printed once, and `get --history` in text.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;

use crate::client::{Agent, KEY, a2a};
use crate::client_errors::canned;

/// An answer that takes a while.
const SLOW: &str = r#"faux> {"steps":[{"text":"slow answer","delay_ms":4000}]}"#;

/// The task id of a text-mode answer's first line (`state · task ID · context …`).
fn task_id(stdout: &str) -> String {
    let line =
        stdout.lines().find(|l| l.contains(" · task ")).unwrap_or_else(|| panic!("{stdout}"));
    line.split(" · task ").nth(1).unwrap().split(' ').next().unwrap().to_owned()
}

#[test]
fn a2a_send_names_its_task_while_it_waits() {
    let agent = Agent::start();
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::cargo_bin("volcanic")
        .unwrap()
        .env("VOLCANIC_A2A_KEY", KEY)
        .current_dir(dir.path())
        .args(["a2a", "send", &agent.base, SLOW])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(30)).expect("a line while it waits");
    // The answer takes four seconds: the line came while the client was still waiting.
    assert!(child.try_wait().unwrap().is_none(), "the client had already ended: {first}");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id = task_id(&stdout);
    assert!(first.starts_with(&format!("task {id}: waiting")), "{first}");
    assert!(
        first.contains(&format!("volcanic a2a subscribe {} {id}", agent.base))
            && first.contains("--stream"),
        "{first}"
    );
    assert!(stdout.starts_with("completed · task "), "{stdout}");
    assert_eq!(stdout.matches("slow answer").count(), 1, "{stdout}");
}

#[test]
fn a2a_send_prints_an_answer_its_status_repeats_once() {
    // Agents often put the answer both in the final status message and in an artifact (our
    // server does not, hence an agent of someone else's, canned, without streaming).
    let task = |status: &str| {
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"task": {
            "id": "t-1", "contextId": "c-1",
            "status": {"state": "TASK_STATE_COMPLETED", "message": {
                "messageId": "m-1", "role": "ROLE_AGENT", "parts": [{"text": status}]}},
            "artifacts": [{"artifactId": "a-1", "parts": [{"text": "Paris is the capital."}]}]}}})
        .to_string()
    };
    let card = |base: &str| {
        serde_json::json!({"name": "canned", "version": "1", "supportedInterfaces": [
            {"url": format!("{base}/rpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]})
        .to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let same = canned(|base| {
        vec![
            ("/.well-known/agent-card.json", 200, card(base)),
            ("/rpc", 200, task("Paris is the capital.")),
        ]
    });
    let sent = a2a(dir.path(), Some(KEY), &["send", &same, "capital of France?"]);
    assert_eq!(sent.code, 0, "{}{}", sent.stdout, sent.stderr);
    assert_eq!(
        sent.stdout, "completed · task t-1 · context c-1\nParis is the capital.\n",
        "{}",
        sent.stderr
    );
    // Scripts get the task as the agent sent it.
    let json = a2a(dir.path(), Some(KEY), &["send", &same, "capital of France?", "--json"]);
    assert_eq!(json.stdout.matches("Paris is the capital.").count(), 2, "{}", json.stdout);
    // A status that says something else is shown.
    let other = canned(|base| {
        vec![("/.well-known/agent-card.json", 200, card(base)), ("/rpc", 200, task("Done."))]
    });
    let sent = a2a(dir.path(), Some(KEY), &["send", &other, "capital of France?"]);
    assert_eq!(sent.stdout, "completed · task t-1 · context c-1\nDone.\nParis is the capital.\n");
}

#[test]
fn a2a_send_no_wait_says_how_to_follow_the_task() {
    let agent = Agent::start();
    let dir = tempfile::tempdir().unwrap();
    let sent = a2a(dir.path(), Some(KEY), &["send", &agent.base, SLOW, "--no-wait"]);
    assert_eq!(sent.code, 0, "{}{}", sent.stdout, sent.stderr);
    let id = task_id(&sent.stdout);
    let follow = format!("Follow it with: volcanic a2a subscribe {} {id}\n", agent.base);
    assert!(sent.stdout.contains(&follow), "{}", sent.stdout);
    assert!(
        sent.stdout.contains(&format!("volcanic a2a get {} {id}\n", agent.base)),
        "{}",
        sent.stdout
    );
    let json = a2a(dir.path(), Some(KEY), &["send", &agent.base, SLOW, "--no-wait", "--json"]);
    assert_eq!(json.json().len(), 1, "JSON output stays one value: {}", json.stdout);
}

#[test]
fn a2a_get_history_shows_the_messages_in_text() {
    let agent = Agent::start();
    let dir = tempfile::tempdir().unwrap();
    let sent = a2a(dir.path(), Some(KEY), &["send", &agent.base, "remember this"]);
    let id = task_id(&sent.stdout);
    let got = a2a(dir.path(), Some(KEY), &["get", &agent.base, &id, "--history", "10"]);
    assert_eq!(got.code, 0, "{}{}", got.stdout, got.stderr);
    assert!(
        got.stdout.contains("\nhistory (1 messages):\n  user: remember this\n"),
        "{}",
        got.stdout
    );
    let plain = a2a(dir.path(), Some(KEY), &["get", &agent.base, &id]);
    assert!(!plain.stdout.contains("history ("), "only when asked: {}", plain.stdout);
}

#[test]
fn a2a_send_spins_on_a_terminal() {
    let agent = Agent::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::cargo_bin("volcanic").unwrap();
    cmd.env("VOLCANIC_A2A_KEY", KEY).env("TERM", "xterm-256color").current_dir(dir.path()).args([
        "a2a",
        "send",
        &agent.base,
        SLOW,
    ]);
    let mut session = expectrl::Session::spawn(cmd).unwrap();
    session.set_expect_timeout(Some(Duration::from_secs(30)));
    session.expect(expectrl::Regex("waiting for task [0-9a-f-]+…")).unwrap();
    session.expect("slow answer").unwrap();
    session.expect(expectrl::Eof).unwrap();
}
