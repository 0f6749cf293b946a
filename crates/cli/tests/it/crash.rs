//! Crash consistency: `volcanic serve` killed with SIGKILL at random points during bursts of sends,
//! streams, cancels, input requests and push-config writes, restarted each time. After every
//! restart: every task file parses, no temp files are left, every acknowledged task is still there
//! in a state consistent with what the caller was told, working tasks read as failed "server
//! restarted", input-required tasks continue, and conversations resume from their journals.
//!
//! `VOLCANIC_CRASH_KILLS` sets the number of kills (default 50); `VOLCANIC_CRASH_SEED` replays a
//! run (the seed is printed on failure).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};
use volcanic_test_support::callers::write_callers;
use volcanic_test_support::rng::{Rng, seed_from_env};

use crate::support::{Rest, listening_base};

const KEYS: [(&str, &str); 2] =
    [("crash-alpha", "k_crash_alpha_key_0101"), ("crash-beta", "k_crash_beta_key_0202")];
/// Bounds every single request of the test.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// What a caller was told about a task, and so what must hold after any crash.
#[derive(Clone, Debug, PartialEq)]
enum Told {
    /// The task exists (a stream's first event, or a send that answered a non-final state).
    Exists,
    Completed,
    Canceled,
    InputRequired,
    /// Read back as failed after a restart.
    Failed,
}

#[derive(Clone, Debug)]
struct Ack {
    caller: usize,
    context: String,
    told: Told,
    /// Push config ids acknowledged as created.
    configs: Vec<String>,
}

#[derive(Default)]
struct Ledger {
    tasks: HashMap<String, Ack>,
    /// What the checks saw, so the test can show it exercised every path it claims to.
    recovered: usize,
    continued: usize,
    resumed: usize,
}

impl Ledger {
    fn record(&mut self, task: &Value, caller: usize) {
        let (Some(id), Some(context)) = (task["id"].as_str(), task["contextId"].as_str()) else {
            return;
        };
        let told = match task["status"]["state"].as_str() {
            Some("TASK_STATE_COMPLETED") => Told::Completed,
            Some("TASK_STATE_CANCELED") => Told::Canceled,
            Some("TASK_STATE_INPUT_REQUIRED") => Told::InputRequired,
            Some("TASK_STATE_FAILED") => Told::Failed,
            _ => Told::Exists,
        };
        let entry = self.tasks.entry(id.to_string()).or_insert_with(|| Ack {
            caller,
            context: context.to_string(),
            told: Told::Exists,
            configs: Vec::new(),
        });
        assert_eq!(entry.caller, caller, "task {id} answered to two callers");
        // A later, more final answer replaces an earlier one; an input-required task that was
        // continued may go back to "exists" while its new run works.
        if told != Told::Exists || entry.told == Told::InputRequired {
            entry.told = told;
        }
    }
}

struct Server {
    child: Child,
    base: String,
}

fn start(workspace: &Path, state: &Path, log: &Path) -> Server {
    let stderr = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    let mut child = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state)
        .env("RUST_LOG", "warn")
        .env("A2A__AllowPrivatePushUrls", "true")
        .args(["serve", "--faux", "--listen", "127.0.0.1:0", "--workspace"])
        .arg(workspace)
        .arg("--state-dir")
        .arg(state)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let base = listening_base(&mut child, Duration::from_secs(30), Rest::Drain);
    Server { child, base }
}

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn rpc(&self, caller: usize, method: &str, params: Value) -> Result<Value, String> {
        let request = self
            .http
            .post(format!("{}/a2a", self.base))
            .header("X-API-Key", KEYS[caller].1)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        let response = tokio::time::timeout(REQUEST_TIMEOUT, request.send())
            .await
            .map_err(|_| "timeout".to_string())?
            .map_err(|e| e.to_string())?;
        let body = tokio::time::timeout(REQUEST_TIMEOUT, response.json::<Value>())
            .await
            .map_err(|_| "timeout".to_string())?
            .map_err(|e| e.to_string())?;
        Ok(body)
    }

    /// Streams a send, recording every task state seen, until the stream ends or breaks.
    async fn stream(&self, caller: usize, params: Value, ledger: &Mutex<Ledger>) {
        let request = self
            .http
            .post(format!("{}/a2a", self.base))
            .header("X-API-Key", KEYS[caller].1)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}));
        let Ok(Ok(response)) = tokio::time::timeout(REQUEST_TIMEOUT, request.send()).await else {
            return;
        };
        let mut events = response.bytes_stream().eventsource();
        let mut current: Option<(String, String)> = None;
        while let Ok(Some(Ok(event))) = tokio::time::timeout(REQUEST_TIMEOUT, events.next()).await {
            let Ok(data) = serde_json::from_str::<Value>(&event.data) else { return };
            let result = &data["result"];
            if result["task"].is_object() {
                let task = &result["task"];
                current = Some((
                    task["id"].as_str().unwrap_or_default().to_string(),
                    task["contextId"].as_str().unwrap_or_default().to_string(),
                ));
                ledger.lock().unwrap().record(task, caller);
            } else if let Some(update) = result.get("statusUpdate")
                && let Some((id, context)) = &current
            {
                let task = json!({"id": id, "contextId": context, "status": update["status"]});
                ledger.lock().unwrap().record(&task, caller);
            }
        }
    }
}

