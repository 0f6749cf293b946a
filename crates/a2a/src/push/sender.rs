//! The push sender (A2A 1.0.1 §3.5.3, §4.3.3; docs/a2a.md, "Push notifications"): POSTs a task to each of its
//! webhooks without ever blocking or slowing the run that changed it, and without losing what
//! is pending to a restart.
//!
//! [`PushSender::notify`] only builds the deliveries, numbers them and hands them to the writer;
//! it does no I/O. The writer (one task at a time, spawned on demand) records each batch in the
//! [`Outbox`] with one durability barrier, then queues the deliveries on their webhooks (URL and
//! config id). Each webhook's queue is drained in order by one task, so deliveries to a webhook
//! keep the order of the state changes, and a slow or failing webhook delays only its own queue.
//! A delivery leaves the outbox when it is acknowledged (2xx), refused by the URL check, out of
//! attempts or too old. At start-up the deliveries a previous run left are queued first, so they
//! go before any newer one. Every task here is owned by the sender's [`TaskTracker`].
//!
//! Invariants:
//! - A delivery is in the outbox, durably, before its first attempt (unless the write failed:
//!   then it is delivered from memory, with an error logged).
//! - Logs name a webhook by its host only, never its path, query, token or credentials.
//! - What is pending is bounded per webhook (a count) and in all (bytes); a notification over a
//!   bound is dropped with a warning, and what is queued keeps its order.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};

use super::deliver::{Deliver, Failure, HttpDeliver, Outgoing, host};
use super::outbox::{Outbox, Record};
use super::{PushFormat, StoredPushConfig, UrlCheck};
use crate::binding;
use crate::config::A2aOptions;

/// The waits between attempts: 1 s, 5 s, 30 s, 2 min, 10 min, 30 min, then 1 h for every
/// further one (the design's 1 s and 5 s first, then longer, since a delivery now survives
/// restarts).
pub const DEFAULT_WAITS: [Duration; 7] = [
    Duration::from_secs(1),
    Duration::from_secs(5),
    Duration::from_secs(30),
    Duration::from_secs(2 * 60),
    Duration::from_secs(10 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(60 * 60),
];

/// How long one attempt may take: long enough for a slow receiver, short enough that a dead one does not hold a delivery slot.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest wait a webhook's `Retry-After` can ask for; a longer one is cut to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60 * 60);

/// How long [`PushSender::close`] waits for deliveries in flight.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// Most deliveries the writer records with one barrier.
const WRITE_BATCH: usize = 256;

/// When to retry and when to give up, and the outbox's bounds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Policy {
    /// The wait after the n-th failed attempt is `waits[n - 1]`; the last one repeats.
    pub waits: Vec<Duration>,
    /// Attempts of one delivery in this process (a restart starts counting again).
    pub max_attempts: u32,
    /// A delivery older than this (since its state change, across restarts) is given up.
    pub max_age: Duration,
    /// One attempt's limit.
    pub timeout: Duration,
    /// Most deliveries pending per webhook.
    pub max_per_webhook: usize,
    /// Most bytes of deliveries pending in all.
    pub max_bytes: u64,
}

impl Policy {
    /// The policy the options set, with [`DEFAULT_WAITS`] and [`DEFAULT_TIMEOUT`].
    pub fn new(options: &A2aOptions) -> Self {
        Policy {
            waits: DEFAULT_WAITS.to_vec(),
            max_attempts: options.push_max_attempts.max(1),
            max_age: options.push_max_age,
            timeout: DEFAULT_TIMEOUT,
            max_per_webhook: options.push_max_pending_per_webhook.max(1),
            max_bytes: options.push_max_pending_bytes,
        }
    }

    /// The wait after `failed` failed attempts, unless the webhook said otherwise.
    fn wait_after(&self, failed: u32) -> Duration {
        let index = usize::try_from(failed.saturating_sub(1)).unwrap_or(usize::MAX);
        self.waits.get(index).or(self.waits.last()).copied().unwrap_or(Duration::ZERO)
    }
}

/// Sends task updates to webhooks.
pub struct PushSender {
    shared: Arc<Shared>,
}

impl PushSender {
    /// A sender that POSTs through `client` (the caller's guarded client: no redirects, no
    /// proxy, connect-time address checks), checks each webhook URL with `url_check` before every
    /// attempt, retries by `policy`, and keeps what is pending in `outbox` (with what a previous
    /// run left there; `None`: in memory only, lost on restart).
    pub(crate) fn new(
        client: reqwest::Client,
        url_check: UrlCheck,
        policy: Policy,
        outbox: Option<(Outbox, Vec<Record>)>,
    ) -> Self {
        Self::with_deliver(Arc::new(HttpDeliver(client)), url_check, policy, outbox)
    }

