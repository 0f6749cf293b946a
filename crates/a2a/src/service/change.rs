//! The one way the operations change a task they do not run (cancel, push configs): through its
//! [`LiveTask`] while its run lasts, else on its file under a hold of its context, so that no run
//! starts from the old file while the new one is written.
//!
//! A busy context (the task is about to run, or another task of the context starts or runs) is
//! waited for until the deadline: the wait ends when the pool frees a context or a task goes
//! live or ends, then everything is looked at again.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use crate::auth::Caller;
use crate::error::Error;
use crate::live::LiveTask;
use crate::task::TaskFile;

use super::Service;

/// What [`change_task`] did.
pub(super) enum Changed<T> {
    /// The run's task took the change; what `on_live` answered.
    Live(T),
    /// The file, as changed (and saved when `change` said it changed anything).
    File(Box<TaskFile>),
}

/// Changes the caller's task `task_id`. While its run lasts, `on_live` gets the live task
/// (`None`: the run has just ended, look again). Otherwise the file must pass `check`, then,
/// under a hold of its context, is read again, checked again, given to `change` and saved when
/// `change` says it changed.
///
/// # Errors
/// What `check` refuses; [`Error::ContextBusy`] when the context stays busy until `deadline`;
/// the store's errors (an unknown task or another caller's is TaskNotFound).
pub(super) async fn change_task<'a, T>(
    service: &Service,
    caller: &Caller,
    task_id: &str,
    deadline: Instant,
    mut on_live: impl FnMut(Arc<LiveTask>) -> BoxFuture<'a, Option<Result<T, Error>>>,
    check: impl Fn(&TaskFile) -> Result<(), Error>,
    mut change: impl FnMut(&mut TaskFile) -> bool,
) -> Result<Changed<T>, Error> {
    let is_live = {
        let live = service.live.clone();
        move |id: &str| live.is_live(id)
    };
    loop {
        // Enabled before the look, so a change between the look and the wait wakes the wait.
        let freed = service.pool.freed();
        let live_changed = service.live.changed();
        tokio::pin!(freed, live_changed);
        freed.as_mut().enable();
        live_changed.as_mut().enable();
        if let Some(live) = service.live.get(task_id)
            && live.caller == *caller
        {
            if let Some(result) = on_live(live).await {
                return result.map(Changed::Live);
            }
        } else {
            let file = service.store.load(caller, task_id, &is_live).await?;
            check(&file)?;
            // Under the hold no run of the context can start (or be running), so the file is
            // the truth and nothing writes it but us.
            if let Some(hold) = service.pool.try_hold(caller, &file.task.context_id).await {
                let result = async {
                    let mut file = service.store.load(caller, task_id, &is_live).await?;
                    check(&file)?;
                    if change(&mut file) {
                        service.store.save(&caller.workspace, &file).await?;
                    }
                    Ok(Changed::File(Box::new(file)))
                }
                .await;
                service.pool.release_hold(hold).await;
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
