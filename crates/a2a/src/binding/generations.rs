//! The task-generation extension at the wire (docs/a2a.md, "Task generations"): the A2A 1.1
//! draft's `generation` (§3.2.7 of a2aproject/A2A's `docs/specification.md` at commit
//! 28491879ff41a9c230fb51f3f7bd6096b80cc341, branch dev-1.1), offered to 1.0 callers as an
//! extension they activate with the `A2A-Extensions` header. Without it a call is plain 1.0: no
//! `generation` member anywhere (strict 1.0 parsers reject unknown members), and
//! `currentGeneration` / `ifGenerationMatch` are ignored as unknown fields.
//!
//! Pure functions over headers, bytes and values, like the rest of `binding`: which calls
//! activate it, the two request fields, and `generation` written into a reply's task or a
//! stream event. Generations go out as decimal strings (ProtoJSON's `int64`); both strings and
//! numbers are read.

use serde_json::Value;

use crate::error::A2aError;
use crate::request::{Binding, Generations, Request, Version};

/// The extension's URI, as the card declares it and callers name it in `A2A-Extensions`: the
/// draft section it implements, at the commit followed.
pub const GENERATIONS_EXTENSION: &str = "https://github.com/a2aproject/A2A/blob/28491879ff41a9c230fb51f3f7bd6096b80cc341/docs/specification.md#327-task-generation-semantics";

/// Whether a call activates the extension: a 1.0 call with an `A2A-Extensions` value (of any of
/// the header's lines, comma-separated) that is the extension's URI. 0.3 calls never do (0.3
/// has no generations).
pub fn activates_generations<'a>(version: Version, values: impl Iterator<Item = &'a str>) -> bool {
    version == Version::V1_0
        && values.flat_map(|value| value.split(',')).any(|uri| uri.trim() == GENERATIONS_EXTENSION)
}

/// The extension's fields of a call that activated it: GetTask's `currentGeneration` (in the
/// JSON-RPC params, or the REST query), a send's `configuration.ifGenerationMatch` (in the
/// JSON-RPC params, or the REST body). `body` is the request body, in `binding`'s shape.
///
/// # Errors
/// [`A2aError::InvalidParams`] when a field is present but not a whole number of at least 0.
pub fn generation_params(
    request: &Request,
    body: &[u8],
    query: Option<&str>,
    binding: Binding,
) -> Result<Generations, A2aError> {
    let params = || -> Value {
        let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        match binding {
            Binding::JsonRpc => value.get("params").cloned().unwrap_or(Value::Null),
            Binding::Rest => value,
        }
    };
    match request {
        Request::GetTask(_) => {
            let from_query = query.and_then(|query| {
                super::url::query_pairs(query)
                    .into_iter()
                    .rfind(|(name, _)| name == "currentGeneration")
                    .map(|(_, value)| Value::String(value))
            });
            let value = from_query.or_else(|| params().get("currentGeneration").cloned());
            Ok(Generations { current: whole("currentGeneration", value)?, if_match: None })
        }
        Request::SendMessage(_) | Request::SendStreamingMessage(_) => {
            let value = params().pointer("/configuration/ifGenerationMatch").cloned();
            let if_match = whole("configuration.ifGenerationMatch", value)?;
            Ok(Generations { current: None, if_match })
        }
        _ => Ok(Generations::default()),
    }
}

/// A generation field: absent or `null` is none; a whole number, as a JSON number or a decimal
/// string (ProtoJSON's `int64`), is read.
fn whole(name: &str, value: Option<Value>) -> Result<Option<u64>, A2aError> {
    let number = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(number)) => number.as_u64(),
        Some(Value::String(text)) => {
            let text = text.trim();
            (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
                .then(|| text.parse::<u64>().ok())
                .flatten()
        }
        Some(_) => None,
    };
    number.map(Some).ok_or_else(|| {
        A2aError::InvalidParams(format!(
            "{name} must be a whole number of at least 0 (a generation, e.g. \"3\")"
        ))
    })
}

/// Writes `generation` into the task a 1.0 reply shows: the reply itself (GetTask, CancelTask)
/// or its `task` member (SendMessage), inside the JSON-RPC `result` on that binding. A reply
/// that shows no task is returned as it was.
pub fn reply_with_generation(body: Vec<u8>, generation: u64, binding: Binding) -> Vec<u8> {
    let Ok(mut value) = serde_json::from_slice::<Value>(&body) else { return body };
    let reply = result_of(&mut value, binding);
    let Some(reply) = reply else { return body };
    let task = if reply.get("task").is_some_and(Value::is_object) {
        reply.get_mut("task")
    } else {
        Some(reply)
    };
    match task {
        Some(Value::Object(task)) if task.contains_key("status") => {
            task.insert("generation".into(), Value::String(generation.to_string()));
        }
        _ => return body,
    }
    serde_json::to_vec(&value).unwrap_or(body)
}

/// Writes `generation` into a 1.0 stream event (`task`, `statusUpdate` or `artifactUpdate`),
/// inside the JSON-RPC `result` on that binding.
pub fn event_with_generation(value: &mut Value, generation: u64, binding: Binding) {
    let event = result_of(value, binding);
    let Some(Value::Object(event)) = event else { return };
    for kind in ["task", "statusUpdate", "artifactUpdate"] {
        if let Some(Value::Object(inner)) = event.get_mut(kind) {
            inner.insert("generation".into(), Value::String(generation.to_string()));
        }
    }
}

/// The answer's result in `binding`'s envelope: JSON-RPC's `result`, the whole REST body.
fn result_of(value: &mut Value, binding: Binding) -> Option<&mut Value> {
    match binding {
        Binding::JsonRpc => value.get_mut("result"),
        Binding::Rest => Some(value),
    }
}

