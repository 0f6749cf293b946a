//! Retention's settings (`A2A__Retention__*`), a leaf: the server's options hold them, and it
//! imports nothing of the crate.

use std::time::Duration;

/// Retention's settings (`A2A__Retention__*`).
#[derive(Debug, Clone, PartialEq)]
pub struct RetentionOptions {
    /// Whether retention runs at all (`A2A__Retention__Enabled`). Default true.
    pub enabled: bool,
    /// Settled tasks whose status last changed longer ago than this are removed, with the
    /// session of a context no task uses any more and the inbox files it received; `None` keeps
    /// them forever (`A2A__Retention__TaskDays`, whole days, 0 = forever). Default 90 days.
    pub task_age: Option<Duration>,
    /// Most bytes of callers' session folders and inbox files per workspace, pruned least
    /// recently used first; `None`: no cap (`A2A__Retention__MaxBytes`, 0 = none). Default 2 GiB.
    pub max_bytes: Option<u64>,
    /// Time between rounds; the first one runs at start (`A2A__Retention__Interval`). Nothing
    /// changed within the last interval is removed by the size cap. Default 1 h.
    pub interval: Duration,
}

impl Default for RetentionOptions {
    fn default() -> Self {
        RetentionOptions {
            enabled: true,
            task_age: Some(Duration::from_secs(90 * 24 * 60 * 60)),
            max_bytes: Some(2 * 1024 * 1024 * 1024),
            interval: Duration::from_secs(60 * 60),
        }
    }
}
