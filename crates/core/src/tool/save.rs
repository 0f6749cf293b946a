//! How `write` and `edit` reach a file of the session's workspace: resolved beneath the
//! workspace folder without following a link a caller's session could have planted, then read
//! and saved through what was opened, never by its path again.
//!
//! A caller with the `workspace` tier can rename, replace and link anything in the workspace
//! while the owner's assistant saves there. Resolving `shared/proposal.md` the ordinary way
//! would let a link planted on the path (`shared -> /elsewhere`, `proposal.md -> ../MEMORY.md`),
//! even one swapped in between a check and the open, decide which file receives the owner's
//! text. So the path is walked from an open descriptor of the workspace folder one component at
//! a time with `O_NOFOLLOW` ([`crate::sandbox::beneath`]); missing folders are made on the way
//! (`mkdirat`); the last component is opened in its folder with `O_NOFOLLOW` too. The one link
//! accepted there is an owner's link between two context files of one folder (`CLAUDE.md` →
//! `AGENTS.md`) whose target is a regular file (not another link). What follows works on the
//! opened file: it is reopened by name in its folder's descriptor with `O_NOFOLLOW` and must be
//! the same file (device and inode), its mode is changed through its descriptor, and a new file
//! is created in the folder's descriptor and renamed into place there.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{CONTEXT_FILES, ToolError};
use crate::sandbox::beneath::{self, Identity};

/// The largest file `edit` loads (10 MiB): it reads the whole file into memory and rewrites it,
/// so a huge (or sparse) file planted in the workspace would stall the call.
pub(crate) const EDIT_MAX_BYTES: u64 = 10 * 1024 * 1024;

/// `path` relative to the workspace `cwd` when it lies in it (both compared after lexical
/// normalisation), the empty path for the workspace itself; `None` outside.
pub(crate) fn in_workspace(cwd: &Path, path: &Path) -> Option<PathBuf> {
    let cwd = crate::sandbox::normalize_path(cwd);
    let path = crate::sandbox::normalize_path(path);
    path.strip_prefix(&cwd).ok().map(Path::to_path_buf)
}

/// What a name resolved beneath the workspace holds.
#[derive(Debug)]
pub(crate) enum Found {
    Missing,
    /// A regular file, opened `O_PATH` (so without reading or writing it), and its identity.
    File(OwnedFd, Identity),
    Folder,
    /// A FIFO, socket or device.
    Other,
}

/// A file name beneath the workspace: its folder (open for use) and the name in that folder of
/// the file to read or save (the context file a permitted link points to, when the name given
/// was such a link), with what is there.
#[derive(Debug)]
pub(crate) struct Resolved {
    pub(crate) dir: File,
    pub(crate) name: OsString,
    pub(crate) found: Found,
}

/// Resolves `relative` beneath the folder `root` without following any link on the way or at
/// the end, making missing folders with `create`. `shown` names the path in messages.
///
/// # Errors
/// A link refused (naming it and its target), a file where a folder belongs, or an I/O error.
pub(crate) fn resolve(
    root: &Path,
    relative: &Path,
    create: bool,
    shown: &str,
) -> Result<Resolved, ResolveError> {
    let root = beneath::open_root(root)?;
    let Some(name) = relative.file_name() else {
        // The workspace itself.
        return Ok(Resolved { dir: open_folder(&root)?, name: ".".into(), found: Found::Folder });
    };
    let parent = relative.parent().unwrap_or(Path::new(""));
    let walked = beneath::open_dir(&root, parent, create)?;
    let dir = open_folder(walked.last().map_or(&root, |(_, fd)| fd))?;
    look(dir, name, shown)
}

/// Why [`resolve`] gave up.
#[derive(Debug)]
pub(crate) enum ResolveError {
    /// A symbolic link where a file must be, not an owner's context-file link.
    Link(String),
    Io(io::Error),
}

impl From<io::Error> for ResolveError {
    fn from(err: io::Error) -> Self {
        ResolveError::Io(err)
    }
}

impl From<Errno> for ResolveError {
    fn from(err: Errno) -> Self {
        ResolveError::Io(err.into())
    }
}

impl ResolveError {
    /// The tool's error: `doing` is what failed ("write", "read").
    pub(crate) fn for_tool(self, doing: &str, shown: &str) -> ToolError {
        match self {
            ResolveError::Link(message) => ToolError(message),
            ResolveError::Io(err) if err.kind() == io::ErrorKind::NotFound && doing == "read" => {
                ToolError(format!("file not found: {shown}"))
            }
            ResolveError::Io(err) => ToolError(format!("could not {doing} {shown}: {err}")),
        }
    }
}

