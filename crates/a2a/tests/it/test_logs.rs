//! What `scripts/test` scans for leaked secrets (docs/reliability.md, "Secrets in logs"): when
//! `VOLCANIC_TEST_LOG_DIR` is set, the servers of this binary log at debug level into a file
//! there, and every key a test writes into a callers.json is registered as a secret to look for.
//! Unset (a plain `cargo test`), both are no-ops.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, Once};

fn log_dir() -> Option<PathBuf> {
    std::env::var_os("VOLCANIC_TEST_LOG_DIR").map(PathBuf::from)
}

/// Installs the debug-level log file subscriber once per test binary.
pub fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let Some(dir) = log_dir() else { return };
        std::fs::create_dir_all(&dir).unwrap();
        let file = File::create(dir.join(format!("a2a-it-{}.log", std::process::id()))).unwrap();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(Mutex::new(file))
            .try_init()
            .unwrap();
    });
}

/// Records `secret` for the scan.
pub fn register_secret(secret: &str) {
    let Some(dir) = log_dir() else { return };
    let dir = dir.join("secrets");
    std::fs::create_dir_all(&dir).unwrap();
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("a2a-it-{}.txt", std::process::id())))
        .unwrap();
    writeln!(file, "{secret}").unwrap();
}
