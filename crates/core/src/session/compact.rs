//! Compaction: what the model is shown of a conversation that outgrows its context window.
//!
//! The journal keeps every message; a [`Compaction`] only changes the model's view of them. Two
//! steps, the cheaper first: tool results longer than `trim_above` bytes and older than the
//! recent part are shown trimmed (their head and a marker; the journal and the spill folder keep
//! the whole text), and when that is not enough, the messages before a cut are replaced by one
//! summary the model wrote of them ([`SUMMARY_SYSTEM_PROMPT`]). The most recent part, and always
//! the latest user message with everything after it, stay verbatim.
//!
//! Invariants: a cut never falls on a tool result, so a call and its result are kept or
//! summarised together; cuts and trims only move forward, so each summary folds in the previous
//! one; the view is a pure function of the messages and the latest [`CompactionRecord`], which
//! the journal keeps, so a resumed session shows the model exactly what it was shown before.
//!
//! This file holds the pure parts (measuring, planning, the view, the summary request); the run
//! loop's side (the model call, the journal, the event) is in `run/compact.rs`.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::CompactionConfig;
use crate::message::{AssistantBlock, Message, ToolResult, Usage};
use crate::provider::{CHARS_PER_TOKEN, ModelRequest, ToolSpec};

/// The system prompt of a summary call. Faux recognises a summary call by it.
pub const SUMMARY_SYSTEM_PROMPT: &str = "You compact the conversation of a personal assistant \
with its owner so that it keeps fitting the model's context window. You are given an older part \
of the conversation, which may begin with the summary of what came before it. Write one summary \
that replaces that part: from now on the assistant sees only your summary and the most recent \
messages, so whatever you leave out is forgotten.

Keep, under short headings:
- The owner: every fact about them and every preference they stated (names, people, dates, \
places, habits, how they want answers), even when mentioned in passing.
- Decisions and agreements, with their reasons.
- Open questions and tasks: what is pending, promised or in progress, and how far it got.
- Files and folders: each one read, written, edited or sent, why, and what changed.
- Anything else the assistant will need: commands that worked, errors met and how they were \
solved, results it would otherwise have to redo.

Fold the earlier summary in, drop small talk and whatever was superseded, and write plainly, in \
the conversation's language, as notes for the assistant. Do not answer or continue the \
conversation: reply with the summary only.";

/// What opens the summary in the model's view.
pub const SUMMARY_HEADER: &str = "[Summary of the earlier conversation, written when it was \
compacted to fit the context window. The full text stays in the session journal.]";

/// Where the conversation to summarise ends in the summary request; Faux reads a directive
/// only after it.
pub const TRANSCRIPT_END: &str = "</conversation>";

/// Most output tokens a summary call may take.
const SUMMARY_MAX_OUTPUT_TOKENS: u32 = 4096;

/// Characters of a tool result shown in the transcript sent for summary.
const TRANSCRIPT_RESULT_CHARS: usize = 2000;

/// Characters of a tool call's arguments shown in the transcript.
const TRANSCRIPT_ARGS_CHARS: usize = 300;

/// Characters of a trimmed tool result kept at its head.
const TRIM_KEEP_CHARS: usize = 300;

/// What a summary request adds around the transcript, in tokens, kept free when sizing it.
const SUMMARY_REQUEST_OVERHEAD: u64 = 2048;

/// The model's view of a session as the latest compaction left it.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Compaction {
    pub summary: Option<Summary>,
    /// Tool results before this message index are shown trimmed when longer than `trim_above`.
    pub trim_before: usize,
    pub trim_above: usize,
    /// How many messages there were when it was made: answers from there on report usage that
    /// measures this view.
    pub at: usize,
}

/// The summary that stands for the messages before `cut`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summary {
    pub cut: usize,
    pub text: String,
}

impl Compaction {
    /// The index of the first message shown as it is (0 when nothing was summarised).
    pub fn cut(&self) -> usize {
        self.summary.as_ref().map_or(0, |s| s.cut)
    }

    /// The record the journal keeps of this view, with the report of how it came about.
    pub fn record(&self, report: Report) -> CompactionRecord {
        CompactionRecord {
            cut: self.cut(),
            summary: self.summary.as_ref().map(|s| s.text.clone()),
            trim_before: self.trim_before,
            trim_above_bytes: self.trim_above,
            messages: self.at,
            summarized: report.summarized,
            trimmed: report.trimmed,
            tokens_before: report.tokens_before,
            tokens_after: report.tokens_after,
            instruction: report.instruction,
            error: report.error,
            usage: report.usage,
            model: report.model,
        }
    }
}

