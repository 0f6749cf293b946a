//! Safe retries (docs/a2a.md, "Safe retries"): the messages each caller has had accepted, so that a SendMessage that
//! repeats one returns the task the first made instead of starting a second run.
//!
//! A message is known per caller by its `messageId` and compared by its [`digest`]: the SHA-256
//! of the canonical JSON of its parts, `taskId` and `contextId` as the client sent them
//! (docs/a2a.md, "Safe retries"). A message is *accepted* once its task exists (created, or
//! continued), and the record of it is kept:
//!
//! - durably in that task's file (`TaskFile::accepted`), written by the task file writes that
//!   happen anyway (the create of a new task, the first write of a continued one): no write and
//!   no disk flush of its own;
//! - in memory, a bounded map per (workspace, caller), filled from the task folder the first time
//!   a send reaches the workspace in this process (files last changed before the window are only
//!   `stat`ed), then kept current by the sends themselves. Lookups never touch the disk.
//!
//! A record lasts `retry_window` from its acceptance, and a caller keeps at most
//! `retry_records_per_caller` of them (the oldest go first). A message being accepted right now
//! is a pending record: an identical send waits for it (one task, one run), a send with the same
//! `messageId` and another message is refused at once.
//!
//! Invariant: one caller's records are never visible to another (the map is keyed by workspace
//! and caller name, and so is every answer).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use super::error::StoreError;
use super::path::task_files;
use super::path::tasks_dir;

/// What a task file keeps of a message that created or continued the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AcceptedMessage {
    pub message_id: String,
    /// `sha256:` and the 64 hex digits of [`digest`].
    pub digest: String,
    /// When the message was accepted: the record lasts the retry window from then.
    pub at: DateTime<Utc>,
}

/// The digest that tells "the same message" apart: SHA-256 over the JSON object
/// `{"contextId", "parts", "taskId"}` (absent ids as `null`), written with every object's keys
/// sorted and no whitespace. Parts are taken as decoded into the 1.0 model, so the 0.3 and 1.0
/// forms of one message, and any key order, give the same digest.
///
/// # Errors
/// When the parts cannot be serialized (they were decoded from JSON, so they can).
pub fn digest(message: &a2a::Message) -> Result<String, serde_json::Error> {
    let mut object = serde_json::Map::new();
    object.insert("contextId".into(), serde_json::to_value(&message.context_id)?);
    object.insert("parts".into(), serde_json::to_value(&message.parts)?);
    object.insert("taskId".into(), serde_json::to_value(&message.task_id)?);
    let mut canonical = String::new();
    write_canonical(&Value::Object(object), &mut canonical)?;
    let hash = Sha256::digest(canonical.as_bytes());
    let mut text = String::with_capacity(71);
    text.push_str("sha256:");
    for byte in hash {
        text.push(HEX[usize::from(byte >> 4)]);
        text.push(HEX[usize::from(byte & 0x0f)]);
    }
    Ok(text)
}

const HEX: [char; 16] =
    ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'];

/// `value` as JSON with sorted object keys. Recursion is bounded by the depth the JSON parser
/// allows (128), since every value here was parsed from a request.
fn write_canonical(value: &Value, out: &mut String) -> Result<(), serde_json::Error> {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(key)?);
                out.push(':');
                if let Some(inner) = map.get(key) {
                    write_canonical(inner, out)?;
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out)?;
            }
            out.push(']');
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            out.push_str(&serde_json::to_string(value)?);
        }
    }
    Ok(())
}

/// The accepted messages of every workspace this process has served a send for.
pub struct AcceptedMessages {
    window: Duration,
    per_caller: usize,
    /// The largest task file read when filling a workspace's records.
    file_cap: u64,
    workspaces: Mutex<HashMap<PathBuf, Arc<WorkspaceRecords>>>,
    /// The server's clock: a record's age is its time (the files' own times only rule out
    /// files last changed before the window by the system's clock, which the server's never
    /// runs behind).
    clock: crate::clock::Clock,
}

/// One workspace's records, per caller name.
#[derive(Debug)]
pub struct WorkspaceRecords {
    window: Duration,
    per_caller: usize,
    /// Filled from the task folder once, before the first lookup.
    filled: tokio::sync::OnceCell<()>,
    callers: Mutex<HashMap<String, CallerRecords>>,
}

