//! 64 callers over 4 workspaces, three contexts each, sending, streaming, subscribing, cancelling
//! and reading at once for a bounded time. Every response is checked for tasks of another caller;
//! afterwards every acknowledged task reaches a final state that matches what was asked, and every
//! context still answers (a refused busy send never corrupts a session).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Setup, TestServer, directive, send_params, write_callers};

const WORKSPACES: usize = 4;
const CALLERS_PER_WORKSPACE: usize = 16;
const CONTEXTS: usize = 3;
/// How long the callers hammer the server.
const LOAD_FOR: Duration = Duration::from_secs(4);

/// Every task and context id seen, with the one caller allowed to see it.
#[derive(Default)]
struct Owners {
    tasks: Mutex<HashMap<String, usize>>,
}

impl Owners {
    /// Claims every task id in a response for `caller`; panics if another caller saw it first.
    fn claim(&self, caller: usize, value: &Value) {
        match value {
            Value::Object(map) => {
                let task_id = match (map.get("taskId"), map.get("id"), map.get("status")) {
                    (Some(Value::String(id)), _, _) => Some(id),
                    (_, Some(Value::String(id)), Some(_)) if map.contains_key("contextId") => {
                        Some(id)
                    }
                    _ => None,
                };
                if let Some(id) = task_id {
                    let mut tasks = self.tasks.lock().unwrap();
                    let owner = *tasks.entry(id.clone()).or_insert(caller);
                    assert_eq!(owner, caller, "caller {caller} was shown task {id} of {owner}");
                }
                map.values().for_each(|v| self.claim(caller, v));
            }
            Value::Array(items) => items.iter().for_each(|v| self.claim(caller, v)),
            _ => {}
        }
    }
}

#[derive(Clone)]
struct Who {
    index: usize,
    key: String,
}

fn key_of(index: usize) -> String {
    format!("k_load_caller_{index:03}_secret")
}