/// How a compaction came about, as the journal and the event report it.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Report {
    pub summarized: usize,
    pub trimmed: usize,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub instruction: Option<String>,
    pub error: Option<String>,
    pub usage: Usage,
    pub model: String,
}

/// One compaction as the journal records it: the whole view (so the latest record alone rebuilds
/// it) and what the compaction did. Unknown to journal readers older than compaction, which skip
/// the line and so show the model the whole conversation, as they always did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CompactionRecord {
    /// Messages before this index (journal order, from 0) are shown as `summary`.
    pub cut: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    pub trim_before: usize,
    pub trim_above_bytes: usize,
    /// Messages in the journal when the compaction was made.
    pub messages: usize,
    /// Messages newly summarised by this compaction.
    pub summarized: usize,
    /// Tool results newly trimmed by this compaction (outside what was summarised).
    pub trimmed: usize,
    /// Estimated tokens of the conversation before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// What the owner asked to keep (`/compact INSTRUCTION`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    /// Why the summary could not be made (the view then only gained trims).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Tokens of the summary call, and the model that made it.
    #[serde(default)]
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
}

impl CompactionRecord {
    /// The view this record describes, if it fits `messages` (a journal damaged in between may
    /// not: then the session starts from the whole conversation and compacts anew).
    pub fn restore(&self, messages: &[Message]) -> Option<Compaction> {
        let len = messages.len();
        let fits = self.cut <= len
            && self.trim_before <= len
            && self.messages <= len
            && (self.cut == 0) == self.summary.is_none()
            && !matches!(messages.get(self.cut), Some(Message::ToolResult(_)));
        fits.then(|| Compaction {
            summary: self.summary.clone().map(|text| Summary { cut: self.cut, text }),
            trim_before: self.trim_before,
            trim_above: self.trim_above_bytes,
            at: self.messages,
        })
    }

    /// What the owner is told about it.
    pub fn notice(&self) -> Compacted {
        Compacted {
            summarized: self.summarized,
            trimmed: self.trimmed,
            tokens_before: self.tokens_before,
            tokens_after: self.tokens_after,
            error: self.error.clone(),
            usage: self.usage,
            model: self.model.clone(),
        }
    }
}

/// A compaction, as a session event tells it. Its `Display` is the one line hosts show.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted {
    /// Older messages replaced by a summary (0 when none were).
    pub summarized: usize,
    /// Old tool results newly shown trimmed.
    pub trimmed: usize,
    /// Estimated tokens of the conversation before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Why the summary could not be made; nothing was lost (the view only gained trims).
    pub error: Option<String>,
    /// Tokens of the summary call (already in the run's usage; zero when none was made), and
    /// the model that made it.
    pub usage: Usage,
    pub model: String,
}

impl fmt::Display for Compacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (before, after) = (tokens(self.tokens_before), tokens(self.tokens_after));
        if let Some(error) = &self.error {
            write!(f, "Compaction failed ({}); nothing was lost", crate::escape::one_line(error))?;
            if self.trimmed > 0 {
                write!(
                    f,
                    ", {} old tool results trimmed ({before} → {after} tokens)",
                    self.trimmed
                )?;
            }
            return Ok(());
        }
        match (self.summarized, self.trimmed) {
            (0, 0) => write!(f, "Nothing to compact yet ({before} tokens)"),
            (0, trimmed) => {
                write!(f, "Trimmed {trimmed} old tool results ({before} → {after} tokens)")
            }
            (summarized, _) => {
                write!(f, "Compacted {summarized} older messages ({before} → {after} tokens)")
            }
        }
    }
}

/// `96k`, `1.2M`, `850`.
fn tokens(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..1_000_000 => format!("{}k", (n + 500) / 1000),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// Why a compaction is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Force {
    /// The next call would take the conversation over the threshold.
    Threshold,
    /// The provider refused the call as too long: keep half as much verbatim.
    Overflow,
    /// The owner asked (`/compact`): summarise all but the latest exchange.
    Owner,
}

/// The share of `window` given in percent.
pub(crate) fn share(window: u64, percent: u8) -> u64 {
    window.saturating_mul(u64::from(percent)) / 100
}

/// The estimated tokens of one message as the model is shown it (four characters a token).
pub(crate) fn message_tokens(message: &Message) -> u64 {
    let chars = match message {
        Message::User { text } | Message::Note { text } => text.len(),
        Message::Assistant(answer) if !answer.is_replayable() => 0,
        Message::Assistant(answer) => answer
            .content
            .iter()
            .map(|block| match block {
                AssistantBlock::Text { text } | AssistantBlock::Thinking { text, .. } => text.len(),
                AssistantBlock::ToolCall(call) => call.name.len() + call.args.to_string().len(),
            })
            .sum(),
        Message::ToolResult(result) => result.content.len(),
    };
    (chars / CHARS_PER_TOKEN) as u64
}

