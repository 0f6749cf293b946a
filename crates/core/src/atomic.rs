//! Atomic file replacement: a temp file in the same folder, a durability barrier, rename, a
//! second barrier for the rename; atomic creation of a file that must not exist yet; and the
//! in-place save of workspace files that a sandbox may cover ([`save_in_place`]).
//!
//! Readers either see the old content or the new one, never a torn file; leftover temp files
//! from a crash start with `.tmp` and are ignored by everything that lists folders. The barriers
//! are [`crate::durable`]'s group commits: concurrent writers on one file system share their
//! syncs.
//!
//! Symbolic links: a temp file is always created new (`O_CREAT | O_EXCL | O_NOFOLLOW`), so a
//! link planted under its name is refused, never written through, and `rename` replaces a link
//! at the target rather than following it. Only [`write_atomic`], for workspace files an owner
//! may link (CLAUDE.md → AGENTS.md), looks up a link at the target and writes to where it
//! points; the other writes are for files the server owns (task files), and a link planted in
//! place of one is replaced by the new file.

use std::io::{self, Write};
use std::path::Path;

/// Replaces `path` with `bytes` atomically and durably, creating parent folders. Keeps the
/// permissions of the file it replaces. When `path` is a symbolic link, the file it points to is
/// replaced and the link stays.
///
/// # Errors
/// Any I/O error of the steps above; the target is untouched when it fails before the rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, Durability::Durable(&[]), Links::Follow)
}

/// How the `write` and `edit` tools save a file outside the session's workspace (inside it, they
/// resolve the path without following any link and save through the opened file instead: see
/// `tool::save`, which keeps everything below): an existing regular file (a link to one is
/// followed) is rewritten in place, keeping the file itself (its inode, so its
/// permissions, owner and hard links too), and made durable; a missing one is created with
/// [`write_atomic`], parent folders included.
///
/// Why not replace it whole, as [`write_atomic`] does: a caller's sandbox covers the owner's
/// hidden and protected files (`.env`, MEMORY.md, `volcanic.toml`) with mounts, and the kernel
/// detaches a mount from every sandbox when the file under it is removed or replaced on the host.
/// A file rewritten in place stays the file under the cover, so the owner's assistant saving
/// MEMORY.md never uncovers it for a caller's call that is running at that moment (see
/// docs/security.md). A read-only file of this user's (a `.env` kept at 0400) is made writable
/// for the moment of the save and gets its mode back. The room for the new content is reserved
/// before the first byte is written, so a full disk fails the save with the old content whole;
/// a crash or a concurrent reader in the middle of the write can still see a torn file, as with
/// most editors. Only a file this user cannot write and does not own is replaced whole, as
/// before.
///
/// # Errors
/// Any I/O error of the steps above.
pub fn save_in_place(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let Some(mut file) = open_in_place(path)? else {
        return write_atomic(path, bytes);
    };
    let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if len > 0 {
        match rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, len) {
            // File systems without it (some network and FUSE ones) save without the reservation.
            Ok(()) | Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => {}
            Err(err) => return Err(err.into()),
        }
    }
    file.write_all(bytes)?;
    file.set_len(len)?;
    crate::durable::sync_files(&[&file])
}

/// The existing regular file at `path` opened for writing in place; `None` when it is missing
/// (or not a regular file), or belongs to another user and is not writable: it is replaced.
fn open_in_place(path: &Path) -> io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let Ok(meta) = std::fs::metadata(path) else { return Ok(None) };
    if !meta.is_file() {
        return Ok(None);
    }
    // Non-blocking: a FIFO put in the file's place since the check above opens at once (and is
    // refused below) instead of hanging the tool.
    let nonblock = i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0);
    let open = || std::fs::File::options().write(true).custom_flags(nonblock).open(path);
    let file = match open() {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
            let mode = meta.permissions().mode();
            let ours = meta.uid() == rustix::process::geteuid().as_raw();
            if !ours || mode & 0o200 != 0 {
                return Ok(None);
            }
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o200))?;
            let opened = open();
            // The mode goes back whether or not the open worked.
            let restored = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
            let file = opened?;
            restored?;
            file
        }
        Err(err) => return Err(err),
    };
    // Opened, then checked: what was opened is the regular file it must be (not a FIFO or a
    // device put in its place since the check above).
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(Some(file))
}

