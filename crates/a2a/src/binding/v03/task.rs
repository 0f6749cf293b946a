//! 0.3 tasks, artifacts and stream events (A2A 0.3.0 §6.1, §6.7, §7.2): `kind` discriminators,
//! lowercase kebab states, bare results, and `final` on status updates.

use serde_json::{Map, Value, json};

use super::message::{message, message_to_v03, part_to_v03, remove_zero_history_length};
use crate::binding::{TASK_STATES, wire_json};
use crate::task::state::ends_stream;

/// Converts 0.3 `tasks/get` params to 1.0 GetTaskRequest JSON: `historyLength: 0` meant
/// "no limit" (A2A 0.3.0 §7.1.1).
pub(crate) fn get_task_params_to_v1(mut params: Value) -> Value {
    if let Some(map) = params.as_object_mut() {
        remove_zero_history_length(map);
    }
    params
}

/// The 0.3 JSON of a task.
pub(crate) fn task(task: &a2a::Task) -> Value {
    let mut value = wire_json(task);
    task_to_v03(&mut value);
    value
}

/// The 0.3 `message/send` result: the bare task or message, with `kind`.
pub(crate) fn send_response(response: &a2a::SendMessageResponse) -> Value {
    match response {
        a2a::SendMessageResponse::Task(t) => task(t),
        a2a::SendMessageResponse::Message(m) => message(m),
    }
}

/// A ListTasks result with 0.3 tasks. 0.3 has no `tasks/list`; this exists so that every reply
/// has a 0.3 form.
pub(crate) fn task_list(list: &a2a::ListTasksResponse) -> Value {
    let mut value = wire_json(list);
    if let Some(Value::Array(tasks)) = value.get_mut("tasks") {
        tasks.iter_mut().for_each(task_to_v03);
    }
    value
}

/// The 0.3 stream event: a bare task, message, `status-update` or `artifact-update`.
///
/// `final` is true when the status is terminal or interrupted, since we close the stream then
/// and 0.3 clients stop reading on it (A2A 0.3.0 §7.2.2).
pub(crate) fn stream_item(item: &a2a::StreamResponse) -> Value {
    match item {
        a2a::StreamResponse::Task(t) => task(t),
        a2a::StreamResponse::Message(m) => message(m),
        a2a::StreamResponse::StatusUpdate(event) => {
            let mut value = wire_json(event);
            if let Some(map) = value.as_object_mut() {
                map.insert("kind".into(), json!("status-update"));
                map.insert("final".into(), Value::Bool(ends_stream(&event.status.state)));
                if let Some(status) = map.get_mut("status") {
                    status_to_v03(status);
                }
            }
            value
        }
        a2a::StreamResponse::ArtifactUpdate(event) => {
            let mut value = wire_json(event);
            if let Some(map) = value.as_object_mut() {
                map.insert("kind".into(), json!("artifact-update"));
                if let Some(artifact) = map.get_mut("artifact") {
                    artifact_to_v03(artifact);
                }
            }
            value
        }
    }
}

fn task_to_v03(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    map.insert("kind".into(), json!("task"));
    if let Some(status) = map.get_mut("status") {
        status_to_v03(status);
    }
    for_each_in(map, "history", message_to_v03);
    for_each_in(map, "artifacts", artifact_to_v03);
}

fn status_to_v03(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    if let Some(state) = map.get_mut("state") {
        let v03 = TASK_STATES.iter().find(|(name, _, _)| state.as_str() == Some(name));
        if let Some((_, _, v03)) = v03 {
            *state = json!(v03);
        }
    }
    if let Some(message) = map.get_mut("message") {
        message_to_v03(message);
    }
}

fn artifact_to_v03(value: &mut Value) {
    if let Some(map) = value.as_object_mut() {
        for_each_in(map, "parts", part_to_v03);
    }
}

fn for_each_in(map: &mut Map<String, Value>, key: &str, rewrite: fn(&mut Value)) {
    if let Some(Value::Array(items)) = map.get_mut(key) {
        items.iter_mut().for_each(rewrite);
    }
}
