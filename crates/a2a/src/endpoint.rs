//! The two A2A endpoints (JSON-RPC at `/a2a`, HTTP+JSON under `/a2a/v1`): authentication,
//! the fair share, the body, decoding into a [`Request`], the task-generation extension's
//! fields, the call to the service, and encoding its answer or stream. Each is a straight line
//! from bytes to bytes over `binding` and `service`; what the server is made of and how it is
//! served is `server.rs`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Request as HttpRequest, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::response::sse::Event;
use futures_util::StreamExt;
use serde_json::Value;
use tracing::Instrument;

use crate::auth::{AuthFailure, Caller, authenticate};
use crate::binding::{self, generations, jsonrpc, rest};
use crate::error::A2aError;
use crate::fair::CallerShares;
use crate::fair::{Admission, ConnectionShare, Held};
use crate::http::{
    asks_to_close, body_error, check_content_type, header_text, json_bytes, json_response,
    read_body, refusal, sse, unauthorized, with_retry_after,
};
use crate::public_card::PublicCards;
use crate::request::{Generations, Request, Version};
use crate::service::Outcome;
use crate::service::Service;
use crate::signing;
use crate::task::events::StreamEvent;

/// What the endpoints share: the service, and what only the HTTP edge needs.
pub struct ServerInner {
    pub(crate) service: Arc<Service>,
    pub(crate) on_push: Option<PushHandler>,
    /// Each caller's requests, streams and connections in progress, against their caps.
    pub(crate) shares: CallerShares,
    /// The public card's bodies and their validators.
    pub(crate) public_cards: PublicCards,
    /// The owner's control socket, bound at build time (`None` when it could not be: logged),
    /// served by [`A2aServer::serve`].
    pub(crate) control: std::sync::Mutex<Option<std::os::unix::net::UnixListener>>,
    /// The sessions' state folder (the owner's control socket lives there).
    pub(crate) state_dir: std::path::PathBuf,
}

/// The host's handler of pushes to `POST /a2a/push/{watchId}`: `(watch id, the
/// X-A2A-Notification-Token header, the JSON body)` → whether the watch exists (false = 404).
pub type PushHandler = Arc<
    dyn Fn(String, Option<String>, Value) -> futures_util::future::BoxFuture<'static, bool>
        + Send
        + Sync,
>;

pub(crate) fn base_url(inner: &ServerInner, headers: &HeaderMap) -> String {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    crate::card::base_url(&inner.service.options, text("host"), text("x-forwarded-proto"))
}

/// The caller a request's key names.
///
/// # Errors
/// The key is missing, unknown or ambiguous (answered 401 on both bindings).
async fn authenticated(
    inner: &ServerInner,
    parts: &axum::http::request::Parts,
) -> Result<Caller, AuthFailure> {
    authenticate(
        &inner.service.directory,
        header_text(&parts.headers, "x-api-key"),
        header_text(&parts.headers, "authorization"),
    )
    .await
}

/// Admits an authenticated request of `caller` to the fair share: its connection stops counting
/// against its peer address and, the first time, starts counting against the caller (not when
/// the request asks to close it: the connection then ends with the request, which the request
/// cap counts); then the request itself is counted.
///
/// # Errors
/// The caller is at its connection or request cap, or over its requests per minute (answered
/// by [`refusal`]).
fn admit(
    inner: &ServerInner,
    parts: &axum::http::request::Parts,
    caller: &Caller,
) -> Result<Admission, A2aError> {
    if let Some(connection) = parts.extensions.get::<Arc<ConnectionShare>>() {
        if asks_to_close(&parts.headers) {
            connection.mark_authenticated();
        } else {
            connection.claim(&inner.shares, caller)?;
        }
    }
    inner.service.meter.admit(caller)?;
    inner.shares.admit(caller)
}

