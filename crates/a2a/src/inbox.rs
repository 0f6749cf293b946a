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
