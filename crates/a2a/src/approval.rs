//! The owner's approvals of what callers ask (docs/a2a.md, "Owner approval"): the
//! requests waiting for a decision, and the callers the owner approved once (`first-contact`).
//!
//! Both live in the state folder (`<state dir>/a2a/approvals/<id>.json`,
//! `<state dir>/a2a/approved-callers.json`), which no session can see: callers' sandboxes do not
//! contain it and the owner's sandbox hides it. So no tool, of a caller or of the owner's own
//! sessions, can add, remove or decide a request by touching files; decisions come only through
//! [`crate::A2aServer::decide_approval`], which the control socket (`control.rs`) and the hosts'
//! owner channels call.
//!
//! This module owns the records and their files, and nothing of tasks or runs: what a decision
//! does to a task is `service/approve.rs`. Everything here that touches a file blocks: call it
//! from `spawn_blocking` or at start-up.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// A caller's request waiting for the owner's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    /// What the owner names it by (`volcanic approve <id>`): 8 lower-case hex digits.
    pub id: String,
    /// The workspace of the caller.
    pub workspace: PathBuf,
    pub caller: String,
    pub task_id: String,
    pub context_id: String,
    /// The hop count the request came with (the run starts with it).
    pub hops: u32,
    /// Milliseconds since the epoch.
    pub requested_at: u64,
    /// When the request is rejected if nobody decided, in milliseconds since the epoch.
    pub expires_at: u64,
    /// The request as the owner sees it: the message's text (or the tool call, redacted), at
    /// most [`REQUEST_CHARS`] characters.
    pub request: String,
    /// For a single tool call (callers.json `approveTools`): the tool's name. `None`: the
    /// request is a message (a new task's, or a reply to a task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// For a reply to a task that asked for input: what the task asked (redacted like the
    /// task, at most [`REQUEST_CHARS`] characters). `None`: a new task, or a tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
}

/// The most characters of a request an approval shows.
pub const REQUEST_CHARS: usize = 500;

/// How a host tells the owner that a request waits (the Telegram host: a message with Approve
/// and Deny buttons). Called once per request, on a task of its own; a failure is the host's to
/// log (the owner can still list and decide with `volcanic approvals`).
#[async_trait::async_trait]
pub trait ApprovalNotifier: Send + Sync {
    async fn requested(&self, caller: &crate::auth::Caller, request: &PendingApproval);

    /// Request `id` is no longer pending, however it was decided, so that what asked the owner
    /// can say so. The default does nothing.
    async fn settled(&self, _id: &str, _outcome: Settled) {}
}

/// How a request stopped waiting, as the host's [`ApprovalNotifier`] hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The owner approved it (at the shell, or in another channel).
    Approved,
    /// The owner denied it.
    Denied,
    /// Nobody decided within `A2A__ApprovalTimeout`.
    TimedOut,
    /// The caller canceled its task first.
    Canceled,
}

impl Settled {
    /// How the owner reads it ("timed out").
    pub fn as_str(self) -> &'static str {
        match self {
            Settled::Approved => "approved",
            Settled::Denied => "denied",
            Settled::TimedOut => "timed out",
            Settled::Canceled => "canceled",
        }
    }
}

impl std::fmt::Display for Settled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a decision did: the task, its caller and the state the task is in now. It crosses the
/// control socket as `{"taskId","caller","state"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decided {
    pub task_id: String,
    pub caller: String,
    pub state: DecidedState,
}

/// The state a decision left its task in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DecidedState {
    /// Approved: its run starts (a task), or goes on with the call (a tool call).
    #[serde(rename = "working")]
    Working,
    /// A tool call was denied: the run goes on without it.
    #[serde(rename = "working (the call was refused)")]
    WorkingCallRefused,
    /// Denied: the task is rejected.
    #[serde(rename = "rejected")]
    Rejected,
}

impl DecidedState {
    /// How the owner reads it (`Task … is rejected now.`).
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedState::Working => "working",
            DecidedState::WorkingCallRefused => "working (the call was refused)",
            DecidedState::Rejected => "rejected",
        }
    }
}

impl std::fmt::Display for DecidedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a decision was not applied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecideError {
    #[error(
        "no approval request with this id is waiting (decided already, canceled, or never made)"
    )]
    NotPending,
    #[error("the caller of this request is no longer in callers.json; its task was rejected")]
    CallerGone,
    #[error("the task's context is busy; try again in a moment")]
    Busy,
    #[error("the task could not be changed: {0}")]
    Failed(String),
}