pub(crate) async fn jsonrpc_endpoint(
    State(inner): State<Arc<ServerInner>>,
    request: HttpRequest,
) -> Response {
    let (parts, body) = request.into_parts();
    let caller = match authenticated(&inner, &parts).await {
        Ok(caller) => caller,
        Err(failure) => return unauthorized(&failure.to_string()),
    };
    // Taken before the body is read, so a caller over its cap costs no body buffer; the id is
    // not known yet, so the refusal's is null (JSON-RPC 2.0 §5).
    let mut admission = match admit(&inner, &parts, &caller) {
        Ok(admission) => admission,
        Err(err) => return refusal(&err, jsonrpc::encode_error(&Value::Null, &err)),
    };
    let base = || base_url(&inner, &parts.headers);
    let limit = inner.service.options.max_body_bytes();
    let body = match read_body(body, limit, inner.service.options.body_read_timeout).await {
        Ok(body) => body,
        Err(err) => return body_error(&err, jsonrpc::encode_error(&Value::Null, &err)),
    };
    if let Err(err) = check_content_type(&parts.headers, &body) {
        return body_error(&err, jsonrpc::encode_error(&jsonrpc::request_id(&body), &err));
    }
    let requested =
        binding::requested_version(header_text(&parts.headers, "a2a-version"), parts.uri.query());
    let last_event_id = header_text(&parts.headers, "last-event-id");
    let decoded = requested
        .map_err(|err| (jsonrpc::request_id(&body), err))
        .and_then(|requested| jsonrpc::decode(&body, requested))
        .and_then(|mut decoded| match binding::resume_after(&mut decoded.request, last_event_id) {
            Ok(()) => Ok(decoded),
            Err(err) => Err((decoded.id, err)),
        });
    let decoded = match decoded {
        Ok(decoded) => decoded,
        // A streaming method's errors go out as one SSE event (PROTOCOL.md §5.3).
        Err((id, err)) if jsonrpc::is_streaming_method(&body) => {
            let event = Event::default().data(jsonrpc::encode_error(&id, &err).to_string());
            return sse(futures_util::stream::iter([Ok::<_, Infallible>(event)]));
        }
        Err((id, err)) => return json_response(StatusCode::OK, jsonrpc::encode_error(&id, &err)),
    };
    let streaming = decoded.request.is_streaming();
    let subscribe = matches!(decoded.request, Request::SubscribeToTask { .. });
    let (id, version) = (decoded.id, decoded.version);
    let generations = match activated_generations(&parts, version, &decoded.request, &body, true) {
        Ok(generations) => generations,
        Err(err) if streaming => {
            let event = Event::default().data(jsonrpc::encode_error(&id, &err).to_string());
            return sse(futures_util::stream::iter([Ok::<_, Infallible>(event)]));
        }
        Err(err) => return json_response(StatusCode::OK, jsonrpc::encode_error(&id, &err)),
    };
    // Before the run starts, so a refused stream starts nothing.
    if streaming && let Err(err) = inner.shares.admit_stream(&mut admission) {
        return refusal(&err, jsonrpc::encode_error(&id, &err));
    }
    let span = request_span(&caller, "jsonrpc", &decoded.request);
    span.in_scope(|| tracing::debug!(version = version.as_str(), "a2a request"));
    let outcome = inner.service.handle(&caller, decoded.request, generations, &base);
    let response = match outcome.instrument(span).await {
        Ok(Outcome::Reply { reply, generation }) => {
            let reply = signing::sign_reply(inner.public_cards.signer(), reply, version, base);
            let mut body = jsonrpc::encode_reply_bytes(&id, version, &reply);
            if let (Some(_), Some(generation)) = (generations, generation) {
                body = generations::reply_with_generation(body, generation, true);
            }
            json_bytes(StatusCode::OK, body)
        }
        Ok(Outcome::Stream(stream)) => {
            let events = Held::new(stream, admission);
            let events = with_generations(events, generations.is_some()).map(move |item| {
                let mut data = jsonrpc::encode_stream_item(&id, version, &item.response);
                if generations.is_some() {
                    generations::event_with_generation(&mut data, item.generation, true);
                }
                let data = data.to_string();
                Ok::<_, Infallible>(Event::default().id(item.id.to_string()).data(data))
            });
            sse(events)
        }
        // A subscription to a settled task is refused with a plain JSON-RPC error, not a
        // stream: clients and the conformance kit read any 200 event stream as a subscription
        // that started (issue 20; this case overrides PROTOCOL.md §5.3).
        Err(err @ A2aError::UnsupportedOperation(_)) if subscribe => {
            json_response(StatusCode::OK, jsonrpc::encode_error(&id, &err))
        }
        Err(err) if streaming => {
            // Early errors of a stream go out as one SSE error event (PROTOCOL.md §5.3).
            let event = Event::default().data(jsonrpc::encode_error(&id, &err).to_string());
            sse(futures_util::stream::iter([Ok::<_, Infallible>(event)]))
        }
        Err(err) => json_response(StatusCode::OK, jsonrpc::encode_error(&id, &err)),
    };
    echo_generations(response, generations.is_some())
}

/// The task-generation extension's fields when the call activates it (`binding::generations`),
/// `None` when it does not.
fn activated_generations(
    parts: &axum::http::request::Parts,
    version: Version,
    request: &Request,
    body: &[u8],
    jsonrpc: bool,
) -> Result<Option<Generations>, A2aError> {
    let values =
        parts.headers.get_all("a2a-extensions").into_iter().filter_map(|v| v.to_str().ok());
    if !generations::activates_generations(version, values) {
        return Ok(None);
    }
    generations::generation_params(request, body, parts.uri.query(), jsonrpc).map(Some)
}

