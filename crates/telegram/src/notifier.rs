//! `notify_owner` for A2A sessions: `🤖 A2A · <caller>: <text>` into the owner's chat.
//!
//! Routing: the workspace's owner id is its chat id; a group's workspace notifies the owner (the
//! first allowed user) in their private chat, never the group, and the prefix names the group.
//!
//! Spoofing: the prefix that names the caller is bold through a message entity, and the caller's
//! text follows on the next line inside a block quote entity, both sent without a parse mode. A
//! real notification begins with the bold prefix outside any quote; everything a caller writes is
//! inside the quote, so no line of it can look like a second, differently named notification,
//! not even one that starts with the prefix's very characters. A text too long for one message
//! is split, and every part carries the marked prefix and its quote. Texts are capped at
//! [`TelegramConfig::notify_max_chars`].
//!
//! Flooding: each caller may send [`TelegramConfig::notify_limit`] notifications per
//! [`TelegramConfig::notify_window`] (sliding). More are dropped (the tool tells the model so),
//! and once the window has room again the owner gets one notice saying how many were dropped.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use volcanic_a2a::OwnerNotifier;
use volcanic_a2a::auth::Caller;

use crate::api::{BotApi, Entity, EntityKind};
use crate::config::TelegramConfig;
use crate::render::{self, MESSAGE_LIMIT, utf16_len};

/// What marks a text the caller cut too long.
const CUT_MARK: &str = "…(cut)";

/// Delivers owner notifications as Telegram messages.
pub struct TelegramNotifier {
    api: BotApi,
    config: Arc<TelegramConfig>,
    cancel: CancellationToken,
    /// Owns the deferred "dropped" notices.
    tracker: TaskTracker,
    limiter: Arc<RateLimiter>,
}

impl TelegramNotifier {
    pub fn new(
        api: BotApi,
        config: Arc<TelegramConfig>,
        cancel: CancellationToken,
        tracker: TaskTracker,
    ) -> Self {
        let limiter = Arc::new(RateLimiter::new(config.notify_limit, config.notify_window));
        TelegramNotifier { api, config, cancel, tracker, limiter }
    }

    /// Where a notification from the workspace of `chat_id` goes, and how its caller is named:
    /// a private chat's own chat; for a group, the owner's private chat, naming the group.
    fn route(&self, chat_id: i64, caller: &str) -> Result<(i64, String), String> {
        if !self.config.is_allowed_group(chat_id) {
            return Ok((chat_id, caller.to_string()));
        }
        let owner =
            self.config.owner().ok_or("no owner to notify (Telegram__AllowedUserIds is empty)")?;
        Ok((owner, format!("{caller} (group {chat_id})")))
    }

    /// Sends the notice about a burst once the caller's window has room again.
    fn notice_later(&self, key: CallerKey, target: i64, name: String, at: Instant) {
        let (api, cancel, limiter) = (self.api.clone(), self.cancel.clone(), self.limiter.clone());
        let window = self.config.notify_window;
        let limit = self.config.notify_limit;
        self.tracker.spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep_until(at) => {}
            }
            let dropped = limiter.end_burst(&key);
            let text = format!(
                "{dropped} more notification{} dropped (at most {limit} per {}).",
                if dropped == 1 { " was" } else { "s were" },
                describe_window(window)
            );
            if let Err(err) = send_marked(&api, target, &name, Words::Ours(&text), &cancel).await {
                tracing::warn!(caller = %key.1, error = %err, "cannot tell the owner about dropped notifications");
            }
        });
    }
}

/// The marked prefix: `🤖 A2A · <name>:`.
fn prefix(name: &str) -> String {
    format!("🤖 A2A · {name}:")
}

/// `text` cut to `max` characters, with a visible mark when it was cut.
pub fn capped(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}{CUT_MARK}", &text[..at]),
    }
}

/// `1 minute`, `30 s`.
fn describe_window(window: Duration) -> String {
    match window.as_secs() {
        60 => "minute".to_string(),
        secs if secs % 60 == 0 => format!("{} minutes", secs / 60),
        secs => format!("{secs} s"),
    }
}

