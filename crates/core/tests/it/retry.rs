//! Provider failures through a session: retries with backoff, and errors that fail at once.

use std::sync::Arc;

use volcanic_core::provider::anthropic::{AnthropicConfig, AnthropicProvider};
use volcanic_core::{EventKind, RunFailure, RunOutcome};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::*;

const KEY: &str = "sk-ant-test-key-0123456789abcdef";

pub(crate) fn sse_answer(text: &str) -> String {
    let events = [
        (
            "message_start",
            serde_json::json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}),
        ),
        (
            "content_block_start",
            serde_json::json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        (
            "content_block_delta",
            serde_json::json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}),
        ),
        ("content_block_stop", serde_json::json!({"type":"content_block_stop","index":0})),
        (
            "message_delta",
            serde_json::json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}),
        ),
        ("message_stop", serde_json::json!({"type":"message_stop"})),
    ];
    events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect()
}

pub(crate) fn anthropic(server: &MockServer) -> Arc<AnthropicProvider> {
    let mut config = AnthropicConfig::new(KEY.to_string());
    config.base_url = server.uri();
    Arc::new(AnthropicProvider::new(config).unwrap())
}

#[tokio::test]
async fn rate_limited_twice_then_success_retries_with_events() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "0")
                .set_body_json(serde_json::json!({"type":"error","error":{"type":"rate_limit_error","message":"slow down"}})),
        )
        .up_to_n_times(2)
        .expect(2)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(sse_answer("finally")),
        )
        .expect(1)
        .mount(&server)
        .await;

    let dirs = Dirs::new();
    let factory = factory(&dirs, anthropic(&server));
    let session = open(&factory, &dirs, "retry").await;
    let (events, settled) = collect(session.prompt("hi").unwrap()).await;
    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert_eq!(settled.final_text, "finally");
    let retries: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::Retry { attempt, max, .. } => {
                assert_eq!(*max, 3);
                Some(*attempt)
            }
            _ => None,
        })
        .collect();
    assert_eq!(retries, vec![1, 2]);
    assert_eq!(events.iter().filter(|e| matches!(e, EventKind::Settled(_))).count(), 1);
    server.verify().await;
}

#[tokio::test]
async fn server_errors_give_up_after_max_retries() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("upstream unavailable"))
        .expect(4)
        .mount(&server)
        .await;
    let dirs = Dirs::new();
    let factory = factory(&dirs, anthropic(&server));
    let session = open(&factory, &dirs, "give-up").await;
    let (events, settled) = collect(session.prompt("hi").unwrap()).await;
    assert!(matches!(settled.outcome, RunOutcome::Failed { .. }));
    assert_eq!(events.iter().filter(|e| matches!(e, EventKind::Retry { .. })).count(), 3);
    server.verify().await;
}

#[tokio::test]
async fn unauthorized_fails_at_once_without_the_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(serde_json::json!({
            "type": "error",
            "error": {"type": "authentication_error", "message": format!("invalid x-api-key: {KEY}")}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let dirs = Dirs::new();
    let factory = factory(&dirs, anthropic(&server));
    let session = open(&factory, &dirs, "unauthorized").await;
    let (events, settled) = collect(session.prompt("hi").unwrap()).await;
    let RunOutcome::Failed { error: RunFailure::Provider { message: error } } = settled.outcome
    else {
        panic!("{:?}", settled.outcome)
    };
    assert!(!error.contains(KEY), "{error}");
    assert!(error.contains("401"), "{error}");
    assert!(!events.iter().any(|e| matches!(e, EventKind::Retry { .. })));
    let journal =
        std::fs::read_to_string(dirs.state.path().join("sessions/unauthorized/session.jsonl"))
            .unwrap();
    assert!(!journal.contains(KEY));
    server.verify().await;
}
