//! Fair share (docs/a2a.md, "Fair share"): no single caller or peer can take the whole server.
//!
//! Four counts, each with its own cap from `A2aOptions`:
//! - per caller, requests in progress (streams included), from authentication until the reply is
//!   built or the stream ends ([`CallerShares::admit`]);
//! - per caller, SSE streams open at once ([`CallerShares::admit_stream`]);
//! - per caller, connections open, from the first request on the connection that authenticates
//!   as that caller until the connection closes ([`ConnectionShare::claim`]), so idle kept-alive
//!   connections of one caller cannot fill the server's connection slots;
//! - per peer address, connections that have not yet carried an authenticated request
//!   ([`PeerGate::admit`]), checked by the accept loop before a byte is read.
//!
//! A count is held by a guard and given back when the guard drops, so no path can leak one.
//! This module decides only whether there is room; the wire answer (429, `Retry-After`, the
//! error body, closing the connection) comes from `error.rs` and `server.rs`, and it knows
//! nothing of HTTP.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};

use futures_util::Stream;

use crate::auth::Caller;
use crate::error::A2aError;

/// The per-caller caps (from `A2aOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallerCaps {
    /// Requests in progress, streams included.
    pub(crate) requests: usize,
    /// SSE streams open.
    pub(crate) streams: usize,
    /// Connections counted against the caller ([`ConnectionShare::claim`]).
    pub(crate) connections: usize,
}

/// The per-caller counts of requests, streams and connections in progress.
///
/// A caller is its workspace and its name (two workspaces may each have a `travel-bot`).
/// Entries are never removed: there is one per caller that ever authenticated, which
/// callers.json bounds, and an entry is three counters.
pub(crate) struct CallerShares {
    caps: CallerCaps,
    callers: Mutex<HashMap<PathBuf, HashMap<String, Arc<Counts>>>>,
}

#[derive(Default)]
struct Counts {
    requests: AtomicUsize,
    streams: AtomicUsize,
    connections: AtomicUsize,
}

/// One request of a caller in progress, and its stream if it opened one; both counted until
/// it is dropped.
pub(crate) struct Admission {
    counts: Arc<Counts>,
    streaming: bool,
}

impl CallerShares {
    /// Caps of at least 1 each (a cap of 0 would refuse everything; config refuses it).
    pub(crate) fn new(caps: CallerCaps) -> Self {
        let caps = CallerCaps {
            requests: caps.requests.max(1),
            streams: caps.streams.max(1),
            connections: caps.connections.max(1),
        };
        CallerShares { caps, callers: Mutex::default() }
    }

    /// Counts a request of `caller` in progress.
    ///
    /// # Errors
    /// [`A2aError::TooManyRequests`] when the caller already has the most requests in progress.
    pub(crate) fn admit(&self, caller: &Caller) -> Result<Admission, A2aError> {
        let counts = self.counts(&caller.workspace.path, &caller.name);
        if !take(&counts.requests, self.caps.requests) {
            return Err(A2aError::TooManyRequests { limit: self.caps.requests });
        }
        Ok(Admission { counts, streaming: false })
    }

    /// Counts the stream an admitted request opens (at most one per request).
    ///
    /// # Errors
    /// [`A2aError::TooManyStreams`] when the caller already has the most streams open.
    pub(crate) fn admit_stream(&self, admission: &mut Admission) -> Result<(), A2aError> {
        if admission.streaming {
            return Ok(());
        }
        if !take(&admission.counts.streams, self.caps.streams) {
            return Err(A2aError::TooManyStreams { limit: self.caps.streams });
        }
        admission.streaming = true;
        Ok(())
    }

    /// Counts a connection of `caller` until the returned guard drops.
    ///
    /// # Errors
    /// [`A2aError::TooManyCallerConnections`] when the caller already has the most connections.
    fn admit_connection(&self, caller: &Caller) -> Result<CallerConnection, A2aError> {
        let counts = self.counts(&caller.workspace.path, &caller.name);
        if !take(&counts.connections, self.caps.connections) {
            return Err(A2aError::TooManyCallerConnections { limit: self.caps.connections });
        }
        Ok(CallerConnection { counts })
    }

