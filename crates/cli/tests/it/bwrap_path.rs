//! Issue 36: the start-up sandbox check found `bwrap` with no `PATH` at all (so in `/bin` or
//! `/usr/bin`), the sessions with their own `PATH`: the check could say "sandboxed" while every
//! tool call then failed, or the reverse. Now the server resolves the program once, in its own
//! `PATH`, and the check and every session start that absolute path.

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;

use serde_json::json;

use crate::serve::{KEY, post, serve, stop, workspace_with_caller};

/// The real bwrap, found in the test's own `PATH`.
fn real_bwrap() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("bwrap"))
        .find(|candidate| candidate.is_file())
        .expect("bubblewrap is installed (scripts/test installs it)")
}

/// A program named bwrap in `dir` that appends a line to `log` and becomes the real one.
fn recording_wrapper(dir: &Path, log: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let wrapper = dir.join("bwrap");
    let script = format!(
        "#!/bin/sh\necho started >> '{}'\nexec '{}' \"$@\"\n",
        log.display(),
        real_bwrap().display()
    );
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

fn starts(log: &Path) -> usize {
    std::fs::read_to_string(log).map(|text| text.lines().count()).unwrap_or(0)
}

#[test]
fn the_start_up_check_and_a_callers_session_start_the_bwrap_of_the_servers_path() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let log = bin.path().join("started.log");
    let wrapper = recording_wrapper(bin.path(), &log);
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());

    let served = serve(ws.path(), state.path(), &[("PATH", &path)]);
    // The check ran before the server said it listens.
    assert_eq!(starts(&log), 1, "the start-up check did not start the bwrap of PATH");

    let command = "echo sandboxed-$((6 * 7))";
    let directive = format!(
        "faux> {}",
        json!({"steps": [{"tool": "bash", "args": {"command": command}}, {"text": "ran"}]})
    );
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m-bwrap", "role": "ROLE_USER", "parts": [{"text": directive}]}}});
    let (status, response) = post(&served.base, KEY, &body.to_string());
    assert_eq!(status, 200, "{response}");
    assert!(response.contains("TASK_STATE_COMPLETED"), "{response}");
    assert_eq!(starts(&log), 2, "the caller's session did not start the same bwrap");

    let (code, stderr) = stop(served);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("bwrap={}", wrapper.display())),
        "the resolved path is logged: {stderr}"
    );
}

/// The reverse: a `PATH` without bwrap, although `/usr/bin` has one. The check used to find it
/// there (no `PATH`: the C library's default) and report a sandbox every session then failed to
/// start; now callers get tier chat at start, with the reason logged.
#[test]
fn without_bwrap_in_the_servers_path_the_check_finds_none_either() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    // Only what the server itself needs to start: no bwrap.
    let path = empty.path().display().to_string();
    let served = serve(ws.path(), state.path(), &[("PATH", &path)]);
    let (code, stderr) = stop(served);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("bwrap is not installed (not found in PATH"), "{stderr}");
}

/// The owner's side: `volcanic chat`'s start-up check and its session's sandbox start the same
/// bwrap, the one of its `PATH`.
#[test]
fn the_owners_check_and_session_start_the_bwrap_of_the_path_too() {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let log = bin.path().join("started.log");
    recording_wrapper(bin.path(), &log);
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    let directive = format!(
        "faux> {}",
        json!({"steps": [{"tool": "bash", "args": {"command": "echo owner-$((6 * 7))"}}, {"text": "ran"}]})
    );
    let out = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", &path)
        .env("HOME", state.path())
        .args(["chat", "--faux", "--workspace"])
        .arg(ws.path())
        .arg("--state-dir")
        .arg(state.path())
        .arg(&directive)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("ran"), "{stderr}");
    assert_eq!(starts(&log), 2, "the check and the session start the bwrap of PATH: {stderr}");
}
