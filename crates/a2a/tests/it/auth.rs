//! Authentication and the caller directory.

use serde_json::json;

use crate::support::*;

async fn status_with(server: &TestServer, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = server.client.post(format!("{}/a2a", server.base)).json(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}
    }));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn auth_unknown_key_returns_401() {
    let server = TestServer::start().await;
    for headers in [vec![], vec![("X-API-Key", "nope")], vec![("Authorization", "Bearer nope")]] {
        let response = status_with(&server, &headers).await;
        assert_eq!(response.status(), 401);
        assert!(response.headers()["www-authenticate"].to_str().unwrap().starts_with("Bearer"));
    }
    let (status, body) = server.rest("nope", reqwest::Method::GET, "/tasks", None).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["status"], "UNAUTHENTICATED");
}

#[tokio::test]
async fn auth_bearer_and_api_key_both_work() {
    let server = TestServer::start().await;
    for headers in [
        vec![("X-API-Key", KEY)],
        vec![("Authorization", &*format!("Bearer {KEY}"))],
        vec![("authorization", &*format!("bearer {KEY}"))],
    ] {
        let response = status_with(&server, &headers).await;
        assert_eq!(response.status(), 200);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32001);
    }
}

#[tokio::test]
async fn auth_key_in_two_workspaces_returns_401() {
    let server = TestServer::with(Setup { extra_workspaces: 1, ..Setup::default() }).await;
    write_callers(server.extra[0].path(), &[("copycat", KEY)]);
    let response = status_with(&server, &[("X-API-Key", KEY)]).await;
    assert_eq!(response.status(), 401);
    // The other caller of the first workspace is unaffected.
    let response = status_with(&server, &[("X-API-Key", OTHER_KEY)]).await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn auth_callers_file_edited_applies_to_next_request() {
    let server = TestServer::start().await;
    assert_eq!(status_with(&server, &[("X-API-Key", KEY)]).await.status(), 200);
    write_callers(server.ws(), &[("travel-bot", "k_rotated_key_000099")]);
    assert_eq!(status_with(&server, &[("X-API-Key", KEY)]).await.status(), 401);
    assert_eq!(status_with(&server, &[("X-API-Key", "k_rotated_key_000099")]).await.status(), 200);
}

#[tokio::test]
async fn auth_malformed_callers_file_no_callers() {
    let server = TestServer::start().await;
    std::fs::write(
        server.ws().join(".volcanic/a2a/callers.json"),
        "[{\"name\": \"travel-bot\", \"key\": ",
    )
    .unwrap();
    assert_eq!(status_with(&server, &[("X-API-Key", KEY)]).await.status(), 401);
}

#[tokio::test]
async fn public_card_needs_no_key() {
    let server = TestServer::start().await;
    let response = server
        .client
        .get(format!("{}/.well-known/agent-card.json", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}
