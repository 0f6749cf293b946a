//! The push outbox: pending webhook deliveries as files in the host's state folder, so that a
//! restart (or a crash) does not lose them.
//!
//! One file per delivery, `<state dir>/a2a/push-outbox/<seq>.push` (`seq` zero-padded to 20
//! digits, rising across restarts, so the name order is the order of the notifications): a
//! header line of JSON (task, config id, URL, token, `Authorization` value, creation time),
//! a newline, then the body exactly as it is POSTed. A file is created whole or not at all
//! (`volcanic_core::atomic::create_new_interim`: an unnamed file linked into place), mode 0600
//! in a 0700 folder, and a batch of them is made durable by one barrier (`volcanic_core::durable`,
//! a shared `syncfs` on Linux) before any of them is attempted. A delivered or abandoned one is
//! unlinked without a barrier: a crash may bring it back, and it is then delivered again
//! (at-least-once). A file that cannot be read back (torn by a power loss) is removed with a
//! warning at start-up.
//!
//! The files hold webhook tokens and credentials: the state folder is outside every session's
//! sandbox (docs/security.md), and nothing here logs more of a URL than its host.
//!
//! Everything here blocks: call it from `spawn_blocking` or at start-up.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Bytes;
use serde::{Deserialize, Serialize};
use tracing::warn;

use super::deliver::Outgoing;

/// The suffix of a delivery's file.
const SUFFIX: &str = ".push";

/// One pending delivery as the outbox keeps it. No `Debug`: it holds the token and credentials.
pub(crate) struct Record {
    /// Its place in the order of all notifications of this state folder.
    pub seq: u64,
    pub task_id: String,
    /// The webhook's config id; with the URL, the webhook's queue.
    pub config_id: String,
    /// When the state change happened (Unix milliseconds); its age bounds the retries.
    pub created_ms: u64,
    pub outgoing: Outgoing,
}

impl Record {
    /// The bytes it takes on disk and in memory, near enough for the outbox's bounds.
    pub fn size(&self) -> u64 {
        let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        let len = self.outgoing.body.len()
            + self.outgoing.url.len()
            + text(&self.outgoing.token)
            + text(&self.outgoing.authorization)
            + self.task_id.len()
            + self.config_id.len()
            + 128;
        u64::try_from(len).unwrap_or(u64::MAX)
    }
}

/// The header line of a delivery's file.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Header {
    seq: u64,
    task_id: String,
    config_id: String,
    created_ms: u64,
    url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    authorization: Option<String>,
}

/// The outbox folder.
pub(crate) struct Outbox {
    dir: PathBuf,
}

/// What a write of a batch did.
pub(crate) struct Written {
    /// Per record, in order: whether its file exists now (and so must be removed later).
    pub created: Vec<bool>,
    /// The first error, of a create or of the barrier.
    pub error: Option<io::Error>,
}

impl Outbox {
    /// Opens (creating it 0700 when missing) the outbox at `dir` and reads what a previous run
    /// left, in notification order. Unreadable files are removed with a warning, and so are temp
    /// files of an interrupted write; `max_record_bytes` caps what is read of one file.
    ///
    /// # Errors
    /// The folder cannot be created, made private or listed.
    pub fn open(dir: PathBuf, max_record_bytes: u64) -> io::Result<(Outbox, Vec<Record>)> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let mut records = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if name.starts_with(".tmp") {
                remove_quietly(&path);
                continue;
            }
            let Some(seq) = seq_of(&name) else { continue };
            match read(&path, max_record_bytes) {
                Some(record) if record.seq == seq => records.push(record),
                _ => {
                    warn!(file = %path.display(), "push outbox record is unreadable; removed");
                    remove_quietly(&path);
                }
            }
        }
        records.sort_by_key(|record| record.seq);
        Ok((Outbox { dir }, records))
    }

    /// Creates a file for each of `records`, then makes them durable with one barrier. A record
    /// whose file cannot be created is not retried here; the caller delivers it from memory.
    pub fn write(&self, records: &[Arc<Record>]) -> Written {
        let mut created = Vec::with_capacity(records.len());
        let mut error = None;
        for record in records {
            let made =
                volcanic_core::atomic::create_new_interim(&self.path(record.seq), &encode(record));
            created.push(made.is_ok());
            if let Err(err) = made {
                error.get_or_insert(err);
            }
        }
        if created.iter().any(|made| *made)
            && let Err(err) = volcanic_core::durable::sync_paths(&[self.dir.as_path()])
        {
            error.get_or_insert(err);
        }
        Written { created, error }
    }

    /// Removes a delivered or abandoned record; one already gone is fine.
    ///
    /// # Errors
    /// Any other error of the unlink.
    pub fn remove(&self, seq: u64) -> io::Result<()> {
        match std::fs::remove_file(self.path(seq)) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }

    fn path(&self, seq: u64) -> PathBuf {
        self.dir.join(format!("{seq:020}{SUFFIX}"))
    }
}

