//! The task store: task files at `<workspace>/.volcanic/a2a/tasks/<taskId>.json`, scoped to the
//! authenticated caller, with lazy restart recovery and ListTasks.
//!
//! One [`TaskStore`] serves a whole process and any number of workspaces. Reads go to the files
//! every time (they are the truth): GetTask and each task of a ListTasks page cost a `stat`, and
//! a read and parse unless `task::cache` holds the settled task with that file stamp; every write
//! of a task file drops its cache entry. ListTasks works from a per-workspace index
//! (`task::index`) that our writes keep current and that checks the folder for outside changes
//! on each call, and reads only the files of the page it returns.
//!
//! Tenancy: a task is visible only through its owner's workspace and only when the file's
//! `caller` is the caller's name. Anything else, like a missing, malformed or unsafely named
//! task, is [`StoreError::NotFound`], with no log line.
//!
//! Lazy restart recovery (docs/reliability.md): a task read in state submitted or
//! working with no live run is rewritten as failed ("server restarted") before it is returned.
//! There is no scan at startup. input-required tasks are returned as they are. The first touch of
//! a workspace removes temp files a killed process left in its task folder.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime};

use chrono::Utc;
use tracing::error;

use super::TaskFile;
use super::cache::TaskCache;
use super::error::StoreError;
use super::id::is_valid_id;
use super::index::{Summary, WorkspaceIndex, is_active};
use super::json::Artifacts;
use super::path::task_path;
pub use super::path::tasks_dir;
use super::query::{Query, apply_history_length};
use super::read::{Loaded, Probe, probe, read_and_cache, read_task_file, read_through};
use super::status::agent_message;
use super::view::{PageTask, TaskPage, TaskView};
use crate::auth::{A2aWorkspace, Caller};
use crate::push::secrets::PushSecrets;

/// The status text of a task failed by restart recovery.
pub const RESTARTED_TEXT: &str = "server restarted";

/// How fresh a count of a workspace's task files must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// As far as the index knows (see [`WorkspaceIndex::known_len`]): what `A2A__MaxTasks` is
    /// checked against on every new task, so it must not cost a folder listing each time.
    Known,
    /// With the index first brought up to date with the folder (a listing when it changed): an
    /// exact answer where it matters, before refusing a task at the cap.
    Rescanned,
}

/// One task in an owner's listing ([`TaskStore::recent`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSummary {
    pub id: String,
    /// The caller that owns the task.
    pub caller: String,
    pub state: a2a::TaskState,
    /// When the status last changed.
    pub timestamp: Option<chrono::DateTime<Utc>>,
}

/// Task files of every workspace, plus a ListTasks index per workspace.
pub struct TaskStore {
    indexes: Mutex<HashMap<PathBuf, Arc<Mutex<WorkspaceIndex>>>>,
    /// Told about every task lazy recovery rewrote (the server sends its pushes from there).
    on_recovered: Option<RecoveryHook>,
    /// When this store was made: temp files older than this are a dead process's torn writes.
    started: SystemTime,
    /// Workspaces whose task folder has been swept of such temp files.
    swept: Mutex<HashSet<PathBuf>>,
    /// Settled tasks' JSON (`task::cache`); every write of a task file drops its entry.
    cache: Arc<TaskCache>,
    /// The largest task file read ([`crate::config::A2aOptions::max_task_file_bytes`]).
    file_cap: u64,
    /// Every task's push tokens and credentials: told of each write before the file changes.
    push_secrets: Arc<PushSecrets>,
    /// The server's clock: status timestamps are its time.
    clock: crate::clock::Clock,
}

impl Default for TaskStore {
    fn default() -> Self {
        let defaults = crate::config::A2aOptions::default();
        TaskStore {
            indexes: Mutex::default(),
            on_recovered: None,
            started: SystemTime::now(),
            swept: Mutex::default(),
            cache: Arc::new(TaskCache::new(defaults.task_cache_bytes)),
            file_cap: defaults.max_task_file_bytes(),
            clock: crate::clock::system_clock(),
            push_secrets: Arc::new(PushSecrets::new()),
        }
    }
}

