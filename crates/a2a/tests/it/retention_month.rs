//! A month of A2A traffic with retention on, on a controlled clock (docs/performance.md,
//! "Retention"): the test moves the server's clock by hand. Each simulated day it sends the
//! day's tasks through the real server over 127.0.0.1 (a new conversation each time, every tenth
//! with a file, every twentieth continuing the caller's last conversation), then moves the
//! clock one day on and has a retention round run to its end ([`A2aServer::retention_round`]),
//! and then looks. Tasks are kept 7 days and a round runs once a day, so what is on file is
//! known exactly: the tasks of the last six days.
//!
//! Checked every day: the task folder holds exactly the window's tasks; callers' sessions and
//! inbox files are under `A2A__Retention__MaxBytes`; the trash is empty. At the end: a sample of
//! old tasks answers TaskNotFound and of recent ones GetTask, ListTasks agrees with the files,
//! a safe retry of a message older than the retry window (on the server's clock) starts a new
//! task, and the process's RSS once the window is full stays within a generous margin of day
//! ten's (recorded per day; no timing is asserted).
//!
//! CI runs 2,000 tasks from 10 callers. The full month, 100,000 tasks from 50 callers:
//! `VOLCANIC_RETENTION_TASKS=100000 VOLCANIC_RETENTION_CALLERS=50
//! cargo test --release -p volcanic-a2a --test it retention_month -- --nocapture`.
//!
//! [`A2aServer::retention_round`]: volcanic_a2a::A2aServer::retention_round

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use volcanic_a2a::A2aOptions;
use volcanic_a2a::retention::RetentionOptions;

use crate::support::{Setup, TestServer};

const DAYS: i64 = 30;
/// Days a settled task is kept.
const KEEP_DAYS: i64 = 7;
/// Sends in flight at once.
const IN_FLIGHT: usize = 16;
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One sent task: its id, caller, the simulated day it was sent on, its first message.
struct Sent {
    id: String,
    caller: usize,
    day: i64,
    message: Value,
}

/// Stored bytes (what a file holds on disk, at most its length, as retention counts) of the
/// regular files below `dir`, and how many there are.
fn stored_below(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let (mut bytes, mut files) = (0, 0);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            let (b, f) = stored_below(&entry.path());
            bytes += b;
            files += f;
        } else if meta.is_file() {
            bytes += meta.len().min(meta.blocks() * 512);
            files += 1;
        }
    }
    (bytes, files)
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn rpc(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    method: &str,
    params: Value,
) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let request = client
        .post(format!("{base}/a2a"))
        .header("X-API-Key", key)
        .header("A2A-Version", "1.0")
        .json(&body);
    let response =
        tokio::time::timeout(Duration::from_secs(60), request.send()).await.unwrap().unwrap();
    assert_eq!(response.status(), 200, "{method}");
    response.json().await.unwrap()
}

