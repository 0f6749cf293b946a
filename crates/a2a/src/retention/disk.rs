//! The files retention removes besides task files: callers' session folders in the state
//! folder (`<state dir>/sessions/<prefix>-a2a-<caller>_<contextId>/`), the inbox files a
//! conversation received (`inbox/a2a/<caller>/<name>`), and the trash folder that makes the
//! removal of a session folder whole across a crash: the folder leaves `sessions/` with one
//! rename, and what is in the trash is finished (its inbox files, then the folder) by whoever
//! gets there first, this round or the next one after a restart.
//!
//! It decides nothing: which folder or file goes is `age` and `size`'s choice. Everything here is
//! blocking; nothing here follows a link a session could have planted (inbox files are removed
//! in their folder opened without following links; session folders are out of every sandbox).

use std::io::{self, BufRead};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use crate::auth::callers::is_valid_caller_name;
use crate::inbox::sanitize;
use crate::task::id::is_valid_id;

/// Where session folders wait to be finished: `<state dir>/a2a/retention-trash/`.
const TRASH: [&str; 2] = ["a2a", "retention-trash"];

/// Most names tried for one scope in the trash (`<scope>`, `<scope>.1`, …).
const TRASH_NAMES: u32 = 1000;

/// The `Files:` line of an A2A prompt (`crate::run::files`) names the files a message brought.
const FILES_LINE: &str = "Files: ";

/// A caller's session folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionFolder {
    pub scope: String,
    pub caller: String,
    pub context_id: String,
}

/// The sessions folder of a state folder.
fn sessions_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("sessions")
}

fn trash_dir(state_dir: &Path) -> PathBuf {
    TRASH.iter().fold(state_dir.to_path_buf(), |path, part| path.join(part))
}

/// The caller and context of session scope `scope` of a workspace whose callers' scopes start
/// with `callers_prefix` (`crate::run::pool::callers_scope_prefix`); `None` for any other scope.
pub(crate) fn parse_scope(callers_prefix: &str, scope: &str) -> Option<(String, String)> {
    let (caller, context_id) = scope.strip_prefix(callers_prefix)?.split_once('_')?;
    (is_valid_caller_name(caller) && is_valid_id(context_id))
        .then(|| (caller.to_string(), context_id.to_string()))
}

/// The session folders of the callers whose scopes start with `callers_prefix` (real folders
/// only: a link is not a session).
///
/// # Errors
/// The sessions folder cannot be listed (a missing one holds no sessions).
pub(crate) fn session_folders(
    state_dir: &Path,
    callers_prefix: &str,
) -> io::Result<Vec<SessionFolder>> {
    let entries = match std::fs::read_dir(sessions_dir(state_dir)) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Ok(scope) = entry.file_name().into_string() else { continue };
        let Some((caller, context_id)) = parse_scope(callers_prefix, &scope) else { continue };
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            found.push(SessionFolder { scope, caller, context_id });
        }
    }
    Ok(found)
}

/// The bytes of session folder `scope` (its regular files and those of `spill/`) and when it
/// was last used (the newest change among them: the journal's last append).
pub(crate) fn session_use(state_dir: &Path, scope: &str) -> (u64, Option<SystemTime>) {
    let dir = sessions_dir(state_dir).join(scope);
    let (mut bytes, mut last) = files_use(&dir);
    let (spill, spilled) = files_use(&dir.join("spill"));
    bytes = bytes.saturating_add(spill);
    last = last.max(spilled);
    (bytes, last)
}

/// The stored bytes and the newest change of the regular files directly in `dir`.
fn files_use(dir: &Path) -> (u64, Option<SystemTime>) {
    let mut bytes = 0u64;
    let mut last = None;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_file() {
            bytes = bytes.saturating_add(stored_bytes(&meta));
            last = last.max(meta.modified().ok());
        }
    }
    (bytes, last)
}

/// What a file takes: what is stored of it, never more than its length (a sparse file counts
/// for what it holds, as for the inbox cap).
fn stored_bytes(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.len().min(meta.blocks().saturating_mul(512))
}

/// What [`move_to_trash`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Moved {
    /// The folder is in the trash now, at this path.
    To(PathBuf),
    /// There was no such folder.
    Gone,
    /// Another process has the session open (its lock is held): left alone.
    InUse,
}

