//! The HTTP+JSON (REST) binding (A2A 1.0.1 §11; 0.3: A2A 0.3.0 §3.2.3): routes relative to the interface
//! URL (`/a2a/v1`), query parameters, bodies, and the error shapes, in 1.0 and in 0.3.
//!
//! Both versions share the paths: a 0.3 client given the interface URL `/a2a` calls
//! `/a2a/v1/message:send` like a 1.0 client given `/a2a/v1` (docs/a2a.md, "0.3 over HTTP+JSON"). [`version`] decides which one a
//! call speaks; 0.3 bodies are taken to 1.0 JSON and answers back to 0.3 proto JSON by
//! `v03::rest`, around the same routing.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{params, task_state_name, url, v03, wire_json};
use crate::error::A2aError;
use crate::push::PushFormat;
use crate::request::{Reply, Request, SendParams, Version};

/// The version a REST call speaks: the `A2A-Version` it asked for (from
/// [`requested_version`](super::requested_version)), else what the request looks like.
///
/// Without a version, a route only one version has is that version's (`/card` is 0.3, `/tasks`
/// and `/extendedAgentCard` are 1.0), a body in a 0.3-only shape is 0.3 (`v03::rest::is_v03_body`: `request`, `message.content`, a
/// push config named as a resource), and everything else is 1.0, body-less requests included.
/// The spec reads a missing version as 0.3 (A2A 1.0.1 §3.6.1), but a body-less request carries nothing to
/// tell the versions apart, the SDKs' 0.3 REST clients send `A2A-Version: 0.3` through their
/// client classes, and plain `curl` calls of the 1.0 routes send no header: so they get 1.0.
pub fn version(requested: Option<Version>, path: &str, body: &[u8]) -> Version {
    if let Some(version) = requested {
        return version;
    }
    if let Some(only) = route(path).and_then(|route| route.only_in()) {
        return only;
    }
    match body_json(body) {
        Ok(body) if v03::rest::is_v03_body(&body) => Version::V0_3,
        Ok(_) | Err(_) => Version::V1_0,
    }
}

