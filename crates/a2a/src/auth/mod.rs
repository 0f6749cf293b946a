//! Who may call: the caller directory seam, the callers.json reader (keys plain or hashed, and
//! each caller's tier), and key extraction.
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

/// What a caller's session may do with the owner's workspace (callers.json `"tier"`). The
/// server carries it with the caller; the tools a session gets follow from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallerTier {
    /// Conversation only: no workspace tools (the A2A session tools stay).
    Chat,
    /// Read-only file tools inside the contained view, no bash.
    Read,
    /// Contained bash and file tools, no network. The default.
    #[default]
    Workspace,
}

impl CallerTier {
    /// Every tier, in order of what they allow.
    pub const ALL: [CallerTier; 3] = [CallerTier::Chat, CallerTier::Read, CallerTier::Workspace];

    /// The name used in callers.json.
    pub fn as_str(self) -> &'static str {
        match self {
            CallerTier::Chat => "chat",
            CallerTier::Read => "read",
            CallerTier::Workspace => "workspace",
        }
    }

    /// The tier named `name` as callers.json spells it (`chat`, `read`, `workspace`).
    pub fn parse(name: &str) -> Option<CallerTier> {
        CallerTier::ALL.into_iter().find(|tier| tier.as_str() == name)
    }
}

/// When a caller's new tasks wait for the owner's yes (callers.json `"approval"`,
/// docs/a2a.md, "Owner approval").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallerApproval {
    /// Never: every task starts at once. The default.
    #[default]
    Never,
    /// The caller's first task waits; once the owner approves one, the caller's later tasks
    /// start at once (remembered in the state folder).
    FirstContact,
    /// Every new task waits.
    EveryTask,
}

impl CallerApproval {
    pub const ALL: [CallerApproval; 3] =
        [CallerApproval::Never, CallerApproval::FirstContact, CallerApproval::EveryTask];

    /// The name used in callers.json.
    pub fn as_str(self) -> &'static str {
        match self {
            CallerApproval::Never => "never",
            CallerApproval::FirstContact => "first-contact",
            CallerApproval::EveryTask => "every-task",
        }
    }

    /// The mode named `name` as callers.json spells it.
    pub fn parse(name: &str) -> Option<CallerApproval> {
        CallerApproval::ALL.into_iter().find(|mode| mode.as_str() == name)
    }
}

/// What of a caller waits for the owner's yes: its new tasks (callers.json `"approval"`) and
/// calls of the tools it names (`"approveTools"`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApprovalPolicy {
    pub tasks: CallerApproval,
    /// Tool names whose every call waits for the owner (e.g. `bash`); empty: none.
    pub tools: Arc<[String]>,
}

impl ApprovalPolicy {
    /// Whether a call of tool `name` waits for the owner.
    pub fn tool_needs_approval(&self, name: &str) -> bool {
        self.tools.iter().any(|tool| tool == name)
    }
}

impl std::str::FromStr for CallerTier {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        CallerTier::parse(name)
            .ok_or_else(|| format!("unknown tier {name:?}: expected chat, read or workspace"))
    }
}

impl fmt::Display for CallerTier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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

/// The SHA-256 of a key (callers.json `"keyHash": "sha256:<64 hex>"`): the server can check a
/// presented key without holding it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyHash([u8; 32]);

impl KeyHash {
    /// The prefix of the text form.
    pub const PREFIX: &str = "sha256:";

    /// The hash of `key`.
    pub fn of(key: &str) -> KeyHash {
        use sha2::Digest;
        KeyHash(sha2::Sha256::digest(key.as_bytes()).into())
    }

    /// Parses `sha256:<64 hex digits>` (either case).
    pub fn parse(text: &str) -> Option<KeyHash> {
        let hex = text.strip_prefix(KeyHash::PREFIX)?.as_bytes();
        if hex.len() != 64 {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
            let digit = |c: u8| char::from(c).to_digit(16);
            *byte = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
        }
        Some(KeyHash(bytes))
    }

    /// Constant-time comparison.
    pub fn matches(&self, other: &KeyHash) -> bool {
        use subtle::ConstantTimeEq;
        self.0.ct_eq(&other.0).into()
    }

    /// `sha256:` and its 64 lower-case hex digits, as callers.json holds it.
    pub fn to_text(&self) -> String {
        let mut text = String::with_capacity(KeyHash::PREFIX.len() + 64);
        text.push_str(KeyHash::PREFIX);
        for byte in self.0 {
            text.push_str(&format!("{byte:02x}"));
        }
        text
    }
}

impl fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyHash([redacted])")
    }
}

/// How a callers.json entry holds its key: in plain text (`"key"`) or hashed (`"keyHash"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallerKey {
    /// The key itself: also a redaction value of the workspace's sessions.
    Plain(ApiKey),
    /// Its SHA-256: the server never holds the key.
    Hashed(KeyHash),
}

