//! The in-memory index of one workspace's task folder: per task file its caller, context, state
//! and status timestamp, kept in ListTasks order (newest status first, then task id).
//!
//! Files are the truth; the index is a cache kept per caller (order, tasks per context, active
//! tasks), so a list costs its page, not the number of stored tasks. Our own writes update it as
//! they happen. Outside changes are found by the folder's mtime, read once per list
//! ([`WorkspaceIndex::ensure_current`]): a file added, removed or renamed changes it, and then a
//! scan (one `read_dir` plus a stat per file) re-parses only new or changed files. Deleted files
//! drop out, and `.tmp*` and non-`.json` names are ignored.
//!
//! Two limits of the mtime, and what covers them: a folder mtime younger than [`SETTLE`] at a
//! scan may be shared by a later change (coarse timestamps), so the next list scans again; and an
//! in-place edit of an existing file leaves the folder's mtime alone, so every list also scans
//! when the last scan is older than [`REVALIDATE`]. GetTask always checks the file (a `stat`, and a
//! read unless `task::cache` holds it with that stamp).
//!
//! Change detection per file uses (mtime, size) and, on Unix, (inode, ctime). Our own writes
//! replace the file by rename (a new inode) and mark the entry for a re-parse; an outside
//! in-place edit changes mtime and ctime.
//!
//! Blocking: everything here does file I/O and runs inside `spawn_blocking`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;
use tracing::warn;

use super::TaskFile;
use super::id::is_valid_id;
use super::key::TaskKey;
use super::path::task_files;
use super::stamp::Stamp;

/// How old the folder's mtime must be before an equal mtime proves that nothing was added,
/// removed or renamed since: file systems with coarse timestamps (FAT: 2 s, some network file
/// systems: 1 s) give two changes within one tick the same mtime.
const SETTLE: Duration = Duration::from_secs(2);

/// How long an index is trusted without a scan. Edits that rewrite a file in place do not
/// change the folder's mtime; this bounds how long the filters and order of a list can miss one.
const REVALIDATE: Duration = Duration::from_secs(60);

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
        if !is_valid_id(id) {
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

/// One page of task ids, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Page {
    pub ids: Vec<String>,
    /// Matching tasks before pagination.
    pub total: usize,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<SortKey>,
}

#[derive(Debug)]
struct Entry {
    /// `None`: re-parse on the next scan (written by us, or its stat failed).
    stamp: Option<Stamp>,
    /// The scan generation that last saw the file.
    seen: u64,
    /// The owner and the entry's place in the owner's order; `None` for a malformed file.
    place: Option<(String, SortKey)>,
}

/// What the order keeps of a task besides its key.
#[derive(Debug)]
struct Listed {
    context_id: String,
    state: a2a::TaskState,
}

/// The tasks of one context. Most contexts hold one task (every send without a `contextId` opens
/// a new one), and a `BTreeSet` allocates a whole leaf node (room for 11 keys, about 460 bytes)
/// for its first key: a lone task is kept inline instead.
#[derive(Debug)]
enum ContextTasks {
    One(SortKey),
    Many(BTreeSet<SortKey>),
}

impl ContextTasks {
    fn insert(&mut self, key: SortKey) {
        match self {
            ContextTasks::One(one) if *one == key => {}
            ContextTasks::One(one) => {
                let first = std::mem::replace(one, key.clone());
                *self = ContextTasks::Many(BTreeSet::from([first, key]));
            }
            ContextTasks::Many(keys) => {
                keys.insert(key);
            }
        }
    }

    /// Removes `key`; returns whether the context is now empty.
    fn remove(&mut self, key: &SortKey) -> bool {
        match self {
            ContextTasks::One(one) => one == key,
            ContextTasks::Many(keys) => {
                keys.remove(key);
                if keys.len() == 1
                    && let Some(last) = keys.pop_first()
                {
                    *self = ContextTasks::One(last);
                    return false;
                }
                keys.is_empty()
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            ContextTasks::One(_) => 1,
            ContextTasks::Many(keys) => keys.len(),
        }
    }

    /// The keys from `from` on, in order.
    fn range<'a>(&'a self, from: Bound<&SortKey>) -> Box<dyn Iterator<Item = &'a SortKey> + 'a> {
        match self {
            ContextTasks::One(one) => {
                let after = match from {
                    Bound::Unbounded => true,
                    Bound::Included(from) => one >= from,
                    Bound::Excluded(from) => one > from,
                };
                Box::new(after.then_some(one).into_iter())
            }
            ContextTasks::Many(keys) => Box::new(keys.range((from, Bound::Unbounded))),
        }
    }
}

