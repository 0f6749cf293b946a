//! The Anthropic Messages API backend (`POST /v1/messages` with `stream: true`).
//!
//! It converts the conversation to the API's alternating user/assistant shape, decodes the event
//! stream (`message_start`, `content_block_*`, `message_delta`, `message_stop`, `ping`, `error`)
//! into deltas and one [`AssistantMessage`], and leaves transport, timeouts and error
//! classification to the shared `http` module. It makes one attempt per call; the run loop retries.

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

/// The API version this adapter speaks (sent as `anthropic-version`).
const API_VERSION: &str = "2023-06-01";
/// The event that ends a complete answer.
const TERMINAL_EVENT: &str = "message_stop";

/// Settings of the Anthropic backend.
#[derive(Clone, PartialEq)]
pub struct AnthropicConfig {
    /// The API key, sent as `x-api-key`. Never printed.
    pub api_key: String,
    /// Where the API lives, without `/v1`. Default `https://api.anthropic.com`.
    pub base_url: String,
    /// The model used when a request names none. Default `claude-sonnet-4-5`.
    pub model: String,
    /// Longest silence while waiting for the response or the next event. Default 300 s.
    pub idle_timeout: Duration,
    /// Longest time to establish a connection. Default 15 s.
    pub connect_timeout: Duration,
}