/// Takes session folder `scope` out of `sessions/` whole, into the trash (one rename), unless
/// a process holds its lock. Hold the scope in the pool first: this process's own sessions are
/// the pool's to know.
///
/// # Errors
/// The trash cannot be made, or the rename fails.
pub(crate) fn move_to_trash(state_dir: &Path, scope: &str) -> io::Result<Moved> {
    let from = sessions_dir(state_dir).join(scope);
    match std::fs::symlink_metadata(&from) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Ok(Moved::Gone),
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Moved::Gone),
        Err(err) => return Err(err),
    }
    // Held only across the rename: a process that opens the scope after it makes a new folder.
    let _lock = match lock_folder(&from)? {
        Some(lock) => lock,
        None => return Ok(Moved::InUse),
    };
    let trash = trash_dir(state_dir);
    std::fs::create_dir_all(&trash)?;
    for attempt in 0..TRASH_NAMES {
        let name = if attempt == 0 { scope.to_string() } else { format!("{scope}.{attempt}") };
        let to = trash.join(name);
        if std::fs::symlink_metadata(&to).is_ok() {
            continue;
        }
        return match std::fs::rename(&from, &to) {
            Ok(()) => Ok(Moved::To(to)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Moved::Gone),
            Err(err) => Err(err),
        };
    }
    Err(io::Error::other("too many folders of this scope in the retention trash"))
}

/// Takes the session folder's advisory lock (the one an open session holds, `volcanic_core`'s
/// journal), without waiting; `None` when someone holds it.
#[cfg(target_os = "linux")]
fn lock_folder(dir: &Path) -> io::Result<Option<std::fs::File>> {
    use rustix::fs::{FlockOperation, flock};
    let folder = std::fs::File::open(dir)?;
    match flock(&folder, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(folder)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        // A file system that cannot lock a folder: the pool's hold is the only guard there.
        Err(_) => Ok(Some(folder)),
    }
}

#[cfg(not(target_os = "linux"))]
fn lock_folder(dir: &Path) -> io::Result<Option<std::fs::File>> {
    std::fs::File::open(dir).map(Some)
}

/// A session folder in the trash: its path and the scope it was.
pub(crate) struct Trashed {
    pub path: PathBuf,
    pub scope: String,
}

/// What the trash holds (folders only).
pub(crate) fn trashed(state_dir: &Path) -> Vec<Trashed> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(trash_dir(state_dir)).into_iter().flatten().flatten() {
        let Ok(name) = entry.file_name().into_string() else { continue };
        // `<scope>.<n>`: a scope has no dot (prefixes and ids do not).
        let scope = name.split('.').next().unwrap_or_default().to_string();
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            found.push(Trashed { path: entry.path(), scope });
        }
    }
    found
}

/// What finishing a removal took away.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Finished {
    pub inbox_files: usize,
    pub bytes: u64,
}

/// Finishes the removal of a trashed session folder: the inbox files its conversation received
/// (when `owner` names its workspace and caller), then the folder itself.
///
/// # Errors
/// The folder cannot be removed (it stays in the trash for the next round).
pub(crate) fn finish_trashed(trashed: &Path, owner: Option<(&Path, &str)>) -> io::Result<Finished> {
    let mut finished = Finished::default();
    if let Some((workspace, caller)) = owner {
        for name in received_files(trashed, caller) {
            match remove_inbox_file(workspace, caller, &name) {
                Ok(Some(bytes)) => {
                    finished.inbox_files += 1;
                    finished.bytes = finished.bytes.saturating_add(bytes);
                }
                Ok(None) => {}
                Err(err) => tracing::warn!(
                    caller = %caller,
                    file = %name,
                    error = %err,
                    "retention cannot remove an inbox file"
                ),
            }
        }
    }
    let (bytes, _) = files_use(trashed);
    let (spill, _) = files_use(&trashed.join("spill"));
    std::fs::remove_dir_all(trashed)?;
    finished.bytes = finished.bytes.saturating_add(bytes).saturating_add(spill);
    Ok(finished)
}