/// One caller's records: by `messageId`, and in acceptance order for the bounds.
#[derive(Debug, Default)]
struct CallerRecords {
    entries: HashMap<String, Entry>,
    /// (acceptance time, messageId) of accepted entries, oldest first. An entry replaced after
    /// it expired leaves a stale pair here, recognised by its time and dropped when reached.
    order: VecDeque<(DateTime<Utc>, String)>,
}

#[derive(Debug)]
enum Entry {
    /// Being accepted: the task id is sent once its task exists; the sender is dropped if the
    /// send fails before that.
    Pending {
        digest: String,
        accepted: watch::Receiver<Option<String>>,
    },
    Accepted {
        task_id: String,
        digest: String,
        at: DateTime<Utc>,
    },
}

/// What a lookup found for a (caller, messageId).
#[derive(Debug)]
pub enum Lookup {
    /// Nothing (or an expired record): this send is new, and holds the claim on the id.
    New(Claim),
    /// The same message was accepted for this task.
    Repeat { task_id: String },
    /// The same message is being accepted now: wait for its task id (`None` and a closed
    /// channel if that send failed, and then look again).
    Pending(watch::Receiver<Option<String>>),
    /// The id was used for a different message.
    Differs,
}

impl AcceptedMessages {
    /// Records kept `window` after acceptance, at most `per_caller` per caller; task files of at
    /// most `file_cap` bytes are read when a workspace is filled.
    pub fn new(window: Duration, per_caller: usize, file_cap: u64) -> Self {
        AcceptedMessages {
            window,
            per_caller,
            file_cap,
            workspaces: Mutex::default(),
            clock: crate::clock::system_clock(),
        }
    }

    /// Ages records by `clock` (the server's) instead of the system's.
    #[must_use]
    pub fn with_clock(self, clock: crate::clock::Clock) -> Self {
        AcceptedMessages { clock, ..self }
    }

    /// `workspace`'s records, filled from its task folder the first time (on the blocking pool;
    /// concurrent first sends wait for the one fill).
    ///
    /// # Errors
    /// [`StoreError::Broken`] when the blocking pool fails the fill (logged); the next send
    /// tries again.
    pub async fn workspace(&self, workspace: &Path) -> Result<Arc<WorkspaceRecords>, StoreError> {
        let records = {
            let mut workspaces = self.workspaces.lock().unwrap_or_else(PoisonError::into_inner);
            match workspaces.get(workspace) {
                Some(records) => records.clone(),
                None => workspaces
                    .entry(workspace.to_path_buf())
                    .or_insert_with(|| {
                        Arc::new(WorkspaceRecords {
                            window: self.window,
                            per_caller: self.per_caller,
                            filled: tokio::sync::OnceCell::new(),
                            callers: Mutex::default(),
                        })
                    })
                    .clone(),
            }
        };
        if records.filled.initialized() {
            return Ok(records);
        }
        let (dir, window, cap) = (tasks_dir(workspace), self.window, self.file_cap);
        let now = (self.clock)();
        records
            .filled
            .get_or_try_init(|| async {
                let found = tokio::task::spawn_blocking(move || {
                    read_records(&dir, SystemTime::now(), now, window, cap)
                })
                .await
                .map_err(|err| {
                    tracing::error!(error = %err, "reading the accepted messages of task files failed");
                    StoreError::Broken
                })?;
                let mut callers = records.lock();
                for (caller, mut found) in found {
                    found.sort_by_key(|(_, message)| message.at);
                    let entry = callers.entry(caller).or_default();
                    for (task_id, message) in found {
                        entry.accept(
                            message.message_id,
                            task_id,
                            message.digest,
                            message.at,
                            self.per_caller,
                        );
                    }
                }
                Ok::<(), StoreError>(())
            })
            .await?;
        Ok(records)
    }
}