    fn counts(&self, workspace: &Path, name: &str) -> Arc<Counts> {
        let mut callers = self.callers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(counts) = callers.get(workspace).and_then(|names| names.get(name)) {
            return counts.clone();
        }
        callers
            .entry(workspace.to_path_buf())
            .or_default()
            .entry(name.to_string())
            .or_default()
            .clone()
    }
}

/// Takes one unit of `counter` if fewer than `max` are taken. Two racing at the cap may both be
/// refused, never both admitted.
fn take(counter: &AtomicUsize, max: usize) -> bool {
    if counter.fetch_add(1, Ordering::AcqRel) >= max {
        counter.fetch_sub(1, Ordering::AcqRel);
        return false;
    }
    true
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.counts.requests.fetch_sub(1, Ordering::AcqRel);
        if self.streaming {
            self.counts.streams.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A reply stream holding its request's admission: it is given back when the stream ends,
/// before the end reaches the client (so a client that saw its stream end can open the next one
/// at once), or when the stream is dropped early (the client left).
pub(crate) struct Held<S> {
    inner: S,
    admission: Option<Admission>,
}

impl<S> Held<S> {
    pub(crate) fn new(inner: S, admission: Admission) -> Self {
        Held { inner, admission: Some(admission) }
    }
}

impl<S: Stream + Unpin> Stream for Held<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let polled = Pin::new(&mut self.inner).poll_next(cx);
        if matches!(polled, Poll::Ready(None)) {
            self.admission = None;
        }
        polled
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

/// One connection counted against its caller until it is dropped.
struct CallerConnection {
    counts: Arc<Counts>,
}

impl Drop for CallerConnection {
    fn drop(&mut self) {
        self.counts.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One connection's standing in the fair share: counted against its peer address until a
/// request on it authenticates, then against the caller of that request until it closes.
///
/// The accept loop makes one per connection and hands it to the router with each request until
/// the connection counts against a caller. A connection that later carries a request of another
/// caller (one client holding two keys: rare) still counts for the first caller only; the
/// other's requests and streams count against the other's caps as usual.
pub(crate) struct ConnectionShare {
    peer: PeerSlot,
    caller: OnceLock<CallerConnection>,
}

impl ConnectionShare {
    pub(crate) fn new(peer: PeerSlot) -> Self {
        ConnectionShare { peer, caller: OnceLock::new() }
    }

    /// Whether the connection counts against a caller (then nothing about it changes until it
    /// closes).
    pub(crate) fn has_caller(&self) -> bool {
        self.caller.get().is_some()
    }

    /// A request on the connection authenticated: it no longer counts against its peer. Enough
    /// on its own for a request that will be the connection's last, which the request cap
    /// already counts for as long as the connection lives.
    pub(crate) fn mark_authenticated(&self) {
        self.peer.mark_authenticated();
    }

    /// A request on the connection authenticated as `caller`: it no longer counts against its
    /// peer, and counts against `caller` until it closes, unless it already counts against a
    /// caller.
    ///
    /// # Errors
    /// [`A2aError::TooManyCallerConnections`] when `caller` already has the most connections;
    /// the connection then counts against no caller (it is to be closed).
    pub(crate) fn claim(&self, shares: &CallerShares, caller: &Caller) -> Result<(), A2aError> {
        self.peer.mark_authenticated();
        if self.has_caller() {
            return Ok(());
        }
        // Requests on one HTTP/1.1 connection come one at a time, so nothing races here; if
        // something did, the loser's count would be given back as its guard drops.
        let _lost = self.caller.set(shares.admit_connection(caller)?);
        Ok(())
    }
}

/// The per-peer counts of connections that have not carried an authenticated request.
///
/// The peer is the IP address the connection comes from (IPv4-mapped IPv6 addresses count as
/// their IPv4 address). Behind a reverse proxy every client is the proxy.
pub(crate) struct PeerGate {
    max: usize,
    peers: Mutex<HashMap<IpAddr, usize>>,
}

impl PeerGate {
    /// A cap of at least 1 (config refuses 0).
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(PeerGate { max: max.max(1), peers: Mutex::default() })
    }

    /// The cap, for the refusal's message.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Counts a new connection from `peer` as unauthenticated, or `None` when the peer already
    /// has the most such connections.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<PeerSlot> {
        let peer = peer.to_canonical();
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        let count = peers.entry(peer).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(PeerSlot { gate: self.clone(), peer, authenticated: AtomicBool::new(false) })
    }

    fn release(&self, peer: IpAddr) {
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = peers.get_mut(&peer) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                peers.remove(&peer);
            }
        }
    }
}

