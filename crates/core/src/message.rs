//! The conversation model: what a session remembers and what a provider is shown.
//!
//! Messages are plain data, serialized as-is into the session journal, so a change here is a
//! change of the journal format. Provider adapters convert them to their wire shapes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the person or agent on the other side said.
    User { text: String },
    /// One model answer: text, thinking and tool calls.
    Assistant(AssistantMessage),
    /// The result of one tool call of the preceding assistant message.
    ToolResult(ToolResult),
    /// Context the runtime adds for the model (for example "the previous run was interrupted").
    /// Providers show it to the model as user text.
    Note { text: String },
}

impl Message {
    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User { text: text.into() }
    }
}

/// A model answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AssistantMessage {
    pub content: Vec<AssistantBlock>,
    pub stop_reason: StopReason,
    /// Set when `stop_reason` is `error`: the redacted error text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
}

impl AssistantMessage {
    /// The concatenated text blocks (thinking and tool calls left out).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let AssistantBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls, in the order the model made them.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|block| match block {
            AssistantBlock::ToolCall(call) => Some(call),
            AssistantBlock::Text { .. } | AssistantBlock::Thinking { .. } => None,
        })
    }

    /// Whether the model should see this message again: failed and aborted answers are kept in
    /// the journal but left out of the next request (they may be partial or empty).
    pub fn is_replayable(&self) -> bool {
        match self.stop_reason {
            StopReason::Stop | StopReason::Length | StopReason::ToolUse => true,
            StopReason::Error | StopReason::Aborted => false,
        }
    }
}

/// One block of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantBlock {
    Text {
        text: String,
    },
    /// Model reasoning. `signature` is the provider's opaque token that must be sent back with it.
    Thinking {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    ToolCall(ToolCall),
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub args: Value,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    #[default]
    Stop,
    /// The output token limit was hit.
    Length,
    /// The model asked for tool calls.
    ToolUse,
    /// The provider failed.
    Error,
    /// The run was aborted while the model was answering.
    Aborted,
}

/// The result of a tool call, as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub tool: String,
    /// Text shown to the model (already truncated and redacted).
    pub content: String,
    #[serde(default)]
    pub is_error: bool,
    /// Tool-specific structured data for hosts and logs; never sent to the model.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub details: Value,
}

/// Token counts of one or more model calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// The provider reported no usage, so these counts are an estimate from the text's length
    /// (see [`crate::provider::estimate_usage`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Adds another call's counts to these.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.estimated |= other.estimated;
    }

    /// Every token of the counts: input, output and cached input.
    pub fn total(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_write_tokens)
    }

    /// Whether the counts are all zero: a provider that reports no usage leaves them so.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }
}

/// The conversation as the model sees it: failed and aborted answers left out, every tool call
/// answered exactly once, and no result without its call.
pub(crate) fn model_view(messages: &[Message]) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut open: Vec<(String, String)> = Vec::new();
    let close_open = |out: &mut Vec<Message>, open: &mut Vec<(String, String)>| {
        for (call_id, tool) in open.drain(..) {
            out.push(Message::ToolResult(ToolResult {
                call_id,
                tool,
                content: "no result was recorded for this call".into(),
                is_error: true,
                details: Value::Null,
            }));
        }
    };
    for message in messages {
        match message {
            Message::Assistant(answer) if !answer.is_replayable() => {}
            Message::Assistant(answer) => {
                close_open(&mut out, &mut open);
                open = answer.tool_calls().map(|c| (c.id.clone(), c.name.clone())).collect();
                out.push(message.clone());
            }
            Message::ToolResult(result) => {
                if let Some(pos) = open.iter().position(|(id, _)| *id == result.call_id) {
                    open.remove(pos);
                    out.push(message.clone());
                }
            }
            Message::User { .. } | Message::Note { .. } => {
                close_open(&mut out, &mut open);
                out.push(message.clone());
            }
        }
    }
    close_open(&mut out, &mut open);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assistant(stop_reason: StopReason, calls: &[&str]) -> Message {
        Message::Assistant(AssistantMessage {
            content: calls
                .iter()
                .map(|id| {
                    AssistantBlock::ToolCall(ToolCall {
                        id: (*id).into(),
                        name: "bash".into(),
                        args: Value::Null,
                    })
                })
                .collect(),
            stop_reason,
            ..AssistantMessage::default()
        })
    }

    fn result(id: &str) -> Message {
        Message::ToolResult(ToolResult {
            call_id: id.into(),
            tool: "bash".into(),
            content: "ok".into(),
            is_error: false,
            details: Value::Null,
        })
    }

    #[test]
    fn model_view_drops_failed_answers_and_pairs_calls() {
        let messages = vec![
            Message::user("hi"),
            assistant(StopReason::Error, &[]),
            assistant(StopReason::ToolUse, &["a", "b"]),
            result("a"),
            result("zzz"),
            Message::user("next"),
        ];
        let view = model_view(&messages);
        let missing = Message::ToolResult(ToolResult {
            call_id: "b".into(),
            tool: "bash".into(),
            content: "no result was recorded for this call".into(),
            is_error: true,
            details: Value::Null,
        });
        assert_eq!(
            view,
            vec![
                Message::user("hi"),
                assistant(StopReason::ToolUse, &["a", "b"]),
                result("a"),
                missing,
                Message::user("next")
            ]
        );
    }
}
