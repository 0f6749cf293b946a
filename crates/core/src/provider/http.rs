//! Plumbing shared by the HTTP providers (Anthropic and OpenAI-compatible).
//!
//! It owns the HTTP client and its timeouts, the one mapping of API failures onto
//! [`ProviderErrorKind`]s, a reader of server-sent events that honours cancellation and the idle
//! timeout, and the assembly of tool arguments that arrive as JSON fragments.
//! Every error leaving this module is redacted with a redactor that knows the API key, because
//! APIs echo request headers back in error bodies.
//! It knows the common shape of API error bodies, but nothing of either API's messages or events.

use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{ProviderError, ProviderErrorKind};
use crate::redact::{Redactor, Secret};

/// How long a stream may stay silent before the call fails as a network error.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// How long establishing a connection (TCP and TLS) may take.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Most bytes of an error body read; the rest is not worth waiting for.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// Most characters of the API's own error text kept in a [`ProviderError`] message.
const MAX_API_MESSAGE_CHARS: usize = 500;
/// Phrases by which the APIs say the conversation does not fit the context window (Anthropic
/// "prompt is too long", OpenAI `context_length_exceeded`, vLLM "maximum context length",
/// llama.cpp `exceed_context_size_error`).
const CONTEXT_OVERFLOW_PHRASES: [&str; 7] = [
    "prompt is too long",
    "context length",
    "context_length",
    "context window",
    "context limit",
    "context size",
    "exceed_context",
];

/// The error a provider returns when `cancel` fired during the call.
pub(crate) fn aborted() -> ProviderError {
    ProviderError::new(ProviderErrorKind::Other, "aborted")
}

/// The arguments of a streamed tool call, from the concatenated JSON fragments.
///
/// Empty input means "no arguments" (`{}`). Anything that is not a JSON object is kept as
/// `{"_invalid_json": "<raw>"}` instead of failing the whole answer or calling the tool with no
/// arguments: the tool then reports an argument error and the model can correct itself.
pub(crate) fn parse_tool_args(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) | Err(_) => serde_json::json!({ "_invalid_json": raw }),
    }
}

/// An HTTP client for one provider, with the key-aware redactor its errors go through.
pub(crate) struct HttpClient {
    client: reqwest::Client,
    redactor: Redactor,
    provider: &'static str,
    idle_timeout: Duration,
}

impl HttpClient {
    /// A client for `provider` (used in error messages) whose errors never show `api_key`.
    pub(crate) fn new(
        provider: &'static str,
        api_key: Option<&str>,
        connect_timeout: Duration,
        idle_timeout: Duration,
    ) -> Result<Self, ProviderError> {
        let secrets = api_key
            .map(|key| Secret { name: format!("{provider}-api-key"), value: key.to_owned() })
            .into_iter()
            .collect();
        let redactor = Redactor::new(secrets);
        // No redirect is followed: reqwest's default keeps `x-api-key` and `Authorization` on a
        // redirect to another host, so an endpoint that answered with one could have the key
        // sent anywhere. The model APIs answer their calls directly; a redirect is an error.
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build();
        match client {
            Ok(client) => Ok(HttpClient { client, redactor, provider, idle_timeout }),
            Err(err) => {
                let message = format!("{provider}: cannot build the http client: {}", chain(&err));
                Err(ProviderError::new(ProviderErrorKind::Other, redactor.redact(&message)))
            }
        }
    }

    /// A POST request to `url`.
    pub(crate) fn post(&self, url: &str) -> reqwest::RequestBuilder {
        self.client.post(url)
    }

