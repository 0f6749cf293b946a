//! The server's threads run under Linux's `SCHED_BATCH` policy (docs/performance.md,
//! "Scheduling").
//!
//! The async runtime hands every file operation to a blocking-pool thread and gets the result back
//! by waking the async thread. Under the default policy a woken thread preempts the one running
//! on its core, so on a busy core every such hand-over costs two context switches, right in the
//! middle of the async thread's batch of ready connections: measured at 14 switches per
//! SendMessage on tmpfs and 23 on a disk. Under `SCHED_BATCH` a woken thread waits for the running
//! one to block or use up its slice, so the async thread finishes its batch, the blocking threads
//! then run theirs back to back, and more writers share each `syncfs`. The price is a wake-up
//! latency of up to one scheduler slice when the core is busy with something else; on an idle
//! core nothing changes. Nice values are kept.
//!
//! Set on the main thread before the runtime starts, so that every thread it starts (and every
//! child process, such as a tool's bash) inherits it.

/// What [`prefer_throughput`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The thread now runs under `SCHED_BATCH`.
    Batch,
    /// The thread was started under another policy than the default (`SCHED_BATCH` already, a
    /// real-time one or `SCHED_IDLE`, chosen by whoever started it), named here, and keeps it.
    Kept(String),
    /// Not Linux: nothing to do.
    #[cfg(not(target_os = "linux"))]
    Unsupported,
}

/// Puts the calling thread under `SCHED_BATCH` with its nice value unchanged, when it runs under
/// the default policy; threads it starts from now on inherit it. Elsewhere than Linux it does
/// nothing.
///
/// # Errors
/// The reason the policy could not be read or set (a seccomp profile that forbids it, say); the
/// thread then keeps its policy, or, when only its nice value could not be set, runs under
/// `SCHED_BATCH` with the nice value it had.
pub fn prefer_throughput() -> Result<Outcome, String> {
    imp::prefer_throughput()
}

#[cfg(target_os = "linux")]
mod imp {
    use thread_priority::{
        NormalThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id, thread_schedule_policy,
    };

    use super::Outcome;

    const BATCH: ThreadSchedulePolicy =
        ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch);

    pub(super) fn prefer_throughput() -> Result<Outcome, String> {
        // A policy someone chose (a real-time one, SCHED_IDLE) is theirs to keep: leaving a
        // real-time one would lower the server's priority, leaving SCHED_IDLE would raise it.
        let policy = thread_schedule_policy()
            .map_err(|err| format!("cannot read the scheduling policy: {err:?}"))?;
        if policy != ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other) {
            return Ok(Outcome::Kept(format!("{policy:?}")));
        }
        let nice = rustix::process::getpriority_process(None)
            .map_err(|err| format!("cannot read the nice value: {err}"))?;
        let priority = priority_for_nice(nice)
            .ok_or_else(|| format!("no priority keeps the nice value {nice}"))?;
        set_thread_priority_and_policy(thread_native_id(), priority, BATCH)
            .map_err(|err| format!("cannot set SCHED_BATCH: {err:?}"))?;
        Ok(Outcome::Batch)
    }

    /// The priority that `thread_priority` turns into nice value `nice` for a normal policy: it
    /// always sets a nice value with the policy, and this one must not change (raising the
    /// thread's priority would be wrong, and is refused without privileges).
    pub(super) fn priority_for_nice(nice: i32) -> Option<ThreadPriority> {
        (u8::from(ThreadPriorityValue::MIN)..=u8::from(ThreadPriorityValue::MAX))
            .filter_map(|value| ThreadPriorityValue::try_from(value).ok())
            .map(ThreadPriority::Crossplatform)
            .find(|priority| priority.to_posix(BATCH).ok() == Some(nice))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn every_nice_value_has_a_priority_that_keeps_it() {
            for nice in -20..=19 {
                let priority = priority_for_nice(nice);
                assert!(priority.is_some(), "nice {nice}");
                assert_eq!(priority.and_then(|p| p.to_posix(BATCH).ok()), Some(nice));
            }
            assert!(priority_for_nice(20).is_none());
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::Outcome;

    pub(super) fn prefer_throughput() -> Result<Outcome, String> {
        Ok(Outcome::Unsupported)
    }
}
