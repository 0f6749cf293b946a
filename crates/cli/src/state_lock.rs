//! One server per state folder: `volcanic serve` and `volcanic telegram` hold an exclusive
//! `flock` on `<state dir>/server.lock` for as long as they run, taken before they touch
//! anything else in the folder (the control socket, the approval records, task files, journals).
//!
//! Without it a second server on the same folder replaced the first one's control socket and
//! removed it when it exited, even when its own start failed on "address in use", so the first
//! server's `volcanic approvals` went unanswered until it restarted.
//!
//! The lock belongs to the open file, not to the file's name: it ends when the process does, by
//! any route (a crash, SIGKILL), so a stale lock file never blocks a start. The holder writes its
//! pid into the file, for the message the next one gives. The file is opened close-on-exec, so no
//! tool a session starts inherits the lock.

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::{Exit, Failure};

/// The lock file's name in the state folder.
const FILE_NAME: &str = "server.lock";

/// The lock, held until dropped (the end of the command).
#[derive(Debug)]
pub struct StateLock {
    _file: std::fs::File,
}

/// The lock file of `state_dir`.
pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE_NAME)
}

/// Takes the state folder's lock, without waiting.
///
/// # Errors
/// Exit 2 naming the folder and the pid of the server that holds it; exit 1 when the lock file
/// cannot be opened or locked for another reason.
pub fn acquire(state_dir: &Path) -> Result<StateLock, Failure> {
    let path = path(state_dir);
    let failed = |err: &dyn std::fmt::Display| Failure {
        code: Exit::Failed,
        message: format!("cannot lock the state folder ({}): {err}", path.display()),
    };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| failed(&e))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(err) if err == rustix::io::Errno::WOULDBLOCK => {
            let mut text = String::new();
            // The holder may not have written its pid yet; the message then goes without it.
            let _ = file.read_to_string(&mut text);
            let holder = match text.trim().parse::<u32>() {
                Ok(pid) => format!("another volcanic server (pid {pid})"),
                Err(_) => "another volcanic server".to_string(),
            };
            return Err(Failure::usage(format!(
                "{holder} is running with the state folder {}: stop it first, or give this one another --state-dir (one server per state folder; the lock is {})",
                state_dir.display(),
                path.display()
            )));
        }
        Err(err) => return Err(failed(&err)),
    }
    // Ours now: the pid replaces whatever an earlier holder left.
    file.set_len(0).map_err(|e| failed(&e))?;
    file.rewind().map_err(|e| failed(&e))?;
    file.write_all(format!("{}\n", std::process::id()).as_bytes()).map_err(|e| failed(&e))?;
    Ok(StateLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_folder_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = acquire(dir.path()).unwrap();
        let text = std::fs::read_to_string(path(dir.path())).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        let err = acquire(dir.path()).unwrap_err();
        assert_eq!(err.code, Exit::Usage);
        assert!(err.message.contains(&format!("(pid {})", std::process::id())), "{}", err.message);
        drop(held);
        // Released with the file: the next start takes it, over the old pid.
        let again = acquire(dir.path()).unwrap();
        drop(again);
    }
}
