//! Owner approval of what a caller asks (docs/a2a.md, "Owner approval"): a message that needs
//! the owner's yes (a new task's, or a reply to a task that asked for input: the owner approves
//! each message that reaches the model, not a task once) puts its task in
//! `TASK_STATE_AUTH_REQUIRED` and nothing of it reaches the model; the owner's decision (or the
//! time running out) starts its run or rejects the task. The records are `approval.rs`'s; this
//! file is what a request and a decision do to tasks.
//!
//! Invariant: a request is decided once. [`Approvals::take`] hands it to one decider only, and
//! a decision checks that the task still waits (a cancel may have come first).

use std::sync::Arc;
use std::time::Duration;

use a2a::{TaskState, TaskStatus};

use crate::approval::{
    AddError, DecideError, Decided, DecidedState, Decision, PendingApproval, REQUEST_CHARS,
    Settled, new_id,
};
use crate::auth::{Caller, CallerApproval};
use crate::error::{A2aError, Error};
use crate::run::parts::text_of;
use crate::task::status::{agent_message, retire_status_message};
use crate::task::{AcceptedMessage, TaskFile};

use super::Service;
use super::launch::{AtRest, Reserved, Started, launch, new_task_file, reserve};
use super::retry;

/// The most tasks of one caller that may wait for the owner at once.
pub const MAX_WAITING_PER_CALLER: usize = 32;

/// What the caller is told while the owner decides.
pub const WAITING_TEXT: &str = "Waiting for the owner's approval.";

/// Whether a message of `caller` (a new task's, or a reply to a task) waits for the owner.
pub(super) fn needed(service: &Service, caller: &Caller) -> bool {
    match caller.approval.tasks {
        CallerApproval::Never => false,
        CallerApproval::EveryTask => true,
        CallerApproval::FirstContact => {
            !service.approvals.is_approved(&caller.workspace.path, &caller.name)
        }
    }
}

/// A new task's message, as the request for approval keeps it.
pub(super) struct Request {
    pub message: a2a::Message,
    pub hops: u32,
    pub accepted: AcceptedMessage,
    pub window: Duration,
}

/// Creates the task in `TASK_STATE_AUTH_REQUIRED` and records the request (its message kept
/// whole in the state folder for the run that approval starts); the owner is told through the
/// log and `volcanic approvals`.
///
/// # Errors
/// [`Error::TooManyAwaitingApproval`] over [`MAX_WAITING_PER_CALLER`];
/// [`Error::ApprovalQueueFull`] over `A2A__MaxPendingApprovalBytes`; the store's errors.
pub(super) async fn request(
    service: &Arc<Service>,
    caller: &Caller,
    request: Request,
    register: &(dyn Fn(&mut TaskFile) + Sync),
) -> Result<Started, Error> {
    let Request { message, hops, accepted, window } = request;
    check_room(service, caller)?;
    let mut file = new_task_file(caller, &message, service.tasks.store().now());
    // The stored history keeps no file bytes (as for any task); the run gets the message as it
    // came, from the request's own file.
    crate::run::files::strip_bytes(&mut file.task);
    register(&mut file);
    retry::remember(&mut file, accepted, window);
    wait_for_owner(service, caller, file, message, hops, None).await
}

/// A caller's reply to a task that asked for input.
pub(super) struct Reply {
    pub message: a2a::Message,
    pub hops: u32,
    /// The question it answers, as the owner is shown it ([`question`]).
    pub asked: Option<String>,
}

/// The question a task asks in its status message, cut for the owner's approval request.
pub(super) fn question(task: &a2a::Task) -> Option<String> {
    task.status.message.as_ref().map(|question| {
        let text: Vec<&str> = question.parts.iter().map(text_of).collect();
        crate::approval::cut(&text.join("\n"), REQUEST_CHARS)
    })
}

/// A reply to a task that asked for input, from a caller whose messages wait for the owner:
/// the owner approved what the task was asked before, not what this message asks now, so it
/// waits like a new task's. `file` is the task, checked under `reserved` (which is given back)
/// and with the question and then the reply already in its history.
///
/// # Errors
/// As [`request`].
pub(super) async fn request_reply(
    service: &Arc<Service>,
    caller: &Caller,
    file: TaskFile,
    reserved: Reserved,
    reply: Reply,
) -> Result<Started, Error> {
    let Reply { message, hops, asked } = reply;
    let result = match check_room(service, caller) {
        Err(err) => Err(err),
        Ok(()) => wait_for_owner(service, caller, file, message, hops, asked).await,
    };
    reserved.give_back(service).await;
    result
}