/// Why a request was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    /// The kept messages would pass their cap (`A2A__MaxPendingApprovalBytes`).
    #[error("the messages waiting for the owner would pass {max} bytes")]
    Full { max: u64 },
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The owner's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve,
    Deny { reason: Option<String> },
}

/// The pending requests and the approved callers of one server.
#[derive(Debug)]
pub struct Approvals {
    dir: PathBuf,
    approved_file: PathBuf,
    pending: Mutex<HashMap<String, PendingApproval>>,
    /// The size of each kept message, by request id (a tool call keeps none).
    held: Mutex<HashMap<String, u64>>,
    /// (workspace, caller) the owner approved once.
    approved: Mutex<HashSet<(PathBuf, String)>>,
    /// The runs waiting for a decision on a tool call, by request id (in memory only: a run
    /// does not outlive the process).
    waiters: Mutex<HashMap<String, tokio::sync::oneshot::Sender<Decision>>>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct ApprovedFile {
    callers: Vec<ApprovedCaller>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApprovedCaller {
    workspace: PathBuf,
    caller: String,
    /// Milliseconds since the epoch.
    at: u64,
}

impl Approvals {
    /// The records under `<state_dir>/a2a/`, read back: every pending request (an unreadable
    /// one is logged and left in place) and the approved callers. Creates the folder, mode 0700.
    ///
    /// # Errors
    /// When the folder cannot be created or listed, or the approved callers cannot be read.
    pub fn open(state_dir: &Path) -> io::Result<Self> {
        let a2a = state_dir.join("a2a");
        let dir = a2a.join("approvals");
        create_private_dir(&dir)?;
        let mut pending = HashMap::new();
        let mut held = HashMap::new();
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let read = volcanic_core::safe_file::read_config(&path, 64 * 1024)
                .ok()
                .flatten()
                .and_then(|bytes| serde_json::from_slice::<PendingApproval>(&bytes).ok());
            match read {
                Some(request) if path.file_stem().and_then(|s| s.to_str()) == Some(&request.id) => {
                    let message = dir.join(format!("{}.message", request.id));
                    if let Ok(meta) = std::fs::symlink_metadata(&message) {
                        held.insert(request.id.clone(), meta.len());
                    }
                    pending.insert(request.id.clone(), request);
                }
                _ => {
                    tracing::warn!(path = %path.display(), "an approval request file is unreadable, ignoring it")
                }
            }
        }
        let approved_file = a2a.join("approved-callers.json");
        let approved =
            match volcanic_core::safe_file::read_config(&approved_file, 16 * 1024 * 1024)? {
                None => HashSet::new(),
                Some(bytes) => serde_json::from_slice::<ApprovedFile>(&bytes)
                    .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))?
                    .callers
                    .into_iter()
                    .map(|c| (c.workspace, c.caller))
                    .collect(),
            };
        Ok(Approvals {
            dir,
            approved_file,
            pending: Mutex::new(pending),
            held: Mutex::new(held),
            approved: Mutex::new(approved),
            waiters: Mutex::new(HashMap::new()),
        })
    }

    /// Records a request, durably, before anyone is told of it, with the message whose run it
    /// asks for (kept whole, file bytes included, for the run that approval starts; none for a
    /// tool call), as long as the kept messages stay within `max_held_bytes` together.
    ///
    /// # Errors
    /// [`AddError::Full`] when the message would take the kept messages over `max_held_bytes`;
    /// [`AddError::Io`] when its files cannot be written. Either way nothing is recorded.
    pub fn add(
        &self,
        request: PendingApproval,
        message: Option<&a2a::Message>,
        max_held_bytes: u64,
    ) -> Result<(), AddError> {
        if let Some(message) = message {
            let bytes = serde_json::to_vec(message).map_err(io::Error::other)?;
            let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
            {
                // Counted before it is written, so concurrent requests cannot pass the cap.
                let mut held = self.lock_held();
                let total: u64 = held.values().sum();
                if total.saturating_add(size) > max_held_bytes {
                    return Err(AddError::Full { max: max_held_bytes });
                }
                held.insert(request.id.clone(), size);
            }
            if let Err(err) =
                volcanic_core::atomic::write_atomic(&self.message_path(&request.id), &bytes)
            {
                self.lock_held().remove(&request.id);
                return Err(err.into());
            }
        }
        let written = serde_json::to_vec_pretty(&request)
            .map_err(io::Error::other)
            .and_then(|bytes| volcanic_core::atomic::write_atomic(&self.path(&request.id), &bytes));
        if let Err(err) = written {
            let _ = std::fs::remove_file(self.message_path(&request.id));
            self.lock_held().remove(&request.id);
            return Err(err.into());
        }
        self.lock_pending().insert(request.id.clone(), request);
        Ok(())
    }

    /// Bytes of the messages kept for waiting requests.
    pub fn held_bytes(&self) -> u64 {
        self.lock_held().values().sum()
    }

    /// A receiver of the decision on request `id`, for the run whose tool call waits.
    pub fn wait(&self, id: &str) -> tokio::sync::oneshot::Receiver<Decision> {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner).insert(id.to_string(), sender);
        receiver
    }

    /// Hands `decision` to the run waiting on request `id`; false when none waits (the run has
    /// ended, or the process restarted since).
    pub fn wake(&self, id: &str, decision: Decision) -> bool {
        let sender = self.waiters.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
        sender.is_some_and(|sender| sender.send(decision).is_ok())
    }

    /// The message request `id` asks to run, as it came.
    pub fn message(&self, id: &str) -> Option<a2a::Message> {
        let bytes = std::fs::read(self.message_path(id)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Takes the request `id` out, for whoever decides it: only one caller of this gets it, so
    /// a request is decided once. Its file is removed (a failure is logged: the request is
    /// decided all the same, and a stale file is dropped at the next start when its task is no
    /// longer waiting).
    pub fn take(&self, id: &str) -> Option<PendingApproval> {
        let request = self.lock_pending().remove(id)?;
        self.remove_file(id);
        self.lock_held().remove(id);
        Some(request)
    }

    /// Takes out the request of task `task_id` in `workspace`, if one waits (the task was
    /// canceled, or is being decided some other way).
    pub fn take_task(&self, workspace: &Path, task_id: &str) -> Option<PendingApproval> {
        let id = {
            let pending = self.lock_pending();
            pending
                .values()
                .find(|r| r.workspace == workspace && r.task_id == task_id)
                .map(|r| r.id.clone())?
        };
        self.take(&id)
    }

    /// Every request waiting, oldest first.
    pub fn list(&self) -> Vec<PendingApproval> {
        let mut all: Vec<_> = self.lock_pending().values().cloned().collect();
        all.sort_by(|a, b| (a.requested_at, &a.id).cmp(&(b.requested_at, &b.id)));
        all
    }

    /// The request `id`, if it waits.
    pub fn get(&self, id: &str) -> Option<PendingApproval> {
        self.lock_pending().get(id).cloned()
    }

    /// Whether a request of `caller` in `context_id` waits (the context is busy then).
    pub fn waits_in_context(&self, workspace: &Path, caller: &str, context_id: &str) -> bool {
        self.lock_pending()
            .values()
            .any(|r| r.workspace == workspace && r.caller == caller && r.context_id == context_id)
    }

    /// Whether the owner approved `caller` of `workspace` once (`first-contact`).
    pub fn is_approved(&self, workspace: &Path, caller: &str) -> bool {
        self.lock_approved().contains(&(workspace.to_path_buf(), caller.to_string()))
    }

    /// Remembers that the owner approved `caller` of `workspace`, durably.
    ///
    /// # Errors
    /// When the file cannot be written (then the caller is not remembered: its next task asks
    /// again).
    pub fn remember_approved(&self, workspace: &Path, caller: &str, at: u64) -> io::Result<()> {
        let mut approved = self.lock_approved();
        if !approved.insert((workspace.to_path_buf(), caller.to_string())) {
            return Ok(());
        }
        let mut callers: Vec<ApprovedCaller> = approved
            .iter()
            .map(|(workspace, caller)| ApprovedCaller {
                workspace: workspace.clone(),
                caller: caller.clone(),
                at,
            })
            .collect();
        callers.sort_by(|a, b| (&a.workspace, &a.caller).cmp(&(&b.workspace, &b.caller)));
        let bytes =
            serde_json::to_vec_pretty(&ApprovedFile { callers }).map_err(io::Error::other)?;
        let written = volcanic_core::atomic::write_atomic(&self.approved_file, &bytes);
        if written.is_err() {
            approved.remove(&(workspace.to_path_buf(), caller.to_string()));
        }
        written
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    fn message_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.message"))
    }

    fn remove_file(&self, id: &str) {
        for path in [self.path(id), self.message_path(id)] {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => {
                    tracing::warn!(id, error = %err, "cannot remove a decided approval request's file")
                }
            }
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, PendingApproval>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_held(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_approved(&self) -> std::sync::MutexGuard<'_, HashSet<(PathBuf, String)>> {
        self.approved.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A new request id: 8 lower-case hex digits, short enough to type.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// Whether `id` looks like a request id (what the control socket accepts).
pub fn is_valid_id(id: &str) -> bool {
    id.len() == 8 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `text`, cut to `max_chars` characters with `…` (what an approval shows of a request).
pub fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

pub fn millis_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A duration as people write it (`24h`, `90m`, `45s`).
pub fn describe(duration: std::time::Duration) -> String {
    let secs = duration.as_secs();
    if secs >= 3600 && secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if secs >= 60 && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: &str, task: &str, at: u64) -> PendingApproval {
        PendingApproval {
            id: id.into(),
            workspace: "/ws".into(),
            caller: "bot".into(),
            task_id: task.into(),
            context_id: "c".into(),
            hops: 0,
            requested_at: at,
            expires_at: at + 1000,
            request: "hello".into(),
            tool: None,
            question: None,
        }
    }

    #[test]
    fn requests_survive_a_reopen_and_are_taken_once() {
        let state = tempfile::tempdir().unwrap();
        let approvals = Approvals::open(state.path()).unwrap();
        let message = a2a::Message::new(a2a::Role::User, vec![a2a::Part::text("hi")]);
        approvals.add(request("0000000b", "t2", 2), Some(&message), u64::MAX).unwrap();
        approvals.add(request("0000000a", "t1", 1), Some(&message), u64::MAX).unwrap();
        assert_eq!(approvals.message("0000000a").map(|m| m.parts), Some(message.parts.clone()));
        let again = Approvals::open(state.path()).unwrap();
        let ids: Vec<_> = again.list().into_iter().map(|r| r.id).collect();
        assert_eq!(ids, ["0000000a", "0000000b"]);
        assert!(again.waits_in_context(Path::new("/ws"), "bot", "c"));
        assert_eq!(again.take("0000000a").map(|r| r.task_id), Some("t1".into()));
        assert_eq!(again.take("0000000a"), None, "decided once");
        assert_eq!(again.take_task(Path::new("/ws"), "t2").map(|r| r.id), Some("0000000b".into()));
        assert!(Approvals::open(state.path()).unwrap().list().is_empty(), "files removed");
    }

    #[test]
    fn kept_messages_stay_within_their_cap_across_a_reopen_and_a_decision_frees_room() {
        let state = tempfile::tempdir().unwrap();
        let approvals = Approvals::open(state.path()).unwrap();
        let message = a2a::Message::new(a2a::Role::User, vec![a2a::Part::text("x".repeat(1000))]);
        let size = u64::try_from(serde_json::to_vec(&message).unwrap().len()).unwrap();
        let cap = size * 2;
        approvals.add(request("0000000a", "t1", 1), Some(&message), cap).unwrap();
        approvals.add(request("0000000b", "t2", 2), Some(&message), cap).unwrap();
        let full = approvals.add(request("0000000c", "t3", 3), Some(&message), cap);
        assert!(matches!(full, Err(AddError::Full { max }) if max == cap), "{full:?}");
        assert_eq!(approvals.list().len(), 2, "nothing of the refused one is recorded");
        // A tool call keeps no message: never refused by the cap.
        approvals.add(request("0000000d", "t4", 4), None, cap).unwrap();
        let again = Approvals::open(state.path()).unwrap();
        assert_eq!(again.held_bytes(), cap, "counted from the files after a restart");
        assert!(again.add(request("0000000c", "t3", 3), Some(&message), cap).is_err());
        again.take("0000000a").unwrap();
        again.add(request("0000000c", "t3", 3), Some(&message), cap).unwrap();
        assert_eq!(again.held_bytes(), cap);
    }

    #[test]
    fn approved_callers_are_remembered_across_a_reopen() {
        let state = tempfile::tempdir().unwrap();
        let approvals = Approvals::open(state.path()).unwrap();
        assert!(!approvals.is_approved(Path::new("/ws"), "bot"));
        approvals.remember_approved(Path::new("/ws"), "bot", 5).unwrap();
        let again = Approvals::open(state.path()).unwrap();
        assert!(again.is_approved(Path::new("/ws"), "bot"));
        assert!(!again.is_approved(Path::new("/ws"), "other"));
        assert!(!again.is_approved(Path::new("/other"), "bot"));
    }

    #[test]
    fn ids_are_eight_hex_digits() {
        let id = new_id();
        assert!(is_valid_id(&id), "{id}");
        for bad in ["", "0000000", "000000000", "0000000g", "../../x", "ABCDEF01"] {
            assert!(!is_valid_id(bad), "{bad}");
        }
    }
}
