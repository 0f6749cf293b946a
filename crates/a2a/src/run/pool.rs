//! The session pool: one agent session per (workspace, caller, contextId), opened or resumed on
//! demand, claimed by one task at a time, and closed after `SessionIdleTimeout` without use
//! (closed sessions stay resumable from their journals).
//!
//! A task first reserves its context ([`SessionPool::reserve`]): an open idle session is claimed
//! at once, otherwise the context is held and opening the session ([`Opening::open`]) is left to
//! the task's run, after the task has been acknowledged.
//!
//! Open sessions are bounded (`MaxOpenSessions` in all, `MaxSessionsPerCaller` per caller): each
//! holds its journal's file and lock. A new context over a bound takes the least recently used
//! idle session in its way out of the pool, and closes it before its own opens; when every
//! session in the way is busy, the new context is refused with a message naming the limit.
//! Closing syncs a journal, so it never happens under the pool's lock, and a claim of a context
//! whose session is closing waits for the close.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use volcanic_core::{Extension, Session, SessionFactory, SessionOptions};

use crate::auth::Caller;
use crate::error::Error;
use crate::run::extension::A2aChatChannel;

/// How many times a claim waits for its context's session to finish closing before giving up.
const CLOSE_WAITS: usize = 3;

/// The session scope of a caller's context: `<prefix>-a2a-<caller>_<contextId>`. Caller names
/// are `[a-z0-9-]`, so the first `_` separates name and context and no two pairs share a scope.
pub fn scope(caller: &Caller, context_id: &str) -> String {
    format!("{}{}", caller_prefix(caller), context_id)
}

/// The start of the session scopes of every caller of `workspace`: `<prefix>-a2a-`. The owner's
/// own sessions never start with it.
pub(crate) fn callers_scope_prefix(workspace: &crate::auth::A2aWorkspace) -> String {
    format!("{}-a2a-", workspace.scope_prefix)
}

/// Logs the end of a session taken out of the pool: a failure as a warning, the routine close
/// (one per conversation, beside the task-end line) only at debug level.
fn log_closed(scope: &str, why: &'static str, closed: volcanic_core::Result<()>) {
    match closed {
        Ok(()) => tracing::debug!(scope = %scope, reason = why, "A2A session closed"),
        Err(err) => {
            tracing::warn!(scope = %scope, reason = why, error = %err, "closing an A2A session failed")
        }
    }
}

/// The start of every scope of a caller: `<prefix>-a2a-<caller>_`.
fn caller_prefix(caller: &Caller) -> String {
    format!("{}-a2a-{}_", caller.workspace.scope_prefix, caller.name)
}

/// How many sessions may be open at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLimits {
    /// In all (`A2A__MaxOpenSessions`).
    pub max_open: usize,
    /// Per caller (`A2A__MaxSessionsPerCaller`).
    pub max_per_caller: usize,
}

struct Entry {
    session: Session,
    channel: Arc<A2aChatChannel>,
    claimed: bool,
    last_used: Instant,
}

impl Entry {
    fn is_idle(&self) -> bool {
        !self.claimed && !self.session.is_running()
    }
}

/// What the pool's lock guards.
#[derive(Default)]
struct State {
    entries: HashMap<String, Entry>,
    /// Scopes whose session is being opened; they count against the bounds.
    opening: HashSet<String>,
    /// Scopes whose session is being closed; `true` is sent once it is.
    closing: HashMap<String, watch::Receiver<bool>>,
}

impl State {
    fn open_count(&self, prefix: &str) -> usize {
        self.entries.keys().chain(self.opening.iter()).filter(|s| s.starts_with(prefix)).count()
    }

    /// The least recently used idle session whose scope starts with `prefix`, not in `skip`.
    fn lru_idle(&self, prefix: &str, skip: &[String]) -> Option<String> {
        self.entries
            .iter()
            .filter(|(scope, e)| scope.starts_with(prefix) && e.is_idle() && !skip.contains(scope))
            .min_by_key(|(_, e)| e.last_used)
            .map(|(scope, _)| scope.clone())
    }

    /// Takes `scopes` out of the pool for closing, marking them as closing.
    fn take_for_closing(&mut self, scopes: Vec<String>) -> Vec<Closing> {
        let mut taken = Vec::with_capacity(scopes.len());
        for scope in scopes {
            if let Some(entry) = self.entries.remove(&scope) {
                let (done, receiver) = watch::channel(false);
                self.closing.insert(scope.clone(), receiver);
                taken.push(Closing { scope, session: entry.session, done });
            }
        }
        taken
    }
}

