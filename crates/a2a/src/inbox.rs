//! A workspace's `inbox/`: where files received from others land (A2A file parts in each
//! caller's `inbox/a2a/<caller>/`, Telegram attachments in `inbox/` itself), under safe names
//! that never overwrite anything.
//!
//! Shared by every host so that one set of naming rules applies to the folder.

use std::io;
use std::path::{Path, PathBuf};

/// Most files with the same name one inbox takes before a save fails.
const MAX_SAME_NAME: u32 = 1000;

/// The inbox of a workspace: `<workspace>/inbox`.
pub fn inbox_dir(workspace: &Path) -> PathBuf {
    workspace.join("inbox")
}

/// Keeps `[A-Za-z0-9._-]`, replaces the rest with `_`, drops leading dots, at most 100 chars.
/// Give it a name's last path component; separators are replaced like any other character.
pub fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    cleaned.trim_start_matches('.').chars().take(100).collect()
}

/// Writes `bytes` to `<inbox>/<name>` (creating the folder), or `<inbox>/<n>-<name>` for the
/// first free `n` when the name is taken, and syncs the file. `name` must already be sanitized.
/// Blocking: call it from `spawn_blocking`.
///
/// # Errors
/// The folder or file cannot be created or written, or a thousand files share the name.
pub fn save_new(inbox: &Path, name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    std::fs::create_dir_all(inbox)?;
    for attempt in 0..MAX_SAME_NAME {
        let candidate = if attempt == 0 { name.to_string() } else { format!("{attempt}-{name}") };
        let path = inbox.join(&candidate);
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut file) => {
                std::io::Write::write_all(&mut file, bytes)?;
                file.sync_all()?;
                return Ok(path);
            }
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(io::Error::other("too many files with the same name"))
}

/// [`save_new`] for a folder that lies in a workspace callers can write: `folder` (relative to
/// `workspace`) is reached and created without following a link anywhere on its way
/// ([`volcanic_core::sandbox::beneath`]), and the file is created in that very folder. Returns
/// the saved file's path. Blocking.
///
/// # Errors
/// A link or a file on the folder's way (naming it), the folder or file cannot be written, or a
/// thousand files share the name.
pub fn save_new_beneath(
    workspace: &Path,
    folder: &Path,
    name: &str,
    bytes: &[u8],
) -> io::Result<PathBuf> {
    use volcanic_core::sandbox::beneath;
    let dir = beneath::open_dir_for_use(workspace, folder, true)?;
    for attempt in 0..MAX_SAME_NAME {
        let candidate = if attempt == 0 { name.to_string() } else { format!("{attempt}-{name}") };
        if let Some(mut file) = beneath::create_new_in(&dir, &candidate)? {
            std::io::Write::write_all(&mut file, bytes)?;
            file.sync_all()?;
            return Ok(workspace.join(folder).join(candidate));
        }
    }
    Err(io::Error::other("too many files with the same name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_keeps_safe_names_and_defuses_paths() {
        assert_eq!(sanitize("plan.pdf"), "plan.pdf");
        assert_eq!(sanitize("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(sanitize("..hidden"), "hidden");
        assert_eq!(sanitize("my file (1).txt"), "my_file__1_.txt");
        assert_eq!(sanitize(&"a".repeat(300)).len(), 100);
    }

    #[test]
    fn save_new_beneath_never_follows_a_link_on_the_way() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let folder = Path::new("inbox/a2a/peer");
        let saved = save_new_beneath(ws.path(), folder, "a.txt", b"one").unwrap();
        assert_eq!(saved, ws.path().join("inbox/a2a/peer/a.txt"));
        // A planted link with the file's name is kept, not followed.
        std::os::unix::fs::symlink(
            outside.path().join("x"),
            ws.path().join("inbox/a2a/peer/b.txt"),
        )
        .unwrap();
        let second = save_new_beneath(ws.path(), folder, "b.txt", b"two").unwrap();
        assert_eq!(second, ws.path().join("inbox/a2a/peer/1-b.txt"));
        assert!(!outside.path().join("x").exists());
        // A link on the folder's way stops the write.
        std::fs::rename(ws.path().join("inbox"), ws.path().join("inbox.orig")).unwrap();
        std::fs::create_dir_all(outside.path().join("a2a")).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("inbox")).unwrap();
        let err = save_new_beneath(ws.path(), folder, "c.txt", b"three").unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(!outside.path().join("a2a/peer").exists());
    }

    #[test]
    fn save_new_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = inbox_dir(dir.path());
        let first = save_new(&inbox, "a.txt", b"one").unwrap();
        let second = save_new(&inbox, "a.txt", b"two").unwrap();
        assert_eq!(first, inbox.join("a.txt"));
        assert_eq!(second, inbox.join("1-a.txt"));
        assert_eq!(std::fs::read(first).unwrap(), b"one");
        assert_eq!(std::fs::read(second).unwrap(), b"two");
    }
}
