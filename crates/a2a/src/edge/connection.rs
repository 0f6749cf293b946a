//! The accept loop and the life of each HTTP/1.1 connection, with the limits that keep slow and
//! hostile clients from holding the server: a cap on connections served at once, a cap per peer
//! address on connections that have not authenticated, a deadline for each request head, an idle
//! timeout between requests, and a stall timeout for clients that stop taking the response.
//!
//! It replaces `axum::serve`, which offers none of these. What a request means is the router's
//! business; this module knows only bytes, connections, peer addresses and the clock. Whether a
//! connection has authenticated, and whose it is, is the router's word: each request of a
//! connection not yet counted against a caller carries its [`ConnectionShare`] as an extension,
//! and the router marks it. Request bodies are bounded in `server::read_body` (size and total
//! time), not here, so long-lived responses (SSE) are never cut by a request-side timeout.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::edge::fair::{ConnectionShare, PeerGate};

/// How long accepting pauses after an error such as running out of file descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Refusals being written at once; past it an over-the-cap connection is closed unanswered, so
/// a flood of refused connections cannot pile up tasks and sockets.
const MAX_REFUSALS_IN_FLIGHT: usize = 64;

/// How long a refused connection may take to receive its answer and close.
const REFUSAL_TIME: Duration = Duration::from_secs(2);

/// How long a refusal waits for the client to start its request before answering anyway.
const REFUSAL_WAIT_FOR_REQUEST: Duration = Duration::from_secs(1);

/// The connection limits (from `A2aOptions`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub write_stall_timeout: Duration,
    pub max_connections: usize,
    /// Largest request head; beyond it hyper answers 431 and closes.
    pub max_header_bytes: usize,
    /// Most connections of one peer address not yet vouched for by an authenticated request.
    pub max_unauthenticated_per_peer: usize,
}

/// Serves `router` on `listener` until `shutdown` fires; then stops accepting, lets each
/// connection finish its current response, and closes the rest after `grace`.
///
/// `refusal` is the whole HTTP response (429) written to a connection refused because its peer
/// address has too many unauthenticated connections; the connection is closed after it.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    refusal: Bytes,
    shutdown: CancellationToken,
    grace: Duration,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let gate = PeerGate::new(limits.max_unauthenticated_per_peer);
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    let connections = TaskTracker::new();
    // Fired after the grace period: connections still open are dropped.
    let force = CancellationToken::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes)
        // At most 100 header fields, beyond which hyper answers 431 and closes: hyper's default,
        // relied on rather than set, because with `max_headers` set hyper sizes and fills its
        // header buffers at run time on every request (about 1% of a GetTask's CPU).
        // `tests/it/bad_bodies.rs` pins the limit.
        .keep_alive(true);
    let http = Arc::new(http);
    loop {
        // Take a slot before accepting: over the cap, clients wait in the listen backlog rather
        // than being accepted and starved.
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Per-connection failures (reset before accept) and resource exhaustion
                    // (EMFILE) both pass; back off so the loop does not spin.
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                    }
                }
            },
        };
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(error = %err, "cannot set TCP_NODELAY");
        }
        // Counted here, before a byte is read, so one address cannot fill every slot with
        // connections that never present a key (idle, slow, or card-only).
        let Some(slot) = gate.admit(peer.ip()) else {
            drop(permit);
            tracing::debug!(
                peer = %peer.ip(),
                limit = gate.max(),
                "too many unauthenticated connections from one address; refusing"
            );
            if let Ok(refusing) = refusals.clone().try_acquire_owned() {
                let refusal = refusal.clone();
                connections.spawn(async move {
                    refuse(stream, &refusal).await;
                    drop(refusing);
                });
            }
            continue;
        };
        let (http, router, shutdown, force) =
            (http.clone(), router.clone(), shutdown.clone(), force.clone());
        connections.spawn(async move {
            let share = Arc::new(ConnectionShare::new(slot));
            serve_connection(&http, stream, share, router, limits, &shutdown, &force).await;
            drop(permit);
        });
    }
    drop(listener);
    connections.close();
    if tokio::time::timeout(grace, connections.wait()).await.is_err() {
        tracing::warn!(
            open = connections.len(),
            "connections still open after the shutdown grace; closing them"
        );
        force.cancel();
        connections.wait().await;
    }
}