/// The sequence number a record's file name holds.
fn seq_of(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn encode(record: &Record) -> Vec<u8> {
    let header = Header {
        seq: record.seq,
        task_id: record.task_id.clone(),
        config_id: record.config_id.clone(),
        created_ms: record.created_ms,
        url: record.outgoing.url.clone(),
        token: record.outgoing.token.clone(),
        authorization: record.outgoing.authorization.clone(),
    };
    // A struct of strings and numbers always serializes; an empty header would read back as
    // unreadable and be removed, never delivered wrong.
    let mut bytes = serde_json::to_vec(&header).unwrap_or_default();
    bytes.push(b'\n');
    bytes.extend_from_slice(&record.outgoing.body);
    bytes
}

/// A record's file, or `None` when it is missing, not a regular file, too big or malformed.
fn read(path: &Path, cap: u64) -> Option<Record> {
    let bytes = volcanic_core::safe_file::read_config(path, cap).ok()??;
    let split = bytes.iter().position(|b| *b == b'\n')?;
    let header: Header = serde_json::from_slice(&bytes[..split]).ok()?;
    let body = Bytes::copy_from_slice(&bytes[split + 1..]);
    // A body that is not JSON was torn: the webhook must never get half a task.
    serde_json::from_slice::<serde::de::IgnoredAny>(&body).ok()?;
    Some(Record {
        seq: header.seq,
        task_id: header.task_id,
        config_id: header.config_id,
        created_ms: header.created_ms,
        outgoing: Outgoing {
            url: header.url,
            token: header.token,
            authorization: header.authorization,
            body,
        },
    })
}

fn remove_quietly(path: &Path) {
    if let Err(err) = std::fs::remove_file(path) {
        warn!(file = %path.display(), error = %err, "cannot remove a push outbox file");
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn record(seq: u64, text: &str) -> Arc<Record> {
        Arc::new(Record {
            seq,
            task_id: "t1".into(),
            config_id: "c1".into(),
            created_ms: 1_700_000_000_000,
            outgoing: Outgoing {
                url: "https://hook.example.com/p?q=1".into(),
                token: Some("tok-outbox-secret".into()),
                authorization: None,
                body: Bytes::from(format!(r#"{{"text":"{text}"}}"#)),
            },
        })
    }

    #[test]
    fn outbox_records_read_back_in_order_private_to_the_owner() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("a2a/push-outbox");
        let (outbox, left) = Outbox::open(dir.clone(), 1 << 20).unwrap();
        assert!(left.is_empty());
        let written = outbox.write(&[record(12, "b"), record(3, "a"), record(100, "c")]);
        assert_eq!((written.created, written.error.is_none()), (vec![true, true, true], true));
        outbox.remove(12).unwrap();
        outbox.remove(12).unwrap();
        let (_, left) = Outbox::open(dir.clone(), 1 << 20).unwrap();
        let seen: Vec<(u64, String, Option<String>)> = left
            .iter()
            .map(|r| {
                (
                    r.seq,
                    String::from_utf8(r.outgoing.body.to_vec()).unwrap(),
                    r.outgoing.token.clone(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (3, r#"{"text":"a"}"#.to_string(), Some("tok-outbox-secret".to_string())),
                (100, r#"{"text":"c"}"#.to_string(), Some("tok-outbox-secret".to_string())),
            ]
        );
        assert_eq!(left[0].outgoing.url, "https://hook.example.com/p?q=1");
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&outbox.path(3)), 0o600);
    }

    #[test]
    fn outbox_torn_or_foreign_files_are_removed_or_left_alone() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("outbox");
        let (outbox, _) = Outbox::open(dir.clone(), 1 << 20).unwrap();
        outbox.write(&[record(1, "whole")]);
        let torn = encode(&record(2, "torn"));
        std::fs::write(outbox.path(2), &torn[..torn.len() - 3]).unwrap();
        std::fs::write(outbox.path(3), b"").unwrap();
        std::fs::write(outbox.path(4), encode(&record(5, "wrong name"))).unwrap();
        std::fs::write(dir.join(".tmpABC"), b"half").unwrap();
        std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
        let (_, left) = Outbox::open(dir.clone(), 1 << 20).unwrap();
        assert_eq!(left.iter().map(|r| r.seq).collect::<Vec<_>>(), [1]);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [format!("{:020}.push", 1), "notes.txt".to_string()]);
    }
}
