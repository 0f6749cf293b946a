//! The streams the streaming operations answer with: a live task's events from a snapshot on
//! (catching up after a lag), a resumed stream's missed events and then the live ones, or the
//! one-shot stream of a task that will not change. Every event carries its position
//! (`task::events`), the SSE `id:` a client resumes from.

use std::collections::VecDeque;
use std::sync::Arc;

use a2a::StreamResponse;
use tokio::sync::{broadcast, watch};

use crate::run::event_log::{Event, Subscription};
use crate::run::live::LiveTask;
use crate::task::events::{EventId, StreamEvent, status_event};
use crate::task::state::ends_stream;

use super::EventStream;

pub(super) async fn wait_finished(
    mut finished: watch::Receiver<Option<a2a::Task>>,
) -> Option<a2a::Task> {
    let task = match finished.wait_for(Option::is_some).await {
        Ok(task) => task.clone(),
        Err(_) => None,
    };
    task.or_else(|| finished.borrow().clone())
}

/// What a blocking answer waits for: the task once its run has ended, with its generation then
/// (nothing changes a run's task after its end), or once the run pauses for the owner's
/// approval of a tool call (AUTH_REQUIRED is an interrupted state: the answer goes out there);
/// the task as it is now when the run went away without a final task.
pub(super) async fn wait_settled(live: &LiveTask) -> (a2a::Task, u64) {
    let finished = wait_finished(live.finished());
    tokio::pin!(finished);
    let mut generations = live.generations();
    let mut generations_open = true;
    loop {
        tokio::select! {
            task = &mut finished => {
                return match task {
                    Some(task) => (task, *live.generations().borrow()),
                    None => live.view().await,
                };
            }
            changed = generations.changed(), if generations_open => {
                if changed.is_err() {
                    // Cannot happen while `live` is held; then only the end is waited for.
                    generations_open = false;
                    continue;
                }
                // Each event moves the generation (every chunk of a streamed answer): look at the
                // state alone, and copy the task only to answer.
                if live.state().await == a2a::TaskState::AuthRequired {
                    return live.view().await;
                }
            }
        }
    }
}

/// A task that will not change while this stream is open, whose status is the event at
/// `position` and generation `generation`: the task, then its status (0.3 callers see
/// `final: true` on it), then the end. The task goes out at the position before its status, so
/// the ids increase; it already shows that status, which the next event repeats (a status
/// update replaces the status, so applying it twice changes nothing). Both carry the task's
/// generation: the edge drops the repeat for callers that see generations (`binding`).
pub(super) fn closing_stream(task: a2a::Task, position: EventId, generation: u64) -> EventStream {
    let status = StreamEvent { id: position, generation, response: status_event(&task) };
    let task =
        StreamEvent { id: position.before(), generation, response: StreamResponse::Task(task) };
    Box::pin(futures_util::stream::iter([task, status]))
}

/// Events replayed from a task at rest, then the end.
pub(super) fn replay_stream(events: Vec<StreamEvent>) -> EventStream {
    Box::pin(futures_util::stream::iter(events))
}

/// The task first, then live events until the task is terminal or interrupted. A stream that
/// falls behind gets the answer so far in one replacing artifact update among the events it
/// still has queued (never the chunks it already holds, and always the final status).
pub(super) fn task_stream(start: Subscription, live: Arc<LiveTask>) -> EventStream {
    let Subscription { snapshot, position, generation, events, finished } = start;
    if ends_stream(&snapshot.status.state) {
        return closing_stream(snapshot, position, generation);
    }
    let first = StreamEvent { id: position, generation, response: StreamResponse::Task(snapshot) };
    Box::pin(futures_util::StreamExt::chain(
        futures_util::stream::iter([first]),
        follow(events, finished, live),
    ))
}

/// A resumed stream: the events the client missed, then, unless the task's stream has ended,
/// the live events after them. `events` was subscribed under the task's lock right where
/// `missed` ends, so nothing is repeated and nothing is skipped at the seam.
pub(super) fn resumed_stream(
    missed: Vec<StreamEvent>,
    ended: bool,
    events: broadcast::Receiver<Event>,
    finished: watch::Receiver<Option<a2a::Task>>,
    live: Arc<LiveTask>,
) -> EventStream {
    let missed = futures_util::stream::iter(missed);
    if ended {
        return Box::pin(missed);
    }
    Box::pin(futures_util::StreamExt::chain(missed, follow(events, finished, live)))
}

/// The live events after a subscription, up to and with the one that ends the stream.
fn follow(
    events: broadcast::Receiver<Event>,
    finished: watch::Receiver<Option<a2a::Task>>,
    live: Arc<LiveTask>,
) -> impl futures_util::Stream<Item = StreamEvent> + Send {
    let follow = Follow { events, finished, live, caught_up: VecDeque::new(), closed: false };
    futures_util::stream::unfold(Some(follow), |state| async move {
        let mut follow = state?;
        let item = follow.next().await?;
        let last = matches!(&item.response,
            StreamResponse::StatusUpdate(u) if ends_stream(&u.status.state));
        Some((item, if last { None } else { Some(follow) }))
    })
}

/// A stream's place in a live task's events.
struct Follow {
    events: broadcast::Receiver<Event>,
    finished: watch::Receiver<Option<a2a::Task>>,
    live: Arc<LiveTask>,
    /// What a catch-up after a lag produced and the stream has not sent yet.
    caught_up: VecDeque<StreamEvent>,
    /// The run ended without this stream seeing its last status, which it has now been sent.
    closed: bool,
}

impl Follow {
    /// The next event for the stream; `None` when there is nothing more to send.
    async fn next(&mut self) -> Option<StreamEvent> {
        loop {
            if let Some(item) = self.caught_up.pop_front() {
                return Some(item);
            }
            match self.events.recv().await {
                Ok(item) => return Some(Arc::unwrap_or_clone(item)),
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    self.caught_up.extend(self.live.catch_up(&mut self.events).await);
                }
                Err(broadcast::error::RecvError::Closed) => {
                    if self.closed {
                        return None;
                    }
                    self.closed = true;
                    let task = wait_finished(self.finished.clone()).await?;
                    let (id, generation) = self.live.position().await;
                    return Some(StreamEvent { id, generation, response: status_event(&task) });
                }
            }
        }
    }
}
