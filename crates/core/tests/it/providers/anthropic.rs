//! `AnthropicProvider` against a fake Messages API.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use volcanic_core::message::{AssistantBlock, AssistantMessage, StopReason, ToolCall, Usage};
use volcanic_core::provider::{
    AnthropicConfig, AnthropicProvider, Delta, Provider, ProviderError, ProviderErrorKind,
};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{
    DEADLINE, Deltas, StalledServer, refused_url, round_trip_request, simple_request, sse,
};

const KEY: &str = "sk-ant-test-0123456789abcdef";
const MODEL: &str = "claude-sonnet-4-5";

const TEXT_STREAM: &str = r#"
event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":128,"cache_read_input_tokens":2048,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", world"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}

event: message_stop
data: {"type":"message_stop"}

"#;

const TOOL_STREAM: &str = r#"
event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", let me check the weather."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":", \"unit\": \"fahrenheit\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01B2c3D4e5F6g7H8i9J0kLmN","name":"get_time","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: content_block_start
data: {"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_01Zz9Yy8Xx7Ww6Vv5Uu4Tt3S","name":"read","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"path\": "}}

event: content_block_stop
data: {"type":"content_block_stop","index":3}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

const THINKING_STREAM: &str = r#"
event: message_start
data: {"type":"message_start","message":{"id":"msg_01Ab2Cd3Ef4Gh5Ij6Kl7Mn8O","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":60,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"27 * 453:\n"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"453 * 27 = 12231"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"27 * 453 = 12,231"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":40}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// The first events of an answer, without its end.
const STREAM_START: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01Cut","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}

"#;

fn provider(base_url: &str) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicConfig {
        base_url: base_url.to_owned(),
        ..AnthropicConfig::new(KEY)
    })
    .unwrap()
}

