//! Durable replacements of many writers, committed together by one thread.
//!
//! [`submit`] hands a replacement to the commit thread and returns at once. The thread takes
//! every replacement waiting (up to [`MAX_BATCH`]), writes each one's temp file, runs one
//! durability barrier for all of them and the files they name in `also`, renames each into
//! place, and calls each one's `done` with its outcome after the next barrier, which made the
//! renames durable. That next barrier is also the first of the next batch when one is waiting
//! (it covers the new temp files as well), so under load a batch costs one barrier, not two.
//! While it flushes, the next writers queue up: that is the group commit.
//!
//! Why a thread of its own: a writer waiting in the blocking pool for the shared barriers of
//! [`crate::durable`] cost several sleeps and wake-ups of threads per write (a pool thread woken
//! for the work, each barrier's wait, the herd woken at the end of each sync, contention on the
//! pool's queue); here a batch costs one wake-up of the commit thread, and each writer's task is
//! woken once, by its `done`.
//!
//! Each replacement keeps the guarantees of [`crate::atomic::write_atomic_with`]: the target holds
//! the old content or the new one, whole; `done(Ok(()))` is called only once the new content,
//! its name and the `also` files are durable. A failed first barrier fails every replacement of
//! its batch with their targets untouched; a failed second barrier fails the ones it covered
//! (renamed, as a failed second barrier of `write_atomic_with` leaves them).
//!
//! The thread starts on the first [`submit`] and lives as long as the process, blocked on its
//! queue when there is nothing to write; it holds no lock that a writer waits on.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Mutex, PoisonError};

use crate::atomic::{Staged, stage};

/// Called on the commit thread with the outcome of a replacement: keep it short and never wait
/// on anything that may wait for the commit thread.
pub type Done = Box<dyn FnOnce(io::Result<()>) + Send>;

/// Most replacements committed in one batch (bounds the temp files open at once).
pub const MAX_BATCH: usize = 64;

/// Replaces `path` with `bytes` atomically and durably (as
/// [`crate::atomic::write_atomic_with`], `also` made durable by the same barrier), on the commit
/// thread; `done` gets the outcome once the replacement is durable or has failed. Returns at
/// once; the replacement happens whether or not anyone still waits for it.
///
/// When the commit thread cannot be started, `done` gets that error at once.
pub fn submit(path: PathBuf, bytes: Vec<u8>, also: Vec<File>, done: Done) {
    let job = Job { path, bytes, also, done };
    static SENDER: Mutex<Option<mpsc::Sender<Job>>> = Mutex::new(None);
    let mut sender = SENDER.lock().unwrap_or_else(PoisonError::into_inner);
    // No thread yet, or it is gone: start one.
    let job = match sender.as_ref() {
        Some(tx) => match tx.send(job) {
            Ok(()) => return,
            Err(mpsc::SendError(job)) => job,
        },
        None => job,
    };
    let (tx, rx) = mpsc::channel();
    match std::thread::Builder::new().name("volcanic-commit".into()).spawn(move || run(&rx)) {
        Ok(_) => {
            if let Err(mpsc::SendError(job)) = tx.send(job) {
                finish(job.done, Err(io::Error::other("the commit thread stopped at once")));
                return;
            }
            *sender = Some(tx);
        }
        Err(err) => finish(job.done, Err(err)),
    }
}

struct Job {
    path: PathBuf,
    bytes: Vec<u8>,
    also: Vec<File>,
    done: Done,
}

fn run(queue: &mpsc::Receiver<Job>) {
    // Replacements renamed into place whose rename the next barrier makes durable.
    let mut renamed: Vec<Renamed> = Vec::new();
    loop {
        // With renames waiting for their barrier, take what is queued without waiting: the
        // barrier goes ahead now, for those alone when nothing else came.
        let first = if renamed.is_empty() {
            match queue.recv() {
                Ok(job) => Some(job),
                Err(mpsc::RecvError) => return,
            }
        } else {
            queue.try_recv().ok()
        };
        let mut batch: Vec<Job> = first.into_iter().collect();
        while !batch.is_empty() && batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(mpsc::TryRecvError::Empty | mpsc::TryRecvError::Disconnected) => break,
            }
        }
        renamed = commit(batch, renamed);
    }
}

