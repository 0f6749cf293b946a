//! Texts into Telegram messages: splitting at Telegram's limit, an answer streamed into a
//! message that is edited as text arrives and continued in a new one when it is full, and the
//! short line that shows a tool call.
//!
//! Telegram counts a message's length in UTF-16 code units (4096 at most). Splits prefer a
//! paragraph break, then a line break, then a space, in the second half of the part; otherwise
//! the part is cut at the last whole character that fits, so a surrogate pair is never split.
//! Separators stay with the part before them, so the parts concatenate to the original text.
//! (A streamed answer whose edit failed continues in a new message at that point instead.)

use std::time::Instant;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::api::{ApiError, BotApi};

/// Telegram's limit on a message text, in UTF-16 code units.
pub const MESSAGE_LIMIT: usize = 4096;

/// The length of `text` as Telegram counts it.
pub fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// Where to cut `text` so the part before fits in `limit` UTF-16 units: a byte index on a char
/// boundary, greater than zero when `limit` holds at least one character. `text.len()` when the
/// whole text fits.
pub fn split_point(text: &str, limit: usize) -> usize {
    let mut units = 0;
    let mut fits = text.len();
    for (index, c) in text.char_indices() {
        units += c.len_utf16();
        if units > limit {
            fits = index;
            break;
        }
    }
    if fits == text.len() {
        return fits;
    }
    let head = &text[..fits];
    let floor = fits / 2;
    for separator in ["\n\n", "\n", " "] {
        if let Some(at) = head.rfind(separator) {
            let end = at + separator.len();
            if end > floor && !head[..end].trim().is_empty() {
                return end;
            }
        }
    }
    if fits == 0 {
        // A limit below one character: take the character anyway rather than loop forever.
        return text.chars().next().map_or(0, char::len_utf8);
    }
    fits
}

/// Splits a whole text into parts of at most `limit` UTF-16 units (see [`split_point`]).
pub fn split(text: &str, limit: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let cut = split_point(rest, limit);
        parts.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    parts
}

/// Sends a whole text as one or more messages; whitespace-only parts are skipped (Telegram
/// refuses empty messages).
///
/// # Errors
/// The first part that could not be delivered.
pub async fn send_text(
    api: &BotApi,
    chat_id: i64,
    text: &str,
    cancel: &CancellationToken,
) -> Result<(), crate::api::ApiError> {
    for part in split(text, MESSAGE_LIMIT) {
        if !part.trim().is_empty() {
            api.send_message(chat_id, part, cancel).await?;
        }
    }
    Ok(())
}

/// One assistant message streamed into the chat.
///
/// Nothing is dropped silently: an edit that fails (the message was deleted, or the edit was
/// refused) leaves that message as it is and continues the text in a fresh message; a part that
/// cannot be sent is kept in [`Stream::undelivered`] for the caller to deliver later; a send that
/// may have reached Telegram without an answer is not repeated (that would double it) but marks
/// the stream [`Stream::unconfirmed`].
pub struct Stream {
    api: BotApi,
    chat_id: i64,
    cancel: CancellationToken,
    /// Messages already full: (message id, text shown).
    finished: Vec<(i64, String)>,
    /// Text already cut into finished parts (whitespace-only parts included, though not sent).
    done: String,
    /// The message being edited, once sent.
    current: Option<i64>,
    /// What that message shows.
    shown: String,
    /// The text of the current part so far (shown or not yet).
    pending: String,
    /// How many bytes at the start of `pending` are in earlier messages (or may be, after an
    /// unconfirmed send): the current message holds `pending[skip..]`.
    skip: usize,
    last_flush: Option<Instant>,
    interval: std::time::Duration,
    /// Whether anything reached the chat.
    pub delivered: bool,
    /// Parts that could not be delivered, in order.
    pub undelivered: Vec<String>,
    /// Why the last send failed, for the report.
    pub error: Option<ApiError>,
    /// Whether a send failed after Telegram may have taken it (it was not repeated).
    pub unconfirmed: bool,
}

impl Stream {
    pub fn new(
        api: BotApi,
        chat_id: i64,
        interval: std::time::Duration,
        cancel: CancellationToken,
    ) -> Self {
        Stream {
            api,
            chat_id,
            cancel,
            finished: Vec::new(),
            done: String::new(),
            current: None,
            shown: String::new(),
            pending: String::new(),
            skip: 0,
            last_flush: None,
            interval,
            delivered: false,
            undelivered: Vec::new(),
            error: None,
            unconfirmed: false,
        }
    }

