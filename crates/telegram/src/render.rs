//! Texts into Telegram messages: splitting at Telegram's limit, and an answer streamed into a
//! message that is edited as text arrives and continued in a new one when it is full.
//!
//! Telegram counts a message's length in UTF-16 code units (4096 at most). Splits prefer a
//! paragraph break, then a line break, then a space, in the second half of the part; otherwise
//! the part is cut at the last whole character that fits, so a surrogate pair is never split.
//! Separators stay with the part before them, so the parts concatenate to the original text.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::api::BotApi;

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
    /// The text of that message so far (shown or not yet).
    pending: String,
    last_flush: Option<Instant>,
    interval: std::time::Duration,
    /// Whether anything reached the chat.
    pub delivered: bool,
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
            last_flush: None,
            interval,
            delivered: false,
        }
    }

    /// More text arrived: full parts are finished, and the live message is updated if the last
    /// update is at least the edit interval ago.
    pub async fn push(&mut self, delta: &str) {
        self.pending.push_str(delta);
        while utf16_len(&self.pending) > MESSAGE_LIMIT {
            let cut = split_point(&self.pending, MESSAGE_LIMIT);
            let head: String = self.pending[..cut].to_string();
            if !head.trim().is_empty() {
                self.show(&head).await;
                if let Some(id) = self.current.take() {
                    self.finished.push((id, std::mem::take(&mut self.shown)));
                }
            }
            self.done.push_str(&head);
            self.pending.drain(..cut);
            self.current = None;
            self.shown.clear();
        }
        if self.last_flush.is_none_or(|at| at.elapsed() >= self.interval) {
            self.flush().await;
        }
    }

    /// Shows the pending text now (the throttle's timer calls this).
    pub async fn flush(&mut self) {
        self.last_flush = Some(Instant::now());
        if self.pending.trim().is_empty() || self.pending == self.shown {
            return;
        }
        let text = self.pending.clone();
        self.show(&text).await;
    }

    /// The message is complete and `full` is its text. The messages end up holding exactly
    /// `full`, split as a whole text would be: normally only the last one changes, but when
    /// streamed deltas were lost (a slow subscriber loses deltas first), earlier parts are
    /// corrected by edits too.
    pub async fn finish(&mut self, full: &str) {
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
            match messages.get(index) {
                Some((id, shown)) if shown == part => self.current = Some(*id),
                Some((id, _)) => {
                    self.current = Some(*id);
                    self.shown.clear();
                    self.show(part).await;
                }
                None => {
                    self.current = None;
                    self.show(part).await;
                }
            }
        }
        self.done = full.to_string();
        self.pending.clear();
    }

    /// Puts `text` into the live message: an edit if there is one, else a new message.
    async fn show(&mut self, text: &str) {
        match self.current {
            Some(message_id) => {
                if self.shown == text {
                    return;
                }
                match self.api.edit_message(self.chat_id, message_id, text, &self.cancel).await {
                    Ok(()) => self.shown = text.to_string(),
                    Err(err) => {
                        tracing::warn!(chat_id = self.chat_id, error = %err, "cannot edit the answer")
                    }
                }
            }
            None => match self.api.send_message(self.chat_id, text, &self.cancel).await {
                Ok(message) => {
                    self.current = Some(message.message_id);
                    self.shown = text.to_string();
                    self.delivered = true;
                }
                Err(err) => {
                    tracing::warn!(chat_id = self.chat_id, error = %err, "cannot send the answer")
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
