//! A month of A2A traffic with retention on, on a fast clock (docs/performance.md, "Retention"):
//! a simulated day lasts `VOLCANIC_RETENTION_DAY_MS` (default 1 s), and the retention limits
//! are set in those days (tasks kept 7 days, a round every eighth of a day), so the month runs
//! in seconds with the server's real code and files. Callers send through the real server over
//! 127.0.0.1: a new conversation each time, every tenth with a file, every twentieth continuing
//! the caller's last conversation.
//!
//! Afterwards: every task settled more than the limit (plus half a day: four rounds) ago is gone and every
//! task well inside it answers GetTask; the task folder holds no more than the window's tasks;
//! callers' sessions and inbox files are under `A2A__Retention__MaxBytes`; ListTasks agrees with
//! the files; and the process's RSS in the last ten days stays within a margin of day ten's.
//!
//! CI runs 2,000 tasks from 10 callers. The full month, 100,000 tasks from 50 callers:
//! `VOLCANIC_RETENTION_TASKS=100000 VOLCANIC_RETENTION_CALLERS=50 VOLCANIC_RETENTION_DAY_MS=4000
//! cargo test --release -p volcanic-a2a --test it retention_month -- --nocapture`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use volcanic_a2a::A2aOptions;
use volcanic_a2a::retention::RetentionOptions;

use crate::support::{Setup, TestServer};

const DAYS: u32 = 30;
/// Sends in flight at once.
const IN_FLIGHT: usize = 16;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One sent task: when it settled (its answer came), its caller and context.
struct Sent {
    id: String,
    caller: usize,
    at: Instant,
}

