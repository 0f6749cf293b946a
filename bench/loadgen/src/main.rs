//! `volcanic-loadgen`: the load generator of `bench/run`.
//!
//! Closed-loop HTTP/1.1 load over keep-alive connections (`load`), and time to first and last
//! event of Server-Sent-Event streams (`stream`). Each mode prints one JSON object on stdout: what
//! was sent, what came back (every non-2xx answer and every JSON-RPC error is counted as an error,
//! never averaged in), latency percentiles, and, with `--server-pid`, the server's CPU time and
//! resident memory over the measured window, read from /proc.
//!
//! Layout: `target` (URL, request templates, one connection), `load`, `stream`, `server_stats`
//! (/proc), `report` (percentiles and the JSON shapes).

mod load;
mod report;
mod server_stats;
mod stream;
mod target;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "volcanic-loadgen", about = "HTTP/1.1 load and SSE timing for bench/run")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// N connections each issuing requests back to back, for a duration or a count.
    Load(LoadArgs),
    /// Streaming requests one after another per connection: time to first and to last event.
    Stream(StreamArgs),
}

/// What every mode sends.
#[derive(Args)]
struct RequestArgs {
    /// The URL, `http://HOST:PORT/PATH` (plain HTTP only: the benchmark runs on loopback).
    #[arg(long)]
    url: String,
    /// GET or POST; default: POST with a body, GET without.
    #[arg(long)]
    method: Option<String>,
    /// An extra header, `Name: value`; repeatable.
    #[arg(long = "header")]
    headers: Vec<String>,
    /// The request body; `{seq}` becomes a number unique to the request, `{id}` the next id of
    /// `--ids-file` (round robin).
    #[arg(long)]
    body: Option<String>,
    /// Ids for `{id}`, one per line.
    #[arg(long)]
    ids_file: Option<PathBuf>,
    /// Treat answers as JSON-RPC: an answer without `result`, or with `error`, is an error.
    #[arg(long)]
    jsonrpc: bool,
    /// The server's PID: report its CPU time and memory over the measured window.
    #[arg(long)]
    server_pid: Option<u32>,
}

#[derive(Args)]
struct LoadArgs {
    #[command(flatten)]
    request: RequestArgs,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Seconds of measurement (after the warm-up); ignored with `--requests`.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Seconds of load before measurement starts (not counted).
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Send exactly this many requests instead (no warm-up): seeding.
    #[arg(long)]
    requests: Option<u64>,
    /// Every successful answer must contain this text, else it is an error (e.g. `"tasks":[{` for a
    /// list that must not be empty).
    #[arg(long)]
    expect: Option<String>,
    /// Append `result.task.id` of every successful answer to this file (seeding for GetTask).
    #[arg(long)]
    collect_task_ids: Option<PathBuf>,
}

#[derive(Args)]
struct StreamArgs {
    #[command(flatten)]
    request: RequestArgs,
    /// Concurrent connections, each streaming one request after another.
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Streams in all.
    #[arg(long, default_value_t = 100)]
    requests: u64,
    /// Streams before these that are not measured.
    #[arg(long, default_value_t = 5)]
    warmup_requests: u64,
    /// Substring the last event of every stream must contain (e.g. the terminal state);
    /// a stream whose last event lacks it is an error.
    #[arg(long)]
    expect_last: Option<String>,
    /// Append the task id of every stream (`result.task.id` of its first event, JSON-RPC) to
    /// this file: seeding for resumed streams.
    #[arg(long)]
    collect_task_ids: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The generator is pinned to one core by bench/run; one thread keeps it from competing with
    // itself, and a current-thread runtime has no cross-thread wake-ups.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => return fail(&anyhow::anyhow!("cannot start the async runtime: {err}")),
    };
    let outcome = runtime.block_on(async {
        match cli.mode {
            Mode::Load(args) => run_load(args).await,
            Mode::Stream(args) => run_stream(args).await,
        }
    });
    match outcome {
        Ok(json) => {
            let mut stdout = std::io::stdout().lock();
            match writeln!(stdout, "{json}") {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => fail(&anyhow::anyhow!("stdout: {err}")),
            }
        }
        Err(err) => fail(&err),
    }
}

fn fail(err: &anyhow::Error) -> ExitCode {
    let mut stderr = std::io::stderr().lock();
    // Nothing is left to tell anyone if stderr is gone too.
    let _ = writeln!(stderr, "volcanic-loadgen: {err:#}");
    ExitCode::from(2)
}

fn seconds(value: f64, name: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .with_context(|| format!("--{name}: expected seconds ≥ 0, got {value}"))
}

async fn run_load(args: LoadArgs) -> anyhow::Result<serde_json::Value> {
    let template = target::RequestTemplate::from_args(&args.request)?;
    let limit = match args.requests {
        Some(count) => load::Limit::Count(count),
        None => load::Limit::Time {
            warmup: seconds(args.warmup, "warmup")?,
            measure: seconds(args.duration, "duration")?,
        },
    };
    let plan = load::Plan {
        connections: args.connections.max(1),
        limit,
        jsonrpc: args.request.jsonrpc,
        expect: args.expect,
        collect_task_ids: args.collect_task_ids,
        server_pid: args.request.server_pid,
    };
    let outcome = load::run(template, plan).await?;
    Ok(serde_json::to_value(outcome)?)
}

async fn run_stream(args: StreamArgs) -> anyhow::Result<serde_json::Value> {
    let template = target::RequestTemplate::from_args(&args.request)?;
    let plan = stream::Plan {
        connections: args.connections.max(1),
        requests: args.requests,
        warmup_requests: args.warmup_requests,
        jsonrpc: args.request.jsonrpc,
        expect_last: args.expect_last,
        collect_task_ids: args.collect_task_ids,
        server_pid: args.request.server_pid,
    };
    let outcome = stream::run(template, plan).await?;
    Ok(serde_json::to_value(outcome)?)
}
