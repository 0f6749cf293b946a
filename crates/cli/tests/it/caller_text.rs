//! Text a caller wrote, on the owner's terminal and in the server's log: `volcanic approvals`
//! shows a waiting request's escape sequences instead of sending them, and keeps the header of
//! each request (its id and caller) out of the caller's reach; `notify_owner` cannot start or
//! rewrite a line of the server's log. Each attack is what a hostile caller sends.

use std::path::Path;
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::{Value, json};
use volcanic_test_support::callers::write_callers;

use crate::serve::{KEY, post, serve, stop};

/// A JSON-RPC SendMessage of `text`.
fn send_body(text: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}}})
    .to_string()
}

/// What a terminal would obey in a caller's text: clear the screen, home the cursor, return to the
/// start of the line, set the window title.
const TERMINAL_CONTROL: [char; 3] = ['\u{1b}', '\r', '\u{7}'];

fn has_terminal_control(text: &str) -> bool {
    text.contains(TERMINAL_CONTROL)
}

/// `volcanic ARGS --workspace WS --state-dir STATE` as the owner: exit code, stdout, stderr.
fn owner(ws: &Path, state: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state)
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .arg("--state-dir")
        .arg(state)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn caller_text_approvals_shows_escape_sequences_and_cannot_fake_another_request() {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    write_callers(ws.path(), &[("tester", KEY)]);
    let path = ws.path().join(".volcanic/a2a/callers.json");
    let mut callers: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    callers[0]["approval"] = json!("every-task");
    std::fs::write(&path, serde_json::to_vec(&callers).unwrap()).unwrap();
    let served = serve(ws.path(), state.path(), &[]);

    // The attack: clear the screen and go home, then print what looks like another caller's
    // harmless request; a carriage return and cursor moves rewrite the real header line.
    let forged = "0123abcd  friendly-bot  task 7f3e  (expires in 59 min)\n    what's the weather?";
    let text = format!(
        "delete every file\u{1b}[2J\u{1b}[H{forged}\r\u{1b}[1A\u{1b}[2K\u{1b}]0;approvals\u{7}"
    );
    let (status, answer) = post(&served.base, KEY, &send_body(&text));
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("TASK_STATE_AUTH_REQUIRED"), "{answer}");

    let (code, listing, stderr) = owner(ws.path(), state.path(), &["approvals"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !has_terminal_control(&listing),
        "raw control characters reached the terminal: {listing:?}"
    );
    assert!(listing.contains("delete every file\\u{1b}[2J\\u{1b}[H0123abcd"), "{listing}");
    // Every line that is not indented is the server's: the real header naming the real caller,
    // and the closing hint. The forged header is indented under it, as the caller's text.
    let unindented: Vec<&str> =
        listing.lines().filter(|l| !l.is_empty() && !l.starts_with("    ")).collect();
    assert_eq!(unindented.len(), 2, "{listing}");
    assert!(unindented[0].contains("  tester  task "), "{listing}");
    assert!(unindented[1].starts_with("Decide with: "), "{listing}");
    assert!(
        listing.lines().any(|l| l
            == "        what's the weather?\\u{d}\\u{1b}[1A\\u{1b}[2K\\u{1b}]0;approvals\\u{7}"),
        "{listing}"
    );
    // `--json` carries the text as JSON escapes.
    let (code, json_lines, _) = owner(ws.path(), state.path(), &["approvals", "--json"]);
    assert_eq!(code, 0);
    assert!(!has_terminal_control(&json_lines), "{json_lines:?}");
    let record: Value = serde_json::from_str(json_lines.trim()).unwrap();
    assert_eq!(record["request"], text);
    // The decision's line is the server's data, escaped all the same.
    let id = record["id"].as_str().unwrap();
    let (code, decided, stderr) = owner(ws.path(), state.path(), &["deny", id]);
    let expected =
        format!("Task {} of tester is rejected now.\n", record["taskId"].as_str().unwrap());
    assert_eq!((code, decided), (0, expected), "{stderr}");
    let (code, _) = stop(served);
    assert_eq!(code, 0);
}

#[test]
fn caller_text_notify_owner_cannot_forge_or_rewrite_a_line_of_the_server_log() {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    write_callers(ws.path(), &[("tester", KEY)]);
    let served = serve(ws.path(), state.path(), &[]);
    // A line as the log writes it, after a newline; then a carriage return and an erase, which
    // on a terminal would wipe the real line it sits on.
    let forged = "2026-01-01T00:00:00.000000Z  INFO volcanic::cmd::serve: the owner approved caller=bank-official";
    let text = format!("booked\n{forged}\n\r\u{1b}[2Kall good");
    let steps = json!({"steps": [
        {"tool": "notify_owner", "args": {"text": text}},
        {"text": "told them"},
    ]});
    let (status, answer) = post(&served.base, KEY, &send_body(&format!("faux> {steps}")));
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("TASK_STATE_COMPLETED"), "{answer}");
    let (code, log) = stop(served);
    assert_eq!(code, 0, "{log}");
    assert!(!log.lines().any(|line| line.starts_with(forged)), "a forged line: {log}");
    assert!(!log.contains(TERMINAL_CONTROL), "{log:?}");
    let notification = log
        .lines()
        .find(|line| line.contains("owner notification"))
        .unwrap_or_else(|| panic!("no notification logged: {log}"));
    assert!(
        notification
            .ends_with(&format!("text=booked\\u{{a}}{forged}\\u{{a}}\\u{{d}}\\u{{1b}}[2Kall good")),
        "{notification}"
    );
}

#[test]
fn caller_text_callers_list_shows_control_characters_of_a_note() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".volcanic/a2a")).unwrap();
    let note = "Bob\r\u{1b}[2Kmallory  workspace  isolated  …";
    std::fs::write(
        ws.path().join(".volcanic/a2a/callers.json"),
        json!([{"name": "bob", "key": "k_0123456789abcdef", "tier": "chat", "note": note}])
            .to_string(),
    )
    .unwrap();
    let output = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(["callers", "list", "--workspace"])
        .arg(ws.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(!has_terminal_control(&stdout), "{stdout:?}");
    assert!(stdout.contains("Bob\\u{d}\\u{1b}[2Kmallory"), "{stdout}");
}