/// Bytes of the regular files below `dir`.
fn bytes_below(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            total += bytes_below(&entry.path());
        } else if meta.is_file() {
            total += meta.len();
        }
    }
    total
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_month_keeps_the_window_and_the_bounds_and_rss_stays_flat() {
    let tasks = env_number("VOLCANIC_RETENTION_TASKS", 2000) as usize;
    let callers = env_number("VOLCANIC_RETENTION_CALLERS", 10) as usize;
    let day = Duration::from_millis(env_number("VOLCANIC_RETENTION_DAY_MS", 1000));
    let task_age = day * 7;
    let interval = day / 8;
    let max_bytes = (tasks as u64) * 500;
    let options = A2aOptions {
        session_idle_timeout: day / 4,
        max_sessions_per_caller: 256,
        max_open_sessions: 1024,
        retention: RetentionOptions {
            enabled: true,
            task_age: Some(task_age),
            max_bytes: Some(max_bytes),
            interval,
        },
        ..A2aOptions::default()
    };
    let server = TestServer::with(Setup { options, notifier: false, ..Setup::default() }).await;
    let keys: Vec<(String, String)> =
        (0..callers).map(|i| (format!("sim-{i:02}"), format!("k_sim_caller_key_{i:04}"))).collect();
    let pairs: Vec<(&str, &str)> = keys.iter().map(|(n, k)| (n.as_str(), k.as_str())).collect();
    crate::support::write_callers(server.ws(), &pairs);
    let keys = Arc::new(keys);
    let (base, client) = (server.base.clone(), server.client.clone());
    let started = Instant::now();
    let mut sent: Vec<Sent> = Vec::with_capacity(tasks);
    let mut last_context: Vec<Option<String>> = vec![None; callers];
    let mut rss = Vec::new();
    let per_day = tasks.div_ceil(DAYS as usize);
    let mut n = 0usize;
    for d in 0..DAYS {
        let day_ends = started + day * (d + 1);
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
                let params = json!({"message": message});
                let key = &keys[caller].1;
                // A continued context may still run the caller's previous task: retry, as a
                // caller does on "context busy" (a bounded number of times).
                let mut body = rpc(&client, &base, key, "SendMessage", params.clone()).await;
                for _ in 0..200 {
                    if body["error"]["code"] != -32004 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    body = rpc(&client, &base, key, "SendMessage", params.clone()).await;
                }
                let task = body["result"]["task"].clone();
                assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
                (caller, task)
            });
            n += 1;
            while in_flight.len() >= IN_FLIGHT {
                let (caller, task) = in_flight.join_next().await.unwrap().unwrap();
                last_context[caller] = task["contextId"].as_str().map(str::to_string);
                sent.push(Sent {
                    id: task["id"].as_str().unwrap().to_string(),
                    caller,
                    at: Instant::now(),
                });
            }
        }
        while let Some(done) = in_flight.join_next().await {
            let (caller, task) = done.unwrap();
            last_context[caller] = task["contextId"].as_str().map(str::to_string);
            sent.push(Sent {
                id: task["id"].as_str().unwrap().to_string(),
                caller,
                at: Instant::now(),
            });
        }
        tokio::time::sleep_until(day_ends.into()).await;
        rss.push(rss_kib());
    }
    // Two more rounds, so the last day's old tasks have had their round.
    tokio::time::sleep(interval * 3).await;
    let now = Instant::now();
    let sessions = server.state.path().join("sessions");
    let callers_bytes = bytes_below(&sessions) + bytes_below(&server.ws().join("inbox/a2a"));
    let tasks_dir = server.ws().join(".volcanic/a2a/tasks");
    let on_file = std::fs::read_dir(&tasks_dir).unwrap().count();
    // Half a day of slack: four rounds, and the time the rounds themselves take.
    let slack = day / 2;
    let window = sent.iter().filter(|s| now.duration_since(s.at) <= task_age + slack).count();
    let elapsed = started.elapsed();
    println!(
        "retention month: {} tasks from {callers} callers in {:.1} s ({:.0}/s); on file {on_file} (window {window}); callers' sessions and inbox {callers_bytes} bytes (cap {max_bytes}); task folder {} bytes; RSS by day (KiB) {rss:?}",
        sent.len(),
        elapsed.as_secs_f64(),
        sent.len() as f64 / elapsed.as_secs_f64(),
        bytes_below(&tasks_dir),
    );
    assert_eq!(sent.len(), tasks);
    assert!(on_file <= window, "{on_file} task files, {window} in the window");
    assert!(callers_bytes <= max_bytes, "{callers_bytes} > {max_bytes}");
    // Old ones are gone, recent ones answer (a sample of each, every caller).
    let mut checked = (0, 0);
    for s in sent.iter().step_by((tasks / 400).max(1)) {
        let age = now.duration_since(s.at);
        let body = rpc(&client, &base, &keys[s.caller].1, "GetTask", json!({"id": s.id})).await;
        if age > task_age + slack {
            assert_eq!(body["error"]["code"], -32001, "{} is {age:?} old: {body}", s.id);
            checked.0 += 1;
        } else if age < task_age - day / 2 {
            assert_eq!(body["result"]["id"], json!(s.id), "{} is {age:?} old: {body}", s.id);
            checked.1 += 1;
        }
    }
    assert!(checked.0 > 0 && checked.1 > 0, "{checked:?}");
    // ListTasks agrees with the files, caller by caller.
    let mut listed = 0;
    for (_, key) in keys.iter() {
        let page = rpc(&client, &base, key, "ListTasks", json!({"pageSize": 1})).await;
        listed += page["result"]["totalSize"].as_u64().unwrap() as usize;
    }
    assert_eq!(listed, std::fs::read_dir(&tasks_dir).unwrap().count());
    // RSS: flat once the window is full (day 10 on), within 25 % and 16 MiB of day ten's.
    let settled = rss[9];
    let last = *rss[20..].iter().max().unwrap();
    assert!(
        last <= settled + settled / 4 + 16 * 1024,
        "RSS {last} KiB after day 20, {settled} KiB on day 10"
    );
    server.stop().await;
}
