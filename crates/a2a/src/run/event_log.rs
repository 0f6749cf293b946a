//! A running task's event log: the last [`LOG_CAPACITY`] events of its run, each with its
//! position, and the ring that carries them to the streams following the task. SubscribeToTask
//! with `Last-Event-ID` replays from here what a client missed; the run's last events go into its
//! task file from here (`task::events`), for resumes after the run has gone.
//!
//! Invariant: the log is only ever changed under its task's lock (`LiveTask`'s), by the one
//! call that also sends the event to the ring. So a stream that reads the log after a position
//! and subscribes to the ring under that lock gets every event after the position exactly once:
//! the log ends where the ring begins (the seam a resumed stream crosses).

use std::collections::VecDeque;
use std::sync::Arc;

use a2a::StreamResponse;
use tokio::sync::{broadcast, watch};

use crate::task::events::{
    EventId, RecordedEvent, StreamEvent, TAIL_BYTES, TAIL_EVENTS, content_bytes,
};

/// Events a task's log keeps, and a stream's ring holds, before the oldest go. A stream that
/// falls this far behind skips ahead (it still gets the final status); a resume from a position
/// older than the log starts from the task instead.
pub const LOG_CAPACITY: usize = 1024;

/// An event in the log and the ring, shared by both and by every stream (one allocation each).
pub type Event = Arc<StreamEvent>;

/// A running task's recent events and their ring.
pub struct EventLog {
    /// Every event after this position is in `events` (or has not happened yet).
    after: EventId,
    events: VecDeque<Event>,
    ring: broadcast::Sender<Event>,
}

impl EventLog {
    /// An empty log of a task whose latest event is at `now` (made when its first stream
    /// subscribes: the log holds what follows).
    pub fn new(now: EventId) -> Self {
        EventLog { after: now, events: VecDeque::new(), ring: broadcast::channel(LOG_CAPACITY).0 }
    }

    /// Keeps the event and sends it to the streams (none listening is fine: a client that left
    /// may come back for it).
    pub fn record(&mut self, event: Event) {
        if self.events.len() == LOG_CAPACITY
            && let Some(oldest) = self.events.pop_front()
        {
            self.after = oldest.id;
        }
        self.events.push_back(event.clone());
        if self.ring.receiver_count() > 0 {
            // Only fails when no stream listens, checked just above.
            let _ = self.ring.send(event);
        }
    }

    /// A receiver of every event recorded after this call.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.ring.subscribe()
    }

    /// The events after `from`, when the log holds all of them: `from` is not older than the
    /// log and not ahead of `now`, the task's latest position.
    pub fn since(&self, from: EventId, now: EventId) -> Option<Vec<StreamEvent>> {
        if from < self.after || from > now {
            return None;
        }
        Some(self.events.iter().filter(|e| e.id > from).map(|e| StreamEvent::clone(e)).collect())
    }

    /// The last events, as the task file keeps them: at most [`TAIL_EVENTS`], with at most
    /// [`TAIL_BYTES`] of content, contiguous up to the latest.
    pub fn tail(&self) -> Vec<RecordedEvent> {
        let mut bytes = 0usize;
        let mut tail: Vec<RecordedEvent> = Vec::new();
        for event in self.events.iter().rev().take(TAIL_EVENTS) {
            bytes = bytes.saturating_add(content_bytes(&event.response));
            if bytes > TAIL_BYTES {
                break;
            }
            tail.push(RecordedEvent { seq: event.id.seq, event: event.response.clone() });
        }
        tail.reverse();
        tail
    }
}

/// A stream's start on a live task: the task, the position and generation it shows, and its
/// events after it.
pub struct Subscription {
    pub snapshot: a2a::Task,
    pub position: EventId,
    pub generation: u64,
    pub events: broadcast::Receiver<Event>,
    pub finished: watch::Receiver<Option<a2a::Task>>,
}

/// How a resumed stream starts (`LiveTask::resume`).
pub enum Resumed {
    /// The events the client missed, then `events`; `ended` when the last of them (or the one
    /// the client had) ended the stream, so nothing follows.
    Missed {
        missed: Vec<StreamEvent>,
        ended: bool,
        events: broadcast::Receiver<Event>,
        finished: watch::Receiver<Option<a2a::Task>>,
    },
    /// The log no longer holds (or never held) the client's position: start from the task.
    From(Box<Subscription>),
}

