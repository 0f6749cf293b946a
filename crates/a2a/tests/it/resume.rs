//! Resuming a stream (issue 21, item 3): every SSE event carries an id, and SubscribeToTask with
//! `Last-Event-ID` replays what the client missed, then goes live, on both bindings and in 0.3.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::{DEADLINE, KEY, OTHER_KEY, Setup, TestServer, directive, send_params};

/// How a test talks to the server.
#[derive(Debug, Clone, Copy)]
enum Via {
    JsonRpc,
    Rest,
    /// 0.3 JSON-RPC, without `A2A-Version`.
    JsonRpc03,
}

/// One SSE event: its `id:` and its data.
#[derive(Debug, Clone, PartialEq)]
struct Frame {
    id: String,
    data: Value,
}

impl Frame {
    /// The stream event, whatever the binding: the JSON-RPC result, or the REST body.
    fn event(&self) -> &Value {
        self.data.get("result").unwrap_or(&self.data)
    }

    /// The id as (run, seq).
    fn position(&self) -> (u32, u32) {
        let (run, seq) = self.id.split_once('.').unwrap_or_else(|| panic!("bad id {:?}", self.id));
        (run.parse().unwrap(), seq.parse().unwrap())
    }

    /// A status update's state, in the 1.0 spelling.
    fn state(&self) -> Option<String> {
        let event = self.event();
        let status = match event.get("statusUpdate") {
            Some(update) => &update["status"],
            None if event["kind"] == "status-update" => &event["status"],
            None => return None,
        };
        let state = status["state"].as_str()?;
        Some(if state.starts_with("TASK_STATE_") {
            state.to_string()
        } else {
            format!("TASK_STATE_{}", state.replace('-', "_").to_uppercase())
        })
    }

    /// An artifact update's text and whether it appends.
    fn chunk(&self) -> Option<(String, bool)> {
        let event = self.event();
        let update = match event.get("artifactUpdate") {
            Some(update) => update,
            None if event["kind"] == "artifact-update" => event,
            None => return None,
        };
        let text = update["artifact"]["parts"]
            .as_array()?
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<String>();
        Some((text, update["append"] == true))
    }

    fn is_task(&self) -> bool {
        self.event().get("task").is_some() || self.event()["kind"] == "task"
    }
}

/// The answer the frames add up to (a task shows the answer so far, a replacing update starts
/// over).
fn answer(frames: &[Frame]) -> String {
    let mut answer = String::new();
    for frame in frames {
        if frame.is_task() {
            let event = frame.event();
            answer = response_text(event.get("task").unwrap_or(event));
        }
        if let Some((text, append)) = frame.chunk() {
            if !append {
                answer.clear();
            }
            answer.push_str(&text);
        }
    }
    answer
}

fn stream_request(server: &TestServer, via: Via, text: &str) -> reqwest::RequestBuilder {
    match via {
        Via::JsonRpc => server
            .client
            .post(format!("{}/a2a", server.base))
            .header("X-API-Key", KEY)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": "s1", "method": "SendStreamingMessage",
                "params": send_params(text, None)})),
        Via::Rest => server
            .client
            .post(format!("{}/a2a/v1/message:stream", server.base))
            .header("X-API-Key", KEY)
            .header("A2A-Version", "1.0")
            .json(&send_params(text, None)),
        Via::JsonRpc03 => server.client.post(format!("{}/a2a", server.base)).header("X-API-Key", KEY).json(
            &json!({"jsonrpc": "2.0", "id": "s1", "method": "message/stream", "params": {"message": {
                "kind": "message", "messageId": crate::support::uuid(), "role": "user",
                "parts": [{"kind": "text", "text": text}]}}}),
        ),
    }
}

