//! [`Tasks`]: the one way the operations reach a caller's tasks, whether a run holds the task in
//! memory ([`LiveTasks`], authoritative while the run lasts) or only its file is left
//! ([`TaskStore`]). It owns both, so the two questions that join them are answered here once:
//! whether lazy restart recovery must leave a task alone ([`LiveTasks::is_live`], asked by every
//! read of the store), and how a task nobody runs is changed (hold its context, read again,
//! check, change, save: [`Tasks::change`]).
//!
//! It sits between the registry and the pool below and the operations (`service`) above: it
//! knows nothing of requests, replies or the wire, and nothing below it imports it. The store's
//! own work (tenancy, recovery, the index, the cache, writes) stays in `task::store`, which knows
//! nothing of runs: it is asked about liveness through the predicate this type passes it.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use crate::auth::{A2aWorkspace, Caller};
use crate::error::Error;
use crate::run::live::{LiveTask, LiveTasks};
use crate::run::pool::SessionPool;
use crate::task::TaskFile;
use crate::task::events::EventRecord;
use crate::task::read::Loaded;
use crate::task::store::{Count, TaskStore};
use crate::task::view::TaskPage;

/// The tasks of every workspace the server serves: their files and their runs in progress.
pub(crate) struct Tasks {
    store: Arc<TaskStore>,
    live: LiveTasks,
    /// Only for the hold of a task's context while [`Tasks::change`] writes its file.
    pool: Arc<SessionPool>,
    /// Told after every write of a task no run holds ([`Tasks::save`], [`Tasks::change`]), so
    /// that long polls of tasks at rest wait for this, not a timer.
    saved: tokio::sync::Notify,
}

/// What [`Tasks::change`] did.
pub(crate) enum Changed<T> {
    /// The run's task took the change; what `on_live` answered.
    Live(T),
    /// The file, as changed (and saved when `change` said it changed anything).
    File(Box<TaskFile>),
}

impl Tasks {
    /// Tasks over `store`, with no run in progress; changes hold contexts of `pool`.
    pub(crate) fn new(store: Arc<TaskStore>, pool: Arc<SessionPool>) -> Self {
        Tasks { store, live: LiveTasks::default(), pool, saved: tokio::sync::Notify::new() }
    }

    /// The store, for what is handed on: a live task persists itself through it, and sessions
    /// redact the push secrets it records.
    pub(crate) fn store(&self) -> &Arc<TaskStore> {
        &self.store
    }

    /// The caller's task `task_id` while its run is in progress; `None` for any other task and
    /// for another caller's.
    pub(crate) fn live(&self, caller: &Caller, task_id: &str) -> Option<Arc<LiveTask>> {
        self.live.get(task_id).filter(|live| live.caller == *caller)
    }

    /// Registers a run. Before the task's file is created in state submitted or working: a read
    /// that finds such a file without a live run fails it ("server restarted").
    pub(crate) fn insert_live(&self, task: Arc<LiveTask>) {
        self.live.insert(task);
    }

    /// Unregisters a run, once its task's file is final.
    pub(crate) fn remove_live(&self, task_id: &str) {
        self.live.remove(task_id);
    }

    /// Whether the task's run is in progress right now.
    pub(crate) fn is_running(&self, task_id: &str) -> bool {
        self.live.is_running(task_id)
    }

    /// How many runs are in progress.
    pub(crate) fn running(&self) -> usize {
        self.live.len()
    }

    /// The caller's task `task_id` as its file says, recovered first when it claims a run this
    /// process does not have (see [`TaskStore::load`]).
    ///
    /// # Errors
    /// As [`TaskStore::load`]: TaskNotFound for an unknown task or another caller's.
    pub(crate) async fn load(&self, caller: &Caller, task_id: &str) -> Result<TaskFile, Error> {
        self.store.load(caller, task_id, &self.liveness()).await.map_err(Error::from)
    }

    /// GetTask's read of the caller's task: the live snapshot while its run lasts, else the file
    /// (a settled task through the cache, see [`TaskStore::load_view`]).
    ///
    /// # Errors
    /// As [`TaskStore::load_view`].
    pub(crate) async fn view(&self, caller: &Caller, task_id: &str) -> Result<Loaded, Error> {
        if let Some(live) = self.live(caller, task_id) {
            let (task, generation) = live.view().await;
            let file = TaskFile {
                task,
                caller: caller.name.clone(),
                push_configs: Vec::new(),
                events: EventRecord { generation, ..EventRecord::default() },
                accepted: Vec::new(),
            };
            return Ok(Loaded::File(Box::new(file)));
        }
        self.store.load_view(caller, task_id, &self.liveness()).await.map_err(Error::from)
    }