/// Refuses one more request of `caller` over [`MAX_WAITING_PER_CALLER`].
fn check_room(service: &Service, caller: &Caller) -> Result<(), Error> {
    let waiting = service
        .approvals
        .list()
        .iter()
        .filter(|r| r.workspace == caller.workspace.path && r.caller == caller.name)
        .count();
    if waiting >= MAX_WAITING_PER_CALLER {
        return Err(Error::TooManyAwaitingApproval { max: MAX_WAITING_PER_CALLER });
    }
    Ok(())
}

/// Puts `file`'s task in `TASK_STATE_AUTH_REQUIRED` and records the request for `message`
/// (`question`: what the task asked, for a reply), request first, then the task; the owner is
/// told through the log, `volcanic approvals` and the host's notifier.
async fn wait_for_owner(
    service: &Arc<Service>,
    caller: &Caller,
    mut file: TaskFile,
    message: a2a::Message,
    hops: u32,
    question: Option<String>,
) -> Result<Started, Error> {
    let (task_id, context_id) = (file.task.id.clone(), file.task.context_id.clone());
    retire_status_message(&mut file.task);
    file.task.status = TaskStatus {
        state: TaskState::AuthRequired,
        message: Some(agent_message(&task_id, &context_id, WAITING_TEXT)),
        timestamp: Some(service.tasks.store().now()),
    };
    file.events.record_status_change();

    let requested_at = crate::approval::millis_now();
    let timeout = service.options.approval_timeout;
    let text: String = message.parts.iter().map(text_of).collect::<Vec<_>>().join("\n");
    let record = PendingApproval {
        id: new_id(),
        workspace: caller.workspace.path.clone(),
        caller: caller.name.clone(),
        task_id: task_id.clone(),
        context_id: context_id.clone(),
        hops,
        requested_at,
        expires_at: requested_at
            .saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        // For the owner's eyes only (never logged, never sent to a caller).
        request: crate::approval::cut(&text, REQUEST_CHARS),
        tool: None,
        question,
    };
    // The request first, then the task: a task that says it waits always has its request.
    let approvals = service.approvals.clone();
    let stored = record.clone();
    let max = service.options.max_pending_approval_bytes;
    let added = tokio::task::spawn_blocking(move || approvals.add(stored, Some(&message), max))
        .await
        .map_err(|_| A2aError::Internal)?;
    match added {
        Ok(()) => {}
        Err(AddError::Full { max }) => {
            tracing::warn!(caller = %caller.name, max, "the messages waiting for the owner's approval are at A2A__MaxPendingApprovalBytes; a request was refused");
            return Err(Error::ApprovalQueueFull { max });
        }
        Err(AddError::Io(err)) => {
            tracing::error!(error = %err, "cannot record an approval request");
            return Err(A2aError::Internal.into());
        }
    }
    if let Err(err) = service.tasks.save(&caller.workspace, &file).await {
        let approvals = service.approvals.clone();
        let id = record.id.clone();
        let _ = tokio::task::spawn_blocking(move || approvals.take(&id)).await;
        return Err(err);
    }
    service.push.notify(&file.task, &file.push_configs);
    let what = if record.question.is_some() { "a reply to a task" } else { "a task" };
    tracing::info!(
        approval = %record.id,
        caller = %caller.name,
        task_id = %task_id,
        "{what} waits for the owner's approval: volcanic approve {} (or deny)",
        record.id
    );
    schedule_timeout(service, &record);
    if let Some(notifier) = service.approval_notifier.clone() {
        let (caller, record) = (caller.clone(), record.clone());
        service.tracker.spawn(async move { notifier.requested(&caller, &record).await });
    }
    Ok(Started::AtRest(AtRest::of(file)))
}

/// Rejects the request when its time runs out (at once for one already past it: after a
/// restart).
pub(crate) fn schedule_timeout(service: &Arc<Service>, record: &PendingApproval) {
    let wait =
        Duration::from_millis(record.expires_at.saturating_sub(crate::approval::millis_now()));
    let (service_ref, id) = (service.clone(), record.id.clone());
    let timeout = service.options.approval_timeout;
    let stop = service.shutdown.clone();
    service.tracker.spawn(async move {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            // The request stays on file: the next start gives it its time limit again.
            () = stop.cancelled() => return,
        }
        let reason = format!("no decision from the owner within {}", crate::approval::describe(timeout));
        let decision = Decision::Deny { reason: Some(reason) };
        match decide(&service_ref, &id, decision, DecidedBy::TimeLimit).await {
            Ok(_) | Err(DecideError::NotPending) => {}
            Err(err) => tracing::warn!(approval = %id, error = %err, "an approval that timed out could not be rejected"),
        }
    });
}

/// Who applies a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecidedBy {
    /// The owner, through the control socket or a host's channel.
    Owner,
    /// The request's timer, when `A2A__ApprovalTimeout` ran out (logged and told as such).
    TimeLimit,
}

