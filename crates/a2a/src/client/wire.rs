//! The client's wire edge, pure functions over `serde_json::Value`s: an operation becomes the HTTP
//! call of a binding and version (JSON-RPC method and params, or REST verb, path and body;
//! A2A 1.0.1 §9, §11; A2A 0.3.0 §3.2), and what comes back becomes the 1.0 `a2a` types, whatever
//! version the agent spoke. The 1.0 → 0.3 request shapes are the server's own
//! (`binding::v03`); the 0.3 → 1.0 answer shapes are the reverse of what the server writes.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::Binding;
use super::error::ClientError;
use crate::binding::v03::{self, rest as v03_rest};
use crate::binding::{params, task_state_name, wire_json};
use crate::request::Version;

/// One A2A operation, binding- and version-independent.
#[derive(Debug, Clone, Copy)]
pub(super) enum Op<'a> {
    Send(&'a a2a::SendMessageRequest),
    Stream(&'a a2a::SendMessageRequest),
    GetTask { id: &'a str, history_length: Option<i32> },
    ListTasks(&'a a2a::ListTasksRequest),
    Cancel { id: &'a str },
    Subscribe { id: &'a str },
    CreatePush(&'a a2a::TaskPushNotificationConfig),
    GetPush { task_id: &'a str, id: &'a str },
    ListPush { task_id: &'a str },
    DeletePush { task_id: &'a str, id: &'a str },
    ExtendedCard,
}

/// The HTTP verbs the bindings use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verb {
    Get,
    Post,
    Delete,
}

/// One HTTP call: a path to append to the interface URL (empty for JSON-RPC), a query, a body.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Call {
    pub verb: Verb,
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    pub body: Option<Value>,
}

/// The HTTP call of `op` for a binding and version.
///
/// # Errors
///
/// [`ClientError::NotInVersion`] for ListTasks in 0.3, which has no task list.
pub(super) fn encode(
    op: Op<'_>,
    binding: Binding,
    version: Version,
    rpc_id: u64,
) -> Result<Call, ClientError> {
    if matches!((op, version), (Op::ListTasks(_), Version::V0_3)) {
        return Err(ClientError::NotInVersion { operation: "listing tasks", version: "0.3" });
    }
    Ok(match binding {
        Binding::JsonRpc => {
            let (method, params) = match version {
                Version::V1_0 => jsonrpc_v1(op),
                Version::V0_3 => jsonrpc_v03(op),
            };
            let mut body = json!({"jsonrpc": "2.0", "id": rpc_id, "method": method});
            if let Some(params) = params {
                body["params"] = params;
            }
            Call { verb: Verb::Post, path: String::new(), query: Vec::new(), body: Some(body) }
        }
        Binding::Rest => rest(op, version),
    })
}

fn jsonrpc_v1(op: Op<'_>) -> (&'static str, Option<Value>) {
    let task = |id: &str| json!({"id": id});
    match op {
        Op::Send(request) => ("SendMessage", Some(wire_json(request))),
        Op::Stream(request) => ("SendStreamingMessage", Some(wire_json(request))),
        Op::GetTask { id, history_length } => {
            let mut params = task(id);
            if let Some(n) = history_length {
                params["historyLength"] = json!(n);
            }
            ("GetTask", Some(params))
        }
        Op::ListTasks(request) => ("ListTasks", Some(wire_json(request))),
        Op::Cancel { id } => ("CancelTask", Some(task(id))),
        Op::Subscribe { id } => ("SubscribeToTask", Some(task(id))),
        Op::CreatePush(config) => ("CreateTaskPushNotificationConfig", Some(wire_json(config))),
        Op::GetPush { task_id, id } => {
            ("GetTaskPushNotificationConfig", Some(json!({"taskId": task_id, "id": id})))
        }
        Op::ListPush { task_id } => {
            ("ListTaskPushNotificationConfigs", Some(json!({"taskId": task_id})))
        }
        Op::DeletePush { task_id, id } => {
            ("DeleteTaskPushNotificationConfig", Some(json!({"taskId": task_id, "id": id})))
        }
        Op::ExtendedCard => ("GetExtendedAgentCard", None),
    }
}

fn jsonrpc_v03(op: Op<'_>) -> (&'static str, Option<Value>) {
    let task = |id: &str| json!({"id": id});
    let push = |task_id: &str, id: &str| json!({"id": task_id, "pushNotificationConfigId": id});
    match op {
        Op::Send(request) => ("message/send", Some(send_params_v03(request, v03::message))),
        Op::Stream(request) => ("message/stream", Some(send_params_v03(request, v03::message))),
        Op::GetTask { id, history_length } => {
            let mut params = task(id);
            if let Some(n) = history_length {
                params["historyLength"] = json!(n);
            }
            ("tasks/get", Some(params))
        }
        // Refused in `encode`; kept total so that a new version cannot forget it.
        Op::ListTasks(request) => ("tasks/list", Some(wire_json(request))),
        Op::Cancel { id } => ("tasks/cancel", Some(task(id))),
        Op::Subscribe { id } => ("tasks/resubscribe", Some(task(id))),
        Op::CreatePush(config) => {
            ("tasks/pushNotificationConfig/set", Some(v03::push_config(config)))
        }
        Op::GetPush { task_id, id } => {
            ("tasks/pushNotificationConfig/get", Some(push(task_id, id)))
        }
        Op::ListPush { task_id } => ("tasks/pushNotificationConfig/list", Some(task(task_id))),
        Op::DeletePush { task_id, id } => {
            ("tasks/pushNotificationConfig/delete", Some(push(task_id, id)))
        }
        Op::ExtendedCard => ("agent/getAuthenticatedExtendedCard", None),
    }
}

/// 0.3 MessageSendParams (JSON-RPC) or SendMessageRequest (REST proto JSON): the message in the
/// version's shape, and `blocking`, which 0.3 REST reads as false when absent (the 0.3 gRPC proto's default).
fn send_params_v03(
    request: &a2a::SendMessageRequest,
    message: fn(&a2a::Message) -> Value,
) -> Value {
    let config = request.configuration.as_ref();
    let mut configuration = Map::new();
    let blocking = !config.and_then(|c| c.return_immediately).unwrap_or(false);
    configuration.insert("blocking".into(), json!(blocking));
    if let Some(n) = config.and_then(|c| c.history_length) {
        configuration.insert("historyLength".into(), json!(n));
    }
    if let Some(modes) = config.and_then(|c| c.accepted_output_modes.as_ref()) {
        configuration.insert("acceptedOutputModes".into(), json!(modes));
    }
    let mut params = json!({"message": message(&request.message), "configuration": configuration});
    if let Some(metadata) = &request.metadata {
        params["metadata"] = json!(metadata);
    }
    params
}

fn rest(op: Op<'_>, version: Version) -> Call {
    let prefix = match version {
        Version::V1_0 => "",
        Version::V0_3 => "/v1",
    };
    let call = |verb, path: String, body| Call {
        verb,
        path: format!("{prefix}{path}"),
        query: Vec::new(),
        body,
    };
    let send_body = |request: &a2a::SendMessageRequest| match version {
        Version::V1_0 => wire_json(request),
        Version::V0_3 => send_params_v03(request, v03_rest::message),
    };
    let configs = |task_id: &str| format!("/tasks/{}/pushNotificationConfigs", segment(task_id));
    match op {
        Op::Send(request) => call(Verb::Post, "/message:send".into(), Some(send_body(request))),
        Op::Stream(request) => call(Verb::Post, "/message:stream".into(), Some(send_body(request))),
        Op::GetTask { id, history_length } => {
            let mut call = call(Verb::Get, format!("/tasks/{}", segment(id)), None);
            if let Some(n) = history_length {
                call.query.push(("historyLength", n.to_string()));
            }
            call
        }
        Op::ListTasks(request) => {
            let mut call = call(Verb::Get, "/tasks".into(), None);
            call.query = list_query(request);
            call
        }
        Op::Cancel { id } => {
            call(Verb::Post, format!("/tasks/{}:cancel", segment(id)), Some(json!({})))
        }
        Op::Subscribe { id } => call(Verb::Post, format!("/tasks/{}:subscribe", segment(id)), None),
        Op::CreatePush(config) => {
            let body = match version {
                Version::V1_0 => wire_json(config),
                // Both bodies servers read (docs/a2a.md, "0.3 over HTTP+JSON"): the proto annotation's
                // `{name, pushNotificationConfig}` (the JS SDK) and the whole request
                // `{parent, configId, config}` (the Python SDK, which ignores unknown fields;
                // ours reads either).
                Version::V0_3 => {
                    let resource = v03_rest::push_config(config);
                    let mut body = resource.clone();
                    body["parent"] = json!(format!("tasks/{}", config.task_id));
                    body["configId"] = json!(config.id.clone().unwrap_or_default());
                    body["config"] = resource;
                    body
                }
            };
            call(Verb::Post, configs(&config.task_id), Some(body))
        }
        Op::GetPush { task_id, id } => {
            call(Verb::Get, format!("{}/{}", configs(task_id), segment(id)), None)
        }
        Op::ListPush { task_id } => call(Verb::Get, configs(task_id), None),
        Op::DeletePush { task_id, id } => {
            call(Verb::Delete, format!("{}/{}", configs(task_id), segment(id)), None)
        }
        Op::ExtendedCard => match version {
            Version::V1_0 => call(Verb::Get, "/extendedAgentCard".into(), None),
            Version::V0_3 => call(Verb::Get, "/card".into(), None),
        },
    }
}

/// ListTasks as REST query parameters (A2A 1.0.1 §11.5), from the request's 1.0 JSON.
fn list_query(request: &a2a::ListTasksRequest) -> Vec<(&'static str, String)> {
    let json = wire_json(request);
    let names = [
        "contextId",
        "status",
        "pageSize",
        "pageToken",
        "historyLength",
        "statusTimestampAfter",
        "includeArtifacts",
    ];
    names
        .into_iter()
        .filter_map(|name| {
            let text = match json.get(name)? {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            Some((name, text))
        })
        .collect()
}

/// Percent-encodes an id for one path segment (everything but RFC 3986 unreserved characters).
fn segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// What a successful answer holds, so that 0.3 shapes can be brought to 1.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// SendMessageResponse or StreamResponse: one of task, message, statusUpdate, artifactUpdate.
    Event,
    Task,
    TaskList,
    PushConfig,
    PushConfigList,
    Card,
    Empty,
}

/// Reads a result (JSON-RPC `result`, REST body, or SSE event) into a 1.0 `a2a` type.
///
/// # Errors
///
/// A description of what did not fit, for [`ClientError::BadResponse`].
pub(super) fn decode<T: DeserializeOwned>(
    mut value: Value,
    shape: Shape,
    binding: Binding,
    version: Version,
) -> Result<T, String> {
    if version == Version::V0_3 {
        value = v03_to_v1(value, shape, binding);
    }
    params::normalize(&mut value);
    if matches!(shape, Shape::Event) {
        // ProtoJSON writers leave out empty strings, so an event whose agent did not fill in
        // its ids arrives without them; the types require them.
        for key in ["statusUpdate", "artifactUpdate"] {
            if let Some(Value::Object(event)) = value.get_mut(key) {
                event.entry("taskId").or_insert(json!(""));
                event.entry("contextId").or_insert(json!(""));
            }
        }
    }
    if matches!(shape, Shape::PushConfig) {
        let config = params::push_config(value).map_err(|e| e.to_string())?;
        value = wire_json(&config);
    }
    if matches!(shape, Shape::PushConfigList) {
        let configs = value.get_mut("configs").map(Value::take).unwrap_or(json!([]));
        let configs: Result<Vec<Value>, String> = configs
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                params::push_config(c.clone()).map(|c| wire_json(&c)).map_err(|e| e.to_string())
            })
            .collect();
        value["configs"] = Value::Array(configs?);
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// 0.3 answers in 1.0 JSON: `kind`-tagged bare results wrapped (JSON-RPC), parts out of
/// `content` (REST), 0.3 part shapes, roles and states, no `final`; a JSON-RPC push list is a
/// bare array. Values under `metadata` and `data` are the agent's and stay as they are.
fn v03_to_v1(mut value: Value, shape: Shape, binding: Binding) -> Value {
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
    rewrite_v03(&mut value, binding == Binding::Rest);
    match (shape, binding) {
        (Shape::Event, Binding::JsonRpc) => {
            let key = match kind.as_str() {
                "message" => "message",
                "status-update" => "statusUpdate",
                "artifact-update" => "artifactUpdate",
                _ => "task",
            };
            json!({ key: value })
        }
        (Shape::PushConfigList, Binding::JsonRpc) => json!({"configs": value}),
        (Shape::PushConfig | Shape::PushConfigList, Binding::Rest) => {
            name_to_task_id(&mut value);
            if let Some(Value::Array(configs)) = value.get_mut("configs") {
                configs.iter_mut().for_each(name_to_task_id);
            }
            value
        }
        (
            Shape::Event
            | Shape::Task
            | Shape::TaskList
            | Shape::PushConfig
            | Shape::Card
            | Shape::Empty,
            _,
        ) => value,
    }
}

fn rewrite_v03(value: &mut Value, rest: bool) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(|item| rewrite_v03(item, rest)),
        Value::Object(map) => {
            map.remove("kind");
            map.remove("final");
            if let Some(content) = map.remove("content") {
                map.entry("parts").or_insert(content);
            }
            if let Some(role) = map.get_mut("role") {
                match role.as_str() {
                    Some("user") => *role = json!("ROLE_USER"),
                    Some("agent") => *role = json!("ROLE_AGENT"),
                    _ => {}
                }
            }
            if let Some(state) = map.get_mut("state")
                && let Some(name) = state.as_str().and_then(task_state_name)
            {
                *state = json!(name);
            }
            for (key, child) in map.iter_mut() {
                match key.as_str() {
                    "metadata" | "data" => {}
                    "parts" => {
                        if let Value::Array(parts) = child {
                            parts.iter_mut().for_each(|part| part_v03_to_v1(part, rest));
                        }
                    }
                    _ => rewrite_v03(child, rest),
                }
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

fn part_v03_to_v1(part: &mut Value, rest: bool) {
    v03::part_to_v1(part);
    // 0.3 REST wraps data parts once more: `{"data": {"data": {…}}}` (the 0.3 gRPC proto's DataPart).
    if rest
        && let Some(data) = part.get_mut("data")
        && let Some(inner) = data.get_mut("data").map(Value::take)
    {
        *data = inner;
    }
}

/// A 0.3 REST config names its task in `name` (`tasks/{id}/pushNotificationConfigs/{cid}`).
fn name_to_task_id(config: &mut Value) {
    let Some(name) = config.get("name").and_then(Value::as_str) else { return };
    let task_id = name.strip_prefix("tasks/").and_then(|rest| rest.split('/').next());
    if let Some(task_id) = task_id.map(str::to_owned) {
        config["taskId"] = json!(task_id);
    }
}

/// The A2A error in an error answer: a JSON-RPC `error`, a REST `google.rpc.Status` whose
/// ErrorInfo `reason` names it (A2A 1.0.1 §11.6), or the top-level `code` 0.3 REST servers add.
pub(super) fn agent_error(body: &Value) -> Option<(i32, String)> {
    let message =
        |v: &Value| v.get("message").and_then(Value::as_str).unwrap_or_default().to_owned();
    // The JS SDK's 0.3 REST errors are only that: `{"code": -32001, "message": …}`.
    if let Some(code) = body.get("code").and_then(Value::as_i64).and_then(|c| i32::try_from(c).ok())
        && code < 0
    {
        return Some((code, message(body)));
    }
    let error = body.get("error")?;
    if let Some(details) = error.get("details").and_then(Value::as_array) {
        let reason = details.iter().find_map(|d| d.get("reason").and_then(Value::as_str));
        if let Some(code) = reason.and_then(a2a::reason_to_error_code) {
            return Some((code, message(error)));
        }
    }
    let code = error.get("code").and_then(Value::as_i64).and_then(|c| i32::try_from(c).ok())?;
    (code < 0).then(|| (code, message(error)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> a2a::SendMessageRequest {
        let mut message = a2a::Message::new(a2a::Role::User, vec![a2a::Part::text(text)]);
        message.message_id = "m-1".into();
        a2a::SendMessageRequest { message, configuration: None, metadata: None, tenant: None }
    }

    #[test]
    fn encode_send_per_binding_and_version() {
        let send = request("hi");
        let rpc = |version| encode(Op::Send(&send), Binding::JsonRpc, version, 7).unwrap();
        assert_eq!(
            rpc(Version::V1_0).body,
            Some(json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {
                "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}))
        );
        assert_eq!(
            rpc(Version::V0_3).body,
            Some(json!({"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {
                "message": {"kind": "message", "messageId": "m-1", "role": "user",
                            "parts": [{"kind": "text", "text": "hi"}]},
                "configuration": {"blocking": true}}}))
        );
        let rest = encode(Op::Send(&send), Binding::Rest, Version::V0_3, 1).unwrap();
        assert_eq!(rest.path, "/v1/message:send");
        assert_eq!(rest.body.unwrap()["message"]["content"], json!([{"text": "hi"}]));
        let list = a2a::ListTasksRequest {
            context_id: Some("c 1".into()),
            status: Some(a2a::TaskState::Working),
            page_size: Some(5),
            page_token: None,
            history_length: None,
            status_timestamp_after: None,
            include_artifacts: Some(true),
            tenant: None,
        };
        let call = encode(Op::ListTasks(&list), Binding::Rest, Version::V1_0, 1).unwrap();
        assert_eq!(
            call.query,
            vec![
                ("contextId", "c 1".to_owned()),
                ("status", "TASK_STATE_WORKING".to_owned()),
                ("pageSize", "5".to_owned()),
                ("includeArtifacts", "true".to_owned())
            ]
        );
        assert!(matches!(
            encode(Op::ListTasks(&list), Binding::JsonRpc, Version::V0_3, 1),
            Err(ClientError::NotInVersion { .. })
        ));
        assert_eq!(
            encode(Op::Cancel { id: "a/b" }, Binding::Rest, Version::V1_0, 1).unwrap().path,
            "/tasks/a%2Fb:cancel"
        );
    }

    #[test]
    fn decode_v03_answers_into_1_0() {
        let jsonrpc_task = json!({"kind": "task", "id": "t", "contextId": "c",
            "status": {"state": "input-required", "message": {"kind": "message", "messageId": "m",
                "role": "agent", "parts": [{"kind": "text", "text": "Which city?"}]}},
            "artifacts": [{"artifactId": "a", "parts": [
                {"kind": "file", "file": {"name": "x.txt", "mimeType": "text/plain", "bytes": "aGk="}},
                {"kind": "data", "data": {"data": 1}}]}]});
        let event: a2a::StreamResponse =
            decode(jsonrpc_task, Shape::Event, Binding::JsonRpc, Version::V0_3).unwrap();
        let a2a::StreamResponse::Task(task) = event else { panic!("not a task: {event:?}") };
        assert_eq!(task.status.state, a2a::TaskState::InputRequired);
        let parts = &task.artifacts.unwrap()[0].parts;
        assert_eq!(parts[0].content, a2a::PartContent::Raw(b"hi".to_vec()));
        assert_eq!(parts[1].content, a2a::PartContent::Data(json!({"data": 1})));

        let rest_update = json!({"statusUpdate": {"taskId": "t", "contextId": "c", "final": true,
            "status": {"state": "TASK_STATE_CANCELLED"}}});
        let event: a2a::StreamResponse =
            decode(rest_update, Shape::Event, Binding::Rest, Version::V0_3).unwrap();
        let a2a::StreamResponse::StatusUpdate(update) = event else { panic!("{event:?}") };
        assert_eq!(update.status.state, a2a::TaskState::Canceled);

        let rest_data = json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"data": {"data": {"k": 1}}}]}]}});
        let response: a2a::SendMessageResponse =
            decode(rest_data, Shape::Event, Binding::Rest, Version::V0_3).unwrap();
        let a2a::SendMessageResponse::Task(task) = response else { panic!() };
        assert_eq!(
            task.artifacts.unwrap()[0].parts[0].content,
            a2a::PartContent::Data(json!({"k": 1}))
        );

        let configs = json!([{"taskId": "t", "pushNotificationConfig": {"id": "p", "url": "http://h/hook",
            "authentication": {"schemes": ["Bearer"]}}}]);
        let list: a2a::ListTaskPushNotificationConfigsResponse =
            decode(configs, Shape::PushConfigList, Binding::JsonRpc, Version::V0_3).unwrap();
        assert_eq!(list.configs[0].id.as_deref(), Some("p"));
        assert_eq!(list.configs[0].authentication.as_ref().unwrap().scheme, "Bearer");
        let named = json!({"name": "tasks/t/pushNotificationConfigs/p",
            "pushNotificationConfig": {"id": "p", "url": "http://h/hook"}});
        let config: a2a::TaskPushNotificationConfig =
            decode(named, Shape::PushConfig, Binding::Rest, Version::V0_3).unwrap();
        assert_eq!((config.task_id.as_str(), config.url.as_str()), ("t", "http://h/hook"));
    }

    #[test]
    fn agent_error_reads_every_error_shape() {
        let cases = [
            (
                json!({"error": {"code": -32001, "message": "Task not found"}}),
                Some((-32001, "Task not found")),
            ),
            (
                json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "Task not found",
                    "details": [{"reason": "TASK_NOT_FOUND"}]}}),
                Some((-32001, "Task not found")),
            ),
            (
                json!({"error": {"code": 404}, "code": -32001, "message": "Task not found"}),
                Some((-32001, "Task not found")),
            ),
            (
                json!({"code": -32001, "message": "Task not found: t"}),
                Some((-32001, "Task not found: t")),
            ),
            (json!({"error": {"code": 401, "message": "no"}}), None),
            (json!({"error": "unknown key"}), None),
        ];
        for (body, expected) in cases {
            let expected = expected.map(|(c, m): (i32, &str)| (c, m.to_owned()));
            assert_eq!(agent_error(&body), expected, "{body}");
        }
    }
}
