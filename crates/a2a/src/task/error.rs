//! What the task store fails with, in the store's words: a caller's task that is not there, a
//! file that could not be read or written, the store's own fault, a query it cannot answer.
//! `crate::error` says what each becomes on the wire; nothing here knows.

use std::io;
use std::path::PathBuf;

/// Why the task store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The caller has no task with this id: it is missing, another caller's, not readable as a
    /// task, or the id is not a safe file name. A caller cannot tell these apart (A2A
    /// specification §13.1, "Data Access and Authorization Scoping"), and none is logged.
    #[error("task {task_id} not found")]
    NotFound { task_id: String },
    /// A task file could not be read, written or made durable. Logged where it happened.
    #[error("task file {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// The store's own fault: a write of an id that is not a safe file name, a task that does
    /// not serialize, work the blocking pool lost. Logged where it happened.
    #[error("the task store failed")]
    Broken,
    /// A query the store cannot answer.
    #[error(transparent)]
    Query(#[from] InvalidQuery),
}

/// A task query's parameter out of its range (a negative `historyLength`, a `pageSize` out of
/// range, a `pageToken` this server did not issue); the text names it and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidQuery(pub String);
