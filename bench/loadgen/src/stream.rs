//! Streaming requests (SendStreamingMessage): the time from sending the request to the first
//! Server-Sent Event, and to the last one before the server ends the stream.

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

use crate::report::{self, Errors, Latency, StreamReport};
use crate::server_stats::Watch;
use crate::target::{Connection, RequestTemplate};

/// A whole stream must end within this.
const STREAM_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Plan {
    pub connections: usize,
    pub requests: u64,
    pub warmup_requests: u64,
    pub jsonrpc: bool,
    pub expect_last: Option<String>,
    /// Where the task id of every stream (warm-up ones too) is appended.
    pub collect_task_ids: Option<std::path::PathBuf>,
    pub server_pid: Option<u32>,
}

#[derive(Default)]
struct Tally {
    first_us: Vec<u64>,
    last_us: Vec<u64>,
    events: u64,
    errors: Errors,
    task_ids: Vec<String>,
}

/// One stream's timings, and its task's id when its first event named one.
struct Timed {
    first: Duration,
    last: Duration,
    events: u64,
    task_id: Option<String>,
}

pub async fn run(template: RequestTemplate, plan: Plan) -> anyhow::Result<StreamReport> {
    let issued = Arc::new(AtomicU64::new(0));
    let total_requests = plan.requests + plan.warmup_requests;
    let watch = plan.server_pid.map(Watch::start).transpose()?;
    let expect_last: Arc<Option<String>> = Arc::new(plan.expect_last);
    let workers: Vec<_> = (0..plan.connections)
        .map(|_| {
            tokio::spawn(worker(
                template.clone(),
                issued.clone(),
                total_requests,
                plan.warmup_requests,
                plan.jsonrpc,
                expect_last.clone(),
            ))
        })
        .collect();
    let mut total = Tally::default();
    for worker in workers {
        let tally = worker.await.context("a stream worker panicked")?;
        total.first_us.extend(tally.first_us);
        total.last_us.extend(tally.last_us);
        total.events += tally.events;
        total.errors.merge(tally.errors);
        total.task_ids.extend(tally.task_ids);
    }
    if let Some(path) = &plan.collect_task_ids {
        let mut text = total.task_ids.join("\n");
        text.push('\n');
        crate::load::append(path, &text)?;
    }
    let server = match watch {
        Some(watch) => Some(watch.finish().await?),
        None => None,
    };
    let streams = total.first_us.len() as u64;
    Ok(StreamReport {
        mode: "stream",
        connections: plan.connections,
        streams,
        errors: total.errors,
        first_event_ms: Latency::from_micros(total.first_us),
        last_event_ms: Latency::from_micros(total.last_us),
        events_per_stream: if streams > 0 { total.events as f64 / streams as f64 } else { 0.0 },
        server_figures: server,
    })
}

