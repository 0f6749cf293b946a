//! Who may call: the caller directory seam, the callers.json reader, and key extraction.
//!
//! Invariant: caller keys never leave this module except as redaction values; they are never
//! logged, never in errors, and `Debug` prints them as `[redacted]`.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

mod authenticate;
pub mod callers;

pub use authenticate::{AuthFailure, authenticate, presented_key};
pub use callers::WorkspaceCallerDirectory;

/// An assistant's workspace as the A2A server sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct A2aWorkspace {
    /// The workspace folder.
    pub path: PathBuf,
    /// Prefix of the session scopes of this workspace's callers (`telegram-42`, `serve`).
    pub scope_prefix: String,
    /// Who owns the workspace (a Telegram chat id, or a name); used in logs and warnings.
    pub owner_id: String,
}

/// How a caller's sessions relate to the owner. Only isolated exists in v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerMode {
    /// A separate conversation in the owner's workspace.
    Isolated,
}

impl CallerMode {
    /// The name used in callers.json.
    pub fn as_str(self) -> &'static str {
        match self {
            CallerMode::Isolated => "isolated",
        }
    }
}

/// A secret key. Compared in constant time; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself, for redaction and masking only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Constant-time comparison (only the length can leak).
    pub fn matches(&self, candidate: &str) -> bool {
        use subtle::ConstantTimeEq;
        self.0.as_bytes().ct_eq(candidate.as_bytes()).into()
    }

    /// `…last4`, for listings. A key shorter than 12 characters shows no tail at all (`…`):
    /// its last four would give away too much of it, or all of it.
    pub fn masked(&self) -> String {
        const TAIL: usize = 4;
        const MIN_HIDDEN: usize = 8;
        let chars: Vec<char> = self.0.chars().collect();
        if chars.len() < TAIL + MIN_HIDDEN {
            return "…".to_owned();
        }
        let tail: String = chars[chars.len() - TAIL..].iter().collect();
        format!("…{tail}")
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `[a-z0-9-]{1,40}`, unique in its callers.json.
    pub name: String,
    pub mode: CallerMode,
    pub workspace: Arc<A2aWorkspace>,
}

/// One entry of a callers.json.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerEntry {
    pub name: String,
    pub key: ApiKey,
    pub mode: CallerMode,
    pub note: Option<String>,
}

/// Where callers come from. Implementations read their files on every call (cheaply).
pub trait CallerDirectory: Send + Sync {
    /// Every caller whose key is `key` (more than one = ambiguous, refused). Blocking: it may
    /// read files; async code calls it on the blocking pool (see [`authenticate`]).
    fn find(&self, key: &str) -> Vec<Caller>;

    /// [`CallerDirectory::find`] when it can answer without reading a file (a `stat` is fine:
    /// it never blocks on what the file is), so an async worker may call it; `None` when a file
    /// must be read. The default always says so.
    fn find_cached(&self, _key: &str) -> Option<Vec<Caller>> {
        None
    }

    /// Every entry of a workspace's callers.json (for redaction of keys and for listings).
    fn entries(&self, workspace: &A2aWorkspace) -> Vec<CallerEntry>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_debug_is_redacted() {
        let entry = CallerEntry {
            name: "a".into(),
            key: ApiKey::new("sekrit-key"),
            mode: CallerMode::Isolated,
            note: None,
        };
        assert_eq!(format!("{:?}", entry.key), "[redacted]");
        assert!(!format!("{entry:?}").contains("sekrit"));
    }

    #[test]
    fn masked_shows_the_last_four_only_of_long_keys() {
        assert_eq!(ApiKey::new("k_0123456789abcdef").masked(), "…cdef");
        assert_eq!(ApiKey::new("abcdefghijkl").masked(), "…ijkl");
        // Shorter keys would show half or all of themselves.
        assert_eq!(ApiKey::new("abcdefghijk").masked(), "…");
        assert_eq!(ApiKey::new("abcd").masked(), "…");
        assert_eq!(ApiKey::new("ab").masked(), "…");
        // Characters, not bytes.
        assert_eq!(ApiKey::new("ключ-очень-длинный").masked(), "…нный");
    }
}
