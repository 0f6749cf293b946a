//! The session journal: one append-only JSONL file per scope, and how it is loaded after a crash.
//!
//! Layout: `<state dir>/sessions/<scope>/session.jsonl` and `spill/` for full outputs of truncated
//! tools; the folder itself carries the scope's advisory lock (one writer per scope across
//! processes, see `ScopeLock`; older versions kept it in a `session.lock` file, still honoured).
//!
//! Each line is `{"seq":N,"type":…}`: a `session` header first, then `run_start`, `message`,
//! `compaction` (the model's view after a compaction, see `session::compact`) and `run_end`
//! entries. A reader skips a line of a type it does not know (and counts it as skipped), so a
//! version without compaction reads a compacted journal whole, as the conversation it was. Every string is passed through the redactor's known secret values before it
//! is written (a line is printed straight from the entry and only redacted string by string when
//! it may hold one, so the order of a line's keys is not fixed). An entry is written before the
//! matching event is emitted.
//!
//! Loading survives a crash: a torn last line is cut off, malformed lines are skipped and counted,
//! tool calls without a result get an error result, and a run without an end is closed as
//! interrupted with a note for the model. Repairs are appended, so the file stays self-describing.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::message::{Message, ToolResult};
use crate::redact::Redactor;
use crate::session::RunFailure;
use crate::session::compact::CompactionRecord;
use crate::{Error, Result};

/// Journal format version written in the header.
const FORMAT_VERSION: u32 = 1;

/// The note appended when a run was cut off by a crash or restart.
pub const INTERRUPTED_NOTE: &str = "The previous run was interrupted (the process stopped). \
Tools may have partially run; check the current state before repeating anything.";

/// The note appended when a run was aborted.
pub const ABORTED_NOTE: &str = "The previous run was aborted by the user. Tools may have \
partially run; check the current state before repeating anything.";

/// The result given to a tool call whose result never made it to the journal.
pub const DANGLING_TOOL_RESULT: &str =
    "tool execution was interrupted (process restarted); it may have partially run";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Line {
    seq: u64,
    #[serde(flatten)]
    entry: Entry,
}

/// A line as it is written: the entry borrowed, printed in one pass.
#[derive(Serialize)]
struct LineRef<'a> {
    seq: u64,
    #[serde(flatten)]
    entry: &'a Entry,
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Entry {
    Session { v: u32, id: String, scope: String, created_at: String, cwd: String },
    RunStart { run_id: String, ts: String },
    Message { run_id: String, ts: String, message: Message },
    RunEnd { run_id: String, ts: String, outcome: RunEnd },
    Compaction { run_id: String, ts: String, compaction: CompactionRecord },
}

/// How a run ended, as the journal records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum RunEnd {
    Completed,
    StoppedByTool {
        tool: String,
    },
    Aborted,
    /// Written as `{"kind":"failed","error":TEXT,"cause":"provider"|"unexpected"}`, `TEXT` being
    /// the failure's `Display`; see [`failure_line`] for lines written before `cause` existed.
    Failed(#[serde(with = "failure_line")] RunFailure),
    MaxTurns,
    /// Closed on load: the process stopped during the run.
    Interrupted,
}

/// How a failed run's end is written and read.
///
/// The line keeps the `error` text that every version wrote, with the same words for the same
/// failure, and adds `cause`; versions that do not know `cause` ignore it (serde skips unknown
/// fields), so the format stays at version 1 (`FORMAT_VERSION`) in both directions. A line without
/// `cause` was written before it existed, when the only failure that was not the provider's
/// carried `LEGACY_UNEXPECTED`: that text reads back as [`RunFailure::Unexpected`], any other as
/// the provider's message. (A provider error of exactly that text, which those versions could
/// not tell apart either, reads back as unexpected; both show the same words.)
mod failure_line {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::session::RunFailure;

    /// What versions before `cause` wrote for a failure that was not the provider's. Never
    /// change it: old journals hold it.
    pub(super) const LEGACY_UNEXPECTED: &str = "the run failed unexpectedly";

    #[derive(Serialize, Deserialize)]
    struct Line {
        error: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<Cause>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Cause {
        Provider,
        Stopped,
        Unexpected,
    }

