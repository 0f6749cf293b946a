//! What makes one binding differ from another at the HTTP edge, and nothing else: how a call is
//! read (a decoder) and how its answers are written (an encoder). `endpoint` runs the same
//! pipeline for every binding over a [`Wire`]; the pure work (envelopes, routes, 0.3 shapes) is
//! `binding`'s. A new binding (gRPC is next) implements [`Wire`] and adds its route.

use std::convert::Infallible;
use std::future::Future;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;
use axum::response::sse::Event;
use serde_json::Value;

use crate::auth::AuthFailure;
use crate::binding::{self, jsonrpc, rest};
use crate::config::A2aOptions;
use crate::edge::http::{
    check_content_type, header_text, json_response, read_body, sse, with_retry_after,
};
use crate::error::A2aError;
use crate::request::{Binding, Reply, Request, Version};

/// A call as a binding decoded it.
pub(crate) struct Call<To> {
    /// What the call's answers are addressed by ([`Wire::To`]).
    pub(crate) to: To,
    /// The protocol version the call speaks, and its answers.
    pub(crate) version: Version,
    pub(crate) request: Request,
    /// The request body, which extensions read fields of (`binding::generations`).
    pub(crate) body: Bytes,
}

/// Why the edge answers with an error, and at which point of the call: the point decides how the
/// answer is framed, the binding ([`Wire::error_body`], [`Wire::failed`]) what it says.
pub(crate) enum EdgeError<To> {
    /// No single caller holds the key: 401, the same on every binding.
    Unauthenticated(AuthFailure),
    /// The fair share refused the call: 429 with `Retry-After`.
    Refused { to: To, error: A2aError },
    /// The body could not be taken (too large, too slow, not JSON on JSON-RPC): the error's
    /// status, and the connection closed, as the rest of the body may still be on its way.
    Unread { to: To, error: A2aError },
    /// The call was read and refused or failed; `streaming` when it is known to ask for a stream.
    Failed { to: To, error: A2aError, streaming: bool },
}

/// One binding at the edge: its decoder and its encoder.
pub(crate) trait Wire: Send + Sync + 'static {
    /// The binding, for logs.
    const BINDING: Binding;

    /// What the answers to one call are addressed by: the request `id` on JSON-RPC, the version
    /// on REST (its error bodies differ by version).
    type To: Clone + Send + Sync + 'static;

    /// The address of an answer given before anything of the call is read (an admission
    /// refusal).
    fn unread() -> Self::To;

    /// Reads the call: the body within `options`' size and time caps, the version asked for, and
    /// the request, in the order the binding needs them.
    ///
    /// # Errors
    /// The answer to give instead, addressed as far as the call could be read.
    fn decode(
        head: &Parts,
        body: Body,
        options: &A2aOptions,
    ) -> impl Future<Output = Result<Call<Self::To>, EdgeError<Self::To>>> + Send;

    /// An error in the binding's body shape.
    fn error_body(to: &Self::To, error: &A2aError) -> Value;

    /// The answer to a call that was read and then refused or failed (see
    /// [`EdgeError::Failed`]).
    fn failed(to: &Self::To, error: &A2aError, streaming: bool) -> Response;

    /// A reply's status and body.
    fn reply(to: &Self::To, version: Version, reply: &Reply) -> (StatusCode, Vec<u8>);

    /// The data of one stream event.
    fn event(to: &Self::To, version: Version, event: &a2a::StreamResponse) -> Value;
}

/// JSON-RPC 2.0 at `/a2a` (A2A 1.0.1 §9, "JSON-RPC Protocol Binding"): every answer
/// carries the request's `id`, errors go out with HTTP 200, and a streaming method's errors as
/// one SSE event.
pub(crate) struct JsonRpc;

impl Wire for JsonRpc {
    const BINDING: Binding = Binding::JsonRpc;
    type To = Value;

    fn unread() -> Value {
        // The id is not known yet (JSON-RPC 2.0 §5: null when it cannot be read).
        Value::Null
    }