/// Like [`write_atomic`] for a file the server owns: a symbolic link at `path` is replaced by
/// the new file, never followed. And `also` (files or folders written before, e.g. a journal) is
/// made durable by the same barrier as the new content, before the rename: one flush for both
/// when they share a file system.
///
/// # Errors
/// As [`write_atomic`], and the error of syncing one of `also`.
pub fn write_atomic_with(path: &Path, bytes: &[u8], also: &[&std::fs::File]) -> io::Result<()> {
    replace(path, bytes, Durability::Durable(also), Links::Replace)
}

/// Like [`write_atomic_with`] without the barriers: readers and a killed process (SIGKILL, a
/// panic) see the old or the new content, whole, but a power loss or an OS crash before the
/// file system writes it back may leave the previous version, or an empty or torn file (readers
/// of such files must cope). For an interim version of a file whose final version will be
/// written durably; costs no disk flush. A symbolic link at `path` is replaced, never followed.
///
/// # Errors
/// As [`write_atomic`].
pub fn write_atomic_interim(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, Durability::Interim, Links::Replace)
}

/// Creates `path` holding `bytes`, creating parent folders; fails with
/// [`io::ErrorKind::AlreadyExists`] (and leaves the file alone) when `path` exists, a symbolic
/// link included (it is neither followed nor replaced). Like
/// [`write_atomic_interim`] the file is whole from the moment it appears, for readers and across
/// a killed process, and it is not flushed (a power loss may lose it or leave it empty or torn).
///
/// On Linux the content is written to an unnamed file (`O_TMPFILE`) that is then linked into
/// place: no temp name to create and rename away, nothing left behind by a crash, and the link
/// itself is the check that `path` is new. Where that is not available (another system, a file
/// system without `O_TMPFILE`, no `/proc`) a temp file is renamed into place without replacing.
///
/// # Errors
/// [`io::ErrorKind::AlreadyExists`] when `path` exists; any I/O error of the steps above.
pub fn create_new_interim(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    #[cfg(target_os = "linux")]
    {
        let linked = match unnamed::create(dir, path, bytes) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)?;
                unnamed::create(dir, path, bytes)
            }
            other => other,
        };
        if linked? {
            return Ok(());
        }
    }
    let mut tmp = temp_file_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist_noclobber(path).map_err(|e| e.error)?;
    Ok(())
}

/// A new temp file (`.tmp…`, mode 0600) in `dir`, created when missing.
fn temp_file_in(dir: &Path) -> io::Result<tempfile::NamedTempFile> {
    let make = || tempfile::Builder::new().prefix(".tmp").make_in(dir, create_new);
    match make() {
        Ok(tmp) => Ok(tmp),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)?;
            make()
        }
        Err(err) => Err(err),
    }
}

/// Creates the file `path`, which must not exist: `O_CREAT | O_EXCL` refuses any existing name,
/// a symbolic link too (even a dangling one), and `O_NOFOLLOW` says so again for any reader.
fn create_new(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let nofollow = rustix::fs::OFlags::NOFOLLOW.bits();
    std::fs::File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(i32::try_from(nofollow).unwrap_or(0))
        .open(path)
}

#[cfg(target_os = "linux")]
mod unnamed {
    use std::fs::File;
    use std::io::{self, Write};
    use std::os::fd::AsRawFd;
    use std::path::Path;

    use rustix::fs::{AtFlags, CWD, Mode, OFlags};
    use rustix::io::Errno;

    /// Writes `bytes` to an unnamed file in `dir` and links it as `path`. `Ok(false)`: this way
    /// is not available here (nothing was created), use another.
    pub(super) fn create(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<bool> {
        // 0600, as the temp files of the other writes (and so the task files) get.
        let flags = OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC;
        let fd = match rustix::fs::open(dir, flags, Mode::RUSR | Mode::WUSR) {
            Ok(fd) => fd,
            // Kernels or file systems without O_TMPFILE answer one of these.
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => return Ok(false),
            Err(err) => return Err(err.into()),
        };
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        // Linking an unnamed file by its descriptor needs a capability (AT_EMPTY_PATH); its
        // /proc name does not.
        let name = format!("/proc/self/fd/{}", file.as_raw_fd());
        match rustix::fs::linkat(CWD, name.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW) {
            Ok(()) => Ok(true),
            // No /proc (a bare container, a chroot): the unnamed file goes with the descriptor.
            Err(Errno::NOENT) if !Path::new("/proc/self/fd").is_dir() => Ok(false),
            Err(err) => Err(err.into()),
        }
    }
}

#[derive(Clone, Copy)]
enum Durability<'a> {
    Durable(&'a [&'a std::fs::File]),
    Interim,
}