impl AcceptedMessages {
    /// Forgets the accepted messages of tasks retention removed from `workspace` (`removed`:
    /// caller name → task ids), so a repeated send is never answered with a task that is gone.
    pub fn forget_tasks(
        &self,
        workspace: &Path,
        removed: &HashMap<String, std::collections::HashSet<String>>,
    ) {
        let records = {
            let workspaces = self.workspaces.lock().unwrap_or_else(PoisonError::into_inner);
            match workspaces.get(workspace) {
                Some(records) => records.clone(),
                None => return,
            }
        };
        let mut callers = records.lock();
        for (caller, ids) in removed {
            if let Some(records) = callers.get_mut(caller) {
                records.entries.retain(|_, entry| match entry {
                    Entry::Accepted { task_id, .. } => !ids.contains(task_id),
                    Entry::Pending { .. } => true,
                });
                let entries = &records.entries;
                records.order.retain(|(_, message_id)| entries.contains_key(message_id));
            }
        }
    }
}

impl WorkspaceRecords {
    /// Looks `message_id` up among `caller`'s records at `now`; claims it when it is new.
    pub fn lookup(
        self: &Arc<Self>,
        caller: &str,
        message_id: &str,
        digest: &str,
        now: DateTime<Utc>,
    ) -> Lookup {
        let mut callers = self.lock();
        let records = match callers.get_mut(caller) {
            Some(records) => records,
            None => callers.entry(caller.to_string()).or_default(),
        };
        match records.entries.get(message_id) {
            Some(Entry::Accepted { task_id, digest: known, at }) if !self.expired(*at, now) => {
                return if known == digest {
                    Lookup::Repeat { task_id: task_id.clone() }
                } else {
                    Lookup::Differs
                };
            }
            Some(Entry::Pending { digest: known, accepted }) => {
                return if known == digest {
                    Lookup::Pending(accepted.clone())
                } else {
                    Lookup::Differs
                };
            }
            Some(Entry::Accepted { .. }) | None => {}
        }
        let (sender, receiver) = watch::channel(None);
        records.entries.insert(
            message_id.to_string(),
            Entry::Pending { digest: digest.to_string(), accepted: receiver },
        );
        Lookup::New(Claim {
            records: self.clone(),
            caller: caller.to_string(),
            message: AcceptedMessage {
                message_id: message_id.to_string(),
                digest: digest.to_string(),
                at: now,
            },
            sender: Some(sender),
        })
    }

