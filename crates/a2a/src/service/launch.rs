//! Starting a task's run, for every way a run starts (a new task, a continuation, a task the
//! owner approved): the context's reservation, the task going live, its file in state working,
//! and the run's own task, which waits until the task has been acknowledged. Below `send` and
//! `approve`, which decide that a run starts; above `run`, which is the run.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use a2a::{TaskState, TaskStatus};
use futures_util::FutureExt;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::auth::Caller;
use crate::error::Error;
use crate::run::live::LiveTask;
use crate::run::pool::Reservation;
use crate::task::TaskFile;
use crate::task::events::EventId;

use super::Service;
use super::run::{self, UNEXPECTED_FAILURE};

/// A context reserved for a run, with what gives a claimed session back if the code holding it
/// stops early (an error, a panic); an unopened reservation gives itself back when dropped.
pub(super) struct Reserved {
    reservation: Reservation,
    guard: Option<ClaimGuard>,
}

impl Reserved {
    /// Gives the context back without a run (a message that waits for the owner instead).
    pub(super) async fn give_back(self, service: &Service) {
        let Reserved { reservation, guard } = self;
        match reservation {
            Reservation::Ready(claim) => service.pool.release(&claim.scope).await,
            Reservation::Pending(opening) => opening.abandon().await,
        }
        if let Some(guard) = guard {
            guard.disarm();
        }
    }
}

/// Reserves the caller's context `context_id` for a run.
///
/// # Errors
/// A busy context, or the session limits (see [`crate::run::pool::SessionPool::reserve`]).
pub(super) async fn reserve(
    service: &Arc<Service>,
    caller: &Caller,
    context_id: &str,
) -> Result<Reserved, Error> {
    let reservation = service.pool.reserve(caller, context_id).await?;
    let guard = match &reservation {
        Reservation::Ready(claim) => Some(ClaimGuard::new(
            service.pool.clone(),
            service.tracker.clone(),
            claim.scope.clone(),
        )),
        Reservation::Pending(_) => None,
    };
    Ok(Reserved { reservation, guard })
}

/// Starts the run of `file`'s task (new, continued, or approved by the owner) for `message`,
/// in the context `reserved` holds: the task goes live, its file is written in state working,
/// and the run starts once the task has been acknowledged ([`Launched::acknowledged`]).
///
/// # Errors
/// The store's error when a new task's file cannot be created; the reservation is given back.
pub(super) async fn launch(
    service: &Arc<Service>,
    caller: &Caller,
    file: TaskFile,
    reserved: Reserved,
    message: a2a::Message,
) -> Result<Launched, Error> {
    let Reserved { reservation, guard } = reserved;
    // Live before the file exists, so a concurrent read never takes it for a leftover of a
    // restart.
    let live = LiveTask::new(
        file.clone(),
        caller.clone(),
        service.tasks.store().clone(),
        service.push.clone(),
    );
    if let Reservation::Ready(claim) = &reservation {
        live.attach(claim.session.clone());
    }
    service.tasks.insert_live(live.clone());
    let is_new = file.task.status.state == TaskState::Submitted;
    if let Err(err) = live.start_working(is_new).await {
        service.tasks.remove_live(&live.task_id);
        Reserved { reservation, guard }.give_back(service).await;
        return Err(err);
    }
    // The task exists: its first event may go. Opening the session (creating or resuming its
    // journal), fetching file parts and starting the run follow on the run's own task, so a
    // failure there fails the task rather than the request. The run waits until the task has
    // been acknowledged (a stream's first event is on its way, a blocking answer is being
    // awaited): on a busy core, opening the session first would delay the acknowledgement by
    // the open's work.
    let (acknowledged, acknowledgement) = tokio::sync::oneshot::channel::<()>();
    let driver = service.clone();
    let driven = live.clone();
    let owner = caller.clone();
    if let Some(guard) = guard {
        guard.disarm();
    }
    // The run outlives the request: its own span, linked to the request's.
    let run_span = tracing::info_span!(
        parent: None,
        "a2a_run",
        caller = %caller.name,
        task_id = %live.task_id,
        context_id = %live.context_id,
    );
    run_span.follows_from(tracing::Span::current());
    let run_task = async move {
        let ended = driver.clone();
        let task = driven.clone();
        let scope = crate::run::pool::scope(&owner, &task.context_id);
        // Sent or dropped, either way the task is acknowledged (or nobody waits for it).
        let _ = acknowledgement.await;
        let result = AssertUnwindSafe(run::run(driver, driven, reservation, owner, message))
            .catch_unwind()
            .await;
        if result.is_err() {
            tracing::error!(task_id = %task.task_id, "the run driver panicked");
            task.fail(UNEXPECTED_FAILURE.into()).await;
            ended.tasks.remove_live(&task.task_id);
            // Only a task holding its session holds the claim; an unopened reservation gave
            // itself back when the panic dropped it.
            if task.has_session() {
                ended.pool.release(&scope).await;
            }
        }
    };
    service.tracker.spawn(run_task.instrument(run_span));
    Ok(Launched { live, acknowledged })
}

/// What `start` produced.
pub(super) enum Started {
    /// The task is at rest: it ended before any run (hop limit) or waits for the owner's
    /// approval.
    AtRest(AtRest),
    /// A run is under way.
    Running(Launched),
}

impl Started {
    pub(super) fn task_id(&self) -> &str {
        match self {
            Started::AtRest(rest) => &rest.task.id,
            Started::Running(launched) => &launched.live.task_id,
        }
    }
}

/// A task at rest, as its file has it: its status is the event at `position` and `generation`.
pub(super) struct AtRest {
    pub(super) task: Box<a2a::Task>,
    pub(super) position: EventId,
    pub(super) generation: u64,
}

impl AtRest {
    pub(super) fn of(file: TaskFile) -> Self {
        let position = file.events.status_position();
        let generation = file.events.generation();
        AtRest { task: Box::new(file.task), position, generation }
    }
}

/// A task whose run has been launched.
pub(super) struct Launched {
    pub(super) live: Arc<LiveTask>,
    /// Sent or dropped once the task is acknowledged; the run starts then.
    pub(super) acknowledged: tokio::sync::oneshot::Sender<()>,
}

/// Gives a claimed context back if the code holding it stops early (a panic); disarmed once the
/// claim is handed to the run driver or released.
struct ClaimGuard {
    pool: Arc<crate::run::pool::SessionPool>,
    tracker: TaskTracker,
    scope: Option<String>,
}

impl ClaimGuard {
    fn new(pool: Arc<crate::run::pool::SessionPool>, tracker: TaskTracker, scope: String) -> Self {
        ClaimGuard { pool, tracker, scope: Some(scope) }
    }

    fn disarm(mut self) {
        self.scope = None;
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        if let Some(scope) = self.scope.take() {
            let pool = self.pool.clone();
            self.tracker.spawn(async move { pool.release(&scope).await });
        }
    }
}

/// A new task for a message, submitted.
pub(super) fn new_task_file(
    caller: &Caller,
    message: &a2a::Message,
    now: chrono::DateTime<chrono::Utc>,
) -> TaskFile {
    TaskFile {
        task: a2a::Task {
            id: message.task_id.clone().unwrap_or_default(),
            context_id: message.context_id.clone().unwrap_or_default(),
            status: TaskStatus { state: TaskState::Submitted, message: None, timestamp: Some(now) },
            artifacts: None,
            history: Some(vec![message.clone()]),
            metadata: None,
        },
        caller: caller.name.clone(),
        push_configs: Vec::new(),
        events: Default::default(),
        accepted: Vec::new(),
    }
}
