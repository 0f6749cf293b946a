//! Retention by size: when a workspace's callers' session folders and inbox files take more
//! than `A2A__Retention__MaxBytes`, the least recently used of them go first (a session by its
//! journal's last change, a file by its own) until they fit.
//!
//! Never removed: a session open in the pool (the pool's hold proves it closed), the session of
//! a context with a task still submitted, working, input-required or auth-required, the inbox
//! files such a conversation received, and anything changed within the last interval (a file
//! just saved for a run that has not journaled its prompt yet). Task files stay: a task whose
//! session went still answers GetTask; a new message in its context starts a new conversation.
//! A caller folder counts for at most `A2A__MaxInboxBytesPerCaller`, so what one caller's
//! session writes into its own folder cannot push the others' conversations out.

use std::collections::{HashMap, HashSet};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

use super::{BATCH, MayGo, Removed, Retention, SessionRef, blocking, disk, pause};
use crate::auth::A2aWorkspace;
use crate::run::pool::callers_scope_prefix;
use crate::task::retain::{self, ContextUse};

/// One thing the cap may remove.
enum Item {
    Session(disk::SessionFolder),
    Inbox(disk::InboxFile),
}

/// What a workspace's callers' records take, and what of it may go, least recently used first.
struct Inventory {
    /// Bytes counted against the cap.
    total: u64,
    /// Each caller folder's bytes (counted for at most the share).
    inbox_by_caller: HashMap<String, u64>,
    /// Removable items, least recently used first, with their bytes.
    items: Vec<(SystemTime, u64, Item)>,
}

/// Prunes `workspace` down to `max` bytes; stops between batches when `shutdown` fires.
pub(super) async fn by_size(
    retention: &Retention,
    workspace: &A2aWorkspace,
    max: u64,
    shutdown: &CancellationToken,
) -> Removed {
    // By the server's clock, like every age retention judges (a file's own time is the
    // system's, which the server's never runs behind).
    let now = SystemTime::from((retention.clock)());
    let recent = now.checked_sub(retention.options.interval).unwrap_or(UNIX_EPOCH);
    let share = retention.inbox_share;
    let (store, path, state_dir) =
        (retention.store.clone(), workspace.path.clone(), retention.state_dir.clone());
    let prefix = callers_scope_prefix(workspace);
    let Some(mut inventory) = blocking(move || {
        retain::refresh(&store, &path);
        inventory(&store, &path, &state_dir, &prefix, share, recent)
    })
    .await
    else {
        return Removed::default();
    };
    let mut removed = Removed::default();
    if inventory.total <= max {
        return removed;
    }
    let over = inventory.total;
    let items = std::mem::take(&mut inventory.items);
    let mut items = items.into_iter().peekable();
    let mut first = true;
    while inventory.total > max && items.peek().is_some() {
        if !first && !pause(shutdown, false).await {
            break;
        }
        first = false;
        // The next least recently used, as many as should bring the total under the cap.
        let mut sessions = Vec::new();
        let mut files = Vec::new();
        let mut planned = 0u64;
        while sessions.len() + files.len() < BATCH
            && inventory.total.saturating_sub(planned) > max
            && let Some((_, bytes, item)) = items.next()
        {
            planned = planned.saturating_add(bytes);
            match item {
                Item::Session(folder) => sessions
                    .push(SessionRef { caller: folder.caller, context_id: folder.context_id }),
                Item::Inbox(file) => files.push(file),
            }
        }
        let (gone, _) = retention.remove_sessions(workspace, sessions, MayGo::Settled).await;
        inventory.total = inventory.total.saturating_sub(gone.bytes);
        removed += gone;
        let path = workspace.path.clone();
        let results = blocking(move || {
            files
                .into_iter()
                .map(|file| {
                    let result = disk::remove_inbox_file(&path, &file.caller, &file.name);
                    (file, result)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (file, result) in results {
            match result {
                Ok(Some(_)) => {
                    let held = inventory.inbox_by_caller.entry(file.caller).or_default();
                    let before = (*held).min(share);
                    *held = held.saturating_sub(file.bytes);
                    let counted_less = before - (*held).min(share);
                    inventory.total = inventory.total.saturating_sub(counted_less);
                    removed.inbox_files += 1;
                    removed.bytes = removed.bytes.saturating_add(file.bytes);
                }
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(caller = %file.caller, file = %file.name, error = %err, "retention cannot remove an inbox file");
                }
            }
        }
    }
    if inventory.total > max {
        tracing::warn!(
            owner = %workspace.owner_id,
            bytes = inventory.total,
            before = over,
            max,
            "callers' sessions and inbox files stay over A2A__Retention__MaxBytes: the rest is in use or recent"
        );
    }
    removed
}

/// Lists what the cap counts and what of it may go. Blocking.
fn inventory(
    store: &crate::task::store::TaskStore,
    workspace: &std::path::Path,
    state_dir: &std::path::Path,
    prefix: &str,
    share: u64,
    recent: SystemTime,
) -> Inventory {
    let mut total = 0u64;
    let mut items = Vec::new();
    // Inbox files the conversations of unsettled tasks received: kept with those conversations.
    let mut needed: HashSet<(String, String)> = HashSet::new();
    let folders = disk::session_folders(state_dir, prefix).unwrap_or_else(|err| {
        tracing::warn!(folder = %state_dir.display(), error = %err, "retention cannot list the sessions folder");
        Vec::new()
    });
    for folder in folders {
        let (bytes, last) = disk::session_use(state_dir, &folder.scope);
        total = total.saturating_add(bytes);
        let in_use = retain::context_use(store, workspace, &folder.caller, &folder.context_id)
            == ContextUse::Unsettled;
        if in_use {
            let dir = state_dir.join("sessions").join(&folder.scope);
            for name in disk::received_files(&dir, &folder.caller) {
                needed.insert((folder.caller.clone(), name));
            }
            continue;
        }
        let last = last.unwrap_or(UNIX_EPOCH);
        if last < recent {
            items.push((last, bytes, Item::Session(folder)));
        }
    }
    let mut inbox_by_caller: HashMap<String, u64> = HashMap::new();
    for file in disk::inbox_files(workspace) {
        let held = inbox_by_caller.entry(file.caller.clone()).or_default();
        *held = held.saturating_add(file.bytes);
        let last = file.modified.unwrap_or(UNIX_EPOCH);
        if last < recent && !needed.contains(&(file.caller.clone(), file.name.clone())) {
            items.push((last, file.bytes, Item::Inbox(file)));
        }
    }
    for held in inbox_by_caller.values() {
        total = total.saturating_add((*held).min(share));
    }
    items.sort_by_key(|(last, _, _)| *last);
    Inventory { total, inbox_by_caller, items }
}
