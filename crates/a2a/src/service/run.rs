//! The run of a task, after it is acknowledged: opening the context's session, the prompt, and
//! the driver that follows the run's session events. This is the one place session events become
//! task changes (and so A2A events, which `LiveTask` makes from them).

use std::sync::Arc;
use std::time::Instant;

use a2a::TaskState;
use volcanic_core::tool::ToolStop;
use volcanic_core::{EventKind, RunFailure, RunHandle, RunOutcome, session::Role};

use crate::auth::Caller;
use crate::run::files;
use crate::run::live::LiveTask;
use crate::run::pool::{Claim, Reservation};
use crate::task::state::state_name;

use super::Service;

/// What a failed run tells the caller when the failure was not the model's.
pub(super) const UNEXPECTED_FAILURE: &str = "The run failed unexpectedly.";

/// The part of a send after the task is acknowledged: opens the context's session if it was
/// not open, builds the prompt (downloading file parts), starts the run and drives it. Every
/// failure here ends the task as failed.
pub(super) async fn run(
    service: Arc<Service>,
    live: Arc<LiveTask>,
    reservation: Reservation,
    caller: Caller,
    message: a2a::Message,
) {
    let claim = match reservation {
        Reservation::Ready(claim) => claim,
        Reservation::Pending(opening) => {
            match super::session::open(&service, &caller, opening).await {
                Some(claim) => {
                    live.attach(claim.session.clone());
                    claim
                }
                None => {
                    live.fail(UNEXPECTED_FAILURE.into()).await;
                    service.tasks.remove_live(&live.task_id);
                    return;
                }
            }
        }
    };
    claim.channel.set_target(Some(live.clone()));
    match start(&service, &live, &claim, &caller, &message).await {
        Ok(handle) => drive(&live, handle).await,
        Err(reason) => live.fail(reason).await,
    }
    claim.channel.set_target(None);
    service.tasks.remove_live(&live.task_id);
    service.pool.release(&claim.scope).await;
}

/// Builds the prompt of `message` (its files fetched and stored) and starts the run.
///
/// # Errors
/// What the failed task tells the caller: the reason a file could not be fetched or stored, or
/// [`UNEXPECTED_FAILURE`] for anything that is ours (logged).
async fn start(
    service: &Service,
    live: &LiveTask,
    claim: &Claim,
    caller: &Caller,
    message: &a2a::Message,
) -> Result<RunHandle, String> {
    let prompt = files::build_prompt_with_downloads(
        caller,
        &message.parts,
        service.notifier.is_some(),
        &service.guard,
        files::Caps {
            max_file_bytes: service.options.max_file_bytes,
            max_inbox_bytes: service.options.max_inbox_bytes,
            max_inbox_bytes_per_caller: service.options.max_inbox_bytes_per_caller,
        },
    )
    .await
    .map_err(|err| match &err {
        files::PromptError::Download { .. } | files::PromptError::InboxFull { .. } => {
            err.to_string()
        }
        files::PromptError::A2a(inner) => {
            tracing::error!(task_id = %live.task_id, error = %inner, "cannot store the message's files");
            UNEXPECTED_FAILURE.to_string()
        }
    })?;
    let handle = claim.session.prompt(prompt).map_err(|err| {
        tracing::error!(task_id = %live.task_id, error = %err, "cannot start the run");
        UNEXPECTED_FAILURE.to_string()
    })?;
    if live.cancel_requested() {
        live.abort();
    }
    Ok(handle)
}

/// Follows a run's session events and turns them into task changes and A2A events, then ends
/// the task as the run settled.
async fn drive(live: &LiveTask, mut handle: RunHandle) {
    let started = Instant::now();
    let mut settled = None;
    while let Some(event) = handle.events().recv().await {
        match &event.kind {
            // Each answer replaces the previous one in the response artifact, so what a stream
            // shows matches what GetTask returns at the end.
            EventKind::MessageStart { role: Role::Assistant, .. } => live.begin_answer().await,
            EventKind::TextDelta { text, .. } => live.stream_chunk(text).await,
            EventKind::MessageEnd { message, .. }
                if matches!(**message, volcanic_core::message::Message::Assistant(_)) =>
            {
                live.end_answer().await;
            }
            EventKind::ToolStart { name, .. } => {
                live.set_status(TaskState::Working, Some(format!("using {name}"))).await;
            }
            EventKind::Settled(value) => settled = Some(value.clone()),
            EventKind::RunStart
            | EventKind::TurnStart { .. }
            | EventKind::MessageStart { .. }
            | EventKind::MessageEnd { .. }
            | EventKind::ThinkingDelta { .. }
            | EventKind::ToolUpdate { .. }
            | EventKind::ToolEnd { .. }
            | EventKind::Retry { .. }
            | EventKind::Compacted(_) => {}
        }
    }
    let (state, message, final_text) = match settled {
        Some(settled) => {
            let (state, message) = match settled.outcome {
                RunOutcome::Completed | RunOutcome::MaxTurns => (TaskState::Completed, None),
                RunOutcome::StoppedByTool {
                    stop: ToolStop::InputRequired { question }, ..
                } => (TaskState::InputRequired, Some(question)),
                RunOutcome::Aborted => (TaskState::Canceled, None),
                RunOutcome::Failed {
                    error: RunFailure::Provider { message: reason } | RunFailure::Stopped { reason },
                } => (TaskState::Failed, Some(reason)),
                RunOutcome::Failed { error: RunFailure::Unexpected } => {
                    (TaskState::Failed, Some(UNEXPECTED_FAILURE.to_string()))
                }
            };
            (state, message, settled.final_text)
        }
        None => (TaskState::Failed, Some(UNEXPECTED_FAILURE.to_string()), String::new()),
    };
    live.end(&final_text, state.clone(), message).await;
    // The run's span names the caller, the task and the context.
    tracing::info!(
        owner = %live.workspace.owner_id,
        state = state_name(&state),
        secs = started.elapsed().as_secs_f64(),
        "a2a task ended"
    );
}
