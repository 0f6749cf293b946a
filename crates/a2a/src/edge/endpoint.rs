//! The A2A endpoints (JSON-RPC at `/a2a`, HTTP+JSON under `/a2a/v1`) as one pipeline over a
//! binding's [`Wire`]: the caller authenticated and admitted to the fair share (the [`Admitted`]
//! extractor), the call decoded, the task-generation extension's fields, the call to the
//! service, and its answer or stream encoded; every error answer goes through one translation
//! ([`Rejection`]). What the server is made of and how it is served is `server.rs`.

use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request as HttpRequest, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;
use tracing::Instrument;

use crate::auth::{Caller, authenticate};
use crate::binding::{self, generations};
use crate::card::public::PublicCards;
use crate::card::signing;
use crate::edge::fair::{Admission, CallerShares, ConnectionShare, Held};
use crate::edge::http::{
    asks_to_close, body_error, header_text, json_bytes, refusal, sse, unauthorized,
};
use crate::edge::wire::{Call, EdgeError, Wire};
use crate::error::A2aError;
use crate::request::{Binding, Generations, Request, Version};
use crate::service::{Outcome, Service};
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
    /// Asks retention's background loop for a round now ([`A2aServer::retention_round`]).
    pub(crate) retention_rounds: crate::retention::RoundRequests,
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

/// The authenticated caller of a request, admitted to the fair share: a handler that takes it
/// cannot run for an unknown key or over a caller's caps. Its rejection answers in the shape of
/// the binding `W` (401 alike on every binding).
pub(crate) struct Admitted<W> {
    pub(crate) caller: Caller,
    /// The request's place in the caller's share, held until the answer (or its stream) ends.
    pub(crate) admission: Admission,
    wire: PhantomData<fn() -> W>,
}

impl<W: Wire> FromRequestParts<Arc<ServerInner>> for Admitted<W> {
    type Rejection = Rejection<W>;

    /// Resolves the key to exactly one caller, then admits the request: its connection stops
    /// counting against its peer address and, the first time, starts counting against the
    /// caller (not when the request asks to close it: the connection then ends with the
    /// request, which the request cap counts); then the request itself is counted. Taken
    /// before the body is read, so a caller over its cap costs no body buffer.
    async fn from_request_parts(
        parts: &mut Parts,
        inner: &Arc<ServerInner>,
    ) -> Result<Self, Self::Rejection> {
        let caller = authenticate(
            &inner.service.directory,
            header_text(&parts.headers, "x-api-key"),
            header_text(&parts.headers, "authorization"),
        )
        .await
        .map_err(EdgeError::Unauthenticated)?;
        let refused = |error| EdgeError::Refused { to: W::unread(), error };
        if let Some(connection) = parts.extensions.get::<Arc<ConnectionShare>>() {
            if asks_to_close(&parts.headers) {
                connection.mark_authenticated();
            } else {
                connection.claim(&inner.shares, &caller).map_err(refused)?;
            }
        }
        inner.service.meter.admit(&caller).map_err(refused)?;
        let admission = inner.shares.admit(&caller).map_err(refused)?;
        Ok(Admitted { caller, admission, wire: PhantomData })
    }
}

/// An error answer of the edge on binding `W`.
pub(crate) struct Rejection<W: Wire> {
    error: EdgeError<W::To>,
    wire: PhantomData<fn() -> W>,
}

impl<W: Wire> From<EdgeError<W::To>> for Rejection<W> {
    fn from(error: EdgeError<W::To>) -> Self {
        Rejection { error, wire: PhantomData }
    }
}

impl<W: Wire> IntoResponse for Rejection<W> {
    /// The one translation of an edge error into an HTTP answer: when it happened decides the
    /// framing, the binding the body.
    fn into_response(self) -> Response {
        match self.error {
            EdgeError::Unauthenticated(failure) => unauthorized(&failure),
            EdgeError::Refused { to, error } => refusal(&error, W::error_body(&to, &error)),
            EdgeError::Unread { to, error } => body_error(&error, W::error_body(&to, &error)),
            EdgeError::Failed { to, error, streaming } => W::failed(&to, &error, streaming),
        }
    }
}