/// Applies a decision on request `id`, the owner's or its timer's (`by`).
///
/// # Errors
/// See [`DecideError`].
pub(crate) async fn decide(
    service: &Arc<Service>,
    id: &str,
    decision: Decision,
    by: DecidedBy,
) -> Result<Decided, DecideError> {
    let outcome = match (&decision, by) {
        (Decision::Approve, _) => Settled::Approved,
        (Decision::Deny { .. }, DecidedBy::Owner) => Settled::Denied,
        (Decision::Deny { .. }, DecidedBy::TimeLimit) => Settled::TimedOut,
    };
    let decided = decide_once(service, id, decision, by).await;
    if decided.is_ok() {
        service.approval_settled(id, outcome);
    }
    decided
}

async fn decide_once(
    service: &Arc<Service>,
    id: &str,
    decision: Decision,
    by: DecidedBy,
) -> Result<Decided, DecideError> {
    let record = service.approvals.get(id).ok_or(DecideError::NotPending)?;
    if record.tool.is_some() {
        return decide_tool_call(service, record, decision).await;
    }
    let caller = {
        let directory = service.directory.clone();
        let (workspace, name) = (record.workspace.clone(), record.caller.clone());
        tokio::task::spawn_blocking(move || directory.caller(&workspace, &name))
            .await
            .map_err(|err| DecideError::Failed(err.to_string()))?
    };
    let Some(caller) = caller else {
        // Nobody may run a task for a caller the owner removed: reject it in place, as its
        // owner would see it (the file is the caller's, under the workspace).
        take(service, id).await.ok_or(DecideError::NotPending)?;
        tracing::warn!(approval = %id, caller = %record.caller, "the caller of an approval request is gone");
        return Err(DecideError::CallerGone);
    };
    let file = match service.tasks.load(&caller, &record.task_id).await {
        Ok(file) => file,
        Err(err) => {
            take(service, id).await;
            return Err(DecideError::Failed(err.to_string()));
        }
    };
    if file.task.status.state != TaskState::AuthRequired {
        take(service, id).await;
        return Err(DecideError::NotPending);
    }
    match decision {
        Decision::Approve => approve(service, &caller, record, file).await,
        Decision::Deny { reason } => {
            take(service, id).await.ok_or(DecideError::NotPending)?;
            reject(service, &caller, &record, reason, by).await
        }
    }
}

async fn approve(
    service: &Arc<Service>,
    caller: &Caller,
    record: PendingApproval,
    mut file: TaskFile,
) -> Result<Decided, DecideError> {
    // The context first: nothing else can start in it while the request waits, so a busy
    // context here is a moment's race (the request stays, the owner may retry).
    let reserved = reserve(service, caller, &record.context_id).await.map_err(|err| match err {
        Error::ContextBusy => DecideError::Busy,
        other => DecideError::Failed(A2aError::from(other).to_string()),
    })?;
    let message = {
        let approvals = service.approvals.clone();
        let id = record.id.clone();
        tokio::task::spawn_blocking(move || approvals.message(&id)).await.ok().flatten()
    };
    // Decided by whoever takes it: a second decision (a timer, another channel) finds nothing.
    let Some(record) = take(service, &record.id).await else {
        return Err(DecideError::NotPending);
    };
    let message = match message {
        Some(message) => message,
        // Without the kept message, the caller's last in the task's history (file bytes
        // stripped): the new task's, or the reply's.
        None => match file
            .task
            .history
            .as_ref()
            .and_then(|h| h.iter().rev().find(|m| m.role == a2a::Role::User))
            .cloned()
        {
            Some(message) => message,
            None => return Err(DecideError::Failed("the task has no message to run".into())),
        },
    };
    if caller.approval.tasks == CallerApproval::FirstContact {
        let approvals = service.approvals.clone();
        let (workspace, name) = (caller.workspace.path.clone(), caller.name.clone());
        let at = crate::approval::millis_now();
        let remembered =
            tokio::task::spawn_blocking(move || approvals.remember_approved(&workspace, &name, at))
                .await;
        if !matches!(remembered, Ok(Ok(()))) {
            tracing::warn!(caller = %caller.name, "cannot remember an approved caller; its next task asks again");
        }
    }
    // The waiting text was a status update, not a turn of the conversation: it is dropped, not
    // kept in the history.
    file.task.status.message = None;
    launch(service, caller, file, reserved, message)
        .await
        .map_err(|err| DecideError::Failed(A2aError::from(err).to_string()))?;
    tracing::info!(approval = %record.id, caller = %caller.name, task_id = %record.task_id, "the owner approved a task; its run starts");
    Ok(Decided {
        task_id: record.task_id,
        caller: caller.name.clone(),
        state: DecidedState::Working,
    })
}