impl std::fmt::Debug for TaskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStore")
            .field("recovery_hook", &self.on_recovered.is_some())
            .finish_non_exhaustive()
    }
}

/// Called with a task file that lazy recovery has just rewritten as failed.
pub type RecoveryHook = Arc<dyn Fn(&TaskFile) + Send + Sync>;

impl TaskStore {
    /// A store with nothing indexed yet.
    pub fn new() -> Self {
        TaskStore::default()
    }

    /// A store that reports every task lazy recovery rewrites (its state changed).
    pub fn with_recovery_hook(hook: RecoveryHook) -> Self {
        TaskStore { on_recovered: Some(hook), ..TaskStore::default() }
    }

    /// Reads task files of at most `bytes` (see
    /// [`crate::config::A2aOptions::max_task_file_bytes`]); a bigger one reads as missing, with
    /// a warning naming it and the cap.
    #[must_use]
    pub fn with_file_cap(self, bytes: u64) -> Self {
        TaskStore { file_cap: bytes, ..self }
    }

    /// Dates statuses by `clock` (the server's) instead of the system's.
    #[must_use]
    pub fn with_clock(self, clock: crate::clock::Clock) -> Self {
        TaskStore { clock, ..self }
    }

    /// Now by the server's clock, at the millisecond precision of a status timestamp.
    pub(crate) fn now(&self) -> chrono::DateTime<chrono::Utc> {
        super::status::at_status_precision((self.clock)())
    }

    /// Keeps at most `bytes` of settled tasks' JSON in memory (0: none).
    #[must_use]
    pub fn with_cache_bytes(self, bytes: usize) -> Self {
        TaskStore { cache: Arc::new(TaskCache::new(bytes)), ..self }
    }

    /// The push tokens and credentials of every task this store wrote or read a workspace for.
    pub fn push_secrets(&self) -> &Arc<PushSecrets> {
        &self.push_secrets
    }

    /// Writes a new task file (atomically, whole for readers and across a killed process) in
    /// `workspace`, without waiting for a disk flush: the task is durable once a later durable
    /// write of it, or [`TaskStore::make_durable`], returns (see
    /// [`volcanic_core::atomic::write_atomic_interim`] for what a power loss before that leaves).
    ///
    /// Register the task's run as live before creating a task in state submitted or working:
    /// a concurrent read that finds it without a live run fails it ("server restarted").
    ///
    /// # Errors
    /// [`StoreError::Io`] (logged) when the write fails; [`StoreError::Broken`] (logged) when the id is not a
    /// safe file name or the file already exists.
    ///
    /// # Cancel safety
    /// A write that has started completes even if this future is dropped.
    pub async fn create(
        &self,
        workspace: &A2aWorkspace,
        file: &TaskFile,
    ) -> Result<(), StoreError> {
        self.write(workspace, file, Write::Create).await
    }

    /// Replaces a task file (atomically) in `workspace`, creating it when missing.
    ///
    /// # Errors
    /// [`StoreError::Io`] (logged) when the write fails; [`StoreError::Broken`] (logged) when the id is not a
    /// safe file name.
    ///
    /// # Cancel safety
    /// A write that has started completes even if this future is dropped.
    pub async fn save(&self, workspace: &A2aWorkspace, file: &TaskFile) -> Result<(), StoreError> {
        self.write(workspace, file, Write::Replace(Vec::new())).await
    }

    /// [`TaskStore::save`], making `also` (e.g. the session journal of the run) durable in the
    /// same barrier as the task's new content: one disk flush for both.
    ///
    /// # Errors
    /// As [`TaskStore::save`].
    ///
    /// # Cancel safety
    /// A write that has started completes even if this future is dropped.
    pub async fn save_with(
        &self,
        workspace: &A2aWorkspace,
        file: &TaskFile,
        also: Vec<std::fs::File>,
    ) -> Result<(), StoreError> {
        self.write(workspace, file, Write::Replace(also)).await
    }

