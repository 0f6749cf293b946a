//! The crate's error type. No variant ever carries the bot token or a URL.

use crate::api::ApiError;

/// What can stop the Telegram host.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Bot API refused the token (401/404 on getMe).
    #[error("the Bot API rejected the bot token (check Telegram__BotToken): {0}")]
    TokenRejected(ApiError),
    /// The HTTP client could not be built (no TLS backend).
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    /// The A2A server could not be built (its error names the setting, such as a bad card
    /// key).
    #[error("cannot build the A2A server: {0}")]
    A2aBuild(#[from] volcanic_a2a::BuildError),
    /// The A2A server's listener failed.
    #[error("A2A server: {0}")]
    A2aServe(std::io::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