    pub(super) fn serialize<S: Serializer>(
        failure: &RunFailure,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let cause = match failure {
            RunFailure::Provider { .. } => Cause::Provider,
            RunFailure::Stopped { .. } => Cause::Stopped,
            RunFailure::Unexpected => Cause::Unexpected,
        };
        Line { error: failure.to_string(), cause: Some(cause) }.serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<RunFailure, D::Error> {
        let Line { error, cause } = Line::deserialize(deserializer)?;
        Ok(match cause {
            Some(Cause::Provider) => RunFailure::Provider { message: error },
            Some(Cause::Stopped) => RunFailure::Stopped { reason: error },
            Some(Cause::Unexpected) => RunFailure::Unexpected,
            None if error == LEGACY_UNEXPECTED => RunFailure::Unexpected,
            None => RunFailure::Provider { message: error },
        })
    }
}

/// What loading found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoadReport {
    /// Bytes of a torn last line cut off.
    pub truncated_bytes: u64,
    /// Lines that did not parse and were skipped.
    pub skipped_lines: usize,
    /// Tool calls that got a synthetic error result.
    pub repaired_tool_calls: usize,
    /// Whether an unfinished run was closed as interrupted.
    pub repaired_run: bool,
}

/// An open journal: the append handle and the lock.
pub(crate) struct Journal {
    dir: PathBuf,
    path: PathBuf,
    file: File,
    /// Bytes of whole lines written so far: a failed append is cut back to this.
    len: u64,
    /// Held for the lifetime of the journal; the advisory lock goes with it.
    _lock: ScopeLock,
    next_seq: u64,
    /// Bytes known to be on disk: a barrier covered them ([`Journal::sync`], or a host's barrier
    /// through [`Journal::handle`]). Shared with those handles.
    durable: Arc<AtomicU64>,
}

/// The journal's file, taken into a durability barrier run by someone else (see
/// [`crate::session::Session::journal_file`]): [`JournalFile::covered`] after that barrier
/// returns records that the journal is durable up to where it was when the handle was taken, so
/// closing the session has nothing left to flush.
pub struct JournalFile {
    file: File,
    len: u64,
    durable: Arc<AtomicU64>,
}

impl JournalFile {
    /// A descriptor of the journal file, for the barrier.
    #[must_use]
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Splits the handle: the descriptor to move into the barrier's work, and the mark to set
    /// once the barrier has returned successfully.
    #[must_use]
    pub fn split(self) -> (File, DurableMark) {
        (self.file, DurableMark { len: self.len, durable: self.durable })
    }
}

/// Records, once a barrier covering the journal's file has returned, that the journal is on
/// disk up to the length it had when the file was taken.
pub struct DurableMark {
    len: u64,
    durable: Arc<AtomicU64>,
}

impl DurableMark {
    /// The barrier returned successfully.
    pub fn covered(self) {
        self.durable.fetch_max(self.len, Ordering::AcqRel);
    }
}

/// A loaded journal with the conversation it holds.
pub(crate) struct Loaded {
    pub journal: Journal,
    pub session_id: String,
    pub messages: Vec<Message>,
    /// The latest compaction: the model's view of `messages`.
    pub compaction: Option<CompactionRecord>,
    pub report: LoadReport,
}

pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Journal {
    /// Opens (creating or loading and repairing) the journal in `dir`.
    pub(crate) fn open(dir: &Path, scope: &str, cwd: &Path, redactor: &Redactor) -> Result<Loaded> {
        let created = make_dir(dir).map_err(|e| Error::io(dir, e))?;
        let folder = if created { Folder::JustMade } else { Folder::Found };
        let lock = ScopeLock::take(dir, scope, folder)?;
        let path = dir.join("session.jsonl");
        // A folder this call created holds no journal yet, unless another process got the
        // scope's lock first and wrote one: creating the file exclusively tells, with no look.
        let fresh = if created {
            match OpenOptions::new().append(true).create_new(true).open(&path) {
                Ok(file) => Some(file),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => None,
                Err(err) => return Err(Error::io(&path, err)),
            }
        } else {
            None
        };
        let (lines, mut report, session_id, file, len) = match fresh {
            Some(file) => {
                let id = uuid::Uuid::now_v7().to_string();
                (Vec::new(), LoadReport::default(), id, file, 0)
            }
            None => {
                let (lines, report, session_id) = read_or_set_aside(dir, &path)?;
                let file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| Error::io(&path, e))?;
                let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
                (lines, report, session_id, file, len)
            }
        };

        // Saturating: a damaged or hostile line may carry the largest seq, and a repeated seq is
        // harmless (lines are read in file order) where an overflow would refuse the session.
        let next_seq = lines.iter().map(|l| l.seq).max().map_or(0, |s| s.saturating_add(1));
        let mut journal = Journal {
            dir: dir.to_path_buf(),
            path,
            file,
            len,
            _lock: lock,
            next_seq,
            durable: Arc::new(AtomicU64::new(0)),
        };

        if lines.is_empty() {
            journal.append(
                &Entry::Session {
                    v: FORMAT_VERSION,
                    id: session_id.clone(),
                    scope: scope.to_string(),
                    created_at: now(),
                    cwd: cwd.display().to_string(),
                },
                redactor,
            )?;
            // Not synced: a new journal holding only its header is worth nothing on its own, and
            // one lost or torn by a power loss is set aside and started again on load. The run's
            // end (or the host's barrier, or close) makes it durable with the entries.
        }

        let mut messages = Vec::new();
        let mut pending_calls: Vec<(String, String)> = Vec::new();
        let mut open_run: Option<String> = None;
        let mut compaction = None;
        for line in lines {
            match line.entry {
                Entry::Session { .. } => {}
                Entry::Compaction { compaction: record, .. } => compaction = Some(record),
                Entry::RunStart { run_id, .. } => open_run = Some(run_id),
                Entry::RunEnd { .. } => open_run = None,
                Entry::Message { message, .. } => {
                    match &message {
                        Message::Assistant(assistant) => {
                            pending_calls.extend(
                                assistant.tool_calls().map(|c| (c.id.clone(), c.name.clone())),
                            );
                        }
                        Message::ToolResult(result) => {
                            pending_calls.retain(|(id, _)| *id != result.call_id);
                        }
                        Message::User { .. } | Message::Note { .. } => {}
                    }
                    messages.push(message);
                }
            }
        }

        let run_id = open_run.clone().unwrap_or_default();
        let mut seen = HashSet::new();
        for (call_id, tool) in pending_calls {
            if !seen.insert(call_id.clone()) {
                continue;
            }
            let message = Message::ToolResult(ToolResult {
                call_id,
                tool,
                content: DANGLING_TOOL_RESULT.to_string(),
                is_error: true,
                details: serde_json::Value::Null,
            });
            journal.append(
                &Entry::Message { run_id: run_id.clone(), ts: now(), message: message.clone() },
                redactor,
            )?;
            messages.push(message);
            report.repaired_tool_calls += 1;
        }
        if let Some(run_id) = open_run {
            journal.append(
                &Entry::RunEnd { run_id: run_id.clone(), ts: now(), outcome: RunEnd::Interrupted },
                redactor,
            )?;
            let note = Message::Note { text: INTERRUPTED_NOTE.to_string() };
            journal
                .append(&Entry::Message { run_id, ts: now(), message: note.clone() }, redactor)?;
            messages.push(note);
            report.repaired_run = true;
        }
        if report.repaired_run || report.repaired_tool_calls > 0 {
            journal.sync()?;
        }
        if report != LoadReport::default() {
            tracing::warn!(
                scope,
                truncated_bytes = report.truncated_bytes,
                skipped_lines = report.skipped_lines,
                repaired_tool_calls = report.repaired_tool_calls,
                repaired_run = report.repaired_run,
                "session journal repaired on load"
            );
        }
        Ok(Loaded { journal, session_id, messages, compaction, report })
    }

