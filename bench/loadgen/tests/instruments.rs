//! The two instruments against each other, as real processes on 127.0.0.1: the load generator
//! counts answers, errors and stream events from the fixed-body server correctly.

// clippy.toml allows these inside `#[test]` functions only; shared helpers panic the same way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

const LISTENING: &str = "volcanic-fixed-body: listening on ";
const STARTUP: Duration = Duration::from_secs(30);

/// The fixed-body server, killed when dropped.
struct Limit {
    child: Child,
    base: String,
}

impl Drop for Limit {
    fn drop(&mut self) {
        // The test is over either way; a server that already exited is fine.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_limit(dir: &std::path::Path) -> Limit {
    let answer = dir.join("answer.json");
    std::fs::write(&answer, r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-1"}}}"#).unwrap();
    let failure = dir.join("failure.json");
    std::fs::write(&failure, r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"no"}}"#)
        .unwrap();
    let stream = dir.join("stream.sse");
    std::fs::write(
        &stream,
        "data: {\"result\":{\"task\":{}}}\r\n\r\n: comment\r\n\r\ndata: {\"result\":{\"statusUpdate\":\"TASK_STATE_COMPLETED\"}}\r\n\r\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_volcanic-fixed-body"))
        .args(["--listen", "127.0.0.1:0"])
        .arg("--body")
        .arg(format!("answer={}", answer.display()))
        .arg("--body")
        .arg(format!("failure={}", failure.display()))
        .arg("--body")
        .arg(format!("stream.sse={}", stream.display()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let line = received.recv_timeout(STARTUP).unwrap();
    let base = line.strip_prefix(LISTENING).unwrap().to_owned();
    Limit { child, base }
}

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_volcanic-loadgen")).args(args).output().unwrap()
}

fn report(output: &Output) -> Value {
    assert!(output.status.success(), "loadgen failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn seeding_counts_every_answer_and_collects_task_ids() {
    let dir = tempfile::tempdir().unwrap();
    let limit = start_limit(dir.path());
    let ids = dir.path().join("ids.txt");
    let url = format!("{}/answer", limit.base);
    let pid = limit.child.id().to_string();
    let out = report(&loadgen(&[
        "load",
        "--url",
        &url,
        "--connections",
        "4",
        "--requests",
        "40",
        "--jsonrpc",
        "--body",
        r#"{"n":{seq}}"#,
        "--collect-task-ids",
        ids.to_str().unwrap(),
        "--server-pid",
        &pid,
    ]));
    assert_eq!(out["requests"], 40);
    assert_eq!(out["errors"]["count"], 0);
    assert!(out["server_figures"]["rss_peak_kib"].as_u64().unwrap() > 0);
    let collected = std::fs::read_to_string(&ids).unwrap();
    assert_eq!(collected.lines().collect::<Vec<_>>(), vec!["t-1"; 40]);
}

#[test]
fn jsonrpc_errors_and_missing_routes_are_errors_not_answers() {
    let dir = tempfile::tempdir().unwrap();
    let limit = start_limit(dir.path());
    for (path, expected) in [("failure", "JSON-RPC error"), ("nowhere", "HTTP 404")] {
        let url = format!("{}/{path}", limit.base);
        let out = report(&loadgen(&[
            "load",
            "--url",
            &url,
            "--requests",
            "10",
            "--jsonrpc",
            "--body",
            "{}",
        ]));
        assert_eq!(out["requests"], 0, "{path}");
        assert_eq!(out["errors"]["count"], 10, "{path}");
        assert!(
            out["errors"]["samples"][0].as_str().unwrap().starts_with(expected),
            "{path}: {out}"
        );
    }
}

#[test]
fn streams_are_timed_to_their_first_and_last_event() {
    let dir = tempfile::tempdir().unwrap();
    let limit = start_limit(dir.path());
    let url = format!("{}/stream.sse", limit.base);
    let base = [
        "stream",
        "--url",
        url.as_str(),
        "--requests",
        "6",
        "--warmup-requests",
        "2",
        "--jsonrpc",
        "--body",
        "{}",
    ];
    let out = report(&loadgen(&[&base[..], &["--expect-last", "TASK_STATE_COMPLETED"]].concat()));
    assert_eq!(out["streams"], 6);
    assert_eq!(out["errors"]["count"], 0);
    assert_eq!(out["events_per_stream"], 2.0);
    let first = out["first_event_ms"]["p50"].as_f64().unwrap();
    let last = out["last_event_ms"]["p50"].as_f64().unwrap();
    assert!(first > 0.0 && first <= last, "{out}");

    let out = report(&loadgen(&[&base[..], &["--expect-last", "TASK_STATE_FAILED"]].concat()));
    assert_eq!(out["streams"], 0);
    assert_eq!(out["errors"]["count"], 6);
}
