//! The push sender (PROTOCOL.md §11, design "Push sending"): POSTs a task to each of its
//! webhooks without ever blocking or slowing the run that changed it.
//!
//! Each webhook (config url and id) has its own bounded, ordered queue, drained by one task the
//! sender owns (a [`TaskTracker`]): deliveries of a task to a webhook keep their order, and a
//! slow or failing webhook delays only its own queue. A drained queue's task ends; the next
//! notification starts a new one. A delivery is tried `waits.len() + 1` times, each bounded by
//! the timeout, then dropped with a warning that names the task and the webhook's host, never
//! the token or credentials.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use super::{PushFormat, StoredPushConfig, UrlCheck};
use crate::binding;

/// The waits between attempts (design: 1 s, then 5 s; three attempts in all).
pub const DEFAULT_WAITS: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(5)];

/// How long one attempt may take (PROTOCOL.md §11: 10–30 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The header that carries the config's token (PROTOCOL.md §11; de facto, not normative).
pub const TOKEN_HEADER: &str = "X-A2A-Notification-Token";

/// Notifications one webhook may have waiting; beyond that new ones are dropped (with a
/// warning) rather than let a dead webhook grow memory without bound.
const QUEUE_CAPACITY: usize = 1024;

/// How long [`PushSender::close`] waits for queued deliveries.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// Sends task updates to webhooks.
pub struct PushSender {
    shared: Arc<Shared>,
    tracker: TaskTracker,
}

impl PushSender {
    /// A sender that POSTs through `client` (the caller's guarded client: no redirects, no
    /// proxy, connect-time address checks), checks each webhook URL with `url_check` before every
    /// attempt, waits `waits` between attempts ([`DEFAULT_WAITS`]) and gives each attempt
    /// `timeout` ([`DEFAULT_TIMEOUT`]).
    pub(crate) fn new(
        client: reqwest::Client,
        url_check: UrlCheck,
        waits: Vec<Duration>,
        timeout: Duration,
    ) -> Self {
        Self::with_deliver(Arc::new(HttpDeliver(client)), url_check, waits, timeout)
    }

    /// A sender over any way of delivering (tests fake the webhook with it).
    pub(crate) fn with_deliver(
        deliver: Arc<dyn Deliver>,
        url_check: UrlCheck,
        waits: Vec<Duration>,
        timeout: Duration,
    ) -> Self {
        PushSender {
            shared: Arc::new(Shared {
                deliver,
                url_check,
                waits,
                timeout,
                queues: Mutex::new(HashMap::new()),
                stop: CancellationToken::new(),
            }),
            tracker: TaskTracker::new(),
        }
    }

    /// Queues `task` for each of `configs` and returns at once: the 1.0 StreamResponse
    /// `{"task": …}`, or the 0.3 task for configs registered through 0.3. Call it after every
    /// state change, in the order of the changes; after [`PushSender::close`] it does nothing.
    pub fn notify(&self, task: &a2a::Task, configs: &[StoredPushConfig]) {
        if self.shared.stop.is_cancelled() {
            return;
        }
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
            let delivery = Delivery {
                task_id: task.id.clone(),
                outgoing: Outgoing {
                    url: config.url.clone(),
                    token: config.token.clone(),
                    authorization,
                    body,
                },
            };
            self.enqueue((config.url.clone(), stored.id().to_string()), delivery);
        }
    }

    /// Stops taking notifications and waits for the queued ones, at most 10 s; whatever is
    /// still queued or being retried then is dropped with a warning.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the queues running; call it again to wait.
    pub async fn close(&self) {
        self.tracker.close();
        if tokio::time::timeout(CLOSE_GRACE, self.tracker.wait()).await.is_err() {
            warn!(
                webhooks = self.shared.lock().len(),
                "push notifications still queued at shutdown; dropping them"
            );
        }
        self.shared.stop.cancel();
        self.tracker.wait().await;
    }

    fn enqueue(&self, key: QueueKey, delivery: Delivery) {
        let mut queues = self.shared.lock();
        let sent = match queues.get(&key) {
            Some(queue) => queue.try_send(delivery),
            None => Err(mpsc::error::TrySendError::Closed(delivery)),
        };
        let delivery = match sent {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Full(dropped)) => {
                warn!(
                    task_id = %dropped.task_id,
                    host = %host(&dropped.outgoing.url),
                    "push webhook queue is full; notification dropped"
                );
                return;
            }
            // No queue yet, or its drain task has gone: start one.
            Err(mpsc::error::TrySendError::Closed(delivery)) => delivery,
        };
        let (queue, receiver) = mpsc::channel(QUEUE_CAPACITY);
        // A new channel has room for one.
        if queue.try_send(delivery).is_ok() {
            queues.insert(key.clone(), queue);
            self.tracker.spawn(drain(self.shared.clone(), key, receiver));
        }
    }
}

/// A webhook's queue key: its URL and config id.
type QueueKey = (String, String);

