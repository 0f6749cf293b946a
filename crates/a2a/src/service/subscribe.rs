//! SubscribeToTask: the caller follows a live task's events; a task that will not change gets
//! one closing stream, a terminal one is refused.

use crate::auth::Caller;
use crate::error::Error;
use crate::task::state::state_name;

use super::stream::{closing_stream, task_stream};
use super::{Outcome, Service};

pub(super) async fn subscribe(
    service: &Service,
    caller: &Caller,
    task_id: &str,
) -> Result<Outcome, Error> {
    if let Some(live) = service.tasks.live(caller, task_id) {
        let (snapshot, events, finished) = live.subscribe().await;
        return Ok(Outcome::Stream(task_stream(snapshot, events, finished, Some(live))));
    }
    let file = service.tasks.load(caller, task_id).await?;
    let state = file.task.status.state.clone();
    if state.is_terminal() {
        return Err(Error::Ended { task_id: task_id.to_string(), state: state_name(&state) });
    }
    Ok(Outcome::Stream(closing_stream(file.task)))
}