/// A stream as a caller sees it: with generations, each event once (see
/// [`generations::GenerationFilter`]).
fn with_generations<S>(
    stream: S,
    generations: bool,
) -> impl futures_util::Stream<Item = StreamEvent>
where
    S: futures_util::Stream<Item = StreamEvent>,
{
    let mut filter = generations::GenerationFilter::default();
    stream.filter(move |item| {
        let keep = !generations
            || filter.keep(
                item.generation,
                matches!(item.response, a2a::StreamResponse::Task(_)),
                matches!(item.response, a2a::StreamResponse::StatusUpdate(_)),
            );
        std::future::ready(keep)
    })
}

/// Names the task-generation extension in the response's `A2A-Extensions` when the call
/// activated it, as the spec asks of activated extensions.
fn echo_generations(mut response: Response, activated: bool) -> Response {
    if activated {
        response.headers_mut().insert(
            "a2a-extensions",
            axum::http::HeaderValue::from_static(generations::GENERATIONS_EXTENSION),
        );
    }
    response
}

pub(crate) async fn rest_endpoint(
    State(inner): State<Arc<ServerInner>>,
    request: HttpRequest,
) -> Response {
    let (parts, body) = request.into_parts();
    let caller = match authenticated(&inner, &parts).await {
        Ok(caller) => caller,
        Err(failure) => return unauthorized(&failure.to_string()),
    };
    let base = || base_url(&inner, &parts.headers);
    let rest_error = |version, err: &A2aError| {
        let (status, body) = rest::encode_error(version, err);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        with_retry_after(err, json_response(status, body))
    };
    // Taken before the body is read, so a caller over its cap costs no body buffer.
    let mut admission = match admit(&inner, &parts, &caller) {
        Ok(admission) => admission,
        Err(err) => return refusal(&err, rest::encode_error(Version::V1_0, &err).1),
    };
    let requested =
        binding::requested_version(header_text(&parts.headers, "a2a-version"), parts.uri.query());
    let requested = match requested {
        Ok(requested) => requested,
        Err(err) => return rest_error(Version::V1_0, &err),
    };
    // Until the body is read, errors speak the version asked for (1.0 when none was).
    let asked = requested.unwrap_or(Version::V1_0);
    let body = match read_body(
        body,
        inner.service.options.max_body_bytes(),
        inner.service.options.body_read_timeout,
    )
    .await
    {
        Ok(body) => body,
        Err(err) => return body_error(&err, rest::encode_error(asked, &err).1),
    };
    if let Err(err) = check_content_type(&parts.headers, &body) {
        return rest_error(asked, &err);
    }
    let path = parts.uri.path().strip_prefix("/a2a/v1").unwrap_or("");
    let version = rest::version(requested, path, &body);
    let request = rest::decode(version, parts.method.as_str(), path, parts.uri.query(), &body)
        .and_then(|mut request| {
            let last_event_id = header_text(&parts.headers, "last-event-id");
            binding::resume_after(&mut request, last_event_id).map(|()| request)
        });
    let request = match request {
        Ok(request) => request,
        Err(err) => return rest_error(version, &err),
    };
    let generations = match activated_generations(&parts, version, &request, &body, false) {
        Ok(generations) => generations,
        Err(err) => return rest_error(version, &err),
    };
    // Before the run starts, so a refused stream starts nothing.
    if request.is_streaming()
        && let Err(err) = inner.shares.admit_stream(&mut admission)
    {
        return refusal(&err, rest::encode_error(version, &err).1);
    }
    let span = request_span(&caller, "rest", &request);
    span.in_scope(|| tracing::debug!(version = version.as_str(), "a2a request"));
    let outcome = inner.service.handle(&caller, request, generations, &base);
    let response = match outcome.instrument(span).await {
        Ok(Outcome::Reply { reply, generation }) => {
            let reply = signing::sign_reply(inner.public_cards.signer(), reply, version, base);
            let (status, mut body) = rest::encode_reply_bytes(version, &reply);
            if let (Some(_), Some(generation)) = (generations, generation) {
                body = generations::reply_with_generation(body, generation, false);
            }
            json_bytes(StatusCode::from_u16(status).unwrap_or(StatusCode::OK), body)
        }
        Ok(Outcome::Stream(stream)) => {
            let events = with_generations(Held::new(stream, admission), generations.is_some());
            sse(events.map(move |item| {
                let mut data = rest::encode_stream_item(version, &item.response);
                if generations.is_some() {
                    generations::event_with_generation(&mut data, item.generation, false);
                }
                let data = data.to_string();
                Ok::<_, Infallible>(Event::default().id(item.id.to_string()).data(data))
            }))
        }
        Err(err) => rest_error(version, &err),
    };
    echo_generations(response, generations.is_some())
}

/// The span of one request: who asks, through which binding, for which operation, about which
/// task and context. A new task's ids are recorded on it by the service once they exist.
pub(crate) fn request_span(
    caller: &Caller,
    binding: &'static str,
    request: &Request,
) -> tracing::Span {
    tracing::debug_span!(
        "a2a_request",
        caller = %caller.name,
        binding,
        method = request.method(),
        task_id = request.task_id(),
        context_id = request.context_id(),
    )
}