/// A folder opened (without following a link: `fd` was) for creating and opening files in it.
fn open_folder(fd: &OwnedFd) -> io::Result<File> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::openat(fd, ".", flags, Mode::empty())?))
}

/// Opens `name` in `dir` without following it (`O_PATH`) and says what it is.
fn open_path(dir: &File, name: &OsStr) -> io::Result<Option<(OwnedFd, FileType)>> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => {
            let kind = FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode);
            Ok(Some((fd, kind)))
        }
        Err(Errno::NOENT) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

fn is_context_file(name: &OsStr) -> bool {
    name.to_str().is_some_and(|name| CONTEXT_FILES.contains(&name))
}

/// What `name` in `dir` is; a link is accepted only as an owner's context-file link to a regular
/// file beside it, and then the file it points to is what is returned.
fn look(dir: File, name: &OsStr, shown: &str) -> Result<Resolved, ResolveError> {
    let Some((fd, kind)) = open_path(&dir, name)? else {
        return Ok(Resolved { dir, name: name.to_owned(), found: Found::Missing });
    };
    let found = match kind {
        FileType::Symlink => {
            // The link itself, read through its descriptor: the one checked is the one read.
            let target = rustix::fs::readlinkat(&fd, "", Vec::new())?;
            let target = OsStr::from_bytes(target.as_bytes()).to_owned();
            let refused = |why: &str| {
                ResolveError::Link(format!(
                    "{shown} is a symbolic link to {}{why}; write and edit do not save through a \
                     link (one planted in the workspace could lead the save into another file). \
                     Write to the file it points at by its own path if that is what you mean",
                    Path::new(&target).display()
                ))
            };
            let bare = !target.as_bytes().contains(&b'/') && !target.is_empty();
            if !(bare && is_context_file(name) && is_context_file(&target)) {
                return Err(refused(""));
            }
            // The target, in the same folder, never followed: a chain of links is refused.
            match open_path(&dir, &target)? {
                Some((fd, FileType::RegularFile)) => {
                    let id = Identity::of(&fd)?;
                    return Ok(Resolved { dir, name: target, found: Found::File(fd, id) });
                }
                Some((_, FileType::Symlink)) => {
                    return Err(refused(", itself a symbolic link"));
                }
                _ => return Err(refused(", which is not a regular file")),
            }
        }
        FileType::RegularFile => {
            let id = Identity::of(&fd)?;
            Found::File(fd, id)
        }
        FileType::Directory => Found::Folder,
        _ => Found::Other,
    };
    Ok(Resolved { dir, name: name.to_owned(), found })
}

/// Opens the resolved regular file again by its name in its folder with `flags` (and
/// `O_NOFOLLOW | O_NONBLOCK`: a link or a FIFO swapped in is refused, never followed or waited
/// on); it must still be the file that was checked.
fn reopen(resolved: &Resolved, id: Identity, flags: OFlags) -> io::Result<File> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = File::from(rustix::fs::openat(&resolved.dir, &resolved.name, flags, Mode::empty())?);
    if Identity::of(&file)? != id || !file.metadata()?.is_file() {
        return Err(io::Error::other("the file was replaced while it was being opened"));
    }
    Ok(file)
}

/// Reads the resolved file whole, refusing one over `max` bytes.
///
/// # Errors
/// Missing, a folder, not a regular file, too large, or an I/O error.
pub(crate) fn read(resolved: &Resolved, max: u64, shown: &str) -> Result<Vec<u8>, ToolError> {
    let id = match &resolved.found {
        Found::File(_, id) => *id,
        Found::Missing => return Err(ToolError(format!("file not found: {shown}"))),
        Found::Folder => return Err(ToolError(format!("{shown} is a folder"))),
        Found::Other => {
            return Err(ToolError(format!(
                "could not read {shown}: not a regular file (a FIFO, socket or device); only \
                 files can be read"
            )));
        }
    };
    let could_not = |err: io::Error| ToolError(format!("could not read {shown}: {err}"));
    let file = reopen(resolved, id, OFlags::RDONLY).map_err(could_not)?;
    read_capped(file, max, shown)
}