fn subscribe_request(
    server: &TestServer,
    via: Via,
    key: &str,
    task_id: &str,
    last_event_id: Option<&str>,
) -> reqwest::RequestBuilder {
    let request = match via {
        Via::JsonRpc => server
            .client
            .post(format!("{}/a2a", server.base))
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": "s1", "method": "SubscribeToTask",
                "params": {"id": task_id}})),
        Via::Rest => server
            .client
            .post(format!("{}/a2a/v1/tasks/{task_id}:subscribe", server.base))
            .header("A2A-Version", "1.0"),
        Via::JsonRpc03 => server
            .client
            .post(format!("{}/a2a", server.base))
            .json(&json!({"jsonrpc": "2.0", "id": "s1", "method": "tasks/resubscribe",
                "params": {"id": task_id}})),
    };
    let request = request.header("X-API-Key", key);
    match last_event_id {
        Some(id) => request.header("Last-Event-ID", id),
        None => request,
    }
}

/// Sends `request` and reads its SSE events: `limit` of them (then the connection is dropped),
/// or all of them until the server closes the stream.
async fn frames(request: reqwest::RequestBuilder, limit: Option<usize>) -> Vec<Frame> {
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut stream = response.bytes_stream().eventsource();
    let mut frames = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while limit.is_none_or(|limit| frames.len() < limit) {
            let Some(event) = stream.next().await else { break };
            let event = event.unwrap();
            frames.push(Frame { id: event.id, data: serde_json::from_str(&event.data).unwrap() });
        }
    })
    .await
    .expect("the stream did not give its events in time");
    frames
}

/// The task id of a stream's first event.
fn task_id(first: &Frame) -> String {
    let event = first.event();
    let id = event.get("task").map_or(&event["id"], |task| &task["id"]);
    id.as_str().unwrap_or_else(|| panic!("no task first: {first:?}")).to_string()
}

/// The task as GetTask returns it now.
async fn get_task(server: &TestServer, id: &str) -> Value {
    server.rpc(KEY, "GetTask", json!({"id": id})).await["result"].clone()
}

