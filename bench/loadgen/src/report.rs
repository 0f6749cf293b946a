//! The JSON a run prints: latency percentiles, errors with samples, server figures.

use serde::Serialize;

use crate::server_stats::ServerFigures;

/// At most this many error descriptions are kept per run.
const ERROR_SAMPLES: usize = 5;

/// Latencies in milliseconds, nearest-rank percentiles.
#[derive(Serialize, Debug, PartialEq)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    /// From latencies in microseconds; `None` when there are none.
    pub fn from_micros(mut micros: Vec<u64>) -> Option<Self> {
        if micros.is_empty() {
            return None;
        }
        micros.sort_unstable();
        let rank = |q: f64| {
            let index = ((q * micros.len() as f64).ceil() as usize).clamp(1, micros.len()) - 1;
            micros[index] as f64 / 1000.0
        };
        let sum: u64 = micros.iter().sum();
        Some(Self {
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: micros[micros.len() - 1] as f64 / 1000.0,
            mean: sum as f64 / micros.len() as f64 / 1000.0,
        })
    }
}

/// Errors seen during the measured part of a run.
#[derive(Serialize, Default)]
pub struct Errors {
    pub count: u64,
    pub samples: Vec<String>,
}

impl Errors {
    pub fn record(&mut self, what: String) {
        self.count += 1;
        if self.samples.len() < ERROR_SAMPLES {
            self.samples.push(what);
        }
    }

    pub fn merge(&mut self, other: Errors) {
        self.count += other.count;
        for sample in other.samples {
            if self.samples.len() < ERROR_SAMPLES {
                self.samples.push(sample);
            }
        }
    }
}

/// What `load` prints.
#[derive(Serialize)]
pub struct LoadReport {
    pub mode: &'static str,
    pub connections: usize,
    /// Successful answers in the measured window.
    pub requests: u64,
    pub errors: Errors,
    pub window_s: f64,
    /// Successful answers per second of the window.
    pub rps: f64,
    pub latency_ms: Option<Latency>,
    /// Mean size of a successful answer's body.
    pub response_bytes: f64,
    /// The server's own figures over the window (with `--server-pid`).
    pub server_figures: Option<ServerFigures>,
    /// Server CPU microseconds per successful answer.
    pub server_cpu_us_per_request: Option<f64>,
}

/// What `stream` prints.
#[derive(Serialize)]
pub struct StreamReport {
    pub mode: &'static str,
    pub connections: usize,
    /// Complete, error-free streams measured.
    pub streams: u64,
    pub errors: Errors,
    pub first_event_ms: Option<Latency>,
    pub last_event_ms: Option<Latency>,
    pub events_per_stream: f64,
    /// The server's own figures over the whole run (with `--server-pid`).
    pub server_figures: Option<ServerFigures>,
}

/// A short, printable head of a body for error samples.
pub fn head(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_uses_nearest_rank() {
        let latency = Latency::from_micros((1..=100).map(|ms| ms * 1000).collect());
        assert_eq!(
            latency,
            Some(Latency { p50: 50.0, p90: 90.0, p99: 99.0, max: 100.0, mean: 50.5 })
        );
        assert_eq!(Latency::from_micros(Vec::new()), None);
    }

    #[test]
    fn errors_keep_a_bounded_sample() {
        let mut errors = Errors::default();
        for n in 0..10 {
            errors.record(format!("e{n}"));
        }
        assert_eq!(errors.count, 10);
        assert_eq!(errors.samples, ["e0", "e1", "e2", "e3", "e4"]);
    }
}
