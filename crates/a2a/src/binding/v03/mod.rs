//! The 0.3 JSON-RPC shapes (A2A 0.3.0 §6, §7), in both directions: 0.3 params become 1.0 `Value`s
//! before they are deserialized into the `a2a` types, and 1.0 results, serialized from the `a2a`
//! types, are rewritten into 0.3 `Value`s; handler code never sees it.
//!
//! Layout: `message` (messages, parts, send params), `task` (tasks, artifacts, stream events),
//! `push` (push configs and their params), `card` (the 0.3 agent card and the blended card's
//! 0.3 fields), [`rest`] (the 0.3 HTTP+JSON proto shapes, A2A 0.3.0 §3.2.3, which reuse the others).

mod card;
mod message;
mod push;
pub(crate) mod rest;
mod task;

pub(crate) use card::{add_security_scheme_fields, card, card_fields};
pub(crate) use message::{message, part_to_v1, send_params_to_v1};
pub(crate) use push::{
    delete_params_to_v1, get_params_to_v1, list_params_to_v1, push_config, push_configs,
};
pub(crate) use task::{get_task_params_to_v1, send_response, stream_item, task, task_list};

use serde_json::Value;

use crate::error::A2aError;

/// The task id of 0.3 `TaskIdParams` / `TaskQueryParams`-style params, where `id` is the task id.
fn required_string(params: &Value, field: &str) -> Result<Value, A2aError> {
    match params.get(field) {
        Some(value @ Value::String(_)) => Ok(value.clone()),
        Some(other) => Err(A2aError::InvalidParams(format!(
            "invalid type for `{field}`: expected a string, got {other}"
        ))),
        None => Err(A2aError::InvalidParams(format!("missing field `{field}`"))),
    }
}
