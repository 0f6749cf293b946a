//! The session pool: one agent session per (workspace, caller, contextId), opened or resumed on
//! demand, claimed by one task at a time, and closed after `SessionIdleTimeout` without use
//! (closed sessions stay resumable from their journals).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use tokio_util::sync::CancellationToken;
use volcanic_core::{Extension, Session, SessionFactory, SessionOptions};

use crate::auth::Caller;
use crate::error::A2aError;
use crate::extension::A2aChatChannel;

/// The message for a context that already has a task running.
pub const CONTEXT_BUSY: &str = "context busy, retry when the current task ends";

/// The session scope of a caller's context: `<prefix>-a2a-<caller>_<contextId>`. Caller names
/// are `[a-z0-9-]`, so the first `_` separates name and context and no two pairs share a scope.
pub fn scope(caller: &Caller, context_id: &str) -> String {
    format!("{}-a2a-{}_{}", caller.workspace.scope_prefix, caller.name, context_id)
}

struct Entry {
    session: Session,
    channel: Arc<A2aChatChannel>,
    claimed: bool,
    last_used: Instant,
}

/// A context held without a session (CancelTask writing a task file): no task may start in it
/// until the hold is released.
pub struct Hold {
    scope: String,
}

/// A claimed session: the holder runs one task on it, then releases it.
pub struct Claim {
    pub session: Session,
    pub channel: Arc<A2aChatChannel>,
    pub scope: String,
}

/// Open sessions of A2A callers.
pub struct SessionPool {
    factory: Arc<SessionFactory>,
    idle_timeout: Duration,
    max_file_bytes: u64,
    entries: tokio::sync::Mutex<HashMap<String, Entry>>,
    /// Scopes held by [`SessionPool::try_hold`].
    holds: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl SessionPool {
    pub fn new(factory: Arc<SessionFactory>, idle_timeout: Duration, max_file_bytes: u64) -> Self {
        SessionPool {
            factory,
            idle_timeout,
            max_file_bytes,
            entries: tokio::sync::Mutex::new(HashMap::new()),
            holds: std::sync::Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// Claims the context's session, opening or resuming it.
    ///
    /// # Errors
    /// UnsupportedOperation "context busy" when a task runs in the context; Internal when the
    /// session cannot be opened.
    pub async fn claim(
        &self,
        caller: &Caller,
        context_id: &str,
        extension: impl FnOnce() -> Arc<dyn Extension>,
    ) -> Result<Claim, A2aError> {
        let scope = scope(caller, context_id);
        {
            let mut entries = self.entries.lock().await;
            if self.is_held(&scope) {
                return Err(A2aError::UnsupportedOperation(CONTEXT_BUSY.into()));
            }
            if let Some(entry) = entries.get_mut(&scope) {
                if entry.claimed || entry.session.is_running() {
                    return Err(A2aError::UnsupportedOperation(CONTEXT_BUSY.into()));
                }
                entry.claimed = true;
                entry.last_used = Instant::now();
                return Ok(Claim {
                    session: entry.session.clone(),
                    channel: entry.channel.clone(),
                    scope,
                });
            }
            // Hold the scope while its session opens, without holding the pool: resuming a long
            // journal must not stall every other context. Others see the context as busy.
            self.holds
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(scope.clone());
        }
        let channel = Arc::new(A2aChatChannel::new(self.max_file_bytes));
        let options = SessionOptions {
            scope: scope.clone(),
            cwd: caller.workspace.path.clone(),
            channel: Some(channel.clone()),
            extensions: vec![extension()],
        };
        let opened = self.factory.open(options).await;
        let mut entries = self.entries.lock().await;
        self.holds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&scope);
        let session = opened.map_err(|err| {
            tracing::error!(scope = %scope, error = %err, "cannot open an A2A session");
            A2aError::Internal
        })?;
        entries.insert(
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

    /// Holds a context that runs nothing; `None` when it is claimed or held.
    pub async fn try_hold(&self, caller: &Caller, context_id: &str) -> Option<Hold> {
        let scope = scope(caller, context_id);
        let entries = self.entries.lock().await;
        if entries.get(&scope).is_some_and(|e| e.claimed || e.session.is_running()) {
            return None;
        }
        let mut holds = self.holds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !holds.insert(scope.clone()) {
            return None;
        }
        Some(Hold { scope })
    }

    /// Ends a hold.
    pub async fn release_hold(&self, hold: Hold) {
        // Taken so a claim waiting on the entries lock sees the release in order.
        let _entries = self.entries.lock().await;
        self.holds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&hold.scope);
    }

    fn is_held(&self, scope: &str) -> bool {
        self.holds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(scope)
    }

    /// Gives a claimed session back.
    pub async fn release(&self, scope: &str) {
        if let Some(entry) = self.entries.lock().await.get_mut(scope) {
            entry.claimed = false;
            entry.last_used = Instant::now();
        }
    }

    /// Closes sessions idle for longer than the timeout; returns how many.
    pub async fn evict_idle(&self) -> usize {
        let mut entries = self.entries.lock().await;
        let now = Instant::now();
        let idle: Vec<String> = entries
            .iter()
            .filter(|(_, e)| {
                !e.claimed
                    && !e.session.is_running()
                    && now.duration_since(e.last_used) >= self.idle_timeout
            })
            .map(|(scope, _)| scope.clone())
            .collect();
        for scope in &idle {
            if let Some(entry) = entries.remove(scope)
                && let Err(err) = entry.session.close()
            {
                tracing::warn!(scope = %scope, error = %err, "closing an idle session failed");
            }
            tracing::info!(scope = %scope, "idle A2A session closed");
        }
        idle.len()
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

    /// Closes every session that is not running (shutdown).
    pub async fn close_all(&self) {
        let mut entries = self.entries.lock().await;
        for (scope, entry) in entries.drain() {
            if let Err(err) = entry.session.close() {
                tracing::warn!(scope = %scope, error = %err, "closing a session at shutdown failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use volcanic_core::provider::faux::FauxProvider;

    use super::*;
    use crate::auth::{A2aWorkspace, CallerMode};

    struct Nothing;

    impl Extension for Nothing {
        fn name(&self) -> &str {
            "nothing"
        }

        fn register(&self, _registrar: &mut volcanic_core::Registrar) {}
    }

    fn caller(path: PathBuf) -> Caller {
        Caller {
            name: "bot".into(),
            mode: CallerMode::Isolated,
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
        let pool = SessionPool::new(factory, Duration::from_secs(60), 1024);
        let caller = caller(ws.path().to_path_buf());
        let extension = || -> Arc<dyn Extension> { Arc::new(Nothing) };

        let claim = pool.claim(&caller, "ctx", extension).await.unwrap();
        assert_eq!(claim.scope, "t-a2a-bot_ctx");
        assert!(
            matches!(pool.claim(&caller, "ctx", extension).await, Err(A2aError::UnsupportedOperation(m)) if m == CONTEXT_BUSY)
        );
        pool.release(&claim.scope).await;
        assert_eq!(pool.evict_idle().await, 0, "not idle long enough");
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(pool.evict_idle().await, 1);
        // Closed means the scope is free again: it reopens (resuming the journal).
        let again = pool.claim(&caller, "ctx", extension).await.unwrap();
        assert_eq!(again.session.id(), claim.session.id());
    }
}