/// One caller's tasks, in ListTasks order, with the lookups the filters need.
#[derive(Debug, Default)]
struct CallerTasks {
    order: BTreeMap<SortKey, Listed>,
    by_context: HashMap<String, ContextTasks>,
    /// Submitted and working tasks (candidates for restart recovery).
    active: BTreeSet<SortKey>,
}

impl CallerTasks {
    fn insert(&mut self, key: SortKey, summary: Summary) {
        match self.by_context.get_mut(&summary.context_id) {
            Some(tasks) => tasks.insert(key.clone()),
            None => {
                self.by_context.insert(summary.context_id.clone(), ContextTasks::One(key.clone()));
            }
        }
        if is_active(&summary.state) {
            self.active.insert(key.clone());
        }
        self.order.insert(key, Listed { context_id: summary.context_id, state: summary.state });
    }

    /// The caller's tasks (of `context`, when given) in order, from `from` on.
    fn walk<'a>(
        &'a self,
        context: Option<&str>,
        from: Bound<&SortKey>,
    ) -> Box<dyn Iterator<Item = (&'a SortKey, &'a Listed)> + 'a> {
        match context {
            Some(context) => match self.by_context.get(context) {
                Some(keys) => {
                    Box::new(keys.range(from).filter_map(|key| self.order.get_key_value(key)))
                }
                None => Box::new(std::iter::empty()),
            },
            None => Box::new(self.order.range((from, Bound::Unbounded))),
        }
    }

    fn remove(&mut self, key: &SortKey) {
        let Some(listed) = self.order.remove(key) else { return };
        if let Some(keys) = self.by_context.get_mut(&listed.context_id)
            && keys.remove(key)
        {
            self.by_context.remove(&listed.context_id);
        }
        self.active.remove(key);
    }
}

/// What the index knows of the folder itself.
#[derive(Debug, Default)]
struct FolderState {
    /// The folder's mtime, read just before the last scan listed it.
    mtime: Option<SystemTime>,
    /// Whether `mtime` was old enough at that scan that a later change cannot share it (coarse
    /// timestamps): only then does an equal mtime prove that no file was added or removed.
    settled: bool,
    /// When the last scan started.
    scanned_at: Option<Instant>,
}

/// The index of `<workspace>/.volcanic/a2a/tasks/`.
#[derive(Debug)]
pub(crate) struct WorkspaceIndex {
    dir: PathBuf,
    /// The largest task file read (see `A2aOptions::max_task_file_bytes`).
    file_cap: u64,
    /// Keyed inline (see `task::key`): GetTask's owner check looks a task up here per request.
    entries: HashMap<TaskKey, Entry>,
    callers: HashMap<String, CallerTasks>,
    generation: u64,
    folder: FolderState,
}

impl WorkspaceIndex {
    /// The index of the task folder `dir`, whose files are read up to `file_cap` bytes.
    pub fn new(dir: PathBuf, file_cap: u64) -> WorkspaceIndex {
        WorkspaceIndex {
            dir,
            file_cap,
            entries: HashMap::new(),
            callers: HashMap::new(),
            generation: 0,
            folder: FolderState::default(),
        }
    }

    /// Records a task we have just written. Its file is parsed again on the next scan, since
    /// a concurrent writer may have replaced it after us; our rename changed the folder's mtime,
    /// so that scan comes with the next list.
    pub fn record(&mut self, id: &str, summary: Summary) {
        let seen = self.generation;
        self.upsert(id, Some(summary), None, seen);
    }

