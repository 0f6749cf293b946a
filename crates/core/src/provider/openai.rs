//! The OpenAI Chat Completions backend (`POST {base_url}/chat/completions` with `stream: true`),
//! which also speaks to OpenAI-compatible servers: Ollama, vLLM, llama.cpp, DeepSeek.
//!
//! It converts the conversation to chat messages, decodes the `data:` chunks (text, reasoning and
//! tool-call fragments by index, `finish_reason`, the final usage chunk, `[DONE]`) into deltas and
//! one [`AssistantMessage`], and leaves transport, timeouts and error classification to the shared
//! `http` module. It makes one attempt per call; the run loop retries.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use reqwest::header::HeaderValue;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::http::{self, HttpClient};
use super::{Delta, DeltaSink, ModelRequest, Provider, ProviderError, ProviderErrorKind, ToolSpec};
use crate::message::{AssistantBlock, AssistantMessage, Message, StopReason, ToolCall, Usage};

/// The `data:` payload that ends a complete answer.
const TERMINAL_DATA: &str = "[DONE]";

/// Which request field carries the output token cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    /// `max_tokens`: understood by every OpenAI-compatible server (Ollama, vLLM, llama.cpp) and by
    /// OpenAI's non-reasoning models such as `gpt-4.1`. The default.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: required by OpenAI's reasoning models (`o3`, `gpt-5`), which refuse
    /// `max_tokens`; older local servers ignore it.
    MaxCompletionTokens,
}

/// Settings of the OpenAI-compatible backend.
#[derive(Clone, PartialEq)]
pub struct OpenAiConfig {
    /// The API key, sent as `Authorization: Bearer`; `None` for local servers that need none.
    /// Never printed.
    pub api_key: Option<String>,
    /// The API root, requests go to `{base_url}/chat/completions`.
    /// Default `https://api.openai.com/v1`; Ollama is `http://localhost:11434/v1`.
    pub base_url: String,
    /// The model used when a request names none. Default `gpt-4.1`.
    pub model: String,
    /// Which field carries the output token cap. Default [`MaxTokensField::MaxTokens`].
    pub max_tokens_field: MaxTokensField,
    /// Longest silence while waiting for the response or the next chunk. Default 300 s.
    pub idle_timeout: Duration,
    /// Longest time to establish a connection. Default 15 s.
    pub connect_timeout: Duration,
}

impl OpenAiConfig {
    /// The default settings with this API key.
    pub fn new(api_key: impl Into<String>) -> Self {
        OpenAiConfig { api_key: Some(api_key.into()), ..OpenAiConfig::default() }
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            api_key: None,
            base_url: "https://api.openai.com/v1".to_owned(),
            model: "gpt-4.1".to_owned(),
            max_tokens_field: MaxTokensField::default(),
            idle_timeout: http::DEFAULT_IDLE_TIMEOUT,
            connect_timeout: http::DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("max_tokens_field", &self.max_tokens_field)
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// The OpenAI Chat Completions API (or a compatible server) as a [`Provider`].
pub struct OpenAiProvider {
    config: OpenAiConfig,
    url: String,
    http: HttpClient,
}

impl fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiProvider").field("config", &self.config).finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// A provider with these settings.
    ///
    /// # Errors
    /// A [`ProviderError`] of kind `Other` when the HTTP client cannot be built (no TLS backend).
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(
            "openai",
            config.api_key.as_deref(),
            config.connect_timeout,
            config.idle_timeout,
        )?;
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        Ok(OpenAiProvider { config, url, http })
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn default_model(&self) -> &str {
        &self.config.model
    }

    #[tracing::instrument(skip_all, fields(provider = "openai", model = %request.model))]
    async fn complete(
        &self,
        request: &ModelRequest,
        sink: DeltaSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<AssistantMessage, ProviderError> {
        let model = if request.model.is_empty() { &self.config.model } else { &request.model };
        let cap = Some(request.max_output_tokens);
        let (max_tokens, max_completion_tokens) = match self.config.max_tokens_field {
            MaxTokensField::MaxTokens => (cap, None),
            MaxTokensField::MaxCompletionTokens => (None, cap),
        };
        let body = WireRequest {
            model,
            messages: wire_messages(&request.system, &request.messages),
            stream: true,
            stream_options: StreamOptions { include_usage: true },
            max_tokens,
            max_completion_tokens,
            tools: request.tools.iter().map(WireTool::from).collect(),
        };
        let mut builder = self.http.post(&self.url).json(&body);
        if let Some(key) = &self.config.api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                self.http.error(ProviderErrorKind::Auth, "the api key is not a valid header value")
            })?;
            value.set_sensitive(true);
            builder = builder.header(reqwest::header::AUTHORIZATION, value);
        }
        let mut events = self.http.open_sse(builder, cancel).await?;
        let mut answer = Answer::default();
        while let Some(event) = events.next(cancel).await? {
            let data = event.data.trim();
            if data == TERMINAL_DATA {
                return Ok(answer.finish(model));
            }
            if event.event == "error" {
                return Err(self.http.stream_error(data));
            }
            let chunk = match serde_json::from_str::<Chunk>(data) {
                Ok(chunk) => chunk,
                Err(err) => return Err(self.http.malformed("chunk", &err)),
            };
            if chunk.error.is_some() {
                return Err(self.http.stream_error(data));
            }
            answer.chunk(chunk, sink);
        }
        Err(self.http.cut_short("data: [DONE]"))
    }
}