/// The A2A endpoint of binding `W` (JSON-RPC at `/a2a`, HTTP+JSON under `/a2a/v1`): the call
/// decoded, the task-generation extension's fields, the stream's share, the service, and its
/// answer or stream encoded. Every binding runs these steps; `W` decodes and encodes.
///
/// # Errors
/// Every refusal and failure, as the binding answers it ([`Rejection`]).
pub(crate) async fn endpoint<W: Wire>(
    State(inner): State<Arc<ServerInner>>,
    Admitted { caller, mut admission, .. }: Admitted<W>,
    request: HttpRequest,
) -> Result<Response, Rejection<W>> {
    let (parts, body) = request.into_parts();
    let Call { to, version, mut request, body } =
        W::decode(&parts, body, &inner.service.options).await?;
    let streaming = request.is_streaming();
    let failed = |to, error| EdgeError::Failed { to, error, streaming };
    let last_event_id = header_text(&parts.headers, "last-event-id");
    if let Err(error) = binding::resume_after(&mut request, last_event_id) {
        return Err(failed(to, error).into());
    }
    let generations = match activated_generations(&parts, version, &request, &body, W::BINDING) {
        Ok(generations) => generations,
        Err(error) => return Err(failed(to, error).into()),
    };
    // Before the run starts, so a refused stream starts nothing.
    if streaming && let Err(error) = inner.shares.admit_stream(&mut admission) {
        return Err(EdgeError::Refused { to, error }.into());
    }
    let subscribe = matches!(request, Request::SubscribeToTask { .. });
    let span = request_span(&caller, W::BINDING, &request);
    span.in_scope(|| tracing::debug!(version = version.as_str(), "a2a request"));
    let base = || base_url(&inner, &parts.headers);
    let outcome = inner.service.handle(&caller, request, generations, &base);
    let response = match outcome.instrument(span).await {
        Ok(Outcome::Reply { reply, generation }) => {
            let reply = signing::sign_reply(inner.public_cards.signer(), reply, version, base);
            let (status, mut body) = W::reply(&to, version, &reply);
            if let (Some(_), Some(generation)) = (generations, generation) {
                body = generations::reply_with_generation(body, generation, W::BINDING);
            }
            json_bytes(status, body)
        }
        Ok(Outcome::Stream(stream)) => {
            let events = with_generations(Held::new(stream, admission), generations.is_some());
            sse(events.map(move |item| {
                let mut data = W::event(&to, version, &item.response);
                if generations.is_some() {
                    generations::event_with_generation(&mut data, item.generation, W::BINDING);
                }
                let data = data.to_string();
                Ok::<_, Infallible>(Event::default().id(item.id.to_string()).data(data))
            }))
        }
        // A subscription to a settled task is refused with a plain answer, not a stream:
        // clients and the conformance kit read any 200 event stream as a subscription that
        // started.
        Err(error @ A2aError::UnsupportedOperation(_)) if subscribe => {
            Rejection::<W>::from(EdgeError::Failed { to, error, streaming: false }).into_response()
        }
        Err(error) => Rejection::<W>::from(failed(to, error)).into_response(),
    };
    Ok(echo_generations(response, generations.is_some()))
}

/// The task-generation extension's fields when the call activates it (`binding::generations`),
/// `None` when it does not.
fn activated_generations(
    parts: &axum::http::request::Parts,
    version: Version,
    request: &Request,
    body: &[u8],
    binding: Binding,
) -> Result<Option<Generations>, A2aError> {
    let values =
        parts.headers.get_all("a2a-extensions").into_iter().filter_map(|v| v.to_str().ok());
    if !generations::activates_generations(version, values) {
        return Ok(None);
    }
    generations::generation_params(request, body, parts.uri.query(), binding).map(Some)
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
        let keep = !generations || filter.keep(item.generation, &item.response);
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

/// The span of one request: who asks, through which binding, for which operation, about which
/// task and context. A new task's ids are recorded on it by the service once they exist.
pub(crate) fn request_span(caller: &Caller, binding: Binding, request: &Request) -> tracing::Span {
    tracing::debug_span!(
        "a2a_request",
        caller = %caller.name,
        binding = binding.as_str(),
        method = request.method(),
        task_id = request.task_id(),
        context_id = request.context_id(),
    )
}