/// A session taken out of the pool, to close outside the lock.
struct Closing {
    scope: String,
    session: Session,
    done: watch::Sender<bool>,
}

/// A context held without a session (CancelTask writing a task file): no task may start in it
/// until the hold is released.
pub struct Hold {
    scope: String,
}

/// When [`SessionPool::try_hold_scope`] may hold a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldIf {
    /// Its session is not claimed or running (it may be open and idle): for a task's file.
    Idle,
    /// Its session is not open at all: for the session's own folder.
    Closed,
}

/// A claimed session: the holder runs one task on it, then releases it.
pub struct Claim {
    pub session: Session,
    pub channel: Arc<A2aChatChannel>,
    pub scope: String,
}

/// What [`SessionPool::reserve`] gives a task: its context's session, or the right to open it.
pub enum Reservation {
    /// The context's session was open and idle; it is claimed.
    Ready(Claim),
    /// The context is held for this task; its session is still to be opened.
    Pending(Opening),
}

/// A context held for a task whose session is not open yet. [`Opening::open`] opens it; dropped
/// unopened, it gives the context back (on the runtime, since that takes the pool's lock).
pub struct Opening {
    pool: Arc<SessionPool>,
    caller: Caller,
    scope: String,
    /// Idle sessions taken out of the pool to make room, closed before this one opens.
    evicted: Vec<Closing>,
    /// Opened or given back: nothing left for `Drop`.
    settled: bool,
}

impl Opening {
    /// Closes the sessions taken out to make room, then opens or resumes the context's session
    /// and claims it.
    ///
    /// # Errors
    /// [`Error::Core`] (logged) when the session cannot be opened; the context is free again.
    pub async fn open(
        mut self,
        extension: impl FnOnce(&Arc<A2aChatChannel>) -> Arc<dyn Extension>,
    ) -> Result<Claim, Error> {
        let pool = self.pool.clone();
        pool.close_sessions(std::mem::take(&mut self.evicted), "to make room").await;
        let channel = Arc::new(A2aChatChannel::new(pool.max_file_bytes));
        let (tool_set, confinement) = pool.containment.for_caller(&self.caller);
        let options = SessionOptions {
            scope: self.scope.clone(),
            cwd: self.caller.workspace.path.clone(),
            channel: Some(channel.clone()),
            extensions: vec![extension(&channel)],
            tool_set,
            confinement,
            exec: Some(pool.caller_env.clone()),
        };
        let opened = pool.factory.open(options).await;
        let mut state = pool.state.lock().await;
        pool.end_opening(&mut state, &self.scope);
        self.settled = true;
        let session = opened.inspect_err(|err| {
            tracing::error!(scope = %self.scope, error = %err, "cannot open an A2A session");
        })?;
        // A run's journal entries are made durable with the task's final state (one barrier).
        session.defer_run_end_sync();
        let scope = std::mem::take(&mut self.scope);
        state.entries.insert(
            scope.clone(),
            Entry {
                session: session.clone(),
                channel: channel.clone(),
                claimed: true,
                last_used: Instant::now(),
            },
        );
        Ok(Claim { session, channel, scope })
    }

    /// Gives the context back without opening its session.
    pub async fn abandon(mut self) {
        self.settled = true;
        let (scope, evicted) = (std::mem::take(&mut self.scope), std::mem::take(&mut self.evicted));
        self.pool.abandon(scope, evicted).await;
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let (pool, scope, evicted) =
            (self.pool.clone(), std::mem::take(&mut self.scope), std::mem::take(&mut self.evicted));
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let tracker = pool.tracker.clone();
                tracker.spawn_on(async move { pool.abandon(scope, evicted).await }, &runtime);
            }
            Err(_) => {
                tracing::error!(scope = %scope, "an unopened A2A context was dropped outside the runtime; it stays busy")
            }
        }
    }
}

