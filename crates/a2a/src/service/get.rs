//! GetTask and ListTasks: the caller's tasks as they are now, the live view while a run lasts,
//! else the file (a settled task through the cache). GetTask with `currentGeneration` (the
//! task-generation extension) first waits, bounded by `A2A__MaxGenerationWait`, until the
//! task has moved past that generation.

use crate::auth::Caller;
use crate::error::Error;
use crate::request::Reply;
use crate::task::json::Artifacts;
use crate::task::query::{apply_history_length, history_length};
use crate::task::read::Loaded;
use crate::task::view::{TaskPage, TaskView};

use super::Service;

/// GetTask: the caller's task, its history cut to `historyLength`, and its generation; with
/// `after` (`currentGeneration`), once its generation is above it or the wait's bound is
/// reached, whichever comes first.
///
/// # Errors
/// [`crate::A2aError::TaskNotFound`] for an unknown task or another caller's;
/// [`crate::A2aError::InvalidParams`] for a negative `historyLength`.
pub(super) async fn get_task(
    service: &Service,
    caller: &Caller,
    req: &a2a::GetTaskRequest,
    after: Option<u64>,
) -> Result<(Reply, u64), Error> {
    // Refused before any wait.
    let history = history_length("historyLength", req.history_length)?;
    let loaded = match after {
        None => service.tasks.view(caller, &req.id).await?,
        Some(after) => {
            let deadline = tokio::time::Instant::now() + service.options.max_generation_wait;
            service.tasks.view_after(caller, &req.id, after, deadline).await?
        }
    };
    let generation = loaded.generation();
    let reply = match loaded {
        Loaded::Settled(cached) => {
            Reply::TaskView(TaskView::new(cached, history, Artifacts::Shown))
        }
        Loaded::File(file) => {
            let mut task = file.task;
            apply_history_length(&mut task, req.history_length)?;
            Reply::Task(task)
        }
    };
    Ok((reply, generation))
}

/// ListTasks: one page of the caller's tasks.
///
/// # Errors
/// [`crate::A2aError::InvalidParams`] for a bad filter or page token; [`crate::A2aError::Internal`] when the
/// task folder cannot be read.
pub(super) async fn list_tasks(
    service: &Service,
    caller: &Caller,
    req: &a2a::ListTasksRequest,
) -> Result<TaskPage, Error> {
    service.tasks.page(caller, req).await
}
