//! The wire edge: JSON-RPC and HTTP+JSON (REST) decoding and encoding, SSE framing, A2A-Version
//! negotiation, the blended agent card and the 0.3 ⇄ 1.0 conversions (A2A 1.0.1 §3.6, §9,
//! §11).
//!
//! Every binding and version decodes into [`Request`](crate::request::Request) and encodes from
//! [`Reply`](crate::request::Reply) or `a2a::StreamResponse`. Everything here is a pure function
//! over bytes and `serde_json::Value`s: no I/O, no axum, no handler state. Error codes and HTTP
//! statuses come only from [`A2aError`]; this module never picks one.
//!
//! Layout:
//! - [`jsonrpc`]: the JSON-RPC 2.0 envelope, 1.0 and 0.3 method names.
//! - [`rest`]: the HTTP+JSON routes, 1.0 and 0.3, and which version a call speaks.
//! - `params`: lenient reading of params into the `a2a` types (enum integers, `null`, .NET shapes).
//! - `v03`: the 0.3 shapes, in both directions: JSON-RPC, and the proto JSON of 0.3 REST.
//! - `url`: percent-decoding of path segments and query strings.
//! - [`generations`]: the task-generation extension (which calls activate it, its fields, and
//!   `generation` in replies and events).

pub mod generations;
pub mod jsonrpc;
pub(crate) mod params;
pub mod rest;
pub(crate) mod url;
pub(crate) mod v03;

use serde::Serialize;
use serde_json::Value;

use crate::error::A2aError;
use crate::push::PushFormat;
use crate::request::{Request, Version};
use crate::task::events::EventId;

/// Reads the `A2A-Version` a caller asked for (A2A 1.0.1 §3.2.6, §3.6.1).
///
/// `header` is the `A2A-Version` header value; `query` is the raw query string (without `?`), in
/// which an `A2A-Version` parameter is looked up when the header is absent or empty. Patch
/// numbers are ignored and every `1.x` is read as 1.0 (A2A 1.0.1 §3.6.2: a server accepts the minor versions of its major one).
/// An absent or empty value gives `None`; what that means is the binding's call.
///
/// # Errors
///
/// [`A2aError::VersionNotSupported`] for anything that is not `1.x` or `0.3`.
pub fn requested_version(
    header: Option<&str>,
    query: Option<&str>,
) -> Result<Option<Version>, A2aError> {
    let header = header.map(str::trim).filter(|value| !value.is_empty());
    let raw = match header {
        Some(value) => Some(value.to_owned()),
        None => query.and_then(|query| {
            url::query_pairs(query)
                .into_iter()
                .filter(|(name, _)| name.eq_ignore_ascii_case(a2a::SVC_PARAM_VERSION))
                .map(|(_, value)| value.trim().to_owned())
                .rfind(|value| !value.is_empty())
        }),
    };
    raw.map(|raw| parse_version(&raw)).transpose()
}

/// Gives a SubscribeToTask the position to resume after, from its `Last-Event-ID` header (the
/// SSE `id:` of the last event the client got); other requests ignore the header, as does an
/// empty one.
///
/// # Errors
///
/// [`A2aError::InvalidParams`] when the header is not an id this server writes (`<run>.<seq>`).
pub fn resume_after(request: &mut Request, last_event_id: Option<&str>) -> Result<(), A2aError> {
    let Request::SubscribeToTask { after, .. } = request else { return Ok(()) };
    let Some(text) = last_event_id.map(str::trim).filter(|text| !text.is_empty()) else {
        return Ok(());
    };
    *after = Some(EventId::parse(text).ok_or_else(|| {
        A2aError::InvalidParams(
            "Last-Event-ID must be the id of an event of this task's streams, <run>.<seq> (e.g. 2.17)"
                .into(),
        )
    })?);
    Ok(())
}

/// The 1.0 card exactly as the 1.0 schema has it: what a request asking for 1.x gets, and what
/// a strict 1.0 parser (unknown fields rejected) accepts.
pub fn strict_card(card: &a2a::AgentCard) -> Value {
    wire_json(card)
}

/// The public agent card served at `/.well-known/agent-card.json`: the 1.0 card plus the 0.3
/// top-level fields and 0.3 security scheme keys, so that 1.0 and 0.3 clients can both read it
/// (docs/a2a.md, "The public card"; both SDKs' card parsers ignore unknown keys).
pub fn blended_card(card: &a2a::AgentCard) -> Value {
    let mut value = wire_json(card);
    if let Value::Object(map) = &mut value {
        v03::add_security_scheme_fields(map, card);
        map.extend(v03::card_fields(card));
    }
    value
}

