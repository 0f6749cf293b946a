//! The one place where failures become wire errors: every [`A2aError`] knows its JSON-RPC code,
//! its HTTP status, its `google.rpc` status name and its ErrorInfo reason (A2A 1.0.1 §5.4, §9.5,
//! §11.6). Bindings call these methods; they never pick codes themselves.
//!
//! The operations fail with [`Error`], which says what happened rather than how the wire says it;
//! `A2aError::from` is its one translation.
//!
//! Fair-share refusals (docs/a2a.md, "Fair share") are not A2A errors: they are HTTP 429 with `Retry-After` on
//! both bindings (JSON-RPC too, unlike every other JSON-RPC error), and on JSON-RPC they carry
//! [`FAIR_SHARE_CODE`].

use serde_json::{Value, json};

use crate::auth::AuthFailure;
use crate::task::{InvalidQuery, StoreError};

/// The JSON-RPC code of a fair-share refusal (too many streams, requests or connections).
///
/// JSON-RPC leaves -32000..-32099 to the implementation. A2A numbers its errors upward from
/// -32001 (-32009 in 1.0.1, A2A 1.0.1 §5.4); -32029 echoes HTTP 429 and sits far enough past
/// them that a later A2A error is unlikely to take it.
pub const FAIR_SHARE_CODE: i64 = -32029;

/// Seconds a refused client is asked to wait (`Retry-After`): in-flight requests end within
/// moments, and a retry costs us little, so a short wait is the useful hint.
const RETRY_AFTER_SECS: u64 = 1;

/// Why an operation failed, before it is told to a caller. The texts are the caller's: each
/// becomes the message of the wire error [`A2aError::from`] picks.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The context already has a task starting or running: the session pool refuses a second
    /// claim, and so do the operations that must hold the context (cancel, push configs).
    #[error("context busy, retry when the current task ends")]
    ContextBusy,
    /// The caller has its maximum of sessions open and every one is busy.
    #[error(
        "too many open conversations for this caller (limit {limit}, all busy), retry when a task ends"
    )]
    CallerSessionLimit { limit: usize },
    /// The server has its maximum of sessions open and every one is busy.
    #[error(
        "too many open conversations on this server (limit {limit}, all busy), retry when a task ends"
    )]
    SessionLimit { limit: usize },
    /// The workspace holds its maximum of task files (`A2A__MaxTasks`).
    #[error(
        "the assistant holds its maximum of {max} tasks; continue an existing task or ask its owner to remove old ones"
    )]
    TaskLimit { max: usize },
    /// A message continues a task that has ended.
    #[error(
        "task {task_id} is already {state}; send a new message without taskId to start a new task"
    )]
    NotContinuable { task_id: String, state: &'static str },
    /// A send reuses a `messageId` the caller had accepted, within the retry window, for a
    /// different message (other parts, `taskId` or `contextId`).
    #[error(
        "message.messageId {message_id:?} was already used for a different message (its parts, taskId or contextId differ); send a new message with a new messageId"
    )]
    MessageIdReused { message_id: String },
    /// A repeated send waited too long for the first send of the same message to create its
    /// task.
    #[error("message {message_id:?} is still being accepted, retry in a moment")]
    StillAccepting { message_id: String },
    /// A message to a task that waits for the owner's approval.
    #[error(
        "task {task_id} is waiting for the owner's approval; follow it with GetTask, SubscribeToTask or push, and send to it once it asks for input"
    )]
    AwaitingApproval { task_id: String },
    /// The caller has its maximum of tasks waiting for the owner's approval.
    #[error(
        "{max} of your tasks are already waiting for the owner's approval; retry once the owner has decided"
    )]
    TooManyAwaitingApproval { max: usize },
    /// The messages waiting for the owner's approval, of all callers, would pass
    /// `A2A__MaxPendingApprovalBytes`.
    #[error(
        "the owner has too much waiting for approval (at most {max} bytes of messages); retry once the owner has decided, or send a smaller message"
    )]
    ApprovalQueueFull { max: u64 },
    /// A subscription to a task that has ended.
    #[error("task {task_id} is already {state}")]
    Ended { task_id: String, state: &'static str },
    /// The task store could not answer: an unknown task, a file it could not read or write
    /// (logged where it happened, never sent), a bad query.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A task query's parameter is out of its range (`historyLength`).
    #[error(transparent)]
    Query(#[from] InvalidQuery),
    /// The core failed (a session could not be opened or prompted). Logged where it happened,
    /// never sent.
    #[error(transparent)]
    Core(#[from] volcanic_core::Error),
    /// A refusal the protocol itself names (bad parameters, an unknown task), or a failure
    /// already logged where it happened.
    #[error(transparent)]
    Wire(#[from] A2aError),
}

impl From<Error> for A2aError {
    fn from(err: Error) -> Self {
        match err {
            Error::ContextBusy
            | Error::CallerSessionLimit { .. }
            | Error::SessionLimit { .. }
            | Error::TaskLimit { .. }
            | Error::NotContinuable { .. }
            | Error::Ended { .. }
            | Error::AwaitingApproval { .. }
            | Error::TooManyAwaitingApproval { .. }
            | Error::ApprovalQueueFull { .. }
            | Error::StillAccepting { .. } => A2aError::UnsupportedOperation(err.to_string()),
            Error::MessageIdReused { .. } => A2aError::InvalidParams(err.to_string()),
            Error::Store(err) => A2aError::from(err),
            Error::Query(InvalidQuery(text)) => A2aError::InvalidParams(text),
            // Logged where it happened.
            Error::Core(_) => A2aError::Internal,
            Error::Wire(err) => err,
        }
    }
}

impl From<StoreError> for A2aError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { task_id } => A2aError::TaskNotFound { task_id },
            // The detail names files of the owner's machine: it went to the log only.
            StoreError::Io { .. } | StoreError::Broken => A2aError::Internal,
            StoreError::Query(InvalidQuery(text)) => A2aError::InvalidParams(text),
        }
    }
}

