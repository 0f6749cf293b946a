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

use crate::message::{AssistantMessage, Message, Usage};

pub mod anthropic;
mod http;
pub mod openai;

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
const CHARS_PER_TOKEN: usize = 4;

/// The usage of a model call estimated from the length of its request and answer (four
/// characters a token, at least one token of output), marked as estimated. The run loop uses it
/// when a provider reports no usage, so a usage-less backend is never counted as free.
pub fn estimate_usage(request: &ModelRequest, answer: &AssistantMessage) -> Usage {
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
    let output = answer.text().len()
        + answer.tool_calls().map(|c| c.name.len() + c.args.to_string().len()).sum::<usize>();
    Usage {
        input_tokens: (input / CHARS_PER_TOKEN) as u64,
        output_tokens: (output / CHARS_PER_TOKEN).max(1) as u64,
        estimated: true,
        ..Usage::default()
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