/// The body a webhook gets for `task` (A2A 1.0.1 §4.3.3): the 1.0 StreamResponse
/// `{"task": …}` in the HTTP+JSON shape, or, for a config registered through 0.3, the bare 0.3
/// task with `"kind": "task"`.
pub(crate) fn webhook_body(task: &a2a::Task, format: PushFormat) -> Value {
    match format {
        PushFormat::V1_0 => wire_json(&a2a::StreamResponse::Task(task.clone())),
        PushFormat::V0_3 => v03::task(task),
    }
}

/// Parses a non-empty `A2A-Version` value.
fn parse_version(raw: &str) -> Result<Version, A2aError> {
    let numbers: Option<Vec<u32>> = raw.split('.').map(|part| part.parse().ok()).collect();
    match numbers.as_deref() {
        Some([1] | [1, _] | [1, _, _]) => Ok(Version::V1_0),
        Some([0, 3] | [0, 3, _]) => Ok(Version::V0_3),
        _ => Err(A2aError::VersionNotSupported { requested: truncate(raw, 32) }),
    }
}

/// Cuts caller-supplied text that goes back into an error message to a readable length.
fn truncate(raw: &str, max_chars: usize) -> String {
    match raw.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &raw[..end]),
        None => raw.to_owned(),
    }
}

/// Why serializing a wire type cannot fail.
const WIRE_INFALLIBLE: &str = "a2a wire types serialize infallibly: their maps have string keys \
and their custom Serialize impls never fail";

/// Prints an `a2a` wire type as JSON, straight into `out` (the same JSON as [`wire_json`]'s
/// value, its keys in declaration order rather than sorted).
fn write_wire<T: Serialize>(out: &mut Vec<u8>, value: &T) {
    #[allow(clippy::expect_used)]
    serde_json::to_writer(out, value).expect(WIRE_INFALLIBLE);
}

/// Serializes an `a2a` wire type.
pub(crate) fn wire_json<T: Serialize>(value: &T) -> Value {
    #[allow(clippy::expect_used)]
    serde_json::to_value(value).expect(WIRE_INFALLIBLE)
}

/// `TaskState` vocabulary: the 1.0 name, the proto number and the 0.3 JSON-RPC name
/// (A2A 1.0.1 §4.1.3, A2A 0.3.0 §6.3).
const TASK_STATES: [(&str, i64, &str); 9] = [
    ("TASK_STATE_UNSPECIFIED", 0, "unknown"),
    ("TASK_STATE_SUBMITTED", 1, "submitted"),
    ("TASK_STATE_WORKING", 2, "working"),
    ("TASK_STATE_COMPLETED", 3, "completed"),
    ("TASK_STATE_FAILED", 4, "failed"),
    ("TASK_STATE_CANCELED", 5, "canceled"),
    ("TASK_STATE_INPUT_REQUIRED", 6, "input-required"),
    ("TASK_STATE_REJECTED", 7, "rejected"),
    ("TASK_STATE_AUTH_REQUIRED", 8, "auth-required"),
];

/// `Role` vocabulary: the 1.0 name and the proto number (A2A 1.0.1 §4.1.5).
const ROLES: [(&str, i64); 3] = [("ROLE_UNSPECIFIED", 0), ("ROLE_USER", 1), ("ROLE_AGENT", 2)];

