//! HTTP helpers of the edge that know nothing of the service: reading and checking request
//! bodies, the refusal and error answers, JSON and SSE responses, header access.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::auth::AuthFailure;
use crate::error::{A2aError, unauthenticated_body};

/// How often an idle SSE stream gets a comment so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Whether the request's `Connection` header says `close` (RFC 9110 §7.6.1: a comma-separated
/// list of case-insensitive options).
pub(crate) fn asks_to_close(headers: &HeaderMap) -> bool {
    headers.get_all(header::CONNECTION).iter().any(|value| {
        value.to_str().is_ok_and(|text| {
            text.split(',').any(|option| option.trim().eq_ignore_ascii_case("close"))
        })
    })
}

/// A fair-share refusal: the error's status (429) and `Retry-After`, with the binding's body,
/// and `Connection: close`, so that a refused client does not keep holding a connection slot
/// (hyper closes the connection after the answer). A rate-limited client keeps its connection:
/// it is within its share of connections, only early.
pub(crate) fn refusal(err: &A2aError, body: Value) -> Response {
    let status = StatusCode::from_u16(err.http_status()).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    let mut response = json_response(status, body);
    let headers = response.headers_mut();
    if let Some(secs) = err.retry_after_secs() {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if !matches!(err, A2aError::RateLimited { .. }) {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// An error response with the error's `Retry-After` when it has one (a daily cap reached).
pub(crate) fn with_retry_after(err: &A2aError, mut response: Response) -> Response {
    if let Some(secs) = err.retry_after_secs() {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

/// The whole HTTP response written to a connection refused before any request was read: the
/// binding is unknown then, so the body has the REST shape, like the 401.
pub(crate) fn connection_refusal(err: &A2aError) -> Bytes {
    let status = StatusCode::from_u16(err.http_status()).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    let body = err.rest_body().to_string();
    let retry_after =
        err.retry_after_secs().map(|secs| format!("retry-after: {secs}\r\n")).unwrap_or_default();
    Bytes::from(format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{retry_after}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ))
}

/// 401 with `WWW-Authenticate` and [`unauthenticated_body`], the same on every binding.
pub(crate) fn unauthorized(failure: &AuthFailure) -> Response {
    let body = unauthenticated_body(failure);
    let mut response = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"a2a\", ApiKey realm=\"a2a\" header=\"X-API-Key\""),
    );
    response
}

/// Reads a whole request body: at most `limit` bytes, within `deadline` in total (a body that
/// trickles in slower is a slowloris, answered 408).
pub(crate) async fn read_body(
    body: Body,
    limit: usize,
    deadline: Duration,
) -> Result<Bytes, A2aError> {
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(err)) if is_length_limit(&err) => Err(A2aError::PayloadTooLarge { limit }),
        // The client broke off mid-body; whatever we answer, it will not read it.
        Ok(Err(_)) => Err(A2aError::InvalidRequest("the request body could not be read".into())),
        Err(_) => {
            let secs = u64::try_from(deadline.as_millis().div_ceil(1000)).unwrap_or(u64::MAX);
            Err(A2aError::BodyTimeout { secs })
        }
    }
}

pub(crate) fn is_length_limit(err: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = source {
        if current.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = current.source();
    }
    false
}

/// Refuses a body declared as something other than JSON. A missing Content-Type is accepted
/// (requests arrive as `application/json` or `application/a2a+json`, A2A 1.0.1 §14.1).
pub(crate) fn check_content_type(headers: &HeaderMap, body: &[u8]) -> Result<(), A2aError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else { return Ok(()) };
    if body.is_empty() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(value.as_bytes());
    let essence = text.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let is_json = essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"));
    if is_json {
        Ok(())
    } else {
        let shown: String = text.chars().take(100).collect();
        Err(A2aError::UnsupportedMediaType(shown))
    }
}

/// An error answer to a body that could not be read: the status the error maps to, and the
/// connection closed when the rest of the body may still be on its way.
pub(crate) fn body_error(err: &A2aError, body: Value) -> Response {
    let status = StatusCode::from_u16(err.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
    let mut response = (status, axum::Json(body)).into_response();
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

pub(crate) fn sse<S>(events: S) -> Response
where
    S: futures_util::Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    let mut response =
        Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

pub(crate) fn json_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// A JSON body already serialized (what `axum::Json` would send for its value).
pub(crate) fn json_bytes(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pub(crate) fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