    /// A sender over any way of delivering (tests fake the webhook with it).
    pub(crate) fn with_deliver(
        deliver: Arc<dyn Deliver>,
        url_check: UrlCheck,
        policy: Policy,
        outbox: Option<(Outbox, Vec<Record>)>,
    ) -> Self {
        let (outbox, left) = match outbox {
            Some((outbox, left)) => (Some(outbox), left),
            None => (None, Vec::new()),
        };
        // Numbers rise across restarts: past the last one left, and past the clock's microseconds.
        let since_epoch =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        let clock = u64::try_from(since_epoch.as_micros()).unwrap_or(u64::MAX);
        let last = left.iter().map(|record| record.seq.saturating_add(1)).max().unwrap_or(0);
        let mut state = State { next_seq: clock.max(last), ..State::default() };
        if !left.is_empty() {
            info!(
                deliveries = left.len(),
                "push outbox: retrying deliveries left by the previous run"
            );
        }
        for record in left {
            let key = (record.outgoing.url.clone(), record.config_id.clone());
            let size = record.size();
            let queue = state.webhooks.entry(key).or_default();
            queue.count += 1;
            queue.ready.push_back(Entry { record: Arc::new(record), on_disk: true });
            state.total_bytes = state.total_bytes.saturating_add(size);
        }
        PushSender {
            shared: Arc::new(Shared {
                deliver,
                url_check,
                policy,
                outbox,
                state: Mutex::new(state),
                tracker: TaskTracker::new(),
                closing: CancellationToken::new(),
                stop: CancellationToken::new(),
            }),
        }
    }

    /// Starts delivering what the outbox held at start-up. Call it once the runtime runs (the
    /// server's `serve`); notifications start their own queues.
    pub fn start(&self) {
        let mut state = self.shared.lock();
        for (key, queue) in &mut state.webhooks {
            if !queue.draining && !queue.ready.is_empty() {
                queue.draining = true;
                self.shared.tracker.spawn(drain(self.shared.clone(), key.clone()));
            }
        }
    }

    /// The ids of the tasks with a delivery still pending (recorded or not): retention keeps
    /// those tasks until their deliveries are done.
    pub(crate) fn pending_tasks(&self) -> std::collections::HashSet<String> {
        let state = self.shared.lock();
        let unwritten = state.unwritten.iter().map(|(_, record)| record.task_id.clone());
        let queued = state
            .webhooks
            .values()
            .flat_map(|queue| queue.ready.iter().map(|entry| entry.record.task_id.clone()));
        unwritten.chain(queued).collect()
    }

    /// Queues `task` for each of `configs` and returns at once, without I/O: the 1.0
    /// StreamResponse `{"task": …}`, or the 0.3 task for configs registered through 0.3. Call it
    /// after every state change, in the order of the changes; after [`PushSender::close`] it
    /// does nothing.
    pub fn notify(&self, task: &a2a::Task, configs: &[StoredPushConfig]) {
        if self.shared.closing.is_cancelled() {
            return;
        }
        let created_ms = now_ms();
        let mut bodies: HashMap<PushFormat, Bytes> = HashMap::new();
        for stored in configs {
            let body = bodies
                .entry(stored.format)
                .or_insert_with(|| {
                    Bytes::from(binding::webhook_body(task, stored.format).to_string())
                })
                .clone();
            let config = &stored.config;
            let authorization =
                config.authentication.as_ref().map(|auth| match &auth.credentials {
                    Some(credentials) => format!("{} {credentials}", auth.scheme),
                    None => auth.scheme.clone(),
                });
            let record = Record {
                seq: 0,
                task_id: task.id.clone(),
                config_id: stored.id().to_string(),
                created_ms,
                outgoing: Outgoing {
                    url: config.url.clone(),
                    token: config.token.clone(),
                    authorization,
                    body,
                },
            };
            self.enqueue(record);
        }
    }

    /// Hands `record` to the writer, numbered, unless a bound is reached.
    fn enqueue(&self, mut record: Record) {
        let key = (record.outgoing.url.clone(), record.config_id.clone());
        let size = record.size();
        let policy = &self.shared.policy;
        let mut state = self.shared.lock();
        let state = &mut *state;
        let queue = state.webhooks.entry(key.clone()).or_default();
        let full = queue.count >= policy.max_per_webhook;
        if full || state.total_bytes.saturating_add(size) > policy.max_bytes {
            // An empty queue nobody drains is forgotten; one with a drain task is the task's to
            // retire (removing it here could leave that task draining a newer queue of the key
            // beside the one the writer starts).
            if queue.count == 0 && !queue.draining {
                state.webhooks.remove(&key);
            }
            warn!(
                task_id = %record.task_id,
                host = %host(&record.outgoing.url),
                pending = if full { "webhook" } else { "all webhooks" },
                "push outbox is full; notification dropped"
            );
            return;
        }
        queue.count += 1;
        state.total_bytes += size;
        record.seq = state.next_seq;
        state.next_seq += 1;
        state.unwritten.push_back((key, Arc::new(record)));
        if !state.writing {
            state.writing = true;
            self.shared.tracker.spawn(write(self.shared.clone()));
        }
    }