    /// More text arrived: full parts are finished, and the live message is updated if the last
    /// update is at least the edit interval ago.
    pub async fn push(&mut self, delta: &str) {
        self.append(delta).await;
        if self.last_flush.is_none_or(|at| at.elapsed() >= self.interval) {
            self.flush().await;
        }
    }

    /// Adds text to the current part, closing parts as they fill a message.
    async fn append(&mut self, delta: &str) {
        self.pending.push_str(delta);
        while utf16_len(&self.pending[self.skip..]) > MESSAGE_LIMIT {
            let cut = self.skip + split_point(&self.pending[self.skip..], MESSAGE_LIMIT);
            let head: String = self.pending[..cut].to_string();
            self.show(&head).await;
            self.close_part(&head);
            self.done.push_str(&head);
            self.pending.drain(..cut);
        }
    }

    /// Shows the pending text now (the throttle's timer calls this).
    pub async fn flush(&mut self) {
        self.last_flush = Some(Instant::now());
        if self.pending[self.skip..].trim().is_empty() || self.pending[self.skip..] == self.shown {
            return;
        }
        let text = self.pending.clone();
        self.show(&text).await;
    }

    /// The message is complete and `full` is its text. The messages end up holding exactly
    /// `full`: normally the streamed text is a prefix of it and only the rest is added; when
    /// streamed deltas were lost (a slow subscriber loses deltas first), the messages are
    /// corrected by edits to hold `full` split as a whole text would be.
    pub async fn finish(&mut self, full: &str) {
        let streamed = full
            .strip_prefix(self.done.as_str())
            .and_then(|rest| rest.strip_prefix(self.pending.as_str()));
        match streamed {
            Some(tail) => {
                let tail = tail.to_string();
                self.append(&tail).await;
                let text = self.pending.clone();
                self.show(&text).await;
                self.close_part(&text);
            }
            None => self.correct(full).await,
        }
        self.done = full.to_string();
        self.pending.clear();
    }

    /// Makes the messages hold `full` split as a whole text, editing the ones already sent.
    async fn correct(&mut self, full: &str) {
        let target: Vec<&str> =
            split(full, MESSAGE_LIMIT).into_iter().filter(|p| !p.trim().is_empty()).collect();
        let mut messages = std::mem::take(&mut self.finished);
        if let Some(id) = self.current.take() {
            messages.push((id, std::mem::take(&mut self.shown)));
        }
        if messages.len() > target.len() {
            tracing::warn!(chat_id = self.chat_id, "streamed more messages than the answer needs");
        }
        for (index, part) in target.iter().enumerate() {
            self.skip = 0;
            match messages.get(index) {
                Some((id, shown)) => {
                    self.current = Some(*id);
                    self.shown = shown.clone();
                }
                None => {
                    self.current = None;
                    self.shown.clear();
                }
            }
            self.show(part).await;
            self.close_part(part);
        }
    }

    /// The part `text` is complete: its message is finished, or what of it never reached the
    /// chat is kept as undelivered.
    fn close_part(&mut self, text: &str) {
        let rest = text.get(self.skip..).unwrap_or_default();
        match self.current.take() {
            Some(id) => self.finished.push((id, std::mem::take(&mut self.shown))),
            None if !rest.trim().is_empty() => self.undelivered.push(rest.to_string()),
            None => {}
        }
        self.shown.clear();
        self.skip = 0;
    }

    /// Puts the part `text` into the live message: an edit if there is one, else a new
    /// message; a failed edit continues the text in a new message.
    async fn show(&mut self, text: &str) {
        let Some(visible) = text.get(self.skip..) else { return };
        if visible.trim().is_empty() {
            return;
        }
        let Some(message_id) = self.current else {
            self.send_new(text).await;
            return;
        };
        if self.shown == visible {
            return;
        }
        match self.api.edit_message(self.chat_id, message_id, visible, &self.cancel).await {
            Ok(()) => self.shown = visible.to_string(),
            Err(ApiError::Cancelled) => {}
            Err(err) => {
                tracing::warn!(chat_id = self.chat_id, error = %err, "cannot edit the answer; continuing in a new message");
                // That message keeps what it shows; the rest follows in a new one. When the
                // new text is not a continuation (a correction), the new message holds it whole.
                if visible.starts_with(self.shown.as_str()) {
                    self.skip += self.shown.len();
                }
                self.current = None;
                self.shown.clear();
                self.send_new(text).await;
            }
        }
    }

