//! 0.3 messages and parts (A2A 0.3.0 §6.4, §6.5): `kind` discriminators, `user`/`agent` roles,
//! `file: {name, mimeType, bytes | uri}` parts and object-only `data`; plus the 0.3
//! MessageSendParams with `blocking` and the "0 means no limit" `historyLength` (A2A 0.3.0 §7.1.1).

use serde_json::{Map, Value, json};

use crate::binding::wire_json;
use crate::error::A2aError;

/// Converts 0.3 MessageSendParams to 1.0 SendMessageRequest JSON.
///
/// A missing `blocking` means blocking (`returnImmediately: false`), `blocking: false` means
/// `returnImmediately: true`, and `historyLength: 0` means unset.
///
/// # Errors
///
/// [`A2aError::InvalidParams`] when `configuration` or `blocking` has the wrong type.
pub(crate) fn send_params_to_v1(mut params: Value) -> Result<Value, A2aError> {
    let Some(map) = params.as_object_mut() else { return Ok(params) };
    if let Some(message) = map.get_mut("message") {
        message_to_v1(message);
    }
    let config = map.entry("configuration").or_insert_with(|| json!({}));
    let Some(config) = config.as_object_mut() else {
        return Err(A2aError::InvalidParams("configuration: expected an object".into()));
    };
    let blocking = match config.remove("blocking") {
        None => true,
        Some(Value::Bool(blocking)) => blocking,
        Some(other) => {
            return Err(A2aError::InvalidParams(format!(
                "configuration.blocking: expected a boolean, got {other}"
            )));
        }
    };
    config.insert("returnImmediately".into(), Value::Bool(!blocking));
    remove_zero_history_length(config);
    Ok(params)
}

/// Drops a 0.3 `historyLength: 0`, which meant "no limit" (A2A 0.3.0 §7.1.1).
pub(super) fn remove_zero_history_length(params: &mut Map<String, Value>) {
    if params.get("historyLength").and_then(Value::as_i64) == Some(0) {
        params.remove("historyLength");
    }
}

/// The 0.3 JSON of a message.
pub(crate) fn message(message: &a2a::Message) -> Value {
    let mut value = wire_json(message);
    message_to_v03(&mut value);
    value
}

/// Rewrites serialized 1.0 message JSON into 0.3 message JSON, in place.
pub(super) fn message_to_v03(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    map.insert("kind".into(), json!("message"));
    if let Some(role) = map.get_mut("role") {
        // 0.3 knows only `user` and `agent`; an unspecified role is only ever a server-side
        // slip, and the agent is the one speaking in what we send.
        let v03 = if role.as_str() == Some("ROLE_USER") { "user" } else { "agent" };
        *role = json!(v03);
    }
    if let Some(Value::Array(parts)) = map.get_mut("parts") {
        parts.iter_mut().for_each(part_to_v03);
    }
}

/// Rewrites serialized 1.0 part JSON into 0.3 part JSON, in place. A non-object `data` is
/// wrapped as `{"value": …}`, as .NET does, since 0.3 `data` must be an object.
pub(super) fn part_to_v03(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    let mut part = Map::new();
    let mut file = Map::new();
    if let Some(text) = map.remove("text") {
        part.insert("kind".into(), json!("text"));
        part.insert("text".into(), text);
    } else if let Some(bytes) = map.remove("raw") {
        file.insert("bytes".into(), bytes);
    } else if let Some(uri) = map.remove("url") {
        file.insert("uri".into(), uri);
    } else if let Some(data) = map.remove("data") {
        let data = if data.is_object() { data } else { json!({"value": data}) };
        part.insert("kind".into(), json!("data"));
        part.insert("data".into(), data);
    }
    if !file.is_empty() {
        if let Some(name) = map.remove("filename") {
            file.insert("name".into(), name);
        }
        if let Some(mime_type) = map.remove("mediaType") {
            file.insert("mimeType".into(), mime_type);
        }
        part.insert("kind".into(), json!("file"));
        part.insert("file".into(), Value::Object(file));
    }
    if let Some(metadata) = map.remove("metadata") {
        part.insert("metadata".into(), metadata);
    }
    *value = Value::Object(part);
}

