//! `volcanic serve` as a real child process: the listening line, a real request, SIGTERM, and no
//! key in the logs.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::json;
use volcanic_test_support::callers::write_callers;
use volcanic_test_support::raw_http::{exchange, post_a2a, status_of};

use crate::support::{Rest, listening_base};

pub(crate) const KEY: &str = "k_serve_test_key_77";
/// Bounds every raw request of these tests.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// A blocking SendMessage of one text part (JSON-RPC, A2A 1.0).
pub(crate) const SEND: &str = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}"#;

pub(crate) struct Served {
    child: Child,
    pub(crate) base: String,
}

pub(crate) fn serve(workspace: &Path, state: &Path, extra_env: &[(&str, &str)]) -> Served {
    spawn_serve(Command::cargo_bin("volcanic").unwrap(), workspace, state, extra_env)
}

/// `volcanic serve` through `cmd`: the binary itself, or a program that runs it.
fn spawn_serve(
    mut cmd: Command,
    workspace: &Path,
    state: &Path,
    extra_env: &[(&str, &str)],
) -> Served {
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state)
        .env("RUST_LOG", "debug")
        .args(["serve", "--faux", "--listen", "127.0.0.1:0", "--workspace"])
        .arg(workspace)
        .arg("--state-dir")
        .arg(state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let base = listening_base(&mut child, Duration::from_secs(30), Rest::Close);
    Served { child, base }
}

pub(crate) fn workspace_with_caller() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    write_callers(ws.path(), &[("tester", KEY)]);
    ws
}

/// A JSON-RPC request over std (see [`post_a2a`]), so these tests need no async runtime.
pub(crate) fn post(base: &str, key: &str, body: &str) -> (u16, String) {
    post_a2a(base, key, body, REQUEST_TIMEOUT)
}

pub(crate) fn stop(mut served: Served) -> (i32, String) {
    let status =
        Command::new("kill").arg("-TERM").arg(served.child.id().to_string()).status().unwrap();
    assert!(status.success());
    let mut stderr = String::new();
    served.child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let code = served.child.wait().unwrap().code().unwrap_or(-1);
    // scripts/test scans this for leaked keys (docs/reliability.md, "Secrets in logs").
    if let Some(dir) = std::env::var_os("VOLCANIC_TEST_LOG_DIR") {
        let name = format!("serve-{}.log", served.child.id());
        std::fs::write(Path::new(&dir).join(name), &stderr).unwrap();
    }
    (code, stderr)
}

#[test]
fn serve_prints_listening_line_answers_and_exits_0_on_sigterm() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    let served = serve(ws.path(), state.path(), &[]);
    assert!(served.base.starts_with("http://127.0.0.1:"), "{}", served.base);
    let body = SEND;
    let (status, response) = post(&served.base, KEY, body);
    assert_eq!(status, 200);
    assert!(response.contains("TASK_STATE_COMPLETED"), "{response}");
    let (status, _) = post(&served.base, "wrong-key", body);
    assert_eq!(status, 401);
    let (code, stderr) = stop(served);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("a2a task"), "the task-end line is logged: {stderr}");
    assert!(!stderr.contains(KEY), "a caller key reached the log");
}

/// The nice value (field 19) and scheduling policy (field 41) of every thread of process `pid`
/// that is still there when its `stat` is read.
#[cfg(target_os = "linux")]
fn thread_scheduling(pid: u32) -> Vec<(i32, u32)> {
    let field = |stat: &str, n: usize| -> String {
        // Fields after the command name (which may hold spaces), the 3rd field of the line first.
        stat.rsplit_once(')').unwrap().1.split_whitespace().nth(n - 3).unwrap().to_string()
    };
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        // A blocking-pool thread may end between the listing and the read.
        let Ok(stat) = std::fs::read_to_string(task.unwrap().path().join("stat")) else { continue };
        threads.push((field(&stat, 19).parse().unwrap(), field(&stat, 41).parse().unwrap()));
    }
    threads
}

