//! Push delivery that survives a restart (issue 21, item 5): `volcanic serve` is killed with
//! SIGKILL while its webhook answers 503, restarted, and the webhook then gets exactly the
//! pending deliveries, in order per task; a webhook the URL check refuses after the restart gets
//! nothing. The logs name the webhook's host only.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use volcanic_test_support::callers::write_callers;

use crate::support::{Rest, listening_base};

const KEY: &str = "k_push_outbox_key_2101";
const TOKEN: &str = "tok-outbox-cli-2101";
/// A part of the webhook's path that must never reach a log.
const PATH_SECRET: &str = "hookpath-5e11";
/// Bounds every wait of these tests.
const DEADLINE: Duration = Duration::from_secs(60);

/// One request the webhook saw.
#[derive(Clone, Debug)]
struct Seen {
    token: Option<String>,
    body: Value,
    /// Whether it was answered 2xx (acknowledged).
    acknowledged: bool,
}

/// A webhook on 127.0.0.1 that answers 503 with `Retry-After: 600` while down, 200 when up.
#[derive(Clone)]
struct Webhook {
    url: String,
    up: Arc<Mutex<bool>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Webhook {
    async fn start() -> Webhook {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks/{PATH_SECRET}", listener.local_addr().unwrap());
        let hook = Webhook { url, up: Arc::default(), seen: Arc::default() };
        let serving = hook.clone();
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else { return };
                let hook = serving.clone();
                tokio::spawn(async move {
                    // A broken connection is the sender's problem, not the test's.
                    let _ =
                        tokio::time::timeout(Duration::from_secs(10), hook.answer(socket)).await;
                });
            }
        });
        hook
    }

    async fn answer(&self, mut socket: tokio::net::TcpStream) -> std::io::Result<()> {
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 8192];
        let head_end = loop {
            let n = socket.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buffer.extend_from_slice(&chunk[..n]);
            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
        let header = |name: &str| {
            head.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.eq_ignore_ascii_case(name).then(|| value.trim().to_string())
            })
        };
        let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        while buffer.len() < head_end + length {
            let n = socket.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            buffer.extend_from_slice(&chunk[..n]);
        }
        let body = serde_json::from_slice(&buffer[head_end..]).unwrap_or(Value::Null);
        let up = *self.up.lock().unwrap();
        self.seen.lock().unwrap().push(Seen {
            token: header("x-a2a-notification-token"),
            body,
            acknowledged: up,
        });
        let answer: &[u8] = if up {
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        } else {
            b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 600\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        };
        socket.write_all(answer).await
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The states acknowledged for `task_id`, in arrival order.
    fn acknowledged(&self, task_id: &str) -> Vec<String> {
        self.seen()
            .iter()
            .filter(|s| s.acknowledged && s.body["task"]["id"] == task_id)
            .map(|s| s.body["task"]["status"]["state"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Killed already, or the test failed: either way it must not outlive the test.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(workspace: &Path, state: &Path, log: &Path, private_urls: bool) -> Server {
    let stderr = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    let mut command = Command::cargo_bin("volcanic").unwrap();
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state)
        .env("RUST_LOG", "debug")
        .args(["serve", "--faux", "--listen", "127.0.0.1:0", "--workspace"])
        .arg(workspace)
        .arg("--state-dir")
        .arg(state)
        .stdout(Stdio::piped())
        .stderr(stderr);
    if private_urls {
        command.env("A2A__AllowPrivatePushUrls", "true");
    }
    let mut child = command.spawn().unwrap();
    let base = listening_base(&mut child, Duration::from_secs(30), Rest::Drain);
    Server { child, base }
}

fn kill9(server: &mut Server) {
    let status =
        Command::new("kill").arg("-KILL").arg(server.child.id().to_string()).status().unwrap();
    assert!(status.success());
    server.child.wait().unwrap();
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    write_callers(ws.path(), &[("pusher", KEY)]);
    ws
}

/// A blocking SendMessage registering `hook`; the task's id.
async fn send(base: &str, hook: &str, text: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"taskPushNotificationConfig": {"url": hook, "token": TOKEN}},
    }});
    let request = reqwest::Client::new()
        .post(format!("{base}/a2a"))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0")
        .json(&body)
        .timeout(Duration::from_secs(30));
    let answer: Value = request.send().await.unwrap().json().await.unwrap();
    assert_eq!(answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    answer["result"]["task"]["id"].as_str().unwrap().to_string()
}