fn send_params(text: &str, task: Option<&str>, context: Option<&str>) -> Value {
    let mut message = json!({
        "messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    });
    if let Some(task) = task {
        message["taskId"] = json!(task);
    }
    if let Some(context) = context {
        message["contextId"] = json!(context);
    }
    json!({"message": message})
}

fn slow_answer(rng: &mut Rng) -> String {
    let delay = 5 + rng.below(40);
    let steps = json!({"steps": [{"text": "a slow answer in small pieces", "chunk": 3, "delay_ms": delay}]});
    format!("faux> {steps}")
}

fn ask_question() -> String {
    let steps = json!({"steps": [{"tool": "request_input", "args": {"question": "which one?"}}]});
    format!("faux> {steps}")
}

/// One client's burst: random operations until the server dies (or the burst is over).
async fn burst(client: Client, ledger: Arc<Mutex<Ledger>>, mut rng: Rng, hook: String) {
    for _ in 0..400 {
        let caller = rng.index(2);
        let known: Vec<(String, Ack)> = {
            let ledger = ledger.lock().unwrap();
            ledger
                .tasks
                .iter()
                .filter(|(_, a)| a.caller == caller)
                .map(|(id, a)| (id.clone(), a.clone()))
                .collect()
        };
        let pick = |rng: &mut Rng| -> Option<(String, Ack)> {
            (!known.is_empty()).then(|| known[rng.index(known.len())].clone())
        };
        let outcome = match rng.below(8) {
            0 | 1 => {
                let text =
                    if rng.below(2) == 0 { "hello".to_string() } else { slow_answer(&mut rng) };
                client.rpc(caller, "SendMessage", send_params(&text, None, None)).await
            }
            2 => {
                client
                    .stream(caller, send_params(&slow_answer(&mut rng), None, None), &ledger)
                    .await;
                continue;
            }
            3 => client.rpc(caller, "SendMessage", send_params(&ask_question(), None, None)).await,
            4 => {
                // Cancel a task this caller last saw working, if any.
                let working: Vec<&String> =
                    known.iter().filter(|(_, a)| a.told == Told::Exists).map(|(i, _)| i).collect();
                if working.is_empty() {
                    continue;
                }
                let id = working[rng.index(working.len())];
                client.rpc(caller, "CancelTask", json!({"id": id})).await
            }
            5 => match pick(&mut rng) {
                Some((id, _)) => {
                    let config = format!("c{}", rng.below(1_000_000));
                    let created = client
                        .rpc(
                            caller,
                            "CreateTaskPushNotificationConfig",
                            json!({"taskId": id, "id": config, "url": hook, "token": "crash-push-token"}),
                        )
                        .await;
                    if let Ok(body) = &created
                        && body["result"]["id"] == json!(config)
                        && let Some(ack) = ledger.lock().unwrap().tasks.get_mut(&id)
                    {
                        ack.configs.push(config);
                    }
                    continue;
                }
                None => continue,
            },
            6 => match pick(&mut rng) {
                // Continue an input-required task, or talk again in a finished task's context.
                Some((id, ack)) if ack.told == Told::InputRequired => {
                    client
                        .rpc(caller, "SendMessage", send_params("the first", Some(&id), None))
                        .await
                }
                Some((_, ack)) if ack.told == Told::Completed => {
                    let params = send_params("and again", None, Some(&ack.context));
                    client.rpc(caller, "SendMessage", params).await
                }
                _ => continue,
            },
            _ => {
                let streamed = send_params(&slow_answer(&mut rng), None, None);
                let request = client.rpc(caller, "SendStreamingMessage", streamed);
                // A stream abandoned after its start: the client goes away, the run goes on.
                let _ = tokio::time::timeout(Duration::from_millis(rng.below(30)), request).await;
                continue;
            }
        };
        match outcome {
            Ok(body) => {
                if let Some(task) = body["result"].get("task") {
                    ledger.lock().unwrap().record(task, caller);
                } else if body["result"]["id"].is_string() {
                    // CancelTask answers the task itself.
                    ledger.lock().unwrap().record(&body["result"], caller);
                }
            }
            // The server died under us: this burst is over.
            Err(_) => return,
        }
    }
}

/// A webhook that accepts everything, so push deliveries have somewhere to go.
async fn webhook() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buffer = vec![0u8; 64 * 1024];
                let _ =
                    tokio::time::timeout(Duration::from_secs(5), socket.read(&mut buffer)).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    format!("http://{address}/hook")
}

fn tasks_dir(workspace: &Path) -> PathBuf {
    workspace.join(".volcanic/a2a/tasks")
}

/// Every file under `dir` (recursively) whose name starts with `.tmp` and that was last written
/// before `before`: the restarted server's own writes in flight (its usage flusher's) are not
/// left over, the killed one's are.
fn temp_files(dir: &Path, before: std::time::SystemTime) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(temp_files(&path, before));
        } else if entry.file_name().to_string_lossy().starts_with(".tmp")
            && entry.metadata().and_then(|m| m.modified()).is_ok_and(|m| m < before)
        {
            found.push(path);
        }
    }
    found
}

