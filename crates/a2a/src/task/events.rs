//! Where a task's event stream stands, the vocabulary every layer shares: an [`EventId`] (the
//! position an SSE `id:` names, what `Last-Event-ID` gives back) and the [`EventRecord`] a task
//! file keeps, with the last events of its last run, so a settled task can be resumed after the
//! run has gone and after a restart. It sits beside the task files and imports nothing of the
//! crate; the live log of a running task is `event_log.rs`.
//!
//! Positions: every event a task's streams carry (a status update, an artifact update) is
//! numbered `<run>.<seq>`: `run` counts the runs of the task (each message that starts or
//! continues it, and each change of its status outside a run: a cancel, the hop guard, restart
//! recovery), `seq` its events in that run, from 1. An id names the state a client has reached
//! after applying the event that carried it, so "the events after id X" is well defined. A run
//! number is written in the task file when the run starts (its first write), so a new run never
//! reuses the positions of one that was lost in a crash.
//!
//! Generations (the task-generation extension, docs/a2a.md): a task's generation counts its
//! events across all its runs, one per event, so it is 1 once the task exists (its first
//! status) and rises by exactly one with each status or artifact change that goes out as an
//! event. It is kept beside the position in the task file; a task file written before
//! generations reads as generation 1.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How many of a run's last events a task file keeps (besides its final status, which is the
/// task's own status).
pub const TAIL_EVENTS: usize = 16;

/// How many bytes of content (text, file bytes, data) those events may hold in all: the tail
/// rides on the run's last durable write, which must not carry a second copy of a large answer.
pub const TAIL_BYTES: usize = 16 * 1024;

/// A position in a task's event sequence (see the module docs); ordered by run, then event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId {
    pub run: u32,
    pub seq: u32,
}

impl EventId {
    /// Reads an id as this server writes it, `<run>.<seq>` in decimal; `None` for anything else.
    pub fn parse(text: &str) -> Option<EventId> {
        let (run, seq) = text.trim().split_once('.')?;
        let number = |part: &str| {
            if part.is_empty() || part.len() > 10 || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse::<u32>().ok()
        };
        Some(EventId { run: number(run)?, seq: number(seq)? })
    }

    /// The position before this one in the same run (the start of the run for its first event).
    pub fn before(self) -> EventId {
        EventId { run: self.run, seq: self.seq.saturating_sub(1) }
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.run, self.seq)
    }
}

/// An event of a task's stream with its position: what an SSE frame carries (`id:` and `data:`),
/// and the task's generation after it (shown only to callers that activate the extension).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvent {
    pub id: EventId,
    pub generation: u64,
    pub response: a2a::StreamResponse,
}

/// An event as a task file keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedEvent {
    pub seq: u32,
    pub event: a2a::StreamResponse,
}

/// What a task file records of its event stream: the run, the position of its latest event (at
/// rest: its status, the run's last event), the task's generation, and the run's last events
/// before it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    pub run: u32,
    pub seq: u32,
    /// The task's generation (see the module docs): 0 only in a record no event has advanced
    /// yet; absent in files written before generations, which read as 1.
    #[serde(default = "legacy_generation")]
    pub generation: u64,
    /// The run's last events before its final status, contiguous and ending at `seq - 1`;
    /// written with the run's last state only, empty while it runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tail: Vec<RecordedEvent>,
}

impl EventRecord {
    /// The record of a task file written before event ids (no `streamEvents`): its task exists,
    /// so its generation is 1.
    pub fn legacy() -> Self {
        EventRecord { generation: legacy_generation(), ..EventRecord::default() }
    }

    /// Whether the record is [`EventRecord::legacy`], which a task file need not write (it
    /// reads back the same without it).
    pub fn is_legacy(&self) -> bool {
        *self == EventRecord::legacy()
    }

    /// The task's generation now (see the module docs).
    pub fn generation(&self) -> u64 {
        self.generation.max(1)
    }

    /// Starts a new run: positions continue at `<run + 1>.1`.
    pub fn begin_run(&mut self) {
        self.run = self.run.saturating_add(1);
        self.seq = 0;
        self.tail.clear();
    }

    /// Takes the next position of the run; the task's generation rises by one with it.
    pub fn advance(&mut self) -> EventId {
        self.seq = self.seq.saturating_add(1);
        self.generation = self.generation.saturating_add(1);
        self.position()
    }

