//! The A2A server's options (`A2A__*`). Every default is written once, in the `Default` impl.

use std::time::Duration;

/// Options of the A2A server.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aOptions {
    /// External base URL (`https://bot.example.com`) for the card's interface URLs; unset = built
    /// from the request's Host header.
    pub public_url: Option<String>,
    /// Largest `volcanic.hops` accepted; above it the task fails with "hop limit reached". Default 3.
    pub max_hops: u32,
    /// Idle server sessions are closed after this long (they stay resumable). Default 30 min.
    pub session_idle_timeout: Duration,
    /// Most sessions open at once, over all callers; a new context over it closes the least
    /// recently used idle session (it stays resumable), or is refused when all are busy.
    /// Default 256.
    pub max_open_sessions: usize,
    /// Most sessions one caller may have open at once, with the same eviction. Default 32.
    pub max_sessions_per_caller: usize,
    /// Cap per file part, in and out; request bodies are capped at this plus base64 overhead.
    /// Default 10 MiB.
    pub max_file_bytes: u64,
    /// Allow webhook URLs on loopback and private ranges (tests, tailnets). Default false.
    pub allow_private_push_urls: bool,
    /// Name on the public card and the fallback extended card. Default "Volcanic assistant".
    pub card_name: String,
    /// Description on the public card and the last fallback. Default a generic sentence.
    pub card_description: String,
}

impl Default for A2aOptions {
    fn default() -> Self {
        A2aOptions {
            public_url: None,
            max_hops: 3,
            session_idle_timeout: Duration::from_secs(30 * 60),
            max_open_sessions: 256,
            max_sessions_per_caller: 32,
            max_file_bytes: 10 * 1024 * 1024,
            allow_private_push_urls: false,
            card_name: "Volcanic assistant".into(),
            card_description: "A personal assistant that other agents can talk to over A2A.".into(),
        }
    }
}

impl A2aOptions {
    /// The largest request body accepted: a file part's base64 (4/3 of its bytes) plus 1 MiB of
    /// JSON around it.
    pub fn max_body_bytes(&self) -> usize {
        let file = usize::try_from(self.max_file_bytes).unwrap_or(usize::MAX);
        file.saturating_mul(4).div_ceil(3).saturating_add(1024 * 1024)
    }
}