async fn reject(
    service: &Arc<Service>,
    caller: &Caller,
    record: &PendingApproval,
    reason: Option<String>,
    by: DecidedBy,
) -> Result<Decided, DecideError> {
    let text = match reason.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
        Some(reason) if by == DecidedBy::TimeLimit => {
            format!("The request was rejected: {reason}.")
        }
        Some(reason) => format!("The owner declined this request: {reason}"),
        None => "The owner declined this request.".to_string(),
    };
    match end_waiting_task(service, caller, record, TaskState::Rejected, &text).await {
        Ok(()) => {}
        Err(Error::Ended { .. }) => return Err(DecideError::NotPending),
        Err(err) => return Err(DecideError::Failed(A2aError::from(err).to_string())),
    }
    let how = match by {
        DecidedBy::Owner => Settled::Denied,
        DecidedBy::TimeLimit => Settled::TimedOut,
    };
    tracing::info!(approval = %record.id, caller = %caller.name, task_id = %record.task_id, how = how.as_str(), "an approval request was rejected");
    Ok(Decided {
        task_id: record.task_id.clone(),
        caller: caller.name.clone(),
        state: DecidedState::Rejected,
    })
}

/// Takes request `id` out (its files go on the blocking pool).
async fn take(service: &Arc<Service>, id: &str) -> Option<PendingApproval> {
    let approvals = service.approvals.clone();
    let id = id.to_string();
    tokio::task::spawn_blocking(move || approvals.take(&id)).await.ok().flatten()
}

/// The owner's decision on a tool call: handed to the run that waits for it. With no run
/// waiting (the process restarted since: the run is gone), the task fails with the reason.
async fn decide_tool_call(
    service: &Arc<Service>,
    record: PendingApproval,
    decision: Decision,
) -> Result<Decided, DecideError> {
    let Some(record) = take(service, &record.id).await else {
        return Err(DecideError::NotPending);
    };
    let state = match decision {
        Decision::Approve => DecidedState::Working,
        Decision::Deny { .. } => DecidedState::WorkingCallRefused,
    };
    if service.approvals.wake(&record.id, decision) {
        return Ok(Decided { task_id: record.task_id, caller: record.caller, state });
    }
    fail_interrupted_tool_call(service, &record).await;
    Err(DecideError::NotPending)
}

/// What a task whose run waited on a tool call when the process stopped becomes.
pub const INTERRUPTED_TOOL_CALL: &str = "The server restarted while a tool call waited for the owner's approval; send the request again.";

/// Fails the task of a tool-call request whose run is gone (a restart), and drops the request.
pub(crate) async fn fail_interrupted_tool_call(service: &Arc<Service>, record: &PendingApproval) {
    take(service, &record.id).await;
    let caller = {
        let directory = service.directory.clone();
        let (workspace, name) = (record.workspace.clone(), record.caller.clone());
        tokio::task::spawn_blocking(move || directory.caller(&workspace, &name))
            .await
            .ok()
            .flatten()
    };
    let Some(caller) = caller else { return };
    let ended =
        end_waiting_task(service, &caller, record, TaskState::Failed, INTERRUPTED_TOOL_CALL).await;
    if ended.is_ok() {
        tracing::warn!(task_id = %record.task_id, "a tool call's approval outlived its run; the task failed");
    }
}

/// Ends the task of `record`, which waits for the owner at rest, in `state` with `text` as its
/// status message (the old status goes into the history), and tells its push configs.
///
/// # Errors
/// [`Error::Ended`] when the task no longer waits (decided some other way, or running again);
/// the store's errors.
async fn end_waiting_task(
    service: &Service,
    caller: &Caller,
    record: &PendingApproval,
    state: TaskState,
    text: &str,
) -> Result<(), Error> {
    let ended = || Error::Ended { task_id: record.task_id.clone(), state: "decided" };
    let changed = service
        .tasks
        .change(
            caller,
            &record.task_id,
            tokio::time::Instant::now() + Duration::from_secs(10),
            |_| Box::pin(async { Some(Err::<(), Error>(ended())) }),
            |file| {
                if file.task.status.state == TaskState::AuthRequired {
                    Ok(())
                } else {
                    Err(ended())
                }
            },
            |file| {
                retire_status_message(&mut file.task);
                file.task.status = TaskStatus {
                    state: state.clone(),
                    message: Some(agent_message(&record.task_id, &record.context_id, text)),
                    timestamp: Some(service.tasks.store().now()),
                };
                file.events.record_status_change();
                true
            },
        )
        .await?;
    if let crate::tasks::Changed::File(file) = changed {
        service.push.notify(&file.task, &file.push_configs);
    }
    Ok(())
}
