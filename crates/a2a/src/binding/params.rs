//! Lenient reading of 1.0 params into the `a2a` request types (what the SDKs send besides the spec's shapes; docs/a2a.md, "Interoperability").
//!
//! The `a2a` crate's serde impls are strict: enums take names only, `null` fails on required
//! fields, bytes must be padded standard base64 and push configs have one flat shape. Real callers
//! send more than that, so params are rewritten as `Value`s first ([`normalize`], then the
//! per-type fix-ups here) and deserialized after. Values under `metadata` and `data` belong to the
//! caller and are never touched. Semantic checks (empty parts, page size ranges) are the
//! handler's, not this module's.

use std::sync::LazyLock;

use base64::Engine;
use base64::engine::general_purpose::{
    STANDARD, STANDARD_PAD_INDIFFERENT, URL_SAFE_PAD_INDIFFERENT,
};
use regex::Regex;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{ROLES, TASK_STATES};
use crate::error::A2aError;

/// Rewrites caller JSON towards what the `a2a` types accept, recursively: snake_case keys become
/// camelCase (the camelCase key wins if both are sent), `null` members are dropped (read as
/// absent), enum numbers under `role`, `state` and `status` become names, and numeric strings
/// under `historyLength` and `pageSize` become numbers.
pub(crate) fn normalize(value: &mut Value) {
    match value {
        Value::Object(map) => normalize_object(map),
        Value::Array(items) => items.iter_mut().for_each(normalize),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// Reads SendMessage / SendStreamingMessage params (already [`normalize`]d).
///
/// # Errors
///
/// [`A2aError::InvalidParams`] naming the first bad field it can locate.
pub(crate) fn send_message_request(mut params: Value) -> Result<a2a::SendMessageRequest, A2aError> {
    if let Some(config) = params.get_mut("configuration").and_then(Value::as_object_mut) {
        // The .NET SDK and the 1.0.0 spec example use the older key.
        match config.remove("pushNotificationConfig") {
            Some(_) if config.contains_key("taskPushNotificationConfig") => {}
            Some(push) => {
                config.insert("taskPushNotificationConfig".into(), push);
            }
            None => {}
        }
        if let Some(push) = config.get_mut("taskPushNotificationConfig") {
            flatten_push_config(push);
        }
    }
    if let Some(parts) = params.pointer_mut("/message/parts").and_then(Value::as_array_mut) {
        parts.iter_mut().for_each(canonical_raw);
    }
    a2a::SendMessageRequest::deserialize(&params)
        .map_err(|error| A2aError::InvalidParams(locate_send_error(&params, error)))
}

/// Reads a push config to create (already [`normalize`]d), in the 1.0 flat shape, the .NET shapes
/// `{taskId, configId, config}` and `{id, taskId, pushNotificationConfig}`, or the 0.3 shape
/// (`authentication.schemes`).
///
/// # Errors
///
/// [`A2aError::InvalidParams`] naming the bad field.
pub(crate) fn push_config(mut params: Value) -> Result<a2a::TaskPushNotificationConfig, A2aError> {
    flatten_push_config(&mut params);
    a2a::TaskPushNotificationConfig::deserialize(&params).map_err(|error| {
        let located = params
            .get("authentication")
            .and_then(probe::<a2a::AuthenticationInfo>)
            .map(|detail| format!("authentication: {detail}"));
        A2aError::InvalidParams(located.unwrap_or_else(|| describe(&error)))
    })
}

/// Reads params (already [`normalize`]d) whose shape needs no fix-up.
///
/// # Errors
///
/// [`A2aError::InvalidParams`] with serde's description of the problem.
pub(crate) fn typed<T: DeserializeOwned>(params: Value) -> Result<T, A2aError> {
    T::deserialize(&params).map_err(|error| A2aError::InvalidParams(describe(&error)))
}

fn normalize_object(map: &mut Map<String, Value>) {
    let snake_keys: Vec<String> = map.keys().filter(|key| is_snake_case(key)).cloned().collect();
    for key in snake_keys {
        if let Some(value) = map.remove(&key) {
            map.entry(camel_case(&key)).or_insert(value);
        }
    }
    // `Part.data` may legitimately be JSON null.
    map.retain(|key, value| !value.is_null() || key == "data");
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            "metadata" | "data" => {}
            "role" => name_enum_number(value, ROLES),
            "state" | "status" => {
                name_enum_number(value, TASK_STATES.map(|(name, number, _)| (name, number)));
                normalize(value);
            }
            "historyLength" | "pageSize" => number_from_string(value),
            _ => normalize(value),
        }
    }
}

fn is_snake_case(key: &str) -> bool {
    key.contains('_')
        && !key.starts_with('_')
        && key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn camel_case(key: &str) -> String {
    let mut words = key.split('_').filter(|word| !word.is_empty());
    let mut camel = words.next().unwrap_or_default().to_owned();
    for word in words {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            camel.push(first.to_ascii_uppercase());
            camel.extend(chars);
        }
    }
    camel
}

