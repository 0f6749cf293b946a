//! Safe retries (issue 21): a send that repeats an accepted (caller, messageId) gets the same
//! task and starts no run, in both bindings and versions; the same id with another message is
//! refused; records survive a restart and end with the window.

use std::time::Duration;

use serde_json::{Value, json};
use volcanic_a2a::A2aOptions;

use crate::support::{DEADLINE, KEY, OTHER_KEY, Setup, TestServer, directive, uuid};

fn params(message_id: &str, text: &str, extra: Value) -> Value {
    let mut message =
        json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            message[k] = v;
        }
    }
    json!({"message": message})
}

/// Runs started so far.
fn runs(server: &TestServer) -> usize {
    server.runs.load(std::sync::atomic::Ordering::SeqCst)
}

fn result_task(body: &Value) -> &Value {
    body.get("result").and_then(|r| r.get("task")).unwrap_or_else(|| panic!("no task: {body}"))
}

/// A message whose run takes a while: long enough to repeat it while it runs.
fn slow(text: &str) -> String {
    format!("{text}\n{}", directive(json!([{"sleep_ms": 1500}, {"text": "slow answer"}])))
}

#[tokio::test]
async fn retry_after_completion_returns_the_same_task_and_runs_once() {
    let server = TestServer::start().await;
    let id = uuid();
    let first = server.rpc(KEY, "SendMessage", params(&id, "hello", json!({}))).await;
    let task = result_task(&first).clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{first}");
    let again = server.rpc(KEY, "SendMessage", params(&id, "hello", json!({}))).await;
    assert_eq!(*result_task(&again), task, "the same task, unchanged");

    // Over REST too, and as a stream: the task, then its final status, and the stream ends.
    let (status, rest) = server
        .rest(KEY, reqwest::Method::POST, "/message:send", Some(params(&id, "hello", json!({}))))
        .await;
    assert_eq!(status, 200, "{rest}");
    assert_eq!(rest["task"]["id"], task["id"]);
    let events = server
        .rest_stream(KEY, "/message:stream", params(&id, "hello", json!({"metadata": {"try": 2}})))
        .await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["task"]["id"], task["id"]);
    assert_eq!(events[1]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");

    assert_eq!(runs(&server), 1, "one run for four sends");
    assert_eq!(server.faux.requests().len(), 1, "the model answered once");
}

#[tokio::test]
async fn retry_while_running_follows_the_same_task_and_is_not_busy() {
    let server = TestServer::start().await;
    let id = uuid();
    let context = json!({"contextId": "ctx-retry"});
    let mut first = params(&id, &slow("plan"), context.clone());
    first["configuration"] = json!({"returnImmediately": true});
    let first = server.rpc(KEY, "SendMessage", first).await;
    let task_id = result_task(&first)["id"].clone();
    assert_eq!(result_task(&first)["status"]["state"], "TASK_STATE_WORKING", "{first}");

    // A new message to the busy context is still refused, and is not recorded.
    let other = uuid();
    let busy = server.rpc(KEY, "SendMessage", params(&other, "too soon", context.clone())).await;
    assert_eq!(busy["error"]["code"], -32004, "{busy}");

    // The repeat, streaming and blocking at once, while the run goes on.
    let repeat = params(&id, &slow("plan"), context.clone());
    let (stream, blocking) = tokio::join!(
        server.rpc_stream(KEY, Some("1.0"), "SendStreamingMessage", repeat.clone()),
        server.rpc(KEY, "SendMessage", repeat.clone()),
    );
    assert_eq!(stream[0]["result"]["task"]["id"], task_id, "{stream:?}");
    let last = &stream.last().unwrap()["result"]["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED", "{stream:?}");
    assert_eq!(result_task(&blocking)["id"], task_id);
    assert_eq!(result_task(&blocking)["status"]["state"], "TASK_STATE_COMPLETED", "{blocking}");
    assert_eq!(runs(&server), 1);

    // The refused message was never accepted: sent again now, it makes its own task.
    let later = server.rpc(KEY, "SendMessage", params(&other, "too soon", context)).await;
    assert_ne!(result_task(&later)["id"], task_id);
    assert_eq!(runs(&server), 2);
}

