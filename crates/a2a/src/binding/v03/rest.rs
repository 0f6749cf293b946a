//! 0.3 HTTP+JSON (A2A 0.3.0 §3.2.3; docs/a2a.md, "0.3 over HTTP+JSON"): the ProtoJSON of the 0.3 gRPC proto, which is neither the
//! 0.3 JSON-RPC shape nor 1.0. Message parts sit under `content`; parts are `{text}`,
//! `{file: {fileWithUri | fileWithBytes, mimeType, name}}` or `{data: {data: {…}}}`; the
//! canceled state is `TASK_STATE_CANCELLED`; push configs are resources named
//! `tasks/{id}/pushNotificationConfigs/{configId}`.
//!
//! Bodies in are rewritten into 1.0 JSON before the lenient params reader sees them (after
//! [`normalize`](crate::binding::params::normalize), so snake_case proto names arrive
//! camelCase); answers are serialized from the `a2a` types and rewritten into 0.3 proto JSON,
//! camelCase as ProtoJSON prints it. [`is_v03_body`] tells the two versions apart for a caller
//! that names none.

use serde_json::{Map, Value, json};

use crate::binding::wire_json;
use crate::task::state::ends_stream;

/// Whether a normalised request body (camelCase keys) without `A2A-Version` is 0.3 proto JSON
/// rather than 1.0: a
/// SendMessageRequest under `request` (the proto field name) or a `message` whose parts are under
/// `content`, a push config named as a resource (`name`, `parent`, or `config` holding the 0.3
/// `pushNotificationConfig`), or a cancel body naming its task. None of those members exists in
/// the 1.0 shapes.
pub(crate) fn is_v03_body(body: &Value) -> bool {
    let Some(map) = body.as_object() else { return false };
    let has = |value: &Value, key: &str| value.get(key).is_some();
    let message_v03 = map.get("message").is_some_and(|m| has(m, "content") && !has(m, "parts"));
    let config_v03 = map.get("config").is_some_and(|config| has(config, "pushNotificationConfig"));
    has(body, "request") || message_v03 || has(body, "name") || has(body, "parent") || config_v03
}

/// Converts a normalised 0.3 SendMessageRequest body into 0.3 JSON-RPC MessageSendParams
/// (which [`send_params_to_v1`](super::send_params_to_v1) then takes to 1.0).
///
/// The message comes under `request` (proto name) or `message` (its `json_name`); its `content`
/// becomes `parts` and `{data: {data: x}}` becomes `{data: x}`. `configuration.pushNotification`
/// is the inline push config. A configuration without `blocking` is non-blocking: proto3 has no
/// "unset" for a bool, ProtoJSON omits `false`, and the SDK clients send `blocking: true` when
/// they want to wait. Without a configuration the send blocks, as in 0.3 JSON-RPC.
pub(crate) fn send_request_to_params(mut body: Value) -> Value {
    let Some(map) = body.as_object_mut() else { return body };
    if let Some(message) = map.remove("request") {
        map.entry("message").or_insert(message);
    }
    if let Some(Value::Object(message)) = map.get_mut("message")
        && let Some(content) = message.remove("content")
    {
        let mut parts = content;
        if let Value::Array(items) = &mut parts {
            items.iter_mut().for_each(unwrap_data_part);
        }
        message.entry("parts").or_insert(parts);
    }
    if let Some(Value::Object(config)) = map.get_mut("configuration") {
        if let Some(push) = config.remove("pushNotification") {
            config.entry("pushNotificationConfig").or_insert(push);
        }
        config.entry("blocking").or_insert(Value::Bool(false));
    }
    body
}