    /// Makes the index reflect the folder as it was when a list that started at `requested_at`
    /// arrived. One stat of the folder when nothing was added, removed or renamed there since the
    /// last scan; otherwise a scan (see [`WorkspaceIndex::scan`]). A scan that started after the
    /// request did serves it too, so concurrent lists share one scan.
    pub fn ensure_current(&mut self, requested_at: Instant) {
        let folder = &self.folder;
        if folder.scanned_at.is_some_and(|at| at >= requested_at) {
            return;
        }
        let due = folder.scanned_at.is_none_or(|at| at.elapsed() >= REVALIDATE);
        if !due
            && folder.settled
            && folder.mtime.is_some()
            && folder_mtime(&self.dir) == folder.mtime
        {
            return;
        }
        self.scan();
    }

    /// How many task files the index knows: the folder as of the last scan (one is made now if
    /// there was none) plus our own writes since. O(1) after the first scan; files removed by
    /// hand drop out at the next scan.
    pub fn known_len(&mut self) -> usize {
        if self.folder.scanned_at.is_none() {
            self.scan();
        }
        self.entries.len()
    }

    /// [`WorkspaceIndex::known_len`] when it needs no I/O (the folder was scanned before).
    pub fn known_len_cached(&self) -> Option<usize> {
        self.folder.scanned_at.map(|_| self.entries.len())
    }

