//! `callers.json`: who may call an assistant, read from
//! `<workspace>/.volcanic/a2a/callers.json`, and the [`WorkspaceCallerDirectory`] built on it.
//!
//! The file is the truth: an owner's edit applies to the next request. Parsed files are cached by
//! path and re-validated on every read by (mtime, size) of an `lstat`; a file whose mtime is
//! within [`SETTLE`] of the cached read is parsed again, so a same-tick edit of equal size is not
//! missed. The `lstat` never opens the file, so it cannot block; it may run on an async worker
//! ([`CallersCache::current`]). The read goes through [`volcanic_core::safe_file`] and is
//! blocking: a regular file of at most [`CONFIG_FILE_CAP`] bytes, not a symbolic link, opened
//! without blocking; anything else is treated as an empty file with a warning, and cached by its
//! stamp like any other, so restoring a regular file is seen on the next request.
//!
//! Invariant: no log line of this module contains a key. Warnings name the file and, for
//! entries, their index or (valid) name, never the `key` field nor an echo of the file's text.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tracing::warn;
use volcanic_core::safe_file::{self, CONFIG_FILE_CAP};

use super::{
    A2aWorkspace, ApiKey, ApprovalPolicy, Caller, CallerApproval, CallerDirectory, CallerEntry,
    CallerKey, CallerMode, CallerTier, KeyHash,
};

/// How long after a file's mtime a cached parse is still re-checked by content. Covers
/// filesystems whose timestamps are coarse (FAT: 2 s, some network filesystems: 1 s).
pub const SETTLE: Duration = Duration::from_secs(2);

/// The callers file of a workspace: `<workspace>/.volcanic/a2a/callers.json`.
pub fn callers_path(workspace: &Path) -> PathBuf {
    // Built in one allocation: every request authenticates through this path.
    const PARTS: [&str; 3] = [".volcanic", "a2a", "callers.json"];
    let extra: usize = PARTS.iter().map(|part| part.len() + 1).sum();
    let mut path = PathBuf::with_capacity(workspace.as_os_str().len() + extra);
    path.push(workspace);
    PARTS.iter().for_each(|part| path.push(part));
    path
}

/// Plain keys shorter than this many characters get a warning when the file is read.
pub const WEAK_KEY_CHARS: usize = 16;

/// Whether `name` is a valid caller name: `[a-z0-9-]{1,40}`.
pub fn is_valid_caller_name(name: &str) -> bool {
    (1..=40).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Why a callers.json as a whole gives no callers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallersFileError {
    /// Not JSON; only the position, never the text (it holds keys).
    #[error("malformed JSON at line {line} column {column}")]
    Malformed { line: usize, column: usize },
    /// JSON, but not an array of entries.
    #[error("not a JSON array")]
    NotAnArray,
}

/// An entry of a callers.json that is left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedEntry {
    /// Its position in the array, from 0.
    pub index: usize,
    /// Its name, when it has a valid one.
    pub name: Option<String>,
    /// Why, as a phrase after "the entry": "has an unknown tier ...". Never holds a key; a
    /// value it echoes is one word that looks like a tier or mode name, never free text.
    pub reason: String,
}

/// A callers.json read for the owner ([`read_callers`]): what the server serves and what it
/// leaves out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CallersFile {
    /// The entries the server serves, in the file's order.
    pub entries: Vec<CallerEntry>,
    /// The entries it leaves out, in the file's order.
    pub skipped: Vec<SkippedEntry>,
}

/// Reads the text of a callers.json entry by entry, saying what is wrong with each entry left
/// out; the server's view of the same text is [`parse_callers`].
///
/// # Errors
/// The text is not JSON or not an array: no entry at all is served.
pub fn read_callers(text: &str) -> Result<CallersFile, CallersFileError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|err| CallersFileError::Malformed { line: err.line(), column: err.column() })?;
    let Value::Array(items) = value else { return Err(CallersFileError::NotAnArray) };
    let mut names = HashSet::new();
    let mut file = CallersFile { entries: Vec::with_capacity(items.len()), skipped: Vec::new() };
    for (index, item) in items.iter().enumerate() {
        match parse_entry(item) {
            Ok(entry) if !names.insert(entry.name.clone()) => file.skipped.push(SkippedEntry {
                index,
                name: Some(entry.name),
                reason: "repeats the name of an earlier entry".into(),
            }),
            Ok(entry) => file.entries.push(entry),
            Err((name, reason)) => file.skipped.push(SkippedEntry { index, name, reason }),
        }
    }
    Ok(file)
}

