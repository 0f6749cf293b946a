//! Files planted in `.volcanic/a2a/` by whatever else runs in the workspace (issue 17, guarantee
//! 5): a FIFO, a symbolic link to `/dev/zero` or an oversized file in place of callers.json,
//! card.json or a task file is treated as absent, and the server keeps answering everything
//! else.
//!
//! Every request here is bounded by [`SHORT`]: a read that blocks fails its test instead of
//! hanging it, and [`Fifo`] releases blocked readers when it is dropped, so even a regression
//! lets the test binary finish.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use volcanic_a2a::A2aOptions;

use crate::support::*;

/// The bound on each request of these tests: far above what an answer takes, far below a hang.
const SHORT: Duration = Duration::from_secs(10);

/// A FIFO planted in place of a file. Dropping it opens it for writing once, without blocking
/// (which releases any reader blocked in `open`), and removes it.
struct Fifo(PathBuf);

impl Fifo {
    fn plant(path: &Path) -> Fifo {
        remove_if_present(path);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();
        Fifo(path.to_path_buf())
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt;
        let nonblock = i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap();
        // ENXIO when nobody waits to read, which is the normal case.
        let _ = std::fs::File::options().write(true).custom_flags(nonblock).open(&self.0);
        let _ = std::fs::remove_file(&self.0);
    }
}

fn remove_if_present(path: &Path) {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => panic!("cannot remove {}: {err}", path.display()),
    }
}

fn link_to_dev_zero(path: &Path) {
    remove_if_present(path);
    std::os::unix::fs::symlink("/dev/zero", path).unwrap();
}

fn callers_file(server: &TestServer) -> PathBuf {
    server.ws().join(".volcanic/a2a/callers.json")
}

fn card_file(server: &TestServer) -> PathBuf {
    server.ws().join(".volcanic/a2a/card.json")
}

/// The public card's status and name, within [`SHORT`].
async fn public_card(server: &TestServer) -> (u16, Value) {
    let request = server.client.get(format!("{}/.well-known/agent-card.json", server.base));
    let response = tokio::time::timeout(SHORT, request.send()).await.expect("card hung").unwrap();
    let status = response.status().as_u16();
    let card: Value = response.json().await.unwrap();
    (status, card["name"].clone())
}

