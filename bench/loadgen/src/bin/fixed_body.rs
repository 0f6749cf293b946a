//! `volcanic-fixed-body`: the physical limit of the HTTP stack for bench/run.
//!
//! A minimal axum server that answers `/{name}` (any method) with a fixed body loaded at start
//! (`--body name=FILE`, repeatable): bench/run gives it Volcanic's own answers, so the bytes on
//! the wire match and only the work behind them is missing. A name ending in `.sse` is served as
//! `text/event-stream`, everything else as `application/json`. Prints
//! `volcanic-fixed-body: listening on http://HOST:PORT` once it accepts connections; SIGTERM or
//! SIGINT stops it.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};

#[derive(Parser)]
#[command(name = "volcanic-fixed-body", about = "Fixed answers at /{name}: the HTTP stack's limit")]
struct Cli {
    /// Where to listen; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// `name=FILE`: answer `/{name}` with the contents of FILE; repeatable.
    #[arg(long = "body")]
    bodies: Vec<String>,
}

type Bodies = Arc<HashMap<String, (Bytes, &'static str)>>;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut bodies = HashMap::new();
    for spec in &cli.bodies {
        let (name, file) =
            spec.split_once('=').with_context(|| format!("--body {spec:?}: expected name=FILE"))?;
        let bytes =
            std::fs::read(PathBuf::from(file)).with_context(|| format!("--body {spec:?}"))?;
        let kind = if name.ends_with(".sse") { "text/event-stream" } else { "application/json" };
        bodies.insert(name.to_owned(), (Bytes::from(bytes), kind));
    }
    let app =
        Router::new().route("/{name}", axum::routing::any(answer)).with_state(Arc::new(bodies));
    let listener = tokio::net::TcpListener::bind(&cli.listen)
        .await
        .with_context(|| format!("--listen {}", cli.listen))?;
    let address = listener.local_addr()?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "volcanic-fixed-body: listening on http://{address}")?;
        stdout.flush()?;
    }
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            tokio::select! {
                _ = sigterm.recv() => {}
                _ = sigint.recv() => {}
            }
        })
        .await?;
    Ok(())
}

async fn answer(State(bodies): State<Bodies>, Path(name): Path<String>) -> Response {
    match bodies.get(&name) {
        Some((bytes, kind)) => ([(header::CONTENT_TYPE, *kind)], bytes.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
