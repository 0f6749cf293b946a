//! The settled-task cache: the wire JSON of tasks that no longer change on their own (every
//! state but submitted and working), kept in memory so GetTask and ListTasks answer them without
//! reading and parsing their files, and without building a `serde_json::Value` tree.
//!
//! Files stay the truth. Where the task folder can be watched (Linux, local file systems: see
//! `task::watch`), an entry read while the watch ran (through the watched folder, and only for a
//! regular file with one link, whose every change is a change in the folder) is served until the
//! watch reports a change of its file: every answer first reads the watch's queued events (one
//! non-blocking `read`), so an outside edit, rename or removal made through the folder is seen on
//! the next read without a `stat` per task. Elsewhere, and for entries read before the watch began, an entry
//! is served only while its file's stamp (mtime, size and, on Unix, inode and ctime; the index
//! uses the same) is the one it was read with, at the cost of one `stat`. Our own writes drop
//! the entry ([`TaskCache::forget`], called where a task file is written) and bump a write
//! counter, as does a watch that reports a change; a reader that started before either does not
//! store what it read ([`TaskCache::insert`] is given the [`ReadToken`] it took first), so an
//! in-place rewrite whose stamp happens to be equal cannot bring an old version back.
//!
//! The cache is bounded by bytes (`A2A__TaskCacheBytes`): the JSON plus a fixed estimate of each
//! entry's bookkeeping. Over the bound, the least recently used eighth of it is dropped at once.
//! 0 turns the cache off (and with it the watches).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::json::TaskJson;
use super::key::TaskKey;
use super::stamp::Stamp;
use super::watch::FolderWatch;

/// What an entry costs besides its JSON, id and caller name: the map slots, the `Arc`, the
/// stamp and the offsets (an estimate, on the high side).
const ENTRY_OVERHEAD: usize = 192;

/// A settled task as its file held it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct CachedTask {
    /// The file's stamp when it was read.
    pub stamp: Stamp,
    /// The caller that owns the task.
    pub caller: Box<str>,
    /// The task's generation (`task::events`).
    pub generation: u64,
    pub json: TaskJson,
}

impl CachedTask {
    fn cost(&self, id: &str) -> usize {
        ENTRY_OVERHEAD + id.len() + self.caller.len() + self.json.size() + 4 * self.json.offsets()
    }
}

/// Settled tasks' JSON of every workspace, bounded by bytes.
#[derive(Debug)]
pub(crate) struct TaskCache {
    capacity: usize,
    /// Task files written by us so far, and outside changes seen through a watch (see the module
    /// docs).
    writes: AtomicU64,
    /// How often a watched folder is checked to still be at its path.
    verify_every: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    workspaces: HashMap<PathBuf, Workspace>,
    bytes: usize,
    /// Ticks once per hit or insert: the recency of [`Slot::used`].
    clock: u64,
    /// Numbers the watches started, so an insert can tell whether the watch it read under is
    /// still the one running.
    watches_started: u64,
}

/// One workspace's entries, and the watch of its task folder.
#[derive(Debug, Default)]
struct Workspace {
    /// Tasks keyed inline (see `task::key`): GetTask looks one up per request.
    tasks: HashMap<TaskKey, Slot>,
    watch: Watch,
}

#[derive(Debug, Default)]
enum Watch {
    /// Not started yet, or ended: the next read of a file tries to start one.
    #[default]
    Off,
    /// Watching the task folder: entries read under it need no `stat`.
    On { watch: FolderWatch, number: u64 },
    /// Entries are checked by their stamp: the folder's file system cannot be watched (for
    /// good), or starting a watch failed (tried again after this instant).
    Unavailable { retry: Option<Instant> },
}

/// How long a workspace whose watch could not start (inotify's limits reached, the folder
/// changing meanwhile) goes by stamps before the next try.
const RETRY_WATCH: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Slot {
    task: Arc<CachedTask>,
    cost: usize,
    used: u64,
    /// Read while the folder's watch (this number) was running: valid until the watch reports
    /// a change of the file, without a `stat`.
    watched: Option<u64>,
}