fn response_text(task: &Value) -> String {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|artifact| artifact["name"] == "response")
        .flat_map(|artifact| artifact["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|part| part["text"].as_str().map(str::to_string))
        .collect()
}

/// Waits (bounded) until `done` holds for the task.
async fn wait_for_task(server: &TestServer, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    tokio::time::timeout(DEADLINE, async {
        loop {
            let task = get_task(server, id).await;
            if done(&task) {
                return task;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the task did not get there in time")
}

/// Every id is `<run>.<seq>` and each is the next after the one before: no gap, no repeat.
fn assert_consecutive(frames: &[Frame], after: (u32, u32)) {
    let mut last = after;
    for frame in frames {
        let position = frame.position();
        assert_eq!(position, (last.0, last.1 + 1), "{frame:?} after {last:?}");
        last = position;
    }
}

/// A client that drops its stream while the task works, then resumes with the last id it got,
/// gets exactly the events it missed, then the live ones, ending at the final status.
async fn dropped_stream_resumes_without_gap_or_repeat(via: Via) {
    let server = TestServer::start().await;
    let words: String = (0..30).map(|i| format!("w{i:02} ")).collect();
    let text = directive(json!([{"text": words, "chunk": 4, "delay_ms": 150}]));
    // The task (working) and five chunks; then the client goes.
    let before = frames(stream_request(&server, via, &text), Some(6)).await;
    let id = task_id(&before[0]);
    assert!(before.iter().all(|frame| !frame.id.is_empty()), "{before:?}");
    assert_consecutive(&before[1..], before[0].position());
    let got = answer(&before);
    assert_eq!(got, words[..20], "{before:?}");
    // The run goes on without the client: wait until it has streamed more than it got.
    let task = wait_for_task(&server, &id, |task| response_text(task).len() >= got.len() + 8).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_WORKING", "the run must still be going");

    let last = before.last().unwrap();
    let after = frames(subscribe_request(&server, via, KEY, &id, Some(&last.id)), None).await;
    assert!(after.iter().all(|frame| !frame.is_task()), "a resumed stream continues: {after:?}");
    assert_consecutive(&after, last.position());
    let replayed = after.iter().take_while(|f| f.chunk().is_some()).count();
    assert!(replayed >= 2, "the events made while the client was away come first: {after:?}");
    assert_eq!(after.last().and_then(Frame::state).as_deref(), Some("TASK_STATE_COMPLETED"));
    let whole: Vec<Frame> = before.into_iter().chain(after).collect();
    assert_eq!(answer(&whole), words, "every chunk exactly once");
}

#[tokio::test]
async fn jsonrpc_dropped_stream_resumes_with_last_event_id_without_gap_or_repeat() {
    dropped_stream_resumes_without_gap_or_repeat(Via::JsonRpc).await;
}

#[tokio::test]
async fn rest_dropped_stream_resumes_with_last_event_id_without_gap_or_repeat() {
    dropped_stream_resumes_without_gap_or_repeat(Via::Rest).await;
}

#[tokio::test]
async fn v03_dropped_stream_resumes_with_last_event_id_without_gap_or_repeat() {
    dropped_stream_resumes_without_gap_or_repeat(Via::JsonRpc03).await;
}

/// A whole stream of a short run, and its task id, once the task has settled.
async fn settled_stream(server: &TestServer, via: Via) -> (String, Vec<Frame>) {
    let text = directive(json!([{"text": "abcdefghij", "chunk": 2}]));
    let all = frames(stream_request(server, via, &text), None).await;
    let id = task_id(&all[0]);
    assert_consecutive(&all[1..], all[0].position());
    assert_eq!(all.last().and_then(Frame::state).as_deref(), Some("TASK_STATE_COMPLETED"));
    wait_for_task(server, &id, |task| task["status"]["state"] == "TASK_STATE_COMPLETED").await;
    (id, all)
}

async fn settled_task_replays_what_was_missed_and_closes(via: Via) {
    let server = TestServer::start().await;
    let (id, all) = settled_stream(&server, via).await;
    assert!(all.len() >= 5, "{all:?}");
    for seen in 1..all.len() {
        let replay =
            frames(subscribe_request(&server, via, KEY, &id, Some(&all[seen].id)), None).await;
        assert_eq!(replay, all[seen + 1..], "after {}", all[seen].id);
    }
    // Without an id, a settled task is still refused (issue 20).
    let refused = subscribe_request(&server, via, KEY, &id, None).send().await.unwrap();
    match via {
        Via::Rest => assert_eq!(refused.status(), 400),
        Via::JsonRpc | Via::JsonRpc03 => {
            assert_eq!(refused.headers()["content-type"], "application/json");
            let body: Value = refused.json().await.unwrap();
            assert_eq!(body["error"]["code"], -32004, "{body}");
        }
    }
    // Another caller's task stays unknown, with an id or without.
    let other = subscribe_request(&server, via, OTHER_KEY, &id, Some(&all[1].id));
    let other = other.send().await.unwrap();
    let text = other.text().await.unwrap();
    assert!(text.contains("-32001") || text.contains("TASK_NOT_FOUND"), "{text}");
}

#[tokio::test]
async fn jsonrpc_settled_task_with_last_event_id_replays_the_missed_events_and_closes() {
    settled_task_replays_what_was_missed_and_closes(Via::JsonRpc).await;
}

#[tokio::test]
async fn rest_settled_task_with_last_event_id_replays_the_missed_events_and_closes() {
    settled_task_replays_what_was_missed_and_closes(Via::Rest).await;
}

#[tokio::test]
async fn v03_settled_task_with_last_event_id_replays_the_missed_events_and_closes() {
    settled_task_replays_what_was_missed_and_closes(Via::JsonRpc03).await;
}

#[tokio::test]
async fn settled_task_replays_its_final_events_after_a_restart() {
    let server = TestServer::start().await;
    let (id, all) = settled_stream(&server, Via::Rest).await;
    let (workspace, extra, state) = server.stop().await;
    let server = TestServer::start_in(workspace, extra, state, Setup::default()).await;
    for seen in 1..all.len() {
        let request = subscribe_request(&server, Via::Rest, KEY, &id, Some(&all[seen].id));
        assert_eq!(frames(request, None).await, all[seen + 1..], "after {}", all[seen].id);
    }
}

#[tokio::test]
async fn a_position_no_longer_held_starts_from_the_task() {
    let server = TestServer::start().await;
    let (id, all) = settled_stream(&server, Via::JsonRpc).await;
    let last = all.last().unwrap();
    // An earlier run's position, and one the task has not reached: the task, then its status.
    for stale in ["0.7", "9.1", &format!("{}.{}", last.position().0, last.position().1 + 1)] {
        let replay =
            frames(subscribe_request(&server, Via::JsonRpc, KEY, &id, Some(stale)), None).await;
        assert_eq!(replay.len(), 2, "{stale}: {replay:?}");
        assert!(replay[0].is_task());
        assert_eq!(replay[0].event()["task"]["status"], last.event()["statusUpdate"]["status"]);
        assert_eq!(replay[1], *last);
    }
}

#[tokio::test]
async fn a_malformed_last_event_id_is_invalid_params() {
    let server = TestServer::start().await;
    let (id, _) = settled_stream(&server, Via::JsonRpc).await;
    let error = frames(subscribe_request(&server, Via::JsonRpc, KEY, &id, Some("abc")), None).await;
    assert_eq!(error.len(), 1);
    assert_eq!(error[0].data["error"]["code"], -32602, "{error:?}");
    let response =
        subscribe_request(&server, Via::Rest, KEY, &id, Some("1.2.3")).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("Last-Event-ID"), "{body}");
}

#[tokio::test]
async fn a_live_subscription_without_last_event_id_starts_with_the_task_at_its_position() {
    let server = TestServer::start().await;
    let text = directive(json!([{"text": "slow answer", "chunk": 2, "delay_ms": 100}]));
    let first = frames(stream_request(&server, Via::Rest, &text), Some(3)).await;
    let id = task_id(&first[0]);
    let subscribed = frames(subscribe_request(&server, Via::Rest, KEY, &id, None), None).await;
    assert!(subscribed[0].is_task(), "{subscribed:?}");
    assert_consecutive(&subscribed[1..], subscribed[0].position());
    assert_eq!(answer(&subscribed), "slow answer");
    assert_eq!(subscribed.last().and_then(Frame::state).as_deref(), Some("TASK_STATE_COMPLETED"));
}

#[tokio::test]
async fn a_continued_task_numbers_its_second_run_after_the_first() {
    let server = TestServer::start().await;
    let ask = directive(json!([{"tool": "request_input", "args": {"question": "Which city?"}}]));
    let first = frames(stream_request(&server, Via::JsonRpc, &ask), None).await;
    let id = task_id(&first[0]);
    assert_eq!(first.last().and_then(Frame::state).as_deref(), Some("TASK_STATE_INPUT_REQUIRED"));
    let params = send_params("Paris", Some(json!({"taskId": id})));
    let request = server
        .client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": "s1", "method": "SendStreamingMessage", "params": params}));
    let second = frames(request, None).await;
    let (first_run, _) = first.last().unwrap().position();
    assert_eq!(second[0].position().0, first_run + 1, "{second:?}");
    assert_consecutive(&second[1..], second[0].position());
    // The first run's end is behind the second run: resuming from it starts from the task.
    wait_for_task(&server, &id, |task| task["status"]["state"] == "TASK_STATE_COMPLETED").await;
    let resumed = frames(
        subscribe_request(&server, Via::JsonRpc, KEY, &id, Some(&first.last().unwrap().id)),
        None,
    )
    .await;
    assert!(resumed[0].is_task(), "{resumed:?}");
}
