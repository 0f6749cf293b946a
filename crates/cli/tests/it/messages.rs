//! What the binary says where it used to say nothing or the wrong thing (issue 36, "No silent
//! surprises"): the start with no callers, `volcanic usage` outside a workspace, empty chat
//! arguments, `approvals` with a state folder that does not exist, misspelt settings, and plain
//! keys on an address other machines can reach.

use std::path::Path;
use std::process::{Command, Output};

use assert_cmd::cargo::CommandCargoExt;

use crate::serve::{serve, stop, workspace_with_caller};

/// `volcanic <args>` in `cwd`, with a clean environment (HOME is `cwd`) plus `env`.
fn volcanic(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::cargo_bin("volcanic").unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", cwd)
        .current_dir(cwd)
        .args(args);
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.output().unwrap()
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn serve_with_no_callers_says_there_are_none_and_how_to_add_one() {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let served = serve(ws.path(), state.path(), &[]);
    let (code, stderr) = stop(served);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("no callers yet, so no agent can call it"), "{stderr}");
    assert!(
        stderr.contains(&format!("volcanic callers add NAME --workspace {}", ws.path().display())),
        "{stderr}"
    );

    // A file the server cannot use is not "no callers yet".
    std::fs::create_dir_all(ws.path().join(".volcanic/a2a")).unwrap();
    std::fs::write(ws.path().join(".volcanic/a2a/callers.json"), "[{").unwrap();
    let served = serve(ws.path(), state.path(), &[]);
    let (code, stderr) = stop(served);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("callers.json has no caller the server can use"), "{stderr}");
    assert!(stderr.contains("volcanic callers list --workspace"), "{stderr}");

    let ws = workspace_with_caller();
    let served = serve(ws.path(), state.path(), &[]);
    let (code, stderr) = stop(served);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("; 1 caller in .volcanic/a2a/callers.json"), "{stderr}");
    assert!(!stderr.contains("no callers yet"), "{stderr}");
}

#[test]
fn usage_outside_a_workspace_says_so_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let out = volcanic(dir.path(), &["usage", "--state-dir", state.to_str().unwrap()], &[]);
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not an A2A workspace"), "{stderr}");
    assert!(stderr.contains("--workspace"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(!state.exists(), "usage created the state folder");

    // A workspace with callers reports, usage or not.
    let ws = workspace_with_caller();
    let out = volcanic(ws.path(), &["usage", "--state-dir", state.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("tester: 0 requests"));
}

#[test]
fn chat_refuses_an_empty_session_name_or_message_with_exit_2() {
    let ws = tempfile::tempdir().unwrap();
    for (args, said) in [
        (&["chat", "--faux", "--session", "", "hello"][..], "--session is empty"),
        (&["chat", "--faux", "--session", "  ", "hello"], "--session is empty"),
        (&["chat", "--faux", ""], "the message is empty"),
        (&["chat", "--faux", " \n "], "the message is empty"),
    ] {
        let out = volcanic(ws.path(), args, &[]);
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing was sent");
    }
    assert!(!ws.path().join(".local").exists(), "nothing was written");
}

#[test]
fn approvals_with_a_state_folder_that_does_not_exist_says_so_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-state");
    for args in [
        &["approvals", "--state-dir", missing.to_str().unwrap()][..],
        &["approve", "abc", "--state-dir", missing.to_str().unwrap()],
        &["deny", "abc", "--state-dir", missing.to_str().unwrap()],
    ] {
        let out = volcanic(dir.path(), args, &[]);
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("no such folder, so no server has run with it"), "{stderr}");
        assert!(!missing.exists(), "{args:?} created the state folder");
    }
}

#[test]
fn misspelt_settings_stop_every_command_with_exit_2_naming_the_nearest_key() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("volcanic.toml"), "[agent]\nmax_turn = 3\n").unwrap();
    let out = volcanic(ws.path(), &["chat", "--faux", "hello"], &[]);
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown key max_turn in [agent]; did you mean max_turns?"),
        "{stderr}"
    );
    std::fs::remove_file(ws.path().join("volcanic.toml")).unwrap();

    let out = volcanic(ws.path(), &["chat", "--faux", "hello"], &[("Agent__MaxTurn", "3")]);
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("did you mean Agent__MaxTurns?"), "{stderr}");

    // Another program's section is not ours.
    let out = volcanic(ws.path(), &["chat", "--faux", "hello"], &[("Logging__Level", "debug")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

#[test]
fn plain_keys_served_on_an_open_address_are_named_at_start() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    // Loopback: no warning.
    let served = serve(ws.path(), state.path(), &[]);
    let (code, stderr) = stop(served);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("plain keys"), "{stderr}");

    // All addresses: the caller with a plain key is named (this test only binds, it sends
    // nothing over the network).
    let served = crate::serve::serve_on(ws.path(), state.path(), "0.0.0.0:0");
    let (code, stderr) = stop(served);
    assert_eq!(code, 0, "{stderr}");
    let warning = stderr.lines().find(|line| line.contains("plain keys")).unwrap_or_default();
    assert!(warning.contains("callers=tester"), "{stderr}");
    assert!(warning.contains("volcanic callers add"), "{warning}");
}
