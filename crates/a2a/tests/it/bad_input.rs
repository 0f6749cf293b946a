//! Bad input: each a clean error, and the server keeps serving.

use serde_json::json;

use crate::support::*;

async fn raw(server: &TestServer, body: &str) -> serde_json::Value {
    let response = server
        .client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", KEY)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn malformed_json_is_parse_error() {
    let server = TestServer::start().await;
    let body = raw(&server, "{not json").await;
    assert_eq!(body["error"]["code"], -32700);
    assert_eq!(body["id"], serde_json::Value::Null);
    assert_eq!(server.send("still alive").await["task"]["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn unknown_method_and_wrong_params_are_clean_errors() {
    let server = TestServer::start().await;
    assert_eq!(server.rpc(KEY, "NoSuchMethod", json!({})).await["error"]["code"], -32601);
    assert_eq!(server.rpc(KEY, "GetTask", json!({"id": 5})).await["error"]["code"], -32602);
    assert_eq!(
        server
            .rpc(
                KEY,
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}})
            )
            .await["error"]["code"],
        -32602
    );
    assert_eq!(
        raw(&server, r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#).await["error"]["code"],
        -32600
    );
}

#[tokio::test]
async fn invalid_context_id_is_invalid_params() {
    let server = TestServer::start().await;
    let body = server
        .rpc(KEY, "SendMessage", send_params("hi", Some(json!({"contextId": "../../etc"}))))
        .await;
    assert_eq!(body["error"]["code"], -32602);
    assert!(server.faux.requests().is_empty());
}

#[tokio::test]
async fn oversized_body_is_refused_cleanly() {
    let server = TestServer::with(Setup {
        options: volcanic_a2a::A2aOptions { max_file_bytes: 1024, ..Default::default() },
        ..Setup::default()
    })
    .await;
    let big = "x".repeat(3 * 1024 * 1024);
    let response = server
        .client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", KEY)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_params(&big, None)}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600);
    assert_eq!(server.send("still alive").await["task"]["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn unknown_version_is_version_not_supported() {
    let server = TestServer::start().await;
    let body = server.rpc_versioned(KEY, Some("2.0"), "GetTask", json!({"id": "x"})).await;
    assert_eq!(body["error"]["code"], -32009);
}
