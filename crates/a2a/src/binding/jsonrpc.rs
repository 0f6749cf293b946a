//! The JSON-RPC 2.0 binding (PROTOCOL.md §5, §8.2, §10.2): the envelope, the 1.0 and 0.3 method
//! names, and the JSON-RPC response objects of replies, stream events and errors.
//!
//! The method name decides the version (1.0 and 0.3 names do not overlap); the `A2A-Version`
//! header only catches contradictions. Output is strictly the shape of the call's version:
//! Python 1.0 clients reject unknown keys, so nothing 0.3 may leak into a 1.0 result.

use serde_json::{Map, Value, json};

use super::{params, v03, wire_json};
use crate::error::A2aError;
use crate::request::{Reply, Request, Version};

/// A decoded JSON-RPC call.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The request `id` to echo: a string, a number or null.
    pub id: Value,
    /// The protocol version the call speaks, from its method name.
    pub version: Version,
    /// The call, normalised to the internal model.
    pub request: Request,
}

/// Decodes a JSON-RPC request body. `requested` is the caller's `A2A-Version`, from
/// [`requested_version`](super::requested_version).
///
/// Version rules (§8.2): a 1.0 method without a header is processed as 1.0 (deliberate
/// leniency); a 0.3 method without a header or with `0.3` is 0.3; a method contradicting the
/// header is refused.
///
/// # Errors
///
/// The `id` to answer with (null when the request could not be read that far) and:
/// [`A2aError::Parse`] for malformed JSON; [`A2aError::InvalidRequest`] for a batch, a bad
/// `jsonrpc`, `id` or `method`; [`A2aError::MethodNotFound`] for an unknown method;
/// [`A2aError::VersionNotSupported`] for a method contradicting the header;
/// [`A2aError::InvalidParams`] for params that do not fit the method.
pub fn decode(body: &[u8], requested: Option<Version>) -> Result<Decoded, (Value, A2aError)> {
    let envelope: Value = serde_json::from_slice(body)
        .map_err(|error| (Value::Null, A2aError::Parse(error.to_string())))?;
    let mut envelope = match envelope {
        Value::Object(envelope) => envelope,
        Value::Array(_) => return Err((Value::Null, invalid("batch requests are not supported"))),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            return Err((Value::Null, invalid("the request must be a JSON object")));
        }
    };
    // A missing `id` (a notification) is answered like `id: null`.
    let id = envelope.remove("id").unwrap_or(Value::Null);
    if !is_valid_id(&id) {
        return Err((Value::Null, invalid("`id` must be a string, a whole number or null")));
    }
    decode_call(&mut envelope, requested)
        .map(|(version, request)| Decoded { id: id.clone(), version, request })
        .map_err(|error| (id, error))
}

/// The `id` of a request body, when it has a valid one, else null. For errors detected before
/// [`decode`] runs (an unsupported `A2A-Version` header, a body over the size cap), so that the
/// answer can still echo the id.
pub fn request_id(body: &[u8]) -> Value {
    let id = serde_json::from_slice::<Map<String, Value>>(body)
        .ok()
        .and_then(|mut envelope| envelope.remove("id"))
        .unwrap_or(Value::Null);
    if is_valid_id(&id) { id } else { Value::Null }
}

/// The JSON-RPC response object of a non-streaming reply, in the shape of `version`.
pub fn encode_reply(id: &Value, version: Version, reply: &Reply) -> Value {
    let result = match version {
        Version::V1_0 => reply_v1(reply),
        Version::V0_3 => reply_v03(reply),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The JSON-RPC error response object of `error`.
pub fn encode_error(id: &Value, error: &A2aError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.jsonrpc_error()})
}

