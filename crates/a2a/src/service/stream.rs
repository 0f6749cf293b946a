//! The streams the streaming operations answer with: a live task's events from a snapshot on
//! (catching up after a lag), or the one-shot stream of a task that will not change.

use std::collections::VecDeque;
use std::sync::Arc;

use a2a::StreamResponse;
use tokio::sync::{broadcast, watch};

use crate::live::LiveTask;
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

/// A task that will not change while this stream is open: the task, then its status (0.3 callers
/// see `final: true` on it), then the end.
pub(super) fn closing_stream(task: a2a::Task) -> EventStream {
    let status = a2a::TaskStatusUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        status: task.status.clone(),
        metadata: None,
    };
    Box::pin(futures_util::stream::iter([
        StreamResponse::Task(task),
        StreamResponse::StatusUpdate(status),
    ]))
}

/// The task first, then live events until the task is terminal or interrupted. A stream that
/// falls behind gets the answer so far in one replacing artifact update, then the events after
/// it (never the chunks it already holds, and always the final status).
pub(super) fn task_stream(
    snapshot: a2a::Task,
    events: broadcast::Receiver<crate::live::Event>,
    finished: watch::Receiver<Option<a2a::Task>>,
    live: Option<Arc<LiveTask>>,
) -> EventStream {
    if ends_stream(&snapshot.status.state) {
        return closing_stream(snapshot);
    }
    let first = futures_util::stream::iter([StreamResponse::Task(snapshot)]);
    let follow = Follow { events, finished, live, caught_up: VecDeque::new(), closed: false };
    let rest = futures_util::stream::unfold(Some(follow), |state| async move {
        let mut follow = state?;
        let item = follow.next().await?;
        let last = matches!(&item, StreamResponse::StatusUpdate(u) if ends_stream(&u.status.state));
        Some((item, if last { None } else { Some(follow) }))
    });
    Box::pin(futures_util::StreamExt::chain(first, rest))
}

/// A stream's place in a live task's events.
struct Follow {
    events: broadcast::Receiver<crate::live::Event>,
    finished: watch::Receiver<Option<a2a::Task>>,
    live: Option<Arc<LiveTask>>,
    /// What a catch-up after a lag produced and the stream has not sent yet.
    caught_up: VecDeque<StreamResponse>,
    /// The run ended without this stream seeing its last status, which it has now been sent.
    closed: bool,
}

impl Follow {
    /// The next event for the stream; `None` when there is nothing more to send.
    async fn next(&mut self) -> Option<StreamResponse> {
        loop {
            if let Some(item) = self.caught_up.pop_front() {
                return Some(item);
            }
            match self.events.recv().await {
                Ok(item) => return Some(*item),
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    if let Some(task) = &self.live {
                        self.caught_up.extend(task.catch_up(&mut self.events).await);
                    }
                }
                Err(broadcast::error::RecvError::Closed) => {
                    if self.closed {
                        return None;
                    }
                    self.closed = true;
                    let task = wait_finished(self.finished.clone()).await?;
                    let update = a2a::TaskStatusUpdateEvent {
                        task_id: task.id.clone(),
                        context_id: task.context_id.clone(),
                        status: task.status.clone(),
                        metadata: None,
                    };
                    return Some(StreamResponse::StatusUpdate(update));
                }
            }
        }
    }
}