/// What a reader saw before reading a task file, for [`TaskCache::insert`].
#[derive(Debug, Clone)]
pub(crate) struct ReadToken {
    writes: u64,
    watch: Option<u64>,
    /// The watched folder, to read the file through when the watch is to vouch for it.
    #[cfg(target_os = "linux")]
    folder: Option<Arc<std::os::fd::OwnedFd>>,
}

impl ReadToken {
    /// The watched task folder: read the file through it (`openat`) for the watch to vouch
    /// for what was read. `None` where there is no watch.
    #[cfg(target_os = "linux")]
    pub fn folder(&self) -> Option<&std::os::fd::OwnedFd> {
        self.folder.as_deref()
    }

    /// This token, for a read the watch cannot vouch for (a file it would not report changes
    /// of): the entry is then checked by its stamp.
    pub fn unwatched(mut self) -> ReadToken {
        self.watch = None;
        self
    }
}

impl TaskCache {
    /// A cache of at most `capacity` bytes; 0 caches nothing.
    pub fn new(capacity: usize) -> TaskCache {
        TaskCache {
            capacity,
            writes: AtomicU64::new(0),
            verify_every: Duration::from_secs(1),
            state: Mutex::default(),
        }
    }

    /// This cache, checking a watched folder's place at most once per `every` (1 s by default).
    #[cfg(test)]
    pub fn verifying_every(mut self, every: Duration) -> TaskCache {
        self.verify_every = every;
        self
    }

    /// Whether the cache holds anything at all (capacity above 0).
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// To take before reading a task file of `workspace` (whose task folder is `dir`) that may
    /// be [inserted](TaskCache::insert): starts watching `dir` when it is not watched yet. The
    /// watch is set up outside the cache's lock (it inspects the file system), and only the
    /// first of concurrent starters keeps its watch.
    pub fn read_token(&self, workspace: &Path, dir: &Path) -> ReadToken {
        if !self.enabled() {
            return self.token(None);
        }
        let state = self.lock();
        if !watch_due(&state, workspace) {
            return self.token_of(&state, workspace);
        }
        drop(state);
        let started = FolderWatch::start(dir);
        let mut state = self.lock();
        let state = &mut *state;
        let entry = match state.workspaces.get_mut(workspace) {
            Some(entry) => entry,
            None => state.workspaces.entry(workspace.to_path_buf()).or_default(),
        };
        // Unless another reader installed a watch meanwhile.
        if matches!(entry.watch, Watch::Off | Watch::Unavailable { retry: Some(_) }) {
            match started {
                Ok(Some(watch)) => {
                    state.watches_started += 1;
                    entry.watch = Watch::On { watch, number: state.watches_started };
                }
                Ok(None) => entry.watch = Watch::Unavailable { retry: None },
                // No folder, no task file to cache: try again once there is one.
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => {
                    tracing::info!(
                        folder = %dir.display(),
                        error = %err,
                        "cannot watch a task folder; cached tasks are checked with a stat each \
                         for a minute"
                    );
                    let retry = Instant::now() + RETRY_WATCH;
                    entry.watch = Watch::Unavailable { retry: Some(retry) };
                }
            }
        }
        self.token_of(state, workspace)
    }

    /// The token for a read of `workspace` under `state`'s watch of it, if any. Taken after the
    /// watch started: a change it does not report happened before this.
    fn token_of(&self, state: &State, workspace: &Path) -> ReadToken {
        let watch = state.workspaces.get(workspace).and_then(|entry| match &entry.watch {
            Watch::On { watch, number } => Some((watch, *number)),
            Watch::Off | Watch::Unavailable { .. } => None,
        });
        self.token(watch)
    }

    #[cfg_attr(not(target_os = "linux"), allow(clippy::unused_self))]
    fn token(&self, watch: Option<(&FolderWatch, u64)>) -> ReadToken {
        ReadToken {
            writes: self.writes(),
            watch: watch.map(|(_, number)| number),
            #[cfg(target_os = "linux")]
            folder: watch.map(|(watch, _)| watch.folder()),
        }
    }

    fn writes(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }

