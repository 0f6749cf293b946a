//! Durability barriers with group commit: "everything written so far to these files is on disk".
//!
//! On Linux a barrier is one `syncfs(2)` of the file system holding the files, shared between
//! every caller waiting on that file system: a caller waits for a sync that *started after* it
//! asked, and one sync serves every caller that arrived before it started (group commit). On a
//! disk where each `fsync` is its own device flush (ext4 without a journal on a virtual disk, for
//! one) 32 concurrent writers then pay for a handful of flushes instead of 32 or 64.
//!
//! The trade-off: a `syncfs` writes back the whole file system's dirty data, not only the files
//! asked for, so a barrier on a file system busy with other large writes waits for them too.
//! Elsewhere than Linux each file is synced on its own (`fsync`), which is what was asked for
//! and no more.
//!
//! Barriers block the calling thread: call them from blocking code (`spawn_blocking`), never on
//! an async worker.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::PoisonError;

/// Makes everything written so far to `files` (their data, and for folders their entries)
/// durable. On Linux, by a shared `syncfs` of each file system involved (see the module docs),
/// which also makes everything else written there before it started durable.
///
/// # Errors
/// The sync's error, given to every caller that sync served. A caller served while a later sync
/// failed may get that failure too (errors are reported conservatively, never lost).
pub fn sync_files(files: &[&File]) -> io::Result<()> {
    imp::sync_files(files)
}

/// [`sync_files`] for paths (files or folders), opened read-only for the purpose, without
/// blocking (`O_NONBLOCK`: a FIFO planted at a path opens at once, and its sync fails).
///
/// # Errors
/// As [`sync_files`], and the error of opening a path.
pub fn sync_paths(paths: &[&Path]) -> io::Result<()> {
    let open = |path: &&Path| {
        use std::os::unix::fs::OpenOptionsExt;
        let nonblock = rustix::fs::OFlags::NONBLOCK.bits() | rustix::fs::OFlags::NOCTTY.bits();
        File::options().read(true).custom_flags(i32::try_from(nonblock).unwrap_or(0)).open(path)
    };
    let files = paths.iter().map(open).collect::<io::Result<Vec<_>>>()?;
    sync_files(&files.iter().collect::<Vec<_>>())
}