/// The names of the files in `inbox/a2a/<caller>/` that the conversation journaled in `folder`
/// received: each prompt names them on its `Files:` line (`inbox/a2a/<caller>/<name>`). Only
/// names in the caller's own folder count, so a caller that writes such a line itself can name
/// nothing but its own files.
pub(crate) fn received_files(folder: &Path, caller: &str) -> Vec<String> {
    let own = format!("inbox/a2a/{caller}/");
    let marker = format!("{FILES_LINE}{own}");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_journal = name == "session.jsonl"
            || (name.starts_with("session-") && name.ends_with(".jsonl.archived"));
        if !is_journal || !entry.file_type().is_ok_and(|kind| kind.is_file()) {
            continue;
        }
        let Ok(file) = std::fs::File::open(entry.path()) else { continue };
        for line in io::BufReader::new(file).split(b'\n').map_while(Result::ok) {
            let text = String::from_utf8_lossy(&line);
            if !text.contains(&marker) {
                continue;
            }
            let Ok(value) = serde_json::from_str::<Value>(&text) else { continue };
            collect_named(&value, &own, &mut names);
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The file names on `Files:` lines of every string in `value` that lie in `own`.
fn collect_named(value: &Value, own: &str, names: &mut Vec<String>) {
    match value {
        Value::String(text) => {
            for line in text.lines() {
                let Some(files) = line.strip_prefix(FILES_LINE) else { continue };
                for file in files.split(", ") {
                    let Some(name) = file.trim().strip_prefix(own) else { continue };
                    if !name.is_empty() && sanitize(name) == name {
                        names.push(name.to_string());
                    }
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_named(item, own, names)),
        Value::Object(map) => map.values().for_each(|item| collect_named(item, own, names)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The folder of `caller`'s inbox files, relative to the workspace.
fn caller_folder(caller: &str) -> PathBuf {
    crate::run::containment::caller_inbox(Path::new(""), caller)
}

/// Removes the regular file `name` of `caller`'s inbox folder, reached without following a link
/// on the way; a link there is removed itself, never followed. Returns its stored bytes, or
/// `None` when there is no such file.
///
/// # Errors
/// The folder or the file cannot be reached or removed.
pub(crate) fn remove_inbox_file(
    workspace: &Path,
    caller: &str,
    name: &str,
) -> io::Result<Option<u64>> {
    remove_in(workspace, &caller_folder(caller), name)
}

#[cfg(target_os = "linux")]
fn remove_in(workspace: &Path, folder: &Path, name: &str) -> io::Result<Option<u64>> {
    use rustix::fs::{AtFlags, FileType};
    use volcanic_core::sandbox::beneath;
    let dir = match beneath::open_dir_for_use(workspace, folder, false) {
        Ok(dir) => dir,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let stat = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind == FileType::Directory {
        return Ok(None);
    }
    let bytes = u64::try_from(stat.st_size)
        .unwrap_or(0)
        .min(u64::try_from(stat.st_blocks).unwrap_or(0).saturating_mul(512));
    match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
        Ok(()) => Ok(Some(if kind == FileType::RegularFile { bytes } else { 0 })),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

#[cfg(not(target_os = "linux"))]
fn remove_in(workspace: &Path, folder: &Path, name: &str) -> io::Result<Option<u64>> {
    let path = workspace.join(folder).join(name);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) if !meta.is_dir() => meta,
        Ok(_) => return Ok(None),
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    std::fs::remove_file(&path)?;
    Ok(Some(if meta.is_file() { stored_bytes(&meta) } else { 0 }))
}

/// A file in a caller's inbox folder `inbox/a2a/<caller>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InboxFile {
    pub caller: String,
    pub name: String,
    pub bytes: u64,
    pub modified: Option<SystemTime>,
}

/// The regular files directly in each caller folder of `inbox/a2a/` (a link, for a file or a
/// caller folder, is neither counted nor followed).
pub(crate) fn inbox_files(workspace: &Path) -> Vec<InboxFile> {
    let a2a = crate::inbox::inbox_dir(workspace).join("a2a");
    let mut found = Vec::new();
    for folder in std::fs::read_dir(&a2a).into_iter().flatten().flatten() {
        let Ok(caller) = folder.file_name().into_string() else { continue };
        if !is_valid_caller_name(&caller) || !folder.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        for entry in std::fs::read_dir(folder.path()).into_iter().flatten().flatten() {
            let Ok(name) = entry.file_name().into_string() else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_file() {
                let (bytes, modified) = (stored_bytes(&meta), meta.modified().ok());
                found.push(InboxFile { caller: caller.clone(), name, bytes, modified });
            }
        }
    }
    found
}

/// What a workspace's A2A records take on disk: the owner's view (`volcanic usage`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DiskUse {
    /// Task files in `.volcanic/a2a/tasks/`, and their bytes.
    pub tasks: u64,
    pub task_bytes: u64,
    /// Callers' session folders in the state folder, and their bytes.
    pub sessions: u64,
    pub session_bytes: u64,
    /// Files in callers' inbox folders `inbox/a2a/<caller>/`, and their bytes.
    pub inbox_files: u64,
    pub inbox_bytes: u64,
}

/// What `workspace`'s A2A records take on disk, its callers' sessions being those whose scopes
/// start with `<scope_prefix>-a2a-` in `state_dir`. Blocking: a `stat` per file.
pub fn disk_use(workspace: &Path, state_dir: &Path, scope_prefix: &str) -> DiskUse {
    let mut used = DiskUse::default();
    if let Ok(files) = crate::task::path::task_files(&crate::task::path::tasks_dir(workspace)) {
        for file in files {
            used.tasks += 1;
            used.task_bytes = used.task_bytes.saturating_add(stored_bytes(&file.meta));
        }
    }
    let prefix = format!("{scope_prefix}-a2a-");
    for folder in session_folders(state_dir, &prefix).unwrap_or_default() {
        used.sessions += 1;
        used.session_bytes =
            used.session_bytes.saturating_add(session_use(state_dir, &folder.scope).0);
    }
    for file in inbox_files(workspace) {
        used.inbox_files += 1;
        used.inbox_bytes = used.inbox_bytes.saturating_add(file.bytes);
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_into_caller_and_context_only_under_the_prefix() {
        let prefix = "telegram-42-a2a-";
        assert_eq!(
            parse_scope(prefix, "telegram-42-a2a-travel-bot_ctx_1-x"),
            Some(("travel-bot".into(), "ctx_1-x".into()))
        );
        for other in [
            "telegram-42",
            "telegram-421-a2a-bot_ctx",
            "telegram-42-a2a-Bot_ctx",
            "telegram-42-a2a-bot_",
            "telegram-42-a2a-bot_ctx.json",
            "serve-a2a-bot_ctx",
        ] {
            assert_eq!(parse_scope(prefix, other), None, "{other}");
        }
    }

    #[test]
    fn received_files_are_the_callers_own_files_named_on_a_files_line() {
        let folder = tempfile::tempdir().unwrap();
        let prompt = "[A2A message from \"bot\"]\n\nhello\nFiles: inbox/a2a/bot/20260101-000000-a.txt, \
inbox/a2a/bot/20260101-000000-b.pdf, inbox/a2a/other/x.txt, inbox/a2a/bot/../../MEMORY.md, \
inbox/a2a/bot/sub/c.txt";
        let line = serde_json::json!({"seq": 3, "type": "message", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}});
        let journal = format!("{{\"seq\":0,\"type\":\"session\"}}\n{line}\n{{torn");
        std::fs::write(folder.path().join("session.jsonl"), journal).unwrap();
        assert_eq!(
            received_files(folder.path(), "bot"),
            vec!["20260101-000000-a.txt".to_string(), "20260101-000000-b.pdf".to_string()]
        );
        assert!(received_files(folder.path(), "other").is_empty());
    }

    #[test]
    fn a_link_in_the_inbox_is_removed_itself_and_its_target_stays() {
        let workspace = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("keep.txt");
        std::fs::write(&target, b"owner's").unwrap();
        let folder = workspace.path().join("inbox/a2a/bot");
        std::fs::create_dir_all(&folder).unwrap();
        std::os::unix::fs::symlink(&target, folder.join("link.txt")).unwrap();
        std::fs::write(folder.join("real.txt"), b"1234").unwrap();
        assert_eq!(remove_inbox_file(workspace.path(), "bot", "link.txt").unwrap(), Some(0));
        assert!(target.exists());
        assert!(remove_inbox_file(workspace.path(), "bot", "real.txt").unwrap().is_some());
        assert_eq!(remove_inbox_file(workspace.path(), "bot", "real.txt").unwrap(), None);
        // A caller folder that is a link is not walked into.
        std::fs::remove_dir_all(&folder).unwrap();
        std::os::unix::fs::symlink(outside.path(), &folder).unwrap();
        assert!(remove_inbox_file(workspace.path(), "bot", "keep.txt").is_err());
        assert!(target.exists());
    }
}