    /// Brings the index in line with the folder: one `read_dir` plus a stat per file, and only
    /// new or changed files are parsed. Deleted files drop out.
    fn scan(&mut self) {
        self.generation += 1;
        let generation = self.generation;
        let started = SystemTime::now();
        self.folder.scanned_at = Some(Instant::now());
        // Read before listing: a change during the listing shows up as a new mtime next time.
        let mtime = folder_mtime(&self.dir);
        self.folder.mtime = mtime;
        self.folder.settled =
            mtime.is_some_and(|mtime| started.duration_since(mtime).is_ok_and(|age| age >= SETTLE));
        let files = match task_files(&self.dir) {
            Ok(files) => files,
            Err(err) => {
                if err.kind() != std::io::ErrorKind::NotFound {
                    warn!(dir = %self.dir.display(), error = %err, "cannot list the task folder");
                }
                self.entries.clear();
                self.callers.clear();
                return;
            }
        };
        for file in files {
            let (id, meta) = (file.id(), &file.meta);
            let stamp = Stamp::of(meta);
            if let Some(entry) = self.entries.get_mut(id)
                && entry.stamp.is_some()
                && entry.stamp == stamp
            {
                entry.seen = generation;
                continue;
            }
            // Stat before read: a change after the stat shows up as a new stamp next time.
            let summary = read_summary(&file.entry.path(), id, self.file_cap);
            self.upsert(id, summary, stamp, generation);
        }
        let gone: Vec<TaskKey> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.seen != generation)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(Entry { place: Some((caller, key)), .. }) = self.entries.remove(&id) {
                self.unplace(&caller, &key);
            }
        }
    }

    /// Records task `id`'s file; `id` is a valid task id (scans skip other names and the store
    /// writes no other), so it fits a [`TaskKey`].
    fn upsert(&mut self, id: &str, summary: Option<Summary>, stamp: Option<Stamp>, seen: u64) {
        let Some(task) = TaskKey::new(id) else {
            warn!(task_id = %id, "not indexing a task id longer than 100 bytes");
            return;
        };
        let place = summary.as_ref().map(|s| (s.caller.clone(), SortKey::new(s.timestamp, id)));
        let old = self.entries.insert(task, Entry { stamp, seen, place: place.clone() });
        if let Some(Entry { place: Some((caller, key)), .. }) = old {
            self.unplace(&caller, &key);
        }
        if let (Some((caller, key)), Some(summary)) = (place, summary) {
            self.callers.entry(caller).or_default().insert(key, summary);
        }
    }

    fn unplace(&mut self, caller: &str, key: &SortKey) {
        if let Some(tasks) = self.callers.get_mut(caller) {
            tasks.remove(key);
            if tasks.order.is_empty() {
                self.callers.remove(caller);
            }
        }
    }

    /// The caller a task id belongs to, when the index knows it (a file it has seen and parsed).
    pub fn owner(&self, id: &str) -> Option<&str> {
        self.entries.get(id)?.place.as_ref().map(|(caller, _)| caller.as_str())
    }

    /// The ids of `caller`'s submitted and working tasks (candidates for restart recovery).
    pub fn active_tasks(&self, caller: &str) -> Vec<String> {
        self.callers
            .get(caller)
            .map(|tasks| tasks.active.iter().map(|key| key.id.clone()).collect())
            .unwrap_or_default()
    }

    /// The `limit` newest tasks of every caller, newest status first.
    pub fn newest(&self, limit: usize) -> Vec<(String, Summary)> {
        // Each caller's order is already newest first: its first `limit` are the candidates.
        let mut newest: Vec<(&SortKey, &str, &Listed)> = self
            .callers
            .iter()
            .flat_map(|(caller, tasks)| {
                tasks
                    .order
                    .iter()
                    .take(limit)
                    .map(move |(key, listed)| (key, caller.as_str(), listed))
            })
            .collect();
        newest.sort_by(|a, b| a.0.cmp(b.0));
        newest.truncate(limit);
        newest
            .into_iter()
            .map(|(key, caller, listed)| {
                let summary = Summary {
                    caller: caller.to_string(),
                    context_id: listed.context_id.clone(),
                    state: listed.state.clone(),
                    timestamp: key.newest_first.0,
                };
                (key.id.clone(), summary)
            })
            .collect()
    }

    /// Drops task `id`, whose file retention has just removed (a scan would drop it too, but
    /// the owner check, the task count and the lists should not wait for one).
    pub fn forget(&mut self, id: &str) {
        if let Some(Entry { place: Some((caller, key)), .. }) = self.entries.remove(id) {
            self.unplace(&caller, &key);
        }
    }

    /// Up to `limit` tasks in a state `pick` accepts whose status timestamp is before `cutoff`,
    /// oldest first, as (id, summary). Each caller's order is newest first, so its oldest tasks
    /// are walked from the end, and the walk stops at the first task at or after `cutoff`:
    /// the cost is the old tasks, not the stored ones. Tasks without a timestamp are left out.
    pub fn older_than(
        &self,
        cutoff: DateTime<Utc>,
        limit: usize,
        pick: impl Fn(&a2a::TaskState) -> bool,
    ) -> Vec<(String, Summary)> {
        let mut found: Vec<(String, Summary)> = Vec::new();
        for (caller, tasks) in &self.callers {
            let old = tasks
                .order
                .iter()
                .rev()
                .skip_while(|(key, _)| key.newest_first.0.is_none())
                .take_while(|(key, _)| key.newest_first.0.is_some_and(|t| t < cutoff))
                .filter(|(_, listed)| pick(&listed.state))
                .take(limit);
            for (key, listed) in old {
                let summary = Summary {
                    caller: caller.clone(),
                    context_id: listed.context_id.clone(),
                    state: listed.state.clone(),
                    timestamp: key.newest_first.0,
                };
                found.push((key.id.clone(), summary));
            }
        }
        found.sort_by(|a, b| (a.1.timestamp, &a.0).cmp(&(b.1.timestamp, &b.0)));
        found.truncate(limit);
        found
    }

    /// The states of `caller`'s tasks in context `context_id` (empty: no task uses it).
    pub fn context_states(&self, caller: &str, context_id: &str) -> Vec<a2a::TaskState> {
        let Some(tasks) = self.callers.get(caller) else { return Vec::new() };
        let Some(keys) = tasks.by_context.get(context_id) else { return Vec::new() };
        keys.range(Bound::Unbounded)
            .filter_map(|key| tasks.order.get(key).map(|listed| listed.state.clone()))
            .collect()
    }

    /// The page of `caller`'s tasks matching `filter` that starts after `cursor`.
    ///
    /// Cost: the page itself plus a walk down from the cursor, except that the total of a
    /// `state` filter counts over the caller's tasks (of the context, when filtered by one), and
    /// the total of a `statusTimestampAfter` filter over the tasks at or after it.
    pub fn page(
        &self,
        caller: &str,
        filter: &Filter,
        cursor: Option<&SortKey>,
        size: usize,
    ) -> Page {
        let mut page = Page { ids: Vec::with_capacity(size), total: 0, next: None };
        let Some(tasks) = self.callers.get(caller) else { return page };
        let start = cursor.map_or(Bound::Unbounded, Bound::Excluded);
        let context = filter.context_id.as_deref();
        let after = |key: &SortKey| {
            filter.after.is_none_or(|after| key.newest_first.0.is_some_and(|t| t >= after))
        };
        let state = |listed: &Listed| filter.state.as_ref().is_none_or(|s| *s == listed.state);
        page.total = match (&filter.state, &filter.after, context) {
            (None, None, None) => tasks.order.len(),
            (None, None, Some(context)) => {
                tasks.by_context.get(context).map_or(0, ContextTasks::len)
            }
            // Newest first: the tasks at or after `after` are a prefix of the order.
            _ => tasks
                .walk(context, Bound::Unbounded)
                .take_while(|(key, _)| after(key))
                .filter(|(_, listed)| state(listed))
                .count(),
        };
        let mut matching = tasks
            .walk(context, start)
            .take_while(|(key, _)| after(key))
            .filter(|(_, listed)| state(listed));
        let mut last = None;
        for (key, _) in matching.by_ref().take(size) {
            page.ids.push(key.id.clone());
            last = Some(key);
        }
        if matching.next().is_some() {
            page.next = last.cloned();
        }
        page
    }
}