/// Makes the entries of folder `dir` durable (a rename or link into it), where `entry` is a file
/// of that folder. On Linux the barrier is the shared `syncfs` of `entry`'s file system, which
/// covers the folder without opening it; elsewhere the folder is opened and synced.
///
/// # Errors
/// As [`sync_files`], and the error of opening `dir` where it is opened.
pub fn sync_folder_of(dir: &Path, entry: &File) -> io::Result<()> {
    if cfg!(target_os = "linux") { sync_files(&[entry]) } else { sync_paths(&[dir]) }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::collections::HashMap;
    use std::fs::File;
    use std::io;
    use std::os::unix::fs::MetadataExt;
    use std::sync::{Arc, Mutex, OnceLock, PoisonError};

    use super::Barrier;

    /// One barrier per file system, by device number.
    fn barrier_of(dev: u64) -> Arc<Barrier> {
        static BARRIERS: OnceLock<Mutex<HashMap<u64, Arc<Barrier>>>> = OnceLock::new();
        let mut barriers =
            BARRIERS.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
        barriers.entry(dev).or_default().clone()
    }

    pub(super) fn sync_files(files: &[&File]) -> io::Result<()> {
        let mut seen: Vec<u64> = Vec::with_capacity(1);
        for file in files {
            let dev = file.metadata()?.dev();
            if seen.contains(&dev) {
                continue;
            }
            seen.push(dev);
            // Every waiter of this barrier is on the same file system, so whichever of them runs
            // the sync does it through its own descriptor.
            barrier_of(dev).wait(&|| rustix::fs::syncfs(file).map_err(io::Error::from))?;
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::fs::File;
    use std::io;

    pub(super) fn sync_files(files: &[&File]) -> io::Result<()> {
        files.iter().try_for_each(|file| file.sync_all())
    }
}

/// Group commit: callers wait for a sync that started after they arrived; one sync at a time,
/// serving everyone who arrived before it started.
///
/// A waiter needs either the running sync's successor or (once that one ends) nothing more, so
/// waiters sleep on the condition variable of the parity of the sync they need: the end of a
/// sync wakes those it served, and one of the next generation to run the next sync, instead of
/// every waiter (most of whom would go back to sleep).
#[derive(Default)]
pub struct Barrier {
    state: std::sync::Mutex<BarrierState>,
    /// Waiters for an even-numbered sync, and for an odd-numbered one.
    done: [std::sync::Condvar; 2],
}

#[derive(Default)]
struct BarrierState {
    /// Syncs started so far (the number of the running one while `running`).
    started: u64,
    /// Syncs finished so far.
    finished: u64,
    running: bool,
    /// The latest sync that failed, with its error.
    failed: Option<(u64, io::ErrorKind, String)>,
}

impl Barrier {
    /// A barrier no sync has run through yet.
    pub fn new() -> Self {
        Barrier::default()
    }

    /// Returns once a sync that started after this call has finished: runs `sync` itself when
    /// none is running, else waits for the running one and then for (or runs) the next.
    ///
    /// # Errors
    /// The error of a sync that started after this call (see [`sync_files`]); a `sync` that
    /// panics counts as failed for everyone it would have served, and the panic goes on in the
    /// caller that ran it.
    pub fn wait(&self, sync: &dyn Fn() -> io::Result<()>) -> io::Result<()> {
        let mut state = self.lock();
        let needed = state.started + 1;
        loop {
            if state.finished >= needed {
                return match &state.failed {
                    Some((number, kind, message)) if *number >= needed => {
                        Err(io::Error::new(*kind, message.clone()))
                    }
                    _ => Ok(()),
                };
            }
            if state.running {
                state = self.generation(needed).wait(state).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            state.running = true;
            state.started += 1;
            let number = state.started;
            drop(state);
            let mut running = Running { barrier: self, number, result: None };
            running.result = Some(sync());
            drop(running);
            state = self.lock();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BarrierState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where the waiters for sync `number` sleep.
    fn generation(&self, number: u64) -> &std::sync::Condvar {
        &self.done[usize::from(number % 2 == 1)]
    }
}

/// The sync in progress: records its end (also when `sync` panicked) and wakes the waiters.
struct Running<'a> {
    barrier: &'a Barrier,
    number: u64,
    result: Option<io::Result<()>>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut state = self.barrier.lock();
        state.running = false;
        state.finished = self.number;
        match self.result.take() {
            Some(Ok(())) => {}
            Some(Err(err)) => state.failed = Some((self.number, err.kind(), err.to_string())),
            None => {
                state.failed =
                    Some((self.number, io::ErrorKind::Other, "the sync panicked".to_string()));
            }
        }
        drop(state);
        // Everyone this sync served; and of those who arrived while it ran (they need the next,
        // and sleep on the other parity), one to run it. The rest wait for its end. The other
        // parity may still hold a waiter of the sync before this one whose wake-up (sent after
        // the lock was let go) has not reached it yet: if this notification wakes that one
        // instead, it returns, and the pending `notify_all` of its own sync, on the same
        // condition variable, wakes the next generation, one of whom runs the next sync.
        self.barrier.generation(self.number).notify_all();
        self.barrier.generation(self.number + 1).notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// A sync that records when it started and finished (on a shared logical clock) and whether
    /// two ever overlapped.
    struct Recorder {
        clock: AtomicU64,
        running: AtomicUsize,
        overlapped: AtomicUsize,
        /// (start tick, end tick) of every sync, in order.
        syncs: Mutex<Vec<(u64, u64)>>,
    }

    impl Recorder {
        fn new() -> Self {
            Recorder {
                clock: AtomicU64::new(0),
                running: AtomicUsize::new(0),
                overlapped: AtomicUsize::new(0),
                syncs: Mutex::new(Vec::new()),
            }
        }

        fn tick(&self) -> u64 {
            self.clock.fetch_add(1, Ordering::SeqCst)
        }

        fn sync(&self, fail: bool) -> io::Result<()> {
            if self.running.fetch_add(1, Ordering::SeqCst) > 0 {
                self.overlapped.fetch_add(1, Ordering::SeqCst);
            }
            let start = self.tick();
            std::thread::sleep(Duration::from_millis(2));
            let end = self.tick();
            self.syncs.lock().unwrap().push((start, end));
            self.running.fetch_sub(1, Ordering::SeqCst);
            if fail { Err(io::Error::other("disk on fire")) } else { Ok(()) }
        }
    }

    /// Starts a sync on another thread that holds until the returned gate is passed (once the
    /// caller has queued what it wants behind it), then ends with `end`. Returns once the sync
    /// is running.
    fn hold_a_sync(
        barrier: &Arc<Barrier>,
        end: fn() -> io::Result<()>,
    ) -> (std::thread::JoinHandle<io::Result<()>>, Arc<std::sync::Barrier>) {
        let gate = Arc::new(std::sync::Barrier::new(2));
        let holder = {
            let (barrier, gate) = (barrier.clone(), gate.clone());
            std::thread::spawn(move || {
                barrier.wait(&|| {
                    gate.wait();
                    gate.wait();
                    end()
                })
            })
        };
        gate.wait(); // the sync is running
        (holder, gate)
    }

    #[test]
    fn every_waiter_returns_after_a_sync_that_started_after_it_asked() {
        let barrier = Arc::new(Barrier::new());
        let recorder = Arc::new(Recorder::new());
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let (barrier, recorder) = (barrier.clone(), recorder.clone());
                std::thread::spawn(move || {
                    let mut served = Vec::new();
                    for _ in 0..20 {
                        let asked = recorder.tick();
                        barrier.wait(&|| recorder.sync(false)).unwrap();
                        let returned = recorder.tick();
                        served.push((asked, returned));
                    }
                    served
                })
            })
            .collect();
        let served: Vec<(u64, u64)> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        let syncs = recorder.syncs.lock().unwrap().clone();
        assert_eq!(recorder.overlapped.load(Ordering::SeqCst), 0, "syncs never overlap");
        for (asked, returned) in &served {
            assert!(
                syncs.iter().any(|(start, end)| start > asked && end < returned),
                "a waiter asking at {asked} returned at {returned} without a sync inside: {syncs:?}"
            );
        }
        // Group commit: 320 waits needed far fewer syncs (each serves every waiter queued
        // before it started). Only a bound that holds on any scheduling: one sync per wait.
        assert!(syncs.len() <= served.len());
    }

    #[test]
    fn a_failed_sync_fails_every_waiter_it_served_and_the_next_sync_recovers() {
        let barrier = Arc::new(Barrier::new());
        let recorder = Arc::new(Recorder::new());
        // Hold a sync open while waiters queue up behind it, so the next sync serves them all.
        let (holder, gate) = hold_a_sync(&barrier, || Ok(()));
        let failing = Arc::new(AtomicUsize::new(0));
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let (barrier, recorder, failing) =
                    (barrier.clone(), recorder.clone(), failing.clone());
                std::thread::spawn(move || {
                    barrier.wait(&|| {
                        failing.fetch_add(1, Ordering::SeqCst);
                        recorder.sync(true)
                    })
                })
            })
            .collect();
        // Most waiters reach the barrier while the first sync runs; one arriving later needs a
        // later sync, which fails too, so the outcome does not depend on the timing.
        std::thread::sleep(Duration::from_millis(50));
        gate.wait(); // the first sync ends
        holder.join().unwrap().unwrap();
        for waiter in waiters {
            let err = waiter.join().unwrap().unwrap_err();
            assert_eq!(err.to_string(), "disk on fire");
        }
        assert!(failing.load(Ordering::SeqCst) >= 1);
        // A later caller gets a fresh sync of its own, which succeeds.
        barrier.wait(&|| recorder.sync(false)).unwrap();
    }

    #[test]
    fn a_panicking_sync_fails_its_waiters_instead_of_hanging_them() {
        let barrier = Barrier::new();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            barrier.wait(&|| panic!("boom"))
        }));
        assert!(panicked.is_err());
        assert!(!barrier.lock().running);
        barrier.wait(&|| Ok(())).unwrap();
    }

    /// Runs `work` on a thread and fails the test if it has not ended within 60 s: a lost
    /// wake-up hangs a waiter, and a hung test says less than a failed one.
    fn within_a_minute(work: impl FnOnce() + Send + 'static) {
        let (done, ended) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            work();
            let _ = done.send(());
        });
        match ended.recv_timeout(Duration::from_secs(60)) {
            Ok(()) => worker.join().unwrap(),
            // The worker panicked (its assertion's message is in the output), or hangs.
            Err(_) if worker.is_finished() => std::panic::resume_unwind(worker.join().unwrap_err()),
            Err(_) => panic!("barrier waiters still waiting after 60 s: a lost wake-up"),
        }
    }

    #[test]
    fn many_waiters_on_instant_syncs_all_return() {
        // Syncs that take no time make generations turn over as fast as threads wake, where
        // a wake-up sent to the wrong generation would strand a waiter.
        within_a_minute(|| {
            let barrier = Arc::new(Barrier::new());
            let syncs = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..32)
                .map(|_| {
                    let (barrier, syncs) = (barrier.clone(), syncs.clone());
                    std::thread::spawn(move || {
                        for _ in 0..500 {
                            barrier
                                .wait(&|| {
                                    syncs.fetch_add(1, Ordering::SeqCst);
                                    std::thread::yield_now();
                                    Ok(())
                                })
                                .unwrap();
                        }
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
            let syncs = syncs.load(Ordering::SeqCst);
            assert!((1..=32 * 500).contains(&syncs), "{syncs} syncs");
        });
    }

    #[test]
    fn a_sync_panicking_with_waiters_queued_wakes_them_and_the_next_runs() {
        within_a_minute(|| {
            let barrier = Arc::new(Barrier::new());
            // The first sync holds while waiters queue behind it, then panics.
            let (holder, gate) = hold_a_sync(&barrier, || panic!("sync panicked"));
            let waiters: Vec<_> = (0..8)
                .map(|_| {
                    let barrier = barrier.clone();
                    std::thread::spawn(move || barrier.wait(&|| Ok(())))
                })
                .collect();
            std::thread::sleep(Duration::from_millis(50));
            gate.wait();
            assert!(holder.join().is_err(), "the panic goes on in the thread that ran the sync");
            // They needed the sync after the panicked one, which one of them ran.
            for waiter in waiters {
                waiter.join().unwrap().unwrap();
            }
            barrier.wait(&|| Ok(())).unwrap();
        });
    }

    #[test]
    fn sync_files_and_paths_sync_real_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, b"data").unwrap();
        let file = File::open(&path).unwrap();
        let folder = File::open(dir.path()).unwrap();
        sync_files(&[&file, &folder]).unwrap();
        sync_paths(&[&path, dir.path()]).unwrap();
        assert!(sync_paths(&[&dir.path().join("missing")]).is_err());
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let dir = dir.path().to_path_buf();
                std::thread::spawn(move || {
                    let path = dir.join(format!("f{i}"));
                    std::fs::write(&path, b"x").unwrap();
                    sync_paths(&[&path]).unwrap();
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    }
}
