//! Fair share (issue 17, guarantee 6): no single caller or peer can take the whole server.
//!
//! Three counts, each with its own cap from `A2aOptions`:
//! - per caller, requests in progress (streams included), from authentication until the reply is
//!   built or the stream ends ([`CallerShares::admit`]);
//! - per caller, SSE streams open at once ([`CallerShares::admit_stream`]);
//! - per peer address, connections that have not yet carried an authenticated request
//!   ([`PeerGate::admit`]), checked by the accept loop before a byte is read.
//!
//! A count is held by a guard and given back when the guard drops, so no path can leak one.
//! This module decides only whether there is room; the wire answer (429, `Retry-After`, the
//! error body) comes from `error.rs` through the bindings, and it knows nothing of HTTP.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures_util::Stream;

use crate::auth::Caller;
use crate::error::A2aError;

/// The per-caller counts of requests and streams in progress.
///
/// A caller is its workspace and its name (two workspaces may each have a `travel-bot`).
/// Entries are never removed: there is one per caller that ever authenticated, which
/// callers.json bounds, and an entry is two counters.
pub(crate) struct CallerShares {
    max_requests: usize,
    max_streams: usize,
    callers: Mutex<HashMap<PathBuf, HashMap<String, Arc<Counts>>>>,
}

#[derive(Default)]
struct Counts {
    requests: AtomicUsize,
    streams: AtomicUsize,
}

/// One request of a caller in progress, and its stream if it opened one; both counted until
/// it is dropped.
pub(crate) struct Admission {
    counts: Arc<Counts>,
    streaming: bool,
}

impl CallerShares {
    /// Caps of at least 1 each (a cap of 0 would refuse everything; config refuses it).
    pub(crate) fn new(max_requests: usize, max_streams: usize) -> Self {
        CallerShares {
            max_requests: max_requests.max(1),
            max_streams: max_streams.max(1),
            callers: Mutex::default(),
        }
    }

    /// Counts a request of `caller` in progress.
    ///
    /// # Errors
    /// [`A2aError::TooManyRequests`] when the caller already has the most requests in progress.
    pub(crate) fn admit(&self, caller: &Caller) -> Result<Admission, A2aError> {
        let counts = self.counts(&caller.workspace.path, &caller.name);
        if !take(&counts.requests, self.max_requests) {
            return Err(A2aError::TooManyRequests { limit: self.max_requests });
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
        if !take(&admission.counts.streams, self.max_streams) {
            return Err(A2aError::TooManyStreams { limit: self.max_streams });
        }
        admission.streaming = true;
        Ok(())
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
    /// Whether a request on the connection has authenticated.
    pub(crate) fn is_authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Acquire)
    }

    /// A request on the connection authenticated: it no longer counts against its peer.
    pub(crate) fn mark_authenticated(&self) {
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
            workspace: Arc::new(A2aWorkspace {
                path: workspace.into(),
                scope_prefix: "test".into(),
                owner_id: "owner".into(),
            }),
        }
    }

    #[test]
    fn caller_requests_over_the_cap_are_refused_until_one_ends() {
        let shares = CallerShares::new(2, 10);
        let bot = caller("/ws", "bot");
        let first = shares.admit(&bot).unwrap();
        let _second = shares.admit(&bot).unwrap();
        assert_eq!(shares.admit(&bot).err(), Some(A2aError::TooManyRequests { limit: 2 }));
        drop(first);
        assert!(shares.admit(&bot).is_ok());
    }

    #[test]
    fn caller_streams_are_counted_apart_from_requests_per_caller_and_workspace() {
        let shares = CallerShares::new(10, 1);
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
        let shares = CallerShares::new(1, 10);
        let bot = caller("/ws", "bot");
        let mut held = Held::new(futures_util::stream::iter([1, 2]), shares.admit(&bot).unwrap());
        assert_eq!((held.next().await, held.next().await), (Some(1), Some(2)));
        assert!(shares.admit(&bot).is_err());
        assert_eq!(held.next().await, None);
        assert!(shares.admit(&bot).is_ok());
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