    /// Appends one entry as one line (one `write` on an append handle).
    pub(crate) fn append(&mut self, entry: &Entry, redactor: &Redactor) -> Result<()> {
        let line = LineRef { seq: self.next_seq, entry };
        let unprintable = |e: serde_json::Error| Error::io(&self.path, std::io::Error::other(e));
        let mut bytes = serde_json::to_vec(&line).map_err(unprintable)?;
        if !redactor.json_is_clean(&bytes) {
            // Rare: a known secret in the entry (or what may be one). Redact string by string
            // through a JSON tree; its keys come out sorted, which readers do not mind.
            let mut value = serde_json::to_value(&line).map_err(unprintable)?;
            redactor.redact_json_values(&mut value);
            bytes = serde_json::to_vec(&value).map_err(unprintable)?;
        }
        bytes.push(b'\n');
        if let Err(err) = self.file.write_all(&bytes) {
            // A short write (disk full) would leave a torn line that the next append glues onto;
            // cut the file back to its last whole line so later entries stay readable.
            if let Err(cut) = self.file.set_len(self.len) {
                tracing::error!(file = %self.path.display(), error = %cut, "cannot cut a failed journal write back");
            }
            return Err(Error::io(&self.path, err));
        }
        self.len += bytes.len() as u64;
        self.next_seq = self.next_seq.saturating_add(1);
        Ok(())
    }