impl AnthropicConfig {
    /// The default settings with this API key.
    pub fn new(api_key: impl Into<String>) -> Self {
        AnthropicConfig { api_key: api_key.into(), ..AnthropicConfig::default() }
    }
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        AnthropicConfig {
            api_key: String::new(),
            base_url: "https://api.anthropic.com".to_owned(),
            model: "claude-sonnet-4-5".to_owned(),
            idle_timeout: http::DEFAULT_IDLE_TIMEOUT,
            connect_timeout: http::DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("api_key", &"[redacted]")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// The Anthropic Messages API as a [`Provider`].
pub struct AnthropicProvider {
    config: AnthropicConfig,
    url: String,
    http: HttpClient,
}

impl fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicProvider").field("config", &self.config).finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    /// A provider with these settings.
    ///
    /// # Errors
    /// A [`ProviderError`] of kind `Other` when the HTTP client cannot be built (no TLS backend).
    pub fn new(config: AnthropicConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(
            "anthropic",
            Some(&config.api_key),
            config.connect_timeout,
            config.idle_timeout,
        )?;
        let url = format!("{}/v1/messages", config.base_url.trim_end_matches('/'));
        Ok(AnthropicProvider { config, url, http })
    }
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn default_model(&self) -> &str {
        &self.config.model
    }

    #[tracing::instrument(skip_all, fields(provider = "anthropic", model = %request.model))]
    async fn complete(
        &self,
        request: &ModelRequest,
        sink: DeltaSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<AssistantMessage, ProviderError> {
        let model = if request.model.is_empty() { &self.config.model } else { &request.model };
        let mut api_key = HeaderValue::from_str(&self.config.api_key).map_err(|_| {
            self.http.error(ProviderErrorKind::Auth, "the api key is not a valid header value")
        })?;
        api_key.set_sensitive(true);
        let body = WireRequest {
            model,
            max_tokens: request.max_output_tokens,
            stream: true,
            system: &request.system,
            messages: wire_messages(&request.messages),
            tools: request.tools.iter().map(WireTool::from).collect(),
        };
        let builder = self
            .http
            .post(&self.url)
            .header("x-api-key", api_key)
            .header("anthropic-version", API_VERSION)
            .json(&body);
        let mut events = self.http.open_sse(builder, cancel).await?;
        let mut answer = Answer::default();
        while let Some(event) = events.next(cancel).await? {
            if event.event == "error" {
                return Err(self.http.stream_error(&event.data));
            }
            let decoded = match serde_json::from_str::<StreamEvent>(&event.data) {
                Ok(decoded) => decoded,
                Err(err) => return Err(self.http.malformed(&event.event, &err)),
            };
            match decoded {
                StreamEvent::MessageStop => return Ok(answer.finish(model)),
                StreamEvent::Error {} => return Err(self.http.stream_error(&event.data)),
                StreamEvent::MessageStart { message } => answer.usage(&message.usage),
                StreamEvent::ContentBlockStart { index, content_block } => {
                    answer.start(index, content_block);
                }
                StreamEvent::ContentBlockDelta { index, delta } => answer.delta(index, delta, sink),
                StreamEvent::MessageDelta { delta, usage } => {
                    answer.stop_reason = delta.stop_reason.as_deref().map(stop_reason);
                    if let Some(usage) = usage {
                        answer.usage(&usage);
                    }
                }
                StreamEvent::ContentBlockStop {} | StreamEvent::Ping | StreamEvent::Unknown => {}
            }
        }
        Err(self.http.cut_short(TERMINAL_EVENT))
    }
}

/// The answer as it streams in: blocks by the API's index, usage, the stop reason.
#[derive(Default)]
struct Answer {
    blocks: BTreeMap<usize, PartialBlock>,
    usage: Usage,
    stop_reason: Option<StopReason>,
}

enum PartialBlock {
    Text(String),
    Thinking { text: String, signature: String },
    ToolUse { id: String, name: String, input: Value, json: String },
}

impl Answer {
    fn start(&mut self, index: usize, block: BlockStart) {
        let block = match block {
            BlockStart::Text { text } => PartialBlock::Text(text),
            BlockStart::Thinking { thinking, signature } => {
                PartialBlock::Thinking { text: thinking, signature }
            }
            BlockStart::ToolUse { id, name, input } => {
                PartialBlock::ToolUse { id, name, input, json: String::new() }
            }
            // Redacted thinking and server tool blocks have no place in our model.
            BlockStart::Unknown => return,
        };
        self.blocks.insert(index, block);
    }

    fn delta(&mut self, index: usize, delta: BlockDelta, sink: DeltaSink<'_>) {
        let Some(block) = self.blocks.get_mut(&index) else { return };
        match (block, delta) {
            (PartialBlock::Text(text), BlockDelta::TextDelta { text: more }) => {
                text.push_str(&more);
                if !more.is_empty() {
                    sink(Delta::Text(more));
                }
            }
            (PartialBlock::Thinking { text, .. }, BlockDelta::ThinkingDelta { thinking }) => {
                text.push_str(&thinking);
                if !thinking.is_empty() {
                    sink(Delta::Thinking(thinking));
                }
            }
            (
                PartialBlock::Thinking { signature, .. },
                BlockDelta::SignatureDelta { signature: more },
            ) => {
                signature.push_str(&more);
            }
            (PartialBlock::ToolUse { json, .. }, BlockDelta::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
            }
            // A delta that does not fit its block, or of a kind we do not model, is dropped.
            // Spelled out so that a new block or delta kind has to be placed here on purpose.
            (
                PartialBlock::Text(_),
                BlockDelta::InputJsonDelta { .. }
                | BlockDelta::ThinkingDelta { .. }
                | BlockDelta::SignatureDelta { .. }
                | BlockDelta::Unknown,
            )
            | (
                PartialBlock::Thinking { .. },
                BlockDelta::TextDelta { .. }
                | BlockDelta::InputJsonDelta { .. }
                | BlockDelta::Unknown,
            )
            | (
                PartialBlock::ToolUse { .. },
                BlockDelta::TextDelta { .. }
                | BlockDelta::ThinkingDelta { .. }
                | BlockDelta::SignatureDelta { .. }
                | BlockDelta::Unknown,
            ) => {}
        }
    }

    fn usage(&mut self, usage: &WireUsage) {
        let set = |field: &mut u64, value: Option<u64>| {
            if let Some(value) = value {
                *field = value;
            }
        };
        set(&mut self.usage.input_tokens, usage.input_tokens);
        set(&mut self.usage.output_tokens, usage.output_tokens);
        set(&mut self.usage.cache_read_tokens, usage.cache_read_input_tokens);
        set(&mut self.usage.cache_write_tokens, usage.cache_creation_input_tokens);
    }

    fn finish(self, model: &str) -> AssistantMessage {
        let content = self
            .blocks
            .into_values()
            .filter_map(|block| match block {
                PartialBlock::Text(text) if text.is_empty() => None,
                PartialBlock::Text(text) => Some(AssistantBlock::Text { text }),
                PartialBlock::Thinking { text, signature } => Some(AssistantBlock::Thinking {
                    text,
                    signature: (!signature.is_empty()).then_some(signature),
                }),
                PartialBlock::ToolUse { id, name, input, json } => {
                    let args = if json.trim().is_empty() && input.is_object() {
                        input
                    } else {
                        http::parse_tool_args(&json)
                    };
                    Some(AssistantBlock::ToolCall(ToolCall { id, name, args }))
                }
            })
            .collect();
        AssistantMessage {
            content,
            stop_reason: self.stop_reason.unwrap_or(StopReason::Stop),
            error: None,
            usage: self.usage,
            provider: "anthropic".to_owned(),
            model: model.to_owned(),
        }
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
        "tool_use" => StopReason::ToolUse,
        // `end_turn`, `stop_sequence`, `refusal`, `pause_turn` and reasons added later.
        _ => StopReason::Stop,
    }
}

/// Converts the conversation. User-side items in a row (tool results, user text, notes) become
/// one user message, tool results first as the API requires; empty text and thinking without a
/// signature are left out because the API refuses them.
fn wire_messages(messages: &[Message]) -> Vec<WireMessage<'_>> {
    let mut out: Vec<WireMessage<'_>> = Vec::new();
    for message in messages {
        let block = match message {
            Message::User { text } if text.is_empty() => continue,
            Message::User { text } => WireBlock::Text { text: Cow::Borrowed(text) },
            Message::Note { text } => {
                WireBlock::Text { text: Cow::Owned(format!("[note] {text}")) }
            }
            Message::ToolResult(result) => WireBlock::ToolResult {
                tool_use_id: &result.call_id,
                content: &result.content,
                is_error: result.is_error,
            },
            Message::Assistant(answer) => {
                let content: Vec<WireBlock<'_>> =
                    answer.content.iter().filter_map(assistant_block).collect();
                if !content.is_empty() {
                    out.push(WireMessage { role: Role::Assistant, content });
                }
                continue;
            }
        };
        match out.last_mut() {
            Some(last) if last.role == Role::User => push_user_block(&mut last.content, block),
            Some(_) | None => out.push(WireMessage { role: Role::User, content: vec![block] }),
        }
    }
    out
}

/// Adds a block to a user message, keeping tool results ahead of text.
fn push_user_block<'a>(content: &mut Vec<WireBlock<'a>>, block: WireBlock<'a>) {
    if matches!(block, WireBlock::ToolResult { .. }) {
        let at = content
            .iter()
            .take_while(|block| matches!(block, WireBlock::ToolResult { .. }))
            .count();
        content.insert(at, block);
    } else {
        content.push(block);
    }
}