/// Converts a normalised 0.3 push config create body into the config JSON the lenient reader
/// takes: the annotation's `{name, pushNotificationConfig}` or the Python SDK's
/// `{parent, configId, config: {name?, pushNotificationConfig}}` (the 0.3 gRPC proto). The
/// config id comes from the inner `id`, else `configId`, else the last segment of `name`; the task
/// id is the path's, so `name` and `parent` are not read for it.
pub(crate) fn push_config_to_v1(mut body: Value) -> Value {
    let Some(map) = body.as_object_mut() else { return body };
    let holder = match map.remove("config") {
        Some(Value::Object(config)) => config,
        Some(_) | None => map.clone(),
    };
    let mut inner = match holder.get("pushNotificationConfig") {
        Some(Value::Object(inner)) => inner.clone(),
        Some(_) | None => return body,
    };
    let named = |holder: &Map<String, Value>| {
        holder
            .get("name")
            .and_then(Value::as_str)
            .and_then(|name| name.rsplit_once("/pushNotificationConfigs/"))
            .map(|(_, id)| id.to_owned())
    };
    let id = [inner.get("id"), map.get("configId")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .chain(named(&holder))
        .chain(named(map))
        .find(|id| !id.is_empty());
    inner.remove("id");
    if let Some(id) = id {
        inner.insert("id".into(), Value::String(id));
    }
    Value::Object(inner)
}

/// The 0.3 proto JSON of a task.
pub(crate) fn task(task: &a2a::Task) -> Value {
    let mut value = wire_json(task);
    task_to_v03(&mut value);
    value
}

/// The 0.3 SendMessageResponse: `{"task": …}` or `{"message": …}`.
pub(crate) fn send_response(response: &a2a::SendMessageResponse) -> Value {
    match response {
        a2a::SendMessageResponse::Task(t) => json!({"task": task(t)}),
        a2a::SendMessageResponse::Message(m) => json!({"message": message(m)}),
    }
}

/// The 0.3 StreamResponse of one stream event, with `final` on status updates when the stream
/// ends with it (terminal and interrupted states, A2A 0.3.0 §7.2.2).
pub(crate) fn stream_item(item: &a2a::StreamResponse) -> Value {
    match item {
        a2a::StreamResponse::Task(t) => json!({"task": task(t)}),
        a2a::StreamResponse::Message(m) => json!({"message": message(m)}),
        a2a::StreamResponse::StatusUpdate(event) => {
            let mut value = wire_json(event);
            if let Some(map) = value.as_object_mut() {
                if let Some(status) = map.get_mut("status") {
                    status_to_v03(status);
                }
                map.insert("final".into(), Value::Bool(ends_stream(&event.status.state)));
            }
            json!({"statusUpdate": value})
        }
        a2a::StreamResponse::ArtifactUpdate(event) => {
            let mut value = wire_json(event);
            if let Some(artifact) = value.get_mut("artifact") {
                artifact_to_v03(artifact);
            }
            json!({"artifactUpdate": value})
        }
    }
}

/// A ListTasks result with 0.3 tasks. 0.3 REST has no task list (the route is refused); this
/// exists so that every reply has a 0.3 form.
pub(crate) fn task_list(list: &a2a::ListTasksResponse) -> Value {
    let mut value = wire_json(list);
    if let Some(Value::Array(tasks)) = value.get_mut("tasks") {
        tasks.iter_mut().for_each(task_to_v03);
    }
    value
}

/// The 0.3 TaskPushNotificationConfig: the config as a resource,
/// `{name: "tasks/{id}/pushNotificationConfigs/{configId}", pushNotificationConfig: {…}}`.
pub(crate) fn push_config(config: &a2a::TaskPushNotificationConfig) -> Value {
    let mut nested = super::push_config(config);
    let inner = nested.get_mut("pushNotificationConfig").map(Value::take).unwrap_or_default();
    let config_id = config.id.as_deref().unwrap_or_default();
    json!({
        "name": format!("tasks/{}/pushNotificationConfigs/{config_id}", config.task_id),
        "pushNotificationConfig": inner,
    })
}

/// The 0.3 ListTaskPushNotificationConfigResponse: `{configs: [...]}`.
pub(crate) fn push_configs(list: &a2a::ListTaskPushNotificationConfigsResponse) -> Value {
    let configs: Vec<Value> = list.configs.iter().map(push_config).collect();
    let mut value = json!({"configs": configs});
    if let Some(token) = list.next_page_token.as_ref().filter(|token| !token.is_empty()) {
        value["nextPageToken"] = json!(token);
    }
    value
}

/// The 0.3 proto AgentCard (`GET /v1/card`): the 1.0 card's security schemes and requirements
/// keep their proto shape (0.3 `security` is 1.0 `securityRequirements`), the endpoints move to
/// `url`, `preferredTransport` and `additionalInterfaces`, and the extended card flag to the top.
pub(crate) fn card(card: &a2a::AgentCard) -> Value {
    let mut value = wire_json(card);
    let Some(map) = value.as_object_mut() else { return value };
    map.remove("supportedInterfaces");
    if let Some(requirements) = map.remove("securityRequirements") {
        map.insert("security".into(), requirements);
    }
    if let Some(Value::Object(capabilities)) = map.get_mut("capabilities") {
        capabilities.remove("extendedAgentCard");
    }
    if let Some(Value::Array(skills)) = map.get_mut("skills") {
        for skill in skills.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(requirements) = skill.remove("securityRequirements") {
                skill.insert("security".into(), requirements);
            }
        }
    }
    let mut fields = super::card_fields(card);
    // The proto's `security` is the 1.0 requirement shape, not the JSON-RPC card's.
    fields.remove("security");
    map.extend(fields);
    value
}

