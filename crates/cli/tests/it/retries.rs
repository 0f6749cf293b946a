//! Safe retries across a restart of the real binary (issue 21): the record of an accepted
//! message lives in its task file, so a repeat after a restart gets the same task and starts no
//! run; `A2A__RetryRecordsPerCaller` bounds what is remembered.

use serde_json::{Value, json};

use volcanic_test_support::raw_http::body_of;

use crate::serve::{KEY, post, serve, stop, workspace_with_caller};

fn send(message_id: &str, text: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}}})
    .to_string()
}

/// The JSON body of a raw HTTP/1.1 response.
fn body(response: &str) -> Value {
    serde_json::from_str(body_of(response)).unwrap_or_else(|_| panic!("not JSON: {response}"))
}

fn task_id(response: &str) -> String {
    let body = body(response);
    body["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("no task: {body}")).to_string()
}

/// Runs a server reports as ended in its log.
fn runs(stderr: &str) -> usize {
    stderr.matches("a2a task ended").count()
}

#[test]
fn serve_repeated_send_after_a_restart_returns_the_same_task() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    let served = serve(ws.path(), state.path(), &[]);
    let (status, first) = post(&served.base, KEY, &send("retry-1", "hello"));
    assert_eq!(status, 200, "{first}");
    let id = task_id(&first);
    let (code, stderr) = stop(served);
    assert_eq!((code, runs(&stderr)), (0, 1), "{stderr}");

    let served = serve(ws.path(), state.path(), &[]);
    let (_, again) = post(&served.base, KEY, &send("retry-1", "hello"));
    assert_eq!(task_id(&again), id, "the same task after a restart");
    let (_, changed) = post(&served.base, KEY, &send("retry-1", "goodbye"));
    assert_eq!(body(&changed)["error"]["code"], -32602, "{changed}");
    let (code, stderr) = stop(served);
    assert_eq!((code, runs(&stderr)), (0, 0), "no run after the restart: {stderr}");
}

#[test]
fn serve_retry_records_per_caller_come_from_the_environment() {
    let ws = workspace_with_caller();
    let state = tempfile::tempdir().unwrap();
    let served = serve(ws.path(), state.path(), &[("A2A__RetryRecordsPerCaller", "1")]);
    let first = task_id(&post(&served.base, KEY, &send("cap-1", "one")).1);
    let second = task_id(&post(&served.base, KEY, &send("cap-2", "two")).1);
    assert_eq!(task_id(&post(&served.base, KEY, &send("cap-2", "two")).1), second);
    let forgotten = task_id(&post(&served.base, KEY, &send("cap-1", "one")).1);
    assert_ne!(forgotten, first, "one record per caller: the older id was forgotten");
    let (code, stderr) = stop(served);
    assert_eq!((code, runs(&stderr)), (0, 3), "{stderr}");
}
