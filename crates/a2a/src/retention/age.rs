//! Retention by age: a workspace's settled tasks older than the limit, oldest first, in
//! batches; then the session of each context no task uses any more, with the inbox files its
//! conversation received; then sessions left without a task by an earlier round that was cut
//! short (or by the owner deleting task files), once they too are older than the limit.
//!
//! A task file is removed under a hold of its context in the pool, read again there (still the
//! caller's, settled and old: a task continued or changed since is kept), and before anything
//! that depends on it; a session only once no task on file uses its context, under a hold that
//! also proves it is not open.
//!
//! What it reads is the task index (settled tasks by status time, oldest first) and the contexts
//! of the tasks it removed: a round's cost is what it removes. The session folders are listed
//! (for sessions no task uses) only in the first round after start, which finishes what a
//! process killed mid-round left, and then once per `ORPHAN_SWEEP` of the server's clock.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use super::{BATCH, MayGo, Removed, Retention, SessionRef, blocking, disk, pause};
use crate::auth::A2aWorkspace;
use crate::run::pool::{HoldIf, callers_scope_prefix};
use crate::task::retain::{self, ContextUse, OldTask};

/// Removes what is older than `age` in `workspace`; stops between batches when `shutdown` fires.
pub(super) async fn by_age(
    retention: &Retention,
    workspace: &A2aWorkspace,
    age: Duration,
    shutdown: &CancellationToken,
) -> Removed {
    let now = (retention.clock)();
    // A limit too long for the calendar keeps everything.
    let Some(cutoff) =
        chrono::Duration::from_std(age).ok().and_then(|age| now.checked_sub_signed(age))
    else {
        return Removed::default();
    };
    let mut removed = Removed::default();
    let (store, path) = (retention.store.clone(), workspace.path.clone());
    blocking(move || retain::refresh(&store, &path)).await;
    let prefix = callers_scope_prefix(workspace);
    let deferred: Vec<SessionRef> = {
        let mut deferred =
            retention.deferred.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mine: Vec<_> =
            deferred.iter().filter(|(path, _, _)| *path == workspace.path).cloned().collect();
        mine.into_iter()
            .filter_map(|entry| deferred.take(&entry))
            .map(|(_, caller, context_id)| SessionRef { caller, context_id })
            .collect()
    };
    removed += unused_sessions(retention, workspace, deferred).await;
    // Tasks passed over this round (running, pushes pending, busy, changed): not asked again.
    let mut skipped: HashSet<String> = HashSet::new();
    while !shutdown.is_cancelled() {
        let (store, path, skip) =
            (retention.store.clone(), workspace.path.clone(), skipped.clone());
        let Some(batch) =
            blocking(move || retain::old_settled(&store, &path, cutoff, BATCH, &skip)).await
        else {
            break;
        };
        if batch.is_empty() {
            break;
        }
        // Behind: the batch is full and reaches back past the previous round's cutoff.
        let behind = batch.len() == BATCH
            && batch.last().and_then(|task| task.at).is_some_and(|at| {
                chrono::Duration::from_std(retention.options.interval)
                    .ok()
                    .and_then(|interval| cutoff.checked_sub_signed(interval))
                    .is_some_and(|previous| at < previous)
            });
        let pending = retention.push.pending_tasks();
        let mut holds = HashMap::new();
        let mut chosen: Vec<OldTask> = Vec::with_capacity(batch.len());
        for task in batch {
            if (retention.is_running)(&task.id) || pending.contains(&task.id) {
                skipped.insert(task.id);
                continue;
            }
            let scope = format!("{prefix}{}_{}", task.caller, task.context_id);
            if let std::collections::hash_map::Entry::Vacant(slot) = holds.entry(scope) {
                match retention.pool.try_hold_scope(slot.key(), HoldIf::Idle).await {
                    Some(hold) => {
                        slot.insert(hold);
                    }
                    None => {
                        skipped.insert(task.id);
                        continue;
                    }
                }
            }
            chosen.push(task);
        }
        let (store, path) = (retention.store.clone(), workspace.path.clone());
        let results = blocking(move || {
            chosen
                .into_iter()
                .map(|task| (retain::remove_task(&store, &path, &task, cutoff), task))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (_, hold) in holds {
            retention.pool.release_hold(hold).await;
        }
        let mut by_caller: HashMap<String, HashSet<String>> = HashMap::new();
        let mut contexts: HashSet<SessionRef> = HashSet::new();
        for (result, task) in results {
            match result {
                Ok(Some(bytes)) => {
                    removed.tasks += 1;
                    removed.bytes = removed.bytes.saturating_add(bytes);
                    contexts.insert(SessionRef {
                        caller: task.caller.clone(),
                        context_id: task.context_id.clone(),
                    });
                    by_caller.entry(task.caller).or_default().insert(task.id);
                }
                Ok(None) => {
                    skipped.insert(task.id);
                }
                Err(err) => {
                    tracing::warn!(task_id = %task.id, error = %err, "retention cannot remove a task file");
                    skipped.insert(task.id);
                }
            }
        }
        retention.forget_tasks(workspace, &by_caller);
        removed += unused_sessions(retention, workspace, contexts.into_iter().collect()).await;
        if !pause(shutdown, behind).await {
            return removed;
        }
    }
    let sweep = {
        let mut swept =
            retention.orphans_swept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = swept.is_none_or(|last| now < last || now - last >= super::ORPHAN_SWEEP);
        if due {
            *swept = Some(now);
        }
        due
    };
    if sweep {
        removed += orphans(retention, workspace, cutoff.into(), shutdown).await;
    }
    removed
}

/// Removes the sessions of `sessions` whose contexts no task on file uses; those open are tried
/// again next round.
async fn unused_sessions(
    retention: &Retention,
    workspace: &A2aWorkspace,
    sessions: Vec<SessionRef>,
) -> Removed {
    if sessions.is_empty() {
        return Removed::default();
    }
    let (removed, busy) = retention.remove_sessions(workspace, sessions, MayGo::Unused).await;
    let mut deferred = retention.deferred.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for session in busy {
        deferred.insert((workspace.path.clone(), session.caller, session.context_id));
    }
    removed
}

/// Removes the sessions of `workspace`'s callers that no task on file uses and that were last
/// used before `cutoff`.
async fn orphans(
    retention: &Retention,
    workspace: &A2aWorkspace,
    cutoff: SystemTime,
    shutdown: &CancellationToken,
) -> Removed {
    let (store, path, state_dir) =
        (retention.store.clone(), workspace.path.clone(), retention.state_dir.clone());
    let prefix = callers_scope_prefix(workspace);
    let found = blocking(move || {
        let folders = match disk::session_folders(&state_dir, &prefix) {
            Ok(folders) => folders,
            Err(err) => {
                tracing::warn!(folder = %state_dir.display(), error = %err, "retention cannot list the sessions folder");
                return Vec::new();
            }
        };
        folders
            .into_iter()
            .filter(|folder| {
                retain::context_use(&store, &path, &folder.caller, &folder.context_id)
                    == ContextUse::Unused
            })
            .filter(|folder| {
                let (_, last) = disk::session_use(&state_dir, &folder.scope);
                last.is_some_and(|last| last < cutoff)
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    let mut removed = Removed::default();
    for (i, chunk) in found.chunks(BATCH).enumerate() {
        if i > 0 && !pause(shutdown, true).await {
            break;
        }
        let sessions = chunk
            .iter()
            .map(|f| SessionRef { caller: f.caller.clone(), context_id: f.context_id.clone() })
            .collect();
        removed += unused_sessions(retention, workspace, sessions).await;
    }
    removed
}
