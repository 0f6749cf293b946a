//! Closed-loop load: every connection sends its next request as soon as the last answer is in,
//! for a warm-up plus a measured window, or for a fixed count (seeding).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use serde::Deserialize;
use serde::de::IgnoredAny;
use tokio::time::Instant;

use crate::report::{self, Errors, Latency, LoadReport};
use crate::server_stats::Watch;
use crate::target::{Connection, RequestTemplate};

/// No single answer may take longer; a request past it is an error and its connection is
/// replaced.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after a failed connect, so a dead server is not hammered in a tight loop.
const RECONNECT_PAUSE: Duration = Duration::from_millis(20);

pub enum Limit {
    Count(u64),
    Time { warmup: Duration, measure: Duration },
}

pub struct Plan {
    pub connections: usize,
    pub limit: Limit,
    pub jsonrpc: bool,
    /// Every successful answer must contain this (e.g. a non-empty list).
    pub expect: Option<String>,
    pub collect_task_ids: Option<PathBuf>,
    pub server_pid: Option<u32>,
}

/// What one connection saw in the measured window.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    bytes: u64,
    errors: Errors,
    task_ids: Vec<String>,
}

/// Where a worker stops.
#[derive(Clone)]
struct Bounds {
    measure_from: Instant,
    end: Option<Instant>,
    count: Option<(Arc<AtomicU64>, u64)>,
}

pub async fn run(template: RequestTemplate, plan: Plan) -> anyhow::Result<LoadReport> {
    let start = Instant::now();
    let bounds = match plan.limit {
        Limit::Count(count) => Bounds {
            measure_from: start,
            end: None,
            count: Some((Arc::new(AtomicU64::new(0)), count)),
        },
        Limit::Time { warmup, measure } => Bounds {
            measure_from: start + warmup,
            end: Some(start + warmup + measure),
            count: None,
        },
    };
    let collect = plan.collect_task_ids.is_some();
    let expect: Arc<Option<String>> = Arc::new(plan.expect);
    let workers: Vec<_> = (0..plan.connections)
        .map(|_| {
            tokio::spawn(worker(
                template.clone(),
                bounds.clone(),
                plan.jsonrpc,
                expect.clone(),
                collect,
            ))
        })
        .collect();

    tokio::time::sleep_until(bounds.measure_from).await;
    let mut watch = plan.server_pid.map(Watch::start).transpose()?;
    let mut server = None;
    if let Some(end) = bounds.end {
        tokio::time::sleep_until(end).await;
        if let Some(watch) = watch.take() {
            server = Some(watch.finish().await?);
        }
    }
    let mut total = Tally::default();
    for worker in workers {
        let tally = worker.await.context("a load worker panicked")?;
        total.latencies_us.extend(tally.latencies_us);
        total.bytes += tally.bytes;
        total.errors.merge(tally.errors);
        total.task_ids.extend(tally.task_ids);
    }
    let window = match bounds.end {
        Some(end) => end - bounds.measure_from,
        None => {
            if let Some(watch) = watch.take() {
                server = Some(watch.finish().await?);
            }
            start.elapsed()
        }
    };
    if let Some(path) = &plan.collect_task_ids {
        let mut text = total.task_ids.join("\n");
        text.push('\n');
        append(path, &text)?;
    }

    let requests = total.latencies_us.len() as u64;
    let window_s = window.as_secs_f64();
    Ok(LoadReport {
        mode: "load",
        connections: plan.connections,
        requests,
        errors: total.errors,
        window_s,
        rps: if window_s > 0.0 { requests as f64 / window_s } else { 0.0 },
        latency_ms: Latency::from_micros(total.latencies_us),
        response_bytes: if requests > 0 { total.bytes as f64 / requests as f64 } else { 0.0 },
        server_cpu_us_per_request: server
            .filter(|_| requests > 0)
            .map(|figures| figures.cpu_s * 1e6 / requests as f64),
        server_figures: server,
    })
}