/// The 1.0 name of a task state given by name, proto number, 0.3 name or short name in any case
/// (`TASK_STATE_WORKING`, `2`, `working`, `Working`, `input-required`, `InputRequired`,
/// `cancelled`).
pub(crate) fn task_state_name(raw: &str) -> Option<&'static str> {
    if let Ok(number) = raw.trim().parse::<i64>() {
        return TASK_STATES.iter().find(|(_, n, _)| *n == number).map(|(name, _, _)| *name);
    }
    let squash = |text: &str| -> String {
        let lower = text.trim().to_ascii_lowercase();
        let short = lower.strip_prefix("task_state_").unwrap_or(&lower);
        short.chars().filter(|c| *c != '_' && *c != '-').collect()
    };
    let wanted = match squash(raw).as_str() {
        "cancelled" => "canceled".to_owned(),
        "unspecified" => "unknown".to_owned(),
        other => other.to_owned(),
    };
    TASK_STATES.iter().find(|(_, _, v03)| squash(v03) == wanted).map(|(name, _, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requested_version_table_normalises_or_rejects() {
        let unsupported = |requested: &str| {
            Err(A2aError::VersionNotSupported { requested: requested.to_owned() })
        };
        type Case<'a> = (Option<&'a str>, Option<&'a str>, Result<Option<Version>, A2aError>);
        let cases: [Case; 15] = [
            (None, None, Ok(None)),
            (Some(""), None, Ok(None)),
            (Some("  "), Some(""), Ok(None)),
            (Some("1.0"), None, Ok(Some(Version::V1_0))),
            (Some("1.0.0"), None, Ok(Some(Version::V1_0))),
            (Some("1.1"), None, Ok(Some(Version::V1_0))),
            (Some(" 1 "), None, Ok(Some(Version::V1_0))),
            (Some("0.3"), None, Ok(Some(Version::V0_3))),
            (Some("0.3.0"), None, Ok(Some(Version::V0_3))),
            (Some("0.5"), None, unsupported("0.5")),
            (Some("2.0"), None, unsupported("2.0")),
            (Some("garbage"), None, unsupported("garbage")),
            (None, Some("historyLength=2&A2A-Version=1.0"), Ok(Some(Version::V1_0))),
            (None, Some("a2a-version=0.3"), Ok(Some(Version::V0_3))),
            (Some("0.3"), Some("A2A-Version=1.0"), Ok(Some(Version::V0_3))),
        ];
        for (header, query, expected) in cases {
            assert_eq!(requested_version(header, query), expected, "{header:?} {query:?}");
        }
    }

    #[test]
    fn requested_version_long_garbage_is_truncated_in_the_error() {
        let raw = "x".repeat(100);
        assert_eq!(
            requested_version(Some(&raw), None),
            Err(A2aError::VersionNotSupported { requested: format!("{}…", "x".repeat(32)) })
        );
    }

    #[test]
    fn task_state_name_accepts_names_numbers_and_short_forms() {
        let cases = [
            ("TASK_STATE_WORKING", Some("TASK_STATE_WORKING")),
            ("2", Some("TASK_STATE_WORKING")),
            ("working", Some("TASK_STATE_WORKING")),
            ("Working", Some("TASK_STATE_WORKING")),
            ("input-required", Some("TASK_STATE_INPUT_REQUIRED")),
            ("InputRequired", Some("TASK_STATE_INPUT_REQUIRED")),
            ("cancelled", Some("TASK_STATE_CANCELED")),
            ("TASK_STATE_CANCELED", Some("TASK_STATE_CANCELED")),
            ("9", None),
            ("busy", None),
        ];
        for (raw, expected) in cases {
            assert_eq!(task_state_name(raw), expected, "{raw}");
        }
    }

    #[test]
    fn blended_card_carries_both_versions() {
        let card: a2a::AgentCard = serde_json::from_value(json!({
            "name": "Volcanic assistant",
            "description": "d",
            "version": "1.0.0",
            "supportedInterfaces": [
                {"url": "https://bot.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "https://bot.example.com/a2a/v1", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                {"url": "https://bot.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
            ],
            "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": true},
            "securitySchemes": {
                "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
                "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}
            },
            "securityRequirements": [{"schemes": {"apiKey": {"list": []}}}, {"schemes": {"bearer": {"list": []}}}],
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "chat", "name": "Chat", "description": "General assistant", "tags": ["chat"]}]
        }))
        .unwrap();
        assert_eq!(
            blended_card(&card),
            json!({
                "name": "Volcanic assistant",
                "description": "d",
                "version": "1.0.0",
                "supportedInterfaces": [
                    {"url": "https://bot.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                    {"url": "https://bot.example.com/a2a/v1", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                    {"url": "https://bot.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
                ],
                "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": true},
                "securitySchemes": {
                    "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"},
                               "type": "apiKey", "in": "header", "name": "X-API-Key"},
                    "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"},
                               "type": "http", "scheme": "Bearer"}
                },
                "securityRequirements": [{"schemes": {"apiKey": {"list": []}}}, {"schemes": {"bearer": {"list": []}}}],
                "defaultInputModes": ["text/plain"],
                "defaultOutputModes": ["text/plain"],
                "skills": [{"id": "chat", "name": "Chat", "description": "General assistant", "tags": ["chat"]}],
                "protocolVersion": "0.3.0",
                "url": "https://bot.example.com/a2a",
                "preferredTransport": "JSONRPC",
                "additionalInterfaces": [{"url": "https://bot.example.com/a2a", "transport": "JSONRPC"}],
                "supportsAuthenticatedExtendedCard": true,
                "security": [{"apiKey": []}, {"bearer": []}]
            })
        );
    }
}