/// Open sessions of A2A callers.
pub struct SessionPool {
    factory: Arc<SessionFactory>,
    /// Which tools callers' sessions get and the sandbox they run in.
    containment: crate::run::containment::Containment,
    /// The environment of callers' tools.
    caller_env: Arc<volcanic_core::exec::ExecEnv>,
    idle_timeout: Duration,
    max_file_bytes: u64,
    limits: PoolLimits,
    state: tokio::sync::Mutex<State>,
    /// Scopes held by [`SessionPool::try_hold`] or being opened.
    holds: std::sync::Mutex<HashSet<String>>,
    /// Told whenever a context may have become free (a claim released, a hold or an opening
    /// ended), so that code waiting for a busy context waits for this, not a timer.
    freed: tokio::sync::Notify,
    /// Owns the work a dropped [`Opening`] leaves behind (giving its context back), so shutdown
    /// waits for it.
    tracker: TaskTracker,
}

impl SessionPool {
    pub fn new(
        factory: Arc<SessionFactory>,
        idle_timeout: Duration,
        max_file_bytes: u64,
        limits: PoolLimits,
    ) -> Self {
        SessionPool {
            factory,
            containment: crate::run::containment::Containment::Off,
            caller_env: Arc::default(),
            idle_timeout,
            max_file_bytes,
            limits,
            state: tokio::sync::Mutex::new(State::default()),
            holds: std::sync::Mutex::new(HashSet::new()),
            tracker: TaskTracker::new(),
            freed: tokio::sync::Notify::new(),
        }
    }

    /// The pool with its background work on `tracker` (default: a tracker of its own, for tests
    /// of the pool alone; the server passes the one shutdown waits for).
    /// The model the pool's sessions call.
    pub fn model(&self) -> String {
        self.factory.model()
    }

    pub fn with_tracker(mut self, tracker: TaskTracker) -> Self {
        self.tracker = tracker;
        self
    }

    /// The pool with callers' sessions contained this way (default: [`Containment::Off`], for
    /// tests of the pool alone; the server always sets it).
    ///
    /// [`Containment::Off`]: crate::run::containment::Containment::Off
    pub fn with_containment(mut self, containment: crate::run::containment::Containment) -> Self {
        self.containment = containment;
        self
    }

    /// The pool with callers' tools given this environment (default: an empty one).
    pub fn with_caller_env(mut self, env: volcanic_core::exec::ExecEnv) -> Self {
        self.caller_env = Arc::new(env);
        self
    }

    /// Reserves the context for one task. When its session is open and idle, it is claimed at
    /// once ([`Reservation::Ready`]); otherwise the context is held, the idle sessions in the way
    /// of the bounds are taken out of the pool, and [`Opening::open`] does the slow part (closing
    /// those, opening or resuming the session) later, so a task can be acknowledged first.
    ///
    /// # Errors
    /// [`Error::ContextBusy`] when a task runs in the context; [`Error::CallerSessionLimit`] or
    /// [`Error::SessionLimit`] when a bound is reached and every session in the way is busy.
    pub async fn reserve(
        self: &Arc<Self>,
        caller: &Caller,
        context_id: &str,
    ) -> Result<Reservation, Error> {
        let scope = scope(caller, context_id);
        let mut waits = 0;
        loop {
            let mut state = self.state.lock().await;
            if self.is_held(&scope) {
                return Err(Error::ContextBusy);
            }
            if let Some(entry) = state.entries.get_mut(&scope) {
                if !entry.is_idle() {
                    return Err(Error::ContextBusy);
                }
                entry.claimed = true;
                entry.last_used = Instant::now();
                return Ok(Reservation::Ready(Claim {
                    session: entry.session.clone(),
                    channel: entry.channel.clone(),
                    scope,
                }));
            }
            // The context's session is still closing (evicted a moment ago): its journal lock
            // is released once the close ends.
            if let Some(mut closed) = state.closing.get(&scope).cloned() {
                drop(state);
                waits += 1;
                if waits > CLOSE_WAITS {
                    return Err(Error::ContextBusy);
                }
                // An error means the closer is gone, which also means the close is over.
                let _ = closed.wait_for(|done| *done).await;
                continue;
            }
            let victims = self.make_room(&state, caller)?;
            let evicted = state.take_for_closing(victims);
            // Hold the scope while its session opens, without holding the pool: resuming a long
            // journal must not stall every other context. Others see the context as busy.
            state.opening.insert(scope.clone());
            self.holds
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(scope.clone());
            return Ok(Reservation::Pending(Opening {
                pool: self.clone(),
                caller: caller.clone(),
                scope,
                evicted,
                settled: false,
            }));
        }
    }