/// An error answered to a caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum A2aError {
    /// -32001: the task does not exist or is not the caller's (the two are indistinguishable).
    #[error("Task not found")]
    TaskNotFound { task_id: String },
    /// -32002: the task is terminal.
    #[error("Task cannot be canceled: it is already {state}")]
    TaskNotCancelable { task_id: String, state: String },
    /// -32004, with a reason for the caller.
    #[error("{0}")]
    UnsupportedOperation(String),
    /// -32005, HTTP 400: a part's media type the agent does not take (ContentTypeNotSupportedError,
    /// A2A 1.0.1 §3.3.2, §5.4). Nothing builds it yet, as every part type is accepted (a refused
    /// request body is [`A2aError::UnsupportedMediaType`]); kept because the spec's error table
    /// defines it with this mapping, for the first input mode the server refuses.
    #[error("{0}")]
    ContentTypeNotSupported(String),
    /// -32009.
    #[error("A2A version {requested} is not supported; supported versions: 1.0, 0.3")]
    VersionNotSupported { requested: String },
    /// -32010 (HTTP 409, ABORTED): a send's `ifGenerationMatch` is not the task's generation
    /// (the task-generation extension, A2A 1.1 draft §3.2.7).
    #[error(
        "Task generation mismatch: expected {expected} but current generation is {current}; get the task and decide again"
    )]
    TaskGenerationMismatch { task_id: String, expected: u64, current: u64 },
    /// -32700.
    #[error("Invalid JSON payload: {0}")]
    Parse(String),
    /// -32600.
    #[error("Request payload validation error: {0}")]
    InvalidRequest(String),
    /// -32601.
    #[error("Method not found: {0}")]
    MethodNotFound(String),
    /// -32602, with what is wrong.
    #[error("Invalid parameters: {0}")]
    InvalidParams(String),
    /// -32603. The detail is logged, never sent.
    #[error("Internal error")]
    Internal,
    /// The request body is over the cap (HTTP 413 on REST, -32600 on JSON-RPC).
    #[error("Request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// The request declares a body type other than JSON: ContentTypeNotSupported (-32005 on
    /// JSON-RPC, reason `CONTENT_TYPE_NOT_SUPPORTED`) answered with HTTP 415 on both bindings,
    /// as the conformance kit and spec 1.0.0 expect of a refused request body.
    #[error("Content-Type {0:?} is not supported; send application/json or application/a2a+json")]
    UnsupportedMediaType(String),
    /// The request body did not arrive in time (HTTP 408 on both bindings, -32600 on JSON-RPC).
    #[error("Request body was not received within {secs} seconds")]
    BodyTimeout { secs: u64 },
    /// The caller already has `limit` streams open (HTTP 429, [`FAIR_SHARE_CODE`]).
    #[error("Too many open streams for this caller (limit {limit}); retry when one has ended")]
    TooManyStreams { limit: usize },
    /// The caller already has `limit` requests in progress (HTTP 429, [`FAIR_SHARE_CODE`]).
    #[error(
        "Too many requests in progress for this caller (limit {limit}); retry when one has finished"
    )]
    TooManyRequests { limit: usize },
    /// The peer address already has `limit` connections that have not presented a valid key;
    /// answered on the connection before any request is read (HTTP 429), then closed.
    #[error(
        "Too many unauthenticated connections from this address (limit {limit}); reuse a connection or present an API key"
    )]
    TooManyConnections { limit: usize },
    /// The caller already has `limit` connections open (HTTP 429, [`FAIR_SHARE_CODE`]); the
    /// connection that asked is closed after the answer.
    #[error(
        "Too many open connections for this caller (limit {limit}); reuse an open connection or close idle ones"
    )]
    TooManyCallerConnections { limit: usize },
    /// The caller's `requestsPerMinute` (or the workspace's over all callers) is used up
    /// (HTTP 429, [`FAIR_SHARE_CODE`], `Retry-After` the wait until one more is allowed).
    #[error("{}", rate_limited_text(*per_minute, *workspace, *retry_after_secs))]
    RateLimited { per_minute: u32, workspace: bool, retry_after_secs: u64 },
    /// A daily token or spending cap is reached: the reason says which, `Retry-After` is the
    /// wait until the day ends (HTTP 429, [`FAIR_SHARE_CODE`]).
    #[error("{reason}")]
    DailyLimitReached { reason: String, retry_after_secs: u64 },
}