/// The folder's mtime; `None` when it cannot be read (missing folder, for one).
fn folder_mtime(dir: &Path) -> Option<SystemTime> {
    fs::metadata(dir).and_then(|meta| meta.modified()).ok()
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
/// as missing, without a log line (a broken file is the owner's to fix; it must not stop the server). One that is not a regular file (by the time
/// it is opened), or is over `cap`, reads as missing with a warning (`safe_file`).
fn read_summary(path: &Path, id: &str, cap: u64) -> Option<Summary> {
    let bytes = volcanic_core::safe_file::read_config(path, cap).ok()??;
    let file: SummaryFile = serde_json::from_slice(&bytes).ok()?;
    (file.id == id).then_some(Summary {
        caller: file.caller,
        context_id: file.context_id,
        state: file.status.state,
        timestamp: file.status.timestamp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(caller: &str, context_id: &str, secs: i64) -> Summary {
        Summary {
            caller: caller.into(),
            context_id: context_id.into(),
            state: a2a::TaskState::Completed,
            timestamp: DateTime::from_timestamp(1_700_000_000 + secs, 0),
        }
    }

    fn write(dir: &Path, id: &str, summary: &Summary) {
        let text = serde_json::json!({
            "id": id,
            "contextId": summary.context_id,
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": summary.timestamp},
            "caller": summary.caller,
        });
        fs::write(dir.join(format!("{id}.json")), text.to_string()).unwrap();
    }

    fn set_folder_mtime(dir: &Path, age: Duration) {
        let folder = fs::File::open(dir).unwrap();
        let mtime = SystemTime::now() - age;
        folder.set_times(fs::FileTimes::new().set_modified(mtime)).unwrap();
    }

    #[test]
    fn index_of_a_settled_unchanged_folder_skips_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "t1", &summary("alice", "c1", 1));
        set_folder_mtime(dir.path(), Duration::from_secs(3600));
        let mut index = WorkspaceIndex::new(dir.path().to_path_buf(), u64::MAX);
        index.ensure_current(Instant::now());
        assert_eq!(index.generation, 1);
        index.ensure_current(Instant::now());
        assert_eq!(index.generation, 1, "nothing changed: no scan");

        write(dir.path(), "t2", &summary("alice", "c1", 2));
        index.ensure_current(Instant::now());
        assert_eq!(index.generation, 2, "a new file changed the folder's mtime");
        let page = index.page("alice", &Filter::default(), None, 10);
        assert_eq!(page.ids, vec!["t2", "t1"]);
    }

    #[test]
    fn index_of_a_folder_changed_within_the_settle_window_scans_again() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "t1", &summary("alice", "c1", 1));
        let mut index = WorkspaceIndex::new(dir.path().to_path_buf(), u64::MAX);
        index.ensure_current(Instant::now());
        // The folder's mtime is seconds old at most: a change in the same timestamp tick would
        // not show, so the next list scans again.
        index.ensure_current(Instant::now());
        assert_eq!(index.generation, 2);
    }

    #[test]
    fn index_concurrent_lists_share_a_scan_that_started_after_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = WorkspaceIndex::new(dir.path().to_path_buf(), u64::MAX);
        let requested_at = Instant::now();
        index.ensure_current(requested_at);
        index.ensure_current(requested_at);
        assert_eq!(index.generation, 1);
    }

    #[test]
    fn index_pages_by_caller_and_context_with_totals() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = WorkspaceIndex::new(dir.path().to_path_buf(), u64::MAX);
        for (id, caller, context, secs) in [
            ("t1", "alice", "c1", 1),
            ("t2", "alice", "c2", 2),
            ("t3", "bob", "c1", 3),
            ("t4", "alice", "c1", 4),
            ("t5", "alice", "c1", 5),
        ] {
            index.record(id, summary(caller, context, secs));
        }
        let c1 = Filter { context_id: Some("c1".into()), ..Filter::default() };
        let first = index.page("alice", &c1, None, 2);
        assert_eq!((first.ids.clone(), first.total), (vec!["t5".into(), "t4".into()], 3));
        let cursor = first.next.unwrap();
        let second = index.page("alice", &c1, Some(&cursor), 2);
        assert_eq!((second.ids, second.total, second.next), (vec!["t1".into()], 3, None));

        // Moving a task to another context moves it in the per-context lookup too.
        index.record("t4", summary("alice", "c2", 6));
        let c2 = Filter { context_id: Some("c2".into()), ..Filter::default() };
        assert_eq!(index.page("alice", &c2, None, 10).ids, vec!["t4", "t2"]);
        assert_eq!(index.page("alice", &c1, None, 10).ids, vec!["t5", "t1"]);
        let after =
            Filter { after: DateTime::from_timestamp(1_700_000_002, 0), ..Filter::default() };
        let page = index.page("alice", &after, None, 10);
        assert_eq!((page.ids, page.total), (vec!["t4".into(), "t5".into(), "t2".into()], 3));
        assert_eq!(index.page("carol", &Filter::default(), None, 10).total, 0);
    }

    #[test]
    fn index_context_of_one_task_pages_and_empties() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = WorkspaceIndex::new(dir.path().to_path_buf(), u64::MAX);
        index.record("t1", summary("alice", "solo", 1));
        index.record("t2", summary("alice", "pair", 2));
        index.record("t3", summary("alice", "pair", 3));
        let solo = Filter { context_id: Some("solo".into()), ..Filter::default() };
        let page = index.page("alice", &solo, None, 10);
        assert_eq!((page.ids, page.total, page.next), (vec!["t1".into()], 1, None));
        // A cursor at or past the lone task leaves nothing; one before it keeps it.
        let at = SortKey::new(DateTime::from_timestamp(1_700_000_001, 0), "t1");
        assert!(index.page("alice", &solo, Some(&at), 10).ids.is_empty());
        let before = SortKey::new(DateTime::from_timestamp(1_700_000_009, 0), "t9");
        assert_eq!(index.page("alice", &solo, Some(&before), 10).ids, vec!["t1"]);

        // A context shrinking to one task and growing again keeps its order and totals.
        index.record("t3", summary("alice", "solo", 4));
        let pair = Filter { context_id: Some("pair".into()), ..Filter::default() };
        assert_eq!(index.page("alice", &pair, None, 10).ids, vec!["t2"]);
        assert_eq!(index.page("alice", &solo, None, 10).ids, vec!["t3", "t1"]);
        index.record("t1", summary("alice", "pair", 5));
        index.record("t3", summary("alice", "pair", 6));
        assert!(!index.callers["alice"].by_context.contains_key("solo"), "empty contexts go");
        let page = index.page("alice", &pair, None, 10);
        assert_eq!((page.ids, page.total), (vec!["t3".into(), "t1".into(), "t2".into()], 3));
    }
}