/// The JSON-RPC response object carried by one SSE event of a stream: the StreamResponse in
/// 1.0, the bare kind-tagged object in 0.3 (with `final` on status updates).
pub fn encode_stream_item(id: &Value, version: Version, item: &a2a::StreamResponse) -> Value {
    let result = match version {
        Version::V1_0 => wire_json(item),
        Version::V0_3 => v03::stream_item(item),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// One A2A operation, whatever the method name it came under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    CreatePushConfig,
    GetPushConfig,
    ListPushConfigs,
    DeletePushConfig,
    GetExtendedAgentCard,
}

/// Every method name we answer (§5.2, §10.2), with its operation and version.
const METHODS: &[(&str, Operation, Version)] = &[
    ("SendMessage", Operation::SendMessage, Version::V1_0),
    ("SendStreamingMessage", Operation::SendStreamingMessage, Version::V1_0),
    ("GetTask", Operation::GetTask, Version::V1_0),
    ("ListTasks", Operation::ListTasks, Version::V1_0),
    ("CancelTask", Operation::CancelTask, Version::V1_0),
    ("SubscribeToTask", Operation::SubscribeToTask, Version::V1_0),
    ("CreateTaskPushNotificationConfig", Operation::CreatePushConfig, Version::V1_0),
    ("GetTaskPushNotificationConfig", Operation::GetPushConfig, Version::V1_0),
    ("ListTaskPushNotificationConfigs", Operation::ListPushConfigs, Version::V1_0),
    // The singular name is what the .NET SDK sends (§12.1).
    ("ListTaskPushNotificationConfig", Operation::ListPushConfigs, Version::V1_0),
    ("DeleteTaskPushNotificationConfig", Operation::DeletePushConfig, Version::V1_0),
    ("GetExtendedAgentCard", Operation::GetExtendedAgentCard, Version::V1_0),
    ("message/send", Operation::SendMessage, Version::V0_3),
    ("message/stream", Operation::SendStreamingMessage, Version::V0_3),
    ("tasks/get", Operation::GetTask, Version::V0_3),
    ("tasks/cancel", Operation::CancelTask, Version::V0_3),
    ("tasks/resubscribe", Operation::SubscribeToTask, Version::V0_3),
    ("tasks/pushNotificationConfig/set", Operation::CreatePushConfig, Version::V0_3),
    ("tasks/pushNotificationConfig/get", Operation::GetPushConfig, Version::V0_3),
    ("tasks/pushNotificationConfig/list", Operation::ListPushConfigs, Version::V0_3),
    ("tasks/pushNotificationConfig/delete", Operation::DeletePushConfig, Version::V0_3),
    ("agent/getAuthenticatedExtendedCard", Operation::GetExtendedAgentCard, Version::V0_3),
];

fn invalid(detail: &str) -> A2aError {
    A2aError::InvalidRequest(detail.to_owned())
}

fn is_valid_id(id: &Value) -> bool {
    match id {
        Value::Null | Value::String(_) => true,
        Value::Number(number) => number.is_i64() || number.is_u64(),
        Value::Bool(_) | Value::Array(_) | Value::Object(_) => false,
    }
}

/// Everything after the `id`: `jsonrpc`, `method`, the version check and `params`.
fn decode_call(
    envelope: &mut Map<String, Value>,
    requested: Option<Version>,
) -> Result<(Version, Request), A2aError> {
    if envelope.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("`jsonrpc` must be \"2.0\""));
    }
    let method = match envelope.remove("method") {
        Some(Value::String(method)) => method,
        Some(_) | None => return Err(invalid("`method` must be a string")),
    };
    let (operation, version) = lookup(&method).ok_or(A2aError::MethodNotFound(method.clone()))?;
    check_version(&method, version, requested)?;
    let params = match envelope.remove("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(params @ Value::Object(_)) => params,
        Some(_) => return Err(A2aError::InvalidParams("`params` must be an object".into())),
    };
    Ok((version, decode_params(operation, version, params)?))
}

fn lookup(method: &str) -> Option<(Operation, Version)> {
    METHODS.iter().find(|(name, _, _)| *name == method).map(|(_, op, version)| (*op, *version))
}

/// §8.2: the method's version must not contradict the header; a 1.0 method without a header is
/// let through as 1.0.
fn check_version(
    method: &str,
    version: Version,
    requested: Option<Version>,
) -> Result<(), A2aError> {
    match requested {
        Some(requested) if requested != version => Err(A2aError::VersionNotSupported {
            requested: format!("{} with method {method}", requested.as_str()),
        }),
        Some(_) | None => Ok(()),
    }
}