/// A JSON-RPC call within [`SHORT`]: its HTTP status and body.
async fn call(server: &TestServer, key: &str, method: &str, params: Value) -> (u16, Value) {
    let request = server
        .client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", key)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    let response = tokio::time::timeout(SHORT, request.send())
        .await
        .unwrap_or_else(|_| panic!("{method} hung"))
        .unwrap();
    let status = response.status().as_u16();
    let text = tokio::time::timeout(SHORT, response.text()).await.unwrap().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// Several authenticated calls at once (more than the runtime has worker threads), each
/// answered 401; and the public card still answers.
async fn assert_no_callers_and_card_answers(server: &TestServer) {
    let calls = (0..8).map(|_| call(server, KEY, "ListTasks", json!({})));
    let statuses: Vec<u16> =
        futures_util::future::join_all(calls).await.into_iter().map(|(s, _)| s).collect();
    assert_eq!(statuses, vec![401; 8]);
    assert_eq!(public_card(server).await, (200, json!("Volcanic assistant")));
}

/// The server answers the first caller's key again.
async fn assert_key_works(server: &TestServer) {
    let (status, body) = call(server, KEY, "ListTasks", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["result"]["tasks"].is_array(), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_file_replaced_by_a_fifo_answers_401_and_recovers_when_restored() {
    let server = TestServer::start().await;
    assert_key_works(&server).await;
    let fifo = Fifo::plant(&callers_file(&server));
    assert_no_callers_and_card_answers(&server).await;
    drop(fifo);
    write_callers(server.ws(), &[("travel-bot", KEY)]);
    assert_key_works(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_file_linked_to_dev_zero_or_a_good_file_answers_401_and_recovers() {
    let server = TestServer::start().await;
    assert_key_works(&server).await;
    link_to_dev_zero(&callers_file(&server));
    assert_no_callers_and_card_answers(&server).await;
    // A link to a valid callers file is refused too: the server's files are never links.
    let elsewhere = tempfile::tempdir().unwrap();
    write_callers(elsewhere.path(), &[("travel-bot", KEY)]);
    remove_if_present(&callers_file(&server));
    std::os::unix::fs::symlink(callers_file_of(elsewhere.path()), callers_file(&server)).unwrap();
    assert_no_callers_and_card_answers(&server).await;
    remove_if_present(&callers_file(&server));
    write_callers(server.ws(), &[("travel-bot", KEY)]);
    assert_key_works(&server).await;
}

fn callers_file_of(workspace: &Path) -> PathBuf {
    workspace.join(".volcanic/a2a/callers.json")
}

/// A callers.json of `size` bytes that lists the first caller (JSON padded with spaces).
fn padded_callers(size: usize) -> String {
    let list = format!(r#"[{{"name":"travel-bot","key":"{KEY}"}}]"#);
    format!("{list}{}", " ".repeat(size - list.len()))
}

#[tokio::test]
async fn callers_file_over_1_mib_is_treated_as_absent() {
    let server = TestServer::start().await;
    std::fs::write(callers_file(&server), padded_callers(1024 * 1024)).unwrap();
    assert_key_works(&server).await;
    std::fs::write(callers_file(&server), padded_callers(2 * 1024 * 1024)).unwrap();
    assert_no_callers_and_card_answers(&server).await;
    std::fs::write(callers_file(&server), padded_callers(1024 * 1024 + 1)).unwrap();
    assert_no_callers_and_card_answers(&server).await;
    write_callers(server.ws(), &[("travel-bot", KEY)]);
    assert_key_works(&server).await;
}

/// The extended card's name, within [`SHORT`].
async fn extended_card_name(server: &TestServer) -> Value {
    let (status, body) = call(server, KEY, "GetExtendedAgentCard", json!({})).await;
    assert_eq!(status, 200, "{body}");
    body["result"]["name"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn card_file_fifo_link_or_oversized_falls_back_and_recovers() {
    let server = TestServer::start().await;
    let card = r#"{"name":"Ada"}"#;
    std::fs::write(card_file(&server), card).unwrap();
    assert_eq!(extended_card_name(&server).await, "Ada");
    let fallback = json!("Volcanic assistant");

    let fifo = Fifo::plant(&card_file(&server));
    assert_eq!(extended_card_name(&server).await, fallback, "FIFO");
    assert_eq!(public_card(&server).await, (200, fallback.clone()));
    drop(fifo);

    link_to_dev_zero(&card_file(&server));
    assert_eq!(extended_card_name(&server).await, fallback, "link to /dev/zero");

    remove_if_present(&card_file(&server));
    let padded = format!("{card}{}", " ".repeat(2 * 1024 * 1024));
    std::fs::write(card_file(&server), padded).unwrap();
    assert_eq!(extended_card_name(&server).await, fallback, "2 MiB");

    std::fs::write(card_file(&server), card).unwrap();
    assert_eq!(extended_card_name(&server).await, "Ada");
}

/// A completed task of the first caller: its id and its file's bytes.
async fn completed_task(server: &TestServer) -> (String, Vec<u8>) {
    let task = server.send("hello").await;
    let id = task["task"]["id"].as_str().unwrap_or_else(|| panic!("no task: {task}")).to_string();
    let bytes = std::fs::read(server.task_path(&id)).unwrap();
    (id, bytes)
}

/// GetTask's error code for `id` (`None`: it answered the task).
async fn get_task_error(server: &TestServer, id: &str) -> Option<Value> {
    let (status, body) = call(server, KEY, "GetTask", json!({"id": id})).await;
    assert_eq!(status, 200, "{body}");
    if body["result"]["id"] == id {
        return None;
    }
    Some(body["error"]["code"].clone())
}

/// ListTasks' task ids.
async fn listed(server: &TestServer) -> Vec<Value> {
    let (status, body) = call(server, KEY, "ListTasks", json!({})).await;
    assert_eq!(status, 200, "{body}");
    body["result"]["tasks"].as_array().unwrap().iter().map(|t| t["id"].clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_file_fifo_link_or_oversized_reads_as_not_found_and_list_answers() {
    // MaxFileBytes of 1 KiB: the task file cap is 8 × 1366 + 1 MiB bytes.
    let options = A2aOptions { max_file_bytes: 1024, ..A2aOptions::default() };
    let cap = options.max_task_file_bytes();
    assert_eq!(cap, 8 * 1366 + 1024 * 1024);
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    let (id, bytes) = completed_task(&server).await;
    let (other, _) = completed_task(&server).await;
    assert_eq!(get_task_error(&server, &id).await, None);
    let not_found = Some(json!(-32001));

    let fifo = Fifo::plant(&server.task_path(&id));
    assert_eq!(get_task_error(&server, &id).await, not_found, "FIFO");
    assert_eq!(listed(&server).await, vec![json!(other.clone())], "FIFO");
    assert_eq!(public_card(&server).await.0, 200);
    drop(fifo);

    link_to_dev_zero(&server.task_path(&id));
    assert_eq!(get_task_error(&server, &id).await, not_found, "link to /dev/zero");
    assert_eq!(listed(&server).await, vec![json!(other.clone())], "link to /dev/zero");

    // The same task, valid JSON, padded past the cap with spaces.
    remove_if_present(&server.task_path(&id));
    let mut padded = bytes.clone();
    padded.resize(usize::try_from(cap).unwrap() + 1, b' ');
    std::fs::write(server.task_path(&id), &padded).unwrap();
    assert_eq!(get_task_error(&server, &id).await, not_found, "over the cap");
    assert_eq!(listed(&server).await, vec![json!(other.clone())], "over the cap");

    // At the cap it reads.
    padded.truncate(usize::try_from(cap).unwrap());
    std::fs::write(server.task_path(&id), &padded).unwrap();
    assert_eq!(get_task_error(&server, &id).await, None, "at the cap");

    std::fs::write(server.task_path(&id), &bytes).unwrap();
    assert_eq!(get_task_error(&server, &id).await, None);
    let mut both = listed(&server).await;
    both.sort_by_key(Value::to_string);
    let mut expected = vec![json!(id), json!(other)];
    expected.sort_by_key(Value::to_string);
    assert_eq!(both, expected);
}

#[tokio::test]
async fn task_write_replaces_a_planted_symlink_and_leaves_its_target_alone() {
    let server = TestServer::start().await;
    let prompt = directive(json!([{"sleep_ms": 60_000}]));
    let params = json!({
        "message": send_params(&prompt, None)["message"],
        "configuration": {"returnImmediately": true},
    });
    let (status, body) = call(&server, KEY, "SendMessage", params).await;
    assert_eq!(status, 200, "{body}");
    let id = body["result"]["task"]["id"].as_str().unwrap().to_string();
    // Subscribed before the cancel: the stream ends once the final state is written.
    let (subscribed, is_subscribed) = tokio::sync::oneshot::channel();
    let subscriber = {
        let (base, id) = (server.base.clone(), id.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let request = client
                .post(format!("{base}/a2a"))
                .header("X-API-Key", KEY)
                .header("A2A-Version", "1.0")
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
                    "params": {"id": id}}));
            let mut response = request.send().await.unwrap();
            let mut events = Vec::new();
            let mut subscribed = Some(subscribed);
            while let Some(chunk) = response.chunk().await.unwrap() {
                events.extend_from_slice(&chunk);
                if let Some(subscribed) = subscribed.take() {
                    // The test is waiting on this; it fails on its own if it is gone.
                    let _ = subscribed.send(());
                }
            }
            String::from_utf8(events).unwrap()
        })
    };
    tokio::time::timeout(SHORT, is_subscribed).await.expect("no first event").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("owner.txt");
    std::fs::write(&target, "the owner's file").unwrap();
    remove_if_present(&server.task_path(&id));
    std::os::unix::fs::symlink(&target, server.task_path(&id)).unwrap();

    let (status, canceled) = call(&server, KEY, "CancelTask", json!({"id": id})).await;
    assert_eq!(status, 200, "{canceled}");
    let events = tokio::time::timeout(SHORT, subscriber).await.expect("stream hung").unwrap();
    assert!(events.contains("TASK_STATE_CANCELED"), "{events}");

    assert_eq!(std::fs::read_to_string(&target).unwrap(), "the owner's file");
    let meta = std::fs::symlink_metadata(server.task_path(&id)).unwrap();
    assert!(meta.file_type().is_file(), "the link was replaced by the task file");
    let file: Value =
        serde_json::from_slice(&std::fs::read(server.task_path(&id)).unwrap()).unwrap();
    assert_eq!(file["status"]["state"], "TASK_STATE_CANCELED");
}