/// Parses the text of a callers.json. Never fails: a malformed file is empty, a bad entry is
/// skipped, each with a warning naming `file` (used for logging only).
pub fn parse_callers(file: &Path, text: &str) -> Vec<CallerEntry> {
    let read = match read_callers(text) {
        Ok(read) => read,
        Err(err) => {
            warn!(file = %file.display(), "callers.json is {}, treating it as empty", match err {
                CallersFileError::Malformed { line, column } => {
                    format!("malformed (line {line}, column {column})")
                }
                CallersFileError::NotAnArray => "not a JSON array".to_string(),
            });
            return Vec::new();
        }
    };
    for skipped in &read.skipped {
        warn!(
            file = %file.display(),
            index = skipped.index,
            name = skipped.name.as_deref().unwrap_or(""),
            "callers.json entry {}, skipping it",
            skipped.reason
        );
    }
    warn_weak_keys(file, &read.entries);
    read.entries
}

/// Warns, naming `file` and each entry, about plain keys shorter than [`WEAK_KEY_CHARS`].
pub fn warn_weak_keys(file: &Path, entries: &[CallerEntry]) {
    for entry in entries {
        if let CallerKey::Plain(key) = &entry.key
            && key.expose().chars().count() < WEAK_KEY_CHARS
        {
            warn!(
                file = %file.display(),
                name = %entry.name,
                "callers.json entry has a key shorter than {WEAK_KEY_CHARS} characters: easy to guess, and redacting it can hide ordinary text; mint one with `volcanic callers add`"
            );
        }
    }
}

/// A tool name as tools spell theirs: `[a-z0-9_]{1,64}`.
fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// A field whose value is one word of a fixed set (`tier`, `approval`): the default when it is
/// absent or null, else what `parse` makes of it. `Err` carries what a message may echo of a
/// value that is none of the set: the word, quoted, when it looks like one, never free text.
fn word_field<T: Default>(
    fields: &serde_json::Map<String, Value>,
    key: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(value) => value.as_str().and_then(&parse).ok_or_else(|| shown_word(value)),
    }
}

/// A value as a message may echo it: `"word"` when it looks like a tier or mode name, else
/// nothing (a key may have been put in the wrong field).
fn shown_word(value: &Value) -> String {
    value
        .as_str()
        .filter(|w| w.len() <= 20 && is_valid_caller_name(w))
        .map(|w| format!(" {w:?}"))
        .unwrap_or_default()
}

