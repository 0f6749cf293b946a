//! Retention: what the A2A server removes so that an assistant can run for a year unattended
//! (docs/a2a.md, "Retention").
//!
//! - By age (`age`): settled tasks (completed, failed, canceled, rejected) whose status last
//!   changed longer ago than `A2A__Retention__TaskDays`, then the session of a context no task
//!   uses any more, with the inbox files its conversation received.
//! - By size (`size`): each workspace's callers' session folders and inbox files over
//!   `A2A__Retention__MaxBytes`, least recently used first.
//!
//! It runs in the background on the service's tracker, a round at start, one per
//! `A2A__Retention__Interval` and one whenever asked ([`RoundRequests`]), until the service's
//! shutdown token fires; in batches of at most [`BATCH`] removals, with a short pause between
//! them unless the round is behind (it finds tasks a round before it should have taken); what a
//! request may wait for (a context's hold, the index lock) is held for one batch's file work at
//! most. The age pass works from the task index (settled tasks by status time, oldest first)
//! and the contexts of the tasks it removed; it lists the session folders only in the first
//! round and then once a week of the server's clock, for sessions no task uses any more. Working,
//! input-required and auth-required tasks, the sessions they need, sessions open in the pool and
//! the owner's own sessions are never removed.
//!
//! Crash safety: a task file goes with one `unlink` before anything that depends on it, and a
//! session folder leaves `sessions/` with one rename into a trash folder before its inbox files
//! and its contents are removed; a process killed at any point leaves whole tasks, and what a
//! round left behind (a session no task uses, a folder in the trash) is finished by the next.
//!
//! It knows nothing of requests or the wire; the server hands it the parts it needs.

mod age;
pub mod disk;
pub mod options;
mod size;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::auth::{A2aWorkspace, CallerDirectory};
use crate::push::PushSender;
use crate::run::pool::SessionPool;
use crate::task::AcceptedMessages;
use crate::task::retain;
use crate::task::store::TaskStore;

pub use disk::{DiskUse, disk_use};
pub use options::RetentionOptions;

/// Most tasks, sessions or files removed in one batch.
pub(crate) const BATCH: usize = 64;

/// The pause between batches of a round that is not behind, so that it leaves the blocking pool
/// and the disk to requests.
const BATCH_PAUSE: Duration = Duration::from_millis(5);

/// How often (by the server's clock) the age pass lists the session folders for sessions no
/// task uses, besides the first round after start.
const ORPHAN_SWEEP: chrono::TimeDelta = chrono::TimeDelta::days(7);

/// A request for a round now: answered with what it removed.
type RoundRequest = tokio::sync::oneshot::Sender<Removed>;

/// The way to ask retention's background loop for a round now: the server keeps the sender,
/// the loop takes the receiver when it starts.
pub(crate) struct RoundRequests {
    sender: tokio::sync::mpsc::Sender<RoundRequest>,
    receiver: std::sync::Mutex<Option<tokio::sync::mpsc::Receiver<RoundRequest>>>,
}

impl Default for RoundRequests {
    fn default() -> Self {
        let (sender, receiver) = tokio::sync::mpsc::channel(1);
        RoundRequests { sender, receiver: std::sync::Mutex::new(Some(receiver)) }
    }
}

impl RoundRequests {
    /// The receiver, for the loop (`None` once taken).
    pub(crate) fn take_receiver(&self) -> Option<tokio::sync::mpsc::Receiver<RoundRequest>> {
        self.receiver.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// Asks for a round and waits for it; `None` when no loop runs (retention off, the server
    /// not serving or stopped).
    pub(crate) async fn request(&self) -> Option<Removed> {
        let (done, answer) = tokio::sync::oneshot::channel();
        self.sender.send(done).await.ok()?;
        answer.await.ok()
    }
}

/// What retention works on: the server's parts, handed over when it is built.
pub(crate) struct Retention {
    pub options: RetentionOptions,
    /// A caller folder counts for at most this much towards `max_bytes`
    /// (`A2A__MaxInboxBytesPerCaller`): one caller's session filling its own folder cannot make
    /// the cap prune the others' conversations.
    pub inbox_share: u64,
    pub directory: Arc<dyn CallerDirectory>,
    pub store: Arc<TaskStore>,
    pub pool: Arc<SessionPool>,
    pub accepted: Arc<AcceptedMessages>,
    pub push: Arc<PushSender>,
    pub state_dir: PathBuf,
    /// "Now" for task ages (the server's clock: the system's, or a test's).
    pub clock: crate::usage::Clock,
    /// Whether a task's run is in progress in this process.
    pub is_running: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    /// Told after tasks were removed (wakes long polls of tasks at rest).
    pub on_removed: Arc<dyn Fn() + Send + Sync>,
    /// Sessions whose last task went while they were open: (workspace, caller, context), tried
    /// again each round until they are closed. After a restart the age of their journal brings
    /// them back (`age`'s sweep of sessions no task uses).
    pub deferred: std::sync::Mutex<HashSet<(PathBuf, String, String)>>,
    /// When (by the server's clock) the age pass last listed the session folders; `None` before
    /// the first round.
    pub orphans_swept: std::sync::Mutex<Option<chrono::DateTime<chrono::Utc>>>,
}

/// When [`Retention::remove_sessions`] may take a session, asked of the tasks on file under
/// its context's hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MayGo {
    /// No task uses its context (retention by age).
    Unused,
    /// No task of its context is unsettled (the size cap).
    Settled,
}