/// The estimated tokens of what every request of a run sends besides the messages: the system
/// prompt and the tools with their schemas.
pub(crate) fn fixed_tokens(system: &str, tools: &[ToolSpec]) -> u64 {
    let tools: usize = tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    ((system.len() + tools) / CHARS_PER_TOKEN) as u64
}

/// How many tokens the next request would take: the usage the provider reported for the latest
/// answer made since the compaction (what it was sent plus what it said), plus an estimate of
/// the messages after it; without such an answer, an estimate of the whole view.
pub(crate) fn occupied(fixed: u64, messages: &[Message], compaction: &Compaction) -> u64 {
    let reported =
        messages.iter().enumerate().skip(compaction.at).rev().find_map(|(i, m)| match m {
            Message::Assistant(answer) if answer.is_replayable() && !answer.usage.is_empty() => {
                Some((i, answer.usage.total()))
            }
            Message::Assistant(_)
            | Message::User { .. }
            | Message::ToolResult(_)
            | Message::Note { .. } => None,
        });
    match reported {
        Some((i, total)) => total + messages[i + 1..].iter().map(message_tokens).sum::<u64>(),
        None => fixed + view(messages, compaction).iter().map(message_tokens).sum::<u64>(),
    }
}

/// The conversation as the model sees it under `compaction`: the summary first, then the
/// messages from the cut on with old large tool results trimmed, failed answers left out and
/// every call answered (see `message::model_view`).
pub(crate) fn view(messages: &[Message], compaction: &Compaction) -> Vec<Message> {
    let cut = compaction.cut().min(messages.len());
    let mut out = Vec::with_capacity(messages.len() - cut + 1);
    if let Some(summary) = &compaction.summary {
        out.push(summary_note(&summary.text));
    }
    let shown = shown(&messages[cut..], cut, compaction);
    out.extend(crate::message::model_view(&shown));
    out
}

/// The messages of `part` (starting at index `first`) with old large tool results trimmed.
fn shown(part: &[Message], first: usize, compaction: &Compaction) -> Vec<Message> {
    part.iter()
        .enumerate()
        .map(|(i, message)| match message {
            Message::ToolResult(result) if first + i < compaction.trim_before => {
                trimmed(result, compaction.trim_above)
                    .map_or_else(|| message.clone(), Message::ToolResult)
            }
            Message::User { .. }
            | Message::Assistant(_)
            | Message::ToolResult(_)
            | Message::Note { .. } => message.clone(),
        })
        .collect()
}

/// The summary as the message that opens the view.
fn summary_note(summary: &str) -> Message {
    Message::Note { text: format!("{SUMMARY_HEADER}\n\n{summary}") }
}

/// `result` shown trimmed, `None` when it is not longer than `above` bytes (or trimming would not
/// make it shorter).
fn trimmed(result: &ToolResult, above: usize) -> Option<ToolResult> {
    if result.content.len() <= above {
        return None;
    }
    let head = clip(&result.content, TRIM_KEEP_CHARS);
    let content = format!(
        "[Trimmed to save room in the context window: this result had {} bytes, and the session \
journal keeps it whole; run the tool again if you need more. It began:]\n{head}",
        result.content.len()
    );
    (content.len() < result.content.len()).then(|| ToolResult {
        content,
        details: Value::Null,
        ..result.clone()
    })
}

/// The first `chars` characters of `text`.
fn clip(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((index, _)) => &text[..index],
        None => text,
    }
}

/// Where the next compaction puts its cut and its trim line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Messages before it get summarised (equal to the current cut: no new summary possible).
    pub cut: usize,
    /// Tool results before it get trimmed.
    pub trim_before: usize,
}

/// Plans a compaction of `messages` under `compaction`: the recent part that stays verbatim
/// takes at most `keep_recent_percent` of the window (half of it after an overflow, only the
/// latest exchange when the owner asks), starts on a message that is not a tool result, and
/// never begins after the latest user message.
pub(crate) fn plan(
    messages: &[Message],
    compaction: &Compaction,
    window: u64,
    config: &CompactionConfig,
    force: Force,
) -> Plan {
    let len = messages.len();
    let last_user = messages.iter().rposition(|m| matches!(m, Message::User { .. })).unwrap_or(0);
    let mut start = match force {
        Force::Owner => last_user,
        Force::Threshold | Force::Overflow => {
            let budget = match force {
                Force::Overflow => share(window, config.keep_recent_percent) / 2,
                Force::Threshold | Force::Owner => share(window, config.keep_recent_percent),
            };
            let mut start = len;
            let mut used = 0u64;
            while start > 0 {
                let next = message_tokens(&messages[start - 1]);
                if used + next > budget {
                    break;
                }
                used += next;
                start -= 1;
            }
            start
        }
    };
    while start > 0 && start < len && matches!(messages[start], Message::ToolResult(_)) {
        start -= 1;
    }
    Plan {
        cut: start.min(last_user).max(compaction.cut()),
        trim_before: start.max(compaction.trim_before),
    }
}

