//! What the Telegram host is configured with. The CLI fills it from `Telegram__*` settings;
//! every default is written once, in [`TelegramConfig::new`].

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The default Bot API base URL.
pub const DEFAULT_API_URL: &str = "https://api.telegram.org";

/// Telegram's limit on files a bot may download (the Bot API's `getFile`).
pub const TELEGRAM_DOWNLOAD_LIMIT: u64 = 20 * 1024 * 1024;

/// The bot token. Never printed: `Debug` shows `[redacted]`, and it has no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct BotToken(String);

impl BotToken {
    /// Wraps a token (`123456:ABC…` from BotFather).
    pub fn new(token: impl Into<String>) -> Self {
        BotToken(token.into())
    }

    /// What is wrong with the token's shape, if anything, without a call to Telegram: BotFather's
    /// tokens are the bot's numeric id, a colon and a secret of letters, digits, `-` and `_`
    /// (`123456789:AAE…`). A value of another shape (a user id, the bot's name, half a token)
    /// would only fail later as a 404 from the Bot API, or put characters into the request URL
    /// that change its meaning. The answer never quotes the token.
    pub fn shape_problem(&self) -> Option<&'static str> {
        let Some((id, secret)) = self.0.split_once(':') else {
            return Some(
                "it has no colon; a bot token is <bot id>:<secret>, as BotFather gives it",
            );
        };
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Some(
                "the part before the colon is not the bot's numeric id; a bot token is \
<bot id>:<secret>, as BotFather gives it",
            );
        }
        if secret.is_empty()
            || !secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Some(
                "the part after the colon is empty or has characters other than letters, digits, \
- and _; a bot token is <bot id>:<secret>, as BotFather gives it",
            );
        }
        None
    }

    /// The token itself, for building request URLs and for redaction only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The secret values to redact: the whole token and the part after its colon (which alone
    /// still works with the bot id in front of it, and that id is public). Their base64 and
    /// percent-encoded forms are matched by the redactor.
    pub fn secrets(&self) -> Vec<volcanic_core::redact::Secret> {
        let name = "Telegram__BotToken";
        let mut values = vec![self.0.clone()];
        if let Some((_, secret)) = self.0.split_once(':')
            && !secret.is_empty()
        {
            values.push(secret.to_string());
        }
        values
            .into_iter()
            .map(|value| volcanic_core::redact::Secret { name: name.to_string(), value })
            .collect()
    }

    /// The bot's numeric id: the part before the colon (not secret). Used to name state files.
    pub fn bot_id(&self) -> &str {
        let id = self.0.split(':').next().unwrap_or_default();
        if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) { id } else { "bot" }
    }
}

