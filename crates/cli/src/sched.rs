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

/// Puts the calling thread under `SCHED_BATCH` with its nice value unchanged; threads it starts
/// from now on inherit it. Elsewhere than Linux it does nothing.
///
/// # Errors
/// The reason the policy could not be set (a seccomp profile that forbids it, say); the thread
/// then keeps its policy.
pub fn prefer_throughput() -> Result<(), String> {
    imp::prefer_throughput()
}

#[cfg(target_os = "linux")]
mod imp {
    use thread_priority::{
        NormalThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id,
    };

    const BATCH: ThreadSchedulePolicy =
        ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch);

    pub(super) fn prefer_throughput() -> Result<(), String> {
        let nice = rustix::process::getpriority_process(None)
            .map_err(|err| format!("cannot read the nice value: {err}"))?;
        let priority = priority_for_nice(nice)
            .ok_or_else(|| format!("no priority keeps the nice value {nice}"))?;
        set_thread_priority_and_policy(thread_native_id(), priority, BATCH)
            .map_err(|err| format!("cannot set SCHED_BATCH: {err:?}"))
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
    pub(super) fn prefer_throughput() -> Result<(), String> {
        Ok(())
    }
}