/// Decodes a REST call of `version`. `method` is the HTTP verb, `path` is relative to the
/// interface URL (`/tasks/abc:cancel`), `query` is the raw query string without `?`.
///
/// 0.3 has no task list and names the extended card `/card`; 1.0 has `/tasks` and
/// `/extendedAgentCard`. A route of the other version is not found.
///
/// The last path segment is split at its last `:` to find an action (A2A 1.0.1 §11.3), before
/// percent-decoding, so ids may contain `:` and `%2F`.
///
/// # Errors
///
/// [`A2aError::MethodNotFound`] for an unknown route or a verb the route does not take;
/// [`A2aError::Parse`] for a malformed body; [`A2aError::InvalidParams`] for a body that does not
/// fit, or a bad query parameter (named in the message).
pub fn decode(
    version: Version,
    method: &str,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Result<Request, A2aError> {
    let not_found = || A2aError::MethodNotFound(format!("{method} {path}"));
    let route = route(path).ok_or_else(not_found)?;
    if route.only_in().is_some_and(|only| only != version) {
        return Err(not_found());
    }
    let v03 = version == Version::V0_3;
    let send_params = |body: &[u8]| -> Result<SendParams, A2aError> {
        let body = body_json(body)?;
        if v03 {
            let params = v03::send_params_to_v1(v03::rest::send_request_to_params(body))?;
            Ok(SendParams {
                request: params::send_message_request(params)?,
                push_format: PushFormat::V0_3,
            })
        } else {
            Ok(SendParams::v1(params::send_message_request(body)?))
        }
    };
    let query = Query::parse(query.unwrap_or_default());
    let allow = |verbs: &[&str]| {
        if verbs.iter().any(|verb| verb.eq_ignore_ascii_case(method)) {
            Ok(())
        } else {
            Err(not_found())
        }
    };
    Ok(match route {
        Route::MessageSend => {
            allow(&["POST"])?;
            Request::SendMessage(send_params(body)?)
        }
        Route::MessageStream => {
            allow(&["POST"])?;
            Request::SendStreamingMessage(send_params(body)?)
        }
        Route::Tasks => {
            allow(&["GET"])?;
            Request::ListTasks(a2a::ListTasksRequest {
                context_id: query.text("contextId"),
                status: query.state("status")?,
                page_size: query.int("pageSize")?,
                page_token: query.text("pageToken"),
                history_length: query.int("historyLength")?,
                status_timestamp_after: query.timestamp("statusTimestampAfter")?,
                include_artifacts: query.flag("includeArtifacts")?,
                tenant: None,
            })
        }
        Route::Task(id) => {
            allow(&["GET"])?;
            let history_length = query.int("historyLength")?;
            // 0.3 read `historyLength: 0` as "no limit" (A2A 0.3.0 §7.1.1).
            let history_length = history_length.filter(|length| !(v03 && *length == 0));
            Request::GetTask(a2a::GetTaskRequest { id, history_length, tenant: None })
        }
        Route::Cancel(id) => {
            allow(&["POST"])?;
            let mut body = body_json_or_empty(body)?;
            if let Some(map) = body.as_object_mut() {
                // The 0.3 CancelTaskRequest names the task (`tasks/{id}`); the path has it.
                if v03 {
                    map.remove("name");
                }
                map.insert("id".into(), Value::String(id));
            }
            Request::CancelTask(params::typed(body)?)
        }
        Route::Subscribe(id) => {
            allow(&["POST", "GET"])?;
            Request::SubscribeToTask {
                request: a2a::SubscribeToTaskRequest { id, tenant: None },
                after: None,
            }
        }
        Route::PushConfigs(task_id) => {
            if method.eq_ignore_ascii_case("GET") {
                Request::ListPushConfigs(a2a::ListTaskPushNotificationConfigsRequest {
                    task_id,
                    page_size: query.int("pageSize")?,
                    page_token: query.text("pageToken"),
                    tenant: None,
                })
            } else {
                allow(&["POST"])?;
                let body = body_json(body)?;
                let body = if v03 { v03::rest::push_config_to_v1(body) } else { body };
                let mut config = params::push_config(body)?;
                if !config.task_id.is_empty() && config.task_id != task_id {
                    return Err(A2aError::InvalidParams(format!(
                        "taskId {:?} in the body does not match {task_id:?} in the path",
                        config.task_id
                    )));
                }
                config.task_id = task_id;
                Request::CreatePushConfig { config, format: version.into() }
            }
        }
        Route::PushConfig { task_id, config_id } => {
            if method.eq_ignore_ascii_case("GET") {
                Request::GetPushConfig(a2a::GetTaskPushNotificationConfigRequest {
                    task_id,
                    id: config_id,
                    tenant: None,
                })
            } else {
                allow(&["DELETE"])?;
                Request::DeletePushConfig(a2a::DeleteTaskPushNotificationConfigRequest {
                    task_id,
                    id: config_id,
                    tenant: None,
                })
            }
        }
        Route::ExtendedCard | Route::Card => {
            allow(&["GET"])?;
            Request::GetExtendedAgentCard
        }
    })
}

/// The status and body of a reply in the shape of `version`: always 200, and `{}` for a deletion
/// (not 204: the SDKs' clients parse the body; 0.3's `google.protobuf.Empty` alike). A 1.0 reply is printed without
/// building a JSON value, cached task JSON as it is.
pub fn encode_reply_bytes(version: Version, reply: &Reply) -> (u16, Vec<u8>) {
    let out = match version {
        Version::V1_0 => {
            let mut out = Vec::with_capacity(super::jsonrpc::size_hint(reply));
            match reply {
                // Every other reply's body is the 1.0 JSON-RPC result.
                Reply::Deleted => out.extend_from_slice(b"{}"),
                _ => super::jsonrpc::write_reply_v1(&mut out, reply),
            }
            out
        }
        Version::V0_3 => reply_v03(reply).to_string().into_bytes(),
    };
    (200, out)
}

/// The HTTP status and body of an error: `google.rpc.Status` (A2A 1.0.1 §11.6), and for 0.3 also the
/// members the SDKs' 0.3 REST clients read ([`A2aError::rest_v03_body`]).
pub fn encode_error(version: Version, error: &A2aError) -> (u16, Value) {
    let body = match version {
        Version::V1_0 => error.rest_body(),
        Version::V0_3 => error.rest_v03_body(),
    };
    (error.http_status(), body)
}

/// The data of one SSE event of a REST stream: the bare StreamResponse (A2A 1.0.1 §11.7), 1.0 or 0.3 proto.
pub fn encode_stream_item(version: Version, item: &a2a::StreamResponse) -> Value {
    match version {
        Version::V1_0 => wire_json(item),
        Version::V0_3 => v03::rest::stream_item(item),
    }
}

fn reply_v03(reply: &Reply) -> Value {
    match reply {
        Reply::Send(response) => v03::rest::send_response(response),
        Reply::Task(task) => v03::rest::task(task),
        Reply::TaskView(view) => v03::rest::task(&view.to_task()),
        Reply::TaskPage(page) => v03::rest::task_list(&page.clone().into_response()),
        Reply::PushConfig(config) => v03::rest::push_config(config),
        Reply::PushConfigs(list) => v03::rest::push_configs(list),
        Reply::Deleted => json!({}),
        Reply::Card(card) => v03::rest::card(card),
    }
}

/// A known route, with its decoded path parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    MessageSend,
    MessageStream,
    Tasks,
    Task(String),
    Cancel(String),
    Subscribe(String),
    PushConfigs(String),
    PushConfig {
        task_id: String,
        config_id: String,
    },
    ExtendedCard,
    /// 0.3's extended card.
    Card,
}

