//! Change notification for a task folder (inotify), so the settled-task cache can answer a task
//! without a `stat` of its file and still see an outside change on the next read.
//!
//! The kernel queues an event for a change of a file in the watched folder before the syscall
//! that made it returns, so a reader that reads the queue (one non-blocking `read`) before
//! using the cache sees every change made through the folder up to then. What inotify does not
//! report is left to the `stat`-checked path: the watch is used only on local file systems whose
//! changes all go through this kernel (not NFS, SMB, FUSE, ...), and a folder that is removed or
//! renamed, or one of whose parents is, ends the watch. What moves the folder off its path
//! without an event (a parent that could not be watched, a symbolic link pointed elsewhere, a
//! mount over a parent) is found by a `stat` of the folder's path at most once a second; files
//! vouched for by the watch are read through a descriptor of the watched folder, so they are
//! its files whatever its path leads to meanwhile. Nor does inotify report a change made through
//! another name of the file (a symbolic link's target, a hard link elsewhere) or through a
//! shared `mmap`: the cache trusts the watch only for a regular file with one link, and leaves
//! `mmap` writers to the documented limits.
//!
//! Elsewhere than Linux there is no watch and the cache checks each file's stamp, as before.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

/// What a [`FolderWatch::drain`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Drained {
    /// Some event was read: a change may have happened since the caller last looked.
    pub any: bool,
    /// Events were lost (queue overflow): any file may have changed.
    pub all: bool,
    /// The watch is over (the folder was removed, renamed or unmounted, or reading failed):
    /// drop it, and everything known through it.
    pub ended: bool,
}

/// A task folder watched for changes to its files.
#[derive(Debug)]
pub(crate) struct FolderWatch {
    #[cfg(target_os = "linux")]
    inotify: std::os::fd::OwnedFd,
    /// The folder watched (`O_PATH`): files vouched for are read through it.
    #[cfg(target_os = "linux")]
    folder: std::sync::Arc<std::os::fd::OwnedFd>,
    /// The folder's (device, inode) when the watch started.
    identity: (u64, u64),
    /// When the folder was last found at its path.
    verified: Instant,
}

impl FolderWatch {
    /// Starts watching the files of folder `dir`. `Ok(None)` when this platform or `dir`'s file
    /// system cannot report every change.
    ///
    /// # Errors
    /// The error of inspecting `dir` or of setting up the watch (`NotFound` when `dir` does not
    /// exist yet, `Interrupted` when it changed while the watch was being set up, the limits of
    /// inotify when they are reached).
    pub fn start(dir: &Path) -> io::Result<Option<FolderWatch>> {
        imp::start(dir)
    }

    /// Reads every queued event, calling `changed` with the name of each file changed, added
    /// or removed (in any order, possibly more than once). Never blocks.
    pub fn drain(&mut self, changed: &mut dyn FnMut(&[u8])) -> Drained {
        imp::drain(self, changed)
    }

    /// The watched folder, to read its files through.
    #[cfg(target_os = "linux")]
    pub fn folder(&self) -> std::sync::Arc<std::os::fd::OwnedFd> {
        self.folder.clone()
    }

    /// Whether the folder at `dir` is still the one watched; looked at (one `stat`) at most
    /// once per `every`, assumed in between. A folder moved away together with a parent (which
    /// inotify does not report) is found here.
    pub fn still_at(&mut self, dir: &Path, every: Duration) -> bool {
        let now = Instant::now();
        if now.duration_since(self.verified) < every {
            return true;
        }
        match identity(dir) {
            Ok(identity) if identity == self.identity => {
                self.verified = now;
                true
            }
            _ => false,
        }
    }
}

#[cfg(unix)]
fn identity(dir: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir)?;
    Ok((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity(_dir: &Path) -> io::Result<(u64, u64)> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::mem::MaybeUninit;
    use std::path::Path;
    use std::time::Instant;

    use rustix::fs::OFlags;
    use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

    use super::{Drained, FolderWatch, identity};

    /// File systems whose every change goes through the local kernel, so inotify sees it
    /// (`statfs`'s `f_type`): ext2/3/4, XFS, Btrfs, tmpfs, F2FS, ZFS, bcachefs, overlayfs.
    const LOCAL: [u64; 8] = [
        0xEF53,
        0x5846_5342,
        0x9123_683E,
        0x0102_1994,
        0xF2F5_2010,
        0x2FC1_2FC1,
        0xCA45_1A4E,
        0x794C_7630,
    ];

    pub(super) fn start(dir: &Path) -> io::Result<Option<FolderWatch>> {
        let folder = rustix::fs::open(
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let stat = rustix::fs::fstat(&folder)?;
        let before = (stat.st_dev, stat.st_ino);
        let kind = rustix::fs::fstatfs(&folder)?.f_type;
        #[allow(clippy::cast_sign_loss, reason = "f_type is a magic number, signed on some ABIs")]
        if !LOCAL.contains(&(kind as u64)) {
            return Ok(None);
        }
        let inotify = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
        // What can change a file's content or stamp, or the name's file. A new name needs no
        // event: nothing is cached for a file that did not exist (one removed before was).
        let mask = WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR;
        inotify::add_watch(&inotify, dir, mask)?;
        // The folder watched is the one opened only if the path still leads there.
        if identity(dir)? != before {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "the folder changed while its watch was being set up",
            ));
        }
        // Its parents, for their own renames and removals only (no events for their other
        // entries): a parent moved away takes the folder from its path without an event for it.
        // Added to any watch of the same folder (a path that loops back to it), never replacing
        // it. One that cannot be watched is left to the periodic check of the folder's place.
        for parent in dir.ancestors().skip(1).filter(|parent| !parent.as_os_str().is_empty()) {
            let mask = WatchFlags::MOVE_SELF
                | WatchFlags::DELETE_SELF
                | WatchFlags::ONLYDIR
                | WatchFlags::MASK_ADD;
            let _ = inotify::add_watch(&inotify, parent, mask);
        }
        Ok(Some(FolderWatch {
            inotify,
            folder: std::sync::Arc::new(folder),
            identity: before,
            verified: Instant::now(),
        }))
    }

    pub(super) fn drain(watch: &mut FolderWatch, changed: &mut dyn FnMut(&[u8])) -> Drained {
        let mut drained = Drained::default();
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut events = inotify::Reader::new(&watch.inotify, &mut buf);
        loop {
            let event = match events.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::WOULDBLOCK) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => {
                    drained.ended = true;
                    break;
                }
            };
            drained.any = true;
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                drained.all = true;
            }
            if flags.intersects(
                ReadFlags::IGNORED
                    | ReadFlags::DELETE_SELF
                    | ReadFlags::MOVE_SELF
                    | ReadFlags::UNMOUNT,
            ) {
                drained.ended = true;
            }
            if let Some(name) = event.file_name() {
                changed(name.to_bytes());
            }
        }
        drained
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::path::Path;

    use super::{Drained, FolderWatch};

    pub(super) fn start(_dir: &Path) -> io::Result<Option<FolderWatch>> {
        Ok(None)
    }

    pub(super) fn drain(_watch: &mut FolderWatch, _changed: &mut dyn FnMut(&[u8])) -> Drained {
        Drained { ended: true, ..Drained::default() }
    }
}