    async fn decode(
        head: &Parts,
        body: Body,
        options: &A2aOptions,
    ) -> Result<Call<Value>, EdgeError<Value>> {
        let body = read_body(body, options.max_body_bytes(), options.body_read_timeout)
            .await
            .map_err(|error| EdgeError::Unread { to: Value::Null, error })?;
        if let Err(error) = check_content_type(&head.headers, &body) {
            return Err(EdgeError::Unread { to: jsonrpc::request_id(&body), error });
        }
        // The version is checked once the body is read, so that its error echoes the id.
        let requested =
            binding::requested_version(header_text(&head.headers, "a2a-version"), head.uri.query());
        let decoded = requested
            .map_err(|error| (jsonrpc::request_id(&body), error))
            .and_then(|requested| jsonrpc::decode(&body, requested));
        match decoded {
            Ok(decoded) => Ok(Call {
                to: decoded.id,
                version: decoded.version,
                request: decoded.request,
                body,
            }),
            Err((to, error)) => {
                Err(EdgeError::Failed { to, error, streaming: jsonrpc::is_streaming_method(&body) })
            }
        }
    }

    fn error_body(to: &Value, error: &A2aError) -> Value {
        jsonrpc::encode_error(to, error)
    }

    fn failed(to: &Value, error: &A2aError, streaming: bool) -> Response {
        let body = jsonrpc::encode_error(to, error);
        if streaming {
            // A streaming method's errors go out as one SSE event (A2A 1.0.1 §9.4.2).
            let event = Event::default().data(body.to_string());
            return sse(futures_util::stream::iter([Ok::<_, Infallible>(event)]));
        }
        json_response(StatusCode::OK, body)
    }

    fn reply(to: &Value, version: Version, reply: &Reply) -> (StatusCode, Vec<u8>) {
        (StatusCode::OK, jsonrpc::encode_reply_bytes(to, version, reply))
    }

    fn event(to: &Value, version: Version, event: &a2a::StreamResponse) -> Value {
        jsonrpc::encode_stream_item(to, version, event)
    }
}

/// HTTP+JSON under `/a2a/v1` (A2A 1.0.1 §11, "HTTP+JSON/REST Protocol Binding"): errors
/// are `google.rpc.Status` bodies with their HTTP status, in the shape of the call's version.
pub(crate) struct Rest;

impl Wire for Rest {
    const BINDING: Binding = Binding::Rest;
    type To = Version;

    fn unread() -> Version {
        Version::V1_0
    }

    async fn decode(
        head: &Parts,
        body: Body,
        options: &A2aOptions,
    ) -> Result<Call<Version>, EdgeError<Version>> {
        let failed = |to, error| EdgeError::Failed { to, error, streaming: false };
        let requested =
            binding::requested_version(header_text(&head.headers, "a2a-version"), head.uri.query())
                .map_err(|error| failed(Version::V1_0, error))?;
        // Until the body is read, errors speak the version asked for (1.0 when none was).
        let asked = requested.unwrap_or(Version::V1_0);
        let body = read_body(body, options.max_body_bytes(), options.body_read_timeout)
            .await
            .map_err(|error| EdgeError::Unread { to: asked, error })?;
        check_content_type(&head.headers, &body).map_err(|error| failed(asked, error))?;
        let path = head.uri.path().strip_prefix("/a2a/v1").unwrap_or("");
        let version = rest::version(requested, path, &body);
        let request = rest::decode(version, head.method.as_str(), path, head.uri.query(), &body)
            .map_err(|error| failed(version, error))?;
        Ok(Call { to: version, version, request, body })
    }

    fn error_body(to: &Version, error: &A2aError) -> Value {
        rest::encode_error(*to, error).1
    }

    fn failed(to: &Version, error: &A2aError, _streaming: bool) -> Response {
        let (status, body) = rest::encode_error(*to, error);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        with_retry_after(error, json_response(status, body))
    }

    fn reply(_to: &Version, version: Version, reply: &Reply) -> (StatusCode, Vec<u8>) {
        let (status, body) = rest::encode_reply_bytes(version, reply);
        (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), body)
    }

    fn event(_to: &Version, version: Version, event: &a2a::StreamResponse) -> Value {
        rest::encode_stream_item(version, event)
    }
}
