//! Task files: `<workspace>/.volcanic/a2a/tasks/<taskId>.json`, one per task, and the
//! [`TaskStore`] that reads, writes and lists them for a caller.

use serde::{Deserialize, Serialize};

use crate::push::StoredPushConfig;
use events::EventRecord;

pub(crate) mod accepted;
pub(crate) mod cache;
pub mod error;
pub(crate) mod events;
pub(crate) mod id;
mod index;
pub(crate) mod json;
mod key;
pub(crate) mod path;
pub mod query;
pub(crate) mod read;
pub(crate) mod retain;
mod stamp;
pub(crate) mod state;
pub(crate) mod status;
pub mod store;
pub mod view;
mod watch;

pub use accepted::AcceptedMessage;
pub(crate) use accepted::{AcceptedMessages, Claim, Lookup, digest};
pub use error::{InvalidQuery, StoreError};
pub use query::apply_history_length;
pub use state::state_name;
pub use store::{TaskStore, TaskSummary};

/// What a task file holds: the SDK task shape plus our envelope fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskFile {
    #[serde(flatten)]
    pub task: a2a::Task,
    /// The name of the caller that owns the task.
    pub caller: String,
    /// Push configs registered for the task, each with its id set (A2A 1.0.1 §3.1.7).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub push_configs: Vec<StoredPushConfig>,
    /// Where the task's event stream stands, and its last run's last events (`events.rs`).
    #[serde(
        default = "EventRecord::legacy",
        rename = "streamEvents",
        skip_serializing_if = "EventRecord::is_legacy"
    )]
    pub events: EventRecord,
    /// The messages that created or continued the task within the retry window, so that a
    /// repeated send finds its task after a restart (docs/a2a.md, "Safe retries").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted: Vec<AcceptedMessage>,
}

#[cfg(test)]
mod tests;
