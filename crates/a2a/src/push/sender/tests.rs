//! The sender against a fake webhook on a paused clock (retries, timeouts, ordering, isolation)
//! and against a real one on 127.0.0.1 (headers, payloads, ordering over HTTP).

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::time::Instant;

use super::*;
use crate::push::url_check as scheme_check;

/// The design's three attempts, 1 s then 5 s apart, as the timing tests expect.
fn test_policy() -> Policy {
    Policy {
        waits: DEFAULT_WAITS.to_vec(),
        max_attempts: 3,
        max_age: Duration::from_secs(24 * 60 * 60),
        timeout: DEFAULT_TIMEOUT,
        max_per_webhook: 1024,
        max_bytes: 64 * 1024 * 1024,
    }
}

/// What the fake webhook saw of one attempt.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    at: Instant,
    url: String,
    body: Value,
}

/// A fake webhook: fails the first `failures` attempts, hangs on URLs containing `hang`, and
/// parks URLs containing `slow` until `release` is notified.
#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<Call>>,
    failures: AtomicUsize,
    fail_every_first: Option<usize>,
    release: tokio::sync::Notify,
    /// Answers every attempt with this `Retry-After` (a 503) until `failures` runs out.
    retry_after: Option<Duration>,
}

impl Fake {
    fn failing(failures: usize) -> Arc<Self> {
        Arc::new(Fake { failures: AtomicUsize::new(failures), ..Fake::default() })
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Deliver for Fake {
    async fn post(&self, outgoing: &Outgoing) -> Result<(), Failure> {
        let body: Value = serde_json::from_slice(&outgoing.body).unwrap();
        let call = Call { at: Instant::now(), url: outgoing.url.clone(), body };
        let attempt = self.calls.lock().unwrap().iter().filter(|c| c.body == call.body).count();
        self.calls.lock().unwrap().push(call.clone());
        if outgoing.url.contains("hang") {
            std::future::pending::<()>().await;
        }
        if outgoing.url.contains("slow") {
            self.release.notified().await;
        }
        // Some load: the queue's task gives the runtime away in the middle of a delivery.
        tokio::task::yield_now().await;
        if let Some(every) = self.fail_every_first
            && attempt == 0
            && status_text(&call.body).parse::<usize>().is_ok_and(|n| n % every == 0)
        {
            return Err("webhook answered 503 Service Unavailable".into());
        }
        let failed =
            self.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        match (failed, self.retry_after) {
            (Ok(_), Some(wait)) => Err(Failure {
                reason: "webhook answered 503 Service Unavailable".into(),
                retry_after: Some(wait),
            }),
            (Ok(_), None) => Err("webhook answered 500 Internal Server Error".into()),
            (Err(_), _) => Ok(()),
        }
    }
}

fn task(text: &str) -> a2a::Task {
    let mut message = a2a::Message::new(a2a::Role::Agent, vec![a2a::Part::text(text)]);
    message.message_id = "m1".into();
    a2a::Task {
        id: "t1".into(),
        context_id: "c1".into(),
        status: a2a::TaskStatus {
            state: a2a::TaskState::Working,
            message: Some(message),
            timestamp: None,
        },
        artifacts: None,
        history: None,
        metadata: None,
    }
}

fn status_text(body: &Value) -> String {
    let status = body.get("task").unwrap_or(body).get("status").cloned().unwrap_or_default();
    status["message"]["parts"][0]["text"].as_str().unwrap_or_default().to_string()
}

fn config(url: &str, id: &str, format: PushFormat, secrets: bool) -> StoredPushConfig {
    StoredPushConfig {
        config: a2a::TaskPushNotificationConfig {
            url: url.into(),
            id: Some(id.into()),
            task_id: "t1".into(),
            token: secrets.then(|| "tok-secret-1".to_string()),
            authentication: secrets.then(|| a2a::AuthenticationInfo {
                scheme: "Bearer".into(),
                credentials: Some("cred-secret-2".into()),
            }),
            tenant: None,
        },
        format,
    }
}

fn fake_sender(fake: &Arc<Fake>) -> PushSender {
    PushSender::with_deliver(fake.clone(), scheme_check(false), test_policy(), None)
}

/// Waits for every queue to drain, however long the retries take (`close` gives up after its
/// grace).
async fn settle(sender: &PushSender) {
    sender.shared.tracker.close();
    sender.shared.tracker.wait().await;
}

fn gaps(calls: &[Call]) -> Vec<Duration> {
    calls.windows(2).map(|pair| pair[1].at - pair[0].at).collect()
}

#[tokio::test(start_paused = true)]
async fn sender_failing_twice_retries_after_1s_then_5s() {
    let fake = Fake::failing(2);
    let sender = fake_sender(&fake);
    sender
        .notify(&task("a"), &[config("https://hook.example.com/a", "c1", PushFormat::V1_0, true)]);
    settle(&sender).await;
    let calls = fake.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(gaps(&calls), [Duration::from_secs(1), Duration::from_secs(5)]);
}

#[tokio::test(start_paused = true)]
async fn sender_timeouts_count_as_failures() {
    let fake = Fake::failing(0);
    let sender = fake_sender(&fake);
    sender
        .notify(&task("a"), &[config("https://hang.example.com/", "c1", PushFormat::V1_0, false)]);
    settle(&sender).await;
    // Each attempt gives up after 10 s, then waits 1 s, then 5 s.
    assert_eq!(gaps(&fake.calls()), [Duration::from_secs(11), Duration::from_secs(15)]);
}

#[test]
fn sender_always_failing_drops_after_three_attempts_and_warns_without_secrets() {
    let fake = Fake::failing(usize::MAX);
    let logs = crate::test_logs::capture_logs(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let sender = fake_sender(&fake);
            let url = "https://hook.example.com/a?key=query-secret-3";
            sender.notify(&task("a"), &[config(url, "c1", PushFormat::V1_0, true)]);
            settle(&sender).await;
        });
    });
    assert_eq!(fake.calls().len(), 3);
    let warning = logs.lines().find(|line| line.contains("WARN")).unwrap_or_default();
    assert!(warning.contains("every attempt failed"), "{logs}");
    assert!(warning.contains("task_id=t1") && warning.contains("host=hook.example.com"), "{logs}");
    assert!(warning.contains("500 Internal Server Error"), "{logs}");
    for secret in ["tok-secret-1", "cred-secret-2", "query-secret-3"] {
        assert!(!logs.contains(secret), "{secret} leaked: {logs}");
    }
}