/// Reads `file` whole unless it holds more than `max` bytes.
///
/// # Errors
/// Too large, or an I/O error.
pub(crate) fn read_capped(file: File, max: u64, shown: &str) -> Result<Vec<u8>, ToolError> {
    let could_not = |err: io::Error| ToolError(format!("could not read {shown}: {err}"));
    let size = file.metadata().map_err(could_not)?.len();
    if size > max {
        return Err(too_large(shown, size, max));
    }
    let mut bytes = Vec::new();
    // One byte more than allowed tells a file that grew since the size was taken.
    file.take(max + 1).read_to_end(&mut bytes).map_err(could_not)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max {
        return Err(too_large(shown, u64::try_from(bytes.len()).unwrap_or(u64::MAX), max));
    }
    Ok(bytes)
}

fn too_large(shown: &str, size: u64, max: u64) -> ToolError {
    ToolError(format!(
        "{shown} is {size} bytes; edit loads files of at most {max} bytes ({} MiB). Use bash \
         (sed, a script) to change a file this large",
        max / (1024 * 1024)
    ))
}

/// Saves `bytes` as the resolved file: an existing regular file is rewritten in place (same
/// inode, so its permissions, owner and hard links stay, and a sandbox's cover over it holds),
/// with room reserved first and a durable sync after; a read-only file of this user is made
/// writable through its descriptor for the moment and gets its mode back. A missing file, a
/// FIFO, socket or device, or a file this user neither can write nor owns is replaced whole by
/// a new file made in the folder's descriptor and renamed into place there.
///
/// # Errors
/// A folder, the file replaced while it was being opened, or an I/O error.
pub(crate) fn save(resolved: &Resolved, bytes: &[u8]) -> io::Result<()> {
    match &resolved.found {
        Found::File(fd, id) => {
            let stat = rustix::fs::fstat(fd)?;
            let mode = stat.st_mode & 0o7777;
            match open_in_place(resolved, fd, *id, mode, stat.st_uid)? {
                Some(file) => write_in_place(&file, bytes),
                None => replace(&resolved.dir, &resolved.name, bytes, Some(mode)),
            }
        }
        Found::Missing | Found::Other => replace(&resolved.dir, &resolved.name, bytes, None),
        Found::Folder => Err(io::Error::new(io::ErrorKind::IsADirectory, "a folder")),
    }
}

/// The checked file opened for writing; `None` when this user cannot write it and does not own
/// it (it is replaced).
fn open_in_place(
    resolved: &Resolved,
    fd: &OwnedFd,
    id: Identity,
    mode: u32,
    uid: u32,
) -> io::Result<Option<File>> {
    let open = || reopen(resolved, id, OFlags::WRONLY);
    match open() {
        Ok(file) => Ok(Some(file)),
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
            let ours = uid == rustix::process::geteuid().as_raw();
            if !ours || mode & 0o200 != 0 {
                return Ok(None);
            }
            chmod_fd(resolved, fd, id, mode | 0o200)?;
            let opened = open();
            // The mode goes back whether or not the open worked.
            let restored = chmod_fd(resolved, fd, id, mode);
            let file = opened?;
            restored?;
            Ok(Some(file))
        }
        Err(err) => Err(err),
    }
}

/// Changes the mode of the file open as `fd` (`O_PATH`), never of what a name points at: by
/// its `/proc/self/fd` name, which is that very file; without `/proc`, through the file opened
/// for reading in its folder and checked to be the same.
fn chmod_fd(resolved: &Resolved, fd: &OwnedFd, id: Identity, mode: u32) -> io::Result<()> {
    let mode = Mode::from_raw_mode(mode);
    let proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
    match rustix::fs::chmod(proc.as_str(), mode) {
        Ok(()) => Ok(()),
        Err(Errno::NOENT) if !Path::new("/proc/self/fd").is_dir() => {
            let file = reopen(resolved, id, OFlags::RDONLY)?;
            Ok(rustix::fs::fchmod(&file, mode)?)
        }
        Err(err) => Err(err.into()),
    }
}

fn write_in_place(mut file: &File, bytes: &[u8]) -> io::Result<()> {
    let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if len > 0 {
        match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, len) {
            // File systems without it (some network and FUSE ones) save without the reservation.
            Ok(()) | Err(Errno::OPNOTSUPP | Errno::NOSYS) => {}
            Err(err) => return Err(err.into()),
        }
    }
    file.write_all(bytes)?;
    file.set_len(len)?;
    crate::durable::sync_files(&[file])
}