/// Serves through `cmd` (a program that runs the binary), sends one message so that the blocking
/// pool starts a thread, and returns every thread's (nice, policy).
#[cfg(target_os = "linux")]
fn scheduling_when_served_through(mut cmd: Command) -> Vec<(i32, u32)> {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    cmd.arg(Command::cargo_bin("volcanic").unwrap().get_program());
    let served = spawn_serve(cmd, ws.path(), state.path(), &[]);
    let body = SEND;
    let (status, _) = post(&served.base, KEY, body);
    assert_eq!(status, 200);
    let threads = thread_scheduling(served.child.id());
    let (code, stderr) = stop(served);
    assert_eq!(code, 0, "{stderr}");
    // The main thread, the async workers (one per core) and a blocking thread at least.
    let workers = std::thread::available_parallelism().map_or(1, usize::from);
    assert!(threads.len() > 1 + workers, "{threads:?}");
    threads
}

/// Every thread of the server runs under `SCHED_BATCH` (docs/performance.md, "Scheduling"), with
/// the nice value it was started with.
#[cfg(target_os = "linux")]
#[test]
fn serve_threads_run_under_sched_batch_with_their_nice_value_kept() {
    const SCHED_BATCH: u32 = 3;
    let own = thread_scheduling(std::process::id());
    let own_nice = own.first().unwrap().0;
    let mut niced = Command::new("nice");
    niced.args(["-n", "4"]);
    let threads = scheduling_when_served_through(niced);
    let nice = (own_nice + 4).min(19);
    assert!(threads.iter().all(|&t| t == (nice, SCHED_BATCH)), "{threads:?}");
}

/// A policy chosen by whoever started the server is kept: here `SCHED_IDLE`, which
/// `SCHED_BATCH` would outrank.
#[cfg(target_os = "linux")]
#[test]
fn serve_keeps_a_scheduling_policy_it_was_started_with() {
    const SCHED_IDLE: u32 = 5;
    let mut idle = Command::new("chrt");
    idle.args(["--idle", "0"]);
    let threads = scheduling_when_served_through(idle);
    assert!(threads.iter().all(|&(_, policy)| policy == SCHED_IDLE), "{threads:?}");
}

/// `GET path` over std: the status and the whole response.
fn get(base: &str, path: &str) -> (u16, String) {
    let address = base.strip_prefix("http://").unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    let response = exchange(address, &request, REQUEST_TIMEOUT).unwrap();
    (status_of(&response).unwrap(), response)
}

/// [`stop`], failing the test when the server has not exited within `deadline` (it is then
/// killed, so a regression cannot leave it behind).
fn stop_within(served: Served, deadline: Duration) -> (i32, String) {
    let pid = served.child.id().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(stop(served)));
    match rx.recv_timeout(deadline) {
        Ok(stopped) => stopped,
        Err(_) => {
            // Best effort: the test fails either way.
            let _ = Command::new("kill").arg("-KILL").arg(&pid).status();
            panic!("volcanic serve did not exit within {deadline:?} of SIGTERM");
        }
    }
}

/// Kills the server if the test fails before stopping it, and releases readers blocked on the
/// FIFO (opening it for writing without blocking), so a regression fails instead of hanging.
struct Cleanup {
    pid: u32,
    fifo: std::path::PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt;
        let nonblock = i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap();
        // ENXIO when nobody waits to read it, the normal case.
        let _ = std::fs::File::options().write(true).custom_flags(nonblock).open(&self.fifo);
        if std::thread::panicking() {
            let _ = Command::new("kill").arg("-KILL").arg(self.pid.to_string()).status();
        }
    }
}

#[test]
fn serve_with_a_fifo_callers_file_answers_and_exits_0_on_sigterm() {
    // Issue 17: after `rm callers.json && mkfifo callers.json` every request hung, the public
    // card too, and SIGTERM was ignored.
    let ws = workspace_with_caller();
    let callers = ws.path().join(".volcanic/a2a/callers.json");
    std::fs::remove_file(&callers).unwrap();
    assert!(Command::new("mkfifo").arg(&callers).status().unwrap().success());
    let state = tempfile::tempdir().unwrap();
    let served = serve(ws.path(), state.path(), &[]);
    let _cleanup = Cleanup { pid: served.child.id(), fifo: callers.clone() };
    // More authenticated requests than the server has async workers: each is answered, as if
    // there were no callers (each request is bounded by the client's 20 s read timeout).
    for _ in 0..4 {
        assert_eq!(post(&served.base, KEY, SEND).0, 401);
    }
    let (status, card) = get(&served.base, "/.well-known/agent-card.json");
    assert_eq!(status, 200, "{card}");
    let (code, stderr) = stop_within(served, Duration::from_secs(20));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("file is not a regular file"), "{stderr}");
}