    /// The entry of `workspace`'s task `id` when its folder (`dir`) is watched and reported no
    /// change of the file since it was read: no `stat` needed. Reads the watch's events first,
    /// dropping the entries of the files they name.
    pub fn get_watched(&self, workspace: &Path, dir: &Path, id: &str) -> Option<Arc<CachedTask>> {
        if !self.enabled() {
            return None;
        }
        let mut state = self.lock();
        let state = &mut *state;
        let entry = state.workspaces.get_mut(workspace)?;
        let Watch::On { watch, number } = &mut entry.watch else { return None };
        let number = *number;
        let tasks = &mut entry.tasks;
        let mut freed = 0;
        let drained = watch.drain(&mut |name| {
            let id = name.strip_suffix(b".json").and_then(|id| std::str::from_utf8(id).ok());
            if let Some(slot) = id.and_then(|id| tasks.remove(id)) {
                freed += slot.cost;
            }
        });
        let ended = drained.ended || !watch.still_at(dir, self.verify_every);
        if drained.any || ended {
            // A reader that began before these changes must not store what it read.
            self.writes.fetch_add(1, Ordering::AcqRel);
        }
        if drained.all || ended {
            // Entries checked by their stamp stay; those trusted on the watch's word go.
            tasks.retain(|_, slot| {
                let keep = slot.watched.is_none();
                if !keep {
                    freed += slot.cost;
                }
                keep
            });
        }
        if ended {
            entry.watch = Watch::Off;
        }
        state.bytes -= freed;
        if ended {
            return None;
        }
        let slot = entry.tasks.get_mut(id)?;
        if slot.watched != Some(number) {
            return None;
        }
        state.clock += 1;
        slot.used = state.clock;
        Some(slot.task.clone())
    }

    /// The entry of `workspace`'s task `id` when it was read with `stamp` (the file's now). An
    /// entry with another stamp is dropped.
    pub fn get(&self, workspace: &Path, id: &str, stamp: &Stamp) -> Option<Arc<CachedTask>> {
        if !self.enabled() {
            return None;
        }
        let mut state = self.lock();
        let state = &mut *state;
        let tasks = &mut state.workspaces.get_mut(workspace)?.tasks;
        let slot = tasks.get_mut(id)?;
        if slot.task.stamp != *stamp {
            let cost = slot.cost;
            tasks.remove(id);
            state.bytes -= cost;
            return None;
        }
        state.clock += 1;
        slot.used = state.clock;
        Some(slot.task.clone())
    }

    /// Stores a task read after `token` was taken, unless a task file was written (or changed,
    /// as a watch reported) since: it may be this one, and the read may predate it.
    pub fn insert(&self, workspace: &Path, id: &str, task: Arc<CachedTask>, token: ReadToken) {
        let cost = task.cost(id);
        if cost > self.capacity / 8 {
            // Also when the cache is off. One huge task must not flush everything else.
            return;
        }
        // Only valid task ids (at most 100 bytes) reach here; anything else is not cached.
        let Some(key) = TaskKey::new(id) else { return };
        let mut state = self.lock();
        // Checked under the lock: `forget` and the watch bump the counter before they take it.
        if self.writes() != token.writes {
            return;
        }
        let state = &mut *state;
        state.clock += 1;
        let entry = match state.workspaces.get_mut(workspace) {
            Some(entry) => entry,
            None => state.workspaces.entry(workspace.to_path_buf()).or_default(),
        };
        let watched = match entry.watch {
            Watch::On { number, .. } if token.watch == Some(number) => Some(number),
            _ => None,
        };
        let slot = Slot { task, cost, used: state.clock, watched };
        if let Some(old) = entry.tasks.insert(key, slot) {
            state.bytes -= old.cost;
        }
        state.bytes += cost;
        if state.bytes > self.capacity {
            state.evict(self.capacity - self.capacity / 8);
        }
    }

    /// Drops `workspace`'s task `id`: its file has just been written (called after the write,
    /// whether or not it succeeded).
    pub fn forget(&self, workspace: &Path, id: &str) {
        self.writes.fetch_add(1, Ordering::AcqRel);
        if !self.enabled() {
            return;
        }
        let mut state = self.lock();
        let state = &mut *state;
        if let Some(entry) = state.workspaces.get_mut(workspace)
            && let Some(old) = entry.tasks.remove(id)
        {
            state.bytes -= old.cost;
        }
    }

