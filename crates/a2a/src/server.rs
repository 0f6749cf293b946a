//! The HTTP edge: the axum router (public card, JSON-RPC at `/a2a`, REST under `/a2a/v1`),
//! authentication before anything else, body caps, SSE, and the server's lifetime.
//!
//! Requests are decoded by `binding::{jsonrpc, rest}` into the one internal model, handled by
//! [`Service::handle`], and encoded back for the caller's binding and version here. The HTTP
//! layer depends on the service, never the other way round.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request as HttpRequest, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use volcanic_core::SessionFactory;

use crate::auth::{AuthFailure, Caller, CallerDirectory, authenticate};
use crate::binding::{self, generations, jsonrpc, rest};
use crate::card;
use crate::config::A2aOptions;
use crate::containment::Containment;
use crate::error::A2aError;
use crate::extension::OwnerNotifier;
use crate::fair::{Admission, CallerCaps, CallerShares, ConnectionShare, Held};
use crate::http::{
    asks_to_close, body_error, check_content_type, connection_refusal, header_text, json_bytes,
    json_response, read_body, refusal, sse, unauthorized,
};
use crate::pool::SessionPool;
use crate::public_card::PublicCards;
use crate::push::guard::GuardError;
use crate::push::{self, PushSender};
use crate::request::{Generations, Request, Version};
use crate::service::{Outcome, Service};
use crate::signing::{self, CardSigner};
use crate::task::AcceptedMessages;
use crate::task::events::StreamEvent;
use crate::task::store::TaskStore;
use crate::tasks::Tasks;

/// Largest push the receiver reads (anyone can POST there; a push is a task, not a file).
const PUSH_BODY_LIMIT: usize = 1024 * 1024;

/// How long shutdown waits for runs to settle after aborting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What the endpoints share: the service, and what only the HTTP edge needs.
pub struct ServerInner {
    service: Arc<Service>,
    on_push: Option<PushHandler>,
    /// Each caller's requests, streams and connections in progress, against their caps.
    shares: CallerShares,
    /// The public card's bodies and their validators.
    public_cards: PublicCards,
    /// The owner's control socket, bound at build time (`None` when it could not be: logged),
    /// served by [`A2aServer::serve`].
    control: std::sync::Mutex<Option<std::os::unix::net::UnixListener>>,
    /// The sessions' state folder (the owner's control socket lives there).
    state_dir: PathBuf,
}

/// The host's handler of pushes to `POST /a2a/push/{watchId}`: `(watch id, the
/// X-A2A-Notification-Token header, the JSON body)` → whether the watch exists (false = 404).
pub type PushHandler = Arc<
    dyn Fn(String, Option<String>, Value) -> futures_util::future::BoxFuture<'static, bool>
        + Send
        + Sync,
>;

/// The A2A server of one host.
#[derive(Clone)]
pub struct A2aServer {
    inner: Arc<ServerInner>,
}

/// Why an [`A2aServer`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The outbound HTTP client cannot be built (no TLS backend).
    #[error(transparent)]
    Client(GuardError),
    /// The file of extra certificate authorities cannot be read.
    #[error("A2A__ExtraCaCertificates {}: {source}", path.display())]
    ExtraCaRead { path: PathBuf, source: std::io::Error },
    /// The extra certificate authorities cannot be used.
    #[error("A2A__ExtraCaCertificates {}: {source}", path.display())]
    ExtraCa { path: PathBuf, source: GuardError },
    /// The push outbox in the state folder cannot be created or read.
    #[error("push outbox {}: {source}", path.display())]
    Outbox { path: PathBuf, source: std::io::Error },
    /// The card-signing key cannot be read, created or used.
    #[error("A2A__CardSigning__KeyFile {0}")]
    CardKey(signing::KeyError),
    /// The owner approvals in the state folder cannot be created or read.
    #[error("owner approvals {}: {source}", path.display())]
    Approvals { path: PathBuf, source: std::io::Error },
}

/// For hosts that carry build failures as I/O errors; the kind of a failed read is kept.
impl From<BuildError> for std::io::Error {
    fn from(err: BuildError) -> Self {
        let kind = match &err {
            BuildError::ExtraCaRead { source, .. }
            | BuildError::Outbox { source, .. }
            | BuildError::Approvals { source, .. } => source.kind(),
            BuildError::CardKey(signing::KeyError::Io { source, .. }) => source.kind(),
            BuildError::Client(_)
            | BuildError::ExtraCa { .. }
            | BuildError::CardKey(
                signing::KeyError::Invalid { .. } | signing::KeyError::Random { .. },
            ) => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, err.to_string())
    }
}