    /// Sends `request` and returns its event stream, or the classified failure.
    ///
    /// Waiting for the response head counts against the idle timeout.
    pub(crate) async fn open_sse(
        &self,
        request: reqwest::RequestBuilder,
        cancel: &CancellationToken,
    ) -> Result<SseStream<'_>, ProviderError> {
        let sent = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(aborted()),
            sent = tokio::time::timeout(self.idle_timeout, request.send()) => sent,
        };
        let response = match sent {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => return Err(self.transport_error("request failed", &err)),
            Err(_elapsed) => {
                let secs = self.idle_timeout.as_secs_f64();
                return Err(
                    self.error(ProviderErrorKind::Network, &format!("no response within {secs} s"))
                );
            }
        };
        let status = response.status();
        tracing::debug!(provider = self.provider, status = status.as_u16(), "model call answered");
        if !status.is_success() {
            return Err(self.status_error(response, cancel).await);
        }
        Ok(SseStream { events: Box::pin(response.bytes_stream().eventsource()), http: self })
    }

    /// A redacted error of `kind` whose message is prefixed with the provider name.
    pub(crate) fn error(&self, kind: ProviderErrorKind, detail: &str) -> ProviderError {
        let message = format!("{}: {detail}", self.provider);
        ProviderError::new(kind, self.redactor.redact(&message))
    }

    /// The error for an `error` event (or error payload) sent after the stream had started.
    pub(crate) fn stream_error(&self, data: &str) -> ProviderError {
        let api = ApiError::parse(data);
        let kind = classify(None, &api);
        self.error(kind, &format!("stream error{}", api.describe(data)))
    }

    /// The error for a stream that ended before its `terminal` event.
    pub(crate) fn cut_short(&self, terminal: &str) -> ProviderError {
        self.error(ProviderErrorKind::Network, &format!("stream ended before {terminal}"))
    }

    /// The error for an event whose data does not decode.
    pub(crate) fn malformed(&self, event: &str, err: &serde_json::Error) -> ProviderError {
        self.error(ProviderErrorKind::Other, &format!("malformed {event} event: {err}"))
    }

    fn transport_error(&self, context: &str, err: &reqwest::Error) -> ProviderError {
        self.error(ProviderErrorKind::Network, &format!("{context}: {}", chain(err)))
    }

    async fn status_error(
        &self,
        mut response: reqwest::Response,
        cancel: &CancellationToken,
    ) -> ProviderError {
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let read = async {
            let mut body = Vec::new();
            while body.len() < MAX_ERROR_BODY_BYTES {
                match response.chunk().await {
                    Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                    // A body cut short still says what it can; the status decides the kind.
                    Ok(None) | Err(_) => break,
                }
            }
            body
        };
        let body = tokio::select! {
            biased;
            () = cancel.cancelled() => return aborted(),
            body = tokio::time::timeout(self.idle_timeout, read) => body.unwrap_or_default(),
        };
        let body = String::from_utf8_lossy(&body);
        let api = ApiError::parse(&body);
        let kind = classify(Some(status), &api);
        let mut error = self.error(kind, &format!("http {status}{}", api.describe(&body)));
        error.retry_after = retry_after;
        error
    }
}

/// The events of one streamed response.
pub(crate) struct SseStream<'a> {
    events: Pin<Box<dyn Stream<Item = SseItem> + Send + 'a>>,
    http: &'a HttpClient,
}

type SseItem = Result<Event, EventStreamError<reqwest::Error>>;

impl SseStream<'_> {
    /// The next event, `None` when the stream ended.
    ///
    /// # Errors
    /// `aborted` when `cancel` fires, a network error when the stream breaks or stays silent
    /// longer than the idle timeout.
    pub(crate) async fn next(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<Option<Event>, ProviderError> {
        let idle_timeout = self.http.idle_timeout;
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(aborted()),
            next = tokio::time::timeout(idle_timeout, self.events.next()) => next,
        };
        match next {
            Ok(None) => Ok(None),
            Ok(Some(Ok(event))) => Ok(Some(event)),
            Ok(Some(Err(EventStreamError::Transport(err)))) => {
                Err(self.http.transport_error("stream broken", &err))
            }
            Ok(Some(Err(err @ (EventStreamError::Utf8(_) | EventStreamError::Parser(_))))) => {
                Err(self
                    .http
                    .error(ProviderErrorKind::Network, &format!("bad event stream: {err}")))
            }
            Err(_elapsed) => {
                let secs = idle_timeout.as_secs_f64();
                Err(self
                    .http
                    .error(ProviderErrorKind::Network, &format!("stream idle for {secs} s")))
            }
        }
    }
}

/// What an API error body says, in the shapes the APIs use:
/// `{"type":"error","error":{"type":..,"message":..}}` (Anthropic),
/// `{"error":{"message":..,"type":..,"code":..}}` (OpenAI, vLLM) and `{"error":".."}` (Ollama).
#[derive(Debug, Default, PartialEq)]
struct ApiError {
    kind: Option<String>,
    code: Option<String>,
    message: Option<String>,
}

