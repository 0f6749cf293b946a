//! The model seam: one trait every LLM backend implements, and the three backends we ship.
//!
//! A provider turns a [`ModelRequest`] into one [`AssistantMessage`], reporting text as it streams
//! through a [`DeltaSink`]. Retries live above the provider (in the session run loop), so a
//! provider makes exactly one attempt and classifies its failure with a [`ProviderErrorKind`].
//! Provider error messages must already be redacted by the adapter (an API can echo headers back).

pub mod faux;

use std::fmt;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::message::{AssistantBlock, AssistantMessage, Message, Usage};

pub mod anthropic;
mod http;
pub mod openai;
pub mod window;

pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub use openai::{MaxTokensField, OpenAiConfig, OpenAiProvider};

/// What the model is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The model id, e.g. `claude-sonnet-4-5`.
    pub model: String,
    /// The system prompt, rebuilt at the start of every run.
    pub system: String,
    /// The conversation as the model should see it (failed and aborted answers already removed,
    /// every tool call answered).
    pub messages: Vec<Message>,
    /// The tools the model may call: the session's list, shared by all its requests (each spec
    /// holds a JSON schema tree; a deep copy per request cost allocations and memory).
    pub tools: std::sync::Arc<[ToolSpec]>,
    /// Upper bound on output tokens.
    pub max_output_tokens: u32,
}

impl ModelRequest {
    /// The text of the latest user message, if any.
    pub fn latest_user_text(&self) -> Option<&str> {
        self.messages.iter().rev().find_map(|m| match m {
            Message::User { text } => Some(text.as_str()),
            Message::Assistant(_) | Message::ToolResult(_) | Message::Note { .. } => None,
        })
    }
}

/// Characters counted as one token by [`estimate_usage`]: the usual rule of thumb for English
/// text and code with the common tokenizers.
pub(crate) const CHARS_PER_TOKEN: usize = 4;

/// What a provider adds to a request beyond its text, counted by [`usage_ceiling`]: its own
/// instructions for tool use (Anthropic documents a few hundred tokens of them) and the framing of
/// the request.
const REQUEST_OVERHEAD_TOKENS: u64 = 1024;

/// What a provider adds around each message and tool definition (role and turn markers),
/// counted by [`usage_ceiling`].
const MESSAGE_OVERHEAD_TOKENS: u64 = 16;

/// The usage of a model call estimated from the length of its request and answer (four
/// characters a token, at least one token of output and never more than the request's
/// `max_output_tokens`), marked as estimated. The run loop uses it when a provider reports no
/// usage, so a usage-less backend is never counted as free.
pub fn estimate_usage(request: &ModelRequest, answer: &AssistantMessage) -> Usage {
    let output = answer.text().len()
        + answer.tool_calls().map(|c| c.name.len() + c.args.to_string().len()).sum::<usize>();
    Usage {
        input_tokens: estimate_input_tokens(request),
        output_tokens: ((output / CHARS_PER_TOKEN) as u64)
            .min(u64::from(request.max_output_tokens))
            .max(1),
        estimated: true,
        ..Usage::default()
    }
}

/// The usage of a model call that stopped before its answer was whole (aborted, or failed
/// while it streamed): the input estimate of everything sent and `streamed` characters of text
/// and thinking as output, four characters a token, marked as estimated. A provider bills the
/// input of a call it has started, so a stopped call is never counted as free.
pub fn estimate_stopped_usage(request: &ModelRequest, streamed: usize) -> Usage {
    Usage {
        input_tokens: estimate_input_tokens(request),
        output_tokens: ((streamed / CHARS_PER_TOKEN) as u64)
            .min(u64::from(request.max_output_tokens)),
        estimated: true,
        ..Usage::default()
    }
}