/// Builds an [`A2aServer`].
pub struct A2aServerBuilder {
    factory: Arc<SessionFactory>,
    directory: Arc<dyn CallerDirectory>,
    options: A2aOptions,
    notifier: Option<Arc<dyn OwnerNotifier>>,
    approval_notifier: Option<Arc<dyn crate::approval::ApprovalNotifier>>,
    on_push: Option<PushHandler>,
    containment: Containment,
}

impl A2aServerBuilder {
    /// How callers' tools are contained. Default: [`Containment::Unavailable`], so a host that
    /// sets nothing gives callers no workspace tools rather than unconfined ones.
    pub fn containment(mut self, containment: Containment) -> Self {
        self.containment = containment;
        self
    }

    /// Where pushes to `/a2a/push/{watchId}` go (our own A2A client's watches); without a handler
    /// every push is answered 404.
    pub fn on_push(mut self, handler: PushHandler) -> Self {
        self.on_push = Some(handler);
        self
    }

    pub fn options(mut self, options: A2aOptions) -> Self {
        self.options = options;
        self
    }

    /// How the owner is told of requests waiting for approval (besides the log and `volcanic
    /// approvals`); see [`crate::approval::ApprovalNotifier`].
    pub fn approval_notifier(
        mut self,
        notifier: Arc<dyn crate::approval::ApprovalNotifier>,
    ) -> Self {
        self.approval_notifier = Some(notifier);
        self
    }

    /// The owner notifier; without one, sessions have no `notify_owner` tool.
    pub fn notifier(mut self, notifier: Arc<dyn OwnerNotifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// # Errors
    /// [`BuildError::Client`] when the outbound HTTP client cannot be built (no TLS backend);
    /// [`BuildError::ExtraCaRead`] or [`BuildError::ExtraCa`] when the extra certificate
    /// authorities cannot be read or used; [`BuildError::Outbox`] when the push outbox
    /// (`<state dir>/a2a/push-outbox`) cannot be created or listed; [`BuildError::CardKey`] when
    /// card signing is on and its key cannot be read, created or used.
    pub fn build(self) -> Result<A2aServer, BuildError> {
        // The key lives in the sessions' state folder (hidden from every session) unless
        // `A2A__CardSigning__KeyFile` names one.
        let key_file = match &self.options.card_signing_key_file {
            _ if !self.options.card_signing => None,
            Some(file) => Some((file.clone(), false)),
            None => Some((self.factory.state_dir().join(signing::STATE_KEY_FILE), true)),
        };
        let signer = match key_file {
            Some((file, false)) => Some(CardSigner::load(&file).map_err(BuildError::CardKey)?),
            Some((file, true)) => {
                Some(CardSigner::load_or_create(&file).map_err(BuildError::CardKey)?)
            }
            None => None,
        };
        if let Some(signer) = &signer {
            tracing::info!(kid = signer.kid(), "agent cards are signed");
        }
        let allow_private = self.options.allow_private_push_urls;
        let cache_bytes = self.options.task_cache_bytes;
        let file_cap = self.options.max_task_file_bytes();
        let guard = match &self.options.extra_ca_certificates {
            None => {
                crate::push::guard::GuardedClient::new(allow_private).map_err(BuildError::Client)?
            }
            Some(path) => {
                let pem = std::fs::read(path)
                    .map_err(|source| BuildError::ExtraCaRead { path: path.clone(), source })?;
                crate::push::guard::GuardedClient::with_extra_roots(allow_private, &pem)
                    .map_err(|source| BuildError::ExtraCa { path: path.clone(), source })?
            }
        };
        // Pushes go through the same guarded client as downloads: one outbound path.
        let push_url_check = push::url_check(allow_private);
        // Pending deliveries live in the state folder, out of every session's reach: they hold
        // webhook tokens and credentials.
        let policy = push::sender::Policy::new(&self.options);
        let approvals_dir = self.factory.state_dir().to_path_buf();
        let approvals =
            Arc::new(crate::approval::Approvals::open(&approvals_dir).map_err(|source| {
                BuildError::Approvals { path: approvals_dir.join("a2a/approvals"), source }
            })?);
        let outbox_dir = self.factory.state_dir().join("a2a").join("push-outbox");
        let outbox = push::outbox::Outbox::open(outbox_dir.clone(), policy.max_bytes)
            .map_err(|source| BuildError::Outbox { path: outbox_dir, source })?;
        let push = Arc::new(PushSender::new(
            guard.client().clone(),
            push_url_check.clone(),
            policy,
            Some(outbox),
        ));
        self.containment.log();
        let tracker = TaskTracker::new();
        let pool = Arc::new(
            SessionPool::new(
                self.factory,
                self.options.session_idle_timeout,
                self.options.max_file_bytes,
                crate::pool::PoolLimits {
                    max_open: self.options.max_open_sessions,
                    max_per_caller: self.options.max_sessions_per_caller,
                },
            )
            .with_containment(self.containment)
            .with_tracker(tracker.clone()),
        );
        let store = Arc::new(
            TaskStore::with_recovery_hook({
                // A task failed as "server restarted" changed state: its webhooks hear it.
                let push = push.clone();
                Arc::new(move |file: &crate::task::TaskFile| {
                    push.notify(&file.task, &file.push_configs);
                })
            })
            .with_cache_bytes(cache_bytes)
            .with_file_cap(file_cap),
        );
        let shares = CallerShares::new(CallerCaps {
            requests: self.options.max_requests_per_caller,
            streams: self.options.max_streams_per_caller,
            connections: self.options.max_connections_per_caller,
        });
        let accepted = Arc::new(AcceptedMessages::new(
            self.options.retry_window,
            self.options.retry_records_per_caller,
            file_cap,
        ));
        Ok(A2aServer {
            inner: Arc::new(ServerInner {
                service: Arc::new(Service {
                    options: self.options,
                    directory: self.directory,
                    tasks: Tasks::new(store, pool.clone()),
                    pool,
                    accepted,
                    approvals,
                    notifier: self.notifier,
                    approval_notifier: self.approval_notifier,
                    guard,
                    tracker,
                    push_url_check,
                    push,
                }),
                shares,
                on_push: self.on_push,
                public_cards: PublicCards::signed_by(signer.map(Arc::new)),
                control: std::sync::Mutex::new(bind_control(&approvals_dir)),
                state_dir: approvals_dir.clone(),
            }),
        })
    }
}

impl A2aServer {
    /// A builder over the session factory (its shutdown token aborts runs) and the callers.
    pub fn builder(
        factory: Arc<SessionFactory>,
        directory: Arc<dyn CallerDirectory>,
    ) -> A2aServerBuilder {
        A2aServerBuilder {
            factory,
            directory,
            options: A2aOptions::default(),
            notifier: None,
            approval_notifier: None,
            on_push: None,
            containment: Containment::default(),
        }
    }