/// Replaces `name` in `dir` with a new file holding `bytes` (mode `mode`, else 0600): a temp
/// file made new in `dir` (`O_CREAT | O_EXCL | O_NOFOLLOW`), made durable, renamed over `name`
/// in `dir` (a link there is replaced, not followed), and the folder made durable.
fn replace(dir: &File, name: &OsStr, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    let (tmp, mut file) = temp_file(dir)?;
    let written = (|| {
        file.write_all(bytes)?;
        if let Some(mode) = mode {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
        }
        crate::durable::sync_files(&[&file])?;
        Ok::<_, io::Error>(rustix::fs::renameat(dir, &tmp, dir, name)?)
    })();
    if let Err(err) = written {
        let _ = rustix::fs::unlinkat(dir, &tmp, rustix::fs::AtFlags::empty());
        return Err(err);
    }
    crate::durable::sync_files(&[dir])
}

/// A new temp file `.tmp…` (mode 0600) in `dir`, as [`crate::atomic`]'s temp files are named
/// (so leftovers of a crash are recognised and removed the same way).
fn temp_file(dir: &File) -> io::Result<(OsString, File)> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for _ in 0..100 {
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = OsString::from(format!(".tmp{}-{nanos:x}-{n}", std::process::id()));
        match rustix::fs::openat(dir, &name, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => return Ok((name, File::from(fd))),
            Err(Errno::EXIST) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "no free temp file name"))
}

