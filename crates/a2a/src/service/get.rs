//! GetTask and ListTasks: the caller's tasks as they are now, the live view while a run lasts,
//! else the file (a settled task through the cache).

use crate::auth::Caller;
use crate::error::Error;
use crate::request::Reply;
use crate::task::TaskFile;
use crate::task::query::{apply_history_length, history_length};
use crate::task::read::Loaded;
use crate::task::view::{TaskPage, TaskView};

use super::Service;

/// GetTask: the caller's task, its history cut to `historyLength`.
///
/// # Errors
/// [`crate::A2aError::TaskNotFound`] for an unknown task or another caller's;
/// [`crate::A2aError::InvalidParams`] for a negative `historyLength`.
pub(super) async fn get_task(
    service: &Service,
    caller: &Caller,
    req: &a2a::GetTaskRequest,
) -> Result<Reply, Error> {
    Ok(match task(service, caller, &req.id).await? {
        Loaded::Settled(cached) => {
            let history = history_length("historyLength", req.history_length)?;
            Reply::TaskView(TaskView::new(cached, history, true))
        }
        Loaded::File(file) => {
            let mut task = file.task;
            apply_history_length(&mut task, req.history_length)?;
            Reply::Task(task)
        }
    })
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
    let live = service.live.clone();
    service.store.list_page(caller, req, &move |id: &str| live.is_live(id)).await
}

/// The caller's task: the live view while its run lasts, else the file (a settled task
/// through the cache).
pub(super) async fn task(
    service: &Service,
    caller: &Caller,
    task_id: &str,
) -> Result<Loaded, Error> {
    if let Some(live) = service.live.get(task_id)
        && live.caller == *caller
    {
        let task = live.snapshot().await;
        let file = TaskFile {
            task,
            caller: caller.name.clone(),
            push_configs: Vec::new(),
            events: Default::default(),
            accepted: Vec::new(),
        };
        return Ok(Loaded::File(Box::new(file)));
    }
    let live = service.live.clone();
    service.store.load_view(caller, task_id, &move |id: &str| live.is_live(id)).await
}