    /// Sends `text[skip..]` as a new message, which becomes the live one.
    async fn send_new(&mut self, text: &str) {
        let Some(visible) = text.get(self.skip..).filter(|v| !v.trim().is_empty()) else {
            return;
        };
        match self.api.send_message(self.chat_id, visible, &self.cancel).await {
            Ok(message) => {
                self.current = Some(message.message_id);
                self.shown = visible.to_string();
                self.delivered = true;
            }
            Err(ApiError::Cancelled) => {}
            Err(err) if err.is_maybe_delivered() => {
                tracing::warn!(chat_id = self.chat_id, error = %err, "the answer may not have arrived; not sending it twice");
                // It may be in the chat: what follows goes into a new message.
                self.skip = text.len();
                self.unconfirmed = true;
                self.error = Some(err);
            }
            Err(err) => {
                tracing::warn!(chat_id = self.chat_id, error = %err, "cannot send the answer");
                self.error = Some(err);
            }
        }
    }
}

/// Longest detail shown after a tool's name.
const TOOL_DETAIL_CHARS: usize = 60;

/// A short line for a tool call: `🔧 bash: ls -la`, `🔧 read notes.md`.
pub(crate) fn tool_line(name: &str, args: &Value) -> String {
    let key = match name {
        "bash" => "command",
        "read" | "write" | "edit" | "ls" | "send" => "path",
        "grep" | "find" => "pattern",
        _ => "",
    };
    let detail = args
        .get(key)
        .and_then(Value::as_str)
        .and_then(|d| d.lines().next())
        .map(str::trim)
        .filter(|d| !d.is_empty());
    match detail {
        Some(detail) => {
            let mut short: String = detail.chars().take(TOOL_DETAIL_CHARS).collect();
            if detail.chars().count() > TOOL_DETAIL_CHARS {
                short.push('…');
            }
            format!("🔧 {name} {short}")
        }
        None => format!("🔧 {name}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tool_lines_are_short() {
        assert_eq!(tool_line("bash", &json!({"command": "ls -la\nrm x"})), "🔧 bash ls -la");
        assert_eq!(tool_line("read", &json!({"path": "notes.md"})), "🔧 read notes.md");
        assert_eq!(tool_line("notify_owner", &json!({"text": "hi"})), "🔧 notify_owner");
        let long = tool_line("bash", &json!({"command": "x".repeat(100)}));
        assert_eq!(long.chars().count(), "🔧 bash ".chars().count() + TOOL_DETAIL_CHARS + 1);
    }

    fn check(text: &str, limit: usize) -> Vec<&str> {
        let parts = split(text, limit);
        assert_eq!(parts.concat(), text);
        for part in &parts {
            assert!(utf16_len(part) <= limit, "{part:?} is over {limit}");
            assert!(!part.is_empty());
        }
        parts
    }

    #[test]
    fn split_prefers_paragraphs_then_lines_then_spaces() {
        assert_eq!(check("aaaa\n\nbbbb cc", 9), vec!["aaaa\n\n", "bbbb cc"]);
        assert_eq!(check("aaaa\nbbbb cc", 9), vec!["aaaa\n", "bbbb cc"]);
        assert_eq!(check("aaaa bbbb cc", 9), vec!["aaaa ", "bbbb cc"]);
        assert_eq!(check("aaaaaaaaaaaa", 5), vec!["aaaaa", "aaaaa", "aa"]);
        assert_eq!(check("short", 4096), vec!["short"]);
        assert!(check("", 10).is_empty());
    }

    #[test]
    fn split_ignores_separators_too_early_in_the_part() {
        // A break in the first half would waste most of the message: cut hard instead.
        assert_eq!(check("a bbbbbbbbbbbb", 10), vec!["a bbbbbbbb", "bbbb"]);
    }

    #[test]
    fn split_counts_utf16_and_never_cuts_a_surrogate_pair() {
        let text = "😀".repeat(5); // 2 units each
        assert_eq!(check(&text, 3), vec!["😀", "😀", "😀", "😀", "😀"]);
        assert_eq!(check(&text, 4), vec!["😀😀", "😀😀", "😀"]);
        assert_eq!(utf16_len("é😀"), 3);
        // A limit below one character still makes progress.
        assert_eq!(split("😀", 1), vec!["😀"]);
    }
}
