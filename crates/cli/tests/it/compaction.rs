//! Compaction through `volcanic chat --faux`: a simulated window (`Provider__ContextWindow`),
//! the one-line notice, `/compact` at the prompt, and what the owner sees without compaction.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use assert_cmd::cargo::CommandCargoExt;

/// `volcanic chat --faux` with a clean environment and `env` added.
fn chat(state: &Path, workspace: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::cargo_bin("volcanic").unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state)
        .envs(env.iter().copied())
        .args(["chat", "--faux", "--state-dir"])
        .arg(state)
        .arg("--workspace")
        .arg(workspace);
    cmd
}

/// A message of about 1,500 tokens.
fn long_message(i: usize) -> String {
    format!("note {i}: {}", "a long story about the garden ".repeat(200))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Sends messages one process at a time until one fails or `turns` were sent; the outputs.
fn converse(env: &[(&str, &str)], turns: usize) -> (Vec<Output>, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut outputs = Vec::new();
    for i in 0..turns {
        let out = chat(state.path(), workspace.path(), env).arg(long_message(i)).output().unwrap();
        let failed = !out.status.success();
        outputs.push(out);
        if failed {
            break;
        }
    }
    (outputs, state)
}

#[test]
fn chat_in_a_small_window_compacts_says_so_in_one_line_and_keeps_every_message() {
    let (outputs, state) = converse(&[("Provider__ContextWindow", "8000")], 8);
    assert_eq!(outputs.len(), 8);
    let mut lines = Vec::new();
    for (i, out) in outputs.iter().enumerate() {
        assert!(out.status.success(), "turn {i}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), format!("echo: {}\n", long_message(i)));
        lines.extend(text(&out.stderr).lines().map(str::to_string));
    }
    assert!(!lines.is_empty(), "no compaction in 8 turns of a 8k window");
    for line in &lines {
        let (count, tokens) = line
            .strip_prefix("· Compacted ")
            .and_then(|rest| rest.split_once(" older messages ("))
            .unwrap_or_else(|| panic!("{line:?}"));
        assert!(count.parse::<usize>().unwrap() > 0, "{line}");
        assert!(tokens.ends_with(" tokens)") && tokens.contains(" → "), "{line}");
    }
    let journal =
        std::fs::read_to_string(state.path().join("sessions/chat-main/session.jsonl")).unwrap();
    let users = journal.lines().filter(|l| l.contains(r#""role":"user""#)).count();
    assert_eq!(users, 8, "the journal keeps every message");
    let compactions = journal.lines().filter(|l| l.contains(r#""type":"compaction""#)).count();
    assert_eq!(compactions, lines.len());
}

#[test]
fn chat_without_compaction_fails_saying_what_helps() {
    let env = [("Provider__ContextWindow", "8000"), ("Agent__Compaction__Enabled", "false")];
    let (outputs, _state) = converse(&env, 8);
    let last = outputs.last().unwrap();
    assert_eq!(last.status.code(), Some(1), "{}", text(&last.stderr));
    let stderr = text(&last.stderr);
    assert!(stderr.starts_with("volcanic: the run failed: prompt is too long:"), "{stderr}");
    assert!(stderr.contains("/compact") && stderr.contains("/new"), "{stderr}");
}

#[test]
fn chat_compact_at_the_prompt_summarises_what_came_before() {
    let state = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut child = chat(state.path(), workspace.path(), &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"remember: the cat is Tom\nsecond\n/compact the cat\n/compact\nthird\n/exit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "echo: remember: the cat is Tom\necho: second\necho: third\n");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("· Compacted 2 older messages ("), "{stderr}");
    assert!(stderr.contains("· Nothing to compact yet ("), "{stderr}");
    let journal =
        std::fs::read_to_string(state.path().join("sessions/chat-main/session.jsonl")).unwrap();
    let record = journal.lines().find(|l| l.contains(r#""type":"compaction""#)).unwrap();
    assert!(record.contains(r#""instruction":"the cat""#), "{record}");
    assert!(record.contains("remember: the cat is Tom"), "the summary keeps the fact: {record}");
}

#[test]
fn chat_refuses_a_window_too_small_or_shares_that_make_no_sense() {
    let state = tempfile::tempdir().unwrap();
    for (env, want) in [
        (("Provider__ContextWindow", "100"), "Provider__ContextWindow: expected at least 2048"),
        (("Agent__Compaction__ThresholdPercent", "120"), "Agent__Compaction__ThresholdPercent"),
        (("Agent__Compaction__KeepRecentPercent", "90"), "Agent__Compaction__KeepRecentPercent"),
    ] {
        let out = chat(state.path(), state.path(), &[env]).arg("hi").output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{env:?}");
        assert!(text(&out.stderr).contains(want), "{env:?}: {}", text(&out.stderr));
    }
}
