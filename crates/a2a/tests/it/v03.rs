//! 0.3 callers on JSON-RPC: method names, `kind` shapes, `final`, blocking default.

use serde_json::json;

use crate::support::*;

fn v03_params(text: &str) -> serde_json::Value {
    json!({"message": {"kind": "message", "messageId": uuid(), "role": "user", "parts": [{"kind": "text", "text": text}]}})
}

#[tokio::test]
async fn v03_message_send_blocks_and_returns_kind_task() {
    let server = TestServer::start().await;
    let body = server.rpc_versioned(KEY, None, "message/send", v03_params("hello")).await;
    let task = &body["result"];
    assert_eq!(task["kind"], "task");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(task["artifacts"][0]["parts"][0]["kind"], "text");
    let got = server
        .rpc_versioned(KEY, Some("0.3"), "tasks/get", json!({"id": task["id"], "historyLength": 0}))
        .await;
    assert_eq!(got["result"]["kind"], "task");
    assert_eq!(
        got["result"]["history"].as_array().map(Vec::len),
        Some(1),
        "0 means no limit in 0.3"
    );
}

#[tokio::test]
async fn v03_message_stream_sets_final_on_last_status() {
    let server = TestServer::start().await;
    let events = server.rpc_stream(KEY, None, "message/stream", v03_params("hello")).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["result"]["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"task"));
    let last = &events.last().unwrap()["result"];
    assert_eq!(last["kind"], "status-update");
    assert_eq!(last["final"], true);
    assert_eq!(last["status"]["state"], "completed");
    let finals = events.iter().filter(|e| e["result"]["final"] == true).count();
    assert_eq!(finals, 1);
}

#[tokio::test]
async fn v03_method_with_v10_header_is_version_not_supported() {
    let server = TestServer::start().await;
    let body = server.rpc_versioned(KEY, Some("1.0"), "message/send", v03_params("x")).await;
    assert_eq!(body["error"]["code"], -32009);
}
