//! The core's error type.

use std::path::PathBuf;

/// What can go wrong when opening, prompting or closing a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A run is active in this session; wait for it to settle or abort it.
    #[error("session {scope} is busy with a run")]
    Busy { scope: String },
    /// The scope is not usable as a session name.
    #[error(
        "invalid session scope {scope:?}: use 1-200 characters of A-Z a-z 0-9 . _ - not starting with a dot"
    )]
    InvalidScope { scope: String },
    /// Another session (in this or another process) has this scope open.
    #[error("session {scope} is already open elsewhere")]
    ScopeInUse { scope: String },
    /// The session was closed.
    #[error("session {scope} is closed")]
    Closed { scope: String },
    /// A file of the session could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The core's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
