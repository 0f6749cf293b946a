//! Reading a file that someone else may have planted: only a regular file, never blocking on the
//! open, never reading more than a cap.
//!
//! A workspace is shared with whatever runs in it (a model's bash, another program), so a file
//! the server reads there (callers.json, card.json, a task file, PERSONA.md) may have been
//! replaced by a FIFO (an `open` that waits for a writer forever), a device (`/dev/zero` never
//! ends), a socket, a folder, or a symbolic link to any of those or to a file elsewhere. Every such
//! read goes through here:
//! - the open never blocks: `O_NONBLOCK` (a FIFO or device opens at once), `O_NOCTTY` (a
//!   terminal does not become ours);
//! - for files under `.volcanic/` ([`read_config`], [`open_config`], [`open_config_at`]) a
//!   symbolic link as the last component is refused (`O_NOFOLLOW`): the server's own files are
//!   never links, and following one would read, or vouch for, a file outside the folder;
//! - the opened descriptor is checked with `fstat`, not the path beforehand, so nothing can be
//!   swapped in between: anything but a regular file is treated as absent;
//! - at most `cap + 1` bytes are read, so the size is known to be over the cap without reading
//!   the rest; [`read_config`] treats such a file as absent, [`read_prefix`] keeps the first
//!   `cap` bytes (prompt files are cut, not dropped).
//!
//! A refused file gets one warning naming the file and why (the kind, or the cap), never its
//! content; a missing file is silent. Other I/O errors (permissions, out of descriptors) are
//! returned: a failing disk must not pass for an absent file where that matters.
//!
//! Everything here is blocking: call it from the blocking pool or another blocking path.

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use tracing::warn;

/// The cap of small configuration files (callers.json, card.json): 1 MiB. Such a file is a few
/// KiB; a bigger one is not an owner's edit.
pub const CONFIG_FILE_CAP: u64 = 1024 * 1024;

/// A regular file, opened (see the module docs), with the metadata of the opened descriptor.
#[derive(Debug)]
pub struct RegularFile {
    file: File,
    meta: Metadata,
}

impl RegularFile {
    /// The metadata of the open file (from `fstat`: the file these bytes come from).
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// The open file (to sync it, say).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Reads at most `cap + 1` bytes: the whole file, or `None` when it holds more than `cap`
    /// (with a warning naming `shown` and the cap).
    ///
    /// # Errors
    /// An I/O error of the read.
    pub fn read_capped(self, shown: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
        let (bytes, over) = self.read_up_to(cap)?;
        if over {
            warn!(file = %shown.display(), cap, "file is larger than its cap, treating it as absent");
            return Ok(None);
        }
        Ok(Some(bytes))
    }

    /// The first `cap` bytes, and whether the file holds more.
    fn read_up_to(self, cap: u64) -> io::Result<(Vec<u8>, bool)> {
        let limit = cap.saturating_add(1);
        let expected = self.meta.len().min(limit);
        let mut bytes = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
        self.file.take(limit).read_to_end(&mut bytes)?;
        let keep = usize::try_from(cap).unwrap_or(usize::MAX);
        let over = bytes.len() > keep;
        bytes.truncate(keep);
        Ok((bytes, over))
    }
}

/// Reads the configuration file at `path`: `None` when it is missing (silently), or is a
/// symbolic link, not a regular file, or larger than `cap` (each with a warning).
///
/// # Errors
/// Any other I/O error of the open, `fstat` or read.
pub fn read_config(path: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
    match open_config(path)? {
        Some(file) => file.read_capped(path, cap),
        None => Ok(None),
    }
}

/// Opens the configuration file at `path`: `None` when it is missing (silently), or is a
/// symbolic link or not a regular file (with a warning). Read it with
/// [`RegularFile::read_capped`].
///
/// # Errors
/// Any other I/O error of the open or `fstat`.
pub fn open_config(path: &Path) -> io::Result<Option<RegularFile>> {
    open(None, path, path, Links::Refuse)
}

/// [`open_config`] for the file `name` of the open folder `dir`; `shown` names it in warnings.
///
/// # Errors
/// As [`open_config`].
pub fn open_config_at(
    dir: BorrowedFd<'_>,
    name: &str,
    shown: &Path,
) -> io::Result<Option<RegularFile>> {
    open(Some(dir), Path::new(name), shown, Links::Refuse)
}

/// The first `cap` bytes of the file at `path`, following symbolic links (an owner's workspace
/// files may be links, such as CLAUDE.md → AGENTS.md): `None` when it is missing, not a regular
/// file (with a warning) or cannot be read. For files that are cut to a size, not refused.
pub fn read_prefix(path: &Path, cap: u64) -> Option<Vec<u8>> {
    let file = open(None, path, path, Links::Follow).ok()??;
    file.read_up_to(cap).ok().map(|(bytes, _)| bytes)
}

/// [`read_prefix`] for a file that shapes what a session is told (PERSONA.md, AGENTS.md,
/// MEMORY.md): a symbolic link as the last component is refused, with a warning. Where callers
/// may write these files (`A2A__Sandbox__WritableContext`), a link would otherwise put any file
/// the server can read (a hidden callers.json, /etc/shadow) into the next system prompt.
pub fn read_prefix_without_links(path: &Path, cap: u64) -> Option<Vec<u8>> {
    let file = open(None, path, path, Links::Refuse).ok()??;
    file.read_up_to(cap).ok().map(|(bytes, _)| bytes)
}

/// Whether a symbolic link as the last component is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Links {
    Follow,
    Refuse,
}

