//! One POST to a webhook and what its answer means for the next attempt: the [`Deliver`] seam
//! (HTTP through the guarded client in production, a fake in tests), the failure with its
//! `Retry-After`, and the webhook's host, the only part of its URL that may reach a log.
//!
//! It knows nothing of queues, the outbox or retry policy.

use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};

/// The header that carries the config's token (what the SDKs send and check; de facto, not normative).
pub const TOKEN_HEADER: &str = "X-A2A-Notification-Token";

/// One POST to a webhook. No `Debug`: it holds the token and credentials.
pub(crate) struct Outgoing {
    pub url: String,
    /// For `X-A2A-Notification-Token`.
    pub token: Option<String>,
    /// The whole `Authorization` value: `<scheme> <credentials>`.
    pub authorization: Option<String>,
    /// JSON.
    pub body: Bytes,
}

/// Why an attempt failed, without the URL, token or credentials.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Failure {
    /// A non-2xx status, a connection failure, a timeout.
    pub reason: String,
    /// The webhook's `Retry-After` on a 429 or 503, as a wait from now (not yet capped).
    pub retry_after: Option<Duration>,
}

impl From<String> for Failure {
    fn from(reason: String) -> Self {
        Failure { reason, retry_after: None }
    }
}

impl From<&str> for Failure {
    fn from(reason: &str) -> Self {
        Failure::from(reason.to_string())
    }
}

/// How a POST reaches a webhook: HTTP in production, a fake in tests.
#[async_trait::async_trait]
pub(crate) trait Deliver: Send + Sync {
    /// Sends `outgoing`.
    ///
    /// # Errors
    /// What went wrong, without the URL, token or credentials: a non-2xx status (with its
    /// `Retry-After` on 429 and 503), or a connection failure.
    async fn post(&self, outgoing: &Outgoing) -> Result<(), Failure>;
}

/// Delivery over HTTP through the sender's client.
pub(crate) struct HttpDeliver(pub reqwest::Client);

#[async_trait::async_trait]
impl Deliver for HttpDeliver {
    async fn post(&self, outgoing: &Outgoing) -> Result<(), Failure> {
        let sensitive = |name: &str, value: &str| {
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("the {name} is not a valid header value"))?;
            value.set_sensitive(true);
            Ok::<_, String>(value)
        };
        let mut request = self
            .0
            .post(&outgoing.url)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(outgoing.body.clone());
        if let Some(token) = &outgoing.token {
            request = request.header(TOKEN_HEADER, sensitive("token", token)?);
        }
        if let Some(authorization) = &outgoing.authorization {
            request = request.header(AUTHORIZATION, sensitive("authentication", authorization)?);
        }
        let response = request.send().await.map_err(|error| error.without_url().to_string())?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        // RFC 9110 §10.2.3: a 503 or a 429 (RFC 6585 §4) may say when to come back.
        let retry_after = if status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::SERVICE_UNAVAILABLE
        {
            response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| retry_after(value, SystemTime::now()))
        } else {
            None
        };
        Err(Failure { reason: format!("webhook answered {status}"), retry_after })
    }
}

/// A `Retry-After` value as a wait from `now`: delay-seconds, or an HTTP date (any of the three
/// formats RFC 9110 §5.6.7 says a recipient must accept; a date in the past is no wait). `None`
/// for anything else.
pub(crate) fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // More digits than a u64 holds is still "a very long time".
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The host of a webhook URL, for logs: never its path, query, user info or port.
pub(crate) fn host(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_string))
        .unwrap_or_else(|| "(unparsable url)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        // Sun, 06 Nov 1994 08:49:37 GMT, in RFC 9110's three formats.
        let cases = [
            ("120", Some(Duration::from_secs(120))),
            (" 0 ", Some(Duration::ZERO)),
            ("99999999999999999999999", Some(Duration::from_secs(u64::MAX))),
            ("Sun, 06 Nov 1994 08:49:47 GMT", Some(Duration::from_secs(10))),
            ("Sunday, 06-Nov-94 08:50:37 GMT", Some(Duration::from_secs(60))),
            ("Sun Nov  6 08:49:37 1994", Some(Duration::ZERO)),
            ("Sun, 06 Nov 1994 08:00:00 GMT", Some(Duration::ZERO)),
            ("-5", None),
            ("1.5", None),
            ("soon", None),
            ("", None),
        ];
        for (value, expected) in cases {
            assert_eq!(retry_after(value, now), expected, "{value:?}");
        }
    }

    #[test]
    fn host_is_all_of_a_url_that_reaches_logs() {
        assert_eq!(
            host("https://user:pw@hook.example.com:8443/p/secret?token=x#f"),
            "hook.example.com"
        );
        assert_eq!(host("http://127.0.0.1:9/hook"), "127.0.0.1");
        assert_eq!(host("not a url /secret"), "(unparsable url)");
    }
}