/// A stream's events as a caller with generations sees them: each mutation's event exactly
/// once. A status update right after the task snapshot that already shows it (a closing
/// stream's repeat, same generation) is left out, so no two events carry one generation.
#[derive(Debug, Default)]
pub struct GenerationFilter {
    /// The generation of the last event that went out, and whether it was a task snapshot.
    last: Option<(u64, bool)>,
}

impl GenerationFilter {
    /// Whether `event`, at `generation`, goes out.
    pub fn keep(&mut self, generation: u64, event: &a2a::StreamResponse) -> bool {
        let is_task = matches!(event, a2a::StreamResponse::Task(_));
        let is_status = matches!(event, a2a::StreamResponse::StatusUpdate(_));
        let repeat = is_status && self.last == Some((generation, true));
        if !repeat {
            self.last = Some((generation, is_task));
        }
        !repeat
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_1_0_call_naming_the_uri_activates_generations() {
        let other = "https://example.com/ext/v1";
        let both = format!("{other}, {GENERATIONS_EXTENSION}");
        assert!(activates_generations(Version::V1_0, [both.as_str()].into_iter()));
        assert!(activates_generations(Version::V1_0, [other, GENERATIONS_EXTENSION].into_iter()));
        assert!(!activates_generations(Version::V1_0, [other].into_iter()));
        assert!(!activates_generations(Version::V1_0, std::iter::empty()));
        assert!(!activates_generations(Version::V0_3, [GENERATIONS_EXTENSION].into_iter()));
    }

    #[test]
    fn generation_fields_are_read_as_strings_or_numbers_and_refused_otherwise() {
        assert_eq!(whole("g", Some(json!("12"))), Ok(Some(12)));
        assert_eq!(whole("g", Some(json!(7))), Ok(Some(7)));
        assert_eq!(whole("g", Some(Value::Null)), Ok(None));
        assert_eq!(whole("g", None), Ok(None));
        for bad in [json!(-1), json!("-1"), json!("1.5"), json!(1.5), json!(""), json!(true)] {
            assert!(
                matches!(whole("g", Some(bad.clone())), Err(A2aError::InvalidParams(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generation_params_come_from_the_query_the_params_or_the_configuration() {
        let get = Request::GetTask(a2a::GetTaskRequest {
            id: "t".into(),
            history_length: None,
            tenant: None,
        });
        let rpc = br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","currentGeneration":"4"}}"#;
        assert_eq!(generation_params(&get, rpc, None, Binding::JsonRpc).unwrap().current, Some(4));
        let rest = generation_params(
            &get,
            b"",
            Some("historyLength=2&currentGeneration=9"),
            Binding::Rest,
        );
        assert_eq!(rest.unwrap().current, Some(9));

        let send = Request::SendMessage(crate::request::SendParams::v1(a2a::SendMessageRequest {
            message: a2a::Message::new(a2a::Role::User, vec![a2a::Part::text("hi")]),
            configuration: None,
            metadata: None,
            tenant: None,
        }));
        let body = br#"{"message":{},"configuration":{"ifGenerationMatch":3}}"#;
        assert_eq!(generation_params(&send, body, None, Binding::Rest).unwrap().if_match, Some(3));
        let rpc = br#"{"params":{"configuration":{"ifGenerationMatch":"x"}}}"#;
        assert!(generation_params(&send, rpc, None, Binding::JsonRpc).is_err());
    }

    #[test]
    fn generation_goes_into_the_task_of_a_reply_and_of_an_event() {
        let task =
            json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}});
        let body =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "result": {"task": task}}));
        let out: Value =
            serde_json::from_slice(&reply_with_generation(body.unwrap(), 5, Binding::JsonRpc))
                .unwrap();
        assert_eq!(out["result"]["task"]["generation"], "5");
        let out: Value = serde_json::from_slice(&reply_with_generation(
            serde_json::to_vec(&task).unwrap(),
            2,
            Binding::Rest,
        ))
        .unwrap();
        assert_eq!(out["generation"], "2");
        // A reply that shows no task is left alone.
        let configs = serde_json::to_vec(&json!({"configs": []})).unwrap();
        assert_eq!(reply_with_generation(configs.clone(), 2, Binding::Rest), configs);

        let mut event = json!({"statusUpdate": {"taskId": "t", "status": {}}});
        event_with_generation(&mut event, 3, Binding::Rest);
        assert_eq!(event["statusUpdate"]["generation"], "3");
    }

    #[test]
    fn the_filter_drops_only_a_status_repeating_the_task_before_it() {
        let task: a2a::Task = serde_json::from_value(
            json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}),
        )
        .unwrap();
        let status = crate::task::events::status_event(&task);
        let artifact = a2a::StreamResponse::ArtifactUpdate(a2a::TaskArtifactUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: a2a::Artifact {
                artifact_id: "a".into(),
                name: None,
                description: None,
                parts: vec![a2a::Part::text("x")],
                metadata: None,
                extensions: None,
            },
            append: None,
            last_chunk: None,
            metadata: None,
        });
        let task = a2a::StreamResponse::Task(task);
        let mut filter = GenerationFilter::default();
        assert!(filter.keep(4, &task));
        assert!(!filter.keep(4, &status), "the closing stream's repeat");
        let mut filter = GenerationFilter::default();
        assert!(filter.keep(4, &task));
        assert!(filter.keep(5, &status));
        assert!(filter.keep(6, &artifact));
        assert!(filter.keep(7, &status));
    }
}