impl CallerKey {
    /// Whether `presented` is this key; `presented_hash` is its hash, computed at most once
    /// per request by the caller of this method (only hashed keys ask for it).
    pub fn matches(&self, presented: &str, presented_hash: &mut dyn FnMut() -> KeyHash) -> bool {
        match self {
            CallerKey::Plain(key) => key.matches(presented),
            CallerKey::Hashed(hash) => hash.matches(&presented_hash()),
        }
    }

    /// The key in plain text, when the entry holds it (for redaction only).
    pub fn plain(&self) -> Option<&ApiKey> {
        match self {
            CallerKey::Plain(key) => Some(key),
            CallerKey::Hashed(_) => None,
        }
    }

    /// For listings: [`ApiKey::masked`] for a plain key, `sha256:` and the hash's first 8 hex
    /// digits then `…` for a hashed one.
    pub fn masked(&self) -> String {
        match self {
            CallerKey::Plain(key) => key.masked(),
            CallerKey::Hashed(hash) => {
                let text = hash.to_text();
                let shown = KeyHash::PREFIX.len() + 8;
                format!("{}…", &text[..shown])
            }
        }
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    /// `[a-z0-9-]{1,40}`, unique in its callers.json.
    pub name: String,
    pub mode: CallerMode,
    /// What the caller's sessions may do with the workspace (callers.json `"tier"`).
    pub tier: CallerTier,
    /// What waits for the owner's approval (callers.json `"approval"`, `"approveTools"`).
    pub approval: ApprovalPolicy,
    /// What the caller may use (callers.json `"limits"`); no cap when absent.
    pub limits: crate::usage::Limits,
    pub workspace: Arc<A2aWorkspace>,
}

/// One entry of a callers.json.
#[derive(Debug, Clone, PartialEq)]
pub struct CallerEntry {
    pub name: String,
    /// `"key"` (plain) or `"keyHash"` (SHA-256): exactly one of them.
    pub key: CallerKey,
    pub mode: CallerMode,
    /// `"tier"`; [`CallerTier::Workspace`] when absent.
    pub tier: CallerTier,
    /// `"approval"` and `"approveTools"`; nothing waits when absent.
    pub approval: ApprovalPolicy,
    /// `"limits"`: `requestsPerMinute`, `tokensPerDay`, `usdPerDay`; no cap when absent.
    pub limits: crate::usage::Limits,
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

    /// Every entry of a workspace's callers.json (for redaction of keys and for listings),
    /// shared: a file that did not change gives the same `Arc` again.
    fn entries(&self, workspace: &A2aWorkspace) -> Arc<[CallerEntry]>;

    /// The caller named `name` of the workspace at `workspace`, as callers.json has it now
    /// (owner approvals start a caller's run without a request of its own). Blocking. The
    /// default finds none.
    fn caller(&self, _workspace: &std::path::Path, _name: &str) -> Option<Caller> {
        None
    }

    /// Every workspace the directory serves now (retention walks them). The default knows none.
    fn workspaces(&self) -> Vec<A2aWorkspace> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_debug_is_redacted() {
        let entry = CallerEntry {
            name: "a".into(),
            key: CallerKey::Plain(ApiKey::new("sekrit-key")),
            mode: CallerMode::Isolated,
            tier: CallerTier::Workspace,
            approval: Default::default(),
            limits: Default::default(),
            note: None,
        };
        assert_eq!(format!("{:?}", entry.key), "Plain([redacted])");
        assert!(!format!("{entry:?}").contains("sekrit"));
    }

    #[test]
    fn tier_names_parse_back_and_unknown_ones_do_not() {
        for tier in CallerTier::ALL {
            assert_eq!(CallerTier::parse(tier.as_str()), Some(tier));
        }
        assert_eq!(CallerTier::parse("admin"), None);
        assert_eq!(CallerTier::parse("Chat"), None);
        assert_eq!(CallerTier::default(), CallerTier::Workspace);
    }

    #[test]
    fn key_hash_parses_its_text_form_and_checks_keys() {
        let hash = KeyHash::of("abc");
        let text = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(hash.to_text(), text);
        assert_eq!(KeyHash::parse(text), Some(hash));
        assert_eq!(KeyHash::parse(&text.to_uppercase().replace("SHA256", "sha256")), Some(hash));
        for bad in
            ["", "sha256:", "ba7816bf", "md5:ba78", &text[..text.len() - 1], &format!("{text}0")]
        {
            assert_eq!(KeyHash::parse(bad), None, "{bad}");
        }
        let key = CallerKey::Hashed(hash);
        assert!(key.matches("abc", &mut || KeyHash::of("abc")));
        assert!(!key.matches("abd", &mut || KeyHash::of("abd")));
        assert_eq!(key.masked(), "sha256:ba7816bf…");
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