fn name_enum_number<const N: usize>(value: &mut Value, names: [(&str, i64); N]) {
    let Some(number) = value.as_i64() else { return };
    if let Some((name, _)) = names.into_iter().find(|(_, n)| *n == number) {
        *value = Value::String(name.to_owned());
    }
}

fn number_from_string(value: &mut Value) {
    if let Some(number) = value.as_str().and_then(|text| text.trim().parse::<i64>().ok()) {
        *value = Value::from(number);
    }
}

/// Brings the push config shapes of 1.0 (A2A 1.0.1 §4.3.1) and 0.3 (A2A 0.3.0 §6.10) to the 1.0 flat shape, in place.
fn flatten_push_config(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    // .NET create params: {taskId, configId, config: {id, url, token, authentication}}.
    if let Some(Value::Object(config)) = map.remove("config") {
        if let Some(config_id) = map.remove("configId").filter(|id| !is_empty_string(id)) {
            map.insert("id".into(), config_id);
        }
        merge_missing(map, config);
    }
    // .NET TaskPushNotificationConfig and 0.3: {taskId, pushNotificationConfig: {…}}.
    if let Some(Value::Object(inner)) = map.remove("pushNotificationConfig") {
        if map.get("id").is_some_and(is_empty_string) {
            map.remove("id");
        }
        merge_missing(map, inner);
    }
    // 0.3: authentication.schemes is a list; 1.0 has one scheme.
    if let Some(Value::Object(auth)) = map.get_mut("authentication")
        && let Some(schemes) = auth.remove("schemes")
    {
        let first = schemes.as_array().and_then(|list| list.first()).cloned();
        if let Some(scheme) = first.filter(|_| !auth.contains_key("scheme")) {
            auth.insert("scheme".into(), scheme);
        }
    }
}

fn merge_missing(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (key, value) in from {
        into.entry(key).or_insert(value);
    }
}

fn is_empty_string(value: &Value) -> bool {
    value.as_str().is_some_and(str::is_empty)
}

/// Re-encodes a part's `raw` bytes as padded standard base64 when they came URL-safe or unpadded
/// (A2A 1.0.1 §5.5: both spellings are accepted on input). Anything undecodable is left for serde to report.
fn canonical_raw(part: &mut Value) {
    let Some(raw) = part.get_mut("raw") else { return };
    let Some(text) = raw.as_str() else { return };
    if STANDARD.decode(text).is_ok() {
        return;
    }
    let bytes =
        STANDARD_PAD_INDIFFERENT.decode(text).or_else(|_| URL_SAFE_PAD_INDIFFERENT.decode(text));
    if let Ok(bytes) = bytes {
        *raw = Value::String(STANDARD.encode(bytes));
    }
}

/// Finds the innermost field of a SendMessageRequest that fails to deserialize.
fn locate_send_error(params: &Value, error: serde_json::Error) -> String {
    let message = params.get("message");
    let parts = message.and_then(|m| m.get("parts")).and_then(Value::as_array);
    let configuration = params.get("configuration");
    let push = configuration.and_then(|c| c.get("taskPushNotificationConfig"));
    let located = parts
        .into_iter()
        .flatten()
        .enumerate()
        .find_map(|(index, part)| {
            probe::<a2a::Part>(part).map(|detail| format!("message.parts[{index}]: {detail}"))
        })
        .or_else(|| {
            message.and_then(probe::<a2a::Message>).map(|detail| format!("message: {detail}"))
        })
        .or_else(|| {
            push.and_then(probe::<a2a::TaskPushNotificationConfig>)
                .map(|detail| format!("configuration.taskPushNotificationConfig: {detail}"))
        })
        .or_else(|| {
            configuration
                .and_then(probe::<a2a::SendMessageConfiguration>)
                .map(|detail| format!("configuration: {detail}"))
        });
    located.unwrap_or_else(|| describe(&error))
}

/// serde's description of a params error, with our Rust type names replaced by the JSON shape
/// they stand for: a caller learns what to send, not how the server is written.
fn describe(error: &serde_json::Error) -> String {
    static TYPE_NAME: LazyLock<Regex> = LazyLock::new(|| {
        #[allow(clippy::expect_used)]
        Regex::new(r"expected (?:(?:tuple |unit )?struct|enum) [A-Za-z_][A-Za-z0-9_]*")
            .expect("the type-name pattern is a valid regex")
    });
    TYPE_NAME.replace_all(&error.to_string(), "expected an object").into_owned()
}

