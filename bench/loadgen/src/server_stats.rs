//! The server's own figures over a measured window, from /proc: CPU time (user + system, all
//! threads) and resident memory (VmRSS, sampled every 50 ms for the peak).

use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// /proc reports CPU time in USER_HZ ticks, which the kernel fixes at 100 on the architectures
/// this runs on (x86-64, arm64), whatever the internal tick rate.
const TICKS_PER_SECOND: f64 = 100.0;
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

#[derive(Serialize, Clone, Copy)]
pub struct ServerFigures {
    /// CPU seconds the server used during the window.
    pub cpu_s: f64,
    /// The highest VmRSS sampled during the window.
    pub rss_peak_kib: u64,
    /// VmRSS at the end of the window.
    pub rss_end_kib: u64,
}

/// Watches one process from `start` until `finish`.
pub struct Watch {
    pid: u32,
    cpu_start: u64,
    stop: watch::Sender<bool>,
    sampler: JoinHandle<u64>,
}

impl Watch {
    pub fn start(pid: u32) -> anyhow::Result<Self> {
        let cpu_start = cpu_ticks(pid)?;
        let (stop, mut stopped) = watch::channel(false);
        let sampler = tokio::spawn(async move {
            let mut peak = rss_kib(pid).unwrap_or(0);
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(SAMPLE_EVERY) => {}
                    _ = stopped.changed() => return peak,
                }
                peak = peak.max(rss_kib(pid).unwrap_or(0));
            }
        });
        Ok(Self { pid, cpu_start, stop, sampler })
    }

    pub async fn finish(self) -> anyhow::Result<ServerFigures> {
        let cpu_end = cpu_ticks(self.pid)?;
        let rss_end = rss_kib(self.pid)?;
        // The sampler may have ended already; its peak is still in the join handle.
        let _ = self.stop.send(true);
        let peak = self.sampler.await?.max(rss_end);
        Ok(ServerFigures {
            cpu_s: cpu_end.saturating_sub(self.cpu_start) as f64 / TICKS_PER_SECOND,
            rss_peak_kib: peak,
            rss_end_kib: rss_end,
        })
    }
}

/// utime + stime of the whole process, in ticks.
fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_cpu_ticks(&stat).ok_or_else(|| anyhow::anyhow!("/proc/{pid}/stat: unexpected format"))
}

fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces; fields count from after
    // its closing parenthesis: state is field 3, utime 14, stime 15.
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_rss_kib(&status).ok_or_else(|| anyhow::anyhow!("/proc/{pid}/status: no VmRSS"))
}

fn parse_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_utime_plus_stime_after_the_command_name() {
        let stat = "4242 (tokio (worker) 1) S 1 4242 4242 0 -1 4194560 1 0 0 0 250 75 0 0 20 0 3 0";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn rss_is_read_from_the_vmrss_line() {
        assert_eq!(parse_rss_kib("Name:\tx\nVmHWM:\t  9000 kB\nVmRSS:\t  8123 kB\n"), Some(8123));
        assert_eq!(parse_rss_kib("Name:\tx\n"), None);
    }

    #[test]
    fn this_process_can_be_watched() {
        let pid = std::process::id();
        assert!(cpu_ticks(pid).is_ok());
        assert!(rss_kib(pid).is_ok_and(|kib| kib > 0));
    }
}
