//! The run of a task, after it is acknowledged: opening the context's session, the prompt, and
//! the driver that follows the run's session events. This is the one place session events become
//! task changes (and so A2A events, which `LiveTask` makes from them).

use std::sync::Arc;
use std::time::Instant;

use a2a::TaskState;
use serde_json::{Value, json};
use volcanic_core::{EventKind, RunFailure, RunHandle, RunOutcome, session::Role};

use crate::auth::Caller;
use crate::extension::{A2aSessionExtension, REQUEST_INPUT, WorkspaceSecrets};
use crate::files;
use crate::live::LiveTask;
use crate::pool::{Claim, Reservation};
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
    hops: u32,
) {
    let claim = match reservation {
        Reservation::Ready(claim) => claim,
        Reservation::Pending(opening) => {
            // The push secrets of task files written before this process started are read
            // once per workspace, before its first session can see them.
            let push_secrets = service.tasks.store().push_secrets().clone();
            if !push_secrets.is_loaded(&caller.workspace.path) {
                let path = caller.workspace.path.clone();
                let loaded = tokio::task::spawn_blocking(move || push_secrets.load(&path)).await;
                if loaded.is_err() {
                    tracing::error!(task_id = %live.task_id, "reading push secrets panicked");
                }
            }
            let extension = {
                let caller = caller.clone();
                let notifier = service.notifier.clone();
                let meter = Some(service.meter.clone());
                let secrets: Arc<dyn volcanic_core::redact::SecretSource> =
                    Arc::new(WorkspaceSecrets::new(
                        service.directory.clone(),
                        caller.workspace.clone(),
                        service.tasks.store().push_secrets().clone(),
                    ));
                let service = Arc::downgrade(&service);
                move |channel: &Arc<crate::extension::A2aChatChannel>| -> Arc<dyn volcanic_core::Extension> {
                    // Calls of the tools the caller's entry names wait for the owner.
                    let gate = (!caller.approval.tools.is_empty()).then(|| {
                        Arc::new(super::tool_approval::ToolApproval::new(
                            service,
                            caller.clone(),
                            channel.clone(),
                        )) as Arc<dyn volcanic_core::extension::ToolGate>
                    });
                    Arc::new(A2aSessionExtension { caller, notifier, secrets, gate, meter })
                }
            };
            let opened = opening.open(extension).await;
            match opened {
                Ok(claim) => {
                    live.attach(claim.session.clone());
                    claim
                }
                Err(_) => {
                    // Logged by the pool; the context is free again.
                    live.set_status(TaskState::Failed, Some(UNEXPECTED_FAILURE.into())).await;
                    live.finish().await;
                    service.tasks.remove_live(&live.task_id);
                    return;
                }
            }
        }
    };
    claim.channel.set_target(Some(live.clone()));
    let prompt = files::build_prompt_with_downloads(
        &caller,
        &message.parts,
        service.notifier.is_some(),
        &service.guard,
        files::Caps {
            max_file_bytes: service.options.max_file_bytes,
            max_inbox_bytes: service.options.max_inbox_bytes,
            max_inbox_bytes_per_caller: service.options.max_inbox_bytes_per_caller,
        },
    )
    .await;
    let prompt = match prompt {
        Ok(prompt) => prompt,
        Err(err) => {
            // A file that cannot be fetched or stored fails the task with the reason; anything
            // else is ours and stays generic.
            let reason = match &err {
                files::PromptError::Download { .. } | files::PromptError::InboxFull { .. } => {
                    err.to_string()
                }
                files::PromptError::A2a(inner) => {
                    tracing::error!(task_id = %live.task_id, error = %inner, "cannot store the message's files");
                    UNEXPECTED_FAILURE.to_string()
                }
            };
            live.set_status(TaskState::Failed, Some(reason)).await;
            live.finish().await;
            end_live(&service, &live, &claim).await;
            return;
        }
    };
    claim.session.bus().emit("a2a.inbound", json!({"hops": hops, "caller": caller.name}));
    let handle = match claim.session.prompt(prompt) {
        Ok(handle) => handle,
        Err(err) => {
            tracing::error!(task_id = %live.task_id, error = %err, "cannot start the run");
            live.set_status(TaskState::Failed, Some(UNEXPECTED_FAILURE.into())).await;
            live.finish().await;
            end_live(&service, &live, &claim).await;
            return;
        }
    };
    if live.cancel_requested() {
        live.abort();
    }
    drive(service, live, handle, claim).await;
}

/// Follows a run's session events and turns them into task changes and A2A events.
async fn drive(service: Arc<Service>, live: Arc<LiveTask>, mut handle: RunHandle, claim: Claim) {
    let started = Instant::now();
    let mut response_started = false;
    let mut chunk_in_message = false;
    let mut settled = None;
    while let Some(event) = handle.events().recv().await {
        match &event.kind {
            EventKind::MessageStart { role: Role::Assistant, .. } => {
                // Each answer replaces the previous one in the response artifact, so what a
                // stream shows matches what GetTask returns at the end.
                chunk_in_message = false;
                response_started = false;
            }
            EventKind::TextDelta { text, .. } => {
                live.stream_text(text.clone(), response_started, false).await;
                response_started = true;
                chunk_in_message = true;
            }
            EventKind::MessageEnd { message, .. } => {
                if chunk_in_message
                    && matches!(**message, volcanic_core::message::Message::Assistant(_))
                {
                    live.stream_text(String::new(), true, true).await;
                    chunk_in_message = false;
                }
            }
            EventKind::ToolStart { name, .. } => {
                live.set_status(TaskState::Working, Some(format!("using {name}"))).await;
            }
            EventKind::Settled(value) => settled = Some(value.clone()),
            EventKind::RunStart
            | EventKind::TurnStart { .. }
            | EventKind::MessageStart { .. }
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
                RunOutcome::StoppedByTool { tool, data, .. } if tool == REQUEST_INPUT => {
                    let question =
                        data.get("question").and_then(Value::as_str).unwrap_or("").to_string();
                    (TaskState::InputRequired, Some(question))
                }
                RunOutcome::StoppedByTool { .. } => (TaskState::Completed, None),
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
    live.set_final_text(&final_text).await;
    live.set_status(state.clone(), message).await;
    live.finish().await;
    // The run's span names the caller, the task and the context.
    tracing::info!(
        owner = %live.workspace.owner_id,
        state = state_name(&state),
        secs = started.elapsed().as_secs_f64(),
        "a2a task ended"
    );
    end_live(&service, &live, &claim).await;
}

async fn end_live(service: &Service, live: &LiveTask, claim: &Claim) {
    claim.channel.set_target(None);
    service.tasks.remove_live(&live.task_id);
    service.pool.release(&claim.scope).await;
}
