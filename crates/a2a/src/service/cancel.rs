//! CancelTask: a live task's run is aborted and awaited; any other task that has not ended is
//! marked canceled in its file, under a hold on its context so no run starts from the old file.

use std::time::Duration;

use a2a::{TaskState, TaskStatus};

use crate::auth::Caller;
use crate::error::{A2aError, Error};
use crate::task::state::state_name;
use crate::task::status::now;

use super::Service;
use super::stream::wait_finished;

/// How long CancelTask waits for an aborted run to settle.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

pub(super) async fn cancel(
    service: &Service,
    caller: &Caller,
    task_id: &str,
) -> Result<a2a::Task, Error> {
    let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
    loop {
        if let Some(live) = service.live.get(task_id)
            && live.caller == *caller
        {
            let finished = live.finished();
            live.abort();
            return match tokio::time::timeout_at(deadline, wait_finished(finished)).await {
                Ok(Some(task)) => Ok(task),
                Ok(None) | Err(_) => Ok(live.snapshot().await),
            };
        }
        let live = service.live.clone();
        let file = service.store.load(caller, task_id, &move |id: &str| live.is_live(id)).await?;
        let state = file.task.status.state.clone();
        if state.is_terminal() {
            return Err(A2aError::TaskNotCancelable {
                task_id: task_id.to_string(),
                state: state_name(&state).into(),
            }
            .into());
        }
        // Hold the context so a continuation cannot start between our read and our write.
        match service.pool.try_hold(caller, &file.task.context_id).await {
            Some(hold) => {
                let live = service.live.clone();
                let mut file =
                    service.store.load(caller, task_id, &move |id: &str| live.is_live(id)).await?;
                let state = file.task.status.state.clone();
                let result = if state.is_terminal() {
                    Err(A2aError::TaskNotCancelable {
                        task_id: task_id.to_string(),
                        state: state_name(&state).into(),
                    }
                    .into())
                } else {
                    if let Some(old) = file.task.status.message.take() {
                        file.task.history.get_or_insert_with(Vec::new).push(old);
                    }
                    file.task.status = TaskStatus {
                        state: TaskState::Canceled,
                        message: None,
                        timestamp: Some(now()),
                    };
                    let saved = service.store.save(&caller.workspace, &file).await;
                    if saved.is_ok() {
                        service.push.notify(&file.task, &file.push_configs);
                    }
                    saved.map(|()| file.task).map_err(Error::from)
                };
                service.pool.release_hold(hold).await;
                return result;
            }
            // The context is busy: this task is about to run again (it will be live in a
            // moment), or another task of the context runs. Look again shortly.
            None if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            None => return Err(Error::ContextBusy),
        }
    }
}