#[tokio::test]
async fn retry_racing_identical_sends_make_one_task_and_one_run() {
    // Blocking and streaming, over JSON-RPC and REST, all at once.
    let server = TestServer::start().await;
    let id = uuid();
    let sends = (0..20).map(|i| {
        let server = &server;
        let body = params(&id, &slow("race"), json!({}));
        async move {
            if i % 5 == 4 {
                let events =
                    server.rpc_stream(KEY, Some("1.0"), "SendStreamingMessage", body).await;
                let last = &events.last().unwrap()["result"]["statusUpdate"]["status"];
                assert_eq!(last["state"], "TASK_STATE_COMPLETED", "{events:?}");
                events[0]["result"]["task"]["id"].clone()
            } else if i % 4 == 3 {
                let (status, body) =
                    server.rest(KEY, reqwest::Method::POST, "/message:send", Some(body)).await;
                assert_eq!(status, 200, "{body}");
                body["task"]["id"].clone()
            } else {
                result_task(&server.rpc(KEY, "SendMessage", body).await)["id"].clone()
            }
        }
    });
    let ids = tokio::time::timeout(DEADLINE, futures_util::future::join_all(sends)).await.unwrap();
    assert!(ids.iter().all(|t| *t == ids[0] && t.is_string()), "{ids:?}");
    assert_eq!(runs(&server), 1);
    let files = std::fs::read_dir(server.ws().join(".volcanic/a2a/tasks")).unwrap().count();
    assert_eq!(files, 1, "one task file");
}

#[tokio::test]
async fn retry_same_message_id_with_another_message_is_refused() {
    let server = TestServer::start().await;
    let id = uuid();
    let first = server.rpc(KEY, "SendMessage", params(&id, "hello", json!({}))).await;
    let task_id = result_task(&first)["id"].clone();

    for changed in [
        params(&id, "hello!", json!({})),
        params(&id, "hello", json!({"contextId": "elsewhere"})),
        params(&id, "hello", json!({"taskId": task_id})),
    ] {
        let body = server.rpc(KEY, "SendMessage", changed.clone()).await;
        assert_eq!(body["error"]["code"], -32602, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("already used for a different message"), "{message}");
        let (status, rest) =
            server.rest(KEY, reqwest::Method::POST, "/message:send", Some(changed)).await;
        assert_eq!(status, 400, "{rest}");
        assert_eq!(rest["error"]["status"], "INVALID_ARGUMENT", "{rest}");
    }
    // Metadata and configuration are not part of the message's identity.
    let mut same = params(&id, "hello", json!({"metadata": {"attempt": 2}}));
    same["configuration"] = json!({"historyLength": 0});
    let body = server.rpc(KEY, "SendMessage", same).await;
    assert_eq!(result_task(&body)["id"], task_id, "{body}");
    assert_eq!(runs(&server), 1);
}

#[tokio::test]
async fn retry_ids_of_another_caller_are_its_own() {
    let server = TestServer::start().await;
    let id = uuid();
    let mine = server.rpc(KEY, "SendMessage", params(&id, "hello", json!({}))).await;
    let theirs = server.rpc(OTHER_KEY, "SendMessage", params(&id, "hello", json!({}))).await;
    assert_ne!(result_task(&mine)["id"], result_task(&theirs)["id"]);
    // And a different message under the same id is the other caller's business.
    let other = server.rpc(OTHER_KEY, "SendMessage", params(&uuid(), "x", json!({}))).await;
    assert!(other.get("result").is_some(), "{other}");
    assert_eq!(runs(&server), 3);
}