/// Whether a symbolic link at the target is followed or replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Links {
    Follow,
    Replace,
}

fn replace(path: &Path, bytes: &[u8], durability: Durability<'_>, links: Links) -> io::Result<()> {
    let staged = stage(path, bytes, links)?;
    match durability {
        Durability::Interim => {
            staged.tmp.persist(&staged.path).map_err(|e| e.error)?;
        }
        Durability::Durable(also) => {
            let mut files = Vec::with_capacity(also.len() + 1);
            files.push(staged.tmp.as_file());
            files.extend(also.iter().copied());
            crate::durable::sync_files(&files)?;
            let file = staged.tmp.persist(&staged.path).map_err(|e| e.error)?;
            crate::durable::sync_folder_of(&staged.dir, &file)?;
        }
    }
    Ok(())
}

/// New content written to a temp file beside its target, not yet renamed into place.
struct Staged {
    tmp: tempfile::NamedTempFile,
    /// The target (with [`Links::Follow`], a symlink's target: the link survives).
    path: std::path::PathBuf,
    /// The target's folder.
    dir: std::path::PathBuf,
}

/// Writes `bytes` to a temp file in `path`'s folder (created when missing), with the
/// permissions of the regular file it will replace.
fn stage(path: &Path, bytes: &[u8], links: Links) -> io::Result<Staged> {
    let is_link = || std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    // Write through a symlink to its target, so the link survives (CLAUDE.md → AGENTS.md).
    let path = if links == Links::Follow && is_link() {
        std::fs::canonicalize(path)?
    } else {
        path.to_path_buf()
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let mut tmp = temp_file_in(&dir)?;
    tmp.write_all(bytes)?;
    // The replaced file itself, never what a link there points to.
    if let Ok(meta) = std::fs::symlink_metadata(&path)
        && meta.is_file()
    {
        tmp.as_file().set_permissions(meta.permissions())?;
    }
    Ok(Staged { tmp, path, dir })
}

/// Removes the temp files [`write_atomic`] left in `dir` (not recursively) when a process died
/// mid-write: names starting with `.tmp`, regular files, last modified before `started` (so a
/// write in flight in this process is never touched). Returns how many were removed.
///
/// A folder that cannot be read counts as clean; a file that cannot be removed is skipped.
pub fn remove_stale_temp_files(dir: &Path, started: std::time::SystemTime) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        if !entry.file_name().as_encoded_bytes().starts_with(b".tmp") {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        let stale = meta.modified().is_ok_and(|modified| modified < started);
        if meta.is_file() && stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_stale_temp_files_keeps_fresh_ones_and_other_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".tmpOLD123"), b"torn").unwrap();
        std::fs::write(dir.path().join("task.json"), b"{}").unwrap();
        std::fs::create_dir(dir.path().join(".tmpdir")).unwrap();
        let between = std::time::SystemTime::now() + std::time::Duration::from_secs(1);
        // Written "after" the cut-off: a write in flight in this process.
        let fresh = dir.path().join(".tmpNEW456");
        std::fs::write(&fresh, b"in flight").unwrap();
        let later = std::fs::File::options().write(true).open(&fresh).unwrap();
        later.set_modified(between + std::time::Duration::from_secs(5)).unwrap();

        assert_eq!(remove_stale_temp_files(dir.path(), between), 1);
        assert!(!dir.path().join(".tmpOLD123").exists());
        assert!(fresh.exists());
        assert!(dir.path().join("task.json").exists());
        assert!(dir.path().join(".tmpdir").is_dir());
        assert_eq!(remove_stale_temp_files(&dir.path().join("missing"), between), 0);
    }

    #[test]
    fn write_atomic_replaces_content_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/file.txt");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["file.txt"]);
    }

    #[test]
    fn write_atomic_interim_replaces_content_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file.txt");
        write_atomic(&path, b"one").unwrap();
        write_atomic_interim(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["file.txt"]);
    }

    #[test]
    fn create_new_interim_creates_folders_and_refuses_an_existing_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks/one.json");
        create_new_interim(&path, b"first").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "first");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "as the temp files of the other writes");

        let refused = create_new_interim(&path, b"second").unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "first");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("tasks"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["one.json"]);
    }

    #[test]
    fn write_atomic_with_syncs_other_files_too() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let journal_path = other.path().join("journal.jsonl");
        std::fs::write(&journal_path, b"line\n").unwrap();
        let journal = std::fs::File::open(&journal_path).unwrap();
        let path = dir.path().join("task.json");
        write_atomic_with(&path, b"one", &[&journal, &journal]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["task.json"]);
    }

    #[test]
    fn server_writes_replace_a_planted_symlink_and_leave_its_target_alone() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "owner's").unwrap();
        type Write = fn(&Path) -> io::Result<()>;
        let writes: [(&str, Write); 2] = [
            ("interim", |path| write_atomic_interim(path, b"new")),
            ("durable", |path| write_atomic_with(path, b"new", &[])),
        ];
        for (label, write) in writes {
            let path = dir.path().join(format!("{label}.json"));
            std::os::unix::fs::symlink(&outside, &path).unwrap();
            write(&path).unwrap();
            assert!(std::fs::symlink_metadata(&path).unwrap().is_file(), "{label}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "new", "{label}");
            assert_eq!(std::fs::read_to_string(&outside).unwrap(), "owner's", "{label}");
        }
        // A new file refuses a link planted in its place, and the link's target is untouched.
        let planted = dir.path().join("created.json");
        std::os::unix::fs::symlink(dir.path().join("nowhere.txt"), &planted).unwrap();
        let refused = create_new_interim(&planted, b"new").unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AlreadyExists);
        assert!(!dir.path().join("nowhere.txt").exists());
    }

    #[test]
    fn temp_files_are_never_created_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "owner's").unwrap();
        let planted = dir.path().join(".tmpPLANTED");
        std::os::unix::fs::symlink(&outside, &planted).unwrap();
        let dangling = dir.path().join(".tmpDANGLING");
        std::os::unix::fs::symlink(dir.path().join("nowhere.txt"), &dangling).unwrap();
        for path in [&planted, &dangling] {
            assert_eq!(create_new(path).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        }
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "owner's");
        assert!(!dir.path().join("nowhere.txt").exists());
    }

    #[test]
    fn write_atomic_through_a_symlink_keeps_the_link() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "old").unwrap();
        std::os::unix::fs::symlink("AGENTS.md", dir.path().join("CLAUDE.md")).unwrap();
        write_atomic(&dir.path().join("CLAUDE.md"), b"new").unwrap();
        assert!(
            std::fs::symlink_metadata(dir.path().join("CLAUDE.md"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(dir.path().join("AGENTS.md")).unwrap(), "new");
    }

    #[test]
    fn save_in_place_keeps_the_file_and_creates_what_is_missing() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("MEMORY.md");
        std::fs::write(&path, "a long first version of the memory file").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let before = std::fs::metadata(&path).unwrap();
        let other = dir.path().join("hard-link");
        std::fs::hard_link(&path, &other).unwrap();

        save_in_place(&path, b"short").unwrap();
        let after = std::fs::metadata(&path).unwrap();
        assert_eq!((after.dev(), after.ino()), (before.dev(), before.ino()), "the same file");
        assert_eq!(after.permissions().mode() & 0o777, 0o640);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "short", "no old tail left");
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "short");

        // Through a link: the target is rewritten, the link stays.
        std::os::unix::fs::symlink("MEMORY.md", dir.path().join("CLAUDE.md")).unwrap();
        save_in_place(&dir.path().join("CLAUDE.md"), b"via link").unwrap();
        assert!(std::fs::symlink_metadata(dir.path().join("CLAUDE.md")).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "via link");

        // Missing: created with its folders, leaving no temp file.
        let new = dir.path().join("a/b/new.txt");
        save_in_place(&new, b"fresh").unwrap();
        assert_eq!(std::fs::read_to_string(&new).unwrap(), "fresh");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("a/b")).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn save_in_place_replaces_a_fifo_without_waiting_for_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600))
            .unwrap();
        // Not a regular file: replaced whole, as a missing one would be created.
        save_in_place(&fifo, b"x").unwrap();
        assert_eq!(std::fs::read_to_string(&fifo).unwrap(), "x");
    }
}