fn assistant_block(block: &AssistantBlock) -> Option<WireBlock<'_>> {
    match block {
        AssistantBlock::Text { text } if text.is_empty() => None,
        AssistantBlock::Text { text } => Some(WireBlock::Text { text: Cow::Borrowed(text) }),
        AssistantBlock::Thinking { text, signature: Some(signature) } => {
            Some(WireBlock::Thinking { thinking: text, signature })
        }
        AssistantBlock::Thinking { signature: None, .. } => None,
        AssistantBlock::ToolCall(call) => Some(WireBlock::ToolUse {
            id: &call.id,
            name: &call.name,
            // The API wants an object; our own calls always have one (see `parse_tool_args`).
            input: if call.args.is_object() {
                Cow::Borrowed(&call.args)
            } else {
                Cow::Owned(Value::Object(serde_json::Map::new()))
            },
        }),
    }
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: Role,
    content: Vec<WireBlock<'a>>,
}

#[derive(Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: Cow<'a, str>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Cow<'a, Value>,
    },
    ToolResult {
        tool_use_id: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        content: &'a str,
        #[serde(skip_serializing_if = "is_false")]
        is_error: bool,
    },
}

fn is_false(value: &bool) -> bool {
    !*value
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

impl<'a> From<&'a ToolSpec> for WireTool<'a> {
    fn from(spec: &'a ToolSpec) -> Self {
        WireTool {
            name: &spec.name,
            description: &spec.description,
            input_schema: &spec.parameters,
        }
    }
}

/// The stream's events, by the `type` field of their data.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: usize,
        content_block: BlockStart,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    ContentBlockStop {},
    MessageDelta {
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {},
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct MessageStart {
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockStart {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// Token counts; `message_start` has them all, `message_delta` the final (cumulative) ones.
#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;

    #[test]
    fn anthropic_delta_not_fitting_its_block_is_dropped() {
        let streamed = Mutex::new(Vec::new());
        let sink = |delta: Delta| streamed.lock().unwrap().push(delta);
        let mut answer = Answer::default();
        let blocks = [
            json!({"type": "text", "text": ""}),
            json!({"type": "thinking", "thinking": ""}),
            json!({"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}),
        ];
        for (index, block) in blocks.into_iter().enumerate() {
            answer.start(index, serde_json::from_value(block).unwrap());
        }
        let deltas = [
            (0, json!({"type": "text_delta", "text": "hi"})),
            (0, json!({"type": "thinking_delta", "thinking": "not here"})),
            (1, json!({"type": "thinking_delta", "thinking": "hmm"})),
            (1, json!({"type": "text_delta", "text": "not here"})),
            (1, json!({"type": "signature_delta", "signature": "sig"})),
            (2, json!({"type": "input_json_delta", "partial_json": "{\"path\":\"src\"}"})),
            (2, json!({"type": "signature_delta", "signature": "not here"})),
            (2, json!({"type": "citations_delta", "citation": {}})),
        ];
        for (index, delta) in deltas {
            answer.delta(index, serde_json::from_value(delta).unwrap(), &sink);
        }
        assert_eq!(
            answer.finish("claude-sonnet-4-5").content,
            vec![
                AssistantBlock::Text { text: "hi".to_owned() },
                AssistantBlock::Thinking {
                    text: "hmm".to_owned(),
                    signature: Some("sig".to_owned())
                },
                AssistantBlock::ToolCall(ToolCall {
                    id: "toolu_1".to_owned(),
                    name: "ls".to_owned(),
                    args: json!({"path": "src"}),
                }),
            ]
        );
        assert_eq!(
            *streamed.lock().unwrap(),
            vec![Delta::Text("hi".to_owned()), Delta::Thinking("hmm".to_owned())]
        );
    }
}
