//! A task's history: the conversation in the order it happened (the caller's message, the
//! agent's question, the caller's answer), the same through every binding and version, and
//! without the run's progress lines (`using <tool>`), which are status updates.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

/// Each message of `task`'s history as (role, text), whatever the binding's shape: 1.0 and 0.3
/// REST say `ROLE_USER`, 0.3 JSON-RPC `user`; 0.3 REST calls the parts `content`.
fn turns(task: &Value) -> Vec<(String, String)> {
    task["history"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|message| {
            let role = message["role"].as_str().unwrap_or("?");
            let role = role.trim_start_matches("ROLE_").to_lowercase();
            let parts = message.get("parts").or_else(|| message.get("content"));
            let text: String = parts
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|part| part["text"].as_str())
                .collect();
            (role, text)
        })
        .collect()
}

fn turn(role: &str, text: &str) -> (String, String) {
    (role.to_string(), text.to_string())
}

#[tokio::test]
async fn input_required_history_is_question_before_answer_without_progress_lines() {
    let server = TestServer::start().await;
    let ask = directive(json!([
        {"tool": "bash", "args": {"command": "true"}},
        {"tool": "request_input", "args": {"question": "Which city?"}},
    ]));
    let events =
        server.rpc_stream(KEY, Some("1.0"), "SendStreamingMessage", send_params(&ask, None)).await;
    let task_id = events[0]["result"]["task"]["id"].as_str().unwrap().to_string();
    // The progress lines are status updates: the stream shows them.
    let said: Vec<&str> = events
        .iter()
        .filter_map(|e| {
            e["result"]["statusUpdate"]["status"]["message"]["parts"][0]["text"].as_str()
        })
        .collect();
    assert_eq!(said, ["using bash", "using request_input", "Which city?"], "{events:?}");

    // Asked: the history is the caller's message; the question is the status message.
    let asked = server.rpc(KEY, "GetTask", json!({"id": task_id})).await["result"].clone();
    assert_eq!(asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{asked}");
    assert_eq!(turns(&asked), [turn("user", &ask)], "{asked}");

    // The answer runs a tool too, whose progress line stays out of the history as well.
    let answer = format!(
        "Paris\n{}",
        directive(json!([
            {"tool": "bash", "args": {"command": "true"}},
            {"text": "Booked for Paris"},
        ]))
    );
    let params = send_params(&answer, Some(json!({"taskId": task_id})));
    let done = server.rpc(KEY, "SendMessage", params).await["result"]["task"].clone();
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let conversation = [turn("user", &ask), turn("agent", "Which city?"), turn("user", &answer)];
    assert_eq!(turns(&done), conversation, "{done}");
    let last_two = &conversation[1..];

    // Every read of the task says the same, with or without a historyLength.
    let rpc = |version: &'static str, method: &'static str, params: Value| {
        let server = &server;
        async move { server.rpc_versioned(KEY, Some(version), method, params).await["result"].clone() }
    };
    let full = rpc("1.0", "GetTask", json!({"id": task_id})).await;
    assert_eq!(turns(&full), conversation, "JSON-RPC 1.0: {full}");
    let two = rpc("1.0", "GetTask", json!({"id": task_id, "historyLength": 2})).await;
    assert_eq!(turns(&two), last_two, "JSON-RPC 1.0, historyLength 2: {two}");
    let full = rpc("0.3", "tasks/get", json!({"id": task_id})).await;
    assert_eq!(turns(&full), conversation, "JSON-RPC 0.3: {full}");
    let two = rpc("0.3", "tasks/get", json!({"id": task_id, "historyLength": 2})).await;
    assert_eq!(turns(&two), last_two, "JSON-RPC 0.3, historyLength 2: {two}");
    for version in ["1.0", "0.3"] {
        let path = format!("/tasks/{task_id}");
        let (status, full) =
            server.rest_versioned(KEY, Some(version), Method::GET, &path, None).await;
        assert_eq!(status, 200, "{full}");
        assert_eq!(turns(&full), conversation, "REST {version}: {full}");
        let path = format!("/tasks/{task_id}?historyLength=2");
        let (_, two) = server.rest_versioned(KEY, Some(version), Method::GET, &path, None).await;
        assert_eq!(turns(&two), last_two, "REST {version}, historyLength 2: {two}");
    }
    // And so does the task file.
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(server.task_path(&task_id)).unwrap())
            .unwrap();
    assert_eq!(turns(&file), conversation, "{file}");
}

#[tokio::test]
async fn a_continuation_refused_at_the_hop_limit_keeps_the_question_before_the_answer() {
    let server = TestServer::start().await;
    let ask = directive(json!([{"tool": "request_input", "args": {"question": "Which city?"}}]));
    let asked = server.send(&ask).await["task"].clone();
    let task_id = asked["id"].as_str().unwrap();
    assert_eq!(asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{asked}");

    // An answer that has come through too many agents already fails the task.
    let extra = json!({"taskId": task_id, "metadata": {"volcanic.hops": 4}});
    let params = send_params("Paris", Some(extra));
    let failed = server.rpc(KEY, "SendMessage", params).await["result"]["task"].clone();
    assert_eq!(failed["status"]["state"], "TASK_STATE_FAILED", "{failed}");
    let conversation = [turn("user", &ask), turn("agent", "Which city?"), turn("user", "Paris")];
    assert_eq!(turns(&failed), conversation, "{failed}");
}