/// Sends `message` as `key`, retrying a busy context as a caller does (a bounded number of
/// times); the task it made.
async fn send(client: &reqwest::Client, base: &str, key: &str, message: Value) -> Value {
    let params = json!({"message": message});
    let mut body = rpc(client, base, key, "SendMessage", params.clone()).await;
    for _ in 0..200 {
        if body["error"]["code"] != -32004 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        body = rpc(client, base, key, "SendMessage", params.clone()).await;
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_month_keeps_the_window_and_the_bounds_and_rss_stays_flat() {
    let tasks = env_number("VOLCANIC_RETENTION_TASKS", 2000) as usize;
    let callers = env_number("VOLCANIC_RETENTION_CALLERS", 10) as usize;
    // 250 bytes a task: less than the window's sessions and files take (about 1,400 bytes a
    // task of the window), so the cap prunes too.
    let max_bytes = (tasks as u64) * 250;
    let options = A2aOptions {
        // Few open at once: the size cap never takes an open session.
        max_sessions_per_caller: 64,
        max_open_sessions: 64,
        retention: RetentionOptions {
            enabled: true,
            task_age: Some(DAY * KEEP_DAYS as u32),
            max_bytes: Some(max_bytes),
            // Longer than the test: the rounds are the ones it asks for.
            interval: Duration::from_secs(60 * 60),
        },
        ..A2aOptions::default()
    };
    // The server's clock: the system's plus the simulated days gone by.
    let offset = Arc::new(AtomicI64::new(0));
    let clock: volcanic_a2a::usage::Clock = {
        let offset = offset.clone();
        Arc::new(move || {
            chrono::Utc::now() + chrono::Duration::seconds(offset.load(Ordering::SeqCst))
        })
    };
    let setup = Setup { options, notifier: false, clock: Some(clock), ..Setup::default() };
    let server = TestServer::with(setup).await;
    let keys: Vec<(String, String)> =
        (0..callers).map(|i| (format!("sim-{i:02}"), format!("k_sim_caller_key_{i:04}"))).collect();
    let pairs: Vec<(&str, &str)> = keys.iter().map(|(n, k)| (n.as_str(), k.as_str())).collect();
    crate::support::write_callers(server.ws(), &pairs);
    let keys = Arc::new(keys);
    let (base, client) = (server.base.clone(), server.client.clone());
    let tasks_dir = server.ws().join(".volcanic/a2a/tasks");
    let sessions = server.state.path().join("sessions");
    let inbox = server.ws().join("inbox/a2a");
    let trash = server.state.path().join("a2a/retention-trash");
    let started = Instant::now();
    let mut sent: Vec<Sent> = Vec::with_capacity(tasks);
    let mut last_context: Vec<Option<String>> = vec![None; callers];
    let mut rss = Vec::new();
    let mut most = (0u64, 0u64, 0u64);
    let per_day = tasks.div_ceil(DAYS as usize);
    let mut n = 0usize;
    for d in 0..DAYS {
        let mut in_flight = tokio::task::JoinSet::new();
        let today = per_day.min(tasks - n);
        for _ in 0..today {
            let caller = n % callers;
            let mut message = json!({"messageId": format!("m-{n}"), "role": "ROLE_USER", "parts": [{"text": format!("day {d} message {n}")}]});
            if n.is_multiple_of(10) {
                message["parts"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"raw": "c29tZSBieXRlcw==", "filename": "n.txt"}));
            }
            if n % 20 == 5
                && let Some(context) = &last_context[caller]
            {
                message["contextId"] = json!(context);
            }
            let (client, base, keys) = (client.clone(), base.clone(), keys.clone());
            in_flight.spawn(async move {
                let body = send(&client, &base, &keys[caller].1, message.clone()).await;
                let task = body["result"]["task"].clone();
                assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
                (caller, task, message)
            });
            n += 1;
            while in_flight.len() >= IN_FLIGHT {
                let (caller, task, message) = in_flight.join_next().await.unwrap().unwrap();
                last_context[caller] = task["contextId"].as_str().map(str::to_string);
                let id = task["id"].as_str().unwrap().to_string();
                sent.push(Sent { id, caller, day: d, message });
            }
        }
        while let Some(done) = in_flight.join_next().await {
            let (caller, task, message) = done.unwrap();
            last_context[caller] = task["contextId"].as_str().map(str::to_string);
            let id = task["id"].as_str().unwrap().to_string();
            sent.push(Sent { id, caller, day: d, message });
        }
        // The day is over: the clock moves on a day, and that day's round runs to its end.
        offset.fetch_add(DAY.as_secs() as i64, Ordering::SeqCst);
        let removed = server.server.retention_round().await.expect("retention runs");
        // After day d's round: the tasks of days d-5..=d are kept, the older ones gone.
        let window = sent.iter().filter(|s| s.day > d - KEEP_DAYS + 1).count();
        let on_file = std::fs::read_dir(&tasks_dir).unwrap().count();
        let callers_bytes = stored_below(&sessions).0 + stored_below(&inbox).0;
        let (task_bytes, _) = stored_below(&tasks_dir);
        let (state_bytes, _) = stored_below(server.state.path());
        rss.push(rss_kib());
        println!(
            "day {d:2}: on file {on_file} (window {window}), task folder {task_bytes} B, callers' sessions and inbox {callers_bytes} B (cap {max_bytes}), state dir {state_bytes} B, RSS {} KiB; removed {removed:?}",
            rss[rss.len() - 1]
        );
        assert_eq!(on_file, window, "day {d}: {on_file} task files, {window} in the window");
        assert!(callers_bytes <= max_bytes, "day {d}: {callers_bytes} > {max_bytes}");
        assert_eq!(stored_below(&trash).1, 0, "day {d}: the trash is not empty");
        most = (most.0.max(task_bytes), most.1.max(callers_bytes), most.2.max(state_bytes));
    }
    let elapsed = started.elapsed();
    println!(
        "retention month: {} tasks from {callers} callers in {:.1} s ({:.0}/s); largest task folder {} B, callers' records {} B (cap {max_bytes}), state dir {} B; RSS by day (KiB) {rss:?}",
        sent.len(),
        elapsed.as_secs_f64(),
        sent.len() as f64 / elapsed.as_secs_f64(),
        most.0,
        most.1,
        most.2,
    );
    let mut state_parts: Vec<(String, u64)> = std::fs::read_dir(server.state.path())
        .unwrap()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), stored_below(&e.path()).0))
        .collect();
    state_parts.sort();
    println!("state dir at the end: {state_parts:?}");
    assert_eq!(sent.len(), tasks);
    // Old ones are gone, recent ones answer (a sample of each, every caller).
    let mut checked = (0, 0);
    for s in sent.iter().step_by((tasks / 400).max(1)) {
        let body = rpc(&client, &base, &keys[s.caller].1, "GetTask", json!({"id": s.id})).await;
        if s.day <= DAYS - KEEP_DAYS {
            assert_eq!(body["error"]["code"], -32001, "{} of day {}: {body}", s.id, s.day);
            checked.0 += 1;
        } else {
            assert_eq!(body["result"]["id"], json!(s.id), "{} of day {}: {body}", s.id, s.day);
            checked.1 += 1;
        }
    }
    assert!(checked.0 > 0 && checked.1 > 0, "{checked:?}");
    // The safe-retry records age on the server's clock: the last day's first message, sent
    // again a day later (past the 24 h retry window), starts a new task.
    let last = sent.iter().find(|s| s.day == DAYS - 1).unwrap();
    let again = send(&client, &base, &keys[last.caller].1, last.message.clone()).await;
    let again_id = again["result"]["task"]["id"].as_str().unwrap_or_default().to_string();
    assert!(!again_id.is_empty() && again_id != last.id, "{again}");
    // ListTasks agrees with the files, caller by caller.
    let mut listed = 0;
    for (_, key) in keys.iter() {
        let page = rpc(&client, &base, key, "ListTasks", json!({"pageSize": 1})).await;
        listed += page["result"]["totalSize"].as_u64().unwrap() as usize;
    }
    assert_eq!(listed, std::fs::read_dir(&tasks_dir).unwrap().count());
    // RSS: flat once the window is full (day 10 on): no later day above day ten's by more than
    // a quarter and 16 MiB.
    let settled = rss[9];
    let last = *rss[10..].iter().max().unwrap();
    assert!(
        last <= settled + settled / 4 + 16 * 1024,
        "RSS {last} KiB after day 10, {settled} KiB on day 10: {rss:?}"
    );
    server.stop().await;
}