async fn server_answering(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

async fn call(
    provider: &AnthropicProvider,
    deltas: &Deltas,
) -> Result<AssistantMessage, ProviderError> {
    let sink = |delta| deltas.push(delta);
    provider.complete(&simple_request(MODEL), &sink, &CancellationToken::new()).await
}

async fn error_for(response: ResponseTemplate) -> ProviderError {
    let server = server_answering(response).await;
    call(&provider(&server.uri()), &Deltas::default()).await.unwrap_err()
}

fn api_error(status: u16, kind: &str, message: &str) -> ResponseTemplate {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    ResponseTemplate::new(status).set_body_json(body)
}

#[tokio::test]
async fn anthropic_text_answer_streams_deltas_and_returns_message() {
    let server = server_answering(sse(TEXT_STREAM)).await;
    let deltas = Deltas::default();

    let answer = call(&provider(&server.uri()), &deltas).await.unwrap();

    assert_eq!(
        deltas.seen(),
        vec![Delta::Text("Hello".into()), Delta::Text(", world".into()), Delta::Text("!".into())]
    );
    assert_eq!(
        answer,
        AssistantMessage {
            content: vec![AssistantBlock::Text { text: "Hello, world!".into() }],
            stop_reason: StopReason::Stop,
            error: None,
            usage: Usage {
                input_tokens: 472,
                output_tokens: 12,
                cache_read_tokens: 2048,
                cache_write_tokens: 128,
                estimated: false,
            },
            provider: "anthropic".into(),
            model: MODEL.into(),
        }
    );
}

#[tokio::test]
async fn anthropic_tool_call_json_split_across_deltas_is_assembled() {
    let server = server_answering(sse(TOOL_STREAM)).await;
    let deltas = Deltas::default();

    let answer = call(&provider(&server.uri()), &deltas).await.unwrap();

    assert_eq!(
        deltas.seen(),
        vec![Delta::Text("Okay".into()), Delta::Text(", let me check the weather.".into())]
    );
    assert_eq!(
        answer,
        AssistantMessage {
            content: vec![
                AssistantBlock::Text { text: "Okay, let me check the weather.".into() },
                AssistantBlock::ToolCall(ToolCall {
                    id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                    name: "get_weather".into(),
                    args: json!({"location": "San Francisco, CA", "unit": "fahrenheit"}),
                }),
                AssistantBlock::ToolCall(ToolCall {
                    id: "toolu_01B2c3D4e5F6g7H8i9J0kLmN".into(),
                    name: "get_time".into(),
                    args: json!({}),
                }),
                AssistantBlock::ToolCall(ToolCall {
                    id: "toolu_01Zz9Yy8Xx7Ww6Vv5Uu4Tt3S".into(),
                    name: "read".into(),
                    args: json!({"_invalid_json": "{\"path\": "}),
                }),
            ],
            stop_reason: StopReason::ToolUse,
            error: None,
            usage: Usage { input_tokens: 472, output_tokens: 89, ..Usage::default() },
            provider: "anthropic".into(),
            model: MODEL.into(),
        }
    );
}

#[tokio::test]
async fn anthropic_thinking_is_streamed_and_kept_with_its_signature() {
    let server = server_answering(sse(THINKING_STREAM)).await;
    let deltas = Deltas::default();

    let answer = call(&provider(&server.uri()), &deltas).await.unwrap();

    assert_eq!(
        deltas.seen(),
        vec![
            Delta::Thinking("27 * 453:\n".into()),
            Delta::Thinking("453 * 27 = 12231".into()),
            Delta::Text("27 * 453 = 12,231".into()),
        ]
    );
    assert_eq!(
        answer,
        AssistantMessage {
            content: vec![
                AssistantBlock::Thinking {
                    text: "27 * 453:\n453 * 27 = 12231".into(),
                    signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3h".into()),
                },
                AssistantBlock::Text { text: "27 * 453 = 12,231".into() },
            ],
            stop_reason: StopReason::Length,
            error: None,
            usage: Usage { input_tokens: 60, output_tokens: 40, ..Usage::default() },
            provider: "anthropic".into(),
            model: MODEL.into(),
        }
    );
}

#[tokio::test]
async fn anthropic_request_carries_headers_system_tools_and_merged_user_content() {
    let server = server_answering(sse(TEXT_STREAM)).await;
    let sink = |_| {};

    provider(&server.uri())
        .complete(&round_trip_request(MODEL), &sink, &CancellationToken::new())
        .await
        .unwrap();

    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    let header = |name: &str| request.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(
        [header("x-api-key"), header("anthropic-version"), header("content-type")],
        [Some(KEY.into()), Some("2023-06-01".into()), Some("application/json".into())]
    );
    assert_eq!(
        request.body_json::<Value>().unwrap(),
        json!({
            "model": MODEL,
            "max_tokens": 2048,
            "stream": true,
            "system": "You are terse.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "What is in src?"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "I should list it.", "signature": "sig-1"},
                    {"type": "text", "text": "Listing."},
                    {"type": "tool_use", "id": "call_1", "name": "ls", "input": {"path": "src"}},
                    {"type": "tool_use", "id": "call_2", "name": "read", "input": {"path": "README.md"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "main.rs"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "no such file", "is_error": true},
                    {"type": "text", "text": "[note] the run was resumed"},
                    {"type": "text", "text": "Thanks, go on"}
                ]}
            ],
            "tools": [{
                "name": "ls",
                "description": "List a folder",
                "input_schema": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"]
                }
            }]
        })
    );
}

#[tokio::test]
async fn anthropic_unauthorized_echoing_the_key_is_auth_without_the_key() {
    let error =
        error_for(api_error(401, "authentication_error", &format!("invalid x-api-key {KEY}")))
            .await;

    assert!(!error.message.contains(KEY), "key leaked: {}", error.message);
    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::Auth,
            message: "anthropic: http 401 (authentication_error): invalid x-api-key \
                      [REDACTED:anthropic-api-key]"
                .into(),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn anthropic_rate_limited_carries_retry_after() {
    let message = "This request would exceed the rate limit for your organization of 50 requests \
                   per minute.";
    let response = api_error(429, "rate_limit_error", message).insert_header("retry-after", "7");

    let error = error_for(response).await;

    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::RateLimited,
            message: format!("anthropic: http 429 (rate_limit_error): {message}"),
            retry_after: Some(Duration::from_secs(7)),
        }
    );
}