/// Opens `path` (relative to `dir` when given) for reading without blocking, and keeps it only
/// when `fstat` says it is a regular file. `None`: missing, or refused with a warning.
fn open(
    dir: Option<BorrowedFd<'_>>,
    path: &Path,
    shown: &Path,
    links: Links,
) -> io::Result<Option<RegularFile>> {
    let mut flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    if links == Links::Refuse {
        flags |= OFlags::NOFOLLOW;
    }
    let opened = match dir {
        Some(dir) => rustix::fs::openat(dir.as_fd(), path, flags, Mode::empty()),
        None => rustix::fs::open(path, flags, Mode::empty()),
    };
    let fd = match opened {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        // O_NOFOLLOW on a symbolic link.
        Err(Errno::LOOP) if links == Links::Refuse => {
            warn!(file = %shown.display(), kind = "symbolic link", "file is not a regular file, treating it as absent");
            return Ok(None);
        }
        // A socket cannot be opened (ENXIO), nor a device without its driver.
        Err(Errno::NXIO) => {
            warn!(file = %shown.display(), kind = "socket or device", "file is not a regular file, treating it as absent");
            return Ok(None);
        }
        Err(err) => return Err(err.into()),
    };
    let file = File::from(fd);
    let meta = file.metadata()?;
    let file_type = meta.file_type();
    if !file_type.is_file() {
        let kind = if file_type.is_dir() {
            "folder"
        } else if file_type.is_fifo() {
            "FIFO"
        } else if file_type.is_socket() {
            "socket"
        } else if file_type.is_char_device() || file_type.is_block_device() {
            "device"
        } else {
            "special file"
        };
        warn!(file = %shown.display(), kind, "file is not a regular file, treating it as absent");
        return Ok(None);
    }
    Ok(Some(RegularFile { file, meta }))
}

#[cfg(test)]
mod tests {
    use std::os::fd::OwnedFd;

    use super::*;

    fn mkfifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            Mode::RUSR | Mode::WUSR,
            0,
        )
        .unwrap();
    }

    #[test]
    fn read_config_reads_a_regular_file_whole_and_a_missing_one_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("callers.json");
        std::fs::write(&path, b"[]").unwrap();
        assert_eq!(read_config(&path, 2).unwrap(), Some(b"[]".to_vec()));
        assert_eq!(read_config(&dir.path().join("missing.json"), 2).unwrap(), None);
    }

    #[test]
    fn read_config_over_the_cap_is_absent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("card.json");
        std::fs::write(&path, b"0123456789abcd").unwrap();
        assert_eq!(read_config(&path, 13).unwrap(), None);
        assert_eq!(read_config(&path, 14).unwrap(), Some(b"0123456789abcd".to_vec()));
    }

    /// Runs `read` on its own thread and fails the test when it takes longer than 10 s (a read
    /// that blocks on a FIFO would hang forever).
    fn within_deadline<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(read()));
        rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the read blocked")
    }

    #[test]
    fn read_config_special_files_and_symlinks_are_absent_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        mkfifo(&fifo);
        let regular = dir.path().join("regular.json");
        std::fs::write(&regular, b"{}").unwrap();
        let to_regular = dir.path().join("link.json");
        std::os::unix::fs::symlink(&regular, &to_regular).unwrap();
        let to_zero = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &to_zero).unwrap();
        let folder = dir.path().join("folder.json");
        std::fs::create_dir(&folder).unwrap();
        let socket = dir.path().join("socket.json");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        // A device, not through a link, is refused by its type.
        let zero = std::path::PathBuf::from("/dev/zero");
        for path in [fifo, to_regular, to_zero, folder, socket, zero] {
            let shown = path.display().to_string();
            let read = within_deadline(move || read_config(&path, CONFIG_FILE_CAP).unwrap());
            assert_eq!(read, None, "{shown}");
        }
    }

    #[test]
    fn open_config_at_refuses_a_symlink_and_reads_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t1.json"), b"{}").unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("t2.json")).unwrap();
        mkfifo(&dir.path().join("t3.json"));
        let folder: OwnedFd = File::open(dir.path()).unwrap().into();
        let shown = Path::new("shown");
        let regular = open_config_at(folder.as_fd(), "t1.json", shown).unwrap().unwrap();
        assert!(regular.metadata().is_file());
        assert_eq!(regular.read_capped(shown, 10).unwrap(), Some(b"{}".to_vec()));
        let refused = within_deadline(move || {
            ["t2.json", "t3.json", "t4.json"]
                .map(|name| open_config_at(folder.as_fd(), name, shown).unwrap().is_none())
        });
        assert_eq!(refused, [true, true, true]);
    }

    #[test]
    fn read_prefix_follows_links_cuts_at_the_cap_and_skips_special_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), b"0123456789").unwrap();
        std::os::unix::fs::symlink("AGENTS.md", dir.path().join("CLAUDE.md")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("MEMORY.md")).unwrap();
        mkfifo(&dir.path().join("PERSONA.md"));
        assert_eq!(read_prefix(&dir.path().join("CLAUDE.md"), 4), Some(b"0123".to_vec()));
        assert_eq!(read_prefix(&dir.path().join("AGENTS.md"), 40), Some(b"0123456789".to_vec()));
        let special = [dir.path().join("MEMORY.md"), dir.path().join("PERSONA.md")];
        assert_eq!(
            within_deadline(move || special.map(|path| read_prefix(&path, 4))),
            [None, None]
        );
        assert_eq!(read_prefix(&dir.path().join("missing.md"), 4), None);
    }
}