async fn worker(
    template: RequestTemplate,
    bounds: Bounds,
    jsonrpc: bool,
    expect: Arc<Option<String>>,
    collect: bool,
) -> Tally {
    let mut tally = Tally::default();
    let mut connection: Option<Connection> = None;
    loop {
        if bounds.end.is_some_and(|end| Instant::now() >= end) {
            break;
        }
        if let Some((issued, count)) = &bounds.count
            && issued.fetch_add(1, Ordering::Relaxed) >= *count
        {
            break;
        }
        let conn = match connection.as_mut() {
            Some(conn) => conn,
            None => match template.connect().await {
                Ok(conn) => connection.insert(conn),
                Err(err) => {
                    tally.errors.record(format!("{err:#}"));
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                    continue;
                }
            },
        };
        let request = match template.next_request() {
            Ok(request) => request,
            Err(err) => {
                tally.errors.record(format!("cannot build the request: {err:#}"));
                break;
            }
        };
        let sent = Instant::now();
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, exchange(conn, request)).await;
        let done = Instant::now();
        let in_window = done >= bounds.measure_from && bounds.end.is_none_or(|end| done <= end);
        let outcome = match answer {
            Ok(Ok((status, body))) => judge(status, &body, jsonrpc, expect.as_deref(), collect),
            Ok(Err(err)) => {
                connection = None;
                Err(format!("{err:#}"))
            }
            Err(_) => {
                connection = None;
                Err(format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()))
            }
        };
        if !in_window {
            continue;
        }
        match outcome {
            Ok((bytes, task_id)) => {
                tally
                    .latencies_us
                    .push(u64::try_from((done - sent).as_micros()).unwrap_or(u64::MAX));
                tally.bytes += bytes;
                tally.task_ids.extend(task_id);
            }
            Err(what) => tally.errors.record(what),
        }
    }
    tally
}

async fn exchange(
    conn: &mut Connection,
    request: Request<Full<Bytes>>,
) -> anyhow::Result<(u16, Bytes)> {
    conn.sender.ready().await?;
    let response = conn.sender.send_request(request).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    result: Option<IgnoredAny>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct SendAnswer {
    result: SendResult,
}

#[derive(Deserialize)]
struct SendResult {
    task: TaskRef,
}

#[derive(Deserialize)]
struct TaskRef {
    id: String,
}

/// Ok with the body size (and the task id when collecting), or a description of what is wrong.
fn judge(
    status: u16,
    body: &[u8],
    jsonrpc: bool,
    expect: Option<&str>,
    collect: bool,
) -> Result<(u64, Option<String>), String> {
    if !(200..300).contains(&status) {
        return Err(format!("HTTP {status}: {}", report::head(body)));
    }
    if jsonrpc {
        match serde_json::from_slice::<Envelope>(body) {
            Ok(Envelope { error: Some(_), .. }) => {
                return Err(format!("JSON-RPC error: {}", report::head(body)));
            }
            Ok(Envelope { result: None, .. }) => {
                return Err(format!("JSON-RPC answer without result: {}", report::head(body)));
            }
            Ok(_) => {}
            Err(err) => return Err(format!("not JSON ({err}): {}", report::head(body))),
        }
    }
    if let Some(expected) = expect
        && !body.windows(expected.len().max(1)).any(|window| window == expected.as_bytes())
    {
        return Err(format!("the answer lacks {expected:?}: {}", report::head(body)));
    }
    let task_id = if collect {
        match serde_json::from_slice::<SendAnswer>(body) {
            Ok(answer) => Some(answer.result.task.id),
            Err(err) => return Err(format!("no result.task.id ({err}): {}", report::head(body))),
        }
    } else {
        None
    };
    Ok((body.len() as u64, task_id))
}

pub(crate) fn append(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("--collect-task-ids {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("--collect-task-ids {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judge_counts_statuses_and_jsonrpc_errors() {
        assert_eq!(
            judge(200, br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, true, None, false),
            Ok((36, None))
        );
        assert!(judge(401, b"no", false, None, false).is_err_and(|e| e.starts_with("HTTP 401")));
        assert!(
            judge(200, br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001}}"#, true, None, false)
                .is_err_and(|e| e.starts_with("JSON-RPC error"))
        );
        assert!(
            judge(200, br#"{"jsonrpc":"2.0","id":1}"#, true, None, false)
                .is_err_and(|e| e.contains("without result"))
        );
        assert!(judge(200, b"<html>", true, None, false).is_err_and(|e| e.starts_with("not JSON")));
        assert_eq!(judge(200, b"<html>", false, None, false), Ok((6, None)));
    }

    #[test]
    fn judge_requires_the_expected_content() {
        let empty = br#"{"result":{"tasks":[]}}"#;
        let full = br#"{"result":{"tasks":[{"id":"t"}]}}"#;
        assert!(
            judge(200, empty, true, Some(r#""tasks":[{"#), false)
                .is_err_and(|e| e.starts_with("the answer lacks"))
        );
        assert_eq!(
            judge(200, full, true, Some(r#""tasks":[{"#), false),
            Ok((full.len() as u64, None))
        );
    }

    #[test]
    fn judge_collects_the_task_id() {
        let body = br#"{"result":{"task":{"id":"t-1","status":{}}},"id":1,"jsonrpc":"2.0"}"#;
        assert_eq!(judge(200, body, true, None, true), Ok((body.len() as u64, Some("t-1".into()))));
        assert!(judge(200, br#"{"result":{"message":{}}}"#, true, None, true).is_err());
    }
}