#[tokio::test(start_paused = true)]
async fn sender_refused_url_is_never_posted() {
    let fake = Fake::failing(0);
    let refuse: UrlCheck = Arc::new(|_: &str| Err("private address".to_string()));
    let sender = PushSender::with_deliver(fake.clone(), refuse, test_policy(), None);
    sender.notify(&task("a"), &[config("https://10.0.0.1/", "c1", PushFormat::V1_0, false)]);
    sender.close().await;
    assert_eq!(fake.calls(), []);
}

#[tokio::test(start_paused = true)]
async fn sender_keeps_order_per_webhook_under_load_and_retries() {
    // Every 7th notification fails its first attempt: the ones after it wait for its retry.
    let fake = Arc::new(Fake { fail_every_first: Some(7), ..Fake::default() });
    let sender = fake_sender(&fake);
    let webhooks = [
        config("https://one.example.com/", "c1", PushFormat::V1_0, false),
        config("https://two.example.com/", "c2", PushFormat::V0_3, false),
    ];
    for n in 0..100 {
        sender.notify(&task(&n.to_string()), &webhooks);
    }
    settle(&sender).await;
    let calls = fake.calls();
    for webhook in &webhooks {
        let mut delivered: Vec<String> = Vec::new();
        for call in calls.iter().filter(|c| c.url == webhook.config.url) {
            let text = status_text(&call.body);
            // A retried notification shows twice in a row; keep its last attempt.
            if delivered.last() != Some(&text) {
                delivered.push(text);
            }
        }
        let expected: Vec<String> = (0..100).map(|n: usize| n.to_string()).collect();
        assert_eq!(delivered, expected, "{}", webhook.config.url);
    }
}

