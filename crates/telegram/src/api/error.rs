//! How a Bot API call fails ([`ApiError`]) and what each failure means for the caller: retry,
//! wait, or never send again (Telegram may have handled it). No variant holds a URL or the
//! token; a reqwest error is stripped of its URL and redacted before it becomes one.

use std::time::Duration;

use volcanic_core::redact::Redactor;

use crate::config::Backoff;

/// How a Bot API call failed. Never holds a URL or the token.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// No connection could be made: the request never reached Telegram.
    #[error("cannot reach the Bot API: {0}")]
    Unreached(String),
    /// The request went out but no answer came (timeout, broken connection): Telegram may have
    /// handled it.
    #[error("network error: {0}")]
    Network(String),
    /// The API failed (5xx) and said so in a Bot API answer: the call was not handled.
    #[error("Bot API error {status}: {description}")]
    Server { status: u16, description: String },
    /// A 5xx without a Bot API answer (a gateway's error page): Telegram may have handled it.
    #[error("Bot API gateway error {status}")]
    Gateway { status: u16 },
    /// Flood control: wait `retry_after` before the next call.
    #[error("Bot API flood control: retry after {}s", retry_after.as_secs())]
    TooManyRequests { retry_after: Duration },
    /// The API refused the call (4xx other than 429); retrying would not help.
    #[error("Bot API refused the call ({status}): {description}")]
    Rejected { status: u16, description: String },
    /// The answer was not the Bot API's JSON.
    #[error("unexpected Bot API answer: {0}")]
    Malformed(String),
    /// A file is larger than allowed.
    #[error("the file is {size} bytes, larger than the {limit}-byte limit")]
    TooLarge { size: u64, limit: u64 },
    /// A local file could not be read.
    #[error("cannot read the file: {0}")]
    File(String),
    /// The host is shutting down.
    #[error("cancelled")]
    Cancelled,
}

impl ApiError {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ApiError::Unreached(_)
            | ApiError::Network(_)
            | ApiError::Server { .. }
            | ApiError::Gateway { .. }
            | ApiError::TooManyRequests { .. }
            | ApiError::Malformed(_) => true,
            ApiError::Rejected { .. }
            | ApiError::TooLarge { .. }
            | ApiError::File(_)
            | ApiError::Cancelled => false,
        }
    }

    /// Whether Telegram may have handled the call although it failed for us (the request went
    /// out and no Bot API answer came back): a send must not be repeated blindly then.
    pub fn is_maybe_delivered(&self) -> bool {
        match self {
            ApiError::Network(_) | ApiError::Gateway { .. } | ApiError::Malformed(_) => true,
            ApiError::Unreached(_)
            | ApiError::Server { .. }
            | ApiError::TooManyRequests { .. }
            | ApiError::Rejected { .. }
            | ApiError::TooLarge { .. }
            | ApiError::File(_)
            | ApiError::Cancelled => false,
        }
    }

    /// Telegram's answer to an edit that changes nothing: harmless.
    pub fn is_not_modified(&self) -> bool {
        matches!(self, ApiError::Rejected { description, .. } if description.contains("message is not modified"))
    }

    /// The wait before the next attempt: `retry_after` for a 429, else the backoff's.
    pub(super) fn wait(&self, backoff: &Backoff, attempt: u32) -> Duration {
        match self {
            ApiError::TooManyRequests { retry_after } => *retry_after,
            ApiError::Unreached(_)
            | ApiError::Network(_)
            | ApiError::Server { .. }
            | ApiError::Gateway { .. }
            | ApiError::Rejected { .. }
            | ApiError::Malformed(_)
            | ApiError::TooLarge { .. }
            | ApiError::File(_)
            | ApiError::Cancelled => backoff.delay(attempt),
        }
    }
}

/// A reqwest error as an [`ApiError`]: its text without the URL (which holds the token), with
/// its causes, redacted all the same; [`ApiError::Unreached`] when no connection was made.
pub(super) fn network_error(err: reqwest::Error, redactor: &Redactor) -> ApiError {
    let unreached = err.is_connect();
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    let text = redactor.redact(&text).into_owned();
    if unreached { ApiError::Unreached(text) } else { ApiError::Network(text) }
}