/// One connection's place in its peer's count of unauthenticated connections, given back once
/// a request on it authenticates, or when it closes.
pub(crate) struct PeerSlot {
    gate: Arc<PeerGate>,
    peer: IpAddr,
    authenticated: AtomicBool,
}

impl PeerSlot {
    /// A request on the connection authenticated: it no longer counts against its peer.
    fn mark_authenticated(&self) {
        if !self.authenticated.swap(true, Ordering::AcqRel) {
            self.gate.release(self.peer);
        }
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        self.mark_authenticated();
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::sync::Arc;

    use futures_util::StreamExt;

    use super::*;
    use crate::auth::{A2aWorkspace, CallerMode};

    fn caller(workspace: &str, name: &str) -> Caller {
        Caller {
            name: name.into(),
            mode: CallerMode::Isolated,
            tier: crate::auth::CallerTier::Workspace,
            approval: Default::default(),
            limits: Default::default(),
            workspace: Arc::new(A2aWorkspace {
                path: workspace.into(),
                scope_prefix: "test".into(),
                owner_id: "owner".into(),
            }),
        }
    }

    fn shares(requests: usize, streams: usize, connections: usize) -> CallerShares {
        CallerShares::new(CallerCaps { requests, streams, connections })
    }

    fn connection(gate: &Arc<PeerGate>) -> ConnectionShare {
        ConnectionShare::new(gate.admit(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap())
    }

    #[test]
    fn caller_requests_over_the_cap_are_refused_until_one_ends() {
        let shares = shares(2, 10, 10);
        let bot = caller("/ws", "bot");
        let first = shares.admit(&bot).unwrap();
        let _second = shares.admit(&bot).unwrap();
        assert_eq!(shares.admit(&bot).err(), Some(A2aError::TooManyRequests { limit: 2 }));
        drop(first);
        assert!(shares.admit(&bot).is_ok());
    }

    #[test]
    fn caller_streams_are_counted_apart_from_requests_per_caller_and_workspace() {
        let shares = shares(10, 1, 10);
        let bot = caller("/ws", "bot");
        let mut streaming = shares.admit(&bot).unwrap();
        shares.admit_stream(&mut streaming).unwrap();
        // Asking twice for the same request's stream counts it once.
        shares.admit_stream(&mut streaming).unwrap();
        let mut refused = shares.admit(&bot).unwrap();
        assert_eq!(
            shares.admit_stream(&mut refused).err(),
            Some(A2aError::TooManyStreams { limit: 1 })
        );
        let mut other = shares.admit(&caller("/ws", "other")).unwrap();
        assert!(shares.admit_stream(&mut other).is_ok());
        let mut elsewhere = shares.admit(&caller("/elsewhere", "bot")).unwrap();
        assert!(shares.admit_stream(&mut elsewhere).is_ok());
        drop(streaming);
        assert!(shares.admit_stream(&mut refused).is_ok());
    }

    #[tokio::test]
    async fn held_stream_gives_its_admission_back_when_it_ends() {
        let shares = shares(1, 10, 10);
        let bot = caller("/ws", "bot");
        let mut held = Held::new(futures_util::stream::iter([1, 2]), shares.admit(&bot).unwrap());
        assert_eq!((held.next().await, held.next().await), (Some(1), Some(2)));
        assert!(shares.admit(&bot).is_err());
        assert_eq!(held.next().await, None);
        assert!(shares.admit(&bot).is_ok());
    }

    #[test]
    fn caller_connections_over_the_cap_are_refused_until_one_closes() {
        let shares = shares(10, 10, 2);
        let gate = PeerGate::new(10);
        let bot = caller("/ws", "bot");
        let first = connection(&gate);
        let second = connection(&gate);
        let third = connection(&gate);
        assert_eq!(
            [first.claim(&shares, &bot), second.claim(&shares, &bot), third.claim(&shares, &bot)],
            [Ok(()), Ok(()), Err(A2aError::TooManyCallerConnections { limit: 2 })]
        );
        assert_eq!(
            [first.has_caller(), second.has_caller(), third.has_caller()],
            [true, true, false]
        );
        // Another request on a counted connection is not counted again.
        assert_eq!(first.claim(&shares, &bot), Ok(()));
        // Another caller, or the same name in another workspace, has its own count.
        assert_eq!(third.claim(&shares, &caller("/ws", "other")), Ok(()));
        assert_eq!(connection(&gate).claim(&shares, &caller("/elsewhere", "bot")), Ok(()));
        drop(first);
        assert_eq!(connection(&gate).claim(&shares, &bot), Ok(()));
    }

    #[test]
    fn connection_used_by_a_second_caller_counts_for_the_first_only() {
        let shares = shares(10, 10, 1);
        let gate = PeerGate::new(10);
        let (bot, other) = (caller("/ws", "bot"), caller("/ws", "other"));
        let shared = connection(&gate);
        shared.claim(&shares, &bot).unwrap();
        shared.claim(&shares, &other).unwrap();
        assert_eq!(
            (connection(&gate).claim(&shares, &bot), connection(&gate).claim(&shares, &other)),
            (Err(A2aError::TooManyCallerConnections { limit: 1 }), Ok(()))
        );
    }

    #[test]
    fn authenticated_connection_leaves_its_peer_count_whether_or_not_a_caller_counts_it() {
        let shares = shares(10, 10, 1);
        let gate = PeerGate::new(2);
        let bot = caller("/ws", "bot");
        let last_request = connection(&gate);
        let counted = connection(&gate);
        assert!(gate.admit(IpAddr::V4(Ipv4Addr::LOCALHOST)).is_none());
        last_request.mark_authenticated();
        counted.claim(&shares, &bot).unwrap();
        assert_eq!((last_request.has_caller(), counted.has_caller()), (false, true));
        let _first = connection(&gate);
        let _second = connection(&gate);
        assert!(gate.admit(IpAddr::V4(Ipv4Addr::LOCALHOST)).is_none());
    }

    #[test]
    fn peer_over_the_cap_is_refused_until_a_connection_authenticates_or_closes() {
        let gate = PeerGate::new(2);
        let here = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let first = gate.admit(here).unwrap();
        let second = gate.admit(here).unwrap();
        assert!(gate.admit(here).is_none());
        assert!(gate.admit(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))).is_some());
        first.mark_authenticated();
        first.mark_authenticated();
        let third = gate.admit(here).unwrap();
        assert!(gate.admit(here).is_none());
        // Dropping an authenticated connection gives nothing back twice.
        drop(first);
        assert!(gate.admit(here).is_none());
        drop(second);
        assert!(gate.admit(here).is_some());
        drop(third);
    }

    #[test]
    fn peer_ipv4_mapped_ipv6_counts_as_its_ipv4_address() {
        let gate = PeerGate::new(1);
        let _v4 = gate.admit(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        let mapped = IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped());
        assert!(gate.admit(mapped).is_none());
        assert!(gate.admit(IpAddr::V6(Ipv6Addr::LOCALHOST)).is_some());
    }
}