/// The most a model call of `request` can use, for holding room under a budget before the call
/// is made: every byte of what is sent (system prompt, messages, thinking, tool calls and
/// results, tool definitions with their schemas) counted as an input token, plus a margin for
/// what the provider adds around them, plus `max_output_tokens`. The tokenizers of the common
/// APIs never make more tokens than bytes and their output stays within the maximum asked for,
/// so the usage they report for the call (its input, cached input and output together) stays
/// under this; so does [`estimate_usage`] and [`estimate_stopped_usage`] of the same request.
pub fn usage_ceiling(request: &ModelRequest) -> Usage {
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + json_len(&t.parameters))
        .sum();
    let messages: usize = request
        .messages
        .iter()
        .map(|m| match m {
            Message::User { text } | Message::Note { text } => text.len(),
            Message::Assistant(answer) => answer
                .content
                .iter()
                .map(|block| match block {
                    AssistantBlock::Text { text } => text.len(),
                    AssistantBlock::Thinking { text, signature } => {
                        text.len() + signature.as_ref().map_or(0, String::len)
                    }
                    AssistantBlock::ToolCall(call) => {
                        call.id.len() + call.name.len() + json_len(&call.args)
                    }
                })
                .sum(),
            Message::ToolResult(result) => result.call_id.len() + result.content.len(),
        })
        .sum();
    let framing = REQUEST_OVERHEAD_TOKENS
        + MESSAGE_OVERHEAD_TOKENS * (request.messages.len() + request.tools.len()) as u64;
    Usage {
        input_tokens: (request.system.len() + tools + messages) as u64 + framing,
        output_tokens: u64::from(request.max_output_tokens),
        ..Usage::default()
    }
}

/// Four characters a token of what the model is shown: the system prompt, the tools' names and
/// descriptions, and the messages' text.
pub(crate) fn estimate_input_tokens(request: &ModelRequest) -> u64 {
    let input: usize = request.system.len()
        + request.tools.iter().map(|t| t.name.len() + t.description.len()).sum::<usize>()
        + request
            .messages
            .iter()
            .map(|m| match m {
                Message::User { text } | Message::Note { text } => text.len(),
                Message::Assistant(a) => a.text().len(),
                Message::ToolResult(r) => r.content.len(),
            })
            .sum::<usize>();
    (input / CHARS_PER_TOKEN) as u64
}

/// The length of `value` as compact JSON, without building the text.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a writer that never fails cannot fail.
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// A piece of an answer while it streams.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    Text(String),
    Thinking(String),
}

/// Receives deltas as the provider decodes them. Calls never block.
pub type DeltaSink<'a> = &'a (dyn Fn(Delta) + Send + Sync);

/// An LLM backend.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// Short backend name for logs and the journal (`anthropic`, `openai`, `faux`).
    fn name(&self) -> &str;

    /// The model id used when the session config does not name one.
    fn default_model(&self) -> &str;

    /// One model call: streams deltas into `sink` and returns the complete answer.
    ///
    /// # Errors
    /// A [`ProviderError`] classified by kind; the run loop decides whether to retry.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the call (the HTTP stream is closed). `cancel` is also passed
    /// so a provider can stop cooperatively between chunks.
    async fn complete(
        &self,
        request: &ModelRequest,
        sink: DeltaSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<AssistantMessage, ProviderError>;
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderErrorKind {
    /// Bad or missing credentials (401, 403). Not retried.
    Auth,
    /// The request was refused as malformed (400, 404, 422). Not retried.
    BadRequest,
    /// The conversation no longer fits the model's context window. Not retried.
    ContextOverflow,
    /// 429. Retried, honouring `retry_after`.
    RateLimited,
    /// The provider said it is overloaded (Anthropic 529, `overloaded_error`). Retried.
    Overloaded,
    /// Another 5xx. Retried.
    Server { status: u16 },
    /// Connect, TLS, timeout or a stream cut short. Retried.
    Network,
    /// Anything else, including scripted Faux errors. Not retried.
    Other,
}

impl ProviderErrorKind {
    /// Whether the run loop should try the call again.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderErrorKind::RateLimited
            | ProviderErrorKind::Overloaded
            | ProviderErrorKind::Server { .. }
            | ProviderErrorKind::Network => true,
            ProviderErrorKind::Auth
            | ProviderErrorKind::BadRequest
            | ProviderErrorKind::ContextOverflow
            | ProviderErrorKind::Other => false,
        }
    }
}

/// A failed model call. The message is safe to show: adapters redact it before returning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderError {
    pub kind: ProviderErrorKind,
    pub message: String,
    /// How long the provider asked us to wait (from `retry-after`).
    pub retry_after: Option<Duration>,
}

impl ProviderError {
    pub fn new(kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        ProviderError { kind, message: message.into(), retry_after: None }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ProviderError {}