    /// The generation of the event at `id`, an event of this record's run up to its latest
    /// (the run's events are consecutive in both counts).
    fn generation_at(&self, id: EventId) -> u64 {
        let back = u64::from(self.seq.saturating_sub(id.seq));
        self.generation().saturating_sub(back).max(1)
    }

    /// The position of the latest event.
    pub fn position(&self) -> EventId {
        EventId { run: self.run, seq: self.seq }
    }

    /// Records a change of a task's status made outside any run (a cancel, the hop guard,
    /// restart recovery): a run of its own, whose one event is that status.
    pub fn record_status_change(&mut self) {
        self.begin_run();
        self.advance();
    }

    /// The position of a task at rest: its status is the event at `seq` (a file written before
    /// event ids counts its status as the first event of run 0).
    pub fn status_position(&self) -> EventId {
        EventId { run: self.run, seq: self.seq.max(1) }
    }

    /// The events of a task at rest after `from`: the recorded tail and then the task's status.
    /// `None` when the record does not hold all of them (`from` is before the tail, in another
    /// run, or after the status): the caller then starts from a snapshot.
    pub fn replay(&self, task: &a2a::Task, from: EventId) -> Option<Vec<StreamEvent>> {
        let end = self.status_position();
        let contiguous = self.tail.iter().enumerate().all(|(i, event)| {
            let offset = u32::try_from(self.tail.len() - i).unwrap_or(u32::MAX);
            end.seq.checked_sub(offset) == Some(event.seq)
        });
        let tail: &[RecordedEvent] = if contiguous { &self.tail } else { &[] };
        let start = EventId { run: end.run, seq: tail.first().map_or(end.seq, |e| e.seq) }.before();
        if from < start || from > end {
            return None;
        }
        let mut events: Vec<StreamEvent> = tail
            .iter()
            .map(|e| {
                let id = EventId { run: end.run, seq: e.seq };
                StreamEvent { id, generation: self.generation_at(id), response: e.event.clone() }
            })
            .filter(|event| event.id > from)
            .collect();
        if end > from {
            events.push(StreamEvent {
                id: end,
                generation: self.generation(),
                response: status_event(task),
            });
        }
        Some(events)
    }
}

/// What a task file written before generations counts as its generation.
fn legacy_generation() -> u64 {
    1
}

/// The status update that carries a task's current status.
pub fn status_event(task: &a2a::Task) -> a2a::StreamResponse {
    a2a::StreamResponse::StatusUpdate(a2a::TaskStatusUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        status: task.status.clone(),
        metadata: None,
    })
}

/// About how many bytes of content an event holds (what [`TAIL_BYTES`] bounds): its texts, file
/// bytes and data, not the fixed fields around them.
pub fn content_bytes(event: &a2a::StreamResponse) -> usize {
    let parts = |parts: &[a2a::Part]| -> usize {
        parts
            .iter()
            .map(|part| match &part.content {
                a2a::PartContent::Text(text) => text.len(),
                a2a::PartContent::Raw(bytes) => bytes.len().saturating_mul(4) / 3,
                a2a::PartContent::Url(url) => url.len(),
                a2a::PartContent::Data(value) => value.to_string().len(),
            })
            .sum()
    };
    match event {
        a2a::StreamResponse::ArtifactUpdate(update) => parts(&update.artifact.parts),
        a2a::StreamResponse::StatusUpdate(update) => {
            update.status.message.as_ref().map_or(0, |message| parts(&message.parts))
        }
        a2a::StreamResponse::Message(message) => parts(&message.parts),
        a2a::StreamResponse::Task(_) => usize::MAX,
    }
}