fn check_files(workspace: &Path, state: &Path, restarted: std::time::SystemTime, seed: u64) {
    if let Ok(entries) = std::fs::read_dir(tasks_dir(workspace)) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if !name.ends_with(".json") || name.starts_with('.') {
                continue;
            }
            let text = std::fs::read_to_string(entry.path()).unwrap();
            let task: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("seed {seed}: task file {name} does not parse: {e}"));
            assert!(task["id"].is_string(), "seed {seed}: {name} has no id");
        }
    }
    let leftovers: Vec<PathBuf> = [temp_files(workspace, restarted), temp_files(state, restarted)]
        .into_iter()
        .flatten()
        .collect();
    assert!(leftovers.is_empty(), "seed {seed}: temp files left after restart: {leftovers:?}");
}

/// Checks every acknowledged task against the restarted server.
async fn check_tasks(client: &Client, ledger: &Mutex<Ledger>, seed: u64) {
    let tasks: Vec<(String, Ack)> =
        ledger.lock().unwrap().tasks.iter().map(|(i, a)| (i.clone(), a.clone())).collect();
    for (id, ack) in tasks {
        let body = client.rpc(ack.caller, "GetTask", json!({"id": id})).await.unwrap();
        let task = &body["result"];
        assert!(task.is_object(), "seed {seed}: acknowledged task {id} is gone: {body}");
        let state = task["status"]["state"].as_str().unwrap_or_default().to_string();
        let final_state = matches!(
            state.as_str(),
            "TASK_STATE_COMPLETED" | "TASK_STATE_FAILED" | "TASK_STATE_CANCELED"
        );
        match ack.told {
            Told::Completed => assert_eq!(state, "TASK_STATE_COMPLETED", "seed {seed}: {id}"),
            Told::Canceled => assert_eq!(state, "TASK_STATE_CANCELED", "seed {seed}: {id}"),
            Told::Failed => assert_eq!(state, "TASK_STATE_FAILED", "seed {seed}: {id}"),
            // Continued input-required tasks may have moved on; otherwise they stay.
            Told::InputRequired => assert!(
                state == "TASK_STATE_INPUT_REQUIRED" || final_state,
                "seed {seed}: input-required task {id} reads {state}"
            ),
            Told::Exists => assert!(
                final_state || state == "TASK_STATE_INPUT_REQUIRED",
                "seed {seed}: task {id} still reads {state} after a restart"
            ),
        }
        if state == "TASK_STATE_FAILED" && ack.told == Told::Exists {
            let text = task["status"]["message"]["parts"][0]["text"].as_str().unwrap_or_default();
            assert_eq!(text, "server restarted", "seed {seed}: {id} failed for another reason");
            ledger.lock().unwrap().recovered += 1;
        }
        for config in &ack.configs {
            let got = client
                .rpc(
                    ack.caller,
                    "GetTaskPushNotificationConfig",
                    json!({"taskId": id, "id": config}),
                )
                .await
                .unwrap();
            assert_eq!(got["result"]["id"], json!(config), "seed {seed}: push config lost: {got}");
        }
        ledger.lock().unwrap().tasks.get_mut(&id).unwrap().told = match state.as_str() {
            "TASK_STATE_COMPLETED" => Told::Completed,
            "TASK_STATE_CANCELED" => Told::Canceled,
            "TASK_STATE_INPUT_REQUIRED" => Told::InputRequired,
            "TASK_STATE_FAILED" => Told::Failed,
            _ => Told::Exists,
        };
    }
}