/// A request waiting for the owner's approval keeps a timer of up to `A2A__ApprovalTimeout`
/// (24 h by default); it must end with the server. Before the service had a shutdown token the
/// timer held the exit for the whole 10 s grace and the log said "runs still settling".
#[test]
fn serve_with_a_pending_approval_exits_0_on_sigterm_without_waiting_its_grace() {
    let ws = tempfile::tempdir().unwrap();
    let callers = json!([{"name": "tester", "key": KEY, "approval": "every-task"}]);
    std::fs::create_dir_all(ws.path().join(".volcanic/a2a")).unwrap();
    std::fs::write(ws.path().join(".volcanic/a2a/callers.json"), callers.to_string()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let served = serve(ws.path(), state.path(), &[]);
    let (status, response) = post(&served.base, KEY, SEND);
    assert_eq!(status, 200, "{response}");
    assert!(response.contains("TASK_STATE_AUTH_REQUIRED"), "{response}");
    let asked = std::time::Instant::now();
    let (code, stderr) = stop_within(served, Duration::from_secs(30));
    let took = asked.elapsed();
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("still settling"), "{stderr}");
    assert!(took < Duration::from_secs(5), "the exit took {took:?}: {stderr}");
    // The request outlives the process: it is on file for the next start.
    let records = std::fs::read_dir(state.path().join("a2a/approvals")).unwrap().count();
    assert_eq!(records, 2, "the request and its message are kept");
}

#[test]
fn serve_without_provider_exits_2() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state.path())
        .args(["serve", "--listen", "127.0.0.1:0", "--workspace"])
        .arg(ws.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--faux"));
}

#[test]
fn serve_bad_a2a_config_exits_2_naming_the_key() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("A2A__MaxHops", "three")
        .args(["serve", "--faux", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state.path())
        .arg("--workspace")
        .arg(ws.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a2a.max_hops"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn serve_refuses_to_hand_callers_a_variable_named_like_a_credential() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("A2A__Sandbox__AllowEnv", "TOOL_MODE, SMTP_PASS")
        .args(["serve", "--faux", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state.path())
        .arg("--workspace")
        .arg(ws.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("A2A__Sandbox__AllowEnv names SMTP_PASS"), "{stderr}");
}

#[test]
fn serve_with_a_spending_cap_but_no_price_for_the_model_exits_2_naming_both_keys() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    let serve = |prices: &str| {
        Command::cargo_bin("volcanic")
            .unwrap()
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("A2A__Limits__UsdPerDay", "5")
            .env("A2A__Prices", prices)
            .args(["serve", "--faux", "--listen", "127.0.0.1:0", "--state-dir"])
            .arg(state.path())
            .arg("--workspace")
            .arg(ws.path())
            .output()
            .unwrap()
    };
    let out = serve("claude-sonnet-4-5=3/15");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("A2A__Limits__UsdPerDay") && stderr.contains("\"faux\""), "{stderr}");
    let out = serve("faux=3/x");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("MODEL=INPUT/OUTPUT"), "{stderr}");
}

#[test]
fn serve_with_an_unreadable_or_invalid_ca_file_stops_naming_it() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    let not_pem = state.path().join("not-a-ca.pem");
    std::fs::write(&not_pem, "no certificate here\n").unwrap();
    for ca in [state.path().join("missing.pem"), not_pem] {
        let out = Command::cargo_bin("volcanic")
            .unwrap()
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("A2A__ExtraCaCertificates", &ca)
            .args(["serve", "--faux", "--listen", "127.0.0.1:0", "--state-dir"])
            .arg(state.path())
            .arg("--workspace")
            .arg(ws.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{stderr}");
        assert!(stderr.contains("A2A__ExtraCaCertificates"), "{stderr}");
        assert!(stderr.contains(&ca.display().to_string()), "{stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"));
    }
}