/// One barrier: it makes durable the renames of the previous batch (whose writers are then
/// told) and the temp files of this one (then renamed into place, for the next barrier).
fn commit(batch: Vec<Job>, renamed: Vec<Renamed>) -> Vec<Renamed> {
    let mut staged: Vec<(Staged, Job)> = Vec::with_capacity(batch.len());
    for job in batch {
        match stage(&job.path, &job.bytes) {
            Ok(ready) => staged.push((ready, job)),
            Err(err) => finish(job.done, Err(err)),
        }
    }
    let files: Vec<&File> = staged
        .iter()
        .flat_map(|(ready, job)| std::iter::once(ready.tmp.as_file()).chain(job.also.iter()))
        .collect();
    let entries: Vec<(&Path, &File)> =
        renamed.iter().map(|done| (done.dir.as_path(), &done.file)).collect();
    let synced = crate::durable::sync_files_and_folders(&files, &entries);
    drop((files, entries));
    for done in renamed {
        finish(done.done, synced.as_ref().copied().map_err(copy));
    }
    let mut next = Vec::with_capacity(staged.len());
    for (ready, job) in staged {
        if let Err(err) = &synced {
            // The temp file goes with `ready`; the target is untouched.
            finish(job.done, Err(copy(err)));
            continue;
        }
        match ready.tmp.persist(&ready.path) {
            Ok(file) => next.push(Renamed { dir: ready.dir, file, done: job.done }),
            Err(err) => finish(job.done, Err(err.error)),
        }
    }
    next
}

/// A replacement renamed into place, waiting for the barrier that makes the rename durable.
struct Renamed {
    dir: PathBuf,
    file: File,
    done: Done,
}

/// Calls `done`, keeping the thread alive when it panics.
fn finish(done: Done, outcome: io::Result<()>) {
    let call = std::panic::AssertUnwindSafe(move || done(outcome));
    if std::panic::catch_unwind(call).is_err() {
        tracing::error!("a durable write's completion panicked");
    }
}

/// One error for each replacement a failed barrier served.
fn copy(err: &io::Error) -> io::Error {
    io::Error::new(err.kind(), err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: PathBuf, bytes: &[u8], also: Vec<File>) -> io::Result<()> {
        let (tx, rx) = mpsc::channel();
        submit(
            path,
            bytes.to_vec(),
            also,
            Box::new(move |outcome| {
                tx.send(outcome).unwrap();
            }),
        );
        rx.recv().unwrap()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn submit_replaces_content_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/task.json");
        write(path.clone(), b"one", Vec::new()).unwrap();
        let journal_path = dir.path().join("journal.jsonl");
        std::fs::write(&journal_path, b"line\n").unwrap();
        let journal = File::open(&journal_path).unwrap();
        write(path.clone(), b"two", vec![journal]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(names(&dir.path().join("sub")), vec!["task.json"]);
    }

    #[test]
    fn submit_from_many_threads_writes_every_file_and_reports_each() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = mpsc::channel();
        let count = 3 * MAX_BATCH;
        for i in 0..count {
            let tx = tx.clone();
            submit(
                dir.path().join(format!("{i}.json")),
                format!("content {i}").into_bytes(),
                Vec::new(),
                Box::new(move |outcome| tx.send((i, outcome.is_ok())).unwrap()),
            );
        }
        let mut reported: Vec<(usize, bool)> = (0..count).map(|_| rx.recv().unwrap()).collect();
        reported.sort_unstable();
        assert_eq!(reported, (0..count).map(|i| (i, true)).collect::<Vec<_>>());
        for i in 0..count {
            let content = std::fs::read_to_string(dir.path().join(format!("{i}.json"))).unwrap();
            assert_eq!(content, format!("content {i}"));
        }
        assert_eq!(names(dir.path()).len(), count);
    }

    #[test]
    fn submit_failure_of_one_write_leaves_the_others_of_its_batch_written() {
        let dir = tempfile::tempdir().unwrap();
        // A folder where the file should go: the rename fails, the target stays a folder.
        std::fs::create_dir(dir.path().join("taken.json")).unwrap();
        std::fs::write(dir.path().join("taken.json/inside"), b"kept").unwrap();
        let (tx, rx) = mpsc::channel();
        for name in ["a.json", "taken.json", "b.json"] {
            let tx = tx.clone();
            submit(
                dir.path().join(name),
                b"new".to_vec(),
                Vec::new(),
                Box::new(move |outcome| tx.send((name, outcome.is_ok())).unwrap()),
            );
        }
        let mut reported: Vec<(&str, bool)> = (0..3).map(|_| rx.recv().unwrap()).collect();
        reported.sort_unstable();
        assert_eq!(reported, vec![("a.json", true), ("b.json", true), ("taken.json", false)]);
        assert_eq!(std::fs::read_to_string(dir.path().join("a.json")).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(dir.path().join("b.json")).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(dir.path().join("taken.json/inside")).unwrap(), "kept");
        assert_eq!(names(dir.path()), vec!["a.json", "b.json", "taken.json"]);
    }

    #[test]
    fn submit_keeps_working_after_a_completion_panics() {
        let dir = tempfile::tempdir().unwrap();
        submit(
            dir.path().join("first.json"),
            b"one".to_vec(),
            Vec::new(),
            Box::new(|_| panic!("a completion that panics")),
        );
        write(dir.path().join("second.json"), b"two", Vec::new()).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("first.json")).unwrap(), "one");
        assert_eq!(std::fs::read_to_string(dir.path().join("second.json")).unwrap(), "two");
    }
}
