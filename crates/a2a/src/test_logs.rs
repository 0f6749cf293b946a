//! Test-only log capture: runs a closure with every event of its thread written into a buffer,
//! so tests can assert what was (and was not) logged.
//!
//! One subscriber, installed as the global default the first time a test captures, serves every
//! capture: it writes an event only on a thread that is capturing. A subscriber per capture
//! (`with_default`) was flaky under a parallel `cargo test`: whether a `tracing` call site logs
//! is cached when the site is first hit, from the subscribers alive then, so another test
//! hitting the same call site for the first time while a capture was being set up could cache
//! "nobody listens" for it after the capture's own refresh of that cache, and the capture came
//! back empty. The global subscriber is alive from the first capture to the end of the process,
//! so from then on no call site is cached as unheard.

use std::cell::RefCell;
use std::io;
use std::sync::{Mutex, Once};

thread_local! {
    /// The capture of this thread, when it is capturing.
    static CAPTURE: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

/// Appends to the capture of the thread it writes on (nothing when it is not capturing).
struct ThreadCapture;

impl io::Write for ThreadCapture {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        CAPTURE.with(|capture| {
            if let Some(buffer) = capture.borrow_mut().as_mut() {
                buffer.extend_from_slice(bytes);
            }
        });
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn capturing() -> bool {
    CAPTURE.with(|capture| capture.borrow().is_some())
}

/// Installs the capturing subscriber as the global default, once per process.
fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        use tracing_subscriber::Layer;
        use tracing_subscriber::layer::SubscriberExt;
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .without_time()
            .with_writer(|| ThreadCapture)
            // Decided per event (the call sites' cached interest stays "sometimes").
            .with_filter(tracing_subscriber::filter::dynamic_filter_fn(|_, _| capturing()));
        let subscriber = tracing_subscriber::registry().with(layer);
        // Another global default (none is set in this crate's tests) would make captures empty,
        // which the tests asserting on them would show.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// Runs `f` with every event of this thread (all levels) captured; returns the captured text.
pub(crate) fn capture_logs(f: impl FnOnce()) -> String {
    install();
    // One capture at a time, so the refresh below never runs while another capture logs.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // Call sites first hit before the global subscriber existed cached "nobody listens".
    tracing::callsite::rebuild_interest_cache();
    let capture = Capturing::start();
    f();
    String::from_utf8(capture.finish()).unwrap()
}

/// This thread's capture while it lasts; ended also when the closure panics, so the thread does
/// not go on capturing.
struct Capturing;

impl Capturing {
    fn start() -> Capturing {
        CAPTURE.with(|capture| *capture.borrow_mut() = Some(Vec::new()));
        Capturing
    }

    fn finish(self) -> Vec<u8> {
        CAPTURE.with(|capture| capture.borrow_mut().take()).unwrap_or_default()
    }
}

impl Drop for Capturing {
    fn drop(&mut self) {
        CAPTURE.with(|capture| capture.borrow_mut().take());
    }
}