#[tokio::test]
async fn anthropic_529_is_overloaded() {
    let error = error_for(api_error(529, "overloaded_error", "Overloaded")).await;

    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::Overloaded,
            message: "anthropic: http 529 (overloaded_error): Overloaded".into(),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn anthropic_500_is_server_error() {
    let error = error_for(api_error(500, "api_error", "Internal server error")).await;

    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::Server { status: 500 },
            message: "anthropic: http 500 (api_error): Internal server error".into(),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn anthropic_prompt_too_long_is_context_overflow() {
    let message = "prompt is too long: 208315 tokens > 200000 maximum";
    let error = error_for(api_error(400, "invalid_request_error", message)).await;

    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::ContextOverflow,
            message: format!("anthropic: http 400 (invalid_request_error): {message}"),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn anthropic_error_event_mid_stream_is_overloaded() {
    let body = format!(
        "{STREAM_START}event: error\n\
         data: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\n"
    );
    let server = server_answering(sse(&body)).await;
    let deltas = Deltas::default();

    let error = call(&provider(&server.uri()), &deltas).await.unwrap_err();

    assert_eq!(deltas.seen(), vec![Delta::Text("Hel".into())]);
    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::Overloaded,
            message: "anthropic: stream error (overloaded_error): Overloaded".into(),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn anthropic_stream_cut_before_message_stop_is_network() {
    let error = error_for(sse(STREAM_START)).await;

    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::Network,
            message: "anthropic: stream ended before message_stop".into(),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn anthropic_connection_refused_is_network() {
    let error = call(&provider(&refused_url().await), &Deltas::default()).await.unwrap_err();

    assert_eq!(
        (error.kind, error.retry_after, error.message.starts_with("anthropic: request failed: ")),
        (ProviderErrorKind::Network, None, true),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn anthropic_cancel_mid_stream_returns_aborted_promptly() {
    let server = StalledServer::start(STREAM_START).await;
    let cancel = CancellationToken::new();
    let deltas = Deltas::default();
    let sink = |delta| {
        deltas.push(delta);
        cancel.cancel();
    };

    let result = tokio::time::timeout(
        DEADLINE,
        provider(&server.url).complete(&simple_request(MODEL), &sink, &cancel),
    )
    .await
    .unwrap();

    assert_eq!(deltas.seen(), vec![Delta::Text("Hel".into())]);
    assert_eq!(result, Err(ProviderError::new(ProviderErrorKind::Other, "aborted")));
}

/// Issue 33: a provider endpoint that answers with a redirect to another host must not get the
/// key sent there (reqwest's default policy keeps `x-api-key` across hosts).
#[tokio::test]
async fn anthropic_redirect_to_another_host_is_not_followed_with_the_key() {
    let elsewhere = MockServer::start().await;
    Mock::given(method("POST")).respond_with(sse(TEXT_STREAM)).mount(&elsewhere).await;
    let location = format!("{}/v1/messages", elsewhere.uri());
    let redirecting =
        server_answering(ResponseTemplate::new(307).insert_header("location", location.as_str()))
            .await;
    let result = call(&provider(&redirecting.uri()), &Deltas::default()).await;
    assert!(result.is_err(), "a redirect is an error, not an answer from elsewhere");
    let reached = elsewhere.received_requests().await.unwrap_or_default();
    assert!(reached.is_empty(), "the other host got {} request(s), with the key", reached.len());
}

#[tokio::test]
async fn anthropic_input_and_max_tokens_over_the_limit_is_context_overflow() {
    let message = "input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, \
decrease input length or `max_tokens` and try again";
    let error = error_for(api_error(400, "invalid_request_error", message)).await;
    assert_eq!(error.kind, ProviderErrorKind::ContextOverflow);
}

#[tokio::test]
async fn anthropic_summary_call_of_a_compaction_is_one_user_message_without_tools() {
    let server = server_answering(sse(TEXT_STREAM)).await;
    let summary = super::summary_call(std::sync::Arc::new(provider(&server.uri())), &server).await;
    assert_eq!(
        summary,
        json!({
            "model": MODEL,
            "max_tokens": 4096,
            "stream": true,
            "system": volcanic_core::session::SUMMARY_SYSTEM_PROMPT,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": super::summary_request_text("Hello, world!")}]}
            ]
        })
    );
}