/// One entry, or its name (when valid) and why it is left out.
fn parse_entry(item: &Value) -> Result<CallerEntry, (Option<String>, String)> {
    let Value::Object(fields) = item else {
        return Err((None, "is not an object".into()));
    };
    let name = match fields.get("name") {
        Some(Value::String(name)) if is_valid_caller_name(name) => name.clone(),
        Some(_) | None => {
            return Err((None, "has no valid name ([a-z0-9-]{1,40})".into()));
        }
    };
    let skip = |reason: String| (Some(name.clone()), reason);
    let key = match (fields.get("key"), fields.get("keyHash")) {
        (Some(Value::String(key)), None) if !key.is_empty() => {
            CallerKey::Plain(ApiKey::new(key.clone()))
        }
        (Some(_), Some(_)) => {
            return Err(skip("has both key and keyHash (give exactly one)".into()));
        }
        (None, Some(hash)) => match hash.as_str().and_then(KeyHash::parse) {
            Some(hash) => CallerKey::Hashed(hash),
            None => {
                return Err(skip("has a keyHash that is not sha256:<64 hex digits>".into()));
            }
        },
        (Some(_), None) | (None, None) => {
            return Err(skip("has no key (a non-empty string) nor keyHash".into()));
        }
    };
    let mode = match fields.get("mode") {
        None | Some(Value::Null) => CallerMode::Isolated,
        Some(Value::String(mode)) if mode == CallerMode::Isolated.as_str() => CallerMode::Isolated,
        Some(other) => {
            let shown = shown_word(other);
            return Err(skip(format!("has an unknown mode{shown} (only isolated exists)")));
        }
    };
    let tier = word_field(fields, "tier", CallerTier::parse)
        .map_err(|shown| skip(format!("has an unknown tier{shown} (chat, read or workspace)")))?;
    let approval = word_field(fields, "approval", CallerApproval::parse).map_err(|shown| {
        skip(format!("has an unknown approval{shown} (never, first-contact or every-task)"))
    })?;
    let tools: Vec<String> = match fields.get("approveTools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items))
            if items.iter().all(|t| t.as_str().is_some_and(is_valid_tool_name)) =>
        {
            items.iter().filter_map(Value::as_str).map(str::to_string).collect()
        }
        Some(_) => {
            return Err(skip("has an approveTools that is not a list of tool names".into()));
        }
    };
    let approval = ApprovalPolicy { tasks: approval, tools: tools.into() };
    let limits = match fields.get("limits") {
        None | Some(Value::Null) => crate::usage::Limits::default(),
        Some(value) => crate::usage::Limits::parse(value)
            .map_err(|problem| skip(format!("has invalid limits ({problem})")))?,
    };
    let note = fields.get("note").and_then(Value::as_str).map(str::to_string);
    Ok(CallerEntry { name, key, mode, tier, approval, limits, note })
}

/// Parsed callers files by path, re-validated by (mtime, size) on every read.
#[derive(Debug, Default)]
pub struct CallersCache {
    /// By the path's bytes: `Path`'s own hash walks its components, several times the cost of
    /// hashing the bytes, and every use of a session's redactor looks its workspace up here.
    files: Mutex<HashMap<OsString, CachedFile>>,
}

#[derive(Debug)]
struct CachedFile {
    mtime: SystemTime,
    size: u64,
    /// When the cached content was read (taken before the stat that produced `mtime`).
    read_at: SystemTime,
    /// The text the entries were parsed from: a re-read of the same text (within [`SETTLE`]
    /// of an edit) keeps the entries, so their warnings come once per change, not per request,
    /// and a redactor built from them is not rebuilt.
    text: Vec<u8>,
    entries: Arc<[CallerEntry]>,
}

impl CachedFile {
    fn is_current(&self, mtime: SystemTime, size: u64) -> bool {
        self.mtime == mtime
            && self.size == size
            && self.read_at.duration_since(self.mtime).is_ok_and(|age| age >= SETTLE)
    }
}

impl CallersCache {
    /// An empty cache.
    pub fn new() -> Self {
        CallersCache::default()
    }