    /// The store the server keeps its task files with, for a host's owner views
    /// ([`TaskStore::recent`], Telegram's `/a2a`): a host that shares it keeps one index per
    /// workspace, under the server's task file cap, instead of a second store's. Only the
    /// server's operations write task files; a host reads.
    pub fn task_store(&self) -> Arc<TaskStore> {
        self.inner.service.tasks.store().clone()
    }

    /// The requests waiting for the owner's approval, oldest first.
    pub fn pending_approvals(&self) -> Vec<crate::approval::PendingApproval> {
        self.inner.service.approvals.list()
    }

    /// The owner's decision on approval request `id`: approving starts the task's run,
    /// denying rejects it with the reason. Only the owner's channels call this (the control
    /// socket, a Telegram button press of an allowed user), never anything a session can reach.
    ///
    /// # Errors
    /// [`crate::DecideError`]: no such request waits, its caller is gone,
    /// its context is busy for a moment, or the task could not be changed.
    pub async fn decide_approval(
        &self,
        id: &str,
        decision: crate::approval::Decision,
    ) -> Result<crate::service::approve::Decided, crate::DecideError> {
        crate::service::approve::decide(&self.inner.service, id, decision, false).await
    }

    /// The routes, to mount in a host's router or serve alone.
    pub fn router(&self) -> Router {
        let limit = self.inner.service.options.max_body_bytes();
        let routes = Router::new()
            .route("/.well-known/agent-card.json", get(public_card))
            .route(signing::JWKS_PATH, get(jwks))
            .route("/a2a", post(jsonrpc_endpoint))
            .route("/a2a/", post(jsonrpc_endpoint))
            .route("/a2a/v1/{*path}", any(rest_endpoint))
            .route("/a2a/push/{watch_id}", post(push_receiver));
        edge_layers(routes, limit).with_state(self.inner.clone())
    }

