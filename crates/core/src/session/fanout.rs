//! Delivery of session events to any number of subscribers without ever blocking the run.
//!
//! Each subscriber has its own bounded queue. When it is full, the oldest event is evicted,
//! droppable ones (deltas, tool updates) first, and a `Settled` never: a subscriber that lags
//! loses detail but always learns how every run ended. Memory per subscriber is bounded by the
//! capacity plus one `Settled` per run it has not read.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::Notify;

use super::event::{EventKind, SessionEvent};

/// Events a subscriber may have queued before eviction starts.
pub const SUBSCRIBER_CAPACITY: usize = 1024;

struct Queue {
    events: VecDeque<Arc<SessionEvent>>,
    missed: u64,
    closed: bool,
}

struct Slot {
    queue: Mutex<Queue>,
    notify: Notify,
}

impl Slot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The publishing side, owned by the session.
#[derive(Default)]
pub(crate) struct Hub {
    slots: Mutex<Vec<Weak<Slot>>>,
}

impl Hub {
    pub(crate) fn subscribe(&self) -> EventStream {
        let slot = Arc::new(Slot {
            queue: Mutex::new(Queue { events: VecDeque::new(), missed: 0, closed: false }),
            notify: Notify::new(),
        });
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::downgrade(&slot));
        EventStream { slot, until_run: None, done: false }
    }

    pub(crate) fn publish(&self, event: Arc<SessionEvent>) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.retain(|weak| {
            let Some(slot) = weak.upgrade() else { return false };
            {
                let mut queue = slot.lock();
                if queue.events.len() >= SUBSCRIBER_CAPACITY {
                    if event.kind.is_droppable() {
                        queue.missed += 1;
                        return true;
                    }
                    evict_one(&mut queue.events);
                    queue.missed += 1;
                }
                queue.events.push_back(event.clone());
            }
            slot.notify.notify_one();
            true
        });
    }

    /// Ends every stream once its queue is drained.
    pub(crate) fn close(&self) {
        let slots = std::mem::take(&mut *self.slots.lock().unwrap_or_else(PoisonError::into_inner));
        for slot in slots.iter().filter_map(Weak::upgrade) {
            slot.lock().closed = true;
            slot.notify.notify_one();
        }
    }
}

fn evict_one(events: &mut VecDeque<Arc<SessionEvent>>) {
    let victim = events
        .iter()
        .position(|e| e.kind.is_droppable())
        .or_else(|| events.iter().position(|e| !matches!(e.kind, EventKind::Settled(_))));
    if let Some(pos) = victim {
        events.remove(pos);
    }
}

/// A subscriber's view of a session's events.
pub struct EventStream {
    slot: Arc<Slot>,
    until_run: Option<Arc<str>>,
    done: bool,
}

impl EventStream {
    /// A stream that ends after the `Settled` event of this run.
    pub(crate) fn for_run(mut self, run_id: Arc<str>) -> Self {
        self.until_run = Some(run_id);
        self
    }

    /// The next event; `None` once the session is closed (or, for a run's stream, after its
    /// `Settled`).
    ///
    /// # Cancel safety
    /// Cancel safe: an event is only taken from the queue when it is returned.
    pub async fn recv(&mut self) -> Option<Arc<SessionEvent>> {
        loop {
            if self.done {
                return None;
            }
            let notified = self.slot.notify.notified();
            {
                let mut queue = self.slot.lock();
                if let Some(event) = queue.events.pop_front() {
                    drop(queue);
                    match &self.until_run {
                        // A run's stream shows only that run (a new run may start while an
                        // older run's last events are still queued).
                        Some(run) if *run != event.run_id => continue,
                        Some(_) if matches!(event.kind, EventKind::Settled(_)) => self.done = true,
                        Some(_) | None => {}
                    }
                    return Some(event);
                }
                if queue.closed {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// How many events were evicted because this subscriber fell behind (gaps also show in `seq`).
    pub fn missed(&self) -> u64 {
        self.slot.lock().missed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::event::{RunOutcome, RunSettled};

    fn event(seq: u64, kind: EventKind) -> Arc<SessionEvent> {
        Arc::new(SessionEvent { session_id: "s".into(), run_id: "r".into(), seq, kind })
    }

    #[tokio::test]
    async fn lagging_subscriber_still_gets_settled() {
        let hub = Hub::default();
        let mut stream = hub.subscribe().for_run("r".into());
        for seq in 0..(SUBSCRIBER_CAPACITY as u64 * 3) {
            let kind = if seq % 2 == 0 {
                EventKind::TextDelta { index: 0, text: "x".into() }
            } else {
                EventKind::TurnStart { turn: seq as u32 }
            };
            hub.publish(event(seq, kind));
        }
        let settled = RunSettled {
            outcome: RunOutcome::Completed,
            final_text: "done".into(),
            usage: Default::default(),
            turns: 1,
        };
        hub.publish(event(u64::MAX, EventKind::Settled(settled.clone())));
        let mut last = None;
        let mut count = 0;
        while let Some(e) = stream.recv().await {
            count += 1;
            last = Some(e);
        }
        assert_eq!(count, SUBSCRIBER_CAPACITY);
        assert_eq!(last.map(|e| e.kind.clone()), Some(EventKind::Settled(settled)));
        assert!(stream.missed() > 0);
    }

    #[tokio::test]
    async fn lagging_subscriber_keeps_every_runs_settled() {
        let hub = Hub::default();
        let mut stream = hub.subscribe();
        let settled = |run: &str| {
            Arc::new(SessionEvent {
                session_id: "s".into(),
                run_id: run.into(),
                seq: 0,
                kind: EventKind::Settled(RunSettled {
                    outcome: RunOutcome::Completed,
                    final_text: run.into(),
                    usage: Default::default(),
                    turns: 1,
                }),
            })
        };
        for run in ["r1", "r2", "r3"] {
            for seq in 0..(SUBSCRIBER_CAPACITY as u64 * 2) {
                hub.publish(event(seq, EventKind::TurnStart { turn: 1 }));
            }
            hub.publish(settled(run));
        }
        hub.close();
        let mut runs = Vec::new();
        while let Some(e) = stream.recv().await {
            if let EventKind::Settled(s) = &e.kind {
                runs.push(s.final_text.clone());
            }
        }
        assert_eq!(runs, vec!["r1", "r2", "r3"]);
    }

    #[tokio::test]
    async fn run_stream_skips_other_runs_events() {
        let hub = Hub::default();
        let mut stream = hub.subscribe().for_run("r2".into());
        let other = Arc::new(SessionEvent {
            session_id: "s".into(),
            run_id: "r1".into(),
            seq: 1,
            kind: EventKind::RunStart,
        });
        hub.publish(other);
        let mine = Arc::new(SessionEvent {
            session_id: "s".into(),
            run_id: "r2".into(),
            seq: 2,
            kind: EventKind::RunStart,
        });
        hub.publish(mine);
        assert_eq!(stream.recv().await.map(|e| e.seq), Some(2));
    }

    #[tokio::test]
    async fn closed_hub_ends_streams_after_draining() {
        let hub = Hub::default();
        let mut stream = hub.subscribe();
        hub.publish(event(1, EventKind::RunStart));
        hub.close();
        assert_eq!(stream.recv().await.map(|e| e.seq), Some(1));
        assert_eq!(stream.recv().await, None);
    }
}
