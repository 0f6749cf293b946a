//! Paths beneath a folder, resolved without following a single link: what a sandbox's view is
//! built from when a caller can write the folder.
//!
//! A caller's session can rename, replace and link anything in the workspace it is allowed to
//! write. If the next sandbox were built by resolving paths such as `inbox/a2a/<caller>` the
//! ordinary way, a symlink planted on that path would decide what gets bound (the host's `/`,
//! writable). So every path of a view that lies in the workspace is walked here one component at
//! a time from an open folder, each component opened with `O_NOFOLLOW` (a link anywhere on the
//! path fails with `ELOOP`, a file where a folder belongs with `ENOTDIR`), and the result is an
//! open file descriptor: bwrap then binds that very folder (`--bind-fd`), whatever the name
//! points at by the time it mounts.
//!
//! The `write` and `edit` tools walk a workspace path the same way before they save (see
//! `tool::save`).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// The identity of a file: the device and inode it lives on. Two names with the same identity are
/// the same file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
}

impl Identity {
    /// The identity of an open file.
    ///
    /// # Errors
    /// When `fstat` fails.
    pub fn of(fd: impl AsFd) -> io::Result<Self> {
        let stat = rustix::fs::fstat(fd)?;
        Ok(Identity { dev: stat.st_dev, ino: stat.st_ino })
    }

    /// The identity of what `path` names itself (a link is not followed).
    ///
    /// # Errors
    /// When `lstat` fails.
    pub fn of_path(path: &Path) -> io::Result<Self> {
        let stat = rustix::fs::statat(rustix::fs::CWD, path, AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(Identity { dev: stat.st_dev, ino: stat.st_ino })
    }
}

/// Opens `path` as a folder to walk from (following links: the folder itself is the owner's).
///
/// # Errors
/// When it cannot be opened as a folder.
pub fn open_root(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(path, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
}

/// The plain names of `relative`: `.` parts are dropped; an absolute path, a `..` part or a
/// prefix is refused, since nothing here may climb out of the folder it starts in.
fn names(relative: &Path) -> io::Result<Vec<&std::ffi::OsStr>> {
    let mut out = Vec::new();
    for part in relative.components() {
        match part {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::RootDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a plain relative path", relative.display()),
                ));
            }
        }
    }
    Ok(out)
}

/// A friendlier error for a link or a file met on the way.
fn on_the_way(err: rustix::io::Errno, shown: &Path) -> io::Error {
    match err {
        rustix::io::Errno::LOOP => io::Error::new(
            io::ErrorKind::NotADirectory,
            format!(
                "{} is a symbolic link, or a link lies on its path: a sandbox's view never follows one",
                shown.display()
            ),
        ),
        rustix::io::Errno::NOTDIR => io::Error::new(
            io::ErrorKind::NotADirectory,
            format!(
                "{} is not a folder, or a file lies on its path where a folder belongs",
                shown.display()
            ),
        ),
        other => {
            io::Error::new(io::Error::from(other).kind(), format!("{}: {other}", shown.display()))
        }
    }
}

/// Opens one folder below `dir` without following a link (`O_PATH`, so no read permission is
/// needed). With `create`, a missing folder is made first (mode 0755, as `mkdir -p` would).
fn step(dir: &OwnedFd, name: &std::ffi::OsStr, create: bool, shown: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let is_link = || {
        rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Symlink)
    };
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        // O_PATH with O_DIRECTORY says ENOTDIR for a link.
        Err(rustix::io::Errno::NOTDIR) if is_link() => {
            let target = rustix::fs::readlinkat(dir, name, Vec::new()).ok();
            let target = target.map(|t| String::from_utf8_lossy(t.as_bytes()).into_owned());
            Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!(
                    "{} is a symbolic link to {}: no link in the workspace's folders is followed \
                     here (a sandbox's view, a save of the write and edit tools)",
                    shown.display(),
                    target.as_deref().unwrap_or("?"),
                ),
            ))
        }
        Ok(fd) => Ok(fd),
        Err(rustix::io::Errno::NOENT) if create => {
            match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(err) => return Err(on_the_way(err, shown)),
            }
            rustix::fs::openat(dir, name, flags, Mode::empty()).map_err(|e| on_the_way(e, shown))
        }
        Err(err) => Err(on_the_way(err, shown)),
    }
}

/// Opens the folder `relative` below `root` without following any link on the way, making the
/// missing folders with `create`. Returns the folder (`O_PATH`) and every folder passed on the
/// way to it, `root` excluded, each with its path relative to `root`.
///
/// # Errors
/// A link or a file on the path, a missing folder without `create`, or an I/O error; the
/// message names the path.
pub fn open_dir(
    root: &OwnedFd,
    relative: &Path,
    create: bool,
) -> io::Result<Vec<(std::path::PathBuf, OwnedFd)>> {
    let mut walked: Vec<(std::path::PathBuf, OwnedFd)> = Vec::new();
    let mut so_far = std::path::PathBuf::new();
    for name in names(relative)? {
        so_far.push(name);
        let dir = walked.last().map_or(root, |(_, fd)| fd);
        let next = step(dir, name, create, &so_far)?;
        walked.push((so_far.clone(), next));
    }
    Ok(walked)
}

/// What a name below a folder is, without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    /// A symbolic link.
    Link,
    /// A FIFO, a device or a socket.
    Other,
}

