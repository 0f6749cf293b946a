//! Resuming a stream across a restart of the real binary (issue 21, item 3): a settled task's
//! last events are in its task file, so SubscribeToTask with `Last-Event-ID` replays exactly what
//! a client missed after `volcanic serve` was stopped and started again.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};
use volcanic_test_support::callers::write_callers;

use crate::serve::{serve, stop};

const KEY: &str = "k_resume_test_key_42";
/// Bounds every request and stream of the test.
const DEADLINE: Duration = Duration::from_secs(20);

/// An SSE event: its id and its data.
#[derive(Debug, PartialEq)]
struct Frame {
    id: String,
    data: Value,
}

/// Sends `request` and reads every SSE event until the server closes the stream.
async fn frames(request: reqwest::RequestBuilder) -> Vec<Frame> {
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let mut events = response.bytes_stream().eventsource();
    let mut frames = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while let Some(event) = events.next().await {
            let event = event.unwrap();
            frames.push(Frame { id: event.id, data: serde_json::from_str(&event.data).unwrap() });
        }
    })
    .await
    .expect("the stream did not end in time");
    frames
}

fn subscribe(base: &str, task_id: &str, last_event_id: Option<&str>) -> reqwest::RequestBuilder {
    let request = reqwest::Client::new()
        .post(format!("{base}/a2a/v1/tasks/{task_id}:subscribe"))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0");
    match last_event_id {
        Some(id) => request.header("Last-Event-ID", id),
        None => request,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_restarted_replays_a_settled_tasks_last_events_after_last_event_id() {
    let workspace = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    write_callers(workspace.path(), &[("resumer", KEY)]);
    let quiet = [("RUST_LOG", "warn")];
    let served = serve(workspace.path(), state.path(), &quiet);
    let text = r#"faux> {"steps":[{"text":"one two three four","chunk":5}]}"#;
    let send = reqwest::Client::new()
        .post(format!("{}/a2a/v1/message:stream", served.base))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0")
        .json(&json!({"message": {"messageId": "m-resume", "role": "ROLE_USER",
            "parts": [{"text": text}]}}));
    let all = frames(send).await;
    assert!(all.len() >= 4, "{all:?}");
    let task_id = all[0].data["task"]["id"].as_str().unwrap().to_string();
    let last = all.last().unwrap();
    assert_eq!(last.data["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(all.iter().all(|frame| !frame.id.is_empty()), "{all:?}");
    let (code, _) = stop(served);
    assert_eq!(code, 0);

    let served = serve(workspace.path(), state.path(), &quiet);
    for seen in 1..all.len() {
        let replay = frames(subscribe(&served.base, &task_id, Some(&all[seen].id))).await;
        assert_eq!(replay, all[seen + 1..], "after {}", all[seen].id);
    }
    // A position from before the recorded events starts from the task, then its status.
    let stale = frames(subscribe(&served.base, &task_id, Some("0.1"))).await;
    assert_eq!(stale.len(), 2, "{stale:?}");
    assert_eq!(stale[0].data["task"]["status"], last.data["statusUpdate"]["status"]);
    assert_eq!(stale[1], *last);
    // Without an id a settled task is refused, as before.
    let refused = subscribe(&served.base, &task_id, None).send().await.unwrap();
    assert_eq!(refused.status(), 400);
    let (code, _) = stop(served);
    assert_eq!(code, 0);
}