    /// Bytes held (JSON plus the bookkeeping estimate).
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Entries held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().workspaces.values().map(|entry| entry.tasks.len()).sum()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `workspace`'s folder should be (tried to be) watched now.
fn watch_due(state: &State, workspace: &Path) -> bool {
    match state.workspaces.get(workspace).map(|entry| &entry.watch) {
        None | Some(Watch::Off) => true,
        Some(Watch::Unavailable { retry: Some(at) }) => Instant::now() >= *at,
        Some(Watch::On { .. } | Watch::Unavailable { retry: None }) => false,
    }
}

impl State {
    /// Drops the least recently used entries until at most `target` bytes are held.
    fn evict(&mut self, target: usize) {
        let mut ages: Vec<(u64, usize)> = self
            .workspaces
            .values()
            .flat_map(|entry| entry.tasks.values())
            .map(|s| (s.used, s.cost))
            .collect();
        ages.sort_unstable();
        // The newest `used` to drop: the oldest entries until enough bytes would go.
        let mut excess = self.bytes.saturating_sub(target);
        let mut cutoff = 0;
        for (used, cost) in ages {
            if excess == 0 {
                break;
            }
            cutoff = used;
            excess = excess.saturating_sub(cost);
        }
        let mut freed = 0;
        for entry in self.workspaces.values_mut() {
            entry.tasks.retain(|_, slot| {
                let keep = slot.used > cutoff;
                if !keep {
                    freed += slot.cost;
                }
                keep
            });
        }
        // A workspace's watch stays with it: starting one again costs more than it holds.
        self.bytes -= freed;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::{Duration, SystemTime};

    use a2a::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};
    use serde_json::json;

    use super::*;
    use crate::task::apply_history_length;
    use crate::task::json::Artifacts;

    fn message(id: &str) -> Message {
        Message {
            message_id: id.into(),
            context_id: Some("c1".into()),
            task_id: Some("t1".into()),
            role: Role::Agent,
            parts: vec![Part::text(format!("text of {id}, with \"quotes\" and \\ ü"))],
            metadata: None,
            extensions: None,
            reference_task_ids: None,
        }
    }