#[tokio::test]
async fn retry_over_0_3_returns_the_same_task() {
    let server = TestServer::start().await;
    let id = uuid();
    let message = json!({"message": {"kind": "message", "messageId": id, "role": "user",
        "parts": [{"kind": "text", "text": "hello"}]}});
    let first = server.rpc_versioned(KEY, None, "message/send", message.clone()).await;
    let task_id = first["result"]["id"].clone();
    assert_eq!(first["result"]["kind"], "task", "{first}");
    let again = server.rpc_versioned(KEY, None, "message/send", message.clone()).await;
    assert_eq!(again["result"]["id"], task_id, "{again}");
    let stream = server.rpc_stream(KEY, None, "message/stream", message).await;
    assert_eq!(stream[0]["result"]["id"], task_id, "{stream:?}");
    // The 1.0 form of the same message is the same message.
    let v1 = server.rpc(KEY, "SendMessage", params(&id, "hello", json!({}))).await;
    assert_eq!(result_task(&v1)["id"], task_id);
    assert_eq!(runs(&server), 1);
}

#[tokio::test]
async fn retry_after_a_restart_returns_the_same_task() {
    let server = TestServer::start().await;
    let id = uuid();
    let first = server.rpc(KEY, "SendMessage", params(&id, "hello", json!({}))).await;
    let task_id = result_task(&first)["id"].clone();
    let (workspace, extra, state) = server.stop().await;

    let server = TestServer::start_in(workspace, extra, state, Setup::default()).await;
    let again = server.rpc(KEY, "SendMessage", params(&id, "hello", json!({}))).await;
    assert_eq!(result_task(&again)["id"], task_id, "{again}");
    let changed = server.rpc(KEY, "SendMessage", params(&id, "bye", json!({}))).await;
    assert_eq!(changed["error"]["code"], -32602, "{changed}");
    assert_eq!(runs(&server), 0, "no run after the restart");
}

#[tokio::test]
async fn retry_past_the_window_is_a_new_message() {
    let server = TestServer::start().await;
    let id = uuid();
    let first = server.rpc(KEY, "SendMessage", params(&id, "hello", json!({}))).await;
    let task_id = result_task(&first)["id"].as_str().unwrap().to_string();
    let (workspace, extra, state) = server.stop().await;

    // The record says it was accepted 25 hours ago: past the default window of 24.
    let path = workspace.path().join(".volcanic/a2a/tasks").join(format!("{task_id}.json"));
    let mut file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(file["accepted"][0]["messageId"], id.as_str(), "{file}");
    let aged = chrono::Utc::now() - chrono::Duration::hours(25);
    file["accepted"][0]["at"] = json!(aged);
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();

    let server = TestServer::start_in(workspace, extra, state, Setup::default()).await;
    let again = server.rpc(KEY, "SendMessage", params(&id, "hello, later", json!({}))).await;
    assert_ne!(result_task(&again)["id"], task_id.as_str(), "{again}");
    assert_eq!(runs(&server), 1);
}

#[tokio::test]
async fn retry_records_beyond_the_per_caller_cap_are_forgotten_oldest_first() {
    let options = A2aOptions { retry_records_per_caller: 2, ..A2aOptions::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    let ids: Vec<String> = (0..3).map(|i| format!("{}-{i}", uuid())).collect();
    let mut tasks = Vec::new();
    for id in &ids {
        let body = server.rpc(KEY, "SendMessage", params(id, "hello", json!({}))).await;
        tasks.push(result_task(&body)["id"].clone());
    }
    let newest = server.rpc(KEY, "SendMessage", params(&ids[2], "hello", json!({}))).await;
    assert_eq!(result_task(&newest)["id"], tasks[2]);
    let oldest = server.rpc(KEY, "SendMessage", params(&ids[0], "hello", json!({}))).await;
    assert_ne!(result_task(&oldest)["id"], tasks[0], "forgotten: a new task");
    assert_eq!(runs(&server), 4);
}

#[tokio::test]
async fn retry_with_a_zero_window_is_a_new_message() {
    let options = A2aOptions { retry_window: Duration::ZERO, ..A2aOptions::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    let id = uuid();
    let first = server.rpc(KEY, "SendMessage", params(&id, "hello", json!({}))).await;
    let again = server.rpc(KEY, "SendMessage", params(&id, "hello", json!({}))).await;
    assert_ne!(result_task(&first)["id"], result_task(&again)["id"]);
    assert_eq!(runs(&server), 2);
}
