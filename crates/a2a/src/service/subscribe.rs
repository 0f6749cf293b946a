//! SubscribeToTask: the caller follows a live task's events; a task that will not change gets
//! one closing stream, a terminal one is refused. With the position of the last event a client
//! got (`Last-Event-ID`), the stream resumes after it instead: the events it missed, from the
//! running task's log or from the task file's record of its last run, then the live ones; a
//! position no longer held starts from the task, as without one (docs/a2a.md, "Resuming a
//! stream").

use crate::auth::Caller;
use crate::error::Error;
use crate::run::event_log::Resumed;
use crate::task::events::EventId;
use crate::task::state::state_name;

use super::stream::{closing_stream, replay_stream, resumed_stream, task_stream};
use super::{Outcome, Service};

pub(super) async fn subscribe(
    service: &Service,
    caller: &Caller,
    task_id: &str,
    after: Option<EventId>,
) -> Result<Outcome, Error> {
    if let Some(live) = service.tasks.live(caller, task_id) {
        let stream = match after {
            None => task_stream(live.subscribe().await, live),
            Some(from) => match live.resume(from).await {
                Resumed::Missed { missed, ended, events, finished } => {
                    resumed_stream(missed, ended, events, finished, live)
                }
                Resumed::From(start) => task_stream(*start, live),
            },
        };
        return Ok(Outcome::Stream(stream));
    }
    let file = service.tasks.load(caller, task_id).await?;
    // Not live, so at rest: terminal, or interrupted with no run.
    let position = file.events.status_position();
    if let Some(from) = after {
        let stream = match file.events.replay(&file.task, from) {
            Some(missed) => replay_stream(missed),
            None => closing_stream(file.task, position, file.events.generation()),
        };
        return Ok(Outcome::Stream(stream));
    }
    let state = file.task.status.state.clone();
    if state.is_terminal() {
        return Err(Error::Ended { task_id: task_id.to_string(), state: state_name(&state) });
    }
    let generation = file.events.generation();
    Ok(Outcome::Stream(closing_stream(file.task, position, generation)))
}