    /// The entries of the callers file at `path` when the cache holds them and they are
    /// current: one `lstat`, no read (it cannot block on what the path is). `None`: the file
    /// must be read, with [`CallersCache::entries`].
    pub fn current(&self, path: &Path) -> Option<Arc<[CallerEntry]>> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        let mtime = meta.modified().ok()?;
        let files = self.lock();
        let cached = files.get(path.as_os_str())?;
        cached.is_current(mtime, meta.len()).then(|| cached.entries.clone())
    }

    /// The entries of the callers file at `path`: empty when it is missing, unreadable,
    /// malformed, not a regular file, a symbolic link or larger than [`CONFIG_FILE_CAP`] (with a
    /// warning for all but the first). Blocking: it may stat and read the file.
    pub fn entries(&self, path: &Path) -> Arc<[CallerEntry]> {
        let read_at = SystemTime::now();
        // `lstat`: the stamp of what the read below opens (it does not follow a final link).
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(err) => {
                if err.kind() != io::ErrorKind::NotFound {
                    warn!(
                        file = %path.display(),
                        error = %err,
                        "callers.json cannot be read, treating it as empty"
                    );
                }
                self.lock().remove(path.as_os_str());
                return Arc::from(Vec::new());
            }
        };
        let size = meta.len();
        let mtime = meta.modified().ok();
        if let Some(mtime) = mtime
            && let Some(cached) = self.lock().get(path.as_os_str())
            && cached.is_current(mtime, size)
        {
            return cached.entries.clone();
        }
        // `None`: missing since the stat (silently), refused (`safe_file` warned) or unreadable.
        let bytes = match safe_file::read_config(path, CONFIG_FILE_CAP) {
            Ok(bytes) => bytes,
            Err(err) => {
                warn!(
                    file = %path.display(),
                    error = %err,
                    "callers.json cannot be read, treating it as empty"
                );
                None
            }
        };
        let unchanged = bytes.as_ref().and_then(|bytes| {
            self.lock()
                .get(path.as_os_str())
                .filter(|c| &c.text == bytes)
                .map(|c| c.entries.clone())
        });
        let entries: Arc<[CallerEntry]> = match (&bytes, unchanged) {
            (_, Some(entries)) => entries,
            (None, None) => Arc::from(Vec::new()),
            (Some(bytes), None) => match std::str::from_utf8(bytes) {
                Ok(text) => Arc::from(parse_callers(path, text)),
                Err(_) => {
                    warn!(
                        file = %path.display(),
                        "callers.json is not UTF-8, treating it as empty"
                    );
                    Arc::from(Vec::new())
                }
            },
        };
        // Without an mtime nothing can be validated later, so nothing is cached.
        if let Some(mtime) = mtime {
            let text = bytes.unwrap_or_default();
            let cached = CachedFile { mtime, size, read_at, text, entries: entries.clone() };
            self.lock().insert(path.as_os_str().to_owned(), cached);
        }
        entries
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<OsString, CachedFile>> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The workspaces a [`WorkspaceCallerDirectory`] serves, asked on every lookup.
pub type WorkspaceList = Arc<dyn Fn() -> Vec<A2aWorkspace> + Send + Sync>;

/// A [`CallerDirectory`] over the callers.json files of a set of workspaces (the Telegram host:
/// its allowed chats; the sample host: one fixed workspace).
pub struct WorkspaceCallerDirectory {
    workspaces: WorkspaceList,
    cache: CallersCache,
}

impl WorkspaceCallerDirectory {
    /// A directory over the workspaces `workspaces` returns; it is called on every `find`.
    pub fn new(workspaces: WorkspaceList) -> Self {
        WorkspaceCallerDirectory { workspaces, cache: CallersCache::new() }
    }

    /// A directory over one fixed workspace.
    pub fn fixed(workspace: A2aWorkspace) -> Self {
        WorkspaceCallerDirectory::new(Arc::new(move || vec![workspace.clone()]))
    }
}

impl std::fmt::Debug for WorkspaceCallerDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceCallerDirectory").finish_non_exhaustive()
    }
}

impl WorkspaceCallerDirectory {
    /// The callers of every workspace whose key is `key`, with `entries_of` giving a callers
    /// file's entries (`None`: not without a read, and then the whole answer is `None`).
    fn find_with(
        &self,
        key: &str,
        entries_of: impl Fn(&Path) -> Option<Arc<[CallerEntry]>>,
    ) -> Option<Vec<Caller>> {
        let mut found = Vec::new();
        // Hashed once per request, and only when some entry holds a hash.
        let mut hash = None;
        let mut presented_hash = || *hash.get_or_insert_with(|| KeyHash::of(key));
        for workspace in (self.workspaces)() {
            let entries = entries_of(&callers_path(&workspace.path))?;
            let workspace = Arc::new(workspace);
            for entry in entries.iter() {
                if entry.key.matches(key, &mut presented_hash) {
                    found.push(Caller {
                        name: entry.name.clone(),
                        mode: entry.mode,
                        tier: entry.tier,
                        approval: entry.approval.clone(),
                        limits: entry.limits,
                        workspace: workspace.clone(),
                    });
                }
            }
        }
        Some(found)
    }
}

