//! `requestsPerMinute`: one `governor` limiter (GCRA) per caller that has the cap and one per
//! workspace with a total cap, rebuilt when the cap changes.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

/// A request over a cap: which one, and how long until one more is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Refused {
    pub(super) per_minute: NonZeroU32,
    /// The workspace's cap over all callers (else the caller's own).
    pub(super) workspace: bool,
    pub(super) wait: Duration,
}

#[derive(Default)]
pub(super) struct Rates {
    workspaces: Mutex<HashMap<PathBuf, WorkspaceRates>>,
}

#[derive(Default)]
struct WorkspaceRates {
    total: Option<Limiter>,
    callers: HashMap<String, Limiter>,
}

struct Limiter {
    per_minute: NonZeroU32,
    limiter: Arc<DefaultDirectRateLimiter>,
}

impl Limiter {
    fn new(per_minute: NonZeroU32) -> Self {
        Limiter {
            per_minute,
            limiter: Arc::new(RateLimiter::direct(Quota::per_minute(per_minute))),
        }
    }
}

/// The limiter for `cap` in `slot`, made (or made again, when the cap changed) as needed.
fn limiter(slot: &mut Option<Limiter>, cap: NonZeroU32) -> Arc<DefaultDirectRateLimiter> {
    match slot {
        Some(existing) if existing.per_minute == cap => existing.limiter.clone(),
        _ => slot.insert(Limiter::new(cap)).limiter.clone(),
    }
}

impl Rates {
    /// Counts a request of `caller` in `workspace` against its cap and the workspace's. Both
    /// are taken when both allow it; a request refused by the workspace's cap has still used
    /// one of the caller's (the limiter cannot look without taking).
    pub(super) fn check(
        &self,
        workspace: &Path,
        caller: &str,
        caller_cap: Option<NonZeroU32>,
        workspace_cap: Option<NonZeroU32>,
    ) -> Result<(), Refused> {
        let (own, total) = {
            let mut workspaces = self.workspaces.lock().unwrap_or_else(PoisonError::into_inner);
            let rates = match workspaces.get_mut(workspace) {
                Some(rates) => rates,
                None => workspaces.entry(workspace.to_path_buf()).or_default(),
            };
            let own = match caller_cap {
                Some(cap) => match rates.callers.get(caller) {
                    Some(existing) if existing.per_minute == cap => {
                        Some((cap, existing.limiter.clone()))
                    }
                    _ => {
                        let made = Limiter::new(cap);
                        let limiter = made.limiter.clone();
                        rates.callers.insert(caller.to_string(), made);
                        Some((cap, limiter))
                    }
                },
                None => {
                    rates.callers.remove(caller);
                    None
                }
            };
            let total = match workspace_cap {
                Some(cap) => Some((cap, limiter(&mut rates.total, cap))),
                None => {
                    rates.total = None;
                    None
                }
            };
            (own, total)
        };
        for (limit, workspace) in [(own, false), (total, true)] {
            let Some((per_minute, limiter)) = limit else { continue };
            if let Err(not_until) = limiter.check() {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                return Err(Refused { per_minute, workspace, wait });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(value: u32) -> Option<NonZeroU32> {
        NonZeroU32::new(value)
    }

    #[test]
    fn a_minutes_worth_passes_then_the_next_waits_its_share_of_the_minute() {
        let rates = Rates::default();
        let ws = Path::new("/ws");
        for _ in 0..3 {
            rates.check(ws, "bot", n(3), None).unwrap();
        }
        let refused = rates.check(ws, "bot", n(3), None).unwrap_err();
        assert_eq!((refused.per_minute, refused.workspace), (NonZeroU32::new(3).unwrap(), false));
        assert!(refused.wait > Duration::from_secs(15) && refused.wait <= Duration::from_secs(20));
        // Another caller, and the same caller without a cap, are not held.
        rates.check(ws, "other", n(3), None).unwrap();
        rates.check(ws, "bot", None, None).unwrap();
    }

    #[test]
    fn the_workspace_cap_counts_every_caller_together() {
        let rates = Rates::default();
        let ws = Path::new("/ws");
        rates.check(ws, "a", None, n(2)).unwrap();
        rates.check(ws, "b", None, n(2)).unwrap();
        let refused = rates.check(ws, "c", None, n(2)).unwrap_err();
        assert!(refused.workspace);
        // Another workspace has its own count.
        rates.check(Path::new("/other"), "c", None, n(2)).unwrap();
    }

    #[test]
    fn a_changed_cap_starts_a_new_count() {
        let rates = Rates::default();
        let ws = Path::new("/ws");
        rates.check(ws, "bot", n(1), None).unwrap();
        assert!(rates.check(ws, "bot", n(1), None).is_err());
        rates.check(ws, "bot", n(5), None).unwrap();
    }
}