    /// Stops taking notifications and gives the deliveries in flight up to 10 s. A delivery
    /// waiting for its next attempt stays in the outbox for the next start; one still being
    /// tried after the grace is abandoned and stays there too. Without an outbox, whatever is
    /// still queued then is dropped with a warning.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the queues running; call it again to wait.
    pub async fn close(&self) {
        self.shared.closing.cancel();
        self.shared.tracker.close();
        if tokio::time::timeout(CLOSE_GRACE, self.shared.tracker.wait()).await.is_err() {
            let pending: usize = self.shared.lock().webhooks.values().map(|q| q.count).sum();
            if self.shared.outbox.is_some() {
                info!(pending, "push deliveries still pending at shutdown stay in the outbox");
            } else {
                warn!(pending, "push notifications still queued at shutdown; dropping them");
            }
        }
        self.shared.stop.cancel();
        self.shared.tracker.wait().await;
    }
}

/// A webhook's queue key: its URL and config id.
type QueueKey = (String, String);

/// What the sender shares with its writer and drain tasks.
struct Shared {
    deliver: Arc<dyn Deliver>,
    url_check: UrlCheck,
    policy: Policy,
    outbox: Option<Outbox>,
    /// The queues. A std mutex: held for a few map operations, never across `.await`.
    state: Mutex<State>,
    tracker: TaskTracker,
    /// Fired first by `close`: no new notifications, and durable deliveries stop waiting.
    closing: CancellationToken,
    /// Fired at the end of `close`: every task stops where it is.
    stop: CancellationToken,
}

#[derive(Default)]
struct State {
    next_seq: u64,
    /// Notified deliveries the writer has not recorded yet, in order.
    unwritten: VecDeque<(QueueKey, Arc<Record>)>,
    /// Whether a writer task runs (it retires, under this lock, when `unwritten` is empty).
    writing: bool,
    webhooks: HashMap<QueueKey, Queue>,
    /// Bytes of every pending delivery, recorded or not.
    total_bytes: u64,
}

/// One webhook's deliveries.
#[derive(Default)]
struct Queue {
    /// Recorded deliveries in order; the front one is being tried.
    ready: VecDeque<Entry>,
    /// Pending deliveries of this webhook, recorded or still with the writer.
    count: usize,
    /// Whether a drain task runs (it retires, under the lock, when `ready` is empty).
    draining: bool,
}

#[derive(Clone)]
struct Entry {
    record: Arc<Record>,
    /// Whether its file exists in the outbox.
    on_disk: bool,
}

/// How a delivery ended.
enum Ended {
    /// Delivered, refused or given up: it leaves the outbox.
    Finished,
    /// Shutdown came while it waited: it stays in the outbox.
    Kept,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tries one delivery until it is acknowledged, refused by the URL check, out of attempts or
    /// too old, or shutdown comes while it waits.
    async fn attempt(&self, entry: &Entry) -> Ended {
        let record = &entry.record;
        let outgoing = &record.outgoing;
        let mut failed = 0;
        loop {
            let age = age(record.created_ms);
            if age > self.policy.max_age {
                warn!(task_id = %record.task_id, host = %host(&outgoing.url), age_secs = age.as_secs(), attempts = failed, "push notification dropped: too old to retry");
                return Ended::Finished;
            }
            // Checked on every attempt, after a restart too: the check may look at what the name
            // resolves to now, and the options may have changed.
            if let Err(reason) = (self.url_check)(&outgoing.url) {
                warn!(
                    task_id = %record.task_id,
                    host = %host(&outgoing.url),
                    reason = %reason,
                    "push webhook refused by the URL check; notification dropped"
                );
                return Ended::Finished;
            }
            failed += 1;
            let failure = match tokio::time::timeout(
                self.policy.timeout,
                self.deliver.post(outgoing),
            )
            .await
            {
                Ok(Ok(())) => {
                    debug!(task_id = %record.task_id, host = %host(&outgoing.url), attempt = failed, "push notification delivered");
                    return Ended::Finished;
                }
                Ok(Err(failure)) => failure,
                Err(_) => Failure::from(format!(
                    "no answer within {} s",
                    self.policy.timeout.as_secs_f64()
                )),
            };
            debug!(task_id = %record.task_id, host = %host(&outgoing.url), attempt = failed, error = %failure.reason, "push notification attempt failed");
            if failed >= self.policy.max_attempts {
                warn!(
                    task_id = %record.task_id,
                    host = %host(&outgoing.url),
                    attempts = failed,
                    error = %failure.reason,
                    "push notification dropped: every attempt failed"
                );
                return Ended::Finished;
            }
            let wait = match failure.retry_after {
                Some(asked) => asked.min(MAX_RETRY_AFTER),
                None => self.policy.wait_after(failed),
            };
            if age.saturating_add(wait) > self.policy.max_age {
                warn!(task_id = %record.task_id, host = %host(&outgoing.url), attempts = failed, error = %failure.reason, "push notification dropped: too old to retry");
                return Ended::Finished;
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.closing.cancelled(), if entry.on_disk => return Ended::Kept,
            }
        }
    }

