//! The answer a live task streams into its response artifact, chunk by chunk, and the end of it
//! held back while it could be the start of a secret: a chunk goes out redacted together with
//! what was held before it, less an end that the redactor says could begin a secret, held until
//! the next chunk or the answer's end shows whether it is one. So a secret split across chunks
//! never goes out in part. A secret's shape (not a known value) split across chunks is caught by
//! the final answer, which replaces what streams showed ([`AnswerStream::finish`]).
//!
//! It owns the response artifact's id and content; the task, its lock and its events are
//! `LiveTask`'s, which calls this under the task's lock.

use std::sync::{Mutex, PoisonError};

use a2a::{Artifact, Part};
use volcanic_core::redact::Redactor;

use crate::run::parts::{append_text, text_of};

/// The name of the artifact holding the answer.
pub const RESPONSE_ARTIFACT: &str = "response";

/// The answer a task is streaming.
pub(super) struct AnswerStream {
    /// The response artifact's id: a continued task keeps its own.
    id: String,
    /// Taken only under the task's lock.
    state: Mutex<Held>,
}

/// Where the answer being streamed stands.
#[derive(Default)]
struct Held {
    /// The end of the answer held back: it could be the start of a secret (raw, not yet sent).
    held: String,
    /// Whether a chunk of this answer has been sent (the next one appends).
    started: bool,
    /// Whether a chunk came since the answer began and its end has not been sent.
    open: bool,
}

/// A piece of the answer to send to streams.
pub(super) struct Chunk {
    /// Redacted.
    pub(super) text: String,
    /// Whether it extends what streams have of this answer (else it replaces it).
    pub(super) append: bool,
    /// Whether it ends the answer.
    pub(super) last: bool,
}

impl AnswerStream {
    /// The answer stream of `task`, whose response artifact it keeps when it has one.
    pub(super) fn of(task: &a2a::Task) -> Self {
        let id = task
            .artifacts
            .iter()
            .flatten()
            .find(|a| a.name.as_deref() == Some(RESPONSE_ARTIFACT))
            .map_or_else(|| uuid::Uuid::new_v4().to_string(), |a| a.artifact_id.clone());
        AnswerStream { id, state: Mutex::new(Held::default()) }
    }

    /// The response artifact's id.
    pub(super) fn id(&self) -> &str {
        &self.id
    }

    /// A new answer begins: its first chunk replaces what streams show.
    pub(super) fn begin(&self) {
        *self.held() = Held::default();
    }

    /// A piece of the answer, as it goes out; `None` when all of it is held back.
    pub(super) fn chunk(&self, redactor: &Redactor, text: &str) -> Option<Chunk> {
        let mut held = self.held();
        held.open = true;
        cut(&mut held, redactor, text, false)
    }

    /// The end of the answer: what was held back goes out as its last chunk; `None` when no
    /// chunk came since the answer began.
    pub(super) fn end(&self, redactor: &Redactor) -> Option<Chunk> {
        let mut held = self.held();
        if !std::mem::take(&mut held.open) {
            return None;
        }
        cut(&mut held, redactor, "", true)
    }

    /// Puts a chunk into the task's response artifact.
    pub(super) fn apply(&self, task: &mut a2a::Task, chunk: &Chunk) {
        let artifacts = task.artifacts.get_or_insert_with(Vec::new);
        match artifacts.iter_mut().find(|a| a.artifact_id == self.id) {
            Some(artifact) if chunk.append => append_text(artifact, &chunk.text),
            Some(artifact) => artifact.parts = vec![Part::text(chunk.text.clone())],
            None => artifacts.push(self.artifact(chunk.text.clone())),
        }
    }

    /// Replaces the response artifact's content with the final answer `text` (redacted), or
    /// removes it when empty, and starts over. Whether streams must be sent it: the streamed
    /// chunks do not add up to it (the session drops deltas for a run consumer that falls
    /// behind, and a stream may join after the answer began), or nothing was streamed.
    pub(super) fn finish(&self, task: &mut a2a::Task, text: &str) -> bool {
        *self.held() = Held::default();
        let artifacts = task.artifacts.get_or_insert_with(Vec::new);
        let streamed = artifacts
            .iter()
            .find(|a| a.artifact_id == self.id)
            .map(|a| a.parts.iter().map(text_of).collect::<String>());
        artifacts.retain(|a| a.artifact_id != self.id);
        if !text.is_empty() {
            artifacts.insert(0, self.artifact(text.to_string()));
        }
        if artifacts.is_empty() {
            task.artifacts = None;
        }
        !text.is_empty() && streamed.as_deref() != Some(text)
    }

    /// The response artifact holding `text`.
    pub(super) fn artifact(&self, text: String) -> Artifact {
        Artifact {
            artifact_id: self.id.clone(),
            name: Some(RESPONSE_ARTIFACT.into()),
            description: None,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: None,
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Redacts `text` after what was held, and cuts off what could begin a secret unless `last`.
/// Each chunk costs its own length, not the answer's.
fn cut(held: &mut Held, redactor: &Redactor, text: &str, last: bool) -> Option<Chunk> {
    let mut pending = std::mem::take(&mut held.held);
    pending.push_str(text);
    let redacted = redactor.redact(&pending);
    let hold = if last { 0 } else { redactor.partial_match_len(&redacted) };
    let mut end = redacted.len() - hold;
    while !redacted.is_char_boundary(end) {
        end -= 1;
    }
    // Only raw text can be held (redaction left it as it was): never part of a marker.
    if !pending.ends_with(&redacted[end..]) {
        end = redacted.len();
    }
    let kept = redacted.len() - end;
    held.held = pending[pending.len() - kept..].to_string();
    let text = redacted[..end].to_string();
    if text.is_empty() && !last {
        return None;
    }
    let append = held.started;
    held.started = true;
    Some(Chunk { text, append, last })
}
