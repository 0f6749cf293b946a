//! One server per state folder (issue 36): a second `volcanic serve` or `volcanic telegram` on
//! the state folder of a running server stops before it touches anything, naming the running
//! one; the first server's control socket stays its own.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;

use crate::serve::{serve, stop, workspace_with_caller};

/// Runs `cmd` to its end, killing it and failing the test when it takes longer than `deadline`.
fn output_within(mut cmd: Command, deadline: Duration) -> Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > deadline {
            let _ = child.kill();
            panic!("the second server did not stop within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// `volcanic <args>` with a clean environment whose HOME is `home`.
fn volcanic(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::cargo_bin("volcanic").unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .args(args);
    cmd
}

/// `volcanic approvals` against `state`: reaches the running server (its listing does not say
/// that none runs).
fn assert_approvals_reach_the_server(ws: &Path, state: &Path) {
    let ws = ws.to_str().unwrap();
    let state = state.to_str().unwrap();
    let out = volcanic(Path::new(state), &["approvals", "--workspace", ws, "--state-dir", state])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("No request waits for your approval."), "{stdout}");
    assert!(!stdout.contains("No server is running"), "the first server is unreachable: {stdout}");
}

#[test]
fn a_second_server_on_the_same_state_folder_stops_naming_the_first_and_leaves_its_socket() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    let first = serve(ws.path(), state.path(), &[]);
    let socket = state.path().join("a2a/control.sock");
    assert!(socket.exists());
    assert_approvals_reach_the_server(ws.path(), state.path());
    let pid = first.child_id();

    // The same address too, as when the first one's port is fixed: before the lock, the second
    // took the control socket and then failed on "address in use".
    let address = first.base.strip_prefix("http://").unwrap().to_string();
    let ws_arg = ws.path().to_str().unwrap();
    let state_arg = state.path().to_str().unwrap();
    for listen in [address.as_str(), "127.0.0.1:0"] {
        let out = output_within(
            volcanic(
                state.path(),
                &[
                    "serve",
                    "--faux",
                    "--listen",
                    listen,
                    "--workspace",
                    ws_arg,
                    "--state-dir",
                    state_arg,
                ],
            ),
            Duration::from_secs(30),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        // First the harm: the first server's socket is still its own.
        assert!(socket.exists(), "the first server's control socket was removed: {stderr}");
        assert_approvals_reach_the_server(ws.path(), state.path());
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("another volcanic server (pid {pid}) is running")),
            "{stderr}"
        );
        assert!(stderr.contains("--state-dir"), "{stderr}");
        assert!(out.stdout.is_empty(), "the second must not say it listens");
    }

    // `volcanic telegram` takes the same lock, before it reads its own settings.
    let out = output_within(
        {
            let mut cmd = volcanic(state.path(), &["telegram", "--faux", "--state-dir", state_arg]);
            cmd.current_dir(ws.path());
            cmd
        },
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("(pid {pid}) is running")), "{stderr}");
    assert_approvals_reach_the_server(ws.path(), state.path());

    let (code, stderr) = stop(first);
    assert_eq!(code, 0, "{stderr}");
    // Released with the process: the next server starts on the same folder.
    let next = serve(ws.path(), state.path(), &[]);
    assert_approvals_reach_the_server(ws.path(), state.path());
    let (code, stderr) = stop(next);
    assert_eq!(code, 0, "{stderr}");
}