    /// Replaces a task file (atomically) with an interim version, without waiting for a disk
    /// flush: whole for readers and across a killed process, but a power loss may bring back
    /// the previous version, or leave an empty or torn file (see
    /// [`volcanic_core::atomic::write_atomic_interim`]). For the states of a live run before its
    /// last: a crash fails the task on the next read whichever version survives, and the run's
    /// last state is written durably.
    ///
    /// # Errors
    /// As [`TaskStore::save`].
    ///
    /// # Cancel safety
    /// A write that has started completes even if this future is dropped.
    pub async fn save_interim(
        &self,
        workspace: &A2aWorkspace,
        file: &TaskFile,
    ) -> Result<(), StoreError> {
        self.write(workspace, file, Write::Interim).await
    }

    /// Waits until everything written to task `task_id`'s file so far is durable (a shared
    /// barrier, see [`volcanic_core::durable`]): for a task acknowledged before its run ends.
    ///
    /// # Errors
    /// [`StoreError::Io`] (logged) when the sync fails or the file is gone.
    pub async fn make_durable(
        &self,
        workspace: &A2aWorkspace,
        task_id: &str,
    ) -> Result<(), StoreError> {
        if !is_valid_id(task_id) {
            return Err(StoreError::Broken);
        }
        let path = task_path(&workspace.path, task_id);
        let dir = tasks_dir(&workspace.path);
        let target = path.clone();
        blocking(move || volcanic_core::durable::sync_paths(&[&target, &dir])).await?.map_err(
            |source| {
                error!(file = %path.display(), error = %source, "cannot make a task file durable");
                StoreError::Io { path, source }
            },
        )
    }