impl CallerDirectory for WorkspaceCallerDirectory {
    /// Compares `key` with every entry of every workspace (no early exit), so that a key held by
    /// several callers is seen as ambiguous. Blocking: reads changed callers files.
    fn find(&self, key: &str) -> Vec<Caller> {
        self.find_with(key, |path| Some(self.cache.entries(path))).unwrap_or_default()
    }

    /// [`CallerDirectory::find`] from the cache alone: one `lstat` per workspace.
    fn find_cached(&self, key: &str) -> Option<Vec<Caller>> {
        self.find_with(key, |path| self.cache.current(path))
    }

    fn entries(&self, workspace: &A2aWorkspace) -> Arc<[CallerEntry]> {
        self.cache.entries(&callers_path(&workspace.path))
    }

    fn workspaces(&self) -> Vec<A2aWorkspace> {
        (self.workspaces)()
    }

    fn caller(&self, path: &Path, name: &str) -> Option<Caller> {
        let workspace = (self.workspaces)().into_iter().find(|w| w.path == path)?;
        let entries = self.cache.entries(&callers_path(&workspace.path));
        let entry = entries.iter().find(|entry| entry.name == name)?;
        Some(Caller {
            name: entry.name.clone(),
            mode: entry.mode,
            tier: entry.tier,
            approval: entry.approval.clone(),
            limits: entry.limits,
            workspace: Arc::new(workspace),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_logs::capture_logs;

    fn entry(name: &str, key: &str, note: Option<&str>) -> CallerEntry {
        CallerEntry {
            name: name.into(),
            key: CallerKey::Plain(ApiKey::new(key)),
            mode: CallerMode::Isolated,
            tier: CallerTier::Workspace,
            approval: Default::default(),
            limits: Default::default(),
            note: note.map(str::to_string),
        }
    }

    fn workspace(path: &Path, owner: &str) -> A2aWorkspace {
        A2aWorkspace {
            path: path.to_path_buf(),
            scope_prefix: format!("telegram-{owner}"),
            owner_id: owner.into(),
        }
    }

    fn write_callers(workspace: &Path, text: &str) {
        let path = callers_path(workspace);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn callers_path_is_the_workspace_a2a_callers_file() {
        for workspace in ["/srv/ws", "/srv/ws/", "relative/ws", ""] {
            let workspace = Path::new(workspace);
            let expected = workspace.join(".volcanic").join("a2a").join("callers.json");
            assert_eq!(callers_path(workspace), expected);
        }
    }

    #[test]
    fn parse_callers_table_keeps_valid_entries_only() {
        let cases: [(&str, &str, Vec<CallerEntry>); 12] = [
            (
                "valid with defaults",
                r#"[{"name":"travel-bot","key":"k1"},
                    {"name":"b2","key":"k2","mode":"isolated","note":"Alice"}]"#,
                vec![entry("travel-bot", "k1", None), entry("b2", "k2", Some("Alice"))],
            ),
            ("empty array", "[]", vec![]),
            (
                "bad names",
                r#"[{"name":"Travel","key":"a"},{"name":"a_b","key":"b"},{"name":"","key":"c"},
                    {"name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","key":"d"},
                    {"key":"e"},{"name":7,"key":"f"},{"name":"ok","key":"g"}]"#,
                vec![entry("ok", "g", None)],
            ),
            (
                "forty characters is fine",
                r#"[{"name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","key":"k"}]"#,
                vec![entry("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "k", None)],
            ),
            (
                "later duplicates skipped",
                r#"[{"name":"a","key":"k1"},{"name":"a","key":"k2"},{"name":"b","key":"k3"}]"#,
                vec![entry("a", "k1", None), entry("b", "k3", None)],
            ),
            (
                "missing or empty key",
                r#"[{"name":"a"},{"name":"b","key":""},{"name":"c","key":5},{"name":"d","key":"k"}]"#,
                vec![entry("d", "k", None)],
            ),
            (
                "unknown mode skipped, null mode is the default",
                r#"[{"name":"a","key":"k1","mode":"owner"},{"name":"b","key":"k2","mode":null},
                    {"name":"c","key":"k3","mode":3}]"#,
                vec![entry("b", "k2", None)],
            ),
            (
                "extra fields ignored",
                r#"[{"name":"a","key":"k","color":"red","nested":{"x":1},"note":"n"}]"#,
                vec![entry("a", "k", Some("n"))],
            ),
            (
                "non-object entries skipped",
                r#"[1,"a",null,{"name":"a","key":"k"}]"#,
                vec![entry("a", "k", None)],
            ),
            ("malformed JSON", r#"[{"name":"a","key":"k"}"#, vec![]),
            ("object instead of array", r#"{"name":"a","key":"k"}"#, vec![]),
            ("empty file", "", vec![]),
        ];
        for (label, text, expected) in cases {
            assert_eq!(parse_callers(Path::new("callers.json"), text), expected, "{label}");
        }
    }

    #[test]
    fn parse_callers_reads_tiers_and_skips_unknown_ones() {
        let text = r#"[{"name":"a","key":"k1","tier":"chat"},{"name":"b","key":"k2","tier":"read"},
            {"name":"c","key":"k3","tier":"workspace"},{"name":"d","key":"k4","tier":null},
            {"name":"e","key":"k5","tier":"root"},{"name":"f","key":"k6","tier":2}]"#;
        let with_tier =
            |name: &str, key: &str, tier| CallerEntry { tier, ..entry(name, key, None) };
        assert_eq!(
            parse_callers(Path::new("callers.json"), text),
            vec![
                with_tier("a", "k1", CallerTier::Chat),
                with_tier("b", "k2", CallerTier::Read),
                with_tier("c", "k3", CallerTier::Workspace),
                with_tier("d", "k4", CallerTier::Workspace),
            ]
        );
    }

    #[test]
    fn parse_callers_reads_approvals_and_skips_unknown_ones() {
        let text = r#"[{"name":"a","key":"k1","approval":"first-contact","approveTools":["bash","write"]},
            {"name":"b","key":"k2","approval":"every-task"},
            {"name":"c","key":"k3","approval":"sometimes"},
            {"name":"d","key":"k4","approveTools":"bash"},
            {"name":"e","key":"k5","approveTools":["rm -rf"]}]"#;
        let with = |name: &str, key: &str, tasks, tools: &[&str]| CallerEntry {
            approval: ApprovalPolicy {
                tasks,
                tools: tools.iter().map(|t| t.to_string()).collect::<Vec<_>>().into(),
            },
            ..entry(name, key, None)
        };
        assert_eq!(
            parse_callers(Path::new("callers.json"), text),
            vec![
                with("a", "k1", CallerApproval::FirstContact, &["bash", "write"]),
                with("b", "k2", CallerApproval::EveryTask, &[]),
            ]
        );
    }

    #[test]
    fn parse_callers_reads_limits_and_skips_an_entry_whose_limits_are_wrong() {
        let text = r#"[{"name":"a","key":"k1","limits":{"requestsPerMinute":30,"tokensPerDay":5000}},
            {"name":"b","key":"k2","limits":null},
            {"name":"c","key":"k3","limits":{"tokenPerDay":5000}},
            {"name":"d","key":"k4","limits":{"usdPerDay":-1}},
            {"name":"e","key":"k5","limits":"lots"}]"#;
        let limits = crate::usage::Limits {
            requests_per_minute: std::num::NonZeroU32::new(30),
            tokens_per_day: Some(5000),
            usd_per_day: None,
        };
        assert_eq!(
            parse_callers(Path::new("callers.json"), text),
            vec![CallerEntry { limits, ..entry("a", "k1", None) }, entry("b", "k2", None)]
        );
    }

    #[test]
    fn parse_callers_takes_exactly_one_of_key_and_key_hash() {
        let hash = KeyHash::of("the-key").to_text();
        let text = format!(
            r#"[{{"name":"a","keyHash":"{hash}"}},{{"name":"b","key":"k","keyHash":"{hash}"}},
                {{"name":"c","keyHash":"sha256:abc"}},{{"name":"d","keyHash":"{}"}},
                {{"name":"e"}}]"#,
            hash.replace("sha256", "sha1")
        );
        let logs = capture_logs(|| {
            assert_eq!(
                parse_callers(Path::new("callers.json"), &text),
                vec![CallerEntry {
                    key: CallerKey::Hashed(KeyHash::of("the-key")),
                    ..entry("a", "unused", None)
                }]
            );
        });
        assert!(logs.contains("has both key and keyHash"), "{logs}");
        assert!(logs.contains("not sha256:<64 hex digits>"), "{logs}");
    }

    #[test]
    fn parse_callers_warns_about_short_plain_keys_by_name_only() {
        let logs = capture_logs(|| {
            parse_callers(
                Path::new("callers.json"),
                r#"[{"name":"weak","key":"sekrit-9"},{"name":"strong","key":"0123456789abcdef"}]"#,
            );
        });
        assert!(logs.contains("shorter than 16 characters"), "{logs}");
        assert!(logs.contains("weak"), "{logs}");
        assert!(!logs.contains("strong"), "{logs}");
        assert!(!logs.contains("sekrit-9"), "{logs}");
    }

    #[test]
    fn directory_finds_a_hashed_key_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let hash = KeyHash::of("0123456789abcdef0123456789abcdef").to_text();
        write_callers(
            dir.path(),
            &format!(
                r#"[{{"name":"h","keyHash":"{hash}"}},{{"name":"p","key":"plain-key-1234567"}}]"#
            ),
        );
        let directory = WorkspaceCallerDirectory::fixed(workspace(dir.path(), "7"));
        let names = |key: &str| directory.find(key).into_iter().map(|c| c.name).collect::<Vec<_>>();
        assert_eq!(names("0123456789abcdef0123456789abcdef"), vec!["h".to_string()]);
        assert_eq!(names("plain-key-1234567"), vec!["p".to_string()]);
        assert_eq!(names("0123456789abcdef0123456789abcdeF"), Vec::<String>::new());
        assert_eq!(names(&hash), Vec::<String>::new());
    }

