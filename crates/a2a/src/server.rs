//! The HTTP edge: the axum router (public card, JSON-RPC at `/a2a`, REST under `/a2a/v1`),
//! authentication before anything else, body caps, SSE, and the server's lifetime.
//!
//! Requests are decoded by each binding's `Wire` into the one internal model, handled by
//! [`Service::handle`], and encoded back for the caller's binding and version by `endpoint`. The
//! HTTP layer depends on the service, never the other way round.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request as HttpRequest, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use volcanic_core::SessionFactory;

use crate::auth::CallerDirectory;
use crate::card::public::PublicCards;
use crate::card::signing::{self, CardSigner};
use crate::config::A2aOptions;
pub use crate::edge::endpoint::PushHandler;
use crate::edge::endpoint::{ServerInner, base_url, endpoint};
use crate::edge::fair::{CallerCaps, CallerShares};
use crate::edge::http::{body_error, connection_refusal, header_text, read_body};
use crate::edge::wire::{JsonRpc, Rest};
use crate::error::A2aError;
use crate::push::guard::GuardError;
use crate::push::{self, PushSender};
use crate::run::containment::Containment;
use crate::run::extension::OwnerNotifier;
use crate::run::pool::SessionPool;
use crate::service::Service;
use crate::task::AcceptedMessages;
use crate::task::store::TaskStore;
use crate::tasks::Tasks;

/// Largest push the receiver reads (anyone can POST there; a push is a task, not a file).
const PUSH_BODY_LIMIT: usize = 1024 * 1024;

/// How long shutdown waits for runs to settle after aborting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

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

/// Builds an [`A2aServer`].
pub struct A2aServerBuilder {
    factory: Arc<SessionFactory>,
    directory: Arc<dyn CallerDirectory>,
    options: A2aOptions,
    notifier: Option<Arc<dyn OwnerNotifier>>,
    approval_notifier: Option<Arc<dyn crate::approval::ApprovalNotifier>>,
    on_push: Option<PushHandler>,
    containment: Containment,
    caller_env: volcanic_core::exec::ExecEnv,
    usage_notifier: Option<Arc<dyn crate::usage::UsageNotifier>>,
    clock: crate::usage::Clock,
}

impl A2aServerBuilder {
    /// How the owner hears of a daily cap reaching 80 % and 100 % (besides the log).
    pub fn usage_notifier(mut self, notifier: Arc<dyn crate::usage::UsageNotifier>) -> Self {
        self.usage_notifier = Some(notifier);
        self
    }

    /// The server's clock (`crate::clock`): what dates task statuses, ages safe-retry records
    /// and old tasks for retention, and turns the daily caps' days. Default: the system clock;
    /// tests set one to cross midnight or to simulate a month.
    pub fn clock(mut self, clock: crate::usage::Clock) -> Self {
        self.clock = clock;
        self
    }

    /// How callers' tools are contained. Default: [`Containment::Unavailable`], so a host that
    /// sets nothing gives callers no workspace tools rather than unconfined ones.
    pub fn containment(mut self, containment: Containment) -> Self {
        self.containment = containment;
        self
    }