/// A session [`Retention::remove_sessions`] is asked to remove.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SessionRef {
    pub caller: String,
    pub context_id: String,
}

/// What a round removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    pub tasks: usize,
    pub sessions: usize,
    pub inbox_files: usize,
    pub bytes: u64,
}

impl std::ops::AddAssign for Removed {
    fn add_assign(&mut self, other: Removed) {
        self.tasks += other.tasks;
        self.sessions += other.sessions;
        self.inbox_files += other.inbox_files;
        self.bytes = self.bytes.saturating_add(other.bytes);
    }
}

impl Retention {
    /// Runs a round now, then one per interval and one per request on `requests`, until
    /// `shutdown` fires (a round in progress stops between batches). Rounds never overlap.
    /// Returns at once when retention is off (requests then get no answer).
    pub(crate) async fn run(
        self,
        shutdown: CancellationToken,
        requests: Option<tokio::sync::mpsc::Receiver<RoundRequest>>,
    ) {
        if !self.options.enabled {
            tracing::info!("retention is off: tasks, sessions and inbox files are kept");
            return;
        }
        let mut requests = requests;
        let mut tick = tokio::time::interval(self.options.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let asked = async {
                match requests.as_mut() {
                    Some(receiver) => receiver.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tick.tick() => { self.round(&shutdown).await; }
                request = asked => match request {
                    Some(done) => {
                        let removed = self.round(&shutdown).await;
                        // The asker may have given up waiting: nothing to tell then.
                        let _ = done.send(removed);
                    }
                    None => requests = None,
                },
                () = shutdown.cancelled() => return,
            }
        }
    }

    /// One round over every workspace: the trash first, then by age, then by size.
    pub(crate) async fn round(&self, shutdown: &CancellationToken) -> Removed {
        let started = std::time::Instant::now();
        let workspaces = self.directory.workspaces();
        let mut removed = self.sweep_trash(&workspaces).await;
        for workspace in &workspaces {
            if shutdown.is_cancelled() {
                break;
            }
            if let Some(age) = self.options.task_age {
                removed += age::by_age(self, workspace, age, shutdown).await;
            }
            if let Some(max) = self.options.max_bytes {
                removed += size::by_size(self, workspace, max, shutdown).await;
            }
        }
        if removed == Removed::default() {
            tracing::debug!(
                secs = started.elapsed().as_secs_f64(),
                "retention round removed nothing"
            );
        } else {
            tracing::info!(
                tasks = removed.tasks,
                sessions = removed.sessions,
                inbox_files = removed.inbox_files,
                bytes = removed.bytes,
                secs = started.elapsed().as_secs_f64(),
                "retention removed old A2A records"
            );
        }
        removed
    }

    /// Finishes the session folders a round (of this process or one killed before) left in the
    /// trash: their inbox files, when the workspace they belong to is still served, then them.
    async fn sweep_trash(&self, workspaces: &[A2aWorkspace]) -> Removed {
        let owners: Vec<(String, PathBuf)> = workspaces
            .iter()
            .map(|w| (crate::run::pool::callers_scope_prefix(w), w.path.clone()))
            .collect();
        let state_dir = self.state_dir.clone();
        blocking(move || {
            let mut removed = Removed::default();
            for trashed in disk::trashed(&state_dir) {
                let owner = owners.iter().find_map(|(prefix, path)| {
                    disk::parse_scope(prefix, &trashed.scope).map(|(caller, _)| (path, caller))
                });
                let owner = owner.as_ref().map(|(path, caller)| (path.as_path(), caller.as_str()));
                match disk::finish_trashed(&trashed.path, owner) {
                    Ok(finished) => {
                        removed.sessions += 1;
                        removed.inbox_files += finished.inbox_files;
                        removed.bytes = removed.bytes.saturating_add(finished.bytes);
                    }
                    Err(err) => tracing::warn!(
                        folder = %trashed.path.display(),
                        error = %err,
                        "retention cannot remove a session folder"
                    ),
                }
            }
            removed
        })
        .await
        .unwrap_or_default()
    }

    /// Removes the session folders of `sessions` in `workspace` that are closed (for
    /// `MayGo::Unused` the pool closes those open and idle first) and that `may_go` allows (asked under each context's hold): out of `sessions/` in one rename
    /// each, then their inbox files and their contents. Returns what went, and the sessions that
    /// were open (in the pool or another process) and so were left.
    async fn remove_sessions(
        &self,
        workspace: &A2aWorkspace,
        sessions: Vec<SessionRef>,
        may_go: MayGo,
    ) -> (Removed, Vec<SessionRef>) {
        let prefix = crate::run::pool::callers_scope_prefix(workspace);
        let scopes: Vec<String> = sessions
            .iter()
            .map(|session| format!("{prefix}{}_{}", session.caller, session.context_id))
            .collect();
        // By age, a conversation whose tasks are all gone goes, open and idle or not: those
        // close now rather than at the pool's idle timeout. The size cap never takes an open one.
        if may_go == MayGo::Unused {
            self.pool.close_idle(&scopes).await;
        }
        let mut busy = Vec::new();
        let mut held = Vec::new();
        for (session, scope) in sessions.into_iter().zip(scopes) {
            match self.pool.try_hold_scope(&scope, crate::run::pool::HoldIf::Closed).await {
                Some(hold) => held.push((hold, scope, session)),
                None => busy.push(session),
            }
        }
        if held.is_empty() {
            return (Removed::default(), busy);
        }
        let targets: Vec<(String, SessionRef)> =
            held.iter().map(|(_, scope, session)| (scope.clone(), session.clone())).collect();
        let (store, path, state_dir) =
            (self.store.clone(), workspace.path.clone(), self.state_dir.clone());
        let moved = blocking(move || {
            targets
                .into_iter()
                .map(|(scope, session)| {
                    let used =
                        retain::context_use(&store, &path, &session.caller, &session.context_id);
                    let allowed = match may_go {
                        MayGo::Unused => used == retain::ContextUse::Unused,
                        MayGo::Settled => used != retain::ContextUse::Unsettled,
                    };
                    let moved = if allowed {
                        disk::move_to_trash(&state_dir, &scope)
                    } else {
                        Ok(disk::Moved::Gone)
                    };
                    (scope, session, moved)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (hold, _, _) in held {
            self.pool.release_hold(hold).await;
        }
        let mut trashed = Vec::new();
        for (scope, session, moved) in moved {
            match moved {
                Ok(disk::Moved::To(path)) => trashed.push((path, session.caller)),
                Ok(disk::Moved::InUse) => busy.push(session),
                Ok(disk::Moved::Gone) => {}
                Err(err) => {
                    tracing::warn!(scope = %scope, error = %err, "retention cannot move a session folder");
                }
            }
        }
        let workspace_path = workspace.path.clone();
        let removed = blocking(move || {
            let mut removed = Removed::default();
            for (path, caller) in trashed {
                removed.sessions += 1;
                match disk::finish_trashed(&path, Some((&workspace_path, &caller))) {
                    Ok(finished) => {
                        removed.inbox_files += finished.inbox_files;
                        removed.bytes = removed.bytes.saturating_add(finished.bytes);
                    }
                    // Out of `sessions/` already: the next round's sweep of the trash finishes it.
                    Err(err) => tracing::warn!(folder = %path.display(), error = %err, "retention cannot remove a session folder"),
                }
            }
            removed
        })
        .await
        .unwrap_or_default();
        (removed, busy)
    }

    /// Forgets everything outside the store that pointed at removed tasks: the safe-retry
    /// records, and long polls waiting on them.
    fn forget_tasks(&self, workspace: &A2aWorkspace, removed: &HashMap<String, HashSet<String>>) {
        if removed.is_empty() {
            return;
        }
        self.accepted.forget_tasks(&workspace.path, removed);
        (self.on_removed)();
    }
}

/// Runs blocking work on the blocking pool; `None` (logged) when it panicked.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => Some(done),
        Err(err) => {
            tracing::error!(error = %err, "retention work failed on the blocking pool");
            None
        }
    }
}

/// Waits [`BATCH_PAUSE`], or only lets other tasks run when the round is `behind`; `false` when
/// `shutdown` fired meanwhile.
async fn pause(shutdown: &CancellationToken, behind: bool) -> bool {
    if behind {
        tokio::task::yield_now().await;
        return !shutdown.is_cancelled();
    }
    tokio::select! {
        () = tokio::time::sleep(BATCH_PAUSE) => !shutdown.is_cancelled(),
        () = shutdown.cancelled() => false,
    }
}