async fn worker(
    template: RequestTemplate,
    issued: Arc<AtomicU64>,
    total: u64,
    warmup: u64,
    jsonrpc: bool,
    expect_last: Arc<Option<String>>,
) -> Tally {
    let mut tally = Tally::default();
    let mut connection: Option<Connection> = None;
    loop {
        let n = issued.fetch_add(1, Ordering::Relaxed);
        if n >= total {
            break;
        }
        let conn = match connection.as_mut() {
            Some(conn) => conn,
            None => match template.connect().await {
                Ok(conn) => connection.insert(conn),
                Err(err) => {
                    tally.errors.record(format!("{err:#}"));
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
        let outcome = match tokio::time::timeout(
            STREAM_TIMEOUT,
            one_stream(conn, request, jsonrpc, &expect_last),
        )
        .await
        {
            Ok(Ok(timed)) => Ok(timed),
            Ok(Err(err)) => {
                connection = None;
                Err(format!("{err:#}"))
            }
            Err(_) => {
                connection = None;
                Err(format!("the stream did not end within {}s", STREAM_TIMEOUT.as_secs()))
            }
        };
        if let Ok(Timed { task_id: Some(id), .. }) = &outcome {
            tally.task_ids.push(id.clone());
        }
        if n < warmup {
            continue;
        }
        match outcome {
            Ok(timed) => {
                tally.first_us.push(u64::try_from(timed.first.as_micros()).unwrap_or(u64::MAX));
                tally.last_us.push(u64::try_from(timed.last.as_micros()).unwrap_or(u64::MAX));
                tally.events += timed.events;
            }
            Err(what) => tally.errors.record(what),
        }
    }
    tally
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    result: Option<IgnoredAny>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

async fn one_stream(
    conn: &mut Connection,
    request: Request<Full<Bytes>>,
    jsonrpc: bool,
    expect_last: &Option<String>,
) -> anyhow::Result<Timed> {
    let sent = Instant::now();
    conn.sender.ready().await?;
    let response = conn.sender.send_request(request).await?;
    let status = response.status();
    let mut body = response.into_body();
    if !status.is_success() {
        let bytes = body.collect().await?.to_bytes();
        anyhow::bail!("HTTP {}: {}", status.as_u16(), report::head(&bytes));
    }
    let mut parser = EventParser::default();
    let mut first = None;
    let mut last = Duration::ZERO;
    let mut events = 0;
    let mut last_data = String::new();
    let mut task_id = None;
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        let Some(chunk) = frame.data_ref() else { continue };
        let now = sent.elapsed();
        for data in parser.push(chunk) {
            if jsonrpc {
                match serde_json::from_str::<Envelope>(&data) {
                    Ok(Envelope { error: Some(_), .. }) => {
                        anyhow::bail!("JSON-RPC error event: {}", report::head(data.as_bytes()))
                    }
                    Ok(Envelope { result: None, .. }) => {
                        anyhow::bail!("event without result: {}", report::head(data.as_bytes()))
                    }
                    Ok(_) => {}
                    Err(err) => anyhow::bail!(
                        "event is not JSON ({err}): {}",
                        report::head(data.as_bytes())
                    ),
                }
            }
            if first.is_none() {
                task_id = serde_json::from_str::<FirstEvent>(&data).ok().map(|e| e.result.task.id);
            }
            first.get_or_insert(now);
            last = now;
            events += 1;
            last_data = data;
        }
    }
    let Some(first) = first else { anyhow::bail!("the stream ended without an event") };
    if let Some(expected) = expect_last
        && !last_data.contains(expected.as_str())
    {
        anyhow::bail!("the last event lacks {expected:?}: {}", report::head(last_data.as_bytes()));
    }
    Ok(Timed { first, last, events, task_id })
}

/// A stream's first event, as far as its task id.
#[derive(Deserialize)]
struct FirstEvent {
    result: FirstResult,
}

#[derive(Deserialize)]
struct FirstResult {
    task: TaskId,
}

#[derive(Deserialize)]
struct TaskId {
    id: String,
}

/// Splits a byte stream into the data of its events (`data:` lines joined by newlines); comments
/// and events without data are skipped, CR LF is read as LF.
#[derive(Default)]
struct EventParser {
    pending: String,
}

impl EventParser {
    fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend(String::from_utf8_lossy(chunk).chars().filter(|c| *c != '\r'));
        let mut events = Vec::new();
        while let Some(end) = self.pending.find("\n\n") {
            let block: String = self.pending.drain(..end + 2).collect();
            let data: Vec<&str> = block
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|rest| rest.strip_prefix(' ').unwrap_or(rest))
                .collect();
            if !data.is_empty() {
                events.push(data.join("\n"));
            }
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_parser_handles_split_chunks_crlf_and_comments() {
        let mut parser = EventParser::default();
        assert_eq!(parser.push(b": ping\r\n\r\ndata: {\"a\""), Vec::<String>::new());
        assert_eq!(parser.push(b":1}\r\n\r\nevent: x\ndata:2\ndata: 3\n\n"), ["{\"a\":1}", "2\n3"]);
        assert_eq!(parser.push(b"data: tail"), Vec::<String>::new());
    }
}
