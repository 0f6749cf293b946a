//! What retention (`crate::retention`) asks of the task store: a workspace's old settled tasks
//! (from the index, oldest first), how the tasks on file use a context, and the removal of one
//! task file together with what the store keeps of it (its index entry, its settled-task cache
//! entry, its push secrets).
//!
//! It decides neither when nor which tasks go, and knows nothing of runs, sessions or the pool.
//! Everything here is blocking (the index lock may be held by a folder scan): call it on the
//! blocking pool.

use std::io;
use std::path::Path;
use std::sync::PoisonError;
use std::time::Instant;

use chrono::{DateTime, Utc};

use super::path::task_path;
use super::read::read_task_file;
use super::store::TaskStore;

/// A settled task retention may remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OldTask {
    pub id: String,
    pub caller: String,
    pub context_id: String,
    /// Its status timestamp, as the index knows it.
    pub at: Option<DateTime<Utc>>,
}

/// How the tasks on file use a caller's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContextUse {
    /// No task of the caller is in the context.
    Unused,
    /// Every task in it is settled.
    Settled,
    /// At least one task in it is submitted, working, input-required or auth-required: its
    /// session is still needed.
    Unsettled,
}

/// Whether a task in `state` is settled for retention: completed, failed, canceled or rejected.
/// Working, input-required and auth-required tasks (and submitted ones) are never removed.
pub(crate) fn is_settled(state: &a2a::TaskState) -> bool {
    match state {
        a2a::TaskState::Completed
        | a2a::TaskState::Failed
        | a2a::TaskState::Canceled
        | a2a::TaskState::Rejected => true,
        a2a::TaskState::Unspecified
        | a2a::TaskState::Submitted
        | a2a::TaskState::Working
        | a2a::TaskState::InputRequired
        | a2a::TaskState::AuthRequired => false,
    }
}

/// Brings `workspace`'s index up to date with its task folder (a listing when it changed).
pub(crate) fn refresh(store: &TaskStore, workspace: &Path) {
    let index = store.index(workspace);
    index.lock().unwrap_or_else(PoisonError::into_inner).ensure_current(Instant::now());
}

/// Up to `limit` settled tasks of `workspace` whose status changed before `cutoff`, oldest
/// first, leaving out those `skip` names (tasks a round already passed over).
pub(crate) fn old_settled(
    store: &TaskStore,
    workspace: &Path,
    cutoff: DateTime<Utc>,
    limit: usize,
    skip: &std::collections::HashSet<String>,
) -> Vec<OldTask> {
    let index = store.index(workspace);
    let index = index.lock().unwrap_or_else(PoisonError::into_inner);
    index
        .older_than(cutoff, limit.saturating_add(skip.len()), is_settled)
        .into_iter()
        .filter(|(id, _)| !skip.contains(id))
        .take(limit)
        .map(|(id, summary)| OldTask {
            id,
            caller: summary.caller,
            context_id: summary.context_id,
            at: summary.timestamp,
        })
        .collect()
}

/// How `caller`'s tasks on file use `context_id` in `workspace`, as the index knows them.
pub(crate) fn context_use(
    store: &TaskStore,
    workspace: &Path,
    caller: &str,
    context_id: &str,
) -> ContextUse {
    let index = store.index(workspace);
    let states =
        index.lock().unwrap_or_else(PoisonError::into_inner).context_states(caller, context_id);
    if states.is_empty() {
        ContextUse::Unused
    } else if states.iter().all(is_settled) {
        ContextUse::Settled
    } else {
        ContextUse::Unsettled
    }
}

/// Removes `task`'s file when, read again now, it is still `task.caller`'s, settled, and its
/// status changed before `cutoff`; then forgets it in the index, the settled-task cache and the
/// push secrets. Returns the bytes the file took, or `None` when it was kept (changed since the
/// index saw it, or gone). The file goes with one `unlink`: a reader sees the whole task or no
/// task, and a process killed at any point leaves one or the other.
///
/// # Errors
/// The file cannot be read or removed.
pub(crate) fn remove_task(
    store: &TaskStore,
    workspace: &Path,
    task: &OldTask,
    cutoff: DateTime<Utc>,
) -> io::Result<Option<u64>> {
    let (cache, cap) = store.cache_and_cap();
    let path = task_path(workspace, &task.id);
    let Some(file) = read_task_file(&path, &task.id, cap)? else {
        return Ok(None);
    };
    let old = file.task.status.timestamp.is_some_and(|at| at < cutoff);
    if file.caller != task.caller || !is_settled(&file.task.status.state) || !old {
        return Ok(None);
    }
    let bytes = std::fs::symlink_metadata(&path).map(|meta| meta.len()).unwrap_or(0);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    }
    store.index(workspace).lock().unwrap_or_else(PoisonError::into_inner).forget(&task.id);
    cache.forget(workspace, &task.id);
    store.push_secrets().record(workspace, &task.id, &[]);
    Ok(Some(bytes))
}
