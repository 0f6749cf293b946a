//! [`Stamp`]: how a task file looked when we last read it, so the index and the settled-task
//! cache can tell whether it changed without reading it. It knows only file metadata.

use std::fs;
use std::time::SystemTime;

/// How a file looked when it was indexed: (mtime, size) and, on Unix, (inode, ctime), which a
/// rename over it or an edit within the mtime's resolution changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(super) mtime: SystemTime,
    pub(super) size: u64,
    #[cfg(unix)]
    pub(super) inode: u64,
    #[cfg(unix)]
    pub(super) ctime: (i64, i64),
}

impl Stamp {
    /// The stamp of a file's metadata; `None` where the platform has no mtime.
    pub(crate) fn of(meta: &fs::Metadata) -> Option<Stamp> {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Some(Stamp {
            mtime: meta.modified().ok()?,
            size: meta.len(),
            #[cfg(unix)]
            inode: meta.ino(),
            #[cfg(unix)]
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
    }
}