fn decode_params(
    operation: Operation,
    version: Version,
    mut params: Value,
) -> Result<Request, A2aError> {
    params::normalize(&mut params);
    if version == Version::V0_3 {
        params = params_to_v1(operation, params)?;
    }
    Ok(match operation {
        Operation::SendMessage => Request::SendMessage(params::send_message_request(params)?),
        Operation::SendStreamingMessage => {
            Request::SendStreamingMessage(params::send_message_request(params)?)
        }
        Operation::GetTask => Request::GetTask(params::typed(params)?),
        Operation::ListTasks => Request::ListTasks(params::typed(params)?),
        Operation::CancelTask => Request::CancelTask(params::typed(params)?),
        Operation::SubscribeToTask => Request::SubscribeToTask(params::typed(params)?),
        Operation::CreatePushConfig => Request::CreatePushConfig(params::push_config(params)?),
        Operation::GetPushConfig => Request::GetPushConfig(params::typed(params)?),
        Operation::ListPushConfigs => Request::ListPushConfigs(params::typed(params)?),
        Operation::DeletePushConfig => Request::DeletePushConfig(params::typed(params)?),
        Operation::GetExtendedAgentCard => Request::GetExtendedAgentCard,
    })
}

/// Converts 0.3 params to 1.0 JSON (§10.2).
fn params_to_v1(operation: Operation, params: Value) -> Result<Value, A2aError> {
    match operation {
        Operation::SendMessage | Operation::SendStreamingMessage => v03::send_params_to_v1(params),
        Operation::GetTask => Ok(v03::get_task_params_to_v1(params)),
        Operation::GetPushConfig => v03::get_params_to_v1(params),
        Operation::ListPushConfigs => v03::list_params_to_v1(params),
        Operation::DeletePushConfig => v03::delete_params_to_v1(params),
        // Same member names in both versions; the push config reader flattens the 0.3 shape.
        Operation::CancelTask
        | Operation::SubscribeToTask
        | Operation::CreatePushConfig
        | Operation::ListTasks
        | Operation::GetExtendedAgentCard => Ok(params),
    }
}

fn reply_v1(reply: &Reply) -> Value {
    match reply {
        Reply::Send(response) => wire_json(response),
        Reply::Task(task) => wire_json(task),
        Reply::Tasks(list) => wire_json(list),
        Reply::PushConfig(config) => wire_json(config),
        Reply::PushConfigs(list) => wire_json(list),
        Reply::Deleted => Value::Null,
        Reply::Card(card) => wire_json(card),
    }
}