    /// The environment of callers' tools, in the sandbox or not: an allow-list
    /// ([`volcanic_core::exec::ExecEnv::for_callers`]), never the owner's environment. Default:
    /// empty.
    pub fn caller_env(mut self, env: volcanic_core::exec::ExecEnv) -> Self {
        self.caller_env = env;
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
        // Linked to the token `serve` is given once it runs (see `A2aServer::serve`).
        let stopping = CancellationToken::new();
        let pool = Arc::new(
            SessionPool::new(
                self.factory,
                self.options.session_idle_timeout,
                self.options.max_file_bytes,
                crate::run::pool::PoolLimits {
                    max_open: self.options.max_open_sessions,
                    max_per_caller: self.options.max_sessions_per_caller,
                },
            )
            .with_containment(self.containment)
            .with_caller_env(self.caller_env)
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
            .with_file_cap(file_cap)
            .with_clock(self.clock.clone()),
        );
        let shares = CallerShares::new(CallerCaps {
            requests: self.options.max_requests_per_caller,
            streams: self.options.max_streams_per_caller,
            connections: self.options.max_connections_per_caller,
        });
        let accepted = Arc::new(
            AcceptedMessages::new(
                self.options.retry_window,
                self.options.retry_records_per_caller,
                file_cap,
            )
            .with_clock(self.clock.clone()),
        );
        let meter = Arc::new(crate::usage::Meter::new(
            self.options.usage.clone(),
            self.clock,
            &approvals_dir,
            self.usage_notifier,
            tracker.clone(),
            stopping.clone(),
        ));
        Ok(A2aServer {
            inner: Arc::new(ServerInner {
                service: Arc::new(Service {
                    meter,
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
                    shutdown: stopping,
                    push_url_check,
                    push,
                }),
                shares,
                on_push: self.on_push,
                public_cards: PublicCards::signed_by(signer.map(Arc::new)),
                control: std::sync::Mutex::new(bind_control(&approvals_dir)),
                state_dir: approvals_dir.clone(),
                retention_rounds: crate::retention::RoundRequests::default(),
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
            caller_env: volcanic_core::exec::ExecEnv::default(),
            usage_notifier: None,
            clock: crate::usage::system_clock(),
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
    ) -> Result<crate::Decided, crate::DecideError> {
        use crate::service::approve::{DecidedBy, decide};
        decide(&self.inner.service, id, decision, DecidedBy::Owner).await
    }

    /// Today's usage of `workspace`'s callers against their caps (`volcanic usage` reads the
    /// same from the state folder; Telegram's `/a2a` asks here).
    pub fn usage_report(
        &self,
        workspace: &crate::auth::A2aWorkspace,
    ) -> crate::usage::ledger::WorkspaceReport {
        let service = &self.inner.service;
        let callers: Vec<(String, crate::usage::Limits)> = service
            .directory
            .entries(workspace)
            .iter()
            .map(|entry| (entry.name.clone(), entry.limits))
            .collect();
        service.meter.report(&workspace.path, &callers)
    }

    /// The routes, to mount in a host's router or serve alone.
    pub fn router(&self) -> Router {
        let limit = self.inner.service.options.max_body_bytes();
        let routes = Router::new()
            .route("/.well-known/agent-card.json", get(public_card))
            .route(signing::JWKS_PATH, get(jwks))
            .route("/a2a", post(endpoint::<JsonRpc>))
            .route("/a2a/", post(endpoint::<JsonRpc>))
            .route("/a2a/v1/{*path}", any(endpoint::<Rest>))
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
        // The service's timers stop with this server: its token follows the host's.
        let (host, own) = (shutdown.clone(), service.shutdown.clone());
        service.tracker.spawn(async move {
            tokio::select! {
                () = host.cancelled() => own.cancel(),
                () = own.cancelled() => {}
            }
        });
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
                let server: Arc<dyn crate::control::Decider> = Arc::new(server);
                if let Err(err) = crate::control::serve(server, listener, path.clone(), stop).await {
                    tracing::error!(path = %path.display(), error = %err, "the owner control socket cannot be served: volcanic approve and deny will not reach this server");
                }
            });
        }
        let eviction = service.tracker.spawn(service.pool.clone().run_eviction(shutdown.clone()));
        // Off the request path: a round now, then one per interval (or when asked), until the
        // service stops.
        let rounds = self.inner.retention_rounds.take_receiver();
        service.tracker.spawn(self.retention().run(service.shutdown.clone(), rounds));
        let options = &service.options;
        let limits = crate::edge::connection::Limits {
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
        crate::edge::connection::serve(
            listener,
            self.router(),
            limits,
            refusal,
            shutdown.clone(),
            SHUTDOWN_GRACE,
        )
        .await;
        // Also when the accept loop ended on its own.
        service.shutdown.cancel();
        service.tracker.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, service.tracker.wait()).await.is_err() {
            // Not every task left is a run: an owner notification to a slow chat service, a
            // file being made durable. Name what is known, and stop waiting either way.
            let (runs, tasks) = (service.tasks.running(), service.tracker.len());
            if runs > 0 {
                tracing::warn!(
                    runs,
                    tasks,
                    "runs still settling at shutdown, exiting without them"
                );
            } else {
                tracing::warn!(
                    tasks,
                    "background work still going at shutdown (no run: owner notifications or file writes), exiting without it"
                );
            }
        }
        // The drivers above end at a run's `Settled`, a moment before the run's own task does.
        if tokio::time::timeout(SHUTDOWN_GRACE, service.pool.close_runs()).await.is_err() {
            tracing::warn!("session runs still ending at shutdown");
        }
        // After the runs: their last state changes are queued by now, and their usage counted.
        service.push.close().await;
        service.meter.flush().await;
        eviction.abort();
        service.pool.close_all().await;
        Ok(())
    }
}

impl A2aServer {
    /// Runs a retention round now, between the timer's rounds, and waits for it: what it
    /// removed, or `None` when retention is off or the server is not serving. Tests that move
    /// the server's clock by hand (a simulated month) use it to have each day's round done
    /// before they look.
    pub async fn retention_round(&self) -> Option<crate::retention::Removed> {
        self.inner.retention_rounds.request().await
    }