/// The 0.3 proto JSON of a message.
pub(crate) fn message(message: &a2a::Message) -> Value {
    let mut value = wire_json(message);
    message_to_v03(&mut value);
    value
}

fn message_to_v03(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    if let Some(mut parts) = map.remove("parts") {
        if let Value::Array(items) = &mut parts {
            items.iter_mut().for_each(part_to_v03);
        }
        map.insert("content".into(), parts);
    }
}

fn task_to_v03(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    if let Some(status) = map.get_mut("status") {
        status_to_v03(status);
    }
    if let Some(Value::Array(history)) = map.get_mut("history") {
        history.iter_mut().for_each(message_to_v03);
    }
    if let Some(Value::Array(artifacts)) = map.get_mut("artifacts") {
        artifacts.iter_mut().for_each(artifact_to_v03);
    }
}

fn status_to_v03(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    if let Some(state) = map.get_mut("state")
        && state.as_str() == Some("TASK_STATE_CANCELED")
    {
        *state = json!("TASK_STATE_CANCELLED");
    }
    if let Some(message) = map.get_mut("message") {
        message_to_v03(message);
    }
}

fn artifact_to_v03(value: &mut Value) {
    if let Some(Value::Array(parts)) = value.get_mut("parts") {
        parts.iter_mut().for_each(part_to_v03);
    }
}

/// Rewrites 1.0 part JSON into a 0.3 proto Part, in place. A non-object `data` is wrapped as
/// `{"value": …}`: the proto's DataPart holds a Struct. A text part's `mediaType` and a part's
/// `filename` without a file have no 0.3 field and are dropped.
fn part_to_v03(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    let mut part = Map::new();
    let mut file = Map::new();
    if let Some(text) = map.remove("text") {
        part.insert("text".into(), text);
    } else if let Some(bytes) = map.remove("raw") {
        file.insert("fileWithBytes".into(), bytes);
    } else if let Some(uri) = map.remove("url") {
        file.insert("fileWithUri".into(), uri);
    } else if let Some(data) = map.remove("data") {
        let data = if data.is_object() { data } else { json!({"value": data}) };
        part.insert("data".into(), json!({"data": data}));
    }
    if !file.is_empty() {
        if let Some(mime_type) = map.remove("mediaType") {
            file.insert("mimeType".into(), mime_type);
        }
        if let Some(name) = map.remove("filename") {
            file.insert("name".into(), name);
        }
        part.insert("file".into(), Value::Object(file));
    }
    if let Some(metadata) = map.remove("metadata") {
        part.insert("metadata".into(), metadata);
    }
    *value = Value::Object(part);
}

/// `{data: {data: x}}` (the proto's DataPart) becomes `{data: x}`; file parts are left for the
/// 0.3 part reader, which knows `fileWithBytes` and `fileWithUri`.
fn unwrap_data_part(part: &mut Value) {
    if let Some(Value::Object(data)) = part.get_mut("data")
        && let Some(inner) = data.remove("data")
    {
        part["data"] = inner;
    }
}

#[cfg(test)]
mod tests;
