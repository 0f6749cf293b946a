//! Spend caps and rate limits (issue 23) over the real server: `requestsPerMinute` refused with
//! 429 and `Retry-After` on every binding and version, daily token and spending caps refused
//! before a task exists and at a run's next model call, usage by estimate for a provider that
//! reports none, counts that survive a restart and reset at the day's end, the owner's alerts
//! at 80 % and 100 %, and (issue 33) many sends at once ending at most one model call past a
//! cap, and a cancelled model call counted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use volcanic_a2a::A2aOptions;
use volcanic_a2a::auth::A2aWorkspace;
use volcanic_a2a::usage::{Cap, Limits, ModelPrice};

use crate::support::{DEADLINE, KEY, OTHER_KEY, Setup, TestServer, directive, send_params};

/// callers.json with travel-bot's `limits` (other-bot has none).
fn write_limits(server: &TestServer, limits: Value) {
    let list = json!([
        {"name": "travel-bot", "key": KEY, "limits": limits},
        {"name": "other-bot", "key": OTHER_KEY},
    ]);
    let path = server.ws().join(".volcanic/a2a/callers.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&list).unwrap()).unwrap();
    // The directory notices a change by the file's stat: make sure it differs.
    let later = std::time::SystemTime::now() + Duration::from_secs(2);
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(later).unwrap();
}

async fn server_with(options: A2aOptions, limits: Value) -> TestServer {
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    write_limits(&server, limits);
    server
}

/// A message whose one model call reports `input` and `output` tokens.
fn costing(input: u64, output: u64) -> String {
    directive(json!([{"usage": {"input": input, "output": output}}, {"text": "ok"}]))
}

/// A blocking JSON-RPC send of `text` as travel-bot: the whole body.
async fn send(server: &TestServer, text: &str) -> Value {
    server.rpc(KEY, "SendMessage", send_params(text, None)).await
}

fn state(body: &Value) -> &str {
    body["result"]["task"]["status"]["state"].as_str().unwrap_or_else(|| panic!("no task: {body}"))
}

fn workspace(server: &TestServer) -> A2aWorkspace {
    A2aWorkspace {
        path: server.ws().to_path_buf(),
        scope_prefix: "test".into(),
        owner_id: "owner-1".into(),
    }
}

/// travel-bot's tokens today, as the owner sees them.
fn tokens_today(server: &TestServer) -> u64 {
    let report = server.server.usage_report(&workspace(server));
    report.callers.iter().find(|c| c.name == "travel-bot").unwrap().counts.tokens()
}

async fn raw(
    server: &TestServer,
    path: &str,
    version: Option<&str>,
    body: Value,
) -> reqwest::Response {
    let mut request =
        server.client.post(format!("{}{path}", server.base)).header("X-API-Key", KEY).json(&body);
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap()
}

fn retry_after(response: &reqwest::Response) -> u64 {
    response.headers()["retry-after"].to_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn requests_over_the_per_minute_cap_are_refused_with_429_and_retry_after_on_every_binding() {
    let server = server_with(A2aOptions::default(), json!({"requestsPerMinute": 3})).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    for _ in 0..3 {
        let response = raw(&server, "/a2a", Some("1.0"), list.clone()).await;
        assert_eq!(response.status(), 200);
    }
    // JSON-RPC 1.0: 429, Retry-After, and a JSON-RPC error body naming the cap.
    let response = raw(&server, "/a2a", Some("1.0"), list.clone()).await;
    assert_eq!(response.status(), 429);
    let wait = retry_after(&response);
    assert!((1..=20).contains(&wait), "{wait}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32029, "{body}");
    assert_eq!(body["error"]["data"][0]["reason"], "RATE_LIMITED");
    assert!(body["error"]["message"].as_str().unwrap().contains("3 per minute"), "{body}");
    // HTTP+JSON 1.0.
    let response = server
        .client
        .get(format!("{}/a2a/v1/tasks", server.base))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert!(retry_after(&response) >= 1);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED", "{body}");
    // 0.3 JSON-RPC and 0.3 HTTP+JSON.
    let get03 = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": "t"}});
    let response = raw(&server, "/a2a", Some("0.3"), get03).await;
    assert_eq!(response.status(), 429);
    assert!(retry_after(&response) >= 1);
    let response = raw(&server, "/a2a/v1/message:send", Some("0.3"), json!({})).await;
    assert_eq!(response.status(), 429);
    // Nobody else is held: the other caller and the public card answer.
    assert!(server.rpc(OTHER_KEY, "ListTasks", json!({})).await.get("result").is_some());
    let card = server.client.get(format!("{}/.well-known/agent-card.json", server.base));
    assert_eq!(card.send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn the_workspace_cap_per_minute_counts_every_caller_together() {
    let mut options = A2aOptions::default();
    options.usage.workspace.requests_per_minute = std::num::NonZeroU32::new(2);
    let server = server_with(options, json!({})).await;
    assert!(server.rpc(KEY, "ListTasks", json!({})).await.get("result").is_some());
    assert!(server.rpc(OTHER_KEY, "ListTasks", json!({})).await.get("result").is_some());
    let response = server
        .client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", OTHER_KEY)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["data"][0]["metadata"]["scope"], "workspace", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("2 per minute together"));
}

#[tokio::test]
async fn a_send_over_the_token_cap_is_refused_before_any_task_exists() {
    let server = server_with(A2aOptions::default(), json!({"tokensPerDay": 1000})).await;
    // The first run may start (nothing used yet) and crosses the cap in its one call.
    let first = send(&server, &costing(900, 200)).await;
    assert_eq!(state(&first), "TASK_STATE_COMPLETED", "{first}");
    assert_eq!(tokens_today(&server), 1100);
    let refused = send(&server, "hello").await;
    assert_eq!(refused["error"]["code"], -32029, "{refused}");
    assert_eq!(refused["error"]["data"][0]["reason"], "DAILY_LIMIT_REACHED");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("daily token cap (1100 of 1000 tokens)"), "{message}");
    assert!(message.contains("resets in"), "{message}");
    // REST: 429 with the wait until the day ends.
    let (status, body) = server
        .rest(KEY, reqwest::Method::POST, "/message:send", Some(send_params("again", None)))
        .await;
    assert_eq!(status, 429, "{body}");
    // No task was made for either refusal; the other caller is not held.
    let listed = server.rpc(KEY, "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["tasks"].as_array().unwrap().len(), 1, "{listed}");
    let other = server.rpc(OTHER_KEY, "SendMessage", send_params("hi", None)).await;
    assert_eq!(state(&other), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn a_run_that_crosses_the_token_cap_stops_at_its_next_model_call() {
    let server = server_with(A2aOptions::default(), json!({"tokensPerDay": 1000})).await;
    let text = directive(json!([
        {"usage": {"input": 800, "output": 300}},
        {"tool": "ls", "args": {}},
        {"text": "this answer is never made"}
    ]));
    let body = send(&server, &text).await;
    assert_eq!(state(&body), "TASK_STATE_FAILED", "{body}");
    let reason = body["result"]["task"]["status"]["message"]["parts"][0]["text"].as_str().unwrap();
    assert!(reason.contains("travel-bot has used its daily token cap"), "{reason}");
    // The tool ran, the second model call did not.
    let asked = server.faux.requests().len();
    assert_eq!(asked, 1, "the model was called again");
}

#[tokio::test]
async fn the_spending_cap_prices_each_model_and_refuses_a_model_without_a_price() {
    let mut options = A2aOptions::default();
    // A dollar per thousand tokens either way.
    options.usage.prices.insert(
        "faux".into(),
        ModelPrice { input: 1000.0, output: 1000.0, cache_read: None, cache_write: None },
    );
    let server = server_with(options, json!({"usdPerDay": 1.0})).await;
    assert_eq!(state(&send(&server, &costing(1000, 200)).await), "TASK_STATE_COMPLETED");
    let refused = send(&server, "hello").await;
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("daily spending cap ($1.20 of $1.00)"), "{refused}");
    let report = server.server.usage_report(&workspace(&server));
    let bot = report.callers.iter().find(|c| c.name == "travel-bot").unwrap();
    assert!((bot.counts.usd - 1.2).abs() < 1e-9, "{bot:?}");

    // Without a price the cap cannot be kept: refused, whatever was used.
    let unpriced = server_with(A2aOptions::default(), json!({"usdPerDay": 5})).await;
    let refused = send(&unpriced, "hello").await;
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("the model faux has no price"), "{refused}");
}

/// A Chat Completions API that streams an answer and never reports usage.
async fn usage_less_api() -> wiremock::MockServer {
    let api = wiremock::MockServer::start().await;
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "local",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(json!({"role": "assistant", "content": "An answer of a few words."}), Value::Null),
        chunk(json!({}), json!("stop"))
    );
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(
            wiremock::ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body),
        )
        .mount(&api)
        .await;
    api
}

#[tokio::test]
async fn a_provider_that_reports_no_usage_is_counted_by_estimate_and_crosses_the_cap() {
    let api = usage_less_api().await;
    let config = volcanic_core::provider::OpenAiConfig {
        base_url: format!("{}/v1", api.uri()),
        model: "local".into(),
        api_key: None,
        ..volcanic_core::provider::OpenAiConfig::default()
    };
    let provider = Arc::new(volcanic_core::provider::OpenAiProvider::new(config).unwrap());
    let setup = Setup { provider: Some(provider), ..Setup::default() };
    let server = TestServer::with(setup).await;
    write_limits(&server, json!({"tokensPerDay": 100}));
    // The system prompt alone is hundreds of characters: the estimate is well over 100 tokens.
    assert_eq!(state(&send(&server, "hello").await), "TASK_STATE_COMPLETED");
    let report = server.server.usage_report(&workspace(&server));
    let bot = report.callers.iter().find(|c| c.name == "travel-bot").unwrap();
    assert_eq!(bot.counts.estimated_calls, 1, "{bot:?}");
    assert!(bot.counts.tokens() > 100, "{bot:?}");
    let refused = send(&server, "hello again").await;
    assert_eq!(refused["error"]["data"][0]["reason"], "DAILY_LIMIT_REACHED", "{refused}");
    assert_eq!(api.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn usage_survives_a_restart() {
    let server = server_with(A2aOptions::default(), json!({"tokensPerDay": 1000})).await;
    assert_eq!(state(&send(&server, &costing(700, 400)).await), "TASK_STATE_COMPLETED");
    let (workspace_dir, extra, state_dir) = server.stop().await;
    // A day-file write that a killed server left half done: gone after the restart.
    let torn = state_dir.path().join("a2a/usage/.tmpTORN01");
    std::fs::write(&torn, b"{\"date\":").unwrap();
    let server = TestServer::start_in(workspace_dir, extra, state_dir, Setup::default()).await;
    assert!(!torn.exists(), "the torn temp file of a day-file write is left after restart");
    assert_eq!(tokens_today(&server), 1100);
    let refused = send(&server, "hello").await;
    assert_eq!(refused["error"]["data"][0]["reason"], "DAILY_LIMIT_REACHED", "{refused}");
}

/// A clock the test moves.
fn controlled(start: &str) -> (Arc<Mutex<DateTime<Utc>>>, volcanic_a2a::usage::Clock) {
    let now = Arc::new(Mutex::new(DateTime::parse_from_rfc3339(start).unwrap().to_utc()));
    let read = now.clone();
    (now, Arc::new(move || *read.lock().unwrap()))
}

#[tokio::test]
async fn the_counts_start_again_when_the_day_ends() {
    let (now, clock) = controlled("2026-12-04T23:59:30Z");
    let server = TestServer::with(Setup { clock: Some(clock), ..Setup::default() }).await;
    write_limits(&server, json!({"tokensPerDay": 1000}));
    assert_eq!(state(&send(&server, &costing(900, 200)).await), "TASK_STATE_COMPLETED");
    let (status, body) = server
        .rest(KEY, reqwest::Method::POST, "/message:send", Some(send_params("x", None)))
        .await;
    assert_eq!(status, 429, "{body}");
    let refused = send(&server, "hello").await;
    let wait: u64 = refused["error"]["data"][0]["metadata"]["retryAfterSeconds"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=30).contains(&wait), "{refused}");
    *now.lock().unwrap() = DateTime::parse_from_rfc3339("2026-12-05T00:00:05Z").unwrap().to_utc();
    assert_eq!(state(&send(&server, "a new day").await), "TASK_STATE_COMPLETED");
    let report = server.server.usage_report(&workspace(&server));
    assert_eq!(report.date, "2026-12-05");
    let (_, _, state_dir) = server.stop().await;
    // Each day has its own file; yesterday's kept what it counted.
    let yesterday = std::fs::read(state_dir.path().join("a2a/usage/2026-12-04.json")).unwrap();
    let yesterday: Value = serde_json::from_slice(&yesterday).unwrap();
    let ws = yesterday["workspaces"].as_object().unwrap().values().next().unwrap().clone();
    assert_eq!(ws["callers"]["travel-bot"]["inputTokens"], 900, "{yesterday}");
    assert!(state_dir.path().join("a2a/usage/2026-12-05.json").is_file());
}

/// Waits until `count` alerts were sent.
async fn alerts(server: &TestServer, count: usize) -> Vec<volcanic_a2a::usage::UsageAlert> {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let seen = server.alerts.0.lock().unwrap().clone();
        if seen.len() >= count || tokio::time::Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_owner_hears_of_80_and_100_percent_of_each_cap_once_a_day() {
    let mut options = A2aOptions::default();
    options.usage.workspace = Limits { tokens_per_day: Some(4000), ..Limits::default() };
    let server = server_with(options.clone(), json!({"tokensPerDay": 1000})).await;
    send(&server, &costing(800, 50)).await;
    let seen = alerts(&server, 1).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        (seen[0].caller.as_deref(), seen[0].cap, seen[0].percent, seen[0].owner_id.as_str()),
        (Some("travel-bot"), Cap::Tokens, 80, "owner-1")
    );
    // More use under 100 %: nothing new. Over it: the 100 % alert.
    send(&server, &costing(50, 50)).await;
    send(&server, &costing(100, 50)).await;
    let seen = alerts(&server, 2).await;
    assert_eq!(seen.iter().map(|a| a.percent).collect::<Vec<_>>(), [80, 100], "{seen:?}");
    // The other caller fills the workspace cap past 80 %: one alert for all callers.
    let big = costing(2200, 100);
    server.rpc(OTHER_KEY, "SendMessage", send_params(&big, None)).await;
    let seen = alerts(&server, 3).await;
    assert_eq!((seen[2].caller.as_deref(), seen[2].percent), (None, 80), "{seen:?}");
    // A restart does not repeat an alert of the day.
    let (workspace_dir, extra, state_dir) = server.stop().await;
    let server = TestServer::start_in(
        workspace_dir,
        extra,
        state_dir,
        Setup { options, ..Setup::default() },
    )
    .await;
    server.rpc(OTHER_KEY, "SendMessage", send_params(&costing(10, 10), None)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(server.alerts.0.lock().unwrap().is_empty());
}

/// One model call of 9,000 tokens (1,000 in, 8,000 out: within the default 8,192 output
/// tokens) that takes a while, so that many of them run at once.
fn slow_call_of_9000_tokens() -> String {
    directive(json!([
        {"sleep_ms": 300},
        {"usage": {"input": 1000, "output": 8000}},
        {"text": "ok"}
    ]))
}

/// Sends `text` as travel-bot `count` times at once, spread over JSON-RPC 1.0, JSON-RPC 0.3,
/// HTTP+JSON 1.0, HTTP+JSON 0.3 and streaming JSON-RPC 1.0, each send blocking until its task
/// ends (or it is refused); returns once every answer is read to its end.
async fn send_at_once(server: &TestServer, count: usize, text: &str) {
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..count {
        let id = format!("m-at-once-{i}");
        let (path, version, body) = match i % 5 {
            0 => (
                "/a2a",
                "1.0",
                json!({"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params":
                    {"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}}}),
            ),
            1 => (
                "/a2a",
                "0.3",
                json!({"jsonrpc": "2.0", "id": i, "method": "message/send", "params":
                    {"message": {"kind": "message", "messageId": id, "role": "user",
                                 "parts": [{"kind": "text", "text": text}]},
                     "configuration": {"blocking": true}}}),
            ),
            2 => (
                "/a2a/v1/message:send",
                "1.0",
                json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}}),
            ),
            3 => (
                "/a2a/v1/message:send",
                "0.3",
                json!({"request": {"message_id": id, "role": "ROLE_USER", "content": [{"text": text}]},
                       "configuration": {"blocking": true}}),
            ),
            _ => (
                "/a2a",
                "1.0",
                json!({"jsonrpc": "2.0", "id": i, "method": "SendStreamingMessage", "params":
                    {"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}}}),
            ),
        };
        let request = server
            .client
            .post(format!("{}{path}", server.base))
            .header("X-API-Key", KEY)
            .header("A2A-Version", version)
            .json(&body);
        sends.spawn(async move {
            let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
            tokio::time::timeout(DEADLINE, response.text()).await.unwrap().unwrap()
        });
    }
    while let Some(answer) = sends.join_next().await {
        answer.unwrap();
    }
}

#[tokio::test]
async fn fifty_sends_at_once_end_at_most_one_call_over_the_token_cap() {
    let server = server_with(A2aOptions::default(), json!({"tokensPerDay": 10000})).await;
    send_at_once(&server, 50, &slow_call_of_9000_tokens()).await;
    let used = tokens_today(&server);
    assert!(used >= 9000, "no call ran: {used}");
    assert!(used <= 10000 + 9000, "{used} tokens against a cap of 10,000");
    // Once the cap is reached nothing more runs: a send is refused.
    let refused = send(&server, "hello").await;
    assert_eq!(refused["error"]["data"][0]["reason"], "DAILY_LIMIT_REACHED", "{refused}");
}

#[tokio::test]
async fn fifty_sends_at_once_end_at_most_one_call_over_the_spending_cap() {
    let mut options = A2aOptions::default();
    // Ten dollars per million tokens either way: a call of 9,000 tokens costs $0.09.
    options.usage.prices.insert(
        "faux".into(),
        ModelPrice { input: 10.0, output: 10.0, cache_read: None, cache_write: None },
    );
    let server = server_with(options, json!({"usdPerDay": 1.0})).await;
    send_at_once(&server, 50, &slow_call_of_9000_tokens()).await;
    let report = server.server.usage_report(&workspace(&server));
    let bot = report.callers.iter().find(|c| c.name == "travel-bot").unwrap();
    assert!(bot.counts.usd >= 0.09 - 1e-9, "no call ran: {bot:?}");
    assert!(bot.counts.usd <= 1.0 + 0.09 + 1e-9, "${} against a cap of $1.00", bot.counts.usd);
}

#[tokio::test]
async fn a_cancelled_model_call_counts_what_was_sent_and_what_streamed() {
    let server = server_with(A2aOptions::default(), json!({"tokensPerDay": 1_000_000})).await;
    let text = directive(json!([{"text": "streamed ".repeat(100), "chunk": 9, "delay_ms": 50}]));
    let params = send_params(&text, None);
    let started = server
        .rpc(
            KEY,
            "SendMessage",
            json!({"message": params["message"], "configuration": {"returnImmediately": true}}),
        )
        .await;
    let task_id = started["result"]["task"]["id"].as_str().unwrap().to_string();
    // Cancel once part of the answer has streamed.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let task = server.rpc(KEY, "GetTask", json!({"id": task_id})).await;
        if task["result"]["artifacts"].as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "nothing streamed: {task}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let canceled = server.rpc(KEY, "CancelTask", json!({"id": task_id})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    // The provider bills the input of a call it started: at least the input estimate of what
    // was sent, plus the chunk that streamed, is counted.
    let request = server.faux.requests().pop().unwrap();
    let nothing = volcanic_core::message::AssistantMessage::default();
    let input = volcanic_core::provider::estimate_usage(&request, &nothing).input_tokens;
    assert!(input > 100, "{input}");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while tokens_today(&server) == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = server.server.usage_report(&workspace(&server));
    let bot = report.callers.iter().find(|c| c.name == "travel-bot").unwrap();
    assert!(bot.counts.input_tokens >= input, "{bot:?} (input estimate {input})");
    assert!(bot.counts.output_tokens >= 2, "what streamed is not counted: {bot:?}");
    assert_eq!(bot.counts.estimated_calls, 1, "{bot:?}");
}

/// A caller's context that outgrows the model's window compacts within its own conversation, and
/// the summary call's tokens count in the caller's usage like any answer's.
#[tokio::test]
async fn a_callers_long_context_compacts_and_the_summary_call_is_counted() {
    let faux =
        Arc::new(volcanic_core::provider::faux::FauxProvider::new().with_context_window(8000));
    let server = TestServer::with(Setup { provider: Some(faux.clone()), ..Setup::default() }).await;
    let mut context = None;
    for i in 0..8 {
        let text = format!("part {i}: {}", "a long story about the garden ".repeat(200));
        let extra = context.clone().map(|id: String| json!({ "contextId": id }));
        let body = server.rpc(KEY, "SendMessage", send_params(&text, extra)).await;
        assert_eq!(state(&body), "TASK_STATE_COMPLETED", "message {i}: {body}");
        context = Some(body["result"]["task"]["contextId"].as_str().unwrap().to_string());
    }
    let summaries = faux
        .requests()
        .iter()
        .filter(|r| r.system == volcanic_core::session::SUMMARY_SYSTEM_PROMPT)
        .count();
    assert!(summaries > 0, "the context compacted");
    let sessions = server.state.path().join("sessions");
    let journal = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().contains("travel-bot"))
        .map(|e| std::fs::read_to_string(e.path().join("session.jsonl")).unwrap())
        .unwrap();
    let mut spent = 0;
    let mut compactions = 0;
    for line in journal.lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        let usage = match entry["type"].as_str().unwrap() {
            "message" => &entry["message"]["usage"],
            "compaction" => {
                compactions += 1;
                &entry["compaction"]["usage"]
            }
            _ => continue,
        };
        spent += ["input_tokens", "output_tokens"]
            .iter()
            .map(|k| usage[k].as_u64().unwrap_or(0))
            .sum::<u64>();
    }
    assert_eq!(compactions, summaries);
    assert_eq!(tokens_today(&server), spent, "every call counted, the summaries included");
}