/// Waits (bounded) until `done` holds.
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn outbox(state: &Path) -> PathBuf {
    state.join("a2a/push-outbox")
}

fn outbox_files(state: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(outbox(state))
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Three tasks sent while the webhook answers 503; returns once a delivery was tried and all six
/// (working, completed per task) are in the outbox.
async fn pending_deliveries(server: &Server, hook: &Webhook, state: &Path) -> Vec<String> {
    let mut tasks = Vec::new();
    for n in 0..3 {
        tasks.push(send(&server.base, &hook.url, &format!("task {n}")).await);
    }
    // Deliveries to one webhook go in order: the first one tried blocks the rest (it waits 600 s).
    wait_for("a first attempt", || !hook.seen().is_empty()).await;
    wait_for("six deliveries in the outbox", || outbox_files(state).len() == 6).await;
    tasks
}

/// The server's log without terminal colour codes.
fn stored_log(log: &Path, test: &str) -> String {
    let raw = std::fs::read_to_string(log).unwrap_or_default();
    let mut text = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            text.push(c);
        }
    }
    // scripts/test scans this for leaked secrets (docs/reliability.md, "Secrets in logs").
    if let Some(dir) = std::env::var_os("VOLCANIC_TEST_LOG_DIR") {
        let name = format!("serve-push-outbox-{test}-{}.log", std::process::id());
        std::fs::write(Path::new(&dir).join(name), &text).unwrap();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_with_pushes_pending_delivers_them_in_order_after_restart() {
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let log = state.path().join("serve.log");
    let hook = Webhook::start().await;

    let mut server = start(ws.path(), state.path(), &log, true);
    let tasks = pending_deliveries(&server, &hook, state.path()).await;
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&outbox(state.path())), 0o700);
        for file in outbox_files(state.path()) {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
    }
    kill9(&mut server);
    assert_eq!(outbox_files(state.path()).len(), 6, "the outbox after SIGKILL");

    *hook.up.lock().unwrap() = true;
    let server = start(ws.path(), state.path(), &log, true);
    wait_for("every pending delivery acknowledged", || {
        tasks.iter().all(|id| hook.acknowledged(id).len() >= 2)
    })
    .await;
    wait_for("an empty outbox", || outbox_files(state.path()).is_empty()).await;
    // Nothing was acknowledged before the kill, so nothing is delivered twice.
    for id in &tasks {
        assert_eq!(hook.acknowledged(id), ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"], "{id}");
    }
    assert!(hook.seen().iter().all(|s| s.token.as_deref() == Some(TOKEN)));
    drop(server);

    let logs = stored_log(&log, "restart");
    assert!(
        logs.lines().any(|l| l.contains("push notification attempt failed") && l.contains("host=127.0.0.1")),
        "no failed attempt logged with its host:\n{logs}"
    );
    for secret in [TOKEN, PATH_SECRET] {
        assert!(!logs.contains(secret), "{secret} reached the log");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pushes_to_a_url_refused_after_restart_are_not_delivered() {
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let log = state.path().join("serve.log");
    let hook = Webhook::start().await;

    let mut server = start(ws.path(), state.path(), &log, true);
    pending_deliveries(&server, &hook, state.path()).await;
    kill9(&mut server);
    let tried = hook.seen().len();

    // Restarted without A2A__AllowPrivatePushUrls: the guard refuses 127.0.0.1 now.
    *hook.up.lock().unwrap() = true;
    let server = start(ws.path(), state.path(), &log, false);
    wait_for("the refused deliveries to leave the outbox", || {
        outbox_files(state.path()).is_empty()
    })
    .await;
    drop(server);
    assert_eq!(hook.seen().len(), tried, "a refused webhook was posted to");
    let logs = stored_log(&log, "refused");
    let refusals =
        logs.lines().filter(|l| l.contains("push webhook refused by the URL check")).count();
    assert_eq!(refusals, 6, "{logs}");
    for secret in [TOKEN, PATH_SECRET] {
        assert!(!logs.contains(secret), "{secret} reached the log");
    }
}
