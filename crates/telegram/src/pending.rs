//! The messages the host has accepted but not yet answered, kept in
//! `<state dir>/telegram/<botId>-pending.json` so that a restart loses none of them.
//!
//! Telegram forgets an update once the next getUpdates acknowledges it, so every accepted
//! message is written here before its update is acknowledged (the poll loop persists this
//! record before it saves the offset and asks for more). An entry leaves the record when its
//! job is done: answered (the whole answer delivered, or reported as undeliverable), dropped by
//! `/stop`, or refused. After a restart, entries that never started run as if they had just
//! arrived; an entry whose run had started (and was cut by the restart) is not run again, since
//! its tools may already have done part of the work: the chat is told instead.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::api::{CallbackQuery, Message};

/// What an accepted message asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Request {
    /// A message for the assistant.
    Prompt { message: Box<Message> },
    /// `/new`.
    NewSession,
    /// A button press for the callback handler (see `callback`); never queued in a chat.
    Press { query: Box<CallbackQuery> },
}

/// One accepted message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub update_id: i64,
    pub chat_id: i64,
    pub request: Request,
    /// Whether its run started (a restart then cut it).
    #[serde(default)]
    pub started: bool,
}

#[derive(Serialize, Deserialize, Default)]
struct Saved {
    entries: Vec<Entry>,
}

/// The record of accepted, unanswered messages.
pub struct Pending {
    path: PathBuf,
    entries: Mutex<Vec<Entry>>,
    /// Serializes writes, so an older snapshot never replaces a newer one. A tokio mutex: it is
    /// held across the write, which is awaited.
    writing: tokio::sync::Mutex<()>,
}

impl Pending {
    /// The record of `bot_id` in `state_dir`, with the entries a previous run left (empty when
    /// there is no file; an unreadable one is reported and treated as empty).
    pub async fn load(state_dir: &Path, bot_id: &str) -> (Pending, Vec<Entry>) {
        let path = state_dir.join("telegram").join(format!("{bot_id}-pending.json"));
        let left = match tokio::fs::read(&path).await {
            Ok(bytes) => match serde_json::from_slice::<Saved>(&bytes) {
                Ok(saved) => saved.entries,
                Err(err) => {
                    tracing::error!(file = %path.display(), error = %err, "the record of accepted messages is malformed; they are lost");
                    Vec::new()
                }
            },
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(err) => {
                tracing::error!(file = %path.display(), error = %err, "cannot read the record of accepted messages; they are lost");
                Vec::new()
            }
        };
        let pending = Pending {
            path,
            entries: Mutex::new(left.clone()),
            writing: tokio::sync::Mutex::new(()),
        };
        (pending, left)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records an accepted message (in memory; [`Pending::persist`] writes it).
    pub fn accept(&self, entry: Entry) {
        let mut entries = self.lock();
        if !entries.iter().any(|e| e.update_id == entry.update_id) {
            entries.push(entry);
        }
    }

    /// Forgets every queued entry of a chat (`/stop` dropped them), in memory; its button
    /// presses are not queued and stay.
    pub fn forget_chat(&self, chat_id: i64) {
        self.lock().retain(|e| e.chat_id != chat_id || matches!(e.request, Request::Press { .. }));
    }

    /// Forgets one entry, in memory.
    pub fn forget(&self, update_id: i64) {
        self.lock().retain(|e| e.update_id != update_id);
    }

    /// Marks an entry's run as started and writes the record.
    pub async fn start(&self, update_id: i64) {
        for entry in self.lock().iter_mut().filter(|e| e.update_id == update_id) {
            entry.started = true;
        }
        self.persist().await;
    }

    /// Removes a handled entry and writes the record.
    pub async fn finish(&self, update_id: i64) {
        self.forget(update_id);
        self.persist().await;
    }

    /// Writes the record (atomically). A failure is logged: the messages then survive only as
    /// long as this process.
    pub async fn persist(&self) {
        let _writing = self.writing.lock().await;
        let saved = Saved { entries: self.lock().clone() };
        let path = self.path.clone();
        let written = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let bytes = serde_json::to_vec(&saved).map_err(std::io::Error::other)?;
            volcanic_core::atomic::write_atomic(&path, &bytes)
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r);
        if let Err(err) = written {
            tracing::error!(file = %self.path.display(), error = %err, "cannot save the record of accepted messages");
        }
    }
}

/// What the chat is told about a message whose answer a restart cut short.
pub fn interrupted_notice(request: &Request) -> String {
    let what = match request {
        Request::Prompt { message } => {
            let text = message.text.as_deref().or(message.caption.as_deref()).unwrap_or_default();
            let mut short: String = text.chars().take(80).collect();
            if text.chars().count() > 80 {
                short.push('…');
            }
            if short.trim().is_empty() {
                "your message (a file)".to_string()
            } else {
                format!("your message “{short}”")
            }
        }
        Request::NewSession => "/new".to_string(),
        Request::Press { .. } => "a button press".to_string(),
    };
    format!(
        "⚠️ The bot restarted while I was answering {what}, so that answer was cut short (its \
tools may have run in part). Send it again if you still need it."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(update_id: i64, text: &str) -> Entry {
        // As Telegram sends it, forwarded, so the record must keep where it came from too.
        let message: Message = serde_json::from_value(serde_json::json!({
            "message_id": update_id,
            "chat": {"id": 7, "type": "private"},
            "from": {"id": 7, "first_name": "Owner"},
            "text": text,
            "forward_origin": {"type": "hidden_user", "sender_user_name": "Someone"},
        }))
        .unwrap();
        Entry {
            update_id,
            chat_id: 7,
            request: Request::Prompt { message: Box::new(message) },
            started: false,
        }
    }

    #[tokio::test]
    async fn pending_entries_survive_a_reload_until_finished() {
        let dir = tempfile::tempdir().unwrap();
        let (pending, left) = Pending::load(dir.path(), "42").await;
        assert!(left.is_empty());
        pending.accept(prompt(1, "one"));
        pending.accept(prompt(2, "two"));
        pending.accept(prompt(2, "two again"));
        pending.persist().await;
        pending.start(1).await;
        let (_, left) = Pending::load(dir.path(), "42").await;
        let mut want = vec![prompt(1, "one"), prompt(2, "two")];
        want[0].started = true;
        assert_eq!(left, want);
        pending.finish(1).await;
        pending.forget_chat(7);
        pending.persist().await;
        let (_, left) = Pending::load(dir.path(), "42").await;
        assert_eq!(left, Vec::<Entry>::new());
    }

    #[test]
    fn interrupted_notice_quotes_the_start_of_the_message() {
        let notice = interrupted_notice(&prompt(1, &"x".repeat(100)).request);
        assert!(notice.contains(&format!("“{}…”", "x".repeat(80))), "{notice}");
        assert!(interrupted_notice(&Request::NewSession).contains("/new"));
    }
}