impl fmt::Debug for BotToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Exponential backoff: `base`, doubling per attempt, at most `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Backoff {
    /// The wait before retry number `attempt` (0 = the first retry).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(20));
        self.base.saturating_mul(factor).min(self.cap)
    }
}

/// The Telegram host's settings.
#[derive(Debug, Clone)]
pub struct TelegramConfig {
    /// The bot token (`Telegram__BotToken`).
    pub token: BotToken,
    /// Users served (`Telegram__AllowedUserIds`), in their private chats and in the allowed
    /// groups; the first one is the owner (see [`TelegramConfig::owner`]). Anyone else gets one
    /// polite refusal in a private chat and is ignored in a group.
    pub allowed_users: Vec<i64>,
    /// Groups served (`Telegram__AllowedGroupIds`, negative ids); default none. In a group only
    /// the allowed users' messages are handled; other groups get no message at all.
    pub allowed_groups: Vec<i64>,
    /// Each allowed chat's workspace is `<workspace_root>/<chatId>` (`Telegram__WorkspaceRoot`).
    pub workspace_root: PathBuf,
    /// Where the update offset is kept (the host's state folder).
    pub state_dir: PathBuf,
    /// Bot API base URL, without a trailing slash (`Telegram__ApiUrl`, default
    /// [`DEFAULT_API_URL`]).
    pub api_url: String,
    /// How long one getUpdates call waits for updates (default 25 s).
    pub poll_timeout: Duration,
    /// Longest a Bot API call may take before the client gives up (`Telegram__CallTimeoutSeconds`,
    /// default 30 s). getUpdates gets `poll_timeout` on top; file transfers have their own
    /// 120 s. A send that timed out may still have been delivered, so it is not sent again.
    pub call_timeout: Duration,
    /// How long start-up waits for the Bot API to answer getMe while it cannot be reached or
    /// fails (`Telegram__StartupTimeoutSeconds`, default 60 s); then the host stops with
    /// [`crate::Error::Unreachable`]. `None` waits until it answers or the host is stopped.
    pub startup_timeout: Option<Duration>,
    /// Waits between retries of failed Bot API calls (default 1 s doubling up to 30 s). A 429
    /// waits exactly its `retry_after` instead.
    pub backoff: Backoff,
    /// Attempts per send, edit or download before giving up (default 5). Polling never gives up.
    pub send_attempts: u32,
    /// Messages a chat may have waiting behind its current run (default 20).
    pub queue_capacity: usize,
    /// Largest attachment downloaded, in bytes (default 20 MiB, Telegram's own bot limit).
    pub max_download_bytes: u64,
    /// Least time between two edits of a streaming answer (default 1 s).
    pub edit_interval: Duration,
    /// How often the typing indicator is renewed during a run (default 4 s; Telegram shows it
    /// for about 5 s).
    pub typing_interval: Duration,
    /// Longest `notify_owner` text shown, in characters (`Telegram__NotifyMaxChars`, default
    /// 2,000); the rest is cut with a visible `…(cut)`.
    pub notify_max_chars: usize,
    /// Notifications one A2A caller may send per [`Self::notify_window`]
    /// (`Telegram__NotifyPerMinute`, default 5); more are dropped, and the owner gets one
    /// notice per burst saying how many.
    pub notify_limit: usize,
    /// The sliding window of [`Self::notify_limit`] (default 1 minute).
    pub notify_window: Duration,
}

impl TelegramConfig {
    /// Settings with every default.
    pub fn new(
        token: BotToken,
        allowed_users: Vec<i64>,
        workspace_root: PathBuf,
        state_dir: PathBuf,
    ) -> Self {
        TelegramConfig {
            token,
            allowed_users,
            allowed_groups: Vec::new(),
            workspace_root,
            state_dir,
            api_url: DEFAULT_API_URL.to_string(),
            poll_timeout: Duration::from_secs(25),
            call_timeout: Duration::from_secs(30),
            startup_timeout: Some(Duration::from_secs(60)),
            backoff: Backoff { base: Duration::from_secs(1), cap: Duration::from_secs(30) },
            send_attempts: 5,
            queue_capacity: 20,
            max_download_bytes: TELEGRAM_DOWNLOAD_LIMIT,
            edit_interval: Duration::from_secs(1),
            typing_interval: Duration::from_secs(4),
            notify_max_chars: 2_000,
            notify_limit: 5,
            notify_window: Duration::from_secs(60),
        }
    }

    /// The workspace of a chat: `<workspace_root>/<chatId>`.
    pub fn workspace(&self, chat_id: i64) -> PathBuf {
        self.workspace_root.join(chat_id.to_string())
    }

    /// The main session's scope of a chat: `telegram-<chatId>` (also the prefix of its A2A
    /// callers' scopes).
    pub fn scope(chat_id: i64) -> String {
        format!("telegram-{chat_id}")
    }

    /// The owner: the first of the allowed users. Owner notifications of a group's workspace
    /// go to the owner's private chat, never into the group.
    pub fn owner(&self) -> Option<i64> {
        self.allowed_users.first().copied()
    }

    /// Whether a user is served (in their private chat, and in the allowed groups).
    pub fn is_allowed_user(&self, user_id: i64) -> bool {
        self.allowed_users.contains(&user_id)
    }

    /// Whether a group is served.
    pub fn is_allowed_group(&self, chat_id: i64) -> bool {
        self.allowed_groups.contains(&chat_id)
    }

    /// Every chat with a workspace: the allowed users' private chats, then the allowed groups.
    pub fn served_chats(&self) -> impl Iterator<Item = i64> + '_ {
        self.allowed_users.iter().chain(&self.allowed_groups).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_debug_is_redacted_and_bot_id_is_the_prefix() {
        let token = BotToken::new("123456:AAE-secret");
        assert_eq!(format!("{token:?}"), "[redacted]");
        assert_eq!(token.bot_id(), "123456");
        assert_eq!(BotToken::new("weird").bot_id(), "bot");
        let values: Vec<String> = token.secrets().into_iter().map(|s| s.value).collect();
        assert_eq!(values, vec!["123456:AAE-secret".to_string(), "AAE-secret".to_string()]);
        assert_eq!(BotToken::new("weird").secrets().len(), 1);
    }

    #[test]
    fn token_shape_is_bot_id_colon_secret() {
        for good in ["123456:AAE-secret", "777000:AAH-cli-test-token-sekrit", "1:a_b"] {
            assert_eq!(BotToken::new(good).shape_problem(), None, "{good}");
        }
        let cases = [
            ("AAEsecret", "it has no colon"),
            ("", "it has no colon"),
            (":AAE", "the part before the colon"),
            ("mybot:AAE", "the part before the colon"),
            ("-12:AAE", "the part before the colon"),
            ("123456:", "the part after the colon"),
            ("123456:AAE secret", "the part after the colon"),
            ("123456:AAE/../x", "the part after the colon"),
            ("123456:AAE:x", "the part after the colon"),
        ];
        for (bad, problem) in cases {
            let said = BotToken::new(bad).shape_problem().unwrap_or_default();
            assert!(said.starts_with(problem), "{bad:?}: {said}");
            assert!(bad.is_empty() || !said.contains(bad), "the answer quotes the token");
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let b = Backoff { base: Duration::from_secs(1), cap: Duration::from_secs(30) };
        let delays: Vec<u64> = (0..7).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(30));
    }
}