    #[test]
    fn parse_callers_malformed_file_warns_with_file_name_and_never_the_key() {
        let logs = capture_logs(|| {
            parse_callers(Path::new("/ws/callers.json"), r#"[{"name":"a","key":"sekrit-1"#);
            parse_callers(
                Path::new("/ws/callers.json"),
                r#"[{"name":"a","key":"sekrit-2","mode":"sekrit-3"},
                    {"name":"sekrit-4","key":"x"},{"name":"sekrit-4","key":"sekrit-5"},
                    {"name":"Sekrit-6","key":"sekrit-7"},{"name":"b","key":["sekrit-8"]}]"#,
            );
        });
        assert!(logs.contains("callers.json is malformed"), "{logs}");
        assert!(logs.contains("/ws/callers.json"), "{logs}");
        for n in [1, 2, 5, 7, 8] {
            assert!(!logs.contains(&format!("sekrit-{n}")), "key {n} leaked: {logs}");
        }
    }

    #[test]
    fn callers_cache_same_size_rewrite_is_seen_immediately() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CallersCache::new();
        let path = callers_path(dir.path());
        write_callers(dir.path(), r#"[{"name":"aaa","key":"key-1"}]"#);
        assert_eq!(cache.entries(&path).to_vec(), vec![entry("aaa", "key-1", None)]);
        write_callers(dir.path(), r#"[{"name":"bbb","key":"key-2"}]"#);
        assert_eq!(cache.entries(&path).to_vec(), vec![entry("bbb", "key-2", None)]);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(cache.entries(&path).to_vec(), vec![]);
    }

    #[test]
    fn callers_cache_settled_file_is_served_from_cache() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CallersCache::new();
        let path = callers_path(dir.path());
        write_callers(dir.path(), r#"[{"name":"aaa","key":"key-1"}]"#);
        let old = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(old).unwrap();
        let first = cache.entries(&path);
        let second = cache.entries(&path);
        assert!(Arc::ptr_eq(&first, &second));
        // A change of size (or mtime) is always seen.
        write_callers(dir.path(), r#"[{"name":"aaaa","key":"key-1"}]"#);
        assert_eq!(cache.entries(&path).to_vec(), vec![entry("aaaa", "key-1", None)]);
    }

    #[test]
    fn callers_cache_planted_file_is_empty_with_a_warning_and_a_restored_one_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CallersCache::new();
        let path = callers_path(dir.path());
        let good = r#"[{"name":"aaa","key":"sekrit-1"}]"#;
        write_callers(dir.path(), good);
        assert_eq!(cache.entries(&path).to_vec(), vec![entry("aaa", "sekrit-1", None)]);
        let mut seen = Vec::new();
        let logs = capture_logs(|| {
            std::fs::remove_file(&path).unwrap();
            let fifo = std::process::Command::new("mkfifo").arg(&path).status().unwrap();
            assert!(fifo.success());
            // Not even the stat-only look-up offers the old entries.
            seen.push((cache.current(&path).is_some(), cache.entries(&path).to_vec()));
            std::fs::remove_file(&path).unwrap();
            std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
            seen.push((cache.current(&path).is_some(), cache.entries(&path).to_vec()));
            std::fs::remove_file(&path).unwrap();
            let padded = format!("{good}{}", " ".repeat(2 * 1024 * 1024));
            write_callers(dir.path(), &padded);
            seen.push((cache.current(&path).is_some(), cache.entries(&path).to_vec()));
        });
        assert_eq!(seen, vec![(false, vec![]), (false, vec![]), (false, vec![])]);
        assert!(logs.contains("file is not a regular file"), "{logs}");
        assert!(logs.contains("FIFO") && logs.contains("symbolic link"), "{logs}");
        assert!(logs.contains("file is larger than its cap"), "{logs}");
        assert!(logs.contains("cap=1048576"), "{logs}");
        assert!(logs.contains(&path.display().to_string()), "{logs}");
        assert!(!logs.contains("sekrit"), "{logs}");
        write_callers(dir.path(), good);
        assert_eq!(cache.entries(&path).to_vec(), vec![entry("aaa", "sekrit-1", None)]);
    }

    #[test]
    fn directory_key_in_two_workspaces_finds_both_callers() {
        let one = tempfile::tempdir().unwrap();
        let two = tempfile::tempdir().unwrap();
        write_callers(one.path(), r#"[{"name":"a","key":"shared"},{"name":"b","key":"other"}]"#);
        write_callers(two.path(), r#"[{"name":"c","key":"shared"}]"#);
        let workspaces = vec![workspace(one.path(), "41"), workspace(two.path(), "42")];
        let directory = WorkspaceCallerDirectory::new(Arc::new(move || workspaces.clone()));
        let found = directory.find("shared");
        assert_eq!(
            found,
            vec![
                Caller {
                    name: "a".into(),
                    mode: CallerMode::Isolated,
                    tier: CallerTier::Workspace,
                    approval: Default::default(),
                    limits: Default::default(),
                    workspace: Arc::new(workspace(one.path(), "41")),
                },
                Caller {
                    name: "c".into(),
                    mode: CallerMode::Isolated,
                    tier: CallerTier::Workspace,
                    approval: Default::default(),
                    limits: Default::default(),
                    workspace: Arc::new(workspace(two.path(), "42")),
                },
            ]
        );
        assert_eq!(directory.find("other").len(), 1);
        assert_eq!(directory.find("nope"), vec![]);
        assert_eq!(directory.find(""), vec![]);
    }

    #[test]
    fn directory_entries_follow_edits_and_missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let directory = WorkspaceCallerDirectory::fixed(workspace(dir.path(), "7"));
        let ws = workspace(dir.path(), "7");
        assert_eq!(directory.entries(&ws).to_vec(), vec![]);
        write_callers(dir.path(), r#"[{"name":"a","key":"k1"}]"#);
        assert_eq!(directory.entries(&ws).to_vec(), vec![entry("a", "k1", None)]);
        assert_eq!(directory.find("k1").len(), 1);
        write_callers(dir.path(), r#"[{"name":"a","key":"k2"}]"#);
        assert_eq!(directory.find("k1"), vec![]);
        assert_eq!(directory.find("k2").len(), 1);
    }
}