/// The answer as it streams in.
#[derive(Default)]
struct Answer {
    thinking: String,
    text: String,
    /// Tool calls by the index the server gives them.
    calls: BTreeMap<usize, PartialCall>,
    usage: Usage,
    finish_reason: Option<String>,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl Answer {
    fn chunk(&mut self, chunk: Chunk, sink: DeltaSink<'_>) {
        if let Some(usage) = chunk.usage {
            let cached = usage.prompt_tokens_details.and_then(|d| d.cached_tokens).unwrap_or(0);
            let prompt = usage.prompt_tokens.unwrap_or(0);
            // Our input count excludes cache reads, as Anthropic's does.
            self.usage.input_tokens = prompt.saturating_sub(cached);
            self.usage.cache_read_tokens = cached;
            self.usage.output_tokens = usage.completion_tokens.unwrap_or(0);
        }
        let Some(choice) = chunk.choices.into_iter().next() else { return };
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(reason);
        }
        let Some(delta) = choice.delta else { return };
        // DeepSeek and vLLM send `reasoning_content`; Ollama and OpenRouter send `reasoning`.
        let reasoning = match delta.reasoning {
            Some(Value::String(text)) => Some(text),
            Some(_) | None => None,
        };
        for thinking in [delta.reasoning_content, reasoning].into_iter().flatten() {
            if !thinking.is_empty() {
                self.thinking.push_str(&thinking);
                sink(Delta::Thinking(thinking));
            }
        }
        // A refusal is the model's answer, streamed in its own field.
        for text in [delta.content, delta.refusal].into_iter().flatten() {
            if !text.is_empty() {
                self.text.push_str(&text);
                sink(Delta::Text(text));
            }
        }
        for (position, fragment) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            // Servers that send whole calls sometimes leave out `index`.
            let index = fragment.index.unwrap_or(position);
            let call = self.calls.entry(index).or_default();
            if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
                call.id = id;
            }
            if let Some(function) = fragment.function {
                if let Some(name) = function.name.filter(|name| !name.is_empty()) {
                    call.name = name;
                }
                if let Some(arguments) = function.arguments {
                    call.arguments.push_str(&arguments);
                }
            }
        }
    }

    fn finish(self, model: &str) -> AssistantMessage {
        let mut content = Vec::new();
        if !self.thinking.is_empty() {
            content.push(AssistantBlock::Thinking { text: self.thinking, signature: None });
        }
        if !self.text.is_empty() {
            content.push(AssistantBlock::Text { text: self.text });
        }
        let has_calls = !self.calls.is_empty();
        content.extend(self.calls.into_values().map(|call| {
            AssistantBlock::ToolCall(ToolCall {
                // Some servers send no id. The made-up one must be unique across turns, not just
                // within this answer: results are paired with calls and spill files are named
                // by it.
                id: if call.id.is_empty() {
                    format!("call_{}", uuid::Uuid::now_v7().simple())
                } else {
                    call.id
                },
                name: call.name,
                args: http::parse_tool_args(&call.arguments),
            })
        }));
        let stop_reason = match self.finish_reason.as_deref() {
            Some("length") => StopReason::Length,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            // Some servers (older Ollama) finish tool calls with `stop`.
            _ if has_calls => StopReason::ToolUse,
            // `stop`, `content_filter` and reasons added later.
            _ => StopReason::Stop,
        };
        AssistantMessage {
            content,
            stop_reason,
            error: None,
            usage: self.usage,
            provider: "openai".to_owned(),
            model: model.to_owned(),
        }
    }
}

