//! The in-memory index of one workspace's task folder: per task file its caller, context, state
//! and status timestamp, kept in ListTasks order (newest status first, then task id).
//!
//! Files are the truth; the index is a cache re-validated from the folder on every list
//! ([`WorkspaceIndex::refresh`]): one `read_dir` plus a stat per file, and only new or changed
//! files are parsed. Deleted files drop out, and `.tmp*` and non-`.json` names are ignored.
//!
//! Change detection uses (mtime, size) and, on Unix, (inode, ctime). Our own writes replace the
//! file by rename (a new inode) and mark the entry for a re-parse; an outside in-place edit
//! changes mtime and ctime. Unlike callers.json, there is no settle window: it would make every
//! list re-parse every recently written task, and the file systems we run on have sub-second
//! timestamps.
//!
//! Blocking: everything here does file I/O and runs inside `spawn_blocking`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;
use tracing::warn;

use super::TaskFile;
use super::store::is_valid_task_id;

/// What ListTasks needs of a task without reading its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    pub caller: String,
    pub context_id: String,
    pub state: a2a::TaskState,
    pub timestamp: Option<DateTime<Utc>>,
}

impl Summary {
    pub fn of(file: &TaskFile) -> Summary {
        Summary {
            caller: file.caller.clone(),
            context_id: file.task.context_id.clone(),
            state: file.task.status.state.clone(),
            timestamp: file.task.status.timestamp,
        }
    }
}

/// ListTasks order: newest status timestamp first (tasks without one last), then task id. Also
/// the page cursor: the next page starts after the last key of the previous one, which stays
/// stable when tasks are added or removed meanwhile.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SortKey {
    newest_first: Reverse<Option<DateTime<Utc>>>,
    id: String,
}

impl SortKey {
    fn new(timestamp: Option<DateTime<Utc>>, id: &str) -> SortKey {
        SortKey { newest_first: Reverse(timestamp), id: id.to_string() }
    }

    /// The opaque page token for this position: base64url of `<RFC 3339 timestamp>|<task id>`.
    pub fn to_token(&self) -> String {
        let timestamp = self
            .newest_first
            .0
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Nanos, true))
            .unwrap_or_default();
        URL_SAFE_NO_PAD.encode(format!("{timestamp}|{}", self.id))
    }

    /// Parses a token made by [`SortKey::to_token`]; `None` when it is not one.
    pub fn from_token(token: &str) -> Option<SortKey> {
        let text = String::from_utf8(URL_SAFE_NO_PAD.decode(token).ok()?).ok()?;
        let (timestamp, id) = text.split_once('|')?;
        if !is_valid_task_id(id) {
            return None;
        }
        let timestamp = match timestamp {
            "" => None,
            text => Some(DateTime::parse_from_rfc3339(text).ok()?.with_timezone(&Utc)),
        };
        Some(SortKey::new(timestamp, id))
    }
}

/// ListTasks filters, already validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Filter {
    pub context_id: Option<String>,
    pub state: Option<a2a::TaskState>,
    /// Status timestamp ≥ this.
    pub after: Option<DateTime<Utc>>,
}

impl Filter {
    fn matches(&self, caller: &str, summary: &Summary) -> bool {
        summary.caller == caller
            && self.context_id.as_ref().is_none_or(|c| *c == summary.context_id)
            && self.state.as_ref().is_none_or(|s| *s == summary.state)
            && self.after.is_none_or(|after| summary.timestamp.is_some_and(|t| t >= after))
    }
}

/// One page of task ids, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Page {
    pub ids: Vec<String>,
    /// Matching tasks before pagination.
    pub total: usize,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<SortKey>,
}