#[tokio::test(start_paused = true)]
async fn sender_slow_webhook_does_not_delay_others() {
    let fake = Fake::failing(0);
    let sender = fake_sender(&fake);
    let slow = config("https://slow.example.com/", "c1", PushFormat::V1_0, false);
    let fast = config("https://fast.example.com/", "c2", PushFormat::V1_0, false);
    sender.notify(&task("1"), &[slow.clone(), fast.clone()]);
    sender.notify(&task("2"), &[slow, fast]);
    let fast_done = async {
        loop {
            let calls = fake.calls();
            if calls.iter().filter(|c| c.url.contains("fast")).count() == 2 {
                return calls;
            }
            // The clock is paused: this only lets the queues run.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    let calls = tokio::time::timeout(Duration::from_secs(1), fast_done).await.unwrap();
    // The slow webhook holds its first notification; its second waits behind it.
    assert_eq!(calls.iter().filter(|c| c.url.contains("slow")).count(), 1);
    fake.release.notify_one();
    fake.release.notify_one();
    sender.close().await;
    assert_eq!(fake.calls().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn sender_close_gives_up_after_10s() {
    let fake = Fake::failing(0);
    let sender = fake_sender(&fake);
    sender
        .notify(&task("a"), &[config("https://hang.example.com/", "c1", PushFormat::V1_0, false)]);
    let started = Instant::now();
    sender.close().await;
    assert_eq!((started.elapsed(), fake.calls().len()), (Duration::from_secs(10), 1));
    assert!(sender.shared.tracker.is_empty());
}

#[tokio::test(start_paused = true)]
async fn sender_after_close_drops_notifications() {
    let fake = Fake::failing(0);
    let sender = fake_sender(&fake);
    sender.close().await;
    sender
        .notify(&task("a"), &[config("https://hook.example.com/", "c1", PushFormat::V1_0, false)]);
    tokio::task::yield_now().await;
    assert_eq!(fake.calls(), []);
}

/// A real webhook on 127.0.0.1 that answers 200.
async fn webhook() -> wiremock::MockServer {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}

fn http_sender() -> PushSender {
    PushSender::new(reqwest::Client::new(), scheme_check(true), test_policy(), None)
}

async fn received(server: &wiremock::MockServer) -> Vec<wiremock::Request> {
    server.received_requests().await.unwrap_or_default()
}

#[tokio::test]
async fn sender_posts_task_with_token_and_authorization() {
    let server = webhook().await;
    let sender = http_sender();
    let task = task("hello");
    sender
        .notify(&task, &[config(&format!("{}/hook", server.uri()), "c1", PushFormat::V1_0, true)]);
    sender.close().await;
    let requests = received(&server).await;
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    let header = |name: &str| request.headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(
        (header("content-type"), header("x-a2a-notification-token"), header("authorization")),
        (Some("application/json"), Some("tok-secret-1"), Some("Bearer cred-secret-2"))
    );
    assert_eq!(request.url.path(), "/hook");
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body, json!({"task": serde_json::to_value(&task).unwrap()}));
    assert_eq!(body["task"]["status"]["state"], "TASK_STATE_WORKING");
}

#[tokio::test]
async fn sender_without_token_or_authentication_sends_neither_header() {
    let server = webhook().await;
    let sender = http_sender();
    sender.notify(&task("hello"), &[config(&server.uri(), "c1", PushFormat::V1_0, false)]);
    sender.close().await;
    let requests = received(&server).await;
    assert_eq!(requests.len(), 1);
    let headers = &requests[0].headers;
    assert_eq!(
        (headers.get("x-a2a-notification-token"), headers.get("authorization")),
        (None, None)
    );
    assert_eq!(headers.get("content-type").and_then(|v| v.to_str().ok()), Some("application/json"));
}

#[tokio::test]
async fn sender_v03_config_posts_the_03_task() {
    let server = webhook().await;
    let sender = http_sender();
    sender.notify(&task("hello"), &[config(&server.uri(), "c1", PushFormat::V0_3, false)]);
    sender.close().await;
    let requests = received(&server).await;
    let body: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(
        (&body["kind"], &body["id"], &body["status"]["state"], body.get("task")),
        (&json!("task"), &json!("t1"), &json!("working"), None)
    );
    assert_eq!(body["status"]["message"]["kind"], "message");
}

#[tokio::test]
async fn sender_100_notifications_arrive_in_order_over_http() {
    let server = webhook().await;
    let sender = http_sender();
    let hook = config(&server.uri(), "c1", PushFormat::V1_0, false);
    for n in 0..100 {
        sender.notify(&task(&n.to_string()), std::slice::from_ref(&hook));
    }
    sender.close().await;
    let texts: Vec<String> = received(&server)
        .await
        .iter()
        .map(|request| status_text(&serde_json::from_slice(&request.body).unwrap()))
        .collect();
    let expected: Vec<String> = (0..100).map(|n: usize| n.to_string()).collect();
    assert_eq!(texts, expected);
}

#[tokio::test(start_paused = true)]
async fn sender_retry_after_sets_the_next_wait_capped_at_an_hour() {
    for (asked, waited) in [
        (Duration::from_secs(7), Duration::from_secs(7)),
        (Duration::ZERO, Duration::ZERO),
        (Duration::from_secs(10 * 60 * 60), MAX_RETRY_AFTER),
    ] {
        let fake = Arc::new(Fake {
            failures: AtomicUsize::new(1),
            retry_after: Some(asked),
            ..Fake::default()
        });
        let sender = fake_sender(&fake);
        sender.notify(
            &task("a"),
            &[config("https://hook.example.com/", "c1", PushFormat::V1_0, false)],
        );
        settle(&sender).await;
        assert_eq!(gaps(&fake.calls()), [waited], "Retry-After {asked:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn sender_gives_up_when_the_next_wait_would_pass_the_max_age() {
    let fake = Fake::failing(usize::MAX);
    let policy = Policy { max_attempts: 100, max_age: Duration::from_secs(60), ..test_policy() };
    let sender = PushSender::with_deliver(fake.clone(), scheme_check(false), policy, None);
    sender
        .notify(&task("a"), &[config("https://hook.example.com/", "c1", PushFormat::V1_0, false)]);
    settle(&sender).await;
    // The wall clock does not move on a paused runtime: 1 s + 5 s + 30 s fit in the minute, the
    // next wait (2 min) does not.
    assert_eq!(fake.calls().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn sender_over_its_bound_per_webhook_drops_the_newest() {
    let fake = Fake::failing(0);
    let policy = Policy { max_per_webhook: 2, ..test_policy() };
    let sender = PushSender::with_deliver(fake.clone(), scheme_check(false), policy, None);
    let hook = config("https://hook.example.com/", "c1", PushFormat::V1_0, false);
    for n in 0..4 {
        sender.notify(&task(&n.to_string()), std::slice::from_ref(&hook));
    }
    settle(&sender).await;
    let texts: Vec<String> = fake.calls().iter().map(|c| status_text(&c.body)).collect();
    assert_eq!(texts, ["0", "1"]);
}

fn open_outbox(state: &std::path::Path) -> Option<(Outbox, Vec<Record>)> {
    Some(Outbox::open(state.join("a2a/push-outbox"), 1 << 20).unwrap())
}

fn outbox_files(state: &std::path::Path) -> usize {
    std::fs::read_dir(state.join("a2a/push-outbox")).unwrap().count()
}

#[tokio::test]
async fn sender_pending_deliveries_survive_a_restart_in_order() {
    let state = tempfile::tempdir().unwrap();
    let hooks = [
        config("https://one.example.com/", "c1", PushFormat::V1_0, true),
        config("https://two.example.com/", "c2", PushFormat::V0_3, false),
    ];
    // First run: every attempt fails with a long Retry-After, so all five stay pending.
    let down = Arc::new(Fake {
        failures: AtomicUsize::new(usize::MAX),
        retry_after: Some(Duration::from_secs(600)),
        ..Fake::default()
    });
    let sender = PushSender::with_deliver(
        down.clone(),
        scheme_check(false),
        test_policy(),
        open_outbox(state.path()),
    );
    for n in 0..5 {
        sender.notify(&task(&n.to_string()), &hooks);
    }
    let tried = async {
        while down.calls().len() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), tried).await.unwrap();
    sender.close().await;
    assert_eq!(outbox_files(state.path()), 10);

    // Second run: the webhooks are back; a new notification goes after the old ones.
    let up = Fake::failing(0);
    let sender = PushSender::with_deliver(
        up.clone(),
        scheme_check(false),
        test_policy(),
        open_outbox(state.path()),
    );
    sender.start();
    sender.notify(&task("5"), &hooks);
    tokio::time::timeout(Duration::from_secs(10), settle(&sender)).await.unwrap();
    let calls = up.calls();
    for hook in &hooks {
        let texts: Vec<String> = calls
            .iter()
            .filter(|c| c.url == hook.config.url)
            .map(|c| status_text(&c.body))
            .collect();
        assert_eq!(texts, ["0", "1", "2", "3", "4", "5"], "{}", hook.config.url);
    }
    assert_eq!(outbox_files(state.path()), 0);
}

#[tokio::test]
async fn sender_after_restart_rechecks_the_url_and_drops_refused_ones() {
    let state = tempfile::tempdir().unwrap();
    let hook = config("https://hook.example.com/", "c1", PushFormat::V1_0, false);
    let refuse: UrlCheck = Arc::new(|_: &str| Err("private address".to_string()));
    let down = Arc::new(Fake {
        failures: AtomicUsize::new(usize::MAX),
        retry_after: Some(Duration::from_secs(600)),
        ..Fake::default()
    });
    let sender = PushSender::with_deliver(
        down.clone(),
        scheme_check(false),
        test_policy(),
        open_outbox(state.path()),
    );
    sender.notify(&task("a"), std::slice::from_ref(&hook));
    let tried = async {
        while down.calls().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), tried).await.unwrap();
    sender.close().await;
    assert_eq!(outbox_files(state.path()), 1);

    let up = Fake::failing(0);
    let sender =
        PushSender::with_deliver(up.clone(), refuse, test_policy(), open_outbox(state.path()));
    sender.start();
    tokio::time::timeout(Duration::from_secs(10), settle(&sender)).await.unwrap();
    assert_eq!(up.calls(), []);
    assert_eq!(outbox_files(state.path()), 0);
}

#[tokio::test]
async fn sender_over_http_waits_as_long_as_a_503_retry_after_says() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(503).insert_header("Retry-After", "3"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let sender = http_sender();
    let started = std::time::Instant::now();
    sender.notify(&task("a"), &[config(&server.uri(), "c1", PushFormat::V1_0, false)]);
    let delivered = async {
        while received(&server).await.len() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), delivered).await.unwrap();
    // Without the header the wait would be the first backoff step, 1 s.
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(3) && elapsed < Duration::from_secs(60), "{elapsed:?}");
    sender.close().await;
}