impl ApiError {
    fn parse(body: &str) -> ApiError {
        let Ok(value) = serde_json::from_str::<Value>(body) else { return ApiError::default() };
        let error = value.get("error").unwrap_or(&value);
        match error {
            Value::String(message) => {
                ApiError { message: Some(message.clone()), ..ApiError::default() }
            }
            Value::Object(map) => ApiError {
                kind: map.get("type").and_then(Value::as_str).map(str::to_owned),
                code: map.get("code").and_then(|code| match code {
                    Value::String(code) => Some(code.clone()),
                    Value::Number(code) => Some(code.to_string()),
                    Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_) => None,
                }),
                message: map.get("message").and_then(Value::as_str).map(str::to_owned),
            },
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => {
                ApiError::default()
            }
        }
    }

    /// `" (type): message"`, or the raw body when it is not a known error shape.
    fn describe(&self, body: &str) -> String {
        let label = self.kind.as_deref().or(self.code.as_deref());
        let text = match &self.message {
            Some(message) => message.as_str(),
            None => body.trim(),
        };
        let text = truncate(text, MAX_API_MESSAGE_CHARS);
        match (label, text.is_empty()) {
            (Some(label), false) => format!(" ({label}): {text}"),
            (Some(label), true) => format!(" ({label})"),
            (None, false) => format!(": {text}"),
            (None, true) => String::new(),
        }
    }

    fn mentions_context_overflow(&self) -> bool {
        [&self.kind, &self.code, &self.message].into_iter().flatten().any(|text| {
            let text = text.to_lowercase();
            CONTEXT_OVERFLOW_PHRASES.iter().any(|phrase| text.contains(phrase))
        })
    }
}

/// The kind of a failure, from the HTTP status when there is one (`None` for an error sent inside
/// a stream that had already answered 200) and what the body says.
fn classify(status: Option<u16>, api: &ApiError) -> ProviderErrorKind {
    if status == Some(529) || api.kind.as_deref() == Some("overloaded_error") {
        return ProviderErrorKind::Overloaded;
    }
    if let Some(status) = status {
        return match status {
            401 | 403 => ProviderErrorKind::Auth,
            429 => ProviderErrorKind::RateLimited,
            408 => ProviderErrorKind::Network,
            400..=499 if api.mentions_context_overflow() => ProviderErrorKind::ContextOverflow,
            400..=499 => ProviderErrorKind::BadRequest,
            500..=599 => ProviderErrorKind::Server { status },
            _ => ProviderErrorKind::Other,
        };
    }
    if api.mentions_context_overflow() {
        return ProviderErrorKind::ContextOverflow;
    }
    // vLLM puts the HTTP status it would have answered into `code`.
    if let Some(code) = api.code.as_deref().and_then(|code| code.parse::<u16>().ok()) {
        return classify(Some(code), api);
    }
    match (api.kind.as_deref(), api.code.as_deref()) {
        (Some("rate_limit_error"), _) | (_, Some("rate_limit_exceeded")) => {
            ProviderErrorKind::RateLimited
        }
        (Some("authentication_error" | "permission_error"), _) => ProviderErrorKind::Auth,
        (Some("invalid_request_error" | "not_found_error" | "request_too_large"), _) => {
            ProviderErrorKind::BadRequest
        }
        // The API's internal error after a 200: retried like the 500 it would have been.
        (Some("api_error" | "server_error"), _) => ProviderErrorKind::Server { status: 500 },
        _ => ProviderErrorKind::Other,
    }
}

/// The wait the server asked for: `retry-after-ms`, `retry-after` (seconds), or else the latest
/// of the rate-limit reset headers (OpenAI's `x-ratelimit-reset-*` durations such as `6m0s`,
/// Anthropic's `anthropic-ratelimit-*-reset` timestamps).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let seconds = |text: &str| {
        text.trim().parse::<f64>().ok().filter(|secs| secs.is_finite() && *secs >= 0.0)
    };
    if let Some(ms) = header("retry-after-ms").and_then(seconds) {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    if let Some(secs) = header("retry-after").and_then(seconds) {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let openai = ["x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"]
        .into_iter()
        .filter_map(|name| header(name).and_then(parse_go_duration));
    let anthropic = [
        "anthropic-ratelimit-requests-reset",
        "anthropic-ratelimit-tokens-reset",
        "anthropic-ratelimit-input-tokens-reset",
        "anthropic-ratelimit-output-tokens-reset",
    ]
    .into_iter()
    .filter_map(|name| header(name).and_then(until_timestamp));
    openai.chain(anthropic).max()
}

/// Parses durations like `1s`, `20ms`, `6m0s` or `1h2m3.5s`.
fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut total = 0.0_f64;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).ok()
}

