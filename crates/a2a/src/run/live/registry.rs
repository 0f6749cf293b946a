//! The registry of a server's live tasks: which runs are in progress, which tasks this process
//! has run (lazy restart recovery must leave those alone), and a notification when either
//! changes.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use super::LiveTask;

/// The live tasks of a server.
#[derive(Default)]
pub struct LiveTasks {
    map: Mutex<HashMap<String, Arc<LiveTask>>>,
    /// Every task this process has run. Their files are final when their runs end, so lazy
    /// restart recovery must never touch them (a reader that saw "working" just before the run
    /// ended would otherwise overwrite the final state). One id per task run since start-up.
    ran: Mutex<HashSet<String>>,
    /// Told whenever a task is registered or removed, so that code waiting for a task to go
    /// live or to end waits for this, not a timer.
    changed: tokio::sync::Notify,
}

impl LiveTasks {
    pub fn insert(&self, task: Arc<LiveTask>) {
        self.ran.lock().unwrap_or_else(PoisonError::into_inner).insert(task.task_id.clone());
        self.lock().insert(task.task_id.clone(), task);
        self.changed.notify_waiters();
    }

    /// Completes once a task is registered or removed after this call. Enable it before looking
    /// for the task, so a change between the look and the wait is not missed.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    pub fn remove(&self, task_id: &str) {
        self.lock().remove(task_id);
        self.changed.notify_waiters();
    }

    pub fn get(&self, task_id: &str) -> Option<Arc<LiveTask>> {
        self.lock().get(task_id).cloned()
    }

    /// Whether lazy recovery must leave the task alone: it runs, or ran, in this process.
    pub fn is_live(&self, task_id: &str) -> bool {
        self.lock().contains_key(task_id)
            || self.ran.lock().unwrap_or_else(PoisonError::into_inner).contains(task_id)
    }

    /// Whether the task's run is in progress right now.
    pub fn is_running(&self, task_id: &str) -> bool {
        self.lock().contains_key(task_id)
    }

    /// How many runs are in progress.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LiveTask>>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
