//! `OpenAiProvider` against a fake Chat Completions API (OpenAI, Ollama and DeepSeek flavours).

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use volcanic_core::message::{AssistantBlock, AssistantMessage, StopReason, ToolCall, Usage};
use volcanic_core::provider::{
    Delta, MaxTokensField, OpenAiConfig, OpenAiProvider, Provider, ProviderError, ProviderErrorKind,
};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{
    DEADLINE, Deltas, StalledServer, refused_url, round_trip_request, simple_request, sse,
};

const KEY: &str = "sk-proj-test-0123456789abcdef";
const MODEL: &str = "gpt-4.1";

const TEXT_STREAM: &str = r#"data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b376dfbbd5","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b376dfbbd5","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b376dfbbd5","choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b376dfbbd5","choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b376dfbbd5","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b376dfbbd5","choices":[],"usage":{"prompt_tokens":1117,"completion_tokens":4,"total_tokens":1121,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}

data: [DONE]

"#;

const TOOL_STREAM: &str = r#"data: {"id":"chatcmpl-BBf1QmN0","object":"chat.completion.chunk","created":1742000000,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_a1b2c3","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BBf1QmN0","object":"chat.completion.chunk","created":1742000000,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_a1b2c3","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"lo"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BBf1QmN0","object":"chat.completion.chunk","created":1742000000,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_a1b2c3","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"cation\": \"Pa"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BBf1QmN0","object":"chat.completion.chunk","created":1742000000,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_a1b2c3","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ris, France\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BBf1QmN0","object":"chat.completion.chunk","created":1742000000,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_a1b2c3","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_Wx7sKq2LmP4nR8tV1yZ3bC5d","type":"function","function":{"name":"get_time","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BBf1QmN0","object":"chat.completion.chunk","created":1742000000,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_a1b2c3","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\": "}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BBf1QmN0","object":"chat.completion.chunk","created":1742000000,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_a1b2c3","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"Europe/Paris\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BBf1QmN0","object":"chat.completion.chunk","created":1742000000,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_a1b2c3","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"chatcmpl-BBf1QmN0","object":"chat.completion.chunk","created":1742000000,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_a1b2c3","choices":[],"usage":{"prompt_tokens":82,"completion_tokens":41,"total_tokens":123,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}

data: [DONE]

"#;

/// DeepSeek's reasoner: thinking in `reasoning_content`, usage in the last choice chunk.
const REASONING_STREAM: &str = r#"data: {"id":"5f2b7a1e-9c3d","object":"chat.completion.chunk","created":1742000100,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08_prod0425fp8","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"5f2b7a1e-9c3d","object":"chat.completion.chunk","created":1742000100,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08_prod0425fp8","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Compare 9.11"},"logprobs":null,"finish_reason":null}]}