/// Tool results in `messages[from..to]` that a trim above `above` bytes shortens.
pub(crate) fn count_trimmed(messages: &[Message], from: usize, to: usize, above: usize) -> usize {
    messages
        .get(from..to.min(messages.len()))
        .unwrap_or_default()
        .iter()
        .filter(|m| matches!(m, Message::ToolResult(r) if trimmed(r, above).is_some()))
        .count()
}

/// The request that asks the model to summarise `messages[from..to]` as `compaction` shows them,
/// folding in its summary, with the owner's instruction if any. The transcript is cut from its
/// oldest end to fit `window`.
pub(crate) fn summary_request(
    model: &str,
    messages: &[Message],
    compaction: &Compaction,
    to: usize,
    window: u64,
    instruction: Option<&str>,
) -> ModelRequest {
    let from = compaction.cut().min(to);
    let part = crate::message::model_view(&shown(&messages[from..to], from, compaction));
    let mut blocks: Vec<String> = part.iter().map(transcript_block).collect();
    let budget = (window
        .saturating_sub(u64::from(SUMMARY_MAX_OUTPUT_TOKENS) + SUMMARY_REQUEST_OVERHEAD)
        .saturating_mul(CHARS_PER_TOKEN as u64)) as usize;
    let previous = compaction
        .summary
        .as_ref()
        .map(|s| format!("### summary of the conversation before this part\n{}", s.text));
    let mut room = budget.saturating_sub(previous.as_ref().map_or(0, String::len));
    let mut keep = blocks.len();
    while keep > 0 && blocks[keep - 1].len() + 2 <= room {
        room -= blocks[keep - 1].len() + 2;
        keep -= 1;
    }
    let left_out: usize = blocks[..keep].iter().map(String::len).sum();
    let mut kept: Vec<String> = previous.into_iter().collect();
    if keep > 0 {
        kept.push(format!(
            "[… {keep} older messages ({left_out} characters) left out: they did not fit …]"
        ));
    }
    kept.extend(blocks.drain(keep..));
    let mut text = format!(
        "This is the part of the conversation to summarise:\n\n<conversation>\n{}\n{TRANSCRIPT_END}\n\nWrite the summary now.",
        kept.join("\n\n")
    );
    if let Some(instruction) = instruction.map(str::trim).filter(|i| !i.is_empty()) {
        text.push_str("\n\nThe owner asks that the summary keep in particular:\n");
        text.push_str(instruction);
    }
    ModelRequest {
        model: model.to_string(),
        system: SUMMARY_SYSTEM_PROMPT.to_string(),
        messages: vec![Message::user(text)],
        tools: Vec::new().into(),
        max_output_tokens: SUMMARY_MAX_OUTPUT_TOKENS,
    }
}

/// One message of the transcript sent for summary.
fn transcript_block(message: &Message) -> String {
    match message {
        Message::User { text } => format!("### user\n{text}"),
        Message::Note { text } => format!("### note\n{text}"),
        Message::Assistant(answer) => {
            let mut out = format!("### assistant\n{}", answer.text());
            for call in answer.tool_calls() {
                let args = call.args.to_string();
                out.push_str(&format!(
                    "\n[tool call: {} {}]",
                    call.name,
                    clip(&args, TRANSCRIPT_ARGS_CHARS)
                ));
            }
            out
        }
        Message::ToolResult(result) => {
            let error = if result.is_error { ", failed" } else { "" };
            let content = clip(&result.content, TRANSCRIPT_RESULT_CHARS);
            let more = if content.len() < result.content.len() { "\n[…]" } else { "" };
            format!("### tool result ({}{error})\n{content}{more}", result.tool)
        }
    }
}

/// The view a session opens with: the latest record's, when it fits the messages loaded.
pub(crate) fn restore(
    scope: &str,
    record: Option<&CompactionRecord>,
    messages: &[Message],
) -> Compaction {
    let Some(record) = record else { return Compaction::default() };
    match record.restore(messages) {
        Some(compaction) => compaction,
        None => {
            tracing::warn!(
                scope,
                cut = record.cut,
                messages = messages.len(),
                "the latest compaction does not fit the journal; showing the model the whole conversation"
            );
            Compaction::default()
        }
    }
}

#[cfg(test)]
mod tests;