/// Converts the conversation: the system prompt first, then one chat message per item.
/// Tool results in a row are moved ahead of the user text and notes next to them, because a
/// `tool` message must follow the assistant message that made the call. Thinking is not sent back.
fn wire_messages<'a>(system: &'a str, messages: &'a [Message]) -> Vec<WireMessage<'a>> {
    let mut out = Vec::new();
    if !system.is_empty() {
        out.push(WireMessage::System { content: system });
    }
    let mut user_side: Vec<WireMessage<'a>> = Vec::new();
    for message in messages {
        match message {
            Message::User { text } => {
                user_side.push(WireMessage::User { content: Cow::Borrowed(text) });
            }
            Message::Note { text } => {
                user_side.push(WireMessage::User { content: Cow::Owned(format!("[note] {text}")) });
            }
            Message::ToolResult(result) => {
                let at =
                    user_side.iter().take_while(|m| matches!(m, WireMessage::Tool { .. })).count();
                let tool =
                    WireMessage::Tool { tool_call_id: &result.call_id, content: &result.content };
                user_side.insert(at, tool);
            }
            Message::Assistant(answer) => {
                out.append(&mut user_side);
                let text = answer.text();
                let tool_calls: Vec<WireToolCall<'_>> = answer
                    .tool_calls()
                    .map(|call| WireToolCall {
                        id: &call.id,
                        kind: "function",
                        function: WireFunction {
                            name: &call.name,
                            arguments: call.args.to_string(),
                        },
                    })
                    .collect();
                if text.is_empty() && tool_calls.is_empty() {
                    continue;
                }
                let content = (!text.is_empty()).then_some(text);
                out.push(WireMessage::Assistant { content, tool_calls });
            }
        }
    }
    out.append(&mut user_side);
    out
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: Cow<'a, str>,
    },
    Assistant {
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    /// The arguments as a JSON string, as the API wants them.
    arguments: String,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> From<&'a ToolSpec> for WireTool<'a> {
    fn from(spec: &'a ToolSpec) -> Self {
        WireTool {
            kind: "function",
            function: WireToolFunction {
                name: &spec.name,
                description: &spec.description,
                parameters: &spec.parameters,
            },
        }
    }
}

/// One `data:` chunk of the stream.
#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    /// Some servers report a failure after the 200 as a chunk with an `error` object.
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<ChoiceDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    /// A string where servers use it; anything else is ignored.
    #[serde(default)]
    reasoning: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallFragment>>,
}

#[derive(Deserialize)]
struct ToolCallFragment {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionFragment>,
}

#[derive(Deserialize)]
struct FunctionFragment {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The ids of the calls in one streamed answer whose chunks carry no `id`.
    fn ids_of_an_answer_without_ids() -> Vec<String> {
        let mut answer = Answer::default();
        let chunk = r#"{"choices":[{"delta":{"tool_calls":[
            {"index":0,"function":{"name":"ls","arguments":"{}"}},
            {"index":1,"function":{"name":"read","arguments":"{}"}}
        ]},"finish_reason":"tool_calls"}]}"#;
        answer.chunk(serde_json::from_str(chunk).unwrap(), &|_| {});
        answer.finish("llama3.2").tool_calls().map(|call| call.id.clone()).collect()
    }

    #[test]
    fn openai_calls_without_ids_get_ids_unique_across_turns() {
        let first = ids_of_an_answer_without_ids();
        let second = ids_of_an_answer_without_ids();
        let all: Vec<&String> = first.iter().chain(&second).collect();
        let mut unique = all.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 4, "ids: {all:?}");
        for id in all {
            let hex = id.strip_prefix("call_").unwrap_or_default();
            assert!(hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()), "id: {id}");
        }
    }

    #[test]
    fn openai_calls_with_ids_keep_them() {
        let mut answer = Answer::default();
        let chunk = json!({"choices": [{"delta": {"tool_calls": [
            {"index": 0, "id": "call_x1v2ab9c", "function": {"name": "ls", "arguments": "{}"}}
        ]}}]});
        answer.chunk(serde_json::from_value(chunk).unwrap(), &|_| {});
        let calls: Vec<ToolCall> = answer.finish("llama3.2").tool_calls().cloned().collect();
        assert_eq!(
            calls,
            vec![ToolCall {
                id: "call_x1v2ab9c".to_owned(),
                name: "ls".to_owned(),
                args: json!({})
            }]
        );
    }
}