/// Opens `relative` below `root` (`O_PATH`, no link followed anywhere, the last part included)
/// and says what it is. `Ok(None)` when it does not exist.
///
/// # Errors
/// A link on the way, or an I/O error.
pub fn open_any(root: &OwnedFd, relative: &Path) -> io::Result<Option<(OwnedFd, Kind)>> {
    let parts = names(relative)?;
    let Some((last, parents)) = parts.split_last() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty path"));
    };
    let parent_path: std::path::PathBuf = parents.iter().collect();
    let walked = match open_dir(root, &parent_path, false) {
        Ok(walked) => walked,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let dir = walked.last().map_or(root, |(_, fd)| fd);
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, *last, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(err) => return Err(on_the_way(err, relative)),
    };
    let kind = match FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) {
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::File,
        FileType::Symlink => Kind::Link,
        _ => Kind::Other,
    };
    Ok(Some((fd, kind)))
}

/// Creates the empty regular file `relative` below `root` unless something already has the name
/// (no link followed on the way, and a link in its place is left alone: the caller decides what
/// to do with what is there).
///
/// # Errors
/// A link on the way to its folder, a missing folder, or an I/O error.
pub fn create_file(root: &OwnedFd, relative: &Path) -> io::Result<()> {
    let parts = names(relative)?;
    let Some((last, parents)) = parts.split_last() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty path"));
    };
    let parent_path: std::path::PathBuf = parents.iter().collect();
    let walked = open_dir(root, &parent_path, false)?;
    let dir = match walked.last() {
        Some((_, fd)) => reopen_dir(fd)?,
        None => reopen_dir(root)?,
    };
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(&dir, *last, flags, Mode::from_raw_mode(0o644)) {
        Ok(_) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(err) => Err(on_the_way(err, relative)),
    }
}

/// An `O_PATH` folder opened again for real use (creating files in it needs a real descriptor).
fn reopen_dir(fd: &OwnedFd) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(fd, ".", flags, Mode::empty())?)
}

/// Opens the folder `relative` below `root` for real use (listing, creating files in it), with
/// no link followed on the way; with `create`, missing folders are made.
///
/// # Errors
/// As [`open_dir`].
pub fn open_dir_for_use(root: &Path, relative: &Path, create: bool) -> io::Result<OwnedFd> {
    let root = open_root(root)?;
    let walked = open_dir(&root, relative, create)?;
    match walked.last() {
        Some((_, fd)) => reopen_dir(fd),
        None => reopen_dir(&root),
    }
}

/// Creates the file `name` in the folder `dir` (opened by [`open_dir_for_use`]) for writing,
/// unless something has that name already (a planted link included: it is neither followed nor
/// replaced). `Ok(None)` when the name is taken.
///
/// # Errors
/// An I/O error.
pub fn create_new_in(dir: &OwnedFd, name: &str) -> io::Result<Option<std::fs::File>> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o644)) {
        Ok(fd) => Ok(Some(std::fs::File::from(fd))),
        Err(rustix::io::Errno::EXIST) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_anywhere_on_the_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("inbox/a2a")).unwrap();
        std::fs::create_dir_all(outside.path().join("a2a/peer")).unwrap();
        let root = open_root(dir.path()).unwrap();

        let walked = open_dir(&root, Path::new("inbox/a2a/peer"), true).unwrap();
        let shown: Vec<_> = walked.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(
            shown,
            vec![Path::new("inbox"), Path::new("inbox/a2a"), Path::new("inbox/a2a/peer")]
        );
        let id = Identity::of(&walked[2].1).unwrap();
        assert_eq!(id, Identity::of_path(&dir.path().join("inbox/a2a/peer")).unwrap());

        // The attack of issue 33: `inbox` renamed and replaced by a link to a folder the caller
        // prepared.
        std::fs::rename(dir.path().join("inbox"), dir.path().join("inbox.orig")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("inbox")).unwrap();
        let err = open_dir(&root, Path::new("inbox/a2a/peer"), true).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(open_any(&root, Path::new("inbox/a2a")).is_err());
        assert!(open_dir_for_use(dir.path(), Path::new("inbox/a2a/peer"), true).is_err());
        // And the last part as a link.
        std::fs::remove_file(dir.path().join("inbox")).unwrap();
        std::fs::create_dir(dir.path().join("inbox")).unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("inbox/a2a")).unwrap();
        assert!(open_dir(&root, Path::new("inbox/a2a"), true).is_err());
        let (_, kind) = open_any(&root, Path::new("inbox/a2a")).unwrap().unwrap();
        assert_eq!(kind, Kind::Link);
    }

    #[test]
    fn files_are_created_without_following_links_and_climbing_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = open_root(dir.path()).unwrap();
        create_file(&root, Path::new("PERSONA.md")).unwrap();
        assert_eq!(std::fs::read(dir.path().join("PERSONA.md")).unwrap(), b"");
        std::fs::write(dir.path().join("PERSONA.md"), "kept").unwrap();
        create_file(&root, Path::new("PERSONA.md")).unwrap();
        assert_eq!(std::fs::read(dir.path().join("PERSONA.md")).unwrap(), b"kept");

        let target = dir.path().join("target.txt");
        std::os::unix::fs::symlink(&target, dir.path().join("volcanic.toml")).unwrap();
        create_file(&root, Path::new("volcanic.toml")).unwrap();
        assert!(!target.exists(), "a link in place is not followed to create its target");

        assert!(open_dir(&root, Path::new("../x"), true).is_err());
        assert!(open_dir(&root, Path::new("/etc"), false).is_err());
        assert_eq!(open_any(&root, Path::new("missing/file")).unwrap().map(|(_, k)| k), None);
        let (_, kind) = open_any(&root, Path::new("PERSONA.md")).unwrap().unwrap();
        assert_eq!(kind, Kind::File);
    }
}