    /// Serves on `listener` until `shutdown` fires, then stops accepting, lets aborted runs
    /// settle (the factory shares the token), closes sessions and returns.
    ///
    /// # Errors
    /// The listener failed.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: CancellationToken,
    ) -> std::io::Result<()> {
        let service = &self.inner.service;
        // What the outbox held at start-up goes before any notification of this run.
        service.push.start();
        // Task requests that waited across a restart get their time limit again (past it: at
        // once); a tool call's request lost its run with the restart, so its task fails.
        for request in service.approvals.list() {
            if request.tool.is_some() {
                let service = service.clone();
                service.tracker.clone().spawn(async move {
                    crate::service::approve::fail_interrupted_tool_call(&service, &request).await;
                });
            } else {
                crate::service::approve::schedule_timeout(service, &request);
            }
        }
        // The owner's decisions come in through the control socket (hidden from sessions).
        let control =
            self.inner.control.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(listener) = control {
            let (server, stop) = (self.clone(), shutdown.clone());
            let path = crate::control::socket_path(&self.inner.state_dir);
            service.tracker.spawn(async move {
                if let Err(err) = crate::control::serve(server, listener, path.clone(), stop).await {
                    tracing::error!(path = %path.display(), error = %err, "the owner control socket cannot be served: volcanic approve and deny will not reach this server");
                }
            });
        }
        let eviction = service.tracker.spawn(service.pool.clone().run_eviction(shutdown.clone()));
        let options = &service.options;
        let limits = crate::connection::Limits {
            header_read_timeout: options.header_read_timeout,
            idle_timeout: options.idle_connection_timeout,
            write_stall_timeout: options.write_stall_timeout,
            max_connections: options.max_connections,
            max_header_bytes: options.max_header_bytes,
            max_unauthenticated_per_peer: options.max_unauthenticated_connections_per_peer,
        };
        let refusal = connection_refusal(&A2aError::TooManyConnections {
            limit: options.max_unauthenticated_connections_per_peer,
        });
        // Graceful, but bounded: a client that never finishes its request (or keeps a stream of a
        // stuck task open) must not hold the server up; its connection is dropped after the grace.
        crate::connection::serve(
            listener,
            self.router(),
            limits,
            refusal,
            shutdown.clone(),
            SHUTDOWN_GRACE,
        )
        .await;
        service.tracker.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, service.tracker.wait()).await.is_err() {
            tracing::warn!(runs = service.tasks.running(), "runs still settling at shutdown");
        }
        // The drivers above end at a run's `Settled`, a moment before the run's own task does.
        if tokio::time::timeout(SHUTDOWN_GRACE, service.pool.close_runs()).await.is_err() {
            tracing::warn!("session runs still ending at shutdown");
        }
        // After the runs: their last state changes are queued by now.
        service.push.close().await;
        eviction.abort();
        service.pool.close_all().await;
        Ok(())
    }
}

/// Binds the owner's control socket in `state_dir`; a failure is logged (the server runs on,
/// without `volcanic approve` and `deny`).
fn bind_control(state_dir: &std::path::Path) -> Option<std::os::unix::net::UnixListener> {
    let path = crate::control::socket_path(state_dir);
    match crate::control::bind(&path) {
        Ok(listener) => Some(listener),
        Err(err) => {
            tracing::error!(path = %path.display(), error = %err, "the owner control socket cannot be bound: volcanic approve and deny will not reach this server");
            None
        }
    }
}

/// The layers every route gets: the body cap, and a panic answered 500 with a fixed body
/// ("Service panicked"; the message, which may name a source file, goes to the log only).
fn edge_layers<S: Clone + Send + Sync + 'static>(
    routes: Router<S>,
    body_limit: usize,
) -> Router<S> {
    routes
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .layer(tower_http::catch_panic::CatchPanicLayer::new())
}

async fn public_card(State(inner): State<Arc<ServerInner>>, headers: HeaderMap) -> Response {
    let base = base_url(&inner, &headers);
    inner.public_cards.answer(&inner.service.options, base, &headers)
}

async fn jwks(State(inner): State<Arc<ServerInner>>) -> Response {
    inner.public_cards.jwks_answer()
}

fn base_url(inner: &ServerInner, headers: &HeaderMap) -> String {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    card::base_url(&inner.service.options, text("host"), text("x-forwarded-proto"))
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
/// The caller is at its connection or request cap (answered by [`refusal`]).
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
    inner.shares.admit(caller)
}

