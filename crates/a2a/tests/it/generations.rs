//! Task generations (issue 21, item 4): the A2A 1.1 draft's `generation`, offered as an
//! extension a 1.0 caller activates with `A2A-Extensions`. Without it nothing on the wire
//! changes; with it tasks and events carry their generation, GetTask with `currentGeneration`
//! waits for the task to move, and a send with `ifGenerationMatch` continues a task only at that
//! generation.

use std::time::Duration;

use serde_json::{Value, json};
use volcanic_a2a::A2aOptions;
use volcanic_a2a::binding::generations::GENERATIONS_EXTENSION;

use volcanic_test_support::sse::collect_json;

use crate::support::{DEADLINE, KEY, Setup, TestServer, directive, send_params};

/// A JSON-RPC 1.0 call that activates the extension: the response's `A2A-Extensions` header and
/// body.
async fn rpc(server: &TestServer, method: &str, params: Value) -> (Option<String>, Value) {
    let request = server
        .client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0")
        .header("A2A-Extensions", format!("https://example.com/other, {GENERATIONS_EXTENSION}"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    let echoed = response.headers().get("a2a-extensions").map(|v| v.to_str().unwrap().to_string());
    (echoed, response.json().await.unwrap())
}

/// A REST 1.0 call that activates the extension: status and body.
async fn rest(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = server
        .client
        .request(method, format!("{}/a2a/v1{path}", server.base))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0")
        .header("A2A-Extensions", GENERATIONS_EXTENSION);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

/// A streaming call that activates the extension: every event's data.
async fn stream(server: &TestServer, rest_binding: bool, params: Value) -> Vec<Value> {
    let request = if rest_binding {
        server.client.post(format!("{}/a2a/v1/message:stream", server.base)).json(&params)
    } else {
        server.client.post(format!("{}/a2a", server.base)).json(
            &json!({"jsonrpc": "2.0", "id": "s", "method": "SendStreamingMessage", "params": params}),
        )
    };
    let request = request
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0")
        .header("A2A-Extensions", GENERATIONS_EXTENSION);
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    assert_eq!(response.headers()["a2a-extensions"], GENERATIONS_EXTENSION);
    collect_json(response, DEADLINE).await
}

/// A generation as the wire has it: a decimal string (ProtoJSON `int64`).
fn generation(task_or_event: &Value) -> u64 {
    let text = task_or_event["generation"]
        .as_str()
        .unwrap_or_else(|| panic!("no generation string in {task_or_event}"));
    text.parse().unwrap()
}

/// The inner object of a 1.0 stream event (JSON-RPC result or REST body).
fn inner(event: &Value) -> &Value {
    let event = event.get("result").unwrap_or(event);
    ["task", "statusUpdate", "artifactUpdate"]
        .iter()
        .find_map(|kind| event.get(*kind))
        .unwrap_or_else(|| panic!("not a task event: {event}"))
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

/// A task left waiting for input (a run that called `request_input`), through a call that
/// activates the extension: its id and generation.
async fn input_required(server: &TestServer) -> (String, u64) {
    let ask = directive(json!([{"tool": "request_input", "args": {"question": "Which city?"}}]));
    let (_, body) = rpc(server, "SendMessage", send_params(&ask, None)).await;
    let task = &body["result"]["task"];
    assert_eq!(state(task), "TASK_STATE_INPUT_REQUIRED", "{body}");
    (task["id"].as_str().unwrap().to_string(), generation(task))
}

#[tokio::test]
async fn without_the_extension_no_generation_reaches_the_wire() {
    let server = TestServer::start().await;
    // The card declares the extension, not required.
    let card: Value = server
        .client
        .get(format!("{}/.well-known/agent-card.json", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let declared = card["capabilities"]["extensions"].as_array().unwrap();
    assert!(
        declared.iter().any(|e| e["uri"] == GENERATIONS_EXTENSION && e.get("required").is_none()),
        "{card}"
    );

    let task = server.send("hello").await;
    let id = task["task"]["id"].as_str().unwrap().to_string();
    let got = server.rpc(KEY, "GetTask", json!({"id": id, "currentGeneration": "1"})).await;
    let events = server
        .rpc_stream(KEY, Some("1.0"), "SendStreamingMessage", send_params("again", None))
        .await;
    let (_, rest_task) =
        server.rest(KEY, reqwest::Method::GET, &format!("/tasks/{id}"), None).await;
    for body in [&task, &got, &Value::Array(events), &rest_task] {
        assert!(!body.to_string().contains("\"generation\""), "{body}");
    }
    // A 0.3 call naming the extension gets nothing either (0.3 has no generations).
    let response = server
        .client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", KEY)
        .header("X-A2A-Extensions", GENERATIONS_EXTENSION)
        .header("A2A-Extensions", GENERATIONS_EXTENSION)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": id}}))
        .send()
        .await
        .unwrap();
    assert!(response.headers().get("a2a-extensions").is_none());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["id"], id.as_str(), "{body}");
    assert!(!body.to_string().contains("\"generation\""), "{body}");
}

#[tokio::test]
async fn every_event_carries_the_next_generation_from_1_on_both_bindings() {
    let server = TestServer::start().await;
    for rest_binding in [false, true] {
        let prompt = directive(json!([
            {"text": "Let me look."}, {"tool": "ls", "args": {}}, {"text": "Found it.", "chunk": 3}
        ]));
        let events = stream(&server, rest_binding, send_params(&prompt, None)).await;
        let generations: Vec<u64> = events.iter().map(|event| generation(inner(event))).collect();
        assert!(events[0].get("result").unwrap_or(&events[0]).get("task").is_some());
        assert_eq!(generations[0], 1, "a new task starts at 1: {events:?}");
        for pair in generations.windows(2) {
            assert_eq!(pair[1], pair[0] + 1, "by exactly one per event: {generations:?}");
        }
        let id = inner(&events[0])["id"].as_str().unwrap().to_string();
        // GetTask shows the generation of the last event, on both bindings.
        let last = *generations.last().unwrap();
        let (echoed, got) = rpc(&server, "GetTask", json!({"id": id})).await;
        assert_eq!(echoed.as_deref(), Some(GENERATIONS_EXTENSION));
        assert_eq!(generation(&got["result"]), last, "{got}");
        let (status, got) =
            rest(&server, reqwest::Method::GET, &format!("/tasks/{id}"), None).await;
        assert_eq!((status, generation(&got)), (200, last), "{got}");
    }
}

#[tokio::test]
async fn get_task_with_current_generation_waits_for_the_next_change() {
    let server = TestServer::start().await;
    let (id, at) = input_required(&server).await;

    // Already past: answered at once.
    let (_, got) = rpc(&server, "GetTask", json!({"id": id, "currentGeneration": at - 1})).await;
    assert_eq!(generation(&got["result"]), at);

    // At the current generation: held until the task moves (here: a continuation).
    let poll = rpc(&server, "GetTask", json!({"id": id, "currentGeneration": at.to_string()}));
    tokio::pin!(poll);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut poll).await.is_err(),
        "a task that has not moved is not answered yet"
    );
    let (_, continued) =
        rpc(&server, "SendMessage", send_params("Paris", Some(json!({"taskId": id})))).await;
    assert_eq!(state(&continued["result"]["task"]), "TASK_STATE_COMPLETED", "{continued}");
    let (_, moved) = tokio::time::timeout(DEADLINE, poll).await.expect("answered once it moved");
    assert!(generation(&moved["result"]) > at, "{moved}");
}

#[tokio::test]
async fn a_long_poll_of_a_task_at_rest_wakes_on_its_cancel() {
    let server = TestServer::start().await;
    let (id, at) = input_required(&server).await;
    let path = format!("/tasks/{id}?currentGeneration={at}");
    let poll = rest(&server, reqwest::Method::GET, &path, None);
    tokio::pin!(poll);
    assert!(tokio::time::timeout(Duration::from_millis(300), &mut poll).await.is_err());
    let (_, canceled) = rpc(&server, "CancelTask", json!({"id": id})).await;
    assert_eq!(generation(&canceled["result"]), at + 1, "{canceled}");
    // Well before the 30 s bound: the cancel's write woke the poll.
    let (status, moved) = tokio::time::timeout(DEADLINE, poll).await.expect("woken by the cancel");
    assert_eq!(status, 200);
    assert_eq!((state(&moved), generation(&moved)), ("TASK_STATE_CANCELED", at + 1), "{moved}");
}

#[tokio::test]
async fn a_long_poll_ends_at_its_bound_with_the_task_as_it_is() {
    let options =
        A2aOptions { max_generation_wait: Duration::from_millis(200), ..A2aOptions::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    let (id, at) = input_required(&server).await;
    let (_, got) = rpc(&server, "GetTask", json!({"id": id, "currentGeneration": at})).await;
    assert_eq!(
        (state(&got["result"]), generation(&got["result"])),
        ("TASK_STATE_INPUT_REQUIRED", at)
    );
    // A bad value is refused before any wait.
    let (_, bad) = rpc(&server, "GetTask", json!({"id": id, "currentGeneration": "soon"})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[tokio::test]
async fn a_send_with_a_stale_if_generation_match_is_refused_with_the_drafts_error() {
    let server = TestServer::start().await;
    let (id, at) = input_required(&server).await;
    let stale = |text: &str| {
        let mut params = send_params(text, Some(json!({"taskId": id})));
        params["configuration"] = json!({"ifGenerationMatch": (at - 1).to_string()});
        params
    };

    let (_, refused) = rpc(&server, "SendMessage", stale("Paris")).await;
    let error = &refused["error"];
    assert_eq!(error["code"], -32010, "{refused}");
    assert_eq!(error["data"][0]["reason"], "TASK_GENERATION_MISMATCH");
    assert_eq!(error["data"][0]["metadata"]["expectedGeneration"], (at - 1).to_string());
    assert_eq!(error["data"][0]["metadata"]["currentGeneration"], at.to_string());
    let (status, refused) =
        rest(&server, reqwest::Method::POST, "/message:send", Some(stale("Rome"))).await;
    assert_eq!((status, &refused["error"]["status"]), (409, &json!("ABORTED")), "{refused}");
    // Nothing of the task changed.
    let (_, got) = rpc(&server, "GetTask", json!({"id": id})).await;
    assert_eq!(
        (state(&got["result"]), generation(&got["result"])),
        ("TASK_STATE_INPUT_REQUIRED", at)
    );

    // Without the extension the field is an unknown one: ignored.
    let plain = server.rpc(KEY, "SendMessage", stale("Oslo")).await;
    assert_eq!(state(&plain["result"]["task"]), "TASK_STATE_COMPLETED", "{plain}");

    // At the task's generation the continuation goes through.
    let (id, at) = input_required(&server).await;
    let mut params = send_params("Paris", Some(json!({"taskId": id})));
    params["configuration"] = json!({"ifGenerationMatch": at});
    let (_, continued) = rpc(&server, "SendMessage", params).await;
    let task = &continued["result"]["task"];
    assert_eq!(state(task), "TASK_STATE_COMPLETED", "{continued}");
    assert!(generation(task) > at);
}

#[tokio::test]
async fn a_tasks_generation_survives_a_restart_and_goes_on_from_there() {
    let server = TestServer::start().await;
    let (id, at) = input_required(&server).await;
    let (workspace, extra, state_dir) = server.stop().await;
    let server = TestServer::start_in(workspace, extra, state_dir, Setup::default()).await;
    let (_, got) = rpc(&server, "GetTask", json!({"id": id})).await;
    assert_eq!(generation(&got["result"]), at, "{got}");
    let (_, canceled) = rpc(&server, "CancelTask", json!({"id": id})).await;
    assert_eq!(generation(&canceled["result"]), at + 1, "{canceled}");
}

#[tokio::test]
async fn a_subscription_to_a_task_at_rest_shows_each_generation_once() {
    let server = TestServer::start().await;
    let (id, at) = input_required(&server).await;
    let request = server
        .client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0")
        .header("A2A-Extensions", GENERATIONS_EXTENSION)
        .json(&json!({"jsonrpc": "2.0", "id": "s", "method": "SubscribeToTask", "params": {"id": id}}));
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    let events = collect_json(response, DEADLINE).await;
    // The task, at its generation; the status it already shows is not repeated under the same
    // generation (a client would take that for a server without generations).
    let generations: Vec<u64> = events.iter().map(|event| generation(inner(event))).collect();
    assert_eq!(generations, vec![at], "{events:?}");
    assert_eq!(state(inner(&events[0])), "TASK_STATE_INPUT_REQUIRED");

    // Without the extension the stream is as before: the task, then its status.
    let plain = server.subscribe_or_refusal(KEY, &id).await;
    assert_eq!(plain.len(), 2, "{plain:?}");
}