    /// GetTask's read with `currentGeneration` (the task-generation extension): the caller's
    /// task once its generation is above `after`, or as it is at `deadline`. Waits on the task's
    /// own changes while it runs, and on the registry and on writes of tasks at rest otherwise,
    /// never on a timer; each wake-up looks again.
    ///
    /// # Errors
    /// As [`Tasks::view`].
    pub(crate) async fn view_after(
        &self,
        caller: &Caller,
        task_id: &str,
        after: u64,
        deadline: Instant,
    ) -> Result<Loaded, Error> {
        loop {
            // Enabled before the look, so a change between the look and the wait wakes the wait.
            let live_changed = self.live.changed();
            let saved = self.saved.notified();
            tokio::pin!(live_changed, saved);
            live_changed.as_mut().enable();
            saved.as_mut().enable();
            if let Some(live) = self.live(caller, task_id) {
                let mut generations = live.generations();
                tokio::select! {
                    // Moved (or the run is gone): read the task as it is now.
                    _ = generations.wait_for(|generation| *generation > after) => {}
                    // The run may have ended (its file is final then): look again.
                    () = &mut live_changed => continue,
                    () = tokio::time::sleep_until(deadline) => {}
                }
                return self.view(caller, task_id).await;
            }
            let loaded = self.view(caller, task_id).await?;
            if loaded.generation() > after || Instant::now() >= deadline {
                return Ok(loaded);
            }
            tokio::select! {
                () = &mut live_changed => {}
                () = &mut saved => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// One ListTasks page of the caller's tasks (see [`TaskStore::list_page`]).
    ///
    /// # Errors
    /// As [`TaskStore::list_page`].
    pub(crate) async fn page(
        &self,
        caller: &Caller,
        request: &a2a::ListTasksRequest,
    ) -> Result<TaskPage, Error> {
        self.store.list_page(caller, request, &self.liveness()).await.map_err(Error::from)
    }

    /// Writes a task file that no run holds (see [`TaskStore::save`]).
    ///
    /// # Errors
    /// As [`TaskStore::save`].
    pub(crate) async fn save(
        &self,
        workspace: &A2aWorkspace,
        file: &TaskFile,
    ) -> Result<(), Error> {
        let saved = self.store.save(workspace, file).await;
        self.saved.notify_waiters();
        saved.map_err(Error::from)
    }

    /// Wakes long polls of tasks at rest after retention removed some, so a wait on a removed
    /// task ends with TaskNotFound rather than at its deadline.
    pub(crate) fn removed(&self) {
        self.saved.notify_waiters();
    }

    /// Waits until what was written of task `task_id` is durable (see
    /// [`TaskStore::make_durable`]).
    ///
    /// # Errors
    /// As [`TaskStore::make_durable`].
    pub(crate) async fn make_durable(
        &self,
        workspace: &A2aWorkspace,
        task_id: &str,
    ) -> Result<(), Error> {
        self.store.make_durable(workspace, task_id).await.map_err(Error::from)
    }

    /// How many task files `workspace` holds (see [`TaskStore::count`]).
    ///
    /// # Errors
    /// As [`TaskStore::count`].
    pub(crate) async fn count(
        &self,
        workspace: &A2aWorkspace,
        count: Count,
    ) -> Result<usize, Error> {
        self.store.count(&workspace.path, count).await.map_err(Error::from)
    }

    /// Changes the caller's task `task_id`, which the caller does not run: the one way cancel
    /// and push configs change a task. While its run lasts, `on_live` gets the live task
    /// (`None`: the run has just ended, look again). Otherwise the file must pass `check`, then,
    /// under a hold of its context (so that no run starts from the old file while the new one
    /// is written), is read again, checked again, given to `change` and saved when `change`
    /// says it changed.
    ///
    /// A busy context (the task is about to run, or another task of the context starts or runs)
    /// is waited for until `deadline`: the wait ends when the pool frees a context or a task
    /// goes live or ends, then everything is looked at again.
    ///
    /// # Errors
    /// What `check` refuses; [`Error::ContextBusy`] when the context stays busy until
    /// `deadline`; the store's errors (an unknown task or another caller's is TaskNotFound).
    pub(crate) async fn change<'a, T>(
        &self,
        caller: &Caller,
        task_id: &str,
        deadline: Instant,
        mut on_live: impl FnMut(Arc<LiveTask>) -> BoxFuture<'a, Option<Result<T, Error>>>,
        check: impl Fn(&TaskFile) -> Result<(), Error>,
        mut change: impl FnMut(&mut TaskFile) -> bool,
    ) -> Result<Changed<T>, Error> {
        loop {
            // Enabled before the look, so a change between the look and the wait wakes the wait.
            let freed = self.pool.freed();
            let live_changed = self.live.changed();
            tokio::pin!(freed, live_changed);
            freed.as_mut().enable();
            live_changed.as_mut().enable();
            if let Some(live) = self.live(caller, task_id) {
                if let Some(result) = on_live(live).await {
                    return result.map(Changed::Live);
                }
            } else {
                let file = self.load(caller, task_id).await?;
                check(&file)?;
                // Under the hold no run of the context can start (or be running), so the file is
                // the truth and nothing writes it but us.
                if let Some(hold) = self.pool.try_hold(caller, &file.task.context_id).await {
                    let result = async {
                        let mut file = self.load(caller, task_id).await?;
                        check(&file)?;
                        if change(&mut file) {
                            self.save(&caller.workspace, &file).await?;
                        }
                        Ok(Changed::File(Box::new(file)))
                    }
                    .await;
                    self.pool.release_hold(hold).await;
                    return result;
                }
            }
            // The context is busy: this task is about to run (it will be live in a moment), or
            // another task of the context is starting or running.
            tokio::select! {
                () = &mut freed => {}
                () = &mut live_changed => {}
                () = tokio::time::sleep_until(deadline) => return Err(Error::ContextBusy),
            }
        }
    }

    /// What the store asks before failing a task as "server restarted": whether it runs, or
    /// ran, in this process. A borrow of the registry, so passing it costs nothing.
    fn liveness(&self) -> impl Fn(&str) -> bool + Sync + '_ {
        |task_id| self.live.is_live(task_id)
    }
}