/// For tests: the folder descriptor of an already open folder, as [`resolve`] gives it.
#[cfg(test)]
pub(crate) fn look_in(dir: &File, name: &OsStr, shown: &str) -> Result<Resolved, ResolveError> {
    look(dir.try_clone()?, name, shown)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    use serde_json::json;

    use super::*;
    use crate::tool::edit::EditTool;
    use crate::tool::write::WriteTool;
    use crate::tool::{Tool, test_context};

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    async fn write(dir: &Path, path: &str, content: &str) -> Result<(), ToolError> {
        let args = json!({"path": path, "content": content});
        WriteTool.execute(args, test_context(dir)).await.map(|_| ())
    }

    async fn edit(dir: &Path, path: &str, old: &str, new: &str) -> Result<(), ToolError> {
        let args = json!({"path": path, "old_text": old, "new_text": new});
        EditTool.execute(args, test_context(dir)).await.map(|_| ())
    }

    /// A workspace with the owner's MEMORY.md and a caller's `shared/proposal.md`.
    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("MEMORY.md"), "the owner's memory").unwrap();
        std::fs::create_dir(dir.path().join("shared")).unwrap();
        std::fs::write(dir.path().join("shared/proposal.md"), "draft").unwrap();
        dir
    }

    #[test]
    fn a_link_swapped_in_after_the_check_is_not_followed() {
        let dir = workspace();
        let shared = File::open(dir.path().join("shared")).unwrap();
        let resolved = look_in(&shared, OsStr::new("proposal.md"), "shared/proposal.md").unwrap();
        assert!(matches!(resolved.found, Found::File(..)));
        // The caller swaps the checked file for a link to the owner's memory.
        std::fs::rename(dir.path().join("shared/proposal.md"), dir.path().join("shared/old"))
            .unwrap();
        symlink("../MEMORY.md", dir.path().join("shared/proposal.md")).unwrap();
        assert!(save(&resolved, b"the owner's proposal").is_err());
        assert_eq!(read(&dir.path().join("MEMORY.md")), "the owner's memory");

        // Or for another regular file (a hard link to it, say): not the file that was checked.
        std::fs::remove_file(dir.path().join("shared/proposal.md")).unwrap();
        std::fs::write(dir.path().join("shared/proposal.md"), "another").unwrap();
        let err = save(&resolved, b"the owner's proposal").unwrap_err();
        assert!(err.to_string().contains("replaced"), "{err}");
        assert_eq!(read(&dir.path().join("shared/proposal.md")), "another");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_caller_flipping_a_file_and_a_link_never_gets_the_save_into_memory() {
        let dir = workspace();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flipper = {
            let (shared, stop) = (dir.path().join("shared"), stop.clone());
            std::thread::spawn(move || {
                let (name, other) = (shared.join("proposal.md"), shared.join(".other"));
                symlink("../MEMORY.md", &other).unwrap();
                let mut rounds = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && rounds < 10_000_000 {
                    // Swapped atomically: the name is always the file or the link.
                    let flags = rustix::fs::RenameFlags::EXCHANGE;
                    rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        &name,
                        rustix::fs::CWD,
                        &other,
                        flags,
                    )
                    .unwrap();
                    rounds += 1;
                }
                rounds
            })
        };
        let mut saved = 0;
        for round in 0..400 {
            if write(dir.path(), "shared/proposal.md", &format!("proposal {round}")).await.is_ok() {
                saved += 1;
            }
            assert_eq!(read(&dir.path().join("MEMORY.md")), "the owner's memory", "round {round}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rounds = flipper.join().unwrap();
        assert!(rounds > 400, "the flipper ran ({rounds} rounds)");
        assert!(saved > 0, "some saves landed on the regular file");
    }

    #[test]
    fn the_read_only_save_changes_the_mode_of_the_checked_file_only() {
        let dir = workspace();
        let memory = dir.path().join("MEMORY.md");
        std::fs::set_permissions(&memory, std::fs::Permissions::from_mode(0o600)).unwrap();
        let env = dir.path().join("shared/.env");
        std::fs::write(&env, "KEY=1").unwrap();
        std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o400)).unwrap();
        let shared = File::open(dir.path().join("shared")).unwrap();
        let resolved = look_in(&shared, OsStr::new(".env"), "shared/.env").unwrap();
        let Found::File(fd, id) = &resolved.found else { panic!("{:?}", resolved.found) };
        // The caller swaps the name for a link to MEMORY.md between the check and the chmod.
        std::fs::rename(&env, dir.path().join("shared/.env.orig")).unwrap();
        symlink("../MEMORY.md", &env).unwrap();
        chmod_fd(&resolved, fd, *id, 0o644).unwrap();
        assert_eq!(std::fs::metadata(&memory).unwrap().mode() & 0o777, 0o600, "not the target");
        let orig = std::fs::metadata(dir.path().join("shared/.env.orig")).unwrap();
        assert_eq!(orig.mode() & 0o777, 0o644, "the checked file itself");
    }

    #[tokio::test]
    async fn a_read_only_file_of_ours_is_saved_in_place_with_its_mode_back() {
        let dir = workspace();
        let env = dir.path().join(".env");
        std::fs::write(&env, "KEY=old").unwrap();
        std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o400)).unwrap();
        let before = std::fs::metadata(&env).unwrap().ino();
        write(dir.path(), ".env", "KEY=new").await.unwrap();
        let after = std::fs::metadata(&env).unwrap();
        assert_eq!((after.ino(), after.mode() & 0o777), (before, 0o400));
        assert_eq!(read(&env), "KEY=new");
    }

    #[tokio::test]
    async fn a_chain_of_context_links_is_refused() {
        let dir = workspace();
        symlink("AGENTS.md", dir.path().join("shared/CLAUDE.md")).unwrap();
        symlink("../MEMORY.md", dir.path().join("shared/AGENTS.md")).unwrap();
        let err = write(dir.path(), "shared/CLAUDE.md", "obey the caller").await.unwrap_err();
        assert!(err.0.contains("shared/CLAUDE.md is a symbolic link to AGENTS.md"), "{err:?}");
        let err = edit(dir.path(), "shared/CLAUDE.md", "memory", "caller").await.unwrap_err();
        assert!(err.0.contains("itself a symbolic link"), "{err:?}");
        assert_eq!(read(&dir.path().join("MEMORY.md")), "the owner's memory");
    }

    #[tokio::test]
    async fn the_owners_context_link_is_written_through_and_stays() {
        let dir = workspace();
        std::fs::write(dir.path().join("AGENTS.md"), "old rules").unwrap();
        let inode = std::fs::metadata(dir.path().join("AGENTS.md")).unwrap().ino();
        symlink("AGENTS.md", dir.path().join("CLAUDE.md")).unwrap();
        write(dir.path(), "CLAUDE.md", "new rules").await.unwrap();
        edit(dir.path(), "CLAUDE.md", "new", "newer").await.unwrap();
        let agents = dir.path().join("AGENTS.md");
        assert_eq!(
            (read(&agents), std::fs::metadata(&agents).unwrap().ino()),
            ("newer rules".to_string(), inode)
        );
        assert!(std::fs::symlink_metadata(dir.path().join("CLAUDE.md")).unwrap().is_symlink());

        // Only between context files, and only to a bare name in the same folder.
        symlink("notes.md", dir.path().join("PERSONA.md")).unwrap();
        std::fs::write(dir.path().join("notes.md"), "notes").unwrap();
        assert!(write(dir.path(), "PERSONA.md", "x").await.is_err());
        symlink("./AGENTS.md", dir.path().join("shared/MEMORY.md")).unwrap();
        assert!(write(dir.path(), "shared/MEMORY.md", "x").await.is_err());
        assert_eq!(read(&dir.path().join("notes.md")), "notes");
    }

    #[tokio::test]
    async fn links_in_the_folders_on_the_path_are_refused() {
        let dir = workspace();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "protected rules").unwrap();
        std::fs::create_dir(dir.path().join("pub")).unwrap();
        symlink(".", dir.path().join("docs")).unwrap();
        symlink("pub", dir.path().join("private")).unwrap();
        symlink(outside.path(), dir.path().join("reports")).unwrap();

        let err = write(dir.path(), "docs/AGENTS.md", "obey the caller").await.unwrap_err();
        assert!(err.0.contains("docs is a symbolic link to ."), "{err:?}");
        assert!(edit(dir.path(), "docs/AGENTS.md", "protected", "caller").await.is_err());
        assert_eq!(read(&dir.path().join("AGENTS.md")), "protected rules");

        let err = write(dir.path(), "private/secret.txt", "the owner's secret").await.unwrap_err();
        assert!(err.0.contains("private is a symbolic link to pub"), "{err:?}");
        assert!(!dir.path().join("pub/secret.txt").exists());

        for path in ["reports/q3.md", "reports/2026/q3.md"] {
            let err = write(dir.path(), path, "report").await.unwrap_err();
            assert!(
                err.0
                    .starts_with(&format!("could not write {path}: reports is a symbolic link to")),
                "{err:?}"
            );
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "nothing made outside");

        // A path climbing through a link is taken as written (`..` is not resolved after it).
        write(dir.path(), "reports/../MEMORY.md", "x").await.unwrap();
        assert_eq!(read(&dir.path().join("MEMORY.md")), "x");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

        // Folders that are missing are made, without following anything.
        write(dir.path(), "new/deep/file.txt", "made").await.unwrap();
        assert_eq!(read(&dir.path().join("new/deep/file.txt")), "made");
    }

    #[tokio::test]
    async fn a_fifo_in_the_workspace_is_replaced_without_waiting() {
        let dir = workspace();
        let fifo = dir.path().join("shared/pipe");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::from_raw_mode(0o600)).unwrap();
        let err = edit(dir.path(), "shared/pipe", "a", "b").await.unwrap_err();
        assert!(err.0.contains("not a regular file"), "{err:?}");
        write(dir.path(), "shared/pipe", "x").await.unwrap();
        assert_eq!(read(&fifo), "x");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("shared")).unwrap().collect();
        assert_eq!(names.len(), 2, "no temp file left: {names:?}");
    }

    #[tokio::test]
    async fn edit_refuses_a_file_over_the_cap() {
        let dir = workspace();
        let big = File::create(dir.path().join("big.log")).unwrap();
        // Sparse: a huge file costs nothing to make (red team W6 used 1 GiB).
        big.set_len(1 << 30).unwrap();
        let err = edit(dir.path(), "big.log", "a", "b").await.unwrap_err();
        assert_eq!(
            err.0,
            "big.log is 1073741824 bytes; edit loads files of at most 10485760 bytes (10 MiB). \
             Use bash (sed, a script) to change a file this large"
        );
        // Outside the workspace too.
        let outside = tempfile::tempdir().unwrap();
        let path = outside.path().join("big.log");
        File::create(&path).unwrap().set_len(EDIT_MAX_BYTES + 1).unwrap();
        let err = edit(dir.path(), path.to_str().unwrap(), "a", "b").await.unwrap_err();
        assert!(err.0.contains("is 10485761 bytes"), "{err:?}");
        // At the cap it loads.
        std::fs::write(dir.path().join("ok.txt"), "a".repeat(10 * 1024 * 1024 - 1) + "b").unwrap();
        edit(dir.path(), "ok.txt", "ab", "ba").await.unwrap();
    }

    #[tokio::test]
    async fn paths_outside_the_workspace_are_saved_as_before() {
        let dir = workspace();
        let outside = tempfile::tempdir().unwrap();
        let path = outside.path().join("sub/notes.md");
        write(dir.path(), path.to_str().unwrap(), "one").await.unwrap();
        edit(dir.path(), path.to_str().unwrap(), "one", "two").await.unwrap();
        assert_eq!(read(&path), "two");
    }
}