/// A task a caller was told about, with what its answer must contain when it completes.
struct Sent {
    task_id: String,
    expect: Option<String>,
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

async fn caller_loop(
    server: Arc<TestServer>,
    who: Who,
    owners: Arc<Owners>,
    until: Instant,
) -> (Vec<Sent>, usize) {
    let mut sent = Vec::new();
    let mut busy = 0;
    let mut n = 0usize;
    while Instant::now() < until && n < 200 {
        n += 1;
        let context = format!("ctx-{}-{}", who.index, n % CONTEXTS);
        let text = format!("hello from {} number {n}", who.index);
        match (who.index + n) % 6 {
            0 | 1 => {
                let prompt = if n.is_multiple_of(4) {
                    format!(
                        "{text}\n{}",
                        directive(json!([{"text": text, "chunk": 5, "delay_ms": 5}]))
                    )
                } else {
                    text.clone()
                };
                let params = send_params(&prompt, Some(json!({"contextId": context})));
                let body = server.rpc(&who.key, "SendMessage", params).await;
                owners.claim(who.index, &body);
                if body["error"]["code"] == -32004 {
                    busy += 1;
                    continue;
                }
                let task = &body["result"]["task"];
                assert!(task.is_object(), "caller {}: {body}", who.index);
                sent.push(Sent {
                    task_id: task["id"].as_str().unwrap().into(),
                    expect: Some(text),
                });
            }
            2 => {
                let prompt = directive(json!([{"text": text, "chunk": 4, "delay_ms": 3}]));
                let params = send_params(&prompt, Some(json!({"contextId": context})));
                let events =
                    server.rpc_stream(&who.key, Some("1.0"), "SendStreamingMessage", params).await;
                owners.claim(who.index, &Value::Array(events.clone()));
                if events.first().is_some_and(|e| e["error"]["code"] == -32004) {
                    busy += 1;
                    continue;
                }
                let task = &events[0]["result"]["task"];
                assert!(task.is_object(), "caller {}: {events:?}", who.index);
                sent.push(Sent {
                    task_id: task["id"].as_str().unwrap().into(),
                    expect: Some(text),
                });
            }
            3 => {
                // A long run started in the background, then subscribed to and cancelled.
                let prompt = directive(json!([{"sleep_ms": 20000}]));
                let params = json!({
                    "message": send_params(&prompt, Some(json!({"contextId": context})))["message"],
                    "configuration": {"returnImmediately": true},
                });
                let body = server.rpc(&who.key, "SendMessage", params).await;
                owners.claim(who.index, &body);
                if body["error"]["code"] == -32004 {
                    busy += 1;
                    continue;
                }
                let id = body["result"]["task"]["id"].as_str().unwrap().to_string();
                let subscriber = {
                    let server = server.clone();
                    let key = who.key.clone();
                    let id = id.clone();
                    // The cancel below may settle the task before the subscription arrives.
                    tokio::spawn(async move { server.subscribe_or_refusal(&key, &id).await })
                };
                // The context is busy while the run works: a second send is refused, cleanly.
                let again = send_params("me too", Some(json!({"contextId": context})));
                let refused = server.rpc(&who.key, "SendMessage", again).await;
                owners.claim(who.index, &refused);
                assert_eq!(refused["error"]["code"], -32004, "{refused}");
                busy += 1;
                let canceled = server.rpc(&who.key, "CancelTask", json!({"id": id})).await;
                owners.claim(who.index, &canceled);
                assert_eq!(state(&canceled["result"]), "TASK_STATE_CANCELED", "{canceled}");
                let events = tokio::time::timeout(Duration::from_secs(20), subscriber)
                    .await
                    .unwrap()
                    .unwrap();
                owners.claim(who.index, &Value::Array(events.clone()));
                sent.push(Sent { task_id: id, expect: None });
            }
            4 => {
                let body = server.rpc(&who.key, "ListTasks", json!({"pageSize": 50})).await;
                owners.claim(who.index, &body);
                assert!(body["result"]["tasks"].is_array(), "{body}");
            }
            _ => {
                if let Some(last) = sent.last() {
                    let body = server.rpc(&who.key, "GetTask", json!({"id": last.task_id})).await;
                    owners.claim(who.index, &body);
                    assert!(body["result"].is_object(), "{body}");
                }
            }
        }
    }
    (sent, busy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_callers_over_workspaces_stay_isolated_and_consistent() {
    let server =
        TestServer::with(Setup { extra_workspaces: WORKSPACES - 1, ..Setup::default() }).await;
    let mut folders = vec![server.ws().to_path_buf()];
    folders.extend(server.extra.iter().map(|d| d.path().to_path_buf()));
    let mut callers = Vec::new();
    for (w, folder) in folders.iter().enumerate() {
        let keys: Vec<(String, String)> = (0..CALLERS_PER_WORKSPACE)
            .map(|c| {
                let index = w * CALLERS_PER_WORKSPACE + c;
                (format!("caller-{index}"), key_of(index))
            })
            .collect();
        let refs: Vec<(&str, &str)> = keys.iter().map(|(n, k)| (n.as_str(), k.as_str())).collect();
        write_callers(folder, &refs);
        callers.extend((0..CALLERS_PER_WORKSPACE).map(|c| {
            let index = w * CALLERS_PER_WORKSPACE + c;
            Who { index, key: key_of(index) }
        }));
    }
    let server = Arc::new(server);
    let owners = Arc::new(Owners::default());
    let until = Instant::now() + LOAD_FOR;
    let handles: Vec<_> = callers
        .iter()
        .cloned()
        .map(|who| tokio::spawn(caller_loop(server.clone(), who, owners.clone(), until)))
        .collect();
    let mut results = Vec::new();
    for handle in handles {
        // No deadlock: every caller finishes well within its bounded loop.
        results
            .push(tokio::time::timeout(Duration::from_secs(120), handle).await.unwrap().unwrap());
    }

    let mut acknowledged = 0;
    for (who, (sent, _)) in callers.iter().zip(&results) {
        for task in sent {
            acknowledged += 1;
            let deadline = Instant::now() + Duration::from_secs(20);
            let body = loop {
                let body = server.rpc(&who.key, "GetTask", json!({"id": task.task_id})).await;
                owners.claim(who.index, &body);
                let current = state(&body["result"]);
                if matches!(current, "TASK_STATE_COMPLETED" | "TASK_STATE_CANCELED") {
                    break body;
                }
                assert!(Instant::now() < deadline, "task never finished: {body}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            let result = &body["result"];
            match &task.expect {
                Some(text) => {
                    assert_eq!(state(result), "TASK_STATE_COMPLETED", "{body}");
                    let answer = result["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
                    assert!(answer.contains(text.as_str()), "answer {answer:?} lacks {text:?}");
                }
                None => assert_eq!(state(result), "TASK_STATE_CANCELED", "{body}"),
            }
        }
        // Every context still works after the load, busy refusals included.
        for c in 0..CONTEXTS {
            let context = format!("ctx-{}-{c}", who.index);
            let params = send_params("are you fine?", Some(json!({"contextId": context})));
            let body = server.rpc(&who.key, "SendMessage", params).await;
            owners.claim(who.index, &body);
            assert_eq!(state(&body["result"]["task"]), "TASK_STATE_COMPLETED", "{body}");
        }
    }
    let busy: usize = results.iter().map(|(_, b)| b).sum();
    println!("{} callers: {acknowledged} tasks acknowledged, {busy} busy refusals", callers.len());
    assert!(acknowledged >= callers.len(), "the load produced too few tasks: {acknowledged}");
    assert!(busy > 0, "no busy context was exercised");
}