async fn jsonrpc_endpoint(State(inner): State<Arc<ServerInner>>, request: HttpRequest) -> Response {
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

async fn rest_endpoint(State(inner): State<Arc<ServerInner>>, request: HttpRequest) -> Response {
    let (parts, body) = request.into_parts();
    let caller = match authenticated(&inner, &parts).await {
        Ok(caller) => caller,
        Err(failure) => return unauthorized(&failure.to_string()),
    };
    let base = || base_url(&inner, &parts.headers);
    let rest_error = |version, err: &A2aError| {
        let (status, body) = rest::encode_error(version, err);
        json_response(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST), body)
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
fn request_span(caller: &Caller, binding: &'static str, request: &Request) -> tracing::Span {
    tracing::debug_span!(
        "a2a_request",
        caller = %caller.name,
        binding,
        method = request.method(),
        task_id = request.task_id(),
        context_id = request.context_id(),
    )
}

/// `POST /a2a/push/{watchId}`: no key (the token is the credential, passed through to the host).
async fn push_receiver(
    State(inner): State<Arc<ServerInner>>,
    axum::extract::Path(watch_id): axum::extract::Path<String>,
    request: HttpRequest,
) -> Response {
    let not_found = || StatusCode::NOT_FOUND.into_response();
    let Some(handler) = inner.on_push.clone() else { return not_found() };
    let (parts, body) = request.into_parts();
    let token = header_text(&parts.headers, "x-a2a-notification-token").map(str::to_string);
    let body = match read_body(body, PUSH_BODY_LIMIT, inner.service.options.body_read_timeout).await
    {
        Ok(body) => body,
        Err(err) => return body_error(&err, json!({"error": err.to_string()})),
    };
    let Ok(json) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "the body must be JSON").into_response();
    };
    if handler(watch_id, token, json).await { StatusCode::OK.into_response() } else { not_found() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{A2aWorkspace, CallerEntry, CallerMode, CallerTier};
    use axum::body::{Body, Bytes};

    /// One caller, whose key is `span-test-key`.
    struct OneCaller(Caller);

    impl CallerDirectory for OneCaller {
        fn find(&self, key: &str) -> Vec<Caller> {
            if key == "span-test-key" { vec![self.0.clone()] } else { Vec::new() }
        }

        fn entries(&self, _workspace: &A2aWorkspace) -> Arc<[CallerEntry]> {
            Arc::from(Vec::new())
        }
    }

    #[test]
    fn a_request_runs_in_a_span_with_caller_binding_method_and_task_id() {
        let workspace = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let caller = Caller {
            name: "span-bot".into(),
            mode: CallerMode::Isolated,
            tier: CallerTier::Chat,
            approval: Default::default(),
            workspace: Arc::new(A2aWorkspace {
                path: workspace.path().to_path_buf(),
                scope_prefix: "t".into(),
                owner_id: "o".into(),
            }),
        };
        let logs = crate::test_logs::capture_logs(|| {
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let provider = Arc::new(volcanic_core::provider::faux::FauxProvider::new());
                let factory = Arc::new(SessionFactory::builder(provider, state.path()).build());
                let server =
                    A2aServer::builder(factory, Arc::new(OneCaller(caller))).build().unwrap();
                let body =
                    r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"task-7"}}"#;
                let request = axum::http::Request::post("/a2a")
                    .header("x-api-key", "span-test-key")
                    .header("content-type", "application/json")
                    .body(Body::from(body))
                    .unwrap();
                let response = tower::ServiceExt::oneshot(server.router(), request).await.unwrap();
                assert_eq!(response.status(), StatusCode::OK);
            });
        });
        let span =
            r#"a2a_request{caller=span-bot binding="jsonrpc" method="GetTask" task_id="task-7"}"#;
        assert!(logs.contains(span), "{logs}");
    }

    #[tokio::test]
    async fn panic_in_a_handler_is_500_without_its_message_and_the_server_goes_on() {
        let routes = Router::new()
            .route(
                "/boom",
                get(|| async {
                    if std::hint::black_box(true) {
                        panic!("index out of bounds at /home/owner/ws/src/handler.rs:42");
                    }
                    "unreachable"
                }),
            )
            .route("/ok", get(|| async { "fine" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        let limits = crate::connection::Limits {
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
            write_stall_timeout: Duration::from_secs(5),
            max_connections: 4,
            max_header_bytes: 8192,
            max_unauthenticated_per_peer: 4,
        };
        let serving = tokio::spawn(crate::connection::serve(
            listener,
            edge_layers(routes, 1024),
            limits,
            Bytes::from_static(b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\n\r\n"),
            shutdown.clone(),
            Duration::from_secs(1),
        ));
        let client = reqwest::Client::new();
        let deadline = Duration::from_secs(20);
        let get = |path: &'static str| {
            let request = client.get(format!("{base}{path}"));
            async move {
                let response =
                    tokio::time::timeout(deadline, request.send()).await.unwrap().unwrap();
                (response.status().as_u16(), response.text().await.unwrap())
            }
        };
        let (status, body) = get("/boom").await;
        assert_eq!((status, body.as_str()), (500, "Service panicked"));
        assert_eq!(get("/ok").await, (200, "fine".to_string()));
        shutdown.cancel();
        tokio::time::timeout(deadline, serving).await.unwrap().unwrap();
    }
}