    /// Removes a finished delivery from the outbox and its queue.
    async fn finish(self: &Arc<Self>, key: &QueueKey, entry: &Entry) {
        if entry.on_disk && self.outbox.is_some() {
            let shared = self.clone();
            let seq = entry.record.seq;
            let removed = tokio::task::spawn_blocking(move || match &shared.outbox {
                Some(outbox) => outbox.remove(seq),
                None => Ok(()),
            })
            .await;
            // Left behind, it is delivered again after a restart (at-least-once).
            match removed {
                Ok(Ok(())) => {}
                Ok(Err(err)) => {
                    warn!(error = %err, "cannot remove a finished push delivery from the outbox")
                }
                Err(err) => {
                    warn!(error = %err, "cannot remove a finished push delivery from the outbox")
                }
            }
        }
        let mut state = self.lock();
        let state = &mut *state;
        state.total_bytes = state.total_bytes.saturating_sub(entry.record.size());
        if let Some(queue) = state.webhooks.get_mut(key) {
            queue.ready.pop_front();
            queue.count = queue.count.saturating_sub(1);
        }
    }

    /// The next delivery of `key`'s queue; `None` retires the drained queue (and forgets it
    /// when nothing of it is pending with the writer either).
    fn next(&self, key: &QueueKey) -> Option<Entry> {
        let mut state = self.lock();
        let queue = state.webhooks.get_mut(key)?;
        if let Some(entry) = queue.ready.front() {
            return Some(entry.clone());
        }
        queue.draining = false;
        if queue.count == 0 {
            state.webhooks.remove(key);
        }
        None
    }
}

/// Records batches of notified deliveries in the outbox, in order, and queues them on their
/// webhooks; retires when nothing is left to record.
async fn write(shared: Arc<Shared>) {
    loop {
        let batch: Vec<(QueueKey, Arc<Record>)> = {
            let mut state = shared.lock();
            if state.unwritten.is_empty() {
                state.writing = false;
                return;
            }
            let take = state.unwritten.len().min(WRITE_BATCH);
            state.unwritten.drain(..take).collect()
        };
        let created = match &shared.outbox {
            None => vec![false; batch.len()],
            Some(_) => {
                let records: Vec<Arc<Record>> = batch.iter().map(|(_, r)| r.clone()).collect();
                let writer = shared.clone();
                let written = tokio::task::spawn_blocking(move || {
                    writer.outbox.as_ref().map(|outbox| outbox.write(&records))
                })
                .await;
                match written {
                    Ok(Some(written)) => {
                        if let Some(err) = written.error {
                            error!(error = %err, "cannot record push deliveries in the outbox; delivering them from memory (a restart loses them)");
                        }
                        written.created
                    }
                    Ok(None) => vec![false; batch.len()],
                    Err(err) => {
                        // Some files may exist: they are delivered again after a restart.
                        error!(error = %err, "cannot record push deliveries in the outbox; delivering them from memory (a restart loses them)");
                        vec![false; batch.len()]
                    }
                }
            }
        };
        let mut state = shared.lock();
        for ((key, record), on_disk) in batch.into_iter().zip(created) {
            let queue = state.webhooks.entry(key.clone()).or_default();
            queue.ready.push_back(Entry { record, on_disk });
            if !queue.draining {
                queue.draining = true;
                shared.tracker.spawn(drain(shared.clone(), key));
            }
        }
    }
}

/// Delivers one webhook's queue in order, then retires.
async fn drain(shared: Arc<Shared>, key: QueueKey) {
    while let Some(entry) = shared.next(&key) {
        let ended = tokio::select! {
            ended = shared.attempt(&entry) => ended,
            () = shared.stop.cancelled() => return,
        };
        match ended {
            Ended::Finished => shared.finish(&key, &entry).await,
            Ended::Kept => return,
        }
    }
}

/// The wall clock in Unix milliseconds: a delivery's age must count across restarts.
fn now_ms() -> u64 {
    let since_epoch = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}

/// How old a delivery made at `created_ms` is (none when the clock went back).
fn age(created_ms: u64) -> Duration {
    Duration::from_millis(now_ms().saturating_sub(created_ms))
}

#[cfg(test)]
mod tests;