impl Route {
    /// The one version that has the route, for the routes only one has: 0.3 has no task list
    /// and names the extended card `/card`, where 1.0 has `/extendedAgentCard`.
    fn only_in(&self) -> Option<Version> {
        match self {
            Route::Tasks | Route::ExtendedCard => Some(Version::V1_0),
            Route::Card => Some(Version::V0_3),
            Route::MessageSend
            | Route::MessageStream
            | Route::Task(_)
            | Route::Cancel(_)
            | Route::Subscribe(_)
            | Route::PushConfigs(_)
            | Route::PushConfig { .. } => None,
        }
    }
}

/// Matches a path to a route; `None` for anything unknown, including empty or undecodable ids.
fn route(path: &str) -> Option<Route> {
    let path = path.strip_prefix('/').unwrap_or(path);
    let path = path.strip_suffix('/').unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    match segments.as_slice() {
        ["message:send"] => Some(Route::MessageSend),
        ["message:stream"] => Some(Route::MessageStream),
        ["extendedAgentCard"] => Some(Route::ExtendedCard),
        ["card"] => Some(Route::Card),
        ["tasks"] => Some(Route::Tasks),
        ["tasks", last] => match last.rsplit_once(':') {
            Some((id, "cancel")) => Some(Route::Cancel(segment(id)?)),
            Some((id, "subscribe")) => Some(Route::Subscribe(segment(id)?)),
            Some(_) | None => Some(Route::Task(segment(last)?)),
        },
        ["tasks", task, "pushNotificationConfigs"] => Some(Route::PushConfigs(segment(task)?)),
        ["tasks", task, "pushNotificationConfigs", config] => {
            Some(Route::PushConfig { task_id: segment(task)?, config_id: segment(config)? })
        }
        _ => None,
    }
}

/// A percent-decoded, non-empty path segment.
fn segment(raw: &str) -> Option<String> {
    url::percent_decode(raw).filter(|decoded| !decoded.is_empty())
}

/// The body as normalised JSON; an empty body is a parse error.
fn body_json(body: &[u8]) -> Result<Value, A2aError> {
    if is_blank(body) {
        return Err(A2aError::Parse("the request body is empty".into()));
    }
    let mut value: Value =
        serde_json::from_slice(body).map_err(|error| A2aError::Parse(error.to_string()))?;
    if !value.is_object() {
        return Err(A2aError::InvalidParams("the request body must be a JSON object".into()));
    }
    params::normalize(&mut value);
    Ok(value)
}

/// [`body_json`], with an empty body read as `{}` (`:cancel`, whose body may be left out).
fn body_json_or_empty(body: &[u8]) -> Result<Value, A2aError> {
    if is_blank(body) { Ok(json!({})) } else { body_json(body) }
}

fn is_blank(body: &[u8]) -> bool {
    body.iter().all(u8::is_ascii_whitespace)
}

/// Decoded query parameters. Empty values count as absent; a repeated parameter takes its last
/// value.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(raw: &str) -> Self {
        Query(url::query_pairs(raw))
    }

    fn raw(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(key, value)| key == name && !value.is_empty())
            .map(|(_, value)| value.as_str())
    }

    fn text(&self, name: &str) -> Option<String> {
        self.raw(name).map(str::to_owned)
    }

    fn int(&self, name: &str) -> Result<Option<i32>, A2aError> {
        self.parsed(name, "a whole number", |raw| raw.trim().parse().ok())
    }

    fn flag(&self, name: &str) -> Result<Option<bool>, A2aError> {
        self.parsed(name, "true or false", |raw| match raw.trim().to_ascii_lowercase().as_str() {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        })
    }

    fn state(&self, name: &str) -> Result<Option<a2a::TaskState>, A2aError> {
        self.parsed(name, "a task state such as TASK_STATE_WORKING", |raw| {
            task_state_name(raw).and_then(|name| serde_json::from_value(json!(name)).ok())
        })
    }

    /// An RFC 3339 timestamp. An unescaped `+` in an offset arrives as a space, so a space is
    /// read back as `+`.
    fn timestamp(&self, name: &str) -> Result<Option<DateTime<Utc>>, A2aError> {
        self.parsed(name, "an RFC 3339 timestamp such as 2026-03-12T10:15:00Z", |raw| {
            let raw = raw.trim().replace(' ', "+");
            DateTime::parse_from_rfc3339(&raw).ok().map(|at| at.with_timezone(&Utc))
        })
    }

    fn parsed<T>(
        &self,
        name: &str,
        expected: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, A2aError> {
        let Some(raw) = self.raw(name) else { return Ok(None) };
        parse(raw).map(Some).ok_or_else(|| {
            A2aError::InvalidParams(format!(
                "query parameter {name}: expected {expected}, got {raw:?}"
            ))
        })
    }
}

#[cfg(test)]
mod tests;