fn reply_v03(reply: &Reply) -> Value {
    match reply {
        Reply::Send(response) => v03::send_response(response),
        Reply::Task(task) => v03::task(task),
        Reply::Tasks(list) => v03::task_list(list),
        Reply::PushConfig(config) => v03::push_config(config),
        Reply::PushConfigs(list) => v03::push_configs(list),
        Reply::Deleted => Value::Null,
        Reply::Card(card) => v03::card(card),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;

    fn body(method: &str, params: Value) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
            .to_string()
            .into_bytes()
    }

    fn from<T: DeserializeOwned>(value: Value) -> T {
        serde_json::from_value(value).unwrap()
    }

    fn decoded(version: Version, request: Request) -> Result<Decoded, (Value, A2aError)> {
        Ok(Decoded { id: json!(7), version, request })
    }

    fn user_message() -> Value {
        json!({"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]})
    }

    fn send_request(configuration: Value) -> a2a::SendMessageRequest {
        from(json!({"message": user_message(), "configuration": configuration}))
    }

    #[test]
    fn decode_every_method_yields_its_request() {
        let v03_message = json!({"kind": "message", "messageId": "m-1", "role": "user",
                                 "parts": [{"kind": "text", "text": "hi"}]});
        let push = json!({"taskId": "t1", "id": "c1", "url": "https://hook"});
        let v03_push =
            json!({"taskId": "t1", "pushNotificationConfig": {"id": "c1", "url": "https://hook"}});
        let cases: Vec<(&str, Value, Version, Request)> = vec![
            (
                "SendMessage",
                json!({"message": user_message()}),
                Version::V1_0,
                Request::SendMessage(from(json!({"message": user_message()}))),
            ),
            (
                "SendStreamingMessage",
                json!({"message": user_message()}),
                Version::V1_0,
                Request::SendStreamingMessage(from(json!({"message": user_message()}))),
            ),
            (
                "GetTask",
                json!({"id": "t1", "historyLength": 0}),
                Version::V1_0,
                Request::GetTask(from(json!({"id": "t1", "historyLength": 0}))),
            ),
            (
                "ListTasks",
                json!({"contextId": "c", "status": "TASK_STATE_WORKING", "pageSize": 10,
                       "statusTimestampAfter": "2026-03-12T10:15:00.0000000+00:00"}),
                Version::V1_0,
                Request::ListTasks(from(json!({"contextId": "c", "status": "TASK_STATE_WORKING",
                    "pageSize": 10, "statusTimestampAfter": "2026-03-12T10:15:00Z"}))),
            ),
            (
                "CancelTask",
                json!({"id": "t1", "metadata": {"k": null}}),
                Version::V1_0,
                Request::CancelTask(from(json!({"id": "t1", "metadata": {"k": null}}))),
            ),
            (
                "SubscribeToTask",
                json!({"id": "t1"}),
                Version::V1_0,
                Request::SubscribeToTask(from(json!({"id": "t1"}))),
            ),
            (
                "CreateTaskPushNotificationConfig",
                push.clone(),
                Version::V1_0,
                Request::CreatePushConfig(from(push.clone())),
            ),
            (
                "GetTaskPushNotificationConfig",
                json!({"taskId": "t1", "id": "c1"}),
                Version::V1_0,
                Request::GetPushConfig(from(json!({"taskId": "t1", "id": "c1"}))),
            ),
            (
                "ListTaskPushNotificationConfigs",
                json!({"taskId": "t1", "pageSize": 5}),
                Version::V1_0,
                Request::ListPushConfigs(from(json!({"taskId": "t1", "pageSize": 5}))),
            ),
            (
                "ListTaskPushNotificationConfig",
                json!({"taskId": "t1"}),
                Version::V1_0,
                Request::ListPushConfigs(from(json!({"taskId": "t1"}))),
            ),
            (
                "DeleteTaskPushNotificationConfig",
                json!({"taskId": "t1", "id": "c1"}),
                Version::V1_0,
                Request::DeletePushConfig(from(json!({"taskId": "t1", "id": "c1"}))),
            ),
            ("GetExtendedAgentCard", json!({}), Version::V1_0, Request::GetExtendedAgentCard),
            (
                "message/send",
                json!({"message": v03_message.clone()}),
                Version::V0_3,
                Request::SendMessage(send_request(json!({"returnImmediately": false}))),
            ),
            (
                "message/stream",
                json!({"message": v03_message}),
                Version::V0_3,
                Request::SendStreamingMessage(send_request(json!({"returnImmediately": false}))),
            ),
            (
                "tasks/get",
                json!({"id": "t1", "historyLength": 3, "metadata": {}}),
                Version::V0_3,
                Request::GetTask(from(json!({"id": "t1", "historyLength": 3}))),
            ),
            (
                "tasks/cancel",
                json!({"id": "t1"}),
                Version::V0_3,
                Request::CancelTask(from(json!({"id": "t1"}))),
            ),
            (
                "tasks/resubscribe",
                json!({"id": "t1"}),
                Version::V0_3,
                Request::SubscribeToTask(from(json!({"id": "t1"}))),
            ),
            (
                "tasks/pushNotificationConfig/set",
                v03_push,
                Version::V0_3,
                Request::CreatePushConfig(from(push)),
            ),
            (
                "tasks/pushNotificationConfig/get",
                json!({"id": "t1", "pushNotificationConfigId": "c1"}),
                Version::V0_3,
                Request::GetPushConfig(from(json!({"taskId": "t1", "id": "c1"}))),
            ),
            (
                "tasks/pushNotificationConfig/get",
                json!({"id": "t1"}),
                Version::V0_3,
                Request::GetPushConfig(from(json!({"taskId": "t1", "id": ""}))),
            ),
            (
                "tasks/pushNotificationConfig/list",
                json!({"id": "t1"}),
                Version::V0_3,
                Request::ListPushConfigs(from(json!({"taskId": "t1"}))),
            ),
            (
                "tasks/pushNotificationConfig/delete",
                json!({"id": "t1", "pushNotificationConfigId": "c1"}),
                Version::V0_3,
                Request::DeletePushConfig(from(json!({"taskId": "t1", "id": "c1"}))),
            ),
            (
                "agent/getAuthenticatedExtendedCard",
                json!({}),
                Version::V0_3,
                Request::GetExtendedAgentCard,
            ),
        ];
        for (method, params, version, request) in cases {
            assert_eq!(decode(&body(method, params), None), decoded(version, request), "{method}");
        }
    }

    #[test]
    fn decode_version_rules_follow_section_8_2() {
        let mismatch = |requested: &str, method: &str| {
            Err((
                json!(7),
                A2aError::VersionNotSupported {
                    requested: format!("{requested} with method {method}"),
                },
            ))
        };
        let cases = [
            ("GetTask", Some(Version::V1_0), Ok(Version::V1_0)),
            ("GetTask", None, Ok(Version::V1_0)),
            ("GetTask", Some(Version::V0_3), mismatch("0.3", "GetTask")),
            ("tasks/get", None, Ok(Version::V0_3)),
            ("tasks/get", Some(Version::V0_3), Ok(Version::V0_3)),
            ("tasks/get", Some(Version::V1_0), mismatch("1.0", "tasks/get")),
        ];
        for (method, requested, expected) in cases {
            let version = decode(&body(method, json!({"id": "t1"})), requested).map(|d| d.version);
            assert_eq!(version, expected, "{method} {requested:?}");
        }
    }

    #[test]
    fn decode_envelope_errors_table() {
        let invalid = |detail: &str| A2aError::InvalidRequest(detail.to_owned());
        let cases: [(&[u8], Value, A2aError); 10] = [
            (
                b"{not json",
                Value::Null,
                A2aError::Parse("key must be a string at line 1 column 2".into()),
            ),
            (
                br#"[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]"#,
                Value::Null,
                invalid("batch requests are not supported"),
            ),
            (br#""GetTask""#, Value::Null, invalid("the request must be a JSON object")),
            (
                br#"{"jsonrpc":"1.0","id":"a","method":"GetTask"}"#,
                json!("a"),
                invalid("`jsonrpc` must be \"2.0\""),
            ),
            (br#"{"id":"a","method":"GetTask"}"#, json!("a"), invalid("`jsonrpc` must be \"2.0\"")),
            (
                br#"{"jsonrpc":"2.0","id":{"x":1},"method":"GetTask"}"#,
                Value::Null,
                invalid("`id` must be a string, a whole number or null"),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1.5,"method":"GetTask"}"#,
                Value::Null,
                invalid("`id` must be a string, a whole number or null"),
            ),
            (br#"{"jsonrpc":"2.0","id":3}"#, json!(3), invalid("`method` must be a string")),
            (
                br#"{"jsonrpc":"2.0","id":3,"method":"tasks/list"}"#,
                json!(3),
                A2aError::MethodNotFound("tasks/list".into()),
            ),
            (
                br#"{"jsonrpc":"2.0","id":3,"method":"GetTask","params":["t1"]}"#,
                json!(3),
                A2aError::InvalidParams("`params` must be an object".into()),
            ),
        ];
        for (raw, id, error) in cases {
            assert_eq!(decode(raw, None), Err((id, error)), "{}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn decode_missing_params_is_an_empty_object() {
        let cases = [
            (
                br#"{"jsonrpc":"2.0","id":null,"method":"GetExtendedAgentCard"}"#.as_slice(),
                Ok(Decoded {
                    id: Value::Null,
                    version: Version::V1_0,
                    request: Request::GetExtendedAgentCard,
                }),
            ),
            (
                br#"{"jsonrpc":"2.0","method":"GetTask","params":null}"#.as_slice(),
                Err((Value::Null, A2aError::InvalidParams("missing field `id`".into()))),
            ),
        ];
        for (raw, expected) in cases {
            assert_eq!(decode(raw, None), expected);
        }
    }

    #[test]
    fn decode_enum_integers_and_nulls_are_accepted() {
        let params = json!({
            "message": {"messageId": "m-1", "role": 1, "parts": [{"text": "hi"}], "taskId": null},
            "configuration": null
        });
        let list = json!({"status": 6, "pageToken": null});
        assert_eq!(
            (decode(&body("SendMessage", params), None), decode(&body("ListTasks", list), None)),
            (
                decoded(
                    Version::V1_0,
                    Request::SendMessage(from(json!({"message": user_message()})))
                ),
                decoded(
                    Version::V1_0,
                    Request::ListTasks(from(json!({"status": "TASK_STATE_INPUT_REQUIRED"})))
                ),
            )
        );
    }

    #[test]
    fn decode_dotnet_push_shapes_are_flattened() {
        let flat = json!({"taskId": "t1", "id": "c1", "url": "https://hook", "token": "tok"});
        let cases = [
            (
                "CreateTaskPushNotificationConfig",
                json!({"taskId": "t1", "configId": "c1", "config": {"url": "https://hook", "token": "tok"}}),
                Request::CreatePushConfig(from(flat.clone())),
            ),
            (
                "CreateTaskPushNotificationConfig",
                json!({"id": "c1", "taskId": "t1", "pushNotificationConfig": {"url": "https://hook", "token": "tok"}}),
                Request::CreatePushConfig(from(flat)),
            ),
            (
                "SendMessage",
                json!({"message": user_message(),
                       "configuration": {"pushNotificationConfig": {"id": "c1", "url": "https://hook"}}}),
                Request::SendMessage(send_request(
                    json!({"taskPushNotificationConfig": {"id": "c1", "url": "https://hook"}}),
                )),
            ),
        ];
        for (method, params, request) in cases {
            assert_eq!(
                decode(&body(method, params), None),
                decoded(Version::V1_0, request),
                "{method}"
            );
        }
    }

    #[test]
    fn decode_v03_message_send_converts_parts_blocking_and_history() {
        let params = json!({
            "message": {"messageId": "m-1", "role": "user", "parts": [
                {"text": "hi"},
                {"file": {"name": "a.pdf", "mimeType": "application/pdf", "uri": "https://f/a.pdf"}},
                {"kind": "file", "file": {"bytes": "AAE="}},
                {"data": {"k": "v"}}
            ]},
            "configuration": {"blocking": false, "historyLength": 0,
                              "pushNotificationConfig": {"url": "https://hook",
                                  "authentication": {"schemes": ["Bearer"], "credentials": "s"}}}
        });
        let expected: a2a::SendMessageRequest = from(json!({
            "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [
                {"text": "hi"},
                {"url": "https://f/a.pdf", "filename": "a.pdf", "mediaType": "application/pdf"},
                {"raw": "AAE="},
                {"data": {"k": "v"}}
            ]},
            "configuration": {"returnImmediately": true, "taskPushNotificationConfig": {
                "url": "https://hook", "authentication": {"scheme": "Bearer", "credentials": "s"}}}
        }));
        assert_eq!(
            decode(&body("message/send", params), None),
            decoded(Version::V0_3, Request::SendMessage(expected))
        );
    }

    #[test]
    fn decode_v03_history_length_zero_means_unset() {
        let cases = [
            (json!({"id": "t1", "historyLength": 0}), json!({"id": "t1"})),
            (json!({"id": "t1", "historyLength": 2}), json!({"id": "t1", "historyLength": 2})),
        ];
        for (params, expected) in cases {
            assert_eq!(
                decode(&body("tasks/get", params), None),
                decoded(Version::V0_3, Request::GetTask(from(expected)))
            );
        }
    }

    #[test]
    fn decode_bad_params_name_the_field() {
        let params = json!({"message": {"messageId": "m", "role": "ROLE_BOT", "parts": []}});
        assert_eq!(
            decode(&body("SendMessage", params), None),
            Err((
                json!(7),
                A2aError::InvalidParams(
                    "message: unknown variant `ROLE_BOT`, expected one of `ROLE_USER`, \
                     `ROLE_AGENT`, `ROLE_UNSPECIFIED`"
                        .into()
                )
            ))
        );
    }

    #[test]
    fn request_id_table() {
        let cases: [(&[u8], Value); 5] = [
            (br#"{"id":"a","method":"x"}"#, json!("a")),
            (br#"{"id":12}"#, json!(12)),
            (br#"{"id":{"x":1}}"#, Value::Null),
            (br#"[{"id":1}]"#, Value::Null),
            (b"{oops", Value::Null),
        ];
        for (raw, id) in cases {
            assert_eq!(request_id(raw), id);
        }
    }

    fn sample_task() -> Value {
        json!({
            "id": "t-1",
            "contextId": "c-1",
            "status": {
                "state": "TASK_STATE_CANCELED",
                "timestamp": "2026-03-12T10:15:00.120Z",
                "message": {"messageId": "m-2", "role": "ROLE_AGENT", "taskId": "t-1",
                            "contextId": "c-1", "parts": [{"text": "Stopped"}]}
            },
            "artifacts": [{"artifactId": "a-1", "name": "response", "parts": [
                {"raw": "AAE=", "filename": "a.bin", "mediaType": "application/octet-stream"},
                {"url": "https://f/x.pdf", "mediaType": "application/pdf"},
                {"data": {"k": "v"}},
                {"data": 42}
            ]}],
            "history": [{"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Book a room"}]}],
            "metadata": {"k": "v"}
        })
    }

    #[test]
    fn encode_reply_task_v1_is_exact_and_has_no_kind() {
        let task: a2a::Task = from(sample_task());
        assert_eq!(
            encode_reply(&json!(7), Version::V1_0, &Reply::Task(task)),
            json!({"jsonrpc": "2.0", "id": 7, "result": sample_task()})
        );
    }

    #[test]
    fn encode_reply_task_v03_has_kinds_states_and_file_parts() {
        let task: a2a::Task = from(sample_task());
        assert_eq!(
            encode_reply(&json!("r"), Version::V0_3, &Reply::Task(task)),
            json!({"jsonrpc": "2.0", "id": "r", "result": {
                "kind": "task",
                "id": "t-1",
                "contextId": "c-1",
                "status": {
                    "state": "canceled",
                    "timestamp": "2026-03-12T10:15:00.120Z",
                    "message": {"kind": "message", "messageId": "m-2", "role": "agent", "taskId": "t-1",
                                "contextId": "c-1", "parts": [{"kind": "text", "text": "Stopped"}]}
                },
                "artifacts": [{"artifactId": "a-1", "name": "response", "parts": [
                    {"kind": "file", "file": {"bytes": "AAE=", "name": "a.bin", "mimeType": "application/octet-stream"}},
                    {"kind": "file", "file": {"uri": "https://f/x.pdf", "mimeType": "application/pdf"}},
                    {"kind": "data", "data": {"k": "v"}},
                    {"kind": "data", "data": {"value": 42}}
                ]}],
                "history": [{"kind": "message", "messageId": "m-1", "role": "user",
                             "parts": [{"kind": "text", "text": "Book a room"}]}],
                "metadata": {"k": "v"}
            }})
        );
    }

    #[test]
    fn encode_reply_table_per_version() {
        let task = json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}});
        let v03_task =
            json!({"kind": "task", "id": "t", "contextId": "c", "status": {"state": "working"}});
        let config = json!({"id": "c1", "taskId": "t", "url": "https://hook"});
        let v03_config =
            json!({"taskId": "t", "pushNotificationConfig": {"id": "c1", "url": "https://hook"}});
        let message = json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]});
        let list =
            json!({"tasks": [task.clone()], "nextPageToken": "", "pageSize": 50, "totalSize": 1});
        let cases = [
            (
                Reply::Send(a2a::SendMessageResponse::Task(from(task.clone()))),
                json!({"task": task}),
                v03_task.clone(),
            ),
            (
                Reply::Send(a2a::SendMessageResponse::Message(from(message.clone()))),
                json!({"message": message}),
                json!({"kind": "message", "messageId": "m", "role": "agent", "parts": [{"kind": "text", "text": "hi"}]}),
            ),
            (
                Reply::Tasks(from(list.clone())),
                list,
                json!({"tasks": [v03_task], "nextPageToken": "", "pageSize": 50, "totalSize": 1}),
            ),
            (Reply::PushConfig(from(config.clone())), config.clone(), v03_config.clone()),
            (
                Reply::PushConfigs(from(json!({"configs": [config.clone()]}))),
                json!({"configs": [config]}),
                json!([v03_config]),
            ),
            (Reply::PushConfigs(from(json!({}))), json!({}), json!([])),
            (Reply::Deleted, Value::Null, Value::Null),
        ];
        for (reply, v1, v03) in cases {
            assert_eq!(
                (
                    encode_reply(&json!(1), Version::V1_0, &reply),
                    encode_reply(&json!(1), Version::V0_3, &reply)
                ),
                (
                    json!({"jsonrpc": "2.0", "id": 1, "result": v1}),
                    json!({"jsonrpc": "2.0", "id": 1, "result": v03})
                ),
                "{reply:?}"
            );
        }
    }

    fn status_update(state: &str) -> a2a::StreamResponse {
        a2a::StreamResponse::StatusUpdate(from(
            json!({"taskId": "t", "contextId": "c", "status": {"state": state}}),
        ))
    }

    #[test]
    fn encode_stream_item_v1_is_the_stream_response() {
        assert_eq!(
            encode_stream_item(&json!(7), Version::V1_0, &status_update("TASK_STATE_COMPLETED")),
            json!({"jsonrpc": "2.0", "id": 7, "result": {"statusUpdate": {
                "taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}}})
        );
    }

    #[test]
    fn encode_stream_item_v03_final_is_true_on_terminal_and_interrupted_states() {
        let cases = [
            ("TASK_STATE_COMPLETED", "completed", true),
            ("TASK_STATE_INPUT_REQUIRED", "input-required", true),
            ("TASK_STATE_AUTH_REQUIRED", "auth-required", true),
            ("TASK_STATE_REJECTED", "rejected", true),
            ("TASK_STATE_WORKING", "working", false),
            ("TASK_STATE_SUBMITTED", "submitted", false),
        ];
        for (state, v03_state, is_final) in cases {
            assert_eq!(
                encode_stream_item(&json!(7), Version::V0_3, &status_update(state)),
                json!({"jsonrpc": "2.0", "id": 7, "result": {"kind": "status-update", "taskId": "t",
                    "contextId": "c", "status": {"state": v03_state}, "final": is_final}}),
                "{state}"
            );
        }
    }

    #[test]
    fn encode_stream_item_v03_artifact_update_has_kind_and_v03_parts() {
        let item =
            a2a::StreamResponse::ArtifactUpdate(from(json!({"taskId": "t", "contextId": "c",
            "append": true, "lastChunk": false,
            "artifact": {"artifactId": "a", "parts": [{"text": "Hel"}]}})));
        assert_eq!(
            (
                encode_stream_item(&json!(7), Version::V0_3, &item),
                encode_stream_item(&json!(7), Version::V1_0, &item)
            ),
            (
                json!({"jsonrpc": "2.0", "id": 7, "result": {"kind": "artifact-update", "taskId": "t",
                    "contextId": "c", "append": true, "lastChunk": false,
                    "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "Hel"}]}}}),
                json!({"jsonrpc": "2.0", "id": 7, "result": {"artifactUpdate": {"taskId": "t",
                    "contextId": "c", "append": true, "lastChunk": false,
                    "artifact": {"artifactId": "a", "parts": [{"text": "Hel"}]}}}})
            )
        );
    }

    #[test]
    fn encode_error_carries_the_id_and_the_error_object() {
        let error = A2aError::TaskNotFound { task_id: "t-404".into() };
        assert_eq!(
            encode_error(&json!("x"), &error),
            json!({"jsonrpc": "2.0", "id": "x", "error": error.jsonrpc_error()})
        );
    }
}