/// An artifact chunk of task `t` in context `c`, for the event tests here and in `event_log`.
#[cfg(test)]
pub(crate) fn artifact_chunk(
    artifact_id: &str,
    text: &str,
    last_chunk: bool,
) -> a2a::StreamResponse {
    a2a::StreamResponse::ArtifactUpdate(a2a::TaskArtifactUpdateEvent {
        task_id: "t".into(),
        context_id: "c".into(),
        artifact: a2a::Artifact {
            artifact_id: artifact_id.into(),
            name: None,
            description: None,
            parts: vec![a2a::Part::text(text)],
            metadata: None,
            extensions: None,
        },
        append: Some(true),
        last_chunk: Some(last_chunk),
        metadata: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(state: a2a::TaskState) -> a2a::Task {
        a2a::Task {
            id: "t".into(),
            context_id: "c".into(),
            status: a2a::TaskStatus { state, message: None, timestamp: None },
            artifacts: None,
            history: None,
            metadata: None,
        }
    }

    fn chunk(text: &str) -> a2a::StreamResponse {
        artifact_chunk("a", text, false)
    }

    #[test]
    fn event_ids_parse_what_they_print_and_nothing_else() {
        let id = EventId { run: 3, seq: 17 };
        assert_eq!(id.to_string(), "3.17");
        assert_eq!(EventId::parse("3.17"), Some(id));
        assert_eq!(EventId::parse(" 3.17 "), Some(id));
        for bad in ["", "3", "3.", ".3", "3.17.1", "-1.2", "+1.2", "a.b", "1.99999999999", "3,17"] {
            assert_eq!(EventId::parse(bad), None, "{bad:?}");
        }
        assert!(EventId { run: 2, seq: 900 } < EventId { run: 3, seq: 1 });
    }

    #[test]
    fn replay_of_a_settled_task_gives_the_tail_after_the_id_then_the_status() {
        let task = task(a2a::TaskState::Completed);
        let record = EventRecord {
            run: 2,
            seq: 9,
            generation: 30,
            tail: vec![
                RecordedEvent { seq: 7, event: chunk("a") },
                RecordedEvent { seq: 8, event: chunk("b") },
            ],
        };
        let ids = |from| {
            record.replay(&task, from).map(|events| {
                events.into_iter().map(|event| event.id.to_string()).collect::<Vec<_>>()
            })
        };
        assert_eq!(
            ids(EventId { run: 2, seq: 6 }),
            Some(vec!["2.7".into(), "2.8".into(), "2.9".into()])
        );
        assert_eq!(ids(EventId { run: 2, seq: 8 }), Some(vec!["2.9".into()]));
        assert_eq!(ids(EventId { run: 2, seq: 9 }), Some(vec![]));
        // Before the tail, from an earlier run, or ahead of the task: not held.
        assert_eq!(ids(EventId { run: 2, seq: 5 }), None);
        assert_eq!(ids(EventId { run: 1, seq: 40 }), None);
        assert_eq!(ids(EventId { run: 2, seq: 10 }), None);
        assert_eq!(ids(EventId { run: 3, seq: 0 }), None);
        let events = record.replay(&task, EventId { run: 2, seq: 8 }).unwrap();
        assert_eq!(events[0].response, status_event(&task));
        // Generations count back from the task's with the positions of its last run.
        let events = record.replay(&task, EventId { run: 2, seq: 6 }).unwrap();
        let generations: Vec<u64> = events.iter().map(|event| event.generation).collect();
        assert_eq!(generations, vec![28, 29, 30]);
    }

    #[test]
    fn replay_ignores_a_tail_that_does_not_end_at_the_status() {
        let task = task(a2a::TaskState::Completed);
        let record = EventRecord {
            run: 1,
            seq: 9,
            generation: 9,
            tail: vec![RecordedEvent { seq: 5, event: chunk("a") }],
        };
        assert_eq!(record.replay(&task, EventId { run: 1, seq: 4 }), None);
        assert_eq!(record.replay(&task, EventId { run: 1, seq: 8 }).map(|e| e.len()), Some(1));
    }

    #[test]
    fn a_status_change_outside_a_run_is_a_run_of_its_own() {
        let mut record = EventRecord {
            run: 4,
            seq: 12,
            generation: 20,
            tail: vec![RecordedEvent { seq: 11, event: chunk("a") }],
        };
        record.record_status_change();
        assert_eq!(record, EventRecord { run: 5, seq: 1, generation: 21, tail: Vec::new() });
        assert_eq!(EventRecord::default().status_position(), EventId { run: 0, seq: 1 });
    }

    #[test]
    fn generation_starts_at_1_rises_by_one_per_event_and_is_1_in_older_files() {
        let mut record = EventRecord::default();
        record.begin_run();
        record.advance();
        assert_eq!(record.generation(), 1, "a new task's first status");
        record.advance();
        record.begin_run();
        record.advance();
        assert_eq!(record.generation(), 3, "counted across runs");

        // A task file written before generations (with or without event ids) reads as 1, and
        // its next event is 2.
        let file: super::super::TaskFile = serde_json::from_value(serde_json::json!({
            "id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
            "caller": "alice",
        }))
        .unwrap();
        assert_eq!(file.events.generation(), 1);
        let mut with_ids: EventRecord =
            serde_json::from_value(serde_json::json!({"run": 2, "seq": 5})).unwrap();
        assert_eq!(with_ids.generation(), 1);
        with_ids.record_status_change();
        assert_eq!(with_ids.generation(), 2);
    }
}