/// How a file looked when it was indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    mtime: SystemTime,
    size: u64,
    #[cfg(unix)]
    inode: u64,
    #[cfg(unix)]
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Option<Stamp> {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Some(Stamp {
            mtime: meta.modified().ok()?,
            size: meta.len(),
            #[cfg(unix)]
            inode: meta.ino(),
            #[cfg(unix)]
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
    }
}

#[derive(Debug)]
struct Entry {
    /// `None`: re-parse on the next refresh (written by us, or its stat failed).
    stamp: Option<Stamp>,
    /// The refresh generation that last saw the file.
    seen: u64,
    /// The entry's place in `order`; `None` for a malformed file.
    key: Option<SortKey>,
}

/// The index of `<workspace>/.volcanic/a2a/tasks/`.
#[derive(Debug)]
pub(crate) struct WorkspaceIndex {
    dir: PathBuf,
    entries: HashMap<String, Entry>,
    order: BTreeMap<SortKey, Summary>,
    generation: u64,
}

impl WorkspaceIndex {
    pub fn new(dir: PathBuf) -> WorkspaceIndex {
        WorkspaceIndex { dir, entries: HashMap::new(), order: BTreeMap::new(), generation: 0 }
    }

    /// Records a task we have just written. Its file is parsed again on the next refresh, since
    /// a concurrent writer may have replaced it after us.
    pub fn record(&mut self, id: &str, summary: Summary) {
        let seen = self.generation;
        self.upsert(id, Some(summary), None, seen);
    }

    /// Brings the index in line with the folder.
    pub fn refresh(&mut self) {
        self.generation += 1;
        let generation = self.generation;
        let dir = match fs::read_dir(&self.dir) {
            Ok(dir) => dir,
            Err(err) => {
                if err.kind() != std::io::ErrorKind::NotFound {
                    warn!(dir = %self.dir.display(), error = %err, "cannot list the task folder");
                }
                self.entries.clear();
                self.order.clear();
                return;
            }
        };
        for dirent in dir.flatten() {
            let name = dirent.file_name();
            let Some(id) = name.to_str().and_then(|name| name.strip_suffix(".json")) else {
                continue;
            };
            // Also skips `.tmp*` files: a dot is not allowed in task ids.
            if !is_valid_task_id(id) {
                continue;
            }
            let Ok(meta) = dirent.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let stamp = Stamp::of(&meta);
            if let Some(entry) = self.entries.get_mut(id)
                && entry.stamp.is_some()
                && entry.stamp == stamp
            {
                entry.seen = generation;
                continue;
            }
            // Stat before read: a change after the stat shows up as a new stamp next time.
            let summary = read_summary(&dirent.path(), id);
            self.upsert(id, summary, stamp, generation);
        }
        let gone: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.seen != generation)
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            if let Some(Entry { key: Some(key), .. }) = self.entries.remove(&id) {
                self.order.remove(&key);
            }
        }
    }

    fn upsert(&mut self, id: &str, summary: Option<Summary>, stamp: Option<Stamp>, seen: u64) {
        let key = summary.as_ref().map(|s| SortKey::new(s.timestamp, id));
        let old = self.entries.insert(id.to_string(), Entry { stamp, seen, key: key.clone() });
        if let Some(Entry { key: Some(old_key), .. }) = old {
            self.order.remove(&old_key);
        }
        if let (Some(key), Some(summary)) = (key, summary) {
            self.order.insert(key, summary);
        }
    }

    /// The ids of `caller`'s submitted and working tasks (candidates for restart recovery).
    pub fn active_tasks(&self, caller: &str) -> Vec<String> {
        self.order
            .iter()
            .filter(|(_, summary)| summary.caller == caller && is_active(&summary.state))
            .map(|(key, _)| key.id.clone())
            .collect()
    }

    /// The `limit` newest tasks of every caller, newest status first.
    pub fn newest(&self, limit: usize) -> Vec<(String, Summary)> {
        self.order
            .iter()
            .take(limit)
            .map(|(key, summary)| (key.id.clone(), summary.clone()))
            .collect()
    }

    /// The page of `caller`'s tasks matching `filter` that starts after `cursor`.
    pub fn page(
        &self,
        caller: &str,
        filter: &Filter,
        cursor: Option<&SortKey>,
        size: usize,
    ) -> Page {
        let mut page = Page { ids: Vec::with_capacity(size), total: 0, next: None };
        let mut last = None;
        let mut more = false;
        for (key, summary) in &self.order {
            if !filter.matches(caller, summary) {
                continue;
            }
            page.total += 1;
            if cursor.is_some_and(|cursor| key <= cursor) {
                continue;
            }
            if page.ids.len() < size {
                page.ids.push(key.id.clone());
                last = Some(key);
            } else {
                more = true;
            }
        }
        if more {
            page.next = last.cloned();
        }
        page
    }
}

/// Whether a task in `state` needs a live run (and is failed on read without one).
pub(crate) fn is_active(state: &a2a::TaskState) -> bool {
    match state {
        a2a::TaskState::Submitted | a2a::TaskState::Working => true,
        a2a::TaskState::Unspecified
        | a2a::TaskState::Completed
        | a2a::TaskState::Failed
        | a2a::TaskState::Canceled
        | a2a::TaskState::InputRequired
        | a2a::TaskState::Rejected
        | a2a::TaskState::AuthRequired => false,
    }
}

/// The fields of a task file the index needs; everything else is skipped unparsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SummaryFile {
    id: String,
    context_id: String,
    status: SummaryStatus,
    caller: String,
}

#[derive(Deserialize)]
struct SummaryStatus {
    state: a2a::TaskState,
    #[serde(default)]
    timestamp: Option<DateTime<Utc>>,
}

/// A file that cannot be read, does not parse or names another task id is malformed: it reads
/// as missing, without a log line (design: "Files").
fn read_summary(path: &Path, id: &str) -> Option<Summary> {
    let bytes = fs::read(path).ok()?;
    let file: SummaryFile = serde_json::from_slice(&bytes).ok()?;
    (file.id == id).then_some(Summary {
        caller: file.caller,
        context_id: file.context_id,
        state: file.status.state,
        timestamp: file.status.timestamp,
    })
}
