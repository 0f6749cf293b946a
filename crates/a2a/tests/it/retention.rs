//! Retention (docs/a2a.md, "Retention") against the real server: old settled tasks go with the
//! session and inbox files of a context no task uses any more, everything that pointed at them
//! forgets them, unsettled tasks and open sessions stay, and the size cap prunes the least
//! recently used. Ages come from task files whose status timestamps are written in the past
//! (as a task settled long ago has them), so no test waits for a day.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use volcanic_a2a::A2aOptions;
use volcanic_a2a::retention::RetentionOptions;

use crate::support::{DEADLINE, KEY, Setup, TestServer, directive, send_params};

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// Options with retention after one day, rounds every 50 ms, no size cap, sessions closed
/// after 100 ms idle.
fn by_age(enabled: bool) -> A2aOptions {
    A2aOptions {
        session_idle_timeout: Duration::from_millis(100),
        retention: RetentionOptions {
            enabled,
            task_age: Some(DAY),
            max_bytes: None,
            interval: Duration::from_millis(50),
        },
        ..A2aOptions::default()
    }
}

/// Rewrites task `id`'s status timestamp `days` in the past, as a new file renamed into place
/// (like the server's own writes, so the index sees the change).
fn settle_days_ago(server: &TestServer, id: &str, days: i64) {
    let path = server.task_path(id);
    let mut file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let then = chrono::Utc::now() - chrono::Duration::days(days);
    file["status"]["timestamp"] = json!(then.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    let temp = path.with_extension("aging");
    std::fs::write(&temp, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    std::fs::rename(&temp, &path).unwrap();
}

/// The session folder of `caller`'s context `context_id` in the test workspace (prefix `test`).
fn session_dir(server: &TestServer, caller: &str, context_id: &str) -> PathBuf {
    server.state.path().join("sessions").join(format!("test-a2a-{caller}_{context_id}"))
}

/// Sends `params` as travel-bot and returns the task.
async fn send(server: &TestServer, params: Value) -> Value {
    let body = server.rpc(KEY, "SendMessage", params).await;
    body["result"]["task"].clone()
}

async fn get(server: &TestServer, id: &str) -> Value {
    server.rpc(KEY, "GetTask", json!({"id": id})).await
}

/// The ids ListTasks shows travel-bot, sorted.
async fn listed(server: &TestServer) -> Vec<String> {
    let page = server.rpc(KEY, "ListTasks", json!({"pageSize": 100})).await;
    let mut ids: Vec<String> = page["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|task| task["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// Waits until `gone` holds, within [`DEADLINE`].
async fn wait_for(what: &str, gone: impl Fn() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !gone() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn id_of(task: &Value) -> String {
    task["id"].as_str().unwrap().to_string()
}

fn context_of(task: &Value) -> String {
    task["contextId"].as_str().unwrap().to_string()
}

/// Every file below `dir`, relative, sorted.
fn files_below(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, at: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(at).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, found);
            } else {
                found.push(path.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, dir, &mut found);
    found.sort();
    found
}

/// What the age test sets up: an old task with a file, an old task waiting for input, two tasks
/// of one context of which only the first is old, and an owner's session.
struct Aged {
    with_file: Value,
    waiting: Value,
    first_of_two: Value,
    second_of_two: Value,
    file_message: Value,
    owner_session: PathBuf,
}

async fn age_some(server: &TestServer) -> Aged {
    let bytes = base64::engine::general_purpose::STANDARD.encode(b"a file for the assistant");
    let file_message = json!({"message": {
        "messageId": "m-with-file", "role": "ROLE_USER",
        "parts": [{"text": "here"}, {"raw": bytes, "filename": "notes.txt"}]}});
    let with_file = send(server, file_message.clone()).await;
    assert_eq!(with_file["status"]["state"], "TASK_STATE_COMPLETED", "{with_file}");
    let ask = directive(json!([{"tool": "request_input", "args": {"question": "Which city?"}}]));
    let waiting = send(server, send_params(&ask, None)).await;
    assert_eq!(waiting["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{waiting}");
    let first_of_two = send(server, send_params("first", None)).await;
    let context = json!({"contextId": context_of(&first_of_two)});
    let second_of_two = send(server, send_params("second", Some(context))).await;
    assert_eq!(second_of_two["status"]["state"], "TASK_STATE_COMPLETED", "{second_of_two}");
    let owner_session = server.state.path().join("sessions").join("test");
    std::fs::create_dir_all(&owner_session).unwrap();
    std::fs::write(owner_session.join("session.jsonl"), "{\"seq\":0,\"type\":\"session\"}\n")
        .unwrap();
    for task in [&with_file, &waiting, &first_of_two] {
        settle_days_ago(server, &id_of(task), 3);
    }
    Aged { with_file, waiting, first_of_two, second_of_two, file_message, owner_session }
}

#[tokio::test]
async fn retention_removes_old_settled_tasks_with_their_sessions_and_files_and_keeps_the_rest() {
    let server = TestServer::with(Setup { options: by_age(true), ..Setup::default() }).await;
    let aged = age_some(&server).await;
    let removed = id_of(&aged.with_file);
    let file_session = session_dir(&server, "travel-bot", &context_of(&aged.with_file));
    assert!(file_session.exists());
    assert_eq!(server.inbox_files().len(), 1, "{:?}", server.inbox_files());
    wait_for("the old tasks to go", || {
        !server.task_path(&removed).exists()
            && !server.task_path(&id_of(&aged.first_of_two)).exists()
    })
    .await;
    wait_for("the unused session to go", || !file_session.exists()).await;

    // Gone like an unknown id, everywhere.
    for id in [&removed, &id_of(&aged.first_of_two)] {
        assert_eq!(get(&server, id).await["error"]["code"], -32001);
    }
    let mut kept = vec![id_of(&aged.waiting), id_of(&aged.second_of_two)];
    kept.sort();
    assert_eq!(listed(&server).await, kept);
    assert_eq!(server.inbox_files(), Vec::<String>::new());
    // Kept: the task waiting for input and its session, the context another task still uses,
    // and the owner's own session.
    assert_eq!(
        get(&server, &id_of(&aged.waiting)).await["result"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    assert!(session_dir(&server, "travel-bot", &context_of(&aged.waiting)).exists());
    assert!(session_dir(&server, "travel-bot", &context_of(&aged.second_of_two)).exists());
    assert!(aged.owner_session.join("session.jsonl").exists());
    assert_eq!(files_below(&server.state.path().join("a2a/retention-trash")), Vec::<String>::new());

    // A repeat of the removed task's message is a new message now, not an answer with a task
    // that is gone.
    let again = send(&server, aged.file_message.clone()).await;
    assert_eq!(again["status"]["state"], "TASK_STATE_COMPLETED", "{again}");
    assert_ne!(id_of(&again), removed);

    // Once the last task of the shared context is old too, the context's session goes.
    settle_days_ago(&server, &id_of(&aged.second_of_two), 2);
    let shared = session_dir(&server, "travel-bot", &context_of(&aged.second_of_two));
    wait_for("the shared context's session to go", || !shared.exists()).await;
    assert_eq!(get(&server, &id_of(&aged.second_of_two)).await["error"]["code"], -32001);
    server.stop().await;
}

#[tokio::test]
async fn retention_turned_off_removes_nothing() {
    let server = TestServer::with(Setup { options: by_age(false), ..Setup::default() }).await;
    let aged = age_some(&server).await;
    // Rounds would run every 50 ms: give a dozen of them the chance.
    tokio::time::sleep(Duration::from_millis(600)).await;
    for task in [&aged.with_file, &aged.first_of_two] {
        assert!(server.task_path(&id_of(task)).exists());
        assert!(session_dir(&server, "travel-bot", &context_of(task)).exists());
        assert_eq!(
            get(&server, &id_of(task)).await["result"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
    }
    assert_eq!(server.inbox_files().len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn retention_closes_and_removes_the_idle_open_session_of_an_old_task() {
    // The default idle timeout (30 min) keeps every session of this test open in the pool: the
    // age pass closes the idle one whose last task it removed, and removes it.
    let options = A2aOptions { session_idle_timeout: Duration::from_secs(30 * 60), ..by_age(true) };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    let task = send(&server, send_params("hello", None)).await;
    settle_days_ago(&server, &id_of(&task), 3);
    wait_for("the old task to go", || !server.task_path(&id_of(&task)).exists()).await;
    let dir = session_dir(&server, "travel-bot", &context_of(&task));
    wait_for("its idle session to go", || !dir.exists()).await;
    server.stop().await;
}

#[tokio::test]
async fn retention_size_cap_prunes_the_least_recently_used_closed_sessions_and_keeps_tasks() {
    let options = A2aOptions {
        session_idle_timeout: Duration::from_millis(100),
        retention: RetentionOptions {
            enabled: true,
            task_age: None,
            max_bytes: Some(24 * 1024),
            interval: Duration::from_millis(200),
        },
        ..A2aOptions::default()
    };
    // Turned off first: the sessions pile up over the cap.
    let off = A2aOptions {
        retention: RetentionOptions { enabled: false, ..options.retention.clone() },
        ..options.clone()
    };
    let server = TestServer::with(Setup { options: off, ..Setup::default() }).await;
    let ask = directive(json!([{"tool": "request_input", "args": {"question": "Which city?"}}]));
    let waiting = send(&server, send_params(&ask, None)).await;
    let mut tasks = Vec::new();
    for i in 0..24 {
        let text = format!("message {i} {}", "padding ".repeat(200));
        tasks.push(send(&server, send_params(&text, None)).await);
    }
    let sessions = server.state.path().join("sessions");
    let used = |dir: &Path| -> u64 {
        files_below(dir).iter().map(|f| std::fs::metadata(dir.join(f)).unwrap().len()).sum()
    };
    let before = used(&sessions);
    assert!(before > 24 * 1024, "{before}");
    let (workspace, extra, state) = server.stop().await;

    let server =
        TestServer::start_in(workspace, extra, state, Setup { options, ..Setup::default() }).await;
    let sessions = server.state.path().join("sessions");
    wait_for("the sessions to fit the cap", || used(&sessions) <= 24 * 1024).await;
    // The newest conversations stayed, the oldest went; the one waiting for input is kept.
    assert!(session_dir(&server, "travel-bot", &context_of(&tasks[23])).exists());
    assert!(!session_dir(&server, "travel-bot", &context_of(&tasks[0])).exists());
    assert!(session_dir(&server, "travel-bot", &context_of(&waiting)).exists());
    // Task files are not the cap's: every task still answers.
    for task in tasks.iter().chain([&waiting]) {
        let got = get(&server, &id_of(task)).await;
        assert!(got["result"]["id"].is_string(), "{got}");
    }
    server.stop().await;
}