/// Answers a refused connection: waits (briefly) for the client to start its request, since an
/// HTTP client that is answered before it has asked takes the connection for broken; writes the
/// refusal without parsing what came; then reads until the client closes, since closing a socket
/// with unread bytes resets it, and a reset can destroy the answer before the client reads it
/// (RFC 9112 §9.6). The whole exchange is bounded by [`REFUSAL_TIME`].
async fn refuse(mut stream: TcpStream, refusal: &[u8]) {
    let answered = tokio::time::timeout(REFUSAL_TIME, async {
        let mut sink = [0u8; 1024];
        let first = tokio::time::timeout(REFUSAL_WAIT_FOR_REQUEST, stream.read(&mut sink)).await;
        // A client that asked, or stayed silent, gets the answer; one that left does not.
        if let Ok(Ok(0) | Err(_)) = first {
            return Ok(());
        }
        stream.write_all(refusal).await?;
        stream.shutdown().await?;
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), io::Error>(())
    })
    .await;
    if let Ok(Err(err)) = answered {
        tracing::debug!(error = %err, "writing a refusal failed");
    }
}

/// Why the watcher ends a connection.
enum Verdict {
    /// Nothing in progress and nothing received for the idle timeout: close after the current
    /// exchange (there is none).
    Idle,
    /// The client has taken none of our bytes for the stall timeout: drop the connection.
    Stalled,
}

async fn serve_connection(
    http: &hyper::server::conn::http1::Builder,
    stream: TcpStream,
    share: Arc<ConnectionShare>,
    router: Router,
    limits: Limits,
    shutdown: &CancellationToken,
    force: &CancellationToken,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched { inner: stream, activity: activity.clone() });
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |mut request: axum::http::Request<Incoming>| {
            // Counted from here until the response body is dropped (sent or abandoned), so a
            // long SSE response is never taken for idleness.
            let guard = InFlight::enter(activity.clone());
            if !share.has_caller() {
                request.extensions_mut().insert(share.clone());
            }
            let router = router.clone();
            async move {
                let response = router.oneshot(request.map(Body::new)).await;
                response.map(|response| {
                    response.map(|body| Body::new(TrackedBody { inner: body, _guard: guard }))
                })
            }
        })
    };
    let connection = http.serve_connection(io, service);
    tokio::pin!(connection);
    let mut draining = false;
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(err) = served {
                    // Timeouts, resets and malformed requests end here; hyper has already
                    // answered what it could (400, 431).
                    tracing::debug!(error = %err, "connection ended with an error");
                }
                return;
            }
            () = shutdown.cancelled(), if !draining => {
                connection.as_mut().graceful_shutdown();
                draining = true;
            }
            () = force.cancelled() => return,
            verdict = watch(&activity, limits) => match verdict {
                Verdict::Idle if !draining => {
                    connection.as_mut().graceful_shutdown();
                    draining = true;
                }
                Verdict::Idle => {}
                Verdict::Stalled => {
                    tracing::debug!("client stopped reading the response; closing the connection");
                    return;
                }
            },
        }
    }
}

/// Waits until the connection is idle or stalled (checked a few times per timeout).
async fn watch(activity: &Activity, limits: Limits) -> Verdict {
    let tick = (limits.idle_timeout.min(limits.write_stall_timeout) / 4)
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        tokio::time::sleep(tick).await;
        let now = activity.elapsed_ms();
        let blocked = activity.write_blocked_since.load(Ordering::Acquire);
        if blocked != 0 && now.saturating_sub(blocked - 1) >= millis(limits.write_stall_timeout) {
            return Verdict::Stalled;
        }
        let quiet_since = activity.last_seen.load(Ordering::Acquire);
        if activity.in_flight.load(Ordering::Acquire) == 0
            && now.saturating_sub(quiet_since) >= millis(limits.idle_timeout)
        {
            return Verdict::Idle;
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// What the watcher knows about one connection, in milliseconds since it was accepted.
struct Activity {
    start: Instant,
    /// Requests whose response body is still alive.
    in_flight: AtomicUsize,
    /// The last time bytes arrived or a response ended.
    last_seen: AtomicU64,
    /// 0 when writes go through; else 1 + the time the socket first refused a write.
    write_blocked_since: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last_seen: AtomicU64::new(0),
            write_blocked_since: AtomicU64::new(0),
        }
    }

    fn elapsed_ms(&self) -> u64 {
        millis(self.start.elapsed())
    }

    fn touch(&self) {
        self.last_seen.store(self.elapsed_ms(), Ordering::Release);
    }
}

/// One request in progress on a connection.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn enter(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted as in flight while it lives.
struct TrackedBody {
    inner: Body,
    _guard: InFlight,
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The socket, noting when bytes arrive and when the client stops taking ours.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl Watched {
    fn note_write<T>(&self, result: &Poll<io::Result<T>>) {
        let blocked = &self.activity.write_blocked_since;
        match result {
            Poll::Pending => {
                let since = self.activity.elapsed_ms().saturating_add(1);
                // Only the first refusal of a run of them counts.
                let _unchanged =
                    blocked.compare_exchange(0, since, Ordering::AcqRel, Ordering::Acquire);
            }
            Poll::Ready(_) => blocked.store(0, Ordering::Release),
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        result
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note_write(&result);
        result
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note_write(&result);
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