    /// Retention over this server's parts (`crate::retention`).
    fn retention(&self) -> crate::retention::Retention {
        let service = &self.inner.service;
        let running = service.clone();
        let removed = service.clone();
        crate::retention::Retention {
            options: service.options.retention.clone(),
            inbox_share: service.options.max_inbox_bytes_per_caller,
            directory: service.directory.clone(),
            store: service.tasks.store().clone(),
            pool: service.pool.clone(),
            accepted: service.accepted.clone(),
            push: service.push.clone(),
            state_dir: self.inner.state_dir.clone(),
            clock: service.meter.clock(),
            is_running: Arc::new(move |task_id: &str| running.tasks.is_running(task_id)),
            on_removed: Arc::new(move || removed.tasks.removed()),
            deferred: std::sync::Mutex::default(),
            orphans_swept: std::sync::Mutex::default(),
        }
    }
}

#[async_trait::async_trait]
impl crate::control::Decider for A2aServer {
    fn pending(&self) -> Vec<crate::approval::PendingApproval> {
        self.pending_approvals()
    }

    async fn decide(
        &self,
        id: &str,
        decision: crate::approval::Decision,
    ) -> Result<crate::Decided, crate::DecideError> {
        self.decide_approval(id, decision).await
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
    use crate::auth::{A2aWorkspace, Caller, CallerEntry, CallerMode, CallerTier};
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
            limits: Default::default(),
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

    /// Issue 36: work still going at shutdown that is not a run (here an owner notification
    /// stuck on an unreachable chat service) was reported as "runs still settling at shutdown
    /// runs=0"; the log now says what is left. The wait is the server's whole grace.
    #[test]
    fn background_work_left_at_shutdown_is_not_reported_as_runs() {
        struct Unreachable;
        #[async_trait::async_trait]
        impl crate::approval::ApprovalNotifier for Unreachable {
            async fn requested(&self, _: &Caller, _: &crate::approval::PendingApproval) {
                std::future::pending::<()>().await;
            }
        }
        let workspace = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let caller = Caller {
            name: "waiting-bot".into(),
            mode: CallerMode::Isolated,
            tier: CallerTier::Chat,
            approval: crate::auth::ApprovalPolicy {
                tasks: crate::auth::CallerApproval::EveryTask,
                tools: Arc::from(Vec::new()),
            },
            limits: Default::default(),
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
                let server = A2aServer::builder(factory, Arc::new(OneCaller(caller)))
                    .approval_notifier(Arc::new(Unreachable))
                    .build()
                    .unwrap();
                let body = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}"#;
                let request = axum::http::Request::post("/a2a")
                    .header("x-api-key", "span-test-key")
                    .header("a2a-version", "1.0")
                    .header("content-type", "application/json")
                    .body(Body::from(body))
                    .unwrap();
                let response = tower::ServiceExt::oneshot(server.router(), request).await.unwrap();
                let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
                let text = String::from_utf8_lossy(&bytes);
                assert!(text.contains("TASK_STATE_AUTH_REQUIRED"), "{text}");
                // Stopped at once: nothing runs, the notification is all that is left.
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let shutdown = CancellationToken::new();
                shutdown.cancel();
                server.serve(listener, shutdown).await.unwrap();
            });
        });
        assert!(!logs.contains("runs still settling"), "{logs}");
        assert!(logs.contains("background work still going at shutdown"), "{logs}");
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
        let limits = crate::edge::connection::Limits {
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
            write_stall_timeout: Duration::from_secs(5),
            max_connections: 4,
            max_header_bytes: 8192,
            max_unauthenticated_per_peer: 4,
        };
        let serving = tokio::spawn(crate::edge::connection::serve(
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
