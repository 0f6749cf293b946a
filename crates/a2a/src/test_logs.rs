//! Test-only log capture: runs a closure under a `tracing` subscriber that writes into a buffer,
//! so tests can assert what was (and was not) logged.

use std::io;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl io::Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with every event of this thread (all levels) captured; returns the captured text.
pub(crate) fn capture_logs(f: impl FnOnce()) -> String {
    // One capture at a time: the interest cache and the global max level are computed over every
    // live subscriber, and a rebuild by a capture ending on another thread could race this one's
    // (a capture once came back empty under a parallel `cargo test`).
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        // Another test thread may have cached "nobody listens" for a callsite before this
        // subscriber existed; recompute so this thread's events are not filtered out.
        tracing::callsite::rebuild_interest_cache();
        f()
    });
    let bytes = buffer.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}
