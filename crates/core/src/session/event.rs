//! What a session tells its observers: one [`SessionEvent`] per step of a run.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::message::{Message, ToolResult, Usage};
use crate::tool::ToolStop;

/// One event of a session, with its envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    pub session_id: Arc<str>,
    pub run_id: Arc<str>,
    /// Per session, strictly increasing, gapless for a subscriber that keeps up.
    pub seq: u64,
    pub kind: EventKind,
}

/// The events of a run, in the order they happen.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// Exactly once per run, first.
    RunStart,
    /// Before each model call; `turn` counts from 1.
    TurnStart { turn: u32 },
    /// A message begins. For the assistant, deltas with the same `index` follow.
    MessageStart { index: u32, role: Role },
    /// A piece of assistant text.
    TextDelta { index: u32, text: String },
    /// A piece of assistant thinking.
    ThinkingDelta { index: u32, text: String },
    /// A message is complete and already written to the journal.
    MessageEnd { index: u32, message: Arc<Message> },
    /// A tool call starts.
    ToolStart { call_id: String, name: String, args: Value },
    /// Partial output of a running tool (redacted).
    ToolUpdate { call_id: String, name: String, partial: String },
    /// A tool call finished; the result is already in the journal.
    ToolEnd { call_id: String, name: String, result: ToolResult },
    /// A model call failed with a transient error and will be tried again after `delay`.
    Retry { attempt: u32, max: u32, delay: Duration, error: String },
    /// The conversation was compacted (already in the journal); its `Display` is the line to
    /// show the owner. A summary call's usage is in it, and not in any `MessageEnd`.
    Compacted(super::Compacted),
    /// Exactly once per run, last.
    Settled(RunSettled),
}

impl EventKind {
    /// Events a slow subscriber may lose (it can rebuild them from the `MessageEnd`/`ToolEnd`
    /// that follow). Everything else is kept.
    pub fn is_droppable(&self) -> bool {
        match self {
            EventKind::TextDelta { .. }
            | EventKind::ThinkingDelta { .. }
            | EventKind::ToolUpdate { .. } => true,
            EventKind::RunStart
            | EventKind::TurnStart { .. }
            | EventKind::MessageStart { .. }
            | EventKind::MessageEnd { .. }
            | EventKind::ToolStart { .. }
            | EventKind::ToolEnd { .. }
            | EventKind::Retry { .. }
            | EventKind::Compacted(_)
            | EventKind::Settled(_) => false,
        }
    }
}

/// Who a message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    ToolResult,
    Note,
}

impl Role {
    pub(crate) fn of(message: &Message) -> Role {
        match message {
            Message::User { .. } => Role::User,
            Message::Assistant(_) => Role::Assistant,
            Message::ToolResult(_) => Role::ToolResult,
            Message::Note { .. } => Role::Note,
        }
    }
}

/// How a run ended, with its final text.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSettled {
    pub outcome: RunOutcome,
    /// The text of the last assistant message of the run (empty if it had only tool calls).
    pub final_text: String,
    /// Tokens of all model calls of the run.
    pub usage: Usage,
    /// Model calls made.
    pub turns: u32,
}

/// Why a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// The model answered without calling tools.
    Completed,
    /// A tool ended the run (for example `request_input`), for the reason it gave.
    StoppedByTool { tool: String, call_id: String, stop: ToolStop },
    /// `abort` was called.
    Aborted,
    /// The provider failed (after retries) or the run broke.
    Failed { error: RunFailure },
    /// The run hit the configured number of model calls.
    MaxTurns,
}

/// Why a run failed. Its `Display` is the text to show the person or agent on the other side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunFailure {
    /// The provider failed (after retries, or at once for an error not worth retrying);
    /// `message` is its error, redacted, and safe to show.
    Provider { message: String },
    /// A model gate of the session ([`crate::extension::ModelGate`]) refused the next model
    /// call; `reason` is its text (for example a daily token cap that is reached).
    Stopped { reason: String },
    /// Something that is not the provider's fault broke the run (the journal could not be
    /// written, the run panicked): the detail is only in the log, the text is fixed.
    Unexpected,
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunFailure::Provider { message } => f.write_str(message),
            RunFailure::Stopped { reason } => f.write_str(reason),
            RunFailure::Unexpected => f.write_str("the run failed unexpectedly"),
        }
    }
}
