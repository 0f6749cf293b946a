//! The one internal model of requests and replies. Bindings (JSON-RPC, REST) and versions (1.0,
//! 0.3) decode into [`Request`] and encode from [`Reply`] / `a2a::StreamResponse`; service code
//! never sees which binding or version a call came through.

use crate::push::PushFormat;
use crate::task::events::EventId;

/// The protocol version of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1_0,
    V0_3,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1_0 => "1.0",
            Version::V0_3 => "0.3",
        }
    }
}

/// A protocol binding: how calls and answers travel over HTTP. The server answers on both (each
/// through its `Wire` at the edge); the client speaks the one its interface names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP (`JSONRPC` in cards).
    JsonRpc,
    /// HTTP+JSON, also called REST (`HTTP+JSON` in cards).
    Rest,
}

impl Binding {
    /// The short name: the CLI's `--binding` value and the request span's `binding` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::JsonRpc => "jsonrpc",
            Binding::Rest => "rest",
        }
    }

    /// A card's `protocolBinding` / 0.3 `transport`, in any case.
    pub fn parse(raw: &str) -> Option<Binding> {
        match raw.trim().to_ascii_uppercase().as_str() {
            "JSONRPC" | "JSON-RPC" => Some(Binding::JsonRpc),
            "HTTP+JSON" | "REST" | "HTTP_JSON" => Some(Binding::Rest),
            _ => None,
        }
    }
}

/// A push config registered through a version gets that version's webhook payloads.
impl From<Version> for PushFormat {
    fn from(version: Version) -> Self {
        match version {
            Version::V1_0 => PushFormat::V1_0,
            Version::V0_3 => PushFormat::V0_3,
        }
    }
}

/// A decoded call. Version differences are already normalised: a 0.3 `historyLength: 0` arrives
/// as `None`, a missing 0.3 `blocking` as `returnImmediately: false`, 0.3 push configs in the
/// 1.0 flat shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    SendMessage(SendParams),
    SendStreamingMessage(SendParams),
    GetTask(a2a::GetTaskRequest),
    ListTasks(a2a::ListTasksRequest),
    CancelTask(a2a::CancelTaskRequest),
    /// `after`: the position of the last event the client got (`Last-Event-ID`), to resume
    /// after it.
    SubscribeToTask {
        request: a2a::SubscribeToTaskRequest,
        after: Option<EventId>,
    },
    /// `format` is the version the config came through: its webhook gets that version's payload.
    CreatePushConfig {
        config: a2a::TaskPushNotificationConfig,
        format: PushFormat,
    },
    /// An empty `id` means "the task's first config" (0.3 `get` without a config id).
    GetPushConfig(a2a::GetTaskPushNotificationConfigRequest),
    ListPushConfigs(a2a::ListTaskPushNotificationConfigsRequest),
    DeletePushConfig(a2a::DeleteTaskPushNotificationConfigRequest),
    GetExtendedAgentCard,
}

impl Request {
    /// Whether the answer is an SSE stream.
    pub fn is_streaming(&self) -> bool {
        matches!(self, Request::SendStreamingMessage(_) | Request::SubscribeToTask { .. })
    }

    /// The operation's 1.0 method name, whatever binding or version named it (for logs).
    pub fn method(&self) -> &'static str {
        match self {
            Request::SendMessage(_) => "SendMessage",
            Request::SendStreamingMessage(_) => "SendStreamingMessage",
            Request::GetTask(_) => "GetTask",
            Request::ListTasks(_) => "ListTasks",
            Request::CancelTask(_) => "CancelTask",
            Request::SubscribeToTask { .. } => "SubscribeToTask",
            Request::CreatePushConfig { .. } => "CreateTaskPushNotificationConfig",
            Request::GetPushConfig(_) => "GetTaskPushNotificationConfig",
            Request::ListPushConfigs(_) => "ListTaskPushNotificationConfigs",
            Request::DeletePushConfig(_) => "DeleteTaskPushNotificationConfig",
            Request::GetExtendedAgentCard => "GetExtendedAgentCard",
        }
    }

    /// The task the request names, if any (a new task's id is only known once it is made).
    pub fn task_id(&self) -> Option<&str> {
        let id = match self {
            Request::SendMessage(params) | Request::SendStreamingMessage(params) => {
                params.request.message.task_id.as_deref()
            }
            Request::GetTask(req) => Some(req.id.as_str()),
            Request::CancelTask(req) => Some(req.id.as_str()),
            Request::SubscribeToTask { request, .. } => Some(request.id.as_str()),
            Request::CreatePushConfig { config, .. } => Some(config.task_id.as_str()),
            Request::GetPushConfig(req) => Some(req.task_id.as_str()),
            Request::ListPushConfigs(req) => Some(req.task_id.as_str()),
            Request::DeletePushConfig(req) => Some(req.task_id.as_str()),
            Request::ListTasks(_) | Request::GetExtendedAgentCard => None,
        };
        id.filter(|id| !id.is_empty())
    }

    /// The context the request names, if any.
    pub fn context_id(&self) -> Option<&str> {
        let id = match self {
            Request::SendMessage(params) | Request::SendStreamingMessage(params) => {
                params.request.message.context_id.as_deref()
            }
            Request::ListTasks(req) => req.context_id.as_deref(),
            Request::GetTask(_)
            | Request::CancelTask(_)
            | Request::SubscribeToTask { .. }
            | Request::CreatePushConfig { .. }
            | Request::GetPushConfig(_)
            | Request::ListPushConfigs(_)
            | Request::DeletePushConfig(_)
            | Request::GetExtendedAgentCard => None,
        };
        id.filter(|id| !id.is_empty())
    }
}

/// SendMessage / SendStreamingMessage parameters, with the shape in which a push config given
/// inline must later be delivered (the version the message came through).
#[derive(Debug, Clone, PartialEq)]
pub struct SendParams {
    pub request: a2a::SendMessageRequest,
    pub push_format: crate::push::PushFormat,
}

impl SendParams {
    /// Parameters of a 1.0 call.
    pub fn v1(request: a2a::SendMessageRequest) -> Self {
        SendParams { request, push_format: crate::push::PushFormat::V1_0 }
    }
}

/// What a call of a caller that activated the task-generation extension asks besides the 1.0
/// request (docs/a2a.md, "Task generations"); the service gets `None` for every other call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generations {
    /// GetTask's `currentGeneration`: answer once the task's generation is above it (or when
    /// the wait's bound is reached).
    pub current: Option<u64>,
    /// A send's `configuration.ifGenerationMatch`: continue the task only at this generation.
    pub if_match: Option<u64>,
}

/// A non-streaming answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// SendMessage.
    Send(a2a::SendMessageResponse),
    /// GetTask, CancelTask.
    Task(a2a::Task),
    /// GetTask of a settled task: its cached JSON.
    TaskView(crate::task::view::TaskView),
    /// ListTasks, with the cached JSON of settled tasks.
    TaskPage(crate::task::view::TaskPage),
    /// Create/GetPushConfig.
    PushConfig(a2a::TaskPushNotificationConfig),
    /// ListPushConfigs.
    PushConfigs(a2a::ListTaskPushNotificationConfigsResponse),
    /// DeletePushConfig.
    Deleted,
    /// GetExtendedAgentCard.
    Card(Box<a2a::AgentCard>),
}
