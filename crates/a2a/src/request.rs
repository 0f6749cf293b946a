//! The one internal model of requests and replies. Bindings (JSON-RPC, REST) and versions (1.0,
//! 0.3) decode into [`Request`] and encode from [`Reply`] / `a2a::StreamResponse`; handler code
//! never sees which binding or version a call came through.

use crate::push::PushFormat;

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
    SubscribeToTask(a2a::SubscribeToTaskRequest),
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
        matches!(self, Request::SendStreamingMessage(_) | Request::SubscribeToTask(_))
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

/// A non-streaming answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// SendMessage.
    Send(a2a::SendMessageResponse),
    /// GetTask, CancelTask.
    Task(a2a::Task),
    /// GetTask of a settled task: its cached JSON.
    TaskView(crate::task::cache::TaskView),
    /// ListTasks, with the cached JSON of settled tasks.
    TaskPage(crate::task::cache::TaskPage),
    /// Create/GetPushConfig.
    PushConfig(a2a::TaskPushNotificationConfig),
    /// ListPushConfigs.
    PushConfigs(a2a::ListTaskPushNotificationConfigsResponse),
    /// DeletePushConfig.
    Deleted,
    /// GetExtendedAgentCard.
    Card(Box<a2a::AgentCard>),
}