    /// Reads `caller`'s task `task_id`, failing it first when it is submitted or working and
    /// `is_live(task_id)` is false (restart recovery; the failed task is persisted).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] when the id is not a safe file name (the disk is not touched),
    /// the file is missing or malformed, or the task is another caller's;
    /// [`StoreError::Io`] when the file cannot be read or the recovered task cannot be written.
    pub async fn load(
        &self,
        caller: &Caller,
        task_id: &str,
        is_live: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<TaskFile, StoreError> {
        let not_found = || StoreError::NotFound { task_id: task_id.to_string() };
        self.may_read(caller, task_id).await?;
        let path = task_path(&caller.workspace.path, task_id);
        let (target, id, cap) = (path.clone(), task_id.to_string(), self.file_cap);
        let file = blocking(move || read_task_file(&target, &id, cap))
            .await?
            .map_err(|e| read_failed(&path, e))?;
        let mut file = file.filter(|file| file.caller == caller.name).ok_or_else(not_found)?;
        self.recover_if_stale(&caller.workspace, &mut file, is_live).await?;
        Ok(file)
    }

    /// What every read of one task checks before touching its file: a safe id, a swept
    /// workspace, and that the index does not know the task as another caller's. Such a task is
    /// refused without reading its file, so it answers like a missing id in content and in cost.
    async fn may_read(&self, caller: &Caller, task_id: &str) -> Result<(), StoreError> {
        let not_found = || StoreError::NotFound { task_id: task_id.to_string() };
        if !is_valid_id(task_id) {
            return Err(not_found());
        }
        self.sweep_once(&caller.workspace.path).await;
        let index = self.index(&caller.workspace.path);
        if lock(&index).owner(task_id).is_some_and(|owner| owner != caller.name) {
            return Err(not_found());
        }
        Ok(())
    }

    /// GetTask's read: [`TaskStore::load`], with a settled task answered from the cache when its
    /// file is unchanged (one `stat`, made on this thread: cheaper than a trip to the blocking
    /// pool, as for callers.json), else read, and cached.
    ///
    /// # Errors
    /// As [`TaskStore::load`].
    pub(crate) async fn load_view(
        &self,
        caller: &Caller,
        task_id: &str,
        is_live: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Loaded, StoreError> {
        let not_found = || StoreError::NotFound { task_id: task_id.to_string() };
        self.may_read(caller, task_id).await?;
        let workspace = &caller.workspace.path;
        let path = task_path(workspace, task_id);
        let loaded = match probe(&self.cache, workspace, task_id, &path)
            .map_err(|e| read_failed(&path, e))?
        {
            Probe::Hit(cached) => Some(Loaded::Settled(cached)),
            Probe::Missing => None,
            Probe::Miss => {
                let (cache, workspace, id, cap) =
                    (self.cache.clone(), workspace.clone(), task_id.to_string(), self.file_cap);
                let target = path.clone();
                blocking(move || read_and_cache(&cache, &workspace, &id, &target, cap))
                    .await?
                    .map_err(|e| read_failed(&path, e))?
            }
        };
        match loaded {
            Some(Loaded::Settled(cached)) if *cached.caller == *caller.name => {
                Ok(Loaded::Settled(cached))
            }
            Some(Loaded::File(mut file)) if file.caller == caller.name => {
                self.recover_if_stale(&caller.workspace, &mut file, is_live).await?;
                Ok(Loaded::File(file))
            }
            Some(_) | None => Err(not_found()),
        }
    }

    /// ListTasks (A2A 1.0.1 §3.1.4) over `caller`'s tasks: filters, newest status first, cursor
    /// pages. Tasks without a live run are recovered (see [`TaskStore::load`]) before filtering.
    /// The settled tasks of the page come as their cached JSON (read through the cache: one
    /// `stat` each when unchanged); [`TaskPage::into_response`] makes the page a value.
    ///
    /// # Errors
    /// [`StoreError::Query`] for a `pageSize` outside 1..=100, a negative `historyLength`
    /// or a `pageToken` this store did not issue; [`StoreError::Broken`] when the blocking pool
    /// fails.
    pub async fn list_page(
        &self,
        caller: &Caller,
        request: &a2a::ListTasksRequest,
        is_live: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<TaskPage, StoreError> {
        let query = Query::parse(request)?;
        let history_length = query.history_length;
        self.sweep_once(&caller.workspace.path).await;
        let requested_at = Instant::now();
        let index = self.index(&caller.workspace.path);
        let page_of = {
            let (index, name, workspace, cache, cap) = (
                index.clone(),
                caller.name.clone(),
                caller.workspace.path.clone(),
                self.cache.clone(),
                self.file_cap,
            );
            move |query: Query, refresh: bool| {
                let page = {
                    let mut index = lock(&index);
                    if refresh {
                        index.ensure_current(requested_at);
                    }
                    let active = index.active_tasks(&name);
                    let page =
                        index.page(&name, &query.filter, query.cursor.as_ref(), query.page_size);
                    (active, page)
                };
                let (active, page) = page;
                let files = page
                    .ids
                    .iter()
                    .map(|id| read_through(&cache, &workspace, id, cap))
                    .collect::<io::Result<Vec<_>>>()
                    .map(|files| files.into_iter().flatten().collect::<Vec<_>>());
                (active, page, files)
            }
        };
        // One trip to the blocking pool in the common case: no task needs recovery.
        let (active, mut page, files) = {
            let (page_of, query) = (page_of.clone(), query.clone());
            blocking(move || page_of(query, true)).await?
        };
        let mut files = files.map_err(|e| read_failed(&tasks_dir(&caller.workspace.path), e))?;
        let stale: Vec<String> = active.into_iter().filter(|id| !is_live(id)).collect();
        if !stale.is_empty() {
            for id in &stale {
                match self.load(caller, id, is_live).await {
                    // A file that vanished or broke since the scan drops out of the page below.
                    Ok(_) | Err(StoreError::NotFound { .. }) => {}
                    Err(err) => return Err(err),
                }
            }
            let query = query.clone();
            let (_, again, reread) = blocking(move || page_of(query, false)).await?;
            page = again;
            files = reread.map_err(|e| read_failed(&tasks_dir(&caller.workspace.path), e))?;
        }
        let mut tasks = Vec::with_capacity(files.len());
        for loaded in files {
            match loaded {
                Loaded::Settled(cached) if *cached.caller == *caller.name => {
                    let view = TaskView::new(cached, history_length, query.artifacts);
                    tasks.push(PageTask::View(view));
                }
                Loaded::File(mut file) if file.caller == caller.name => {
                    self.recover_if_stale(&caller.workspace, &mut file, is_live).await?;
                    let mut task = file.task;
                    apply_history_length(&mut task, request.history_length)?;
                    if query.artifacts == Artifacts::Omitted {
                        task.artifacts = None;
                    }
                    tasks.push(PageTask::Task(Box::new(task)));
                }
                Loaded::Settled(_) | Loaded::File(_) => {}
            }
        }
        Ok(TaskPage {
            tasks,
            next_page_token: page.next.map(|key| key.to_token()).unwrap_or_default(),
            page_size: i32::try_from(query.page_size).unwrap_or(i32::MAX),
            total_size: i32::try_from(page.total).unwrap_or(i32::MAX),
        })
    }

    /// The `limit` newest tasks of a workspace, of every caller, newest status first: the
    /// owner's view (Telegram's `/a2a`), never a caller's. States are as the files say; no
    /// restart recovery is applied.
    ///
    /// # Errors
    /// [`StoreError::Broken`] when the blocking pool fails.
    pub async fn recent(
        &self,
        workspace: &Path,
        limit: usize,
    ) -> Result<Vec<TaskSummary>, StoreError> {
        let index = self.index(workspace);
        blocking(move || {
            let mut index = lock(&index);
            index.ensure_current(Instant::now());
            index
                .newest(limit)
                .into_iter()
                .map(|(id, summary)| TaskSummary {
                    id,
                    caller: summary.caller,
                    state: summary.state,
                    timestamp: summary.timestamp,
                })
                .collect()
        })
        .await
    }

    /// How many task files `workspace` holds, as fresh as `count` asks (see [`Count`]).
    ///
    /// # Errors
    /// [`StoreError::Broken`] when the blocking pool fails.
    pub async fn count(&self, workspace: &Path, count: Count) -> Result<usize, StoreError> {
        let rescan = count == Count::Rescanned;
        self.sweep_once(workspace).await;
        let index = self.index(workspace);
        // Without a rescan this is a counter read: no trip to the blocking pool unless a scan
        // (file I/O under the lock) holds the index right now.
        if !rescan {
            let known = match index.try_lock() {
                Ok(index) => index.known_len_cached(),
                Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                    poisoned.into_inner().known_len_cached()
                }
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            if let Some(known) = known {
                return Ok(known);
            }
        }
        blocking(move || {
            let mut index = lock(&index);
            if rescan {
                index.ensure_current(Instant::now());
            }
            index.known_len()
        })
        .await
    }

    async fn recover_if_stale(
        &self,
        workspace: &A2aWorkspace,
        file: &mut TaskFile,
        is_live: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<(), StoreError> {
        if is_active(&file.task.status.state) && !is_live(&file.task.id) {
            mark_restarted(&mut file.task, self.now());
            // A new run's position: the lost run's last events may have gone out unrecorded.
            file.events.record_status_change();
            self.save(workspace, file).await?;
            if let Some(hook) = &self.on_recovered {
                hook(file);
            }
        }
        Ok(())
    }

    async fn write(
        &self,
        workspace: &A2aWorkspace,
        file: &TaskFile,
        how: Write,
    ) -> Result<(), StoreError> {
        let id = file.task.id.clone();
        if !is_valid_id(&id) {
            error!(task_id = ?id, "refusing to write a task file whose id is not a safe file name");
            return Err(StoreError::Broken);
        }
        let bytes = serde_json::to_vec_pretty(file).map_err(|err| {
            error!(task_id = %id, error = %err, "cannot serialize a task file");
            StoreError::Broken
        })?;
        if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > self.file_cap {
            // Written all the same (the run's record is not dropped here), but reads will not
            // take it: the owner raises A2A__MaxFileBytes to read it again.
            error!(
                task_id = %id,
                bytes = bytes.len(),
                cap = self.file_cap,
                "task file is larger than the task file cap and will read as missing"
            );
        }
        self.sweep_once(&workspace.path).await;
        // Before the file exists: a session that reads it must already redact its tokens.
        self.push_secrets.record(&workspace.path, &id, &file.push_configs);
        let path = task_path(&workspace.path, &id);
        let index = self.index(&workspace.path);
        let summary = Summary::of(file);
        let target = path.clone();
        let (cache, dir) = (self.cache.clone(), workspace.path.clone());
        let written = blocking(move || -> io::Result<()> {
            let written = match how {
                Write::Create => volcanic_core::atomic::create_new_interim(&target, &bytes),
                Write::Interim => volcanic_core::atomic::write_atomic_interim(&target, &bytes),
                Write::Replace(also) => {
                    let also: Vec<&std::fs::File> = also.iter().collect();
                    volcanic_core::atomic::write_atomic_with(&target, &bytes, &also)
                }
            };
            // After the write, whatever became of it, and even when the caller is gone.
            cache.forget(&dir, &id);
            written?;
            lock(&index).record(&id, summary);
            Ok(())
        })
        .await?;
        written.map_err(|source| {
            error!(file = %path.display(), error = %source, "cannot write a task file");
            StoreError::Io { path, source }
        })
    }

    /// The first time this process touches a workspace's tasks, removes the temp files a killed
    /// process left behind (they are never read, but would pile up crash after crash).
    async fn sweep_once(&self, workspace: &Path) {
        {
            // Every request passes here: look before allocating the key.
            let mut swept = self.swept.lock().unwrap_or_else(PoisonError::into_inner);
            if swept.contains(workspace) {
                return;
            }
            swept.insert(workspace.to_path_buf());
        }
        let dir = tasks_dir(workspace);
        let started = self.started;
        if let Ok(removed) =
            blocking(move || volcanic_core::atomic::remove_stale_temp_files(&dir, started)).await
            && removed > 0
        {
            tracing::info!(removed, "removed temp files left by an interrupted task write");
        }
    }

    /// The settled-task cache and the largest task file read, for retention (`task::retain`).
    pub(super) fn cache_and_cap(&self) -> (&Arc<TaskCache>, u64) {
        (&self.cache, self.file_cap)
    }

    pub(super) fn index(&self, workspace: &Path) -> Arc<Mutex<WorkspaceIndex>> {
        let mut indexes = self.indexes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(index) = indexes.get(workspace) {
            return index.clone();
        }
        indexes
            .entry(workspace.to_path_buf())
            .or_insert_with(|| {
                Arc::new(Mutex::new(WorkspaceIndex::new(tasks_dir(workspace), self.file_cap)))
            })
            .clone()
    }
}

/// Sets a task to failed with the status message "server restarted" and timestamp `now`.
fn mark_restarted(task: &mut a2a::Task, now: chrono::DateTime<chrono::Utc>) {
    task.status = a2a::TaskStatus {
        state: a2a::TaskState::Failed,
        message: Some(agent_message(&task.id, &task.context_id, RESTARTED_TEXT)),
        timestamp: Some(now),
    };
}

/// How a task file is written.
#[derive(Debug)]
enum Write {
    /// A new file, not flushed (as `Interim`); an existing one is an error.
    Create,
    /// Durable once written, with these other files (synced in the same barrier).
    Replace(Vec<std::fs::File>),
    /// Whole for readers and across a killed process, not flushed: a power loss may bring the
    /// previous version back, or leave an empty or torn file.
    Interim,
}

fn read_failed(path: &Path, source: io::Error) -> StoreError {
    error!(file = %path.display(), error = %source, "cannot read a task file");
    StoreError::Io { path: path.to_path_buf(), source }
}

fn lock(index: &Mutex<WorkspaceIndex>) -> MutexGuard<'_, WorkspaceIndex> {
    index.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work).await.map_err(|err| {
        error!(error = %err, "task store work failed on the blocking pool");
        StoreError::Broken
    })
}
