//! The push receiver: `POST /a2a/push/{watchId}` → the host's handler.

use serde_json::json;

use crate::support::*;

async fn push(server: &TestServer, watch: &str, token: Option<&str>, body: &str) -> u16 {
    let mut request = server
        .client
        .post(format!("{}/a2a/push/{watch}", server.base))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(token) = token {
        request = request.header("X-A2A-Notification-Token", token);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn push_receiver_unknown_watch_404() {
    let server = TestServer::with(Setup { push_receiver: true, ..Setup::default() }).await;
    assert_eq!(push(&server, "unknown-watch", Some("t"), "{}").await, 404);
    assert!(server.pushes.lock().unwrap().is_empty());
    let without = TestServer::start().await;
    assert_eq!(push(&without, "known-watch", Some("t"), "{}").await, 404, "no handler, no watches");
}

#[tokio::test]
async fn push_receiver_passes_token_and_body_without_a_key() {
    let server = TestServer::with(Setup { push_receiver: true, ..Setup::default() }).await;
    let body = json!({"task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}}});
    assert_eq!(push(&server, "known-watch", Some("tok-1"), &body.to_string()).await, 200);
    assert_eq!(
        *server.pushes.lock().unwrap(),
        vec![("known-watch".to_string(), Some("tok-1".to_string()), body)]
    );
    assert_eq!(push(&server, "known-watch", None, "not json").await, 400);
}