    /// Claims the context's session, opening or resuming it: [`SessionPool::reserve`], then
    /// [`Opening::open`] when needed.
    #[cfg(test)]
    pub async fn claim(
        self: &Arc<Self>,
        caller: &Caller,
        context_id: &str,
        extension: impl FnOnce(&Arc<A2aChatChannel>) -> Arc<dyn Extension>,
    ) -> Result<Claim, Error> {
        match self.reserve(caller, context_id).await? {
            Reservation::Ready(claim) => Ok(claim),
            Reservation::Pending(opening) => opening.open(extension).await,
        }
    }

    /// Gives up a reserved context whose session was never opened: the sessions taken out for
    /// it are closed (they were idle and are out of the pool already) and the context is free.
    async fn abandon(&self, scope: String, evicted: Vec<Closing>) {
        self.close_sessions(evicted, "to make room").await;
        let mut state = self.state.lock().await;
        self.end_opening(&mut state, &scope);
    }

    /// Ends an opening's hold of its scope; called under the pool's lock.
    fn end_opening(&self, state: &mut State, scope: &str) {
        if state.opening.remove(scope) {
            self.holds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(scope);
            self.freed.notify_waiters();
        }
    }

    /// Completes once a context may have become free after this call ([`SessionPool::release`],
    /// [`SessionPool::release_hold`], an opening's end). Enable it before looking at the
    /// context, so a release between the look and the wait is not missed.
    pub fn freed(&self) -> tokio::sync::futures::Notified<'_> {
        self.freed.notified()
    }

    /// The idle sessions to close so that one more session of `caller` fits both bounds.
    ///
    /// # Errors
    /// [`Error::CallerSessionLimit`] or [`Error::SessionLimit`] when a bound is reached and
    /// every session in the way is busy.
    fn make_room(&self, state: &State, caller: &Caller) -> Result<Vec<String>, Error> {
        let prefix = caller_prefix(caller);
        let mut victims = Vec::new();
        if state.open_count(&prefix) >= self.limits.max_per_caller {
            match state.lru_idle(&prefix, &victims) {
                Some(victim) => victims.push(victim),
                None => {
                    return Err(Error::CallerSessionLimit { limit: self.limits.max_per_caller });
                }
            }
        }
        if state.open_count("") - victims.len() >= self.limits.max_open {
            match state.lru_idle("", &victims) {
                Some(victim) => victims.push(victim),
                None => {
                    return Err(Error::SessionLimit { limit: self.limits.max_open });
                }
            }
        }
        Ok(victims)
    }

    /// Closes sessions taken out of the pool, then tells claims waiting on them. A session
    /// whose journal a barrier already covered (every run's last write does) closes here; the
    /// others close off the async threads, since their close flushes the journal.
    async fn close_sessions(&self, closing: Vec<Closing>, why: &'static str) {
        if closing.is_empty() {
            return;
        }
        let mut to_flush: Vec<(String, Session)> = Vec::new();
        for c in &closing {
            match c.session.close_if_durable() {
                Some(closed) => log_closed(&c.scope, why, closed),
                None => to_flush.push((c.scope.clone(), c.session.clone())),
            }
        }
        if !to_flush.is_empty() {
            let closed = tokio::task::spawn_blocking(move || {
                for (scope, session) in to_flush {
                    log_closed(&scope, why, session.close());
                }
            })
            .await;
            if let Err(err) = closed {
                tracing::error!(error = %err, "closing A2A sessions failed on the blocking pool");
            }
        }
        let mut state = self.state.lock().await;
        for closing in closing {
            state.closing.remove(&closing.scope);
            closing.done.send_replace(true);
        }
    }

    /// Holds a context that runs nothing; `None` when it is claimed or held.
    pub async fn try_hold(&self, caller: &Caller, context_id: &str) -> Option<Hold> {
        let scope = scope(caller, context_id);
        let state = self.state.lock().await;
        if state.entries.get(&scope).is_some_and(|e| !e.is_idle()) {
            return None;
        }
        let mut holds = self.holds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !holds.insert(scope.clone()) {
            return None;
        }
        Some(Hold { scope })
    }

    /// Holds the context of session `scope` for retention: `None` when it is held, or its
    /// session is open, opening or closing (`HoldIf::Closed`), or claimed or running
    /// (`HoldIf::Idle`). While held, no task starts in the context.
    pub(crate) async fn try_hold_scope(&self, scope: &str, when: HoldIf) -> Option<Hold> {
        let state = self.state.lock().await;
        let in_use = match when {
            HoldIf::Idle => state.entries.get(scope).is_some_and(|e| !e.is_idle()),
            HoldIf::Closed => {
                state.entries.contains_key(scope)
                    || state.opening.contains(scope)
                    || state.closing.contains_key(scope)
            }
        };
        if in_use {
            return None;
        }
        let mut holds = self.holds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !holds.insert(scope.to_string()) {
            return None;
        }
        Some(Hold { scope: scope.to_string() })
    }

    /// Ends a hold.
    pub async fn release_hold(&self, hold: Hold) {
        // Taken so a claim waiting on the pool's lock sees the release in order.
        let _state = self.state.lock().await;
        self.holds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&hold.scope);
        self.freed.notify_waiters();
    }

    fn is_held(&self, scope: &str) -> bool {
        self.holds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(scope)
    }

    /// Gives a claimed session back.
    pub async fn release(&self, scope: &str) {
        if let Some(entry) = self.state.lock().await.entries.get_mut(scope) {
            entry.claimed = false;
            entry.last_used = Instant::now();
        }
        self.freed.notify_waiters();
    }

    /// Closes sessions idle for longer than the timeout; returns how many.
    pub async fn evict_idle(&self) -> usize {
        let closing = {
            let mut state = self.state.lock().await;
            let now = Instant::now();
            let idle: Vec<String> = state
                .entries
                .iter()
                .filter(|(_, e)| {
                    e.is_idle() && now.duration_since(e.last_used) >= self.idle_timeout
                })
                .map(|(scope, _)| scope.clone())
                .collect();
            state.take_for_closing(idle)
        };
        let count = closing.len();
        self.close_sessions(closing, "idle").await;
        count
    }

    /// Closes the sessions of `scopes` that are open and idle (not claimed, not running, not
    /// held), whatever their idle time: retention is about to remove their folders. Returns
    /// once they are closed.
    pub(crate) async fn close_idle(&self, scopes: &[String]) {
        let closing = {
            let mut state = self.state.lock().await;
            let idle: Vec<String> = scopes
                .iter()
                .filter(|scope| {
                    state.entries.get(scope.as_str()).is_some_and(Entry::is_idle)
                        && !self.is_held(scope)
                })
                .cloned()
                .collect();
            state.take_for_closing(idle)
        };
        self.close_sessions(closing, "retention").await;
    }

    /// Evicts idle sessions periodically until `shutdown` fires.
    pub async fn run_eviction(self: Arc<Self>, shutdown: CancellationToken) {
        let period =
            (self.idle_timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(60));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => { self.evict_idle().await; }
                () = shutdown.cancelled() => return,
            }
        }
    }

    /// Waits until every run of the pool's factory has ended (see
    /// [`SessionFactory::close_runs`]); shutdown bounds it.
    pub async fn close_runs(&self) {
        self.factory.close_runs().await;
    }

    /// Closes every session that is not running (shutdown).
    pub async fn close_all(&self) {
        let closing = {
            let mut state = self.state.lock().await;
            let scopes: Vec<String> = state.entries.keys().cloned().collect();
            state.take_for_closing(scopes)
        };
        self.close_sessions(closing, "shutdown").await;
    }

    /// How many sessions are open or opening.
    #[cfg(test)]
    async fn open_sessions(&self) -> usize {
        self.state.lock().await.open_count("")
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use volcanic_core::provider::faux::FauxProvider;

    use super::*;
    use crate::A2aError;
    use crate::auth::{A2aWorkspace, CallerMode};

    struct Nothing;

    impl Extension for Nothing {
        fn name(&self) -> &str {
            "nothing"
        }

        fn register(&self, _registrar: &mut volcanic_core::Registrar) {}
    }

    const LIMITS: PoolLimits = PoolLimits { max_open: 256, max_per_caller: 32 };

    fn caller(path: PathBuf) -> Caller {
        named_caller(path, "bot")
    }

    fn named_caller(path: PathBuf, name: &str) -> Caller {
        Caller {
            name: name.into(),
            mode: CallerMode::Isolated,
            tier: crate::auth::CallerTier::Workspace,
            approval: Default::default(),
            limits: Default::default(),
            workspace: Arc::new(A2aWorkspace {
                path,
                scope_prefix: "t".into(),
                owner_id: "o".into(),
            }),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn idle_sessions_are_closed_after_the_timeout_and_reopen() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let factory =
            Arc::new(SessionFactory::builder(Arc::new(FauxProvider::new()), state.path()).build());
        let pool = Arc::new(SessionPool::new(factory, Duration::from_secs(60), 1024, LIMITS));
        let caller = caller(ws.path().to_path_buf());
        let extension = |_: &Arc<A2aChatChannel>| -> Arc<dyn Extension> { Arc::new(Nothing) };

        let claim = pool.claim(&caller, "ctx", extension).await.unwrap();
        assert_eq!(claim.scope, "t-a2a-bot_ctx");
        assert!(matches!(pool.claim(&caller, "ctx", extension).await, Err(Error::ContextBusy)));
        pool.release(&claim.scope).await;
        assert_eq!(pool.evict_idle().await, 0, "not idle long enough");
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(pool.evict_idle().await, 1);
        // Closed means the scope is free again: it reopens (resuming the journal).
        let again = pool.claim(&caller, "ctx", extension).await.unwrap();
        assert_eq!(again.session.id(), claim.session.id());
    }

    fn pool(state: &std::path::Path, max_open: usize, max_per_caller: usize) -> Arc<SessionPool> {
        let factory =
            Arc::new(SessionFactory::builder(Arc::new(FauxProvider::new()), state).build());
        Arc::new(SessionPool::new(
            factory,
            Duration::from_secs(60),
            1024,
            PoolLimits { max_open, max_per_caller },
        ))
    }

    fn nothing(_: &Arc<A2aChatChannel>) -> Arc<dyn Extension> {
        Arc::new(Nothing)
    }

    fn busy_message(result: Result<Claim, Error>) -> String {
        match result.map_err(A2aError::from) {
            Err(A2aError::UnsupportedOperation(message)) => message,
            Err(other) => panic!("expected UnsupportedOperation, got {other:?}"),
            Ok(claim) => panic!("expected a refusal, got a claim of {}", claim.scope),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn pool_over_the_caller_bound_closes_the_least_recently_used_idle_session() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let pool = pool(state.path(), 256, 2);
        let caller = caller(ws.path().to_path_buf());
        let other = named_caller(ws.path().to_path_buf(), "other");

        let a = pool.claim(&caller, "a", nothing).await.unwrap();
        pool.release(&a.scope).await;
        tokio::time::advance(Duration::from_secs(1)).await;
        let b = pool.claim(&caller, "b", nothing).await.unwrap();
        pool.release(&b.scope).await;
        tokio::time::advance(Duration::from_secs(1)).await;
        // Another caller's sessions do not count against this caller's bound.
        let o = pool.claim(&other, "o", nothing).await.unwrap();
        pool.release(&o.scope).await;
        tokio::time::advance(Duration::from_secs(1)).await;
        // Using a again makes b the least recently used.
        let a = pool.claim(&caller, "a", nothing).await.unwrap();
        pool.release(&a.scope).await;
        assert_eq!(pool.open_sessions().await, 3);

        let c = pool.claim(&caller, "c", nothing).await.unwrap();
        assert_eq!(pool.open_sessions().await, 3, "b was closed to make room for c");
        let scopes: std::collections::BTreeSet<String> =
            pool.state.lock().await.entries.keys().cloned().collect();
        let expected: std::collections::BTreeSet<String> =
            ["t-a2a-bot_a", "t-a2a-bot_c", "t-a2a-other_o"].map(String::from).into();
        assert_eq!(scopes, expected);
        assert!(b.session.close().is_ok(), "a closed session closes again without error");
        pool.release(&c.scope).await;
    }

    #[tokio::test(start_paused = true)]
    async fn pool_over_the_total_bound_closes_an_idle_session_of_any_caller() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let pool = pool(state.path(), 2, 32);
        let caller = caller(ws.path().to_path_buf());
        let other = named_caller(ws.path().to_path_buf(), "other");

        let o = pool.claim(&other, "o", nothing).await.unwrap();
        pool.release(&o.scope).await;
        tokio::time::advance(Duration::from_secs(1)).await;
        let _a = pool.claim(&caller, "a", nothing).await.unwrap();
        let _b = pool.claim(&caller, "b", nothing).await.unwrap();
        let scopes: std::collections::BTreeSet<String> =
            pool.state.lock().await.entries.keys().cloned().collect();
        let expected: std::collections::BTreeSet<String> =
            ["t-a2a-bot_a", "t-a2a-bot_b"].map(String::from).into();
        assert_eq!(scopes, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn pool_with_every_session_busy_refuses_a_new_context_and_names_the_limit() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let caller = caller(ws.path().to_path_buf());
        let other = named_caller(ws.path().to_path_buf(), "other");

        let per_caller = pool(state.path(), 256, 2);
        let a = per_caller.claim(&caller, "a", nothing).await.unwrap();
        let _b = per_caller.claim(&caller, "b", nothing).await.unwrap();
        assert_eq!(
            busy_message(per_caller.claim(&caller, "c", nothing).await),
            "too many open conversations for this caller (limit 2, all busy), retry when a task ends"
        );
        // Another caller is not affected; and once a is released, c takes its place.
        let o = per_caller.claim(&other, "o", nothing).await.unwrap();
        per_caller.release(&o.scope).await;
        per_caller.release(&a.scope).await;
        per_caller.claim(&caller, "c", nothing).await.unwrap();
        assert_eq!(per_caller.open_sessions().await, 3);
        per_caller.close_all().await;

        let state = tempfile::tempdir().unwrap();
        let total = pool(state.path(), 2, 32);
        let _a = total.claim(&caller, "a", nothing).await.unwrap();
        let _o = total.claim(&other, "o", nothing).await.unwrap();
        assert_eq!(
            busy_message(total.claim(&caller, "c", nothing).await),
            "too many open conversations on this server (limit 2, all busy), retry when a task ends"
        );
        assert_eq!(total.open_sessions().await, 2);
    }

    #[tokio::test]
    async fn an_unopened_reservation_gives_its_context_and_its_room_back() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let pool = pool(state.path(), 256, 1);
        let caller = caller(ws.path().to_path_buf());

        let a = pool.claim(&caller, "a", nothing).await.unwrap();
        pool.release(&a.scope).await;
        // b takes a's room (a is taken out at once, closed when b opens or gives up).
        let Ok(Reservation::Pending(b)) = pool.reserve(&caller, "b").await else {
            panic!("b has no session yet");
        };
        assert_eq!(
            busy_message(pool.claim(&caller, "b", nothing).await),
            Error::ContextBusy.to_string()
        );
        b.abandon().await;
        assert!(a.session.prompt("still open?").is_err(), "a was closed for b");
        assert_eq!(pool.open_sessions().await, 0);

        // Dropped without a word, a reservation gives its context back on the runtime.
        let Ok(Reservation::Pending(b)) = pool.reserve(&caller, "b").await else {
            panic!("b has no session yet");
        };
        drop(b);
        let mut claimed = None;
        for _ in 0..200 {
            match pool.claim(&caller, "b", nothing).await {
                Ok(claim) => {
                    claimed = Some(claim);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
        let b = claimed.expect("the dropped reservation freed its context within 2 s");
        assert_eq!(b.scope, "t-a2a-bot_b");
        assert_eq!(pool.open_sessions().await, 1);
    }

    #[tokio::test]
    async fn pool_evicted_context_resumes_its_conversation() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let pool = pool(state.path(), 1, 1);
        let caller = caller(ws.path().to_path_buf());
        let wait = Duration::from_secs(30);

        let first = pool.claim(&caller, "a", nothing).await.unwrap();
        let run = first.session.prompt("remember the word volcano").unwrap();
        tokio::time::timeout(wait, run.settled()).await.unwrap();
        let before = first.session.messages();
        assert!(!before.is_empty());
        pool.release(&first.scope).await;

        // A second context pushes the first one out (its journal is closed) ...
        let second = pool.claim(&caller, "b", nothing).await.unwrap();
        assert!(first.session.prompt("still open?").is_err(), "the evicted session is closed");
        pool.release(&second.scope).await;
        // ... and claiming the first again resumes it from its journal.
        let again = tokio::time::timeout(wait, pool.claim(&caller, "a", nothing)).await.unwrap();
        let again = again.unwrap();
        assert_eq!(again.session.id(), first.session.id());
        assert_eq!(again.session.messages(), before);
    }
}