/// What a stream that fell behind gets instead of the events it lost and the ones still queued:
/// those events in order, less the chunks of the response artifact, with the response as it is
/// now (`replacement`, one replacing update) where the last of those chunks was. Nothing about
/// the response changes after its last chunk, so the replacement shows the response as of that
/// chunk's position and keeps its id: the ids still increase, and each still names the state
/// the client has reached. Without a queued chunk the replacement comes first, at the position
/// (and generation) before the first queued event, or at `now` and `now_generation` when none is
/// queued.
pub fn catch_up(
    queued: Vec<Event>,
    response_id: &str,
    now: EventId,
    now_generation: u64,
    replacement: impl Fn(bool) -> Option<StreamResponse>,
) -> Vec<StreamEvent> {
    let is_response = |event: &StreamEvent| {
        matches!(&event.response, StreamResponse::ArtifactUpdate(update)
            if update.artifact.artifact_id == response_id)
    };
    let last = queued.iter().rposition(|event| is_response(event));
    let mut caught = Vec::with_capacity(queued.len() + 1);
    if last.is_none() {
        // The event before the first queued one was lost in the lag, so its generation is
        // free for the replacement, as is the latest one when nothing is queued.
        let (id, generation) = queued.first().map_or((now, now_generation), |event| {
            (event.id.before(), event.generation.saturating_sub(1).max(1))
        });
        if let Some(response) = replacement(false) {
            caught.push(StreamEvent { id, generation, response });
        }
    }
    for (i, event) in queued.into_iter().enumerate() {
        if !is_response(&event) {
            caught.push(Arc::unwrap_or_clone(event));
        } else if Some(i) == last {
            let last_chunk = matches!(&event.response, StreamResponse::ArtifactUpdate(update)
                if update.last_chunk == Some(true));
            if let Some(response) = replacement(last_chunk) {
                caught.push(StreamEvent { id: event.id, generation: event.generation, response });
            }
        }
    }
    caught
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(seq: u32) -> EventId {
        EventId { run: 1, seq }
    }

    fn artifact(artifact_id: &str, text: &str, last_chunk: bool) -> StreamResponse {
        crate::task::events::artifact_chunk(artifact_id, text, last_chunk)
    }

    fn status(text: &str) -> StreamResponse {
        StreamResponse::StatusUpdate(a2a::TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: text.into(),
            status: a2a::TaskStatus {
                state: a2a::TaskState::Working,
                message: None,
                timestamp: None,
            },
            metadata: None,
        })
    }

    fn event(seq: u32, response: StreamResponse) -> Event {
        Arc::new(StreamEvent { id: id(seq), generation: u64::from(seq), response })
    }

    fn ids(events: &[StreamEvent]) -> Vec<u32> {
        events.iter().map(|e| e.id.seq).collect()
    }

    #[test]
    fn a_log_replays_exactly_what_follows_a_position_it_holds() {
        let mut log = EventLog::new(id(1));
        for seq in 2..=5 {
            log.record(event(seq, status("s")));
        }
        assert_eq!(log.since(id(1), id(5)).map(|e| ids(&e)), Some(vec![2, 3, 4, 5]));
        assert_eq!(log.since(id(3), id(5)).map(|e| ids(&e)), Some(vec![4, 5]));
        assert_eq!(log.since(id(5), id(5)).map(|e| ids(&e)), Some(vec![]));
        assert_eq!(log.since(id(0), id(5)), None, "older than the log");
        assert_eq!(log.since(id(6), id(5)), None, "ahead of the task");
        assert_eq!(log.since(EventId { run: 0, seq: 9 }, id(5)), None, "another run");
    }

    #[test]
    fn a_full_log_forgets_its_oldest_events_and_says_so() {
        let mut log = EventLog::new(id(0));
        let total = u32::try_from(LOG_CAPACITY).unwrap() + 10;
        for seq in 1..=total {
            log.record(event(seq, status("s")));
        }
        assert_eq!(log.since(id(9), id(total)), None);
        assert_eq!(log.since(id(10), id(total)).map(|e| e.len()), Some(LOG_CAPACITY));
    }

    #[test]
    fn a_subscriber_gets_what_is_recorded_after_it_subscribed() {
        let mut log = EventLog::new(id(0));
        log.record(event(1, status("before")));
        let mut ring = log.subscribe();
        log.record(event(2, status("after")));
        assert_eq!(ring.try_recv().unwrap().id, id(2));
        assert!(ring.try_recv().is_err());
    }

    #[test]
    fn the_tail_is_the_last_events_within_its_bounds() {
        let mut log = EventLog::new(id(0));
        for seq in 1..=40 {
            log.record(event(seq, artifact("r", "x", false)));
        }
        let tail = log.tail();
        assert_eq!(tail.len(), TAIL_EVENTS);
        assert_eq!(tail.last().map(|e| e.seq), Some(40));
        assert_eq!(tail.first().map(|e| e.seq), Some(41 - u32::try_from(TAIL_EVENTS).unwrap()));
        log.record(event(41, artifact("r", &"y".repeat(TAIL_BYTES + 1), true)));
        log.record(event(42, status("s")));
        assert_eq!(log.tail().iter().map(|e| e.seq).collect::<Vec<_>>(), vec![42]);
    }

    #[test]
    fn catch_up_puts_the_replacement_at_the_last_chunk_and_keeps_ids_increasing() {
        let replacement = |last: bool| Some(artifact("r", "whole", last));
        let queued = vec![
            event(7, artifact("r", "a", false)),
            event(8, status("using bash")),
            event(9, artifact("r", "b", true)),
            event(10, artifact("other", "file", true)),
            event(11, status("done")),
        ];
        let caught = catch_up(queued, "r", id(11), 11, replacement);
        assert_eq!(ids(&caught), vec![8, 9, 10, 11]);
        assert_eq!(caught[1].response, artifact("r", "whole", true));
        // Each keeps the generation of the event at its position: increasing, never repeated.
        let generations: Vec<u64> = caught.iter().map(|e| e.generation).collect();
        assert_eq!(generations, vec![8, 9, 10, 11]);

        // No chunk queued: the replacement comes first, before the first queued event.
        let caught = catch_up(vec![event(20, status("s"))], "r", id(20), 20, replacement);
        assert_eq!(ids(&caught), vec![19, 20]);
        assert_eq!(caught.iter().map(|e| e.generation).collect::<Vec<_>>(), vec![19, 20]);
        assert_eq!(caught[0].response, artifact("r", "whole", false));
        let caught = catch_up(Vec::new(), "r", id(30), 30, replacement);
        assert_eq!(ids(&caught), vec![30]);
        assert_eq!(caught[0].generation, 30);
    }
}