/// The deserialization error of `value` as a `T`, if any.
fn probe<T: DeserializeOwned>(value: &Value) -> Option<String> {
    T::deserialize(value).err().map(|error| describe(&error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalize_table_rewrites_lenient_input() {
        let cases = [
            (json!({"role": 1, "parts": []}), json!({"role": "ROLE_USER", "parts": []})),
            (json!({"role": 2}), json!({"role": "ROLE_AGENT"})),
            (json!({"status": 2}), json!({"status": "TASK_STATE_WORKING"})),
            (json!({"status": {"state": 3}}), json!({"status": {"state": "TASK_STATE_COMPLETED"}})),
            (json!({"role": 9}), json!({"role": 9})),
            (json!({"message_id": "m", "context_id": null}), json!({"messageId": "m"})),
            (json!({"message_id": "a", "messageId": "b"}), json!({"messageId": "b"})),
            (
                json!({"historyLength": "3", "pageSize": " 10 "}),
                json!({"historyLength": 3, "pageSize": 10}),
            ),
            (json!({"historyLength": "x"}), json!({"historyLength": "x"})),
            (
                json!({"metadata": {"role": 1, "a_b": null}, "data": {"state": 2}}),
                json!({"metadata": {"role": 1, "a_b": null}, "data": {"state": 2}}),
            ),
            (json!({"parts": [{"data": null}]}), json!({"parts": [{"data": null}]})),
            (json!({"_private": 1, "@type": "x"}), json!({"_private": 1, "@type": "x"})),
        ];
        for (mut input, expected) in cases {
            normalize(&mut input);
            assert_eq!(input, expected);
        }
    }

    #[test]
    fn push_config_accepts_every_shape() {
        let flat = a2a::TaskPushNotificationConfig {
            url: "https://hook.example.com".into(),
            id: Some("c1".into()),
            task_id: "t1".into(),
            token: Some("tok".into()),
            authentication: Some(a2a::AuthenticationInfo {
                scheme: "Bearer".into(),
                credentials: Some("secret".into()),
            }),
            tenant: None,
        };
        let shapes = [
            json!({"id": "c1", "taskId": "t1", "url": "https://hook.example.com", "token": "tok",
                   "authentication": {"scheme": "Bearer", "credentials": "secret"}}),
            json!({"taskId": "t1", "configId": "c1", "config": {"url": "https://hook.example.com",
                   "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "secret"}}}),
            json!({"taskId": "t1", "configId": "", "config": {"id": "c1", "url": "https://hook.example.com",
                   "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "secret"}}}),
            json!({"id": "", "taskId": "t1", "pushNotificationConfig": {"id": "c1",
                   "url": "https://hook.example.com", "token": "tok",
                   "authentication": {"scheme": "Bearer", "credentials": "secret"}}}),
            json!({"taskId": "t1", "pushNotificationConfig": {"id": "c1",
                   "url": "https://hook.example.com", "token": "tok",
                   "authentication": {"schemes": ["Bearer", "Basic"], "credentials": "secret"}}}),
        ];
        for shape in shapes {
            assert_eq!(push_config(shape.clone()), Ok(flat.clone()), "{shape}");
        }
    }

    #[test]
    fn push_config_without_scheme_names_the_field() {
        let params = json!({"taskId": "t1", "url": "https://h", "authentication": {"schemes": []}});
        assert_eq!(
            push_config(params),
            Err(A2aError::InvalidParams("authentication: missing field `scheme`".into()))
        );
    }

    #[test]
    fn send_message_request_errors_name_the_field() {
        let cases = [
            (json!({}), "missing field `message`"),
            (
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}, {"x": 1}]}}),
                "message.parts[1]: Part must have one of: text, raw, url, data",
            ),
            (
                json!({"message": {"role": "ROLE_USER", "parts": []}}),
                "message: missing field `messageId`",
            ),
            (
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []},
                       "configuration": {"taskPushNotificationConfig": {"token": "t"}}}),
                "configuration.taskPushNotificationConfig: missing field `url`",
            ),
            (
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []},
                       "configuration": {"returnImmediately": "yes"}}),
                "configuration: invalid type: string \"yes\", expected a boolean",
            ),
        ];
        for (params, detail) in cases {
            assert_eq!(
                send_message_request(params),
                Err(A2aError::InvalidParams(detail.into())),
                "{detail}"
            );
        }
    }

    #[test]
    fn send_message_request_accepts_push_alias_and_lenient_base64() {
        let params = json!({
            "message": {"messageId": "m", "role": "ROLE_USER",
                        "parts": [{"raw": "-_8", "filename": "a.bin"}, {"raw": "AAE"}]},
            "configuration": {"pushNotificationConfig": {"url": "https://h", "token": "t"}}
        });
        let request = send_message_request(params).unwrap();
        let parts: Vec<a2a::PartContent> =
            request.message.parts.into_iter().map(|part| part.content).collect();
        assert_eq!(
            (parts, request.configuration.and_then(|c| c.task_push_notification_config)),
            (
                vec![a2a::PartContent::Raw(vec![0xfb, 0xff]), a2a::PartContent::Raw(vec![0, 1])],
                Some(a2a::TaskPushNotificationConfig {
                    url: "https://h".into(),
                    id: None,
                    task_id: String::new(),
                    token: Some("t".into()),
                    authentication: None,
                    tenant: None,
                })
            )
        );
    }
}