    /// The scope's folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes everything appended so far durable (a shared barrier, see [`crate::durable`]);
    /// nothing to do when a barrier already covered every byte appended.
    pub(crate) fn sync(&self) -> Result<()> {
        let len = self.len;
        if self.is_durable() {
            return Ok(());
        }
        crate::durable::sync_files(&[&self.file]).map_err(|e| Error::io(&self.path, e))?;
        self.durable.fetch_max(len, Ordering::AcqRel);
        Ok(())
    }

    /// Whether a barrier covered every byte appended so far.
    pub(crate) fn is_durable(&self) -> bool {
        self.durable.load(Ordering::Acquire) >= self.len
    }

    /// A second descriptor of the journal file, for a barrier run by the host.
    pub(crate) fn handle(&self) -> Result<JournalFile> {
        let file = self.file.try_clone().map_err(|e| Error::io(&self.path, e))?;
        Ok(JournalFile { file, len: self.len, durable: self.durable.clone() })
    }
}

/// How long opening waits for a lock held by someone else before giving up.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// Moves the scope's journal aside (`session-<timestamp>.jsonl.archived`) so the next open starts
/// a new conversation. Takes the scope's lock first, so an open session (in any process) makes it
/// fail with [`Error::ScopeInUse`]. Returns the archived file, or `None` when there was no journal.
pub(crate) fn archive(dir: &Path, scope: &str) -> Result<Option<PathBuf>> {
    let path = dir.join("session.jsonl");
    if !path.exists() {
        return Ok(None);
    }
    let _lock = ScopeLock::take(dir, scope, Folder::Found)?;
    let aside = dir.join(format!("session-{}.jsonl.archived", now().replace(':', "-")));
    std::fs::rename(&path, &aside).map_err(|e| Error::io(&path, e))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io(dir, e))?;
    Ok(Some(aside))
}

/// The scope's advisory lock: one open session per scope, across processes.
///
/// It is taken on the scope's folder itself (an `flock` on the folder's descriptor), which exists
/// anyway: a new scope costs no lock file. Folders made by versions before this one have a
/// `session.lock` file, which those versions lock; where it exists it is locked too (after the
/// folder, so the order is the same everywhere), so such a folder stays exclusive against an
/// older process as well. A folder without it is exclusive only among processes of this version
/// or later: do not run an older version on the same state folder at the same time. Where the
/// file system cannot lock a folder, `session.lock` is made and locked instead, as before.
struct ScopeLock {
    _dir: Option<File>,
    _legacy: Option<File>,
}

/// Where a scope's folder came from, which says whether an older version's lock file may be in
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Folder {
    /// This call made it: nothing of an older version is in it.
    JustMade,
    /// It was there: an older version may have left its `session.lock`.
    Found,
}

impl ScopeLock {
    /// Takes the lock of the scope in `dir`, looking for a legacy `session.lock` in a folder
    /// this process did not just make ([`Folder::Found`]). Where a folder cannot be locked (NFS
    /// emulates `flock` with byte-range locks, which need a descriptor open for writing), the
    /// `session.lock` file is the lock, made when missing, as before.
    fn take(dir: &Path, scope: &str, folder_was: Folder) -> Result<ScopeLock> {
        let in_use = || Error::ScopeInUse { scope: scope.to_string() };
        let lock_path = dir.join("session.lock");
        let folder = File::open(dir).map_err(|e| Error::io(dir, e))?;
        let (folder, legacy_needed) = match lock_with_patience(&folder) {
            Lock::Taken => (Some(folder), false),
            Lock::Held => return Err(in_use()),
            Lock::Unsupported => (None, true),
        };
        let legacy = if legacy_needed {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)
                .map_err(|e| Error::io(&lock_path, e))?;
            Some(file)
        } else if folder_was == Folder::Found {
            match OpenOptions::new().write(true).open(&lock_path) {
                Ok(file) => Some(file),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
                Err(err) => return Err(Error::io(&lock_path, err)),
            }
        } else {
            None
        };
        if let Some(file) = &legacy {
            match lock_with_patience(file) {
                Lock::Taken => {}
                Lock::Held => return Err(in_use()),
                Lock::Unsupported => {
                    let err = std::io::Error::other("the file system refuses advisory locks");
                    return Err(Error::io(&lock_path, err));
                }
            }
        }
        Ok(ScopeLock { _dir: folder, _legacy: legacy })
    }
}

