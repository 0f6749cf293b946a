//! Atomic file replacement: a temp file in the same folder, a durability barrier, rename, a
//! second barrier for the rename.
//!
//! Readers either see the old content or the new one, never a torn file; leftover temp files
//! from a crash start with `.tmp` and are ignored by everything that lists folders. The barriers
//! are [`crate::durable`]'s group commits: concurrent writers on one file system share their
//! syncs.

use std::io::{self, Write};
use std::path::Path;

/// Replaces `path` with `bytes` atomically and durably, creating parent folders. Keeps the
/// permissions of the file it replaces.
///
/// # Errors
/// Any I/O error of the steps above; the target is untouched when it fails before the rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, bytes, &[])
}

/// Like [`write_atomic`], and `also` (files or folders written before, e.g. a journal) is made
/// durable by the same barrier as the new content, before the rename: one flush for both when
/// they share a file system.
///
/// # Errors
/// As [`write_atomic`], and the error of syncing one of `also`.
pub fn write_atomic_with(path: &Path, bytes: &[u8], also: &[&std::fs::File]) -> io::Result<()> {
    replace(path, bytes, Durability::Durable(also))
}

/// Like [`write_atomic`] without the barriers: readers and a killed process (SIGKILL, a panic)
/// see the old or the new content, whole, but a power loss or an OS crash before the file
/// system writes it back may leave the previous version, or an empty or torn file (readers of
/// such files must cope). For an interim version of a file whose final version will be written
/// with [`write_atomic`]; costs no disk flush.
///
/// # Errors
/// As [`write_atomic`].
pub fn write_atomic_interim(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, Durability::Interim)
}

#[derive(Clone, Copy)]
enum Durability<'a> {
    Durable(&'a [&'a std::fs::File]),
    Interim,
}

fn replace(path: &Path, bytes: &[u8], durability: Durability<'_>) -> io::Result<()> {
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
    let mut tmp = match tempfile::Builder::new().prefix(".tmp").tempfile_in(dir) {
        Ok(tmp) => tmp,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)?;
            tempfile::Builder::new().prefix(".tmp").tempfile_in(dir)?
        }
        Err(err) => return Err(err),
    };
    tmp.write_all(bytes)?;
    if let Ok(meta) = std::fs::metadata(path) {
        tmp.as_file().set_permissions(meta.permissions())?;
    }
    match durability {
        Durability::Interim => {
            tmp.persist(path).map_err(|e| e.error)?;
        }
        Durability::Durable(also) => {
            let mut files = Vec::with_capacity(also.len() + 1);
            files.push(tmp.as_file());
            files.extend(also.iter().copied());
            crate::durable::sync_files(&files)?;
            tmp.persist(path).map_err(|e| e.error)?;
            crate::durable::sync_paths(&[dir])?;
        }
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