/// Rewrites 0.3 message JSON into 1.0 message JSON, in place.
fn message_to_v1(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    map.remove("kind");
    if let Some(role) = map.get_mut("role") {
        match role.as_str() {
            Some("user") => *role = json!("ROLE_USER"),
            Some("agent") => *role = json!("ROLE_AGENT"),
            _ => {}
        }
    }
    if let Some(Value::Array(parts)) = map.get_mut("parts") {
        parts.iter_mut().for_each(part_to_v1);
    }
}

/// Rewrites 0.3 part JSON into 1.0 part JSON, in place. A part without `kind` is read by the
/// keys it has (A2A 0.3.0 §6.6). The 0.3 gRPC names `fileWithBytes` / `fileWithUri` are tolerated too.
pub(crate) fn part_to_v1(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    map.remove("kind");
    let Some(Value::Object(mut file)) = map.remove("file") else { return };
    let bytes = file.remove("bytes").or_else(|| file.remove("fileWithBytes"));
    let uri = file.remove("uri").or_else(|| file.remove("fileWithUri"));
    if let Some(bytes) = bytes {
        map.insert("raw".into(), bytes);
    } else if let Some(uri) = uri {
        map.insert("url".into(), uri);
    }
    if let Some(name) = file.remove("name") {
        map.entry("filename").or_insert(name);
    }
    if let Some(mime_type) = file.remove("mimeType") {
        map.entry("mediaType").or_insert(mime_type);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_params_to_v1_converts_message_parts_and_configuration() {
        let params = json!({
            "message": {"kind": "message", "messageId": "m1", "role": "user", "parts": [
                {"kind": "text", "text": "hi", "metadata": {"k": 1}},
                {"text": "no kind"},
                {"kind": "file", "file": {"name": "a.pdf", "mimeType": "application/pdf", "bytes": "AAE="}},
                {"file": {"uri": "https://f.example.com/a.pdf"}},
                {"kind": "data", "data": {"k": "v"}}
            ]},
            "configuration": {"historyLength": 0, "acceptedOutputModes": ["text/plain"]}
        });
        assert_eq!(
            send_params_to_v1(params),
            Ok(json!({
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [
                    {"text": "hi", "metadata": {"k": 1}},
                    {"text": "no kind"},
                    {"raw": "AAE=", "filename": "a.pdf", "mediaType": "application/pdf"},
                    {"url": "https://f.example.com/a.pdf"},
                    {"data": {"k": "v"}}
                ]},
                "configuration": {"returnImmediately": false, "acceptedOutputModes": ["text/plain"]}
            }))
        );
    }

    #[test]
    fn send_params_to_v1_blocking_table() {
        let cases = [
            (json!({"message": {}}), Ok(json!({"returnImmediately": false}))),
            (json!({"message": {}, "configuration": {}}), Ok(json!({"returnImmediately": false}))),
            (
                json!({"message": {}, "configuration": {"blocking": true}}),
                Ok(json!({"returnImmediately": false})),
            ),
            (
                json!({"message": {}, "configuration": {"blocking": false, "historyLength": 2}}),
                Ok(json!({"returnImmediately": true, "historyLength": 2})),
            ),
            (
                json!({"message": {}, "configuration": {"blocking": "no"}}),
                Err(A2aError::InvalidParams(
                    "configuration.blocking: expected a boolean, got \"no\"".into(),
                )),
            ),
        ];
        for (params, expected) in cases {
            let configuration = send_params_to_v1(params).map(|p| p["configuration"].clone());
            assert_eq!(configuration, expected);
        }
    }

    #[test]
    fn message_to_v03_rewrites_role_parts_and_kind() {
        let mut value = json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [
            {"text": "t", "mediaType": "text/plain"},
            {"raw": "AAE=", "filename": "a.bin", "mediaType": "application/octet-stream"},
            {"url": "https://u", "metadata": {"k": 1}},
            {"data": {"k": "v"}},
            {"data": [1, 2]}
        ]});
        message_to_v03(&mut value);
        assert_eq!(
            value,
            json!({"kind": "message", "messageId": "m", "role": "agent", "parts": [
                {"kind": "text", "text": "t"},
                {"kind": "file", "file": {"bytes": "AAE=", "name": "a.bin", "mimeType": "application/octet-stream"}},
                {"kind": "file", "file": {"uri": "https://u"}, "metadata": {"k": 1}},
                {"kind": "data", "data": {"k": "v"}},
                {"kind": "data", "data": {"value": [1, 2]}}
            ]})
        );
    }
}
