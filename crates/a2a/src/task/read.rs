//! How a task file is read (blocking, on the blocking pool): safely (`safe_file`: no FIFO,
//! link or oversized file), parsed as the task it names, and through the settled-task cache,
//! whose watch or a `stat` vouches for an entry. The store decides what to read; this decides
//! how.

use std::io;
use std::path::Path;
use std::sync::Arc;

use volcanic_core::safe_file::{self, RegularFile};

use super::TaskFile;
use super::cache::{CachedTask, TaskCache};
use super::index::is_active;
use super::json::TaskJson;
use super::path::task_path;
use super::stamp::Stamp;

/// A task read for an answer: settled ones as their cached JSON, the others as the file.
#[derive(Debug)]
pub(crate) enum Loaded {
    Settled(Arc<CachedTask>),
    File(Box<TaskFile>),
}

impl Loaded {
    /// The task's generation (`task::events`).
    pub(crate) fn generation(&self) -> u64 {
        match self {
            Loaded::Settled(cached) => cached.generation,
            Loaded::File(file) => file.events.generation(),
        }
    }
}

/// The task file of `id`: `None` when there is none, or when it does not parse as this task (a
/// hand edit gone wrong reads as missing), or when it is not a regular file, is a symbolic link
/// or is over `cap` bytes (with a warning: `safe_file`). Other I/O errors (out of descriptors,
/// permissions) are errors, never "not found", so a failing disk cannot pass for an empty
/// store.
pub(super) fn read_task_file(path: &Path, id: &str, cap: u64) -> io::Result<Option<TaskFile>> {
    Ok(safe_file::read_config(path, cap)?.and_then(|bytes| parse_task_file(&bytes, id)))
}

/// `bytes` as task `id`'s file: `None`, without a log line, when they do not parse or name
/// another task (a broken file is the owner's to fix; it must not stop the server).
pub(super) fn parse_task_file(bytes: &[u8], id: &str) -> Option<TaskFile> {
    serde_json::from_slice::<TaskFile>(bytes).ok().filter(|file| file.task.id == id)
}

/// An opened task file (`shown` is its path) as task `id`'s file, with the stamp of the bytes
/// read (from the open descriptor).
pub(super) fn read_open_task_file(
    file: RegularFile,
    shown: &Path,
    id: &str,
    cap: u64,
) -> io::Result<Option<(TaskFile, Option<Stamp>)>> {
    let stamp = Stamp::of(file.metadata());
    let Some(bytes) = file.read_capped(shown, cap)? else { return Ok(None) };
    Ok(parse_task_file(&bytes, id).map(|file| (file, stamp)))
}

/// [`read_task_file`], with the stamp of the file it read.
pub(super) fn read_task_file_stamped(
    path: &Path,
    id: &str,
    cap: u64,
) -> io::Result<Option<(TaskFile, Option<Stamp>)>> {
    match safe_file::open_config(path)? {
        Some(file) => read_open_task_file(file, path, id, cap),
        None => Ok(None),
    }
}

/// [`read_task_file_stamped`] for task `id` (at `path`) in the watched task folder `folder`,
/// read through it, and whether the watch can vouch for the file: a regular file (not a
/// symbolic link: those are refused anyway) with one link, so a change to it is a change in the
/// folder, which the watch reports.
#[cfg(target_os = "linux")]
pub(super) fn read_watched_task_file(
    folder: &std::os::fd::OwnedFd,
    path: &Path,
    id: &str,
    cap: u64,
) -> io::Result<Option<(TaskFile, Option<Stamp>, bool)>> {
    use rustix::fs::{AtFlags, FileType};
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let name = format!("{id}.json");
    let Some(file) = safe_file::open_config_at(folder.as_fd(), &name, path)? else {
        return Ok(None);
    };
    let meta = file.metadata();
    let link = rustix::fs::statat(folder, &name, AtFlags::SYMLINK_NOFOLLOW)?;
    let vouched = FileType::from_raw_mode(link.st_mode) == FileType::RegularFile
        && link.st_nlink == 1
        && (link.st_dev, link.st_ino) == (meta.dev(), meta.ino());
    Ok(read_open_task_file(file, path, id, cap)?.map(|(file, stamp)| (file, stamp, vouched)))
}

/// What the cache knows of a task file.
pub(super) enum Probe {
    /// Cached, and the file is unchanged since.
    Hit(Arc<CachedTask>),
    /// There is no such file.
    Missing,
    /// The file must be read.
    Miss,
}

/// A cache lookup: without a `stat` when the task folder's watch vouches for the entry, else
/// one `lstat` of the task file at `path` (it never opens the file, and a symbolic link's own
/// stamp matches no entry) and a lookup with its stamp.
pub(super) fn probe(
    cache: &TaskCache,
    workspace: &Path,
    id: &str,
    path: &Path,
) -> io::Result<Probe> {
    if !cache.enabled() {
        return Ok(Probe::Miss);
    }
    if let Some(dir) = path.parent()
        && let Some(cached) = cache.get_watched(workspace, dir, id)
    {
        return Ok(Probe::Hit(cached));
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Probe::Missing),
        Err(err) => return Err(err),
    };
    Ok(Stamp::of(&meta)
        .and_then(|stamp| cache.get(workspace, id, &stamp))
        .map_or(Probe::Miss, Probe::Hit))
}

/// Reads `workspace`'s task `id` through the cache (blocking).
pub(super) fn read_through(
    cache: &TaskCache,
    workspace: &Path,
    id: &str,
    cap: u64,
) -> io::Result<Option<Loaded>> {
    let path = task_path(workspace, id);
    match probe(cache, workspace, id, &path)? {
        Probe::Hit(cached) => Ok(Some(Loaded::Settled(cached))),
        Probe::Missing => Ok(None),
        Probe::Miss => read_and_cache(cache, workspace, id, &path, cap),
    }
}

/// Reads the task file at `path`; a settled task is cached and returned as its JSON
/// (blocking).
pub(super) fn read_and_cache(
    cache: &TaskCache,
    workspace: &Path,
    id: &str,
    path: &Path,
    cap: u64,
) -> io::Result<Option<Loaded>> {
    // Before the read: a write that lands during it keeps what was read out of the cache.
    let mut token = cache.read_token(workspace, path.parent().unwrap_or(workspace));
    // Under a watch, the file is read through the watched folder (see `task::watch`).
    #[cfg(target_os = "linux")]
    let read = match token.folder() {
        Some(folder) => read_watched_task_file(folder, path, id, cap)?,
        None => read_task_file_stamped(path, id, cap)?.map(|(file, stamp)| (file, stamp, false)),
    };
    #[cfg(not(target_os = "linux"))]
    let read = read_task_file_stamped(path, id, cap)?.map(|(file, stamp)| (file, stamp, false));
    let Some((file, stamp, vouched)) = read else { return Ok(None) };
    if !vouched {
        token = token.unwatched();
    }
    let Some(stamp) = stamp.filter(|_| !is_active(&file.task.status.state)) else {
        return Ok(Some(Loaded::File(Box::new(file))));
    };
    let Ok(json) = TaskJson::of(&file.task) else { return Ok(Some(Loaded::File(Box::new(file)))) };
    let generation = file.events.generation();
    let cached =
        Arc::new(CachedTask { stamp, caller: file.caller.into_boxed_str(), generation, json });
    cache.insert(workspace, id, cached.clone(), token);
    Ok(Some(Loaded::Settled(cached)))
}
