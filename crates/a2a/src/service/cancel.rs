//! CancelTask: a live task's run is aborted and awaited; any other task that has not ended is
//! marked canceled in its file, under a hold on its context so no run starts from the old file.
//! A run that ended some other way before the abort reached it answers as it ended
//! (TaskNotCancelable for a terminal state), so a success always means a canceled task.

use std::sync::Arc;
use std::time::Duration;

use a2a::{TaskState, TaskStatus};
use futures_util::future::BoxFuture;

use crate::auth::Caller;
use crate::error::{A2aError, Error};
use crate::run::live::LiveTask;
use crate::task::TaskFile;
use crate::task::state::state_name;
use crate::task::status::retire_status_message;
use crate::tasks::Changed;

use super::Service;
use super::stream::wait_finished;

/// How long CancelTask waits for an aborted run to settle.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

pub(super) async fn cancel(
    service: &Service,
    caller: &Caller,
    task_id: &str,
) -> Result<(a2a::Task, u64), Error> {
    let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
    let on_live = |live: Arc<LiveTask>| -> BoxFuture<'static, _> {
        let task_id = task_id.to_string();
        Box::pin(async move {
            let finished = live.finished();
            live.abort();
            match tokio::time::timeout_at(deadline, wait_finished(finished)).await {
                // The run may have ended before the abort reached it: the answer says how the
                // task really ended.
                Ok(Some(task)) => match &task.status.state {
                    TaskState::Canceled => Some(Ok((task, *live.generations().borrow()))),
                    state if state.is_terminal() => Some(Err(A2aError::TaskNotCancelable {
                        task_id,
                        state: state_name(state).into(),
                    }
                    .into())),
                    // It stopped to ask for input: cancel it at rest, from its file.
                    _ => None,
                },
                Ok(None) | Err(_) => Some(Ok(live.view().await)),
            }
        })
    };
    let check = |file: &TaskFile| {
        let state = &file.task.status.state;
        if state.is_terminal() {
            return Err(A2aError::TaskNotCancelable {
                task_id: task_id.to_string(),
                state: state_name(state).into(),
            }
            .into());
        }
        Ok(())
    };
    let cancel = |file: &mut TaskFile| {
        retire_status_message(&mut file.task);
        file.task.status = TaskStatus {
            state: TaskState::Canceled,
            message: None,
            timestamp: Some(service.tasks.store().now()),
        };
        file.events.record_status_change();
        true
    };
    // A task that is not running is changed under a hold of its context, so a continuation
    // cannot start between our read and our write.
    match service.tasks.change(caller, task_id, deadline, on_live, check, cancel).await? {
        Changed::Live(task) => Ok(task),
        Changed::File(file) => {
            // A task that waited for the owner's approval waits no more.
            let approvals = service.approvals.clone();
            let (workspace, id) = (caller.workspace.path.clone(), file.task.id.clone());
            let taken =
                tokio::task::spawn_blocking(move || approvals.take_task(&workspace, &id)).await;
            if let Ok(Some(request)) = taken {
                service.approval_settled(&request.id, crate::approval::Settled::Canceled);
            }
            service.push.notify(&file.task, &file.push_configs);
            let generation = file.events.generation();
            Ok((file.task, generation))
        }
    }
}