/// After a restart: one input-required task continues, and one finished conversation resumes.
async fn check_continuations(client: &Client, ledger: &Mutex<Ledger>, seed: u64) {
    let (waiting, finished) = {
        let ledger = ledger.lock().unwrap();
        let waiting = ledger
            .tasks
            .iter()
            .find(|(_, a)| a.told == Told::InputRequired)
            .map(|(i, a)| (i.clone(), a.clone()));
        let finished = ledger
            .tasks
            .iter()
            .find(|(_, a)| a.told == Told::Completed)
            .map(|(i, a)| (i.clone(), a.clone()));
        (waiting, finished)
    };
    if let Some((id, ack)) = waiting {
        let body = client
            .rpc(ack.caller, "SendMessage", send_params("the second", Some(&id), None))
            .await
            .unwrap();
        let task = &body["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "seed {seed}: {body}");
        assert_eq!(task["id"], json!(id), "seed {seed}: continuation opened another task");
        let mut ledger = ledger.lock().unwrap();
        ledger.record(task, ack.caller);
        ledger.continued += 1;
    }
    if let Some((_, ack)) = finished {
        let body = client
            .rpc(ack.caller, "SendMessage", send_params("still there?", None, Some(&ack.context)))
            .await
            .unwrap();
        let task = &body["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "seed {seed}: {body}");
        let answer = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap_or_default();
        assert!(answer.contains("still there?"), "seed {seed}: resumed context answered {answer}");
        let mut ledger = ledger.lock().unwrap();
        ledger.record(task, ack.caller);
        ledger.resumed += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_during_bursts_loses_nothing_acknowledged() {
    let kills: usize =
        std::env::var("VOLCANIC_CRASH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let seed = seed_from_env("VOLCANIC_CRASH_SEED", 7);
    let mut rng = Rng::new(seed);
    let workspace = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("server.log");
    write_callers(workspace.path(), &KEYS);
    let hook = webhook().await;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    let mut server = start(workspace.path(), state.path(), &log);
    for round in 0..kills {
        let client = Client { http: http.clone(), base: server.base.clone() };
        let bursts: Vec<_> = (0..6)
            .map(|i| {
                let burst_rng = Rng::new(rng.next_u64() | 1 | (i + 1));
                tokio::spawn(burst(client.clone(), ledger.clone(), burst_rng, hook.clone()))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(30 + rng.below(400))).await;
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        for handle in bursts {
            // Every request is bounded, and a dead server fails them at once.
            tokio::time::timeout(Duration::from_secs(60), handle).await.unwrap().unwrap();
        }

        let restarted = std::time::SystemTime::now();
        server = start(workspace.path(), state.path(), &log);
        let client = Client { http: http.clone(), base: server.base.clone() };
        check_tasks(&client, &ledger, seed).await;
        check_files(workspace.path(), state.path(), restarted, seed);
        if round % 5 == 0 {
            check_continuations(&client, &ledger, seed).await;
        }
    }
    let client = Client { http: http.clone(), base: server.base.clone() };
    check_tasks(&client, &ledger, seed).await;
    let _ = Command::new("kill").arg("-TERM").arg(server.child.id().to_string()).status();
    let _ = server.child.wait();
    let ledger = ledger.lock().unwrap();
    let count = |told: Told| ledger.tasks.values().filter(|a| a.told == told).count();
    let configs: usize = ledger.tasks.values().map(|a| a.configs.len()).sum();
    let summary = format!(
        "seed {seed}, {kills} kills: {} tasks acknowledged ({} completed, {} canceled, {} input-required), {configs} push configs, {} recovered as restarted, {} continued, {} resumed",
        ledger.tasks.len(),
        count(Told::Completed),
        count(Told::Canceled),
        count(Told::InputRequired),
        ledger.recovered,
        ledger.continued,
        ledger.resumed,
    );
    println!("{summary}");
    // The run must have exercised what it claims to check (only the default, full-length run).
    if kills >= 50 {
        assert!(ledger.tasks.len() >= kills, "too few tasks: {summary}");
        assert!(ledger.recovered > 0 && configs > 0 && count(Told::Canceled) > 0, "{summary}");
        assert!(ledger.continued > 0 && ledger.resumed > 0, "{summary}");
    }
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!log.contains("panicked"), "seed {seed}: the server panicked:\n{log}");
}