data: {"id":"5f2b7a1e-9c3d","object":"chat.completion.chunk","created":1742000100,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08_prod0425fp8","choices":[{"index":0,"delta":{"content":null,"reasoning_content":" and 9.8."},"logprobs":null,"finish_reason":null}]}

data: {"id":"5f2b7a1e-9c3d","object":"chat.completion.chunk","created":1742000100,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08_prod0425fp8","choices":[{"index":0,"delta":{"content":"9.8","reasoning_content":null},"logprobs":null,"finish_reason":null}]}

data: {"id":"5f2b7a1e-9c3d","object":"chat.completion.chunk","created":1742000100,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08_prod0425fp8","choices":[{"index":0,"delta":{"content":" is larger.","reasoning_content":null},"logprobs":null,"finish_reason":null}]}

data: {"id":"5f2b7a1e-9c3d","object":"chat.completion.chunk","created":1742000100,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08_prod0425fp8","choices":[{"index":0,"delta":{"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":15,"completion_tokens":40,"total_tokens":55,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":30},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":15}}

data: [DONE]

"#;

/// Ollama's compatibility layer: whole tool calls in one chunk, finished with `stop`.
const OLLAMA_STREAM: &str = r#"data: {"id":"chatcmpl-611","object":"chat.completion.chunk","created":1742000200,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_x1v2ab9c","index":0,"type":"function","function":{"name":"ls","arguments":"{\"path\":\"src\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-611","object":"chat.completion.chunk","created":1742000200,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}

data: {"id":"chatcmpl-611","object":"chat.completion.chunk","created":1742000200,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":160,"completion_tokens":18,"total_tokens":178}}

data: [DONE]

"#;

/// The first chunks of an answer, without its end.
const STREAM_START: &str = r#"data: {"id":"chatcmpl-Cut","object":"chat.completion.chunk","created":1742000300,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_b376dfbbd5","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-Cut","object":"chat.completion.chunk","created":1742000300,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_b376dfbbd5","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}],"usage":null}

"#;

fn config(base_url: &str) -> OpenAiConfig {
    OpenAiConfig { base_url: format!("{base_url}/v1"), ..OpenAiConfig::new(KEY) }
}

fn provider(base_url: &str) -> OpenAiProvider {
    OpenAiProvider::new(config(base_url)).unwrap()
}

async fn server_answering(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

async fn call(
    provider: &OpenAiProvider,
    deltas: &Deltas,
) -> Result<AssistantMessage, ProviderError> {
    let sink = |delta| deltas.push(delta);
    provider.complete(&simple_request(MODEL), &sink, &CancellationToken::new()).await
}

async fn error_for(response: ResponseTemplate) -> ProviderError {
    let server = server_answering(response).await;
    call(&provider(&server.uri()), &Deltas::default()).await.unwrap_err()
}

fn api_error(status: u16, kind: &str, code: Option<&str>, message: &str) -> ResponseTemplate {
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    ResponseTemplate::new(status).set_body_json(body)
}

fn answer(content: Vec<AssistantBlock>, stop_reason: StopReason, usage: Usage) -> AssistantMessage {
    AssistantMessage {
        content,
        stop_reason,
        error: None,
        usage,
        provider: "openai".into(),
        model: MODEL.into(),
    }
}

#[tokio::test]
async fn openai_text_answer_streams_deltas_and_returns_message() {
    let server = server_answering(sse(TEXT_STREAM)).await;
    let deltas = Deltas::default();

    let message = call(&provider(&server.uri()), &deltas).await.unwrap();

    assert_eq!(
        deltas.seen(),
        vec![Delta::Text("Hello".into()), Delta::Text(" there".into()), Delta::Text("!".into())]
    );
    assert_eq!(
        message,
        answer(
            vec![AssistantBlock::Text { text: "Hello there!".into() }],
            StopReason::Stop,
            Usage {
                input_tokens: 93,
                output_tokens: 4,
                cache_read_tokens: 1024,
                cache_write_tokens: 0,
                estimated: false,
            },
        )
    );
}

#[tokio::test]
async fn openai_tool_call_arguments_split_across_chunks_are_assembled() {
    let server = server_answering(sse(TOOL_STREAM)).await;
    let deltas = Deltas::default();

    let message = call(&provider(&server.uri()), &deltas).await.unwrap();

    assert_eq!(deltas.seen(), vec![]);
    assert_eq!(
        message,
        answer(
            vec![
                AssistantBlock::ToolCall(ToolCall {
                    id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
                    name: "get_weather".into(),
                    args: json!({"location": "Paris, France"}),
                }),
                AssistantBlock::ToolCall(ToolCall {
                    id: "call_Wx7sKq2LmP4nR8tV1yZ3bC5d".into(),
                    name: "get_time".into(),
                    args: json!({"tz": "Europe/Paris"}),
                }),
            ],
            StopReason::ToolUse,
            Usage { input_tokens: 82, output_tokens: 41, ..Usage::default() },
        )
    );
}

#[tokio::test]
async fn openai_reasoning_content_is_streamed_as_thinking() {
    let server = server_answering(sse(REASONING_STREAM)).await;
    let deltas = Deltas::default();

    let message = call(&provider(&server.uri()), &deltas).await.unwrap();

    assert_eq!(
        deltas.seen(),
        vec![
            Delta::Thinking("Compare 9.11".into()),
            Delta::Thinking(" and 9.8.".into()),
            Delta::Text("9.8".into()),
            Delta::Text(" is larger.".into()),
        ]
    );
    assert_eq!(
        message,
        answer(
            vec![
                AssistantBlock::Thinking { text: "Compare 9.11 and 9.8.".into(), signature: None },
                AssistantBlock::Text { text: "9.8 is larger.".into() },
            ],
            StopReason::Stop,
            Usage { input_tokens: 15, output_tokens: 40, ..Usage::default() },
        )
    );
}

#[tokio::test]
async fn openai_request_carries_bearer_system_tools_and_converted_messages() {
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
        [header("authorization"), header("content-type")],
        [Some(format!("Bearer {KEY}")), Some("application/json".into())]
    );
    assert_eq!(
        request.body_json::<Value>().unwrap(),
        json!({
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "What is in src?"},
                {"role": "assistant", "content": "Listing.", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\":\"src\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"README.md\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "main.rs"},
                {"role": "tool", "tool_call_id": "call_2", "content": "no such file"},
                {"role": "user", "content": "[note] the run was resumed"},
                {"role": "user", "content": "Thanks, go on"}
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 2048,
            "tools": [{
                "type": "function",
                "function": {
                    "name": "ls",
                    "description": "List a folder",
                    "parameters": {
                        "type": "object",
                        "properties": {"path": {"type": "string"}},
                        "required": ["path"]
                    }
                }
            }]
        })
    );
}

#[tokio::test]
async fn openai_without_api_key_sends_no_authorization_and_reads_ollama_tool_calls() {
    let server = server_answering(sse(OLLAMA_STREAM)).await;
    let config = OpenAiConfig { api_key: None, model: "llama3.2".into(), ..config(&server.uri()) };
    let provider = OpenAiProvider::new(config).unwrap();
    let request =
        volcanic_core::provider::ModelRequest { model: String::new(), ..simple_request("") };

    let message = provider.complete(&request, &|_| {}, &CancellationToken::new()).await.unwrap();

    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests[0].headers.get("authorization"), None);
    assert_eq!(requests[0].body_json::<Value>().unwrap()["model"], json!("llama3.2"));
    assert_eq!(
        message,
        AssistantMessage {
            model: "llama3.2".into(),
            ..answer(
                vec![AssistantBlock::ToolCall(ToolCall {
                    id: "call_x1v2ab9c".into(),
                    name: "ls".into(),
                    args: json!({"path": "src"}),
                })],
                StopReason::ToolUse,
                Usage { input_tokens: 160, output_tokens: 18, ..Usage::default() },
            )
        }
    );
}

#[tokio::test]
async fn openai_max_completion_tokens_field_replaces_max_tokens() {
    let server = server_answering(sse(TEXT_STREAM)).await;
    let config = OpenAiConfig {
        max_tokens_field: MaxTokensField::MaxCompletionTokens,
        ..config(&server.uri())
    };

    OpenAiProvider::new(config)
        .unwrap()
        .complete(&simple_request(MODEL), &|_| {}, &CancellationToken::new())
        .await
        .unwrap();

    let body = server.received_requests().await.unwrap()[0].body_json::<Value>().unwrap();
    assert_eq!(
        (body.get("max_tokens"), body.get("max_completion_tokens")),
        (None, Some(&json!(1024)))
    );
}

#[tokio::test]
async fn openai_unauthorized_echoing_the_key_is_auth_without_the_key() {
    let message = format!(
        "Incorrect API key provided: {KEY}. You can find your API key at \
         https://platform.openai.com/account/api-keys."
    );
    let error =
        error_for(api_error(401, "invalid_request_error", Some("invalid_api_key"), &message)).await;

    assert!(!error.message.contains(KEY), "key leaked: {}", error.message);
    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::Auth,
            message: "openai: http 401 (invalid_request_error): Incorrect API key provided: \
                      [REDACTED:openai-api-key]. You can find your API key at \
                      https://platform.openai.com/account/api-keys."
                .into(),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn openai_rate_limited_carries_retry_after() {
    let message = "Rate limit reached for gpt-4.1 on tokens per min (TPM): Limit 30000, Used \
                   29000, Requested 2000. Please try again in 2s.";
    let response = api_error(429, "tokens", Some("rate_limit_exceeded"), message)
        .insert_header("retry-after", "7")
        .insert_header("x-ratelimit-reset-tokens", "2s");

    let error = error_for(response).await;

    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::RateLimited,
            message: format!("openai: http 429 (tokens): {message}"),
            retry_after: Some(Duration::from_secs(7)),
        }
    );
}

#[tokio::test]
async fn openai_503_is_server_error() {
    let message = "The engine is currently overloaded, please try again later";
    let error = error_for(api_error(503, "server_error", None, message)).await;

    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::Server { status: 503 },
            message: format!("openai: http 503 (server_error): {message}"),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn openai_plain_text_502_is_server_error_with_the_body() {
    let error =
        error_for(ResponseTemplate::new(502).set_body_string("upstream connect error")).await;

    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::Server { status: 502 },
            message: "openai: http 502: upstream connect error".into(),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn openai_context_length_exceeded_is_context_overflow() {
    let message = "This model's maximum context length is 128000 tokens. However, your messages \
                   resulted in 130512 tokens. Please reduce the length of the messages.";
    let response =
        api_error(400, "invalid_request_error", Some("context_length_exceeded"), message);

    let error = error_for(response).await;

    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::ContextOverflow,
            message: format!("openai: http 400 (invalid_request_error): {message}"),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn openai_error_chunk_mid_stream_is_server_error() {
    let body = format!(
        "{STREAM_START}data: {{\"error\":{{\"message\":\"The server had an error while processing \
         your request. Sorry about that!\",\"type\":\"server_error\",\"param\":null,\"code\":null}}}}\n\n"
    );
    let server = server_answering(sse(&body)).await;
    let deltas = Deltas::default();

    let error = call(&provider(&server.uri()), &deltas).await.unwrap_err();

    assert_eq!(deltas.seen(), vec![Delta::Text("Hel".into())]);
    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::Server { status: 500 },
            message: "openai: stream error (server_error): The server had an error while \
                      processing your request. Sorry about that!"
                .into(),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn openai_stream_cut_before_done_is_network() {
    let error = error_for(sse(STREAM_START)).await;

    assert_eq!(
        error,
        ProviderError {
            kind: ProviderErrorKind::Network,
            message: "openai: stream ended before data: [DONE]".into(),
            retry_after: None,
        }
    );
}

#[tokio::test]
async fn openai_connection_refused_is_network() {
    let error = call(&provider(&refused_url().await), &Deltas::default()).await.unwrap_err();

    assert_eq!(
        (error.kind, error.retry_after, error.message.starts_with("openai: request failed: ")),
        (ProviderErrorKind::Network, None, true),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn openai_stalled_stream_fails_after_idle_timeout() {
    let server = StalledServer::start(STREAM_START).await;
    let config = OpenAiConfig {
        base_url: server.url.clone(),
        idle_timeout: Duration::from_millis(100),
        ..OpenAiConfig::new(KEY)
    };
    let deltas = Deltas::default();
    let sink = |delta| deltas.push(delta);

    let result = tokio::time::timeout(
        DEADLINE,
        OpenAiProvider::new(config).unwrap().complete(
            &simple_request(MODEL),
            &sink,
            &CancellationToken::new(),
        ),
    )
    .await
    .unwrap();

    assert_eq!(deltas.seen(), vec![Delta::Text("Hel".into())]);
    assert_eq!(
        result,
        Err(ProviderError::new(ProviderErrorKind::Network, "openai: stream idle for 0.1 s"))
    );
}

#[tokio::test]
async fn openai_cancel_mid_stream_returns_aborted_promptly() {
    let server = StalledServer::start(STREAM_START).await;
    let cancel = CancellationToken::new();
    let deltas = Deltas::default();
    let sink = |delta| {
        deltas.push(delta);
        cancel.cancel();
    };
    let config = OpenAiConfig { base_url: server.url.clone(), ..OpenAiConfig::new(KEY) };

    let result = tokio::time::timeout(
        DEADLINE,
        OpenAiProvider::new(config).unwrap().complete(&simple_request(MODEL), &sink, &cancel),
    )
    .await
    .unwrap();

    assert_eq!(deltas.seen(), vec![Delta::Text("Hel".into())]);
    assert_eq!(result, Err(ProviderError::new(ProviderErrorKind::Other, "aborted")));
}

#[tokio::test]
async fn openai_compatible_server_context_error_is_context_overflow() {
    // vLLM's shape: the status in `code`, OpenAI's words in `message`.
    let body = json!({
        "object": "error",
        "message": "This model's maximum context length is 32768 tokens. However, you requested 40211 tokens (32019 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.",
        "type": "BadRequestError",
        "param": null,
        "code": 400
    });
    let error = error_for(ResponseTemplate::new(400).set_body_json(body)).await;
    assert_eq!(error.kind, ProviderErrorKind::ContextOverflow);
}

#[tokio::test]
async fn openai_summary_call_of_a_compaction_is_one_user_message_without_tools() {
    let server = server_answering(sse(TEXT_STREAM)).await;
    let summary = super::summary_call(std::sync::Arc::new(provider(&server.uri())), &server).await;
    assert_eq!(
        summary,
        json!({
            "model": MODEL,
            "messages": [
                {"role": "system", "content": volcanic_core::session::SUMMARY_SYSTEM_PROMPT},
                {"role": "user", "content": super::summary_request_text("Hello there!")}
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 4096
        })
    );
}
