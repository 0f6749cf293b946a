//! The public card and the per-caller extended card.

use serde_json::{Value, json};

use crate::support::*;

async fn public(server: &TestServer) -> Value {
    server
        .client
        .get(format!("{}/.well-known/agent-card.json", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn card_public_is_generic() {
    let server = TestServer::start().await;
    std::fs::write(server.ws().join("PERSONA.md"), "Secret persona of the owner").unwrap();
    let card = public(&server).await;
    assert_eq!(card["name"], "Volcanic assistant");
    assert!(!card.to_string().contains("Secret persona"));
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    assert_eq!(
        interfaces[0],
        json!({"url": format!("{}/a2a", server.base), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"})
    );
    assert_eq!(
        interfaces[1],
        json!({"url": format!("{}/a2a/v1", server.base), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"})
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    assert_eq!(card["capabilities"]["pushNotifications"], true);
    assert!(card["securitySchemes"]["apiKey"].is_object());
    // The 0.3 fields of the blended card.
    assert_eq!(card["url"], format!("{}/a2a", server.base));
    assert_eq!(card["preferredTransport"], "JSONRPC");
}

#[tokio::test]
async fn card_extended_from_card_json() {
    let server = TestServer::start().await;
    std::fs::write(
        server.ws().join(".volcanic/a2a/card.json"),
        r#"{"name":"Eugene's assistant","description":"Schedules meetings.","skills":[{"id":"scheduling","name":"Scheduling","description":"Books meetings","tags":["calendar"]}]}"#,
    )
    .unwrap();
    let card = server.rpc(KEY, "GetExtendedAgentCard", json!({})).await["result"].clone();
    assert_eq!(card["name"], "Eugene's assistant");
    assert_eq!(card["description"], "Schedules meetings.");
    assert_eq!(card["skills"][0]["id"], "scheduling");
    assert!(card.get("kind").is_none() && card.get("url").is_none(), "1.0 shape only: {card}");
}

#[tokio::test]
async fn card_extended_falls_back_to_persona() {
    let server = TestServer::start().await;
    std::fs::write(server.ws().join("PERSONA.md"), "# Ada, Eugene's assistant\nMore.").unwrap();
    let card = server.rpc(KEY, "GetExtendedAgentCard", json!({})).await["result"].clone();
    assert_eq!(card["name"], "Volcanic assistant");
    assert_eq!(card["description"], "Ada, Eugene's assistant");
    let (status, rest) = server.rest(KEY, reqwest::Method::GET, "/extendedAgentCard", None).await;
    assert_eq!(status, 200);
    assert_eq!(rest["description"], "Ada, Eugene's assistant");
}
