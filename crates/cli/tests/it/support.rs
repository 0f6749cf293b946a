//! Helpers shared by the tests that run `volcanic` as a child process: reading its first stdout
//! line (the `volcanic: listening on <base>` line, the CLI's contract with its callers) and
//! waiting, within a deadline, for a file that something inside the child writes.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// What becomes of the child's stdout after its first line.
#[derive(Clone, Copy, Debug)]
pub enum Rest {
    /// Keep reading it, so the child never blocks on a full pipe.
    Drain,
    /// Close it: the child's later writes to stdout fail.
    Close,
}

/// The base URL (`http://127.0.0.1:<port>`) of the child's listening line. Panics when no line
/// comes within `deadline` or the line is not the contract line.
pub fn listening_base(child: &mut Child, deadline: Duration, rest: Rest) -> String {
    let line = first_line(child, deadline, rest);
    line.strip_prefix("volcanic: listening on ").expect("the contract line").to_string()
}

/// The child's first stdout line, read on a thread of its own so that the wait is bounded by
/// `deadline`. Takes the child's stdout.
pub fn first_line(child: &mut Child, deadline: Duration, rest: Rest) -> String {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        if let Some(Ok(line)) = lines.next() {
            // The test may have given up waiting already; its failure says so.
            let _ = tx.send(line);
        }
        match rest {
            Rest::Drain => for _ in lines {},
            Rest::Close => {}
        }
    });
    rx.recv_timeout(deadline).expect("the listening line")
}

/// Reads `path` every 100 ms until `check` accepts its text; returns what `check` made of it.
/// Panics, naming the file, when `deadline` passes first.
pub fn wait_for_file<T>(path: &Path, deadline: Duration, check: impl Fn(&str) -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Some(found) = check(&text)
        {
            return found;
        }
        assert!(start.elapsed() < deadline, "{} was not written in time", path.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}