/// What taking a lock came to.
enum Lock {
    Taken,
    /// Someone else holds it (still after the patience).
    Held,
    /// This descriptor cannot be locked here.
    Unsupported,
}

/// Creates the scope's folder; `true` when this call created it (so it is empty).
fn make_dir(dir: &Path) -> std::io::Result<bool> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent)?;
            }
            match std::fs::create_dir(dir) {
                Ok(()) => Ok(true),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                Err(err) => Err(err),
            }
        }
        Err(err) => Err(err),
    }
}

/// Reads an existing folder's journal: its lines, what loading repaired and the session id of
/// its header. A journal with lines but no valid header is set aside and a new session id made.
fn read_or_set_aside(dir: &Path, path: &Path) -> Result<(Vec<Line>, LoadReport, String)> {
    let (lines, report) =
        if path.exists() { read_lines(path)? } else { (Vec::new(), LoadReport::default()) };
    let header = lines.first().and_then(|line| match &line.entry {
        Entry::Session { id, .. } => Some(id.clone()),
        Entry::RunStart { .. }
        | Entry::Message { .. }
        | Entry::RunEnd { .. }
        | Entry::Compaction { .. } => None,
    });
    match header {
        Some(id) => Ok((lines, report, id)),
        None => {
            if path.exists() && std::fs::metadata(path).map(|m| m.len() > 0).unwrap_or(false) {
                let aside = dir.join(format!("session.jsonl.corrupt-{}", now().replace(':', "-")));
                tracing::warn!(file = %path.display(), "session journal has no valid header, starting a new one");
                std::fs::rename(path, &aside).map_err(|e| Error::io(path, e))?;
            }
            Ok((Vec::new(), report, uuid::Uuid::now_v7().to_string()))
        }
    }
}

/// Takes an exclusive `flock` on `lock`, waiting briefly: a child process forked by another
/// thread at the moment the previous holder closed its descriptor still has a copy of it (and so
/// the lock) until it execs, which takes microseconds to milliseconds.
fn lock_with_patience(lock: &File) -> Lock {
    let started = std::time::Instant::now();
    loop {
        match rustix::fs::flock(lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Lock::Taken,
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => {}
            Err(_) => return Lock::Unsupported,
        }
        if started.elapsed() >= LOCK_PATIENCE {
            return Lock::Held;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Reads every parseable line, cutting a torn tail first.
fn read_lines(path: &Path) -> Result<(Vec<Line>, LoadReport)> {
    let mut report = LoadReport::default();
    let mut file =
        OpenOptions::new().read(true).write(true).open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let keep = last_newline_end(&mut file, len).map_err(|e| Error::io(path, e))?;
    if keep < len {
        file.set_len(keep).map_err(|e| Error::io(path, e))?;
        file.sync_data().map_err(|e| Error::io(path, e))?;
        report.truncated_bytes = len - keep;
    }
    file.seek(SeekFrom::Start(0)).map_err(|e| Error::io(path, e))?;
    let mut lines = Vec::new();
    for raw in BufReader::new(file).split(b'\n') {
        let raw = raw.map_err(|e| Error::io(path, e))?;
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Line>(&raw) {
            Ok(line) => lines.push(line),
            Err(_) => report.skipped_lines += 1,
        }
    }
    Ok((lines, report))
}

/// The length of the file up to and including its last `\n`.
fn last_newline_end(file: &mut File, len: u64) -> std::io::Result<u64> {
    use std::io::Read;
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(pos) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + pos as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
