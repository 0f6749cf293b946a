//! Atomic file replacement: a temp file in the same folder, fsync, rename, fsync the folder.
//!
//! Readers either see the old content or the new one, never a torn file; leftover temp files
//! from a crash start with `.tmp` and are ignored by everything that lists folders.

use std::io::{self, Write};
use std::path::Path;

/// Replaces `path` with `bytes` atomically, creating parent folders. Keeps the permissions of the
/// file it replaces.
///
/// # Errors
/// Any I/O error of the steps above; the target is untouched when it fails.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, true)
}

/// Like [`write_atomic`], but the rename is not made durable (the folder is not synced): for
/// an interim version of a file whose previous version is already durable. Readers still see a
/// whole old or new file, and after a crash the file holds one of the two (the new content is
/// synced before it becomes visible). The next [`write_atomic`] in the folder makes it durable.
///
/// # Errors
/// As [`write_atomic`].
pub fn write_atomic_interim(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, false)
}

fn replace(path: &Path, bytes: &[u8], sync_folder: bool) -> io::Result<()> {
    // Write through a symlink to its target, so the link survives (CLAUDE.md → AGENTS.md).
    let resolved;
    let path = if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        resolved = std::fs::canonicalize(path)?;
        resolved.as_path()
    } else {
        path
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new().prefix(".tmp").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    if let Ok(meta) = std::fs::metadata(path) {
        tmp.as_file().set_permissions(meta.permissions())?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if sync_folder {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
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
}