/// The time from now until an RFC 3339 timestamp (zero when it has passed).
fn until_timestamp(text: &str) -> Option<Duration> {
    let at = chrono::DateTime::parse_from_rfc3339(text.trim()).ok()?;
    let wait = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// An error with its causes, `outer: inner: innermost`.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// At most `max` characters of `text`, with an ellipsis when cut.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(kind: Option<&str>, code: Option<&str>, message: Option<&str>) -> ApiError {
        ApiError {
            kind: kind.map(str::to_owned),
            code: code.map(str::to_owned),
            message: message.map(str::to_owned),
        }
    }

    #[test]
    fn classify_status_and_body_pick_the_kind() {
        use ProviderErrorKind::*;
        let cases = [
            (Some(401), api(Some("authentication_error"), None, None), Auth),
            (Some(403), api(None, None, None), Auth),
            (Some(400), api(Some("invalid_request_error"), None, Some("bad tools")), BadRequest),
            (
                Some(400),
                api(Some("invalid_request_error"), None, Some("prompt is too long: 1 > 0")),
                ContextOverflow,
            ),
            (
                Some(400),
                api(Some("invalid_request_error"), Some("context_length_exceeded"), None),
                ContextOverflow,
            ),
            (Some(404), api(None, None, None), BadRequest),
            (Some(422), api(None, None, None), BadRequest),
            (Some(429), api(Some("rate_limit_error"), None, None), RateLimited),
            (Some(529), api(None, None, None), Overloaded),
            (Some(500), api(Some("overloaded_error"), None, None), Overloaded),
            (Some(503), api(None, None, None), Server { status: 503 }),
            (Some(302), api(None, None, None), Other),
            (None, api(Some("overloaded_error"), None, None), Overloaded),
            (None, api(Some("api_error"), None, None), Server { status: 500 }),
            (None, api(Some("rate_limit_error"), None, None), RateLimited),
            (None, api(Some("BadRequestError"), Some("400"), None), BadRequest),
            (None, api(None, None, Some("maximum context length is 4096")), ContextOverflow),
            (None, api(Some("mystery"), None, None), Other),
        ];
        for (status, api, want) in cases {
            assert_eq!(classify(status, &api), want, "status {status:?}, {api:?}");
        }
    }

    #[test]
    fn api_error_parse_reads_the_known_shapes() {
        let cases = [
            (
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                api(Some("overloaded_error"), None, Some("Overloaded")),
            ),
            (
                r#"{"error":{"message":"nope","type":"invalid_request_error","code":"x"}}"#,
                api(Some("invalid_request_error"), Some("x"), Some("nope")),
            ),
            (r#"{"error":"model not found"}"#, api(None, None, Some("model not found"))),
            (r#"{"object":"error","message":"m","code":400}"#, api(None, Some("400"), Some("m"))),
            ("<html>bad gateway</html>", api(None, None, None)),
        ];
        for (body, want) in cases {
            assert_eq!(ApiError::parse(body), want, "body {body}");
        }
    }

    #[test]
    fn retry_after_headers_are_read_in_order() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, reqwest::header::HeaderValue::from_static(value));
            }
            map
        };
        let cases = [
            (headers(&[("retry-after", "7")]), Some(Duration::from_secs(7))),
            (
                headers(&[("retry-after", "7"), ("retry-after-ms", "1500")]),
                Some(Duration::from_millis(1500)),
            ),
            (
                headers(&[
                    ("x-ratelimit-reset-requests", "1s"),
                    ("x-ratelimit-reset-tokens", "6m0s"),
                ]),
                Some(Duration::from_secs(360)),
            ),
            (
                headers(&[("anthropic-ratelimit-requests-reset", "2000-01-01T00:00:00Z")]),
                Some(Duration::ZERO),
            ),
            (headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]), None),
            (headers(&[("retry-after", "1e300")]), None),
            (headers(&[]), None),
        ];
        for (map, want) in cases {
            assert_eq!(retry_after(&map), want, "headers {map:?}");
        }
    }

    #[test]
    fn parse_go_duration_reads_units() {
        let cases = [
            ("20ms", Some(Duration::from_millis(20))),
            ("1h2m3.5s", Some(Duration::from_secs_f64(3723.5))),
            ("", None),
            ("5x", None),
            ("12", None),
            ("99999999999999999999999h", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text), want, "text {text:?}");
        }
    }

    #[test]
    fn parse_tool_args_keeps_invalid_json_visible() {
        let cases = [
            ("", serde_json::json!({})),
            ("  ", serde_json::json!({})),
            (r#"{"a": 1}"#, serde_json::json!({"a": 1})),
            (r#"{"a": "#, serde_json::json!({"_invalid_json": r#"{"a": "#})),
            ("[1]", serde_json::json!({"_invalid_json": "[1]"})),
        ];
        for (raw, want) in cases {
            assert_eq!(parse_tool_args(raw), want, "raw {raw:?}");
        }
    }

    #[test]
    fn truncate_cuts_on_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "hé…");
        assert_eq!(truncate("hé", 2), "hé");
    }
}