    fn expired(&self, at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        expired(self.window, at, now)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, CallerRecords>> {
        self.callers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether a record accepted `at` is past `window` at `now`.
pub fn expired(window: Duration, at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    match chrono::Duration::from_std(window) {
        Ok(window) => at.checked_add_signed(window).is_none_or(|end| end <= now),
        // A window too long for chrono never ends.
        Err(_) => false,
    }
}

impl CallerRecords {
    /// Records an accepted message, then drops what is past the bounds: records beyond
    /// `per_caller`, oldest first.
    fn accept(
        &mut self,
        message_id: String,
        task_id: String,
        digest: String,
        at: DateTime<Utc>,
        per_caller: usize,
    ) {
        self.order.push_back((at, message_id.clone()));
        self.entries.insert(message_id, Entry::Accepted { task_id, digest, at });
        while self.order.len() > per_caller {
            let Some((at, message_id)) = self.order.pop_front() else { break };
            self.forget(&message_id, at);
        }
    }

    /// Drops the records at the front of the order that are past the window at `now`.
    fn expire(&mut self, window: Duration, now: DateTime<Utc>) {
        while let Some((at, _)) = self.order.front()
            && expired(window, *at, now)
        {
            let Some((at, message_id)) = self.order.pop_front() else { break };
            self.forget(&message_id, at);
        }
    }

    /// Removes `message_id`'s record if it is the one accepted `at` (not a newer one or a
    /// pending claim).
    fn forget(&mut self, message_id: &str, at: DateTime<Utc>) {
        if matches!(self.entries.get(message_id), Some(Entry::Accepted { at: when, .. }) if *when == at)
        {
            self.entries.remove(message_id);
        }
    }
}

/// A send's claim on a new (caller, messageId). [`Claim::accept`] records the message for its
/// task; dropped without that (the send failed before its task existed), it gives the id back,
/// and sends waiting on it look again.
#[derive(Debug)]
pub struct Claim {
    records: Arc<WorkspaceRecords>,
    caller: String,
    message: AcceptedMessage,
    sender: Option<watch::Sender<Option<String>>>,
}

impl Claim {
    /// What the task file keeps of the message.
    pub fn message(&self) -> &AcceptedMessage {
        &self.message
    }

    /// The message's task exists: repeats of it now return `task_id`.
    pub fn accept(mut self, task_id: &str) {
        let per_caller = self.records.per_caller;
        let window = self.records.window;
        {
            let mut callers = self.records.lock();
            let records = callers.entry(self.caller.clone()).or_default();
            records.expire(window, self.message.at);
            records.accept(
                self.message.message_id.clone(),
                task_id.to_string(),
                self.message.digest.clone(),
                self.message.at,
                per_caller,
            );
        }
        if let Some(sender) = self.sender.take() {
            sender.send_replace(Some(task_id.to_string()));
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Accepted claims have given their sender away.
        let Some(sender) = self.sender.take() else { return };
        let mut callers = self.records.lock();
        if let Some(records) = callers.get_mut(&self.caller)
            && let Some(Entry::Pending { accepted, .. }) =
                records.entries.get(&self.message.message_id)
            && accepted.same_channel(&sender.subscribe())
        {
            records.entries.remove(&self.message.message_id);
        }
        // Dropping the sender closes the channel: waiters look again.
        drop(sender);
    }
}

/// The records in the task files of `dir` fresh at `now_utc` (the server's clock), per caller,
/// with their task ids. Files whose last change is older than the window by the system's clock
/// (`now`) cannot hold a fresh record (a record is written with its file, and the server's clock
/// never runs behind the system's) and are only `stat`ed. Unreadable or malformed files are skipped: they read as
/// missing everywhere else too.
fn read_records(
    dir: &Path,
    now: SystemTime,
    now_utc: DateTime<Utc>,
    window: Duration,
    cap: u64,
) -> HashMap<String, Vec<(String, AcceptedMessage)>> {
    let mut found: HashMap<String, Vec<(String, AcceptedMessage)>> = HashMap::new();
    let Ok(listing) = task_files(dir) else { return found };
    for listed in listing {
        let old = listed
            .meta
            .modified()
            .ok()
            .and_then(|mtime| now.duration_since(mtime).ok())
            .is_some_and(|age| age > window);
        if old {
            continue;
        }
        let Ok(Some(bytes)) = volcanic_core::safe_file::read_config(&listed.entry.path(), cap)
        else {
            continue;
        };
        let Ok(file) = serde_json::from_slice::<RecordsFile>(&bytes) else { continue };
        if file.id != listed.id() {
            continue;
        }
        for message in file.accepted {
            if !expired(window, message.at, now_utc) {
                found.entry(file.caller.clone()).or_default().push((file.id.clone(), message));
            }
        }
    }
    found
}

/// The fields of a task file the records need; everything else is skipped unparsed.
#[derive(Deserialize)]
struct RecordsFile {
    id: String,
    caller: String,
    #[serde(default)]
    accepted: Vec<AcceptedMessage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(parts: Value, task_id: Option<&str>, context_id: Option<&str>) -> a2a::Message {
        let mut value = serde_json::json!({"messageId": "m", "role": "ROLE_USER", "parts": parts});
        if let Some(id) = task_id {
            value["taskId"] = id.into();
        }
        if let Some(id) = context_id {
            value["contextId"] = id.into();
        }
        serde_json::from_value(value).unwrap()
    }

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    fn records(window_secs: u64, per_caller: usize) -> Arc<WorkspaceRecords> {
        Arc::new(WorkspaceRecords {
            window: Duration::from_secs(window_secs),
            per_caller,
            filled: tokio::sync::OnceCell::new(),
            callers: Mutex::default(),
        })
    }

    #[test]
    fn digest_compares_parts_task_and_context_but_not_key_order_or_metadata() {
        let base = message(serde_json::json!([{"data": {"a": 1, "b": [2, 3]}}]), None, None);
        let reordered = message(serde_json::json!([{"data": {"b": [2, 3], "a": 1}}]), None, None);
        let mut with_metadata = base.clone();
        with_metadata.metadata = serde_json::from_value(serde_json::json!({"trace": "x"})).ok();
        with_metadata.message_id = "other".into();
        let d = |m: &a2a::Message| digest(m).unwrap();
        assert_eq!(d(&base), d(&reordered));
        assert_eq!(d(&base), d(&with_metadata));
        assert!(d(&base).starts_with("sha256:") && d(&base).len() == 71, "{}", d(&base));
        for different in [
            message(serde_json::json!([{"data": {"a": 2, "b": [2, 3]}}]), None, None),
            message(serde_json::json!([{"data": {"a": 1, "b": [2, 3]}}]), Some("t"), None),
            message(serde_json::json!([{"data": {"a": 1, "b": [2, 3]}}]), None, Some("c")),
            message(serde_json::json!([{"text": "{\"a\":1,\"b\":[2,3]}"}]), None, None),
        ] {
            assert_ne!(d(&base), d(&different), "{different:?}");
        }
    }

    #[test]
    fn records_repeat_differ_wait_and_expire() {
        let records = records(60, 10);
        let Lookup::New(claim) = records.lookup("alice", "m1", "d1", at(0)) else { panic!() };
        let Lookup::Pending(mut waiting) = records.lookup("alice", "m1", "d1", at(1)) else {
            panic!("an identical send waits for the first")
        };
        assert!(matches!(records.lookup("alice", "m1", "d2", at(1)), Lookup::Differs));
        // Another caller's ids are its own.
        assert!(matches!(records.lookup("bob", "m1", "d1", at(1)), Lookup::New(_)));
        claim.accept("t1");
        assert_eq!(waiting.borrow_and_update().as_deref(), Some("t1"));
        assert!(matches!(
            records.lookup("alice", "m1", "d1", at(59)),
            Lookup::Repeat { task_id } if task_id == "t1"
        ));
        assert!(matches!(records.lookup("alice", "m1", "d2", at(59)), Lookup::Differs));
        // Past the window the id is new again, whatever the message.
        assert!(matches!(records.lookup("alice", "m1", "d2", at(60)), Lookup::New(_)));
    }

    #[test]
    fn records_of_a_failed_send_are_given_back() {
        let records = records(60, 10);
        let Lookup::New(claim) = records.lookup("alice", "m1", "d1", at(0)) else { panic!() };
        let Lookup::Pending(waiting) = records.lookup("alice", "m1", "d1", at(0)) else { panic!() };
        drop(claim);
        assert!(waiting.has_changed().is_err(), "the waiter learns the claim is gone");
        assert!(matches!(records.lookup("alice", "m1", "d2", at(1)), Lookup::New(_)));
    }

    #[test]
    fn records_keep_at_most_per_caller_newest_first() {
        let records = records(3600, 2);
        for (i, id) in ["m1", "m2", "m3"].into_iter().enumerate() {
            let Lookup::New(claim) = records.lookup("alice", id, "d", at(i as i64)) else {
                panic!()
            };
            claim.accept(&format!("t{i}"));
        }
        assert!(matches!(records.lookup("alice", "m3", "d", at(5)), Lookup::Repeat { .. }));
        assert!(matches!(records.lookup("alice", "m2", "d", at(5)), Lookup::Repeat { .. }));
        assert!(matches!(records.lookup("alice", "m1", "d", at(5)), Lookup::New(_)), "evicted");
    }

    #[test]
    fn records_are_read_back_from_task_files_within_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let fresh = DateTime::<Utc>::from(now) - chrono::Duration::seconds(10);
        let stale = DateTime::<Utc>::from(now) - chrono::Duration::seconds(7200);
        let file = serde_json::json!({"id": "t1", "contextId": "c", "caller": "alice",
            "status": {"state": "TASK_STATE_COMPLETED"},
            "accepted": [{"messageId": "m-old", "digest": "sha256:1", "at": stale},
                         {"messageId": "m-new", "digest": "sha256:2", "at": fresh}]});
        std::fs::write(dir.path().join("t1.json"), file.to_string()).unwrap();
        std::fs::write(dir.path().join("t2.json"), "not json").unwrap();
        let found = read_records(dir.path(), now, now.into(), Duration::from_secs(3600), u64::MAX);
        let ids: Vec<_> =
            found["alice"].iter().map(|(t, m)| (t.as_str(), m.message_id.as_str())).collect();
        assert_eq!(ids, vec![("t1", "m-new")]);
        assert_eq!(found.len(), 1);
    }
}