    fn task(artifacts: bool, history: Option<usize>, metadata: bool) -> Task {
        Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state: TaskState::Completed,
                message: Some(message("status")),
                timestamp: Some(
                    chrono::DateTime::from_timestamp(1_700_000_000, 5_000_000).unwrap(),
                ),
            },
            artifacts: artifacts.then(|| {
                vec![Artifact {
                    artifact_id: "a-1".into(),
                    name: Some("response".into()),
                    description: None,
                    parts: vec![Part::text("answer")],
                    metadata: None,
                    extensions: None,
                }]
            }),
            history: history.map(|n| (0..n).map(|i| message(&format!("m{i}"))).collect()),
            metadata: metadata.then(|| HashMap::from([("k".to_string(), json!({"n": [1, 2]}))])),
        }
    }

    fn every_shape() -> Vec<Task> {
        let mut tasks = Vec::new();
        for artifacts in [false, true] {
            for history in [None, Some(0), Some(1), Some(3)] {
                for metadata in [false, true] {
                    tasks.push(task(artifacts, history, metadata));
                }
            }
        }
        tasks
    }

    #[test]
    fn task_json_is_the_bytes_serde_writes() {
        for task in every_shape() {
            let json = TaskJson::of(&task).unwrap();
            let mut out = Vec::new();
            json.write(&mut out, None, Artifacts::Shown);
            assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&task).unwrap());
        }
    }

    #[test]
    fn task_json_history_length_and_artifacts_match_the_value_path() {
        for task in every_shape() {
            let json = TaskJson::of(&task).unwrap();
            for length in [None, Some(0), Some(1), Some(2), Some(3), Some(10)] {
                for artifacts in [Artifacts::Omitted, Artifacts::Shown] {
                    let mut expected = task.clone();
                    apply_history_length(&mut expected, length.map(|n| i32::try_from(n).unwrap()))
                        .unwrap();
                    if artifacts == Artifacts::Omitted {
                        expected.artifacts = None;
                    }
                    let mut out = Vec::new();
                    json.write(&mut out, length, artifacts);
                    assert_eq!(
                        String::from_utf8(out).unwrap(),
                        serde_json::to_string(&expected).unwrap(),
                        "{length:?} {artifacts:?}"
                    );
                    assert_eq!(json.to_task(length, artifacts), expected);
                }
            }
        }
    }

    fn stamp(n: u64) -> Stamp {
        Stamp {
            mtime: SystemTime::UNIX_EPOCH + Duration::from_secs(n),
            size: n,
            #[cfg(unix)]
            inode: n,
            #[cfg(unix)]
            ctime: (0, 0),
        }
    }

    fn cached(n: u64) -> Arc<CachedTask> {
        let json = TaskJson::of(&task(true, Some(1), false)).unwrap();
        Arc::new(CachedTask { stamp: stamp(n), caller: "alice".into(), generation: 1, json })
    }

    /// A token for a workspace whose task folder does not exist (so it is not watched).
    fn token(cache: &TaskCache) -> ReadToken {
        cache.read_token(Path::new("/ws"), Path::new("/nonexistent/volcanic/tasks"))
    }

    fn cost() -> usize {
        cached(0).cost("t000")
    }

    #[test]
    fn cache_serves_an_entry_only_with_its_stamp() {
        let cache = TaskCache::new(100 * cost());
        let ws = Path::new("/ws");
        cache.insert(ws, "t000", cached(1), token(&cache));
        assert_eq!(cache.get(ws, "t000", &stamp(1)), Some(cached(1)));
        assert_eq!(cache.get(Path::new("/other"), "t000", &stamp(1)), None);
        // The file changed under it (an outside edit): the entry goes.
        assert_eq!(cache.get(ws, "t000", &stamp(2)), None);
        assert_eq!((cache.len(), cache.bytes()), (0, 0));
        assert_eq!(cache.get(ws, "t000", &stamp(1)), None);
    }

    #[test]
    fn cache_forgets_on_write_and_refuses_reads_that_predate_a_write() {
        let cache = TaskCache::new(100 * cost());
        let ws = Path::new("/ws");
        cache.insert(ws, "t000", cached(1), token(&cache));
        cache.forget(ws, "t000");
        assert_eq!(cache.get(ws, "t000", &stamp(1)), None);
        assert_eq!(cache.bytes(), 0);
        // Read before a write (of any task) landed: not stored, it may be the old version.
        let before = token(&cache);
        cache.forget(ws, "t9");
        cache.insert(ws, "t000", cached(1), before);
        assert_eq!(cache.len(), 0);
        cache.insert(ws, "t000", cached(1), token(&cache));
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn cache_stays_within_its_bytes_and_drops_the_least_recently_used() {
        let cache = TaskCache::new(16 * cost());
        let ws = Path::new("/ws");
        for n in 0..16 {
            cache.insert(ws, &format!("t{n:03}"), cached(n), token(&cache));
        }
        assert_eq!(cache.len(), 16);
        // t000 is used again, so it is the newest.
        assert!(cache.get(ws, "t000", &stamp(0)).is_some());
        cache.insert(ws, "t016", cached(16), token(&cache));
        assert!(cache.bytes() <= 16 * cost());
        // Down to 7/8 of the bound at once: the three least recently used went.
        assert_eq!(cache.len(), 14);
        for n in [1, 2, 3] {
            assert!(cache.get(ws, &format!("t{n:03}"), &stamp(n)).is_none(), "t{n:03}");
        }
        for n in [0, 4, 15, 16] {
            assert!(cache.get(ws, &format!("t{n:03}"), &stamp(n)).is_some(), "t{n:03}");
        }
        for n in 17..200 {
            cache.insert(ws, &format!("t{n:03}"), cached(n), token(&cache));
            assert!(cache.bytes() <= 16 * cost());
        }
        assert_eq!(cache.bytes(), cache.len() * cost());
    }

    #[test]
    fn cache_of_zero_bytes_or_a_huge_task_holds_nothing() {
        let ws = Path::new("/ws");
        let off = TaskCache::new(0);
        off.insert(ws, "t000", cached(0), token(&off));
        assert_eq!((off.len(), off.get(ws, "t000", &stamp(0))), (0, None));
        let small = TaskCache::new(4 * cost());
        small.insert(ws, "t000", cached(0), token(&small));
        assert_eq!(small.len(), 0);
    }

    /// A real task folder under a temp dir, watched (Linux).
    #[cfg(target_os = "linux")]
    struct Folder {
        _root: tempfile::TempDir,
        ws: PathBuf,
        dir: PathBuf,
    }

    #[cfg(target_os = "linux")]
    impl Folder {
        /// `None` (the test is skipped) where the temp folder's file system is not one the
        /// watch trusts (fuse-overlayfs, 9p, NFS): there the stamp-checked tests apply.
        fn new() -> Option<Folder> {
            let root = tempfile::tempdir().unwrap();
            let ws = root.path().join("ws");
            let dir = ws.join("tasks");
            std::fs::create_dir_all(&dir).unwrap();
            for n in 0..2 {
                std::fs::write(dir.join(format!("t{n:03}.json")), "{}").unwrap();
            }
            if FolderWatch::start(&dir).unwrap().is_none() {
                eprintln!(
                    "skipped: {} is on a file system the watch does not trust",
                    dir.display()
                );
                return None;
            }
            Some(Folder { _root: root, ws, dir })
        }

        /// Caches `id` as read under the watch, and checks it is served without a stamp.
        fn cache(&self, cache: &TaskCache, id: &str) {
            let token = cache.read_token(&self.ws, &self.dir);
            cache.insert(&self.ws, id, cached(1), token);
            assert_eq!(cache.get_watched(&self.ws, &self.dir, id), Some(cached(1)), "{id}");
        }

        fn file(&self, id: &str) -> PathBuf {
            self.dir.join(format!("{id}.json"))
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn watched_entries_are_served_until_their_file_changes_in_any_way() {
        let Some(folder) = Folder::new() else { return };
        let cache = TaskCache::new(100 * cost());
        let (ws, dir) = (&folder.ws, &folder.dir);
        type Change<'a> = (&'a str, &'a dyn Fn(&Path));
        let changes: [Change; 6] = [
            ("rewritten in place", &|path| std::fs::write(path, "{\"x\":1}").unwrap()),
            ("truncated", &|path| {
                std::fs::File::options().write(true).open(path).unwrap().set_len(0).unwrap();
            }),
            ("touched", &|path| {
                let file = std::fs::File::options().write(true).open(path).unwrap();
                file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(7)).unwrap();
            }),
            ("replaced by a rename", &|path| {
                let other = path.with_extension("tmp");
                std::fs::write(&other, "{}").unwrap();
                std::fs::rename(&other, path).unwrap();
            }),
            ("moved away", &|path| {
                std::fs::rename(path, path.with_extension("old")).unwrap();
                std::fs::rename(path.with_extension("old"), path).unwrap();
            }),
            ("removed", &|path| std::fs::remove_file(path).unwrap()),
        ];
        for (what, change) in changes {
            folder.cache(&cache, "t000");
            folder.cache(&cache, "t001");
            change(&folder.file("t000"));
            assert_eq!(cache.get_watched(ws, dir, "t000"), None, "{what}");
            // The entry went, not only the answer without a stat.
            assert_eq!(cache.get(ws, "t000", &stamp(1)), None, "{what}");
            // Another file's entry stays.
            assert_eq!(cache.get_watched(ws, dir, "t001"), Some(cached(1)), "{what}");
        }
        // A stamp-checked entry is never served without its stat.
        cache.insert(ws, "t002", cached(1), token(&cache));
        assert_eq!(cache.get_watched(ws, dir, "t002"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_read_that_a_reported_change_may_postdate_is_not_trusted() {
        let Some(folder) = Folder::new() else { return };
        let cache = TaskCache::new(100 * cost());
        let (ws, dir) = (&folder.ws, &folder.dir);
        // The change is reported to a reader of another task while the read is under way.
        let token = cache.read_token(ws, dir);
        std::fs::write(folder.file("t000"), "{\"x\":1}").unwrap();
        assert_eq!(cache.get_watched(ws, dir, "t001"), None);
        cache.insert(ws, "t000", cached(1), token);
        assert_eq!(cache.len(), 0);
        // Not reported yet when the read is stored: the next answer reads the report first.
        let token = cache.read_token(ws, dir);
        std::fs::write(folder.file("t000"), "{\"x\":2}").unwrap();
        cache.insert(ws, "t000", cached(1), token);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get_watched(ws, dir, "t000"), None);
        assert_eq!(cache.len(), 0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_moved_or_replaced_folder_ends_the_watch_and_a_new_one_starts() {
        let Some(folder) = Folder::new() else { return };
        let cache = TaskCache::new(100 * cost());
        let (ws, dir) = (&folder.ws, &folder.dir);
        // The folder itself renamed away and another put in its place.
        folder.cache(&cache, "t000");
        std::fs::rename(dir, ws.join("old")).unwrap();
        std::fs::create_dir(dir).unwrap();
        assert_eq!(cache.get_watched(ws, dir, "t000"), None);
        assert_eq!(cache.len(), 0);
        // The next read watches the new folder; a read begun under the old watch is not
        // trusted under the new one.
        std::fs::write(folder.file("t000"), "{}").unwrap();
        let old = cache.read_token(ws, dir);
        std::fs::rename(dir, ws.join("old2")).unwrap();
        std::fs::create_dir(dir).unwrap();
        assert_eq!(cache.get_watched(ws, dir, "t000"), None);
        folder.cache(&cache, "t001");
        cache.insert(ws, "t000", cached(1), old);
        assert_eq!(cache.get_watched(ws, dir, "t000"), None);
        folder.cache(&cache, "t000");
        // A parent renamed away, and the path made again.
        std::fs::rename(ws, ws.with_file_name("moved")).unwrap();
        std::fs::create_dir_all(dir).unwrap();
        assert_eq!(cache.get_watched(ws, dir, "t000"), None);
        assert_eq!(cache.len(), 0);
        folder.cache(&cache, "t000");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_folder_taken_off_its_path_without_an_event_is_found_by_its_place() {
        // The workspace is reached through a symbolic link, pointed elsewhere: no watched
        // folder moves, so only the check of the folder's place can tell.
        let Some(folder) = Folder::new() else { return };
        let root = folder.ws.parent().unwrap();
        let other = root.join("other");
        std::fs::create_dir_all(other.join("tasks")).unwrap();
        let link = root.join("link");
        std::os::unix::fs::symlink(&folder.ws, &link).unwrap();
        let dir = link.join("tasks");
        let linked = Folder { _root: tempfile::tempdir().unwrap(), ws: link.clone(), dir };
        let swap = |target: &Path| {
            let new_link = root.join("link.new");
            std::os::unix::fs::symlink(target, &new_link).unwrap();
            std::fs::rename(&new_link, &link).unwrap();
        };
        // Within the check's period the watch's word is taken; once it is due, the place is
        // checked.
        let cache = TaskCache::new(100 * cost()).verifying_every(Duration::from_secs(3600));
        linked.cache(&cache, "t000");
        swap(&other);
        assert_eq!(cache.get_watched(&linked.ws, &linked.dir, "t000"), Some(cached(1)));
        let cache = TaskCache::new(100 * cost()).verifying_every(Duration::ZERO);
        swap(&folder.ws);
        linked.cache(&cache, "t000");
        swap(&other);
        assert_eq!(cache.get_watched(&linked.ws, &linked.dir, "t000"), None);
        assert_eq!(cache.len(), 0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn lost_events_drop_every_entry_the_watch_vouched_for() {
        let Some(folder) = Folder::new() else { return };
        let cache = TaskCache::new(100 * cost());
        let (ws, dir) = (&folder.ws, &folder.dir);
        folder.cache(&cache, "t000");
        cache.insert(ws, "t002", cached(1), token(&cache));
        // More events than the kernel queues (alternating files: equal events in a row merge).
        let limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .map_or(16_384, |text| text.trim().parse().unwrap());
        let mut files: Vec<std::fs::File> = ["a.tmp", "b.tmp"]
            .iter()
            .map(|name| std::fs::File::create(dir.join(name)).unwrap())
            .collect();
        for n in 0..(limit + 100).min(1 << 20) {
            std::io::Write::write_all(&mut files[n % 2], b"x").unwrap();
        }
        assert_eq!(cache.get_watched(ws, dir, "t000"), None);
        // The watch goes on: only the entries it vouched for went.
        assert_eq!(cache.len(), 1);
        folder.cache(&cache, "t000");
    }
}