/// The body of the 401 a request without exactly one caller gets: the REST `google.rpc.Status`
/// shape on every binding, since the binding's own envelope cannot be trusted to be read yet.
pub fn unauthenticated_body(failure: &AuthFailure) -> Value {
    json!({"error": {"code": 401, "status": "UNAUTHENTICATED", "message": failure.to_string()}})
}

fn rate_limited_text(per_minute: u32, workspace: bool, wait: u64) -> String {
    if workspace {
        format!(
            "Too many requests: this assistant's callers may make {per_minute} per minute together; retry in {wait} s"
        )
    } else {
        format!(
            "Too many requests: this caller may make {per_minute} per minute; retry in {wait} s"
        )
    }
}

impl A2aError {
    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            A2aError::TaskNotFound { .. } => -32001,
            A2aError::TaskNotCancelable { .. } => -32002,
            A2aError::UnsupportedOperation(_) => -32004,
            A2aError::ContentTypeNotSupported(_) | A2aError::UnsupportedMediaType(_) => -32005,
            A2aError::VersionNotSupported { .. } => -32009,
            A2aError::TaskGenerationMismatch { .. } => -32010,
            A2aError::Parse(_) => -32700,
            A2aError::InvalidRequest(_)
            | A2aError::PayloadTooLarge { .. }
            | A2aError::BodyTimeout { .. } => -32600,
            A2aError::MethodNotFound(_) => -32601,
            A2aError::InvalidParams(_) => -32602,
            A2aError::Internal => -32603,
            A2aError::TooManyStreams { .. }
            | A2aError::TooManyRequests { .. }
            | A2aError::TooManyConnections { .. }
            | A2aError::TooManyCallerConnections { .. }
            | A2aError::RateLimited { .. }
            | A2aError::DailyLimitReached { .. } => FAIR_SHARE_CODE,
        }
    }

    /// The HTTP status on the REST binding.
    pub fn http_status(&self) -> u16 {
        match self {
            A2aError::TaskNotFound { .. } | A2aError::MethodNotFound(_) => 404,
            A2aError::Internal => 500,
            A2aError::PayloadTooLarge { .. } => 413,
            A2aError::BodyTimeout { .. } => 408,
            A2aError::UnsupportedMediaType(_) => 415,
            A2aError::TaskGenerationMismatch { .. } => 409,
            A2aError::TooManyStreams { .. }
            | A2aError::TooManyRequests { .. }
            | A2aError::TooManyConnections { .. }
            | A2aError::TooManyCallerConnections { .. }
            | A2aError::RateLimited { .. }
            | A2aError::DailyLimitReached { .. } => 429,
            A2aError::TaskNotCancelable { .. }
            | A2aError::UnsupportedOperation(_)
            | A2aError::ContentTypeNotSupported(_)
            | A2aError::VersionNotSupported { .. }
            | A2aError::Parse(_)
            | A2aError::InvalidRequest(_)
            | A2aError::InvalidParams(_) => 400,
        }
    }

    /// The `google.rpc` status name that goes with the HTTP status.
    pub fn status_name(&self) -> &'static str {
        match self {
            A2aError::TaskNotFound { .. } | A2aError::MethodNotFound(_) => "NOT_FOUND",
            A2aError::Internal => "INTERNAL",
            A2aError::PayloadTooLarge { .. }
            | A2aError::TooManyStreams { .. }
            | A2aError::TooManyRequests { .. }
            | A2aError::TooManyConnections { .. }
            | A2aError::TooManyCallerConnections { .. }
            | A2aError::RateLimited { .. }
            | A2aError::DailyLimitReached { .. } => "RESOURCE_EXHAUSTED",
            A2aError::BodyTimeout { .. } => "DEADLINE_EXCEEDED",
            A2aError::TaskGenerationMismatch { .. } => "ABORTED",
            A2aError::TaskNotCancelable { .. }
            | A2aError::UnsupportedOperation(_)
            | A2aError::VersionNotSupported { .. } => "FAILED_PRECONDITION",
            A2aError::ContentTypeNotSupported(_)
            | A2aError::UnsupportedMediaType(_)
            | A2aError::Parse(_)
            | A2aError::InvalidRequest(_)
            | A2aError::InvalidParams(_) => "INVALID_ARGUMENT",
        }
    }

    /// The ErrorInfo reason.
    pub fn reason(&self) -> &'static str {
        match self {
            A2aError::TaskNotFound { .. } => "TASK_NOT_FOUND",
            A2aError::TaskNotCancelable { .. } => "TASK_NOT_CANCELABLE",
            A2aError::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
            A2aError::ContentTypeNotSupported(_) | A2aError::UnsupportedMediaType(_) => {
                "CONTENT_TYPE_NOT_SUPPORTED"
            }
            A2aError::VersionNotSupported { .. } => "VERSION_NOT_SUPPORTED",
            A2aError::TaskGenerationMismatch { .. } => "TASK_GENERATION_MISMATCH",
            A2aError::Parse(_) | A2aError::InvalidRequest(_) => "INVALID_REQUEST",
            A2aError::MethodNotFound(_) => "METHOD_NOT_FOUND",
            A2aError::InvalidParams(_) => "INVALID_PARAMS",
            A2aError::Internal => "INTERNAL_ERROR",
            A2aError::PayloadTooLarge { .. } => "PAYLOAD_TOO_LARGE",
            A2aError::BodyTimeout { .. } => "REQUEST_TIMEOUT",
            A2aError::TooManyStreams { .. } => "TOO_MANY_STREAMS",
            A2aError::TooManyRequests { .. } => "TOO_MANY_REQUESTS",
            A2aError::TooManyConnections { .. } => "TOO_MANY_CONNECTIONS",
            A2aError::TooManyCallerConnections { .. } => "TOO_MANY_CALLER_CONNECTIONS",
            A2aError::RateLimited { .. } => "RATE_LIMITED",
            A2aError::DailyLimitReached { .. } => "DAILY_LIMIT_REACHED",
        }
    }

    /// The `Retry-After` seconds of a refusal that goes out as HTTP 429 (on both bindings);
    /// `None` for every other error.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            A2aError::TooManyStreams { .. }
            | A2aError::TooManyRequests { .. }
            | A2aError::TooManyConnections { .. }
            | A2aError::TooManyCallerConnections { .. } => Some(RETRY_AFTER_SECS),
            A2aError::RateLimited { retry_after_secs, .. }
            | A2aError::DailyLimitReached { retry_after_secs, .. } => Some(*retry_after_secs),
            A2aError::TaskNotFound { .. }
            | A2aError::TaskNotCancelable { .. }
            | A2aError::UnsupportedOperation(_)
            | A2aError::ContentTypeNotSupported(_)
            | A2aError::VersionNotSupported { .. }
            | A2aError::TaskGenerationMismatch { .. }
            | A2aError::Parse(_)
            | A2aError::InvalidRequest(_)
            | A2aError::MethodNotFound(_)
            | A2aError::InvalidParams(_)
            | A2aError::Internal
            | A2aError::PayloadTooLarge { .. }
            | A2aError::BodyTimeout { .. }
            | A2aError::UnsupportedMediaType(_) => None,
        }
    }

    /// The `google.rpc.ErrorInfo` detail (also the JSON-RPC `data` array's element).
    pub fn error_info(&self) -> Value {
        let mut metadata = serde_json::Map::new();
        match self {
            A2aError::TaskNotFound { task_id } | A2aError::TaskNotCancelable { task_id, .. } => {
                metadata.insert("taskId".into(), Value::String(task_id.clone()));
            }
            A2aError::VersionNotSupported { .. } => {
                metadata.insert("supportedVersions".into(), Value::String("1.0,0.3".into()));
            }
            A2aError::TaskGenerationMismatch { task_id, expected, current } => {
                metadata.insert("taskId".into(), Value::String(task_id.clone()));
                metadata.insert("expectedGeneration".into(), Value::String(expected.to_string()));
                metadata.insert("currentGeneration".into(), Value::String(current.to_string()));
            }
            A2aError::UnsupportedOperation(_)
            | A2aError::ContentTypeNotSupported(_)
            | A2aError::Parse(_)
            | A2aError::InvalidRequest(_)
            | A2aError::MethodNotFound(_)
            | A2aError::InvalidParams(_)
            | A2aError::Internal
            | A2aError::PayloadTooLarge { .. }
            | A2aError::BodyTimeout { .. }
            | A2aError::UnsupportedMediaType(_) => {}
            A2aError::TooManyStreams { limit }
            | A2aError::TooManyRequests { limit }
            | A2aError::TooManyConnections { limit }
            | A2aError::TooManyCallerConnections { limit } => {
                metadata.insert("limit".into(), Value::String(limit.to_string()));
            }
            A2aError::RateLimited { per_minute, workspace, retry_after_secs } => {
                metadata.insert("requestsPerMinute".into(), Value::String(per_minute.to_string()));
                let scope = if *workspace { "workspace" } else { "caller" };
                metadata.insert("scope".into(), Value::String(scope.into()));
                metadata.insert(
                    "retryAfterSeconds".into(),
                    Value::String(retry_after_secs.to_string()),
                );
            }
            A2aError::DailyLimitReached { retry_after_secs, .. } => {
                metadata.insert(
                    "retryAfterSeconds".into(),
                    Value::String(retry_after_secs.to_string()),
                );
            }
        }
        let mut info = json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason(),
            "domain": "a2a-protocol.org",
        });
        if !metadata.is_empty() {
            info["metadata"] = Value::Object(metadata);
        }
        info
    }

    /// The JSON-RPC `error` object.
    pub fn jsonrpc_error(&self) -> Value {
        json!({"code": self.code(), "message": self.to_string(), "data": [self.error_info()]})
    }

    /// The REST error body (`google.rpc.Status` JSON form).
    pub fn rest_body(&self) -> Value {
        json!({"error": {
            "code": self.http_status(),
            "status": self.status_name(),
            "message": self.to_string(),
            "details": [self.error_info()],
        }})
    }

    /// The 0.3 REST error body. 0.3 defined none (A2A 0.3.0 §3.2.3), and the SDKs' 0.3 REST
    /// clients each read their own: the JS client a JSON-RPC-style `code` and `message` at the
    /// top, the Python client `type` (its error class name) and `message`. So the body is the
    /// 1.0 `google.rpc.Status` plus those three members; each client finds its error typed.
    pub fn rest_v03_body(&self) -> Value {
        let mut body = self.rest_body();
        body["code"] = json!(self.code());
        body["message"] = json!(self.to_string());
        if let Some(name) = self.sdk_error_name() {
            body["type"] = json!(name);
        }
        body
    }

    /// The name the SDKs give the error's class (`TaskNotFoundError`), where there is one.
    fn sdk_error_name(&self) -> Option<&'static str> {
        match self {
            A2aError::TaskNotFound { .. } => Some("TaskNotFoundError"),
            A2aError::TaskNotCancelable { .. } => Some("TaskNotCancelableError"),
            A2aError::UnsupportedOperation(_) => Some("UnsupportedOperationError"),
            A2aError::ContentTypeNotSupported(_) | A2aError::UnsupportedMediaType(_) => {
                Some("ContentTypeNotSupportedError")
            }
            A2aError::VersionNotSupported { .. } => Some("VersionNotSupportedError"),
            A2aError::TaskGenerationMismatch { .. } => Some("TaskGenerationMismatchError"),
            A2aError::Parse(_) => Some("JSONParseError"),
            A2aError::InvalidRequest(_)
            | A2aError::PayloadTooLarge { .. }
            | A2aError::BodyTimeout { .. } => Some("InvalidRequestError"),
            A2aError::MethodNotFound(_) => Some("MethodNotFoundError"),
            A2aError::InvalidParams(_) => Some("InvalidParamsError"),
            A2aError::Internal => Some("InternalError"),
            A2aError::TooManyStreams { .. }
            | A2aError::TooManyRequests { .. }
            | A2aError::TooManyConnections { .. }
            | A2aError::TooManyCallerConnections { .. }
            | A2aError::RateLimited { .. }
            | A2aError::DailyLimitReached { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_domain_error_has_one_wire_error() {
        let busy = "context busy, retry when the current task ends";
        let cases = [
            (Error::ContextBusy, A2aError::UnsupportedOperation(busy.into())),
            (
                Error::TaskLimit { max: 2 },
                A2aError::UnsupportedOperation("the assistant holds its maximum of 2 tasks; continue an existing task or ask its owner to remove old ones".into()),
            ),
            (
                Error::Ended { task_id: "t".into(), state: "completed" },
                A2aError::UnsupportedOperation("task t is already completed".into()),
            ),
            (
                Error::Core(volcanic_core::Error::Busy { scope: "s".into() }),
                A2aError::Internal,
            ),
            (
                Error::Store(StoreError::Io {
                    path: "/ws/.volcanic/a2a/tasks/t.json".into(),
                    source: std::io::Error::other("disk full"),
                }),
                A2aError::Internal,
            ),
            (Error::Store(StoreError::Broken), A2aError::Internal),
            (
                Error::Store(StoreError::NotFound { task_id: "t".into() }),
                A2aError::TaskNotFound { task_id: "t".into() },
            ),
            (
                Error::Store(StoreError::Query(InvalidQuery("pageSize x".into()))),
                A2aError::InvalidParams("pageSize x".into()),
            ),
            (Error::Query(InvalidQuery("h".into())), A2aError::InvalidParams("h".into())),
            (Error::Wire(A2aError::InvalidParams("x".into())), A2aError::InvalidParams("x".into())),
        ];
        for (error, wire) in cases {
            assert_eq!(A2aError::from(error), wire);
        }
    }

    #[test]
    fn every_error_maps_to_code_status_and_reason() {
        let cases = [
            (A2aError::TaskNotFound { task_id: "t".into() }, -32001, 404, "TASK_NOT_FOUND"),
            (
                A2aError::TaskNotCancelable { task_id: "t".into(), state: "completed".into() },
                -32002,
                400,
                "TASK_NOT_CANCELABLE",
            ),
            (A2aError::UnsupportedOperation("x".into()), -32004, 400, "UNSUPPORTED_OPERATION"),
            (
                A2aError::ContentTypeNotSupported("x".into()),
                -32005,
                400,
                "CONTENT_TYPE_NOT_SUPPORTED",
            ),
            (
                A2aError::VersionNotSupported { requested: "2.0".into() },
                -32009,
                400,
                "VERSION_NOT_SUPPORTED",
            ),
            (A2aError::Parse("x".into()), -32700, 400, "INVALID_REQUEST"),
            (A2aError::InvalidRequest("x".into()), -32600, 400, "INVALID_REQUEST"),
            (A2aError::MethodNotFound("x".into()), -32601, 404, "METHOD_NOT_FOUND"),
            (A2aError::InvalidParams("x".into()), -32602, 400, "INVALID_PARAMS"),
            (A2aError::Internal, -32603, 500, "INTERNAL_ERROR"),
            (A2aError::PayloadTooLarge { limit: 1 }, -32600, 413, "PAYLOAD_TOO_LARGE"),
            (A2aError::BodyTimeout { secs: 1 }, -32600, 408, "REQUEST_TIMEOUT"),
            (A2aError::UnsupportedMediaType("x".into()), -32005, 415, "CONTENT_TYPE_NOT_SUPPORTED"),
            (A2aError::TooManyStreams { limit: 1 }, -32029, 429, "TOO_MANY_STREAMS"),
            (A2aError::TooManyRequests { limit: 1 }, -32029, 429, "TOO_MANY_REQUESTS"),
            (A2aError::TooManyConnections { limit: 1 }, -32029, 429, "TOO_MANY_CONNECTIONS"),
            (
                A2aError::TooManyCallerConnections { limit: 1 },
                -32029,
                429,
                "TOO_MANY_CALLER_CONNECTIONS",
            ),
        ];
        for (error, code, status, reason) in cases {
            assert_eq!(
                (error.code(), error.http_status(), error.reason()),
                (code, status, reason),
                "{error:?}"
            );
        }
    }

    #[test]
    fn task_not_found_bodies_carry_error_info() {
        let error = A2aError::TaskNotFound { task_id: "t-404".into() };
        assert_eq!(
            error.jsonrpc_error(),
            json!({"code": -32001, "message": "Task not found", "data": [{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND",
                "domain": "a2a-protocol.org", "metadata": {"taskId": "t-404"}}]})
        );
        assert_eq!(error.rest_body()["error"]["status"], "NOT_FOUND");
        assert_eq!(error.rest_body()["error"]["code"], 404);
    }

    #[test]
    fn rest_v03_bodies_add_what_the_sdk_clients_read() {
        let cases = [
            (A2aError::TaskNotFound { task_id: "t".into() }, -32001, Some("TaskNotFoundError")),
            (
                A2aError::TaskNotCancelable { task_id: "t".into(), state: "completed".into() },
                -32002,
                Some("TaskNotCancelableError"),
            ),
            (A2aError::MethodNotFound("GET /tasks".into()), -32601, Some("MethodNotFoundError")),
            (A2aError::Parse("x".into()), -32700, Some("JSONParseError")),
            (A2aError::TooManyStreams { limit: 1 }, FAIR_SHARE_CODE, None),
        ];
        for (error, code, name) in cases {
            let body = error.rest_v03_body();
            let mut expected = error.rest_body();
            expected["code"] = json!(code);
            expected["message"] = json!(error.to_string());
            if let Some(name) = name {
                expected["type"] = json!(name);
            }
            assert_eq!(body, expected, "{error:?}");
        }
    }

    #[test]
    fn fair_share_refusals_are_429_with_retry_after_and_the_limit() {
        let error = A2aError::TooManyStreams { limit: 4 };
        assert_eq!(error.retry_after_secs(), Some(1));
        assert_eq!(A2aError::Internal.retry_after_secs(), None);
        assert_eq!(
            error.rest_body(),
            json!({"error": {
                "code": 429,
                "status": "RESOURCE_EXHAUSTED",
                "message": "Too many open streams for this caller (limit 4); retry when one has ended",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "TOO_MANY_STREAMS", "domain": "a2a-protocol.org",
                    "metadata": {"limit": "4"}}],
            }})
        );
    }
}
