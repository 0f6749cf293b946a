//! The JSON-RPC 2.0 binding (A2A 1.0.1 §9; 0.3 method names: A2A 0.3.0 §7): the envelope, the 1.0 and 0.3 method
//! names, and the JSON-RPC response objects of replies, stream events and errors.
//!
//! The method name decides the version (1.0 and 0.3 names do not overlap); the `A2A-Version`
//! header only catches contradictions. Output is strictly the shape of the call's version:
//! Python 1.0 clients reject unknown keys, so nothing 0.3 may leak into a 1.0 result.

use serde_json::{Map, Value, json};

use super::{params, v03, wire_json, write_wire};
use crate::error::A2aError;
use crate::request::{Reply, Request, SendParams, Version};

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
/// Version rules (A2A 1.0.1 §3.6.2): a 1.0 method without a header is processed as 1.0 (deliberate
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
    match fast::decode_get_task(body, requested) {
        Some(decoded) => Ok(decoded),
        None => decode_general(body, requested),
    }
}

/// [`decode`] for every body; [`fast`] answers the plain GetTask without it.
fn decode_general(body: &[u8], requested: Option<Version>) -> Result<Decoded, (Value, A2aError)> {
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

/// The JSON-RPC response object of a non-streaming reply, in the shape of `version`, as bytes. A
/// 1.0 reply is printed straight into the envelope without building a JSON value (cached task
/// JSON spliced in as it is); a 0.3 reply goes through its converter's value.
pub fn encode_reply_bytes(id: &Value, version: Version, reply: &Reply) -> Vec<u8> {
    // Room for the envelope and the id, so the result's bytes are copied once.
    const ENVELOPE: usize = 64;
    let raw = |size_hint: usize, write: &dyn Fn(&mut Vec<u8>)| {
        let mut out = Vec::with_capacity(ENVELOPE + size_hint);
        // The envelope's keys in the order a `serde_json` map prints them, as the 0.3 path does.
        out.extend_from_slice(b"{\"id\":");
        #[allow(clippy::expect_used)]
        serde_json::to_writer(&mut out, id).expect("a JSON value serializes");
        out.extend_from_slice(b",\"jsonrpc\":\"2.0\",\"result\":");
        write(&mut out);
        out.push(b'}');
        out
    };
    match version {
        Version::V1_0 => raw(size_hint(reply), &|out| write_reply_v1(out, reply)),
        Version::V0_3 => {
            json!({"jsonrpc": "2.0", "id": id, "result": reply_v03(reply)}).to_string().into_bytes()
        }
    }
}

/// The bytes a 1.0 reply's JSON is expected to take: exact for cached task JSON, a guess that
/// fits a short task otherwise.
pub(crate) fn size_hint(reply: &Reply) -> usize {
    match reply {
        Reply::TaskView(view) => view.size_hint(),
        Reply::TaskPage(page) => page.size_hint(),
        _ => 1024,
    }
}

/// The JSON of a 1.0 reply's result, printed into `out`.
pub(crate) fn write_reply_v1(out: &mut Vec<u8>, reply: &Reply) {
    match reply {
        Reply::Send(response) => write_wire(out, response),
        Reply::Task(task) => write_wire(out, task),
        Reply::TaskView(view) => view.write_json(out),
        Reply::TaskPage(page) => page.write_json(out),
        Reply::PushConfig(config) => write_wire(out, config),
        Reply::PushConfigs(list) => write_wire(out, list),
        Reply::Deleted => out.extend_from_slice(b"null"),
        Reply::Card(card) => write_wire(out, card),
    }
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

/// Every method name we answer (A2A 1.0.1 §9.4, A2A 0.3.0 §3.5.6), with its operation and version.
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
    // The singular name is what the .NET SDK sends.
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

/// A2A 1.0.1 §3.6.2: the method's version must not contradict the header; a 1.0 method without a header is
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
        Operation::SendMessage => Request::SendMessage(SendParams {
            request: params::send_message_request(params)?,
            push_format: version.into(),
        }),
        Operation::SendStreamingMessage => Request::SendStreamingMessage(SendParams {
            request: params::send_message_request(params)?,
            push_format: version.into(),
        }),
        Operation::GetTask => Request::GetTask(params::typed(params)?),
        Operation::ListTasks => Request::ListTasks(params::typed(params)?),
        Operation::CancelTask => Request::CancelTask(params::typed(params)?),
        Operation::SubscribeToTask => {
            Request::SubscribeToTask { request: params::typed(params)?, after: None }
        }
        Operation::CreatePushConfig => Request::CreatePushConfig {
            config: params::push_config(params)?,
            format: version.into(),
        },
        Operation::GetPushConfig => Request::GetPushConfig(params::typed(params)?),
        Operation::ListPushConfigs => Request::ListPushConfigs(params::typed(params)?),
        Operation::DeletePushConfig => Request::DeletePushConfig(params::typed(params)?),
        Operation::GetExtendedAgentCard => Request::GetExtendedAgentCard,
    })
}

/// Converts 0.3 params to 1.0 JSON.
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

fn reply_v03(reply: &Reply) -> Value {
    match reply {
        Reply::Send(response) => v03::send_response(response),
        Reply::Task(task) => v03::task(task),
        Reply::TaskView(view) => v03::task(&view.to_task()),
        Reply::TaskPage(page) => v03::task_list(&page.clone().into_response()),
        Reply::PushConfig(config) => v03::push_config(config),
        Reply::PushConfigs(list) => v03::push_configs(list),
        Reply::Deleted => Value::Null,
        Reply::Card(card) => v03::card(card),
    }
}

mod fast;
#[cfg(test)]
mod tests;

/// Whether the body names a streaming method (for answering its early errors as SSE); `false`
/// when it does not parse.
pub fn is_streaming_method(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("method").and_then(Value::as_str).map(str::to_string))
        .is_some_and(|method| {
            matches!(
                method.as_str(),
                "SendStreamingMessage" | "SubscribeToTask" | "message/stream" | "tasks/resubscribe"
            )
        })
}
