//! Retention against the real binary (docs/reliability.md, "Retention"): `volcanic serve` killed
//! with SIGKILL while it removes thousands of old tasks leaves no half-removed task. After each
//! kill every remaining task file parses, every remaining task's session is still there, and a
//! restarted server lists only tasks that answer GetTask; a last run with retention on finishes
//! the job (the trash and the sessions no task uses included) and keeps what it must.
//!
//! The old tasks are copies of a real task (its file, its session journal, its inbox file) with
//! status timestamps 200 days in the past: what a server finds after months of use.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::{Value, json};
use volcanic_test_support::raw_http::{body_of, post_a2a};

use crate::support::{Rest, listening_base};

const KEY: &str = "k_retention_keeper_0303";
const TIMEOUT: Duration = Duration::from_secs(20);
/// Old tasks made for the test (a tenth of them share a context with the next one).
const OLD_TASKS: usize = 2000;

struct Server {
    child: std::process::Child,
    base: String,
}

fn start(workspace: &Path, state: &Path, retention: bool) -> Server {
    let log = state.join("server.log");
    let stderr = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    let mut child = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state)
        .env("RUST_LOG", "info")
        .env("A2A__Retention__Enabled", retention.to_string())
        .env("A2A__Retention__Interval", "1s")
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

impl Server {
    fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let (status, response) = post_a2a(&self.base, KEY, &body.to_string(), TIMEOUT);
        assert_eq!(status, 200, "{response}");
        serde_json::from_str(body_of(&response)).unwrap()
    }

    fn stop(mut self) {
        let id = self.child.id().to_string();
        assert!(Command::new("kill").arg("-TERM").arg(id).status().unwrap().success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

fn tasks_dir(workspace: &Path) -> PathBuf {
    workspace.join(".volcanic/a2a/tasks")
}

fn task_ids(workspace: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(tasks_dir(workspace))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json").map(str::to_string))
        .collect();
    ids.sort();
    ids
}

fn session_dir(state: &Path, context: &str) -> PathBuf {
    state.join("sessions").join(format!("serve-a2a-keeper_{context}"))
}

/// What the test made: the old tasks' ids and contexts, and the tasks that must stay.
struct Made {
    old: Vec<(String, String)>,
    keep: Vec<String>,
}

/// One real task with a file part, then `OLD_TASKS` copies of it 200 days old, each with its
/// own session folder and inbox file (every tenth context holding two tasks), plus an old task
/// waiting for input (kept: not settled).
fn make_old_tasks(workspace: &Path, state: &Path) -> Made {
    let server = start(workspace, state, false);
    let file = json!({"raw": "aGVsbG8gZnJvbSB0aGUgY2FsbGVy", "filename": "note.txt"});
    let message = |text: &str| json!({"message": {"messageId": format!("m-{text}"), "role": "ROLE_USER", "parts": [{"text": text}, file.clone()]}});
    let fresh = server.rpc("SendMessage", message("fresh"))["result"]["task"].clone();
    let ask = json!({"steps": [{"tool": "request_input", "args": {"question": "Which city?"}}]});
    let waiting =
        server.rpc("SendMessage", message(&format!("faux> {ask}")))["result"]["task"].clone();
    assert_eq!(waiting["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{waiting}");
    server.stop();
    let id = |task: &Value| task["id"].as_str().unwrap().to_string();
    let context = |task: &Value| task["contextId"].as_str().unwrap().to_string();
    let long_ago = (chrono::Utc::now() - chrono::Duration::days(200))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let template: Value = serde_json::from_slice(
        &std::fs::read(tasks_dir(workspace).join(format!("{}.json", id(&fresh)))).unwrap(),
    )
    .unwrap();
    let journal =
        std::fs::read_to_string(session_dir(state, &context(&fresh)).join("session.jsonl"))
            .unwrap();
    let inbox = workspace.join("inbox/a2a/keeper");
    // The file the fresh task's conversation received (the one waiting for input has its own).
    let saved = std::fs::read_dir(&inbox)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_str().unwrap().to_string())
        .find(|name| journal.contains(&format!("inbox/a2a/keeper/{name}")))
        .unwrap_or_else(|| panic!("no inbox file named in {journal}"));
    let mut old = Vec::new();
    let mut context_id = String::new();
    for i in 0..OLD_TASKS {
        let task_id = format!("old-task-{i:05}");
        if i % 10 != 1 {
            context_id = format!("old-context-{i:05}");
            let name = format!("old-{i:05}-note.txt");
            std::fs::write(inbox.join(&name), b"hello from the caller").unwrap();
            let dir = session_dir(state, &context_id);
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("session.jsonl");
            std::fs::write(&path, journal.replace(&saved, &name)).unwrap();
            // Last written when its task settled.
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(std::time::SystemTime::now() - Duration::from_secs(200 * 86_400))
                .unwrap();
        }
        let mut file = template.clone();
        file["id"] = json!(task_id);
        file["contextId"] = json!(context_id);
        file["status"]["timestamp"] = json!(long_ago);
        let text = serde_json::to_vec_pretty(&file).unwrap();
        std::fs::write(tasks_dir(workspace).join(format!("{task_id}.json")), text).unwrap();
        old.push((task_id, context_id.clone()));
    }
    // The one waiting for input is old too, and stays.
    let path = tasks_dir(workspace).join(format!("{}.json", id(&waiting)));
    let mut file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    file["status"]["timestamp"] = json!(long_ago);
    std::fs::write(&path, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    Made { old, keep: vec![id(&fresh), id(&waiting)] }
}

/// After a kill: every task file parses as a whole task, and every remaining old task's
/// session and inbox file are still there (they go only after the context's last task).
fn check_files(workspace: &Path, state: &Path, made: &Made) {
    let remaining = task_ids(workspace);
    for id in &remaining {
        let bytes = std::fs::read(tasks_dir(workspace).join(format!("{id}.json"))).unwrap();
        let file: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(file["id"], json!(id));
        assert!(file["status"]["state"].is_string(), "{id}");
    }
    for (id, context) in &made.old {
        if remaining.binary_search(id).is_ok() {
            assert!(session_dir(state, context).join("session.jsonl").exists(), "{id}'s session");
        }
    }
    for id in &made.keep {
        assert!(remaining.binary_search(id).is_ok(), "{id} must stay");
    }
}

/// With retention off: every task ListTasks shows answers GetTask, and it shows them all.
fn check_served(workspace: &Path, state: &Path) {
    let server = start(workspace, state, false);
    let mut listed = Vec::new();
    let mut token = String::new();
    loop {
        let page = server.rpc("ListTasks", json!({"pageSize": 100, "pageToken": token}));
        for task in page["result"]["tasks"].as_array().unwrap() {
            listed.push(task["id"].as_str().unwrap().to_string());
        }
        token = page["result"]["nextPageToken"].as_str().unwrap_or_default().to_string();
        if token.is_empty() {
            break;
        }
    }
    for id in &listed {
        let got = server.rpc("GetTask", json!({"id": id}));
        assert_eq!(got["result"]["id"], json!(id), "{got}");
    }
    listed.sort();
    assert_eq!(listed, task_ids(workspace));
    server.stop();
}

#[test]
fn sigkill_during_retention_leaves_whole_tasks_and_a_restart_finishes() {
    let workspace = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (workspace, state) = (workspace.path(), state.path());
    let callers = json!([{"name": "keeper", "key": KEY, "tier": "chat"}]);
    std::fs::create_dir_all(workspace.join(".volcanic/a2a")).unwrap();
    std::fs::write(workspace.join(".volcanic/a2a/callers.json"), callers.to_string()).unwrap();
    let made = make_old_tasks(workspace, state);
    let all = task_ids(workspace).len();
    assert_eq!(all, OLD_TASKS + 2);

    let mut kills = 0;
    for _ in 0..3 {
        let before = task_ids(workspace).len();
        if before <= made.keep.len() + 50 {
            break;
        }
        let mut server = start(workspace, state, true);
        // Killed once retention has taken a part of what is left, and not all of it.
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = std::fs::read_dir(tasks_dir(workspace)).unwrap().count();
            if left < before - (before - made.keep.len()) / 4 {
                break;
            }
            assert!(Instant::now() < deadline, "retention removed nothing ({left} of {before})");
            std::thread::sleep(Duration::from_millis(2));
        }
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        kills += 1;
        assert!(task_ids(workspace).len() > made.keep.len(), "killed after the end");
        check_files(workspace, state, &made);
        check_served(workspace, state);
    }
    assert!(kills >= 2, "{kills} kills");

    // Retention on to the end: only what must stay is left, and nothing of the rest.
    let server = start(workspace, state, true);
    let deadline = Instant::now() + Duration::from_secs(60);
    let trash = state.join("a2a/retention-trash");
    let empty = |dir: &Path| std::fs::read_dir(dir).map(|d| d.count() == 0).unwrap_or(true);
    let inbox = workspace.join("inbox/a2a/keeper");
    while task_ids(workspace).len() > made.keep.len()
        || !empty(&trash)
        || made.old.iter().any(|(_, context)| session_dir(state, context).exists())
        || std::fs::read_dir(&inbox).unwrap().count() > 2
    {
        let sessions = made.old.iter().filter(|(_, c)| session_dir(state, c).exists()).count();
        let state_of = format!(
            "{} tasks, trash empty {}, {sessions} old sessions, {} inbox files",
            task_ids(workspace).len(),
            empty(&trash),
            std::fs::read_dir(&inbox).unwrap().count()
        );
        assert!(Instant::now() < deadline, "retention did not finish: {state_of}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut keep = made.keep.clone();
    keep.sort();
    assert_eq!(task_ids(workspace), keep);
    for id in &made.keep {
        assert_eq!(server.rpc("GetTask", json!({"id": id}))["result"]["id"], json!(id));
    }
    assert_eq!(
        server.rpc("GetTask", json!({"id": made.old[0].0}))["error"]["code"],
        -32001,
        "a removed task is not found"
    );
    server.stop();
    let log = std::fs::read_to_string(state.join("server.log")).unwrap();
    assert!(log.contains("retention removed old A2A records"), "{log}");
}