/// Whose words a notification carries after its prefix.
#[derive(Clone, Copy)]
enum Words<'a> {
    /// The caller's: on the lines below the prefix, in a block quote.
    Caller(&'a str),
    /// The bot's own (the notice about dropped notifications): on the prefix's line, unquoted,
    /// which no caller text can be.
    Ours(&'a str),
}

/// Sends `words` as one or more messages, each starting with the bold prefix.
async fn send_marked(
    api: &BotApi,
    chat_id: i64,
    name: &str,
    words: Words<'_>,
    cancel: &CancellationToken,
) -> Result<(), crate::api::ApiError> {
    let prefix = prefix(name);
    let marked = utf16_len(&prefix);
    let bold = Entity { kind: EntityKind::Bold, offset: 0, length: marked };
    let (Words::Caller(text) | Words::Ours(text)) = words;
    // The prefix, a separator, and at least a little of the text per message.
    let room = MESSAGE_LIMIT.saturating_sub(marked + 1).max(1);
    let parts: Vec<&str> =
        render::split(text, room).into_iter().filter(|p| !p.trim().is_empty()).collect();
    if parts.is_empty() {
        api.send_message_with_entities(chat_id, &prefix, &[bold], cancel).await?;
    }
    for part in parts {
        let (message, entities) = match words {
            Words::Ours(_) => (format!("{prefix} {part}"), vec![bold]),
            Words::Caller(_) => {
                // Trailing whitespace is left out of the quote: Telegram trims it off the text.
                let length = utf16_len(part.trim_end());
                let quote = Entity { kind: EntityKind::Blockquote, offset: marked + 1, length };
                (format!("{prefix}\n{part}"), vec![bold, quote])
            }
        };
        api.send_message_with_entities(chat_id, &message, &entities, cancel).await?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl OwnerNotifier for TelegramNotifier {
    async fn notify(&self, caller: &Caller, text: &str) -> Result<(), String> {
        let owner = &caller.workspace.owner_id;
        let chat_id: i64 =
            owner.parse().map_err(|_| format!("the owner {owner:?} is not a Telegram chat"))?;
        let (target, name) = self.route(chat_id, &caller.name)?;
        let key = (caller.workspace.path.clone(), caller.name.clone());
        match self.limiter.admit(&key, Instant::now()) {
            Admission::Admitted => {}
            Admission::FirstDropped { notice_at } => {
                tracing::warn!(caller = %caller.name, chat_id, "notify_owner rate limit reached; dropping");
                self.notice_later(key, target, name, notice_at);
                return Err(self.refusal());
            }
            Admission::Dropped => return Err(self.refusal()),
        }
        let text = capped(text, self.config.notify_max_chars);
        send_marked(&self.api, target, &name, Words::Caller(&text), &self.cancel)
            .await
            .map_err(|err| format!("could not reach the owner: {err}"))
    }
}

impl TelegramNotifier {
    fn refusal(&self) -> String {
        format!(
            "not delivered: at most {} notifications per {} from one caller; the owner will be \
told how many were dropped",
            self.config.notify_limit,
            describe_window(self.config.notify_window)
        )
    }
}

/// A caller: its workspace and name.
type CallerKey = (PathBuf, String);

/// The outcome of one notification attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    Admitted,
    /// The first one dropped in a burst: a notice is due at `notice_at`.
    FirstDropped {
        notice_at: Instant,
    },
    Dropped,
}

/// Per-caller sliding-window counts.
struct RateLimiter {
    limit: usize,
    window: Duration,
    callers: Mutex<HashMap<CallerKey, Burst>>,
}

#[derive(Default)]
struct Burst {
    /// When the admitted notifications of the window were sent.
    sent: VecDeque<Instant>,
    /// Dropped since the burst began; a notice is pending while this is above zero.
    dropped: usize,
}

impl RateLimiter {
    fn new(limit: usize, window: Duration) -> Self {
        RateLimiter { limit, window, callers: Mutex::new(HashMap::new()) }
    }

    fn admit(&self, key: &CallerKey, now: Instant) -> Admission {
        let mut callers = self.callers.lock().unwrap_or_else(PoisonError::into_inner);
        let burst = callers.entry(key.clone()).or_default();
        while burst.sent.front().is_some_and(|&at| now.duration_since(at) >= self.window) {
            burst.sent.pop_front();
        }
        // While a burst's notice is pending, everything is dropped into it: one notice per burst.
        if burst.dropped == 0 && burst.sent.len() < self.limit {
            burst.sent.push_back(now);
            return Admission::Admitted;
        }
        burst.dropped += 1;
        if burst.dropped > 1 {
            return Admission::Dropped;
        }
        let oldest = burst.sent.front().copied().unwrap_or(now);
        Admission::FirstDropped { notice_at: oldest + self.window }
    }

    /// The burst is over: how many were dropped in it.
    fn end_burst(&self, key: &CallerKey) -> usize {
        let mut callers = self.callers.lock().unwrap_or_else(PoisonError::into_inner);
        callers.get_mut(key).map_or(0, |burst| std::mem::take(&mut burst.dropped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_texts_say_so() {
        assert_eq!(capped("hello", 5), "hello");
        assert_eq!(capped("hello!", 5), "hello…(cut)");
        assert_eq!(capped("отчёт", 3), "отч…(cut)");
    }

    #[test]
    fn rate_limit_drops_a_burst_with_one_notice_and_reopens() {
        let limiter = RateLimiter::new(2, Duration::from_secs(60));
        let key: CallerKey = ("/w".into(), "bot".into());
        let start = Instant::now();
        assert_eq!(limiter.admit(&key, start), Admission::Admitted);
        assert_eq!(limiter.admit(&key, start), Admission::Admitted);
        let later = start + Duration::from_secs(1);
        assert_eq!(
            limiter.admit(&key, later),
            Admission::FirstDropped { notice_at: start + Duration::from_secs(60) }
        );
        assert_eq!(limiter.admit(&key, later), Admission::Dropped);
        // Even once the window has room, the burst lasts until its notice went out.
        let reopened = start + Duration::from_secs(61);
        assert_eq!(limiter.admit(&key, reopened), Admission::Dropped);
        assert_eq!(limiter.end_burst(&key), 3);
        assert_eq!(limiter.admit(&key, reopened), Admission::Admitted);
        let other: CallerKey = ("/w".into(), "other".into());
        assert_eq!(limiter.admit(&other, later), Admission::Admitted, "per caller");
    }
}