/// What the sender shares with its drain tasks.
struct Shared {
    deliver: Arc<dyn Deliver>,
    url_check: UrlCheck,
    waits: Vec<Duration>,
    timeout: Duration,
    /// The live queues. `notify` sends and a drain task retires its queue under this lock, so no
    /// notification lands in a queue nobody drains.
    queues: Mutex<HashMap<QueueKey, mpsc::Sender<Delivery>>>,
    /// Fired at the end of `close`: drain tasks stop, notify does nothing.
    stop: CancellationToken,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, HashMap<QueueKey, mpsc::Sender<Delivery>>> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The queue's next delivery; `None` retires the drained queue.
    fn next(&self, key: &QueueKey, receiver: &mut mpsc::Receiver<Delivery>) -> Option<Delivery> {
        let mut queues = self.lock();
        match receiver.try_recv() {
            Ok(delivery) => Some(delivery),
            Err(mpsc::error::TryRecvError::Empty | mpsc::error::TryRecvError::Disconnected) => {
                queues.remove(key);
                None
            }
        }
    }

    /// Tries one delivery until it is acknowledged (2xx), refused by the URL check or out of
    /// attempts.
    async fn deliver(&self, delivery: &Delivery) {
        let outgoing = &delivery.outgoing;
        let attempts = self.waits.len() + 1;
        let mut last_error = String::new();
        let waits = std::iter::once(None).chain(self.waits.iter().map(Some));
        for (attempt, wait) in waits.enumerate() {
            if let Some(wait) = wait {
                tokio::time::sleep(*wait).await;
            }
            // Checked on every attempt: the check may look at what the name resolves to now.
            if let Err(reason) = (self.url_check)(&outgoing.url) {
                warn!(
                    task_id = %delivery.task_id,
                    host = %host(&outgoing.url),
                    reason = %reason,
                    "push webhook refused by the URL check; notification dropped"
                );
                return;
            }
            match tokio::time::timeout(self.timeout, self.deliver.post(outgoing)).await {
                Ok(Ok(())) => {
                    debug!(task_id = %delivery.task_id, host = %host(&outgoing.url), attempt = attempt + 1, "push notification delivered");
                    return;
                }
                Ok(Err(error)) => last_error = error,
                Err(_) => last_error = format!("no answer within {} s", self.timeout.as_secs_f64()),
            }
            debug!(task_id = %delivery.task_id, host = %host(&outgoing.url), attempt = attempt + 1, error = %last_error, "push notification attempt failed");
        }
        warn!(
            task_id = %delivery.task_id,
            host = %host(&outgoing.url),
            attempts,
            error = %last_error,
            "push notification dropped: every attempt failed"
        );
    }
}

/// Drains one webhook's queue in order, then retires it.
async fn drain(shared: Arc<Shared>, key: QueueKey, mut receiver: mpsc::Receiver<Delivery>) {
    while let Some(delivery) = shared.next(&key, &mut receiver) {
        tokio::select! {
            () = shared.deliver(&delivery) => {}
            () = shared.stop.cancelled() => return,
        }
    }
}

/// The host of a webhook URL, for logs.
fn host(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_string))
        .unwrap_or_else(|| "(unparsable url)".to_string())
}

/// One notification for one webhook. No `Debug`: it holds the token and credentials.
struct Delivery {
    task_id: String,
    outgoing: Outgoing,
}

/// One POST to a webhook.
pub(crate) struct Outgoing {
    pub url: String,
    /// For `X-A2A-Notification-Token`.
    pub token: Option<String>,
    /// The whole `Authorization` value: `<scheme> <credentials>`.
    pub authorization: Option<String>,
    /// JSON.
    pub body: Bytes,
}

/// How a POST reaches a webhook: HTTP in production, a fake in tests.
#[async_trait::async_trait]
pub(crate) trait Deliver: Send + Sync {
    /// Sends `outgoing`.
    ///
    /// # Errors
    /// What went wrong, without the URL, token or credentials: a non-2xx status, or a
    /// connection failure.
    async fn post(&self, outgoing: &Outgoing) -> Result<(), String>;
}

/// Delivery over HTTP through the sender's client.
struct HttpDeliver(reqwest::Client);

#[async_trait::async_trait]
impl Deliver for HttpDeliver {
    async fn post(&self, outgoing: &Outgoing) -> Result<(), String> {
        let sensitive = |name: &str, value: &str| {
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("the {name} is not a valid header value"))?;
            value.set_sensitive(true);
            Ok::<_, String>(value)
        };
        let mut request = self
            .0
            .post(&outgoing.url)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(outgoing.body.clone());
        if let Some(token) = &outgoing.token {
            request = request.header(TOKEN_HEADER, sensitive("token", token)?);
        }
        if let Some(authorization) = &outgoing.authorization {
            request = request.header(AUTHORIZATION, sensitive("authentication", authorization)?);
        }
        let response = request.send().await.map_err(|error| error.without_url().to_string())?;
        let status = response.status();
        if status.is_success() { Ok(()) } else { Err(format!("webhook answered {status}")) }
    }
}

#[cfg(test)]
mod tests;
