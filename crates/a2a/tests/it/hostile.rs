//! Slow and hostile clients: slowloris heads and bodies, idle and excess connections, SSE clients
//! that never read. Each is a bounded, clean failure and the server keeps serving everyone else.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use volcanic_a2a::A2aOptions;
use volcanic_test_support::sse::data_of;

use crate::support::*;

/// A server whose connection limits are short enough to hit in a test.
async fn server_with(options: A2aOptions) -> TestServer {
    TestServer::with(Setup { options, ..Setup::default() }).await
}

/// Reads until the server closes the connection (or resets it); returns what arrived.
async fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    tokio::time::timeout(DEADLINE, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the server did not close the connection in time");
    seen
}

/// Sends a message on a connection of its own (no pooling: a kept-alive connection would hold a
/// slot, and could be closed by the server just as it is reused).
async fn send_fresh(server: &TestServer, text: &str) -> Value {
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let request = client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": send_params(text, None)}));
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["result"].clone()
}

/// The server still answers a normal message.
async fn assert_healthy(server: &TestServer) {
    assert_eq!(
        send_fresh(server, "still alive").await["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

fn request_head(path: &str, content_length: usize) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {KEY}\r\nA2A-Version: 1.0\r\n\
Content-Type: application/json\r\nContent-Length: {content_length}\r\n\r\n"
    )
}

#[tokio::test]
async fn slow_request_head_is_disconnected_and_others_are_served() {
    let server = server_with(A2aOptions {
        header_read_timeout: Duration::from_millis(300),
        ..A2aOptions::default()
    })
    .await;
    let mut slow = server.connect().await;
    // Half a head, then nothing more: the classic slowloris.
    slow.write_all(b"POST /a2a HTTP/1.1\r\nHost: localhost\r\nX-Api").await.unwrap();
    let mut trickle = server.connect().await;
    let trickling = async {
        // One byte of head every 100 ms never completes it in time either.
        for byte in b"POST /a2a HTTP/1.1\r\nHost: localhost\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaa"
        {
            if trickle.write_all(&[*byte]).await.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    };
    let cut_off = tokio::time::timeout(DEADLINE, trickling).await.unwrap();
    assert!(cut_off, "a head trickling in for seconds was not cut off");
    let answer = read_to_close(&mut slow).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.is_empty() || text.starts_with("HTTP/1.1 408"), "{text}");
    assert_healthy(&server).await;
}

#[tokio::test]
async fn trickled_body_is_answered_408_on_both_bindings() {
    let server = server_with(A2aOptions {
        body_read_timeout: Duration::from_millis(400),
        ..A2aOptions::default()
    })
    .await;
    for (path, code_pointer) in
        [("/a2a", "/error/code"), ("/a2a/v1/message:send", "/error/details/0/reason")]
    {
        let mut stream = server.connect().await;
        stream.write_all(request_head(path, 1000).as_bytes()).await.unwrap();
        stream.write_all(b"{\"jsonrpc\":").await.unwrap();
        // The rest never comes: the server answers when the body deadline passes.
        let answer = read_to_close(&mut stream).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 408"), "{path}: {text}");
        assert!(text.to_ascii_lowercase().contains("connection: close"), "{path}: {text}");
        let body: Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        let expected = if path == "/a2a" { json!(-32600) } else { json!("REQUEST_TIMEOUT") };
        assert_eq!(body.pointer(code_pointer), Some(&expected), "{path}: {body}");
    }
    assert_healthy(&server).await;
}

#[tokio::test]
async fn idle_connections_are_closed_fresh_or_kept_alive() {
    let server = server_with(A2aOptions {
        idle_connection_timeout: Duration::from_millis(300),
        // All 200 come from 127.0.0.1: over the default per-peer cap of unauthenticated
        // connections (128) the rest would be refused (`fair_share.rs`), not left idle.
        max_unauthenticated_connections_per_peer: 256,
        ..A2aOptions::default()
    })
    .await;
    // Many clients that never send a byte: the server keeps serving, then lets them all go.
    let mut fresh = Vec::new();
    for _ in 0..200 {
        fresh.push(server.connect().await);
    }
    assert_healthy(&server).await;
    for stream in &mut fresh {
        assert_eq!(read_to_close(stream).await, b"");
    }
    // One request, then silence on a kept-alive connection.
    let mut kept = server.connect().await;
    kept.write_all(b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut kept).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"name\""), "the whole card arrives before the close: {text}");
    assert_healthy(&server).await;
}

#[tokio::test]
async fn connections_over_the_cap_wait_and_are_served_when_slots_free() {
    let server = server_with(A2aOptions {
        max_connections: 2,
        header_read_timeout: Duration::from_millis(500),
        ..A2aOptions::default()
    })
    .await;
    // Two silent clients take both slots; the kernel backlog holds everyone else meanwhile.
    let mut squatters = vec![server.connect().await, server.connect().await];
    assert_healthy(&server).await;
    for squatter in &mut squatters {
        assert_eq!(read_to_close(squatter).await, b"", "the squatter was let go by the deadline");
    }
    // Many clients at once over a cap of two: all are answered.
    let sends = (0..6).map(|i| {
        let server = &server;
        async move { send_fresh(server, &format!("client {i}")).await }
    });
    for result in futures_util::future::join_all(sends).await {
        assert_eq!(result["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    }
}

#[tokio::test]
async fn sse_stream_outlives_every_connection_timeout() {
    let short = Duration::from_millis(200);
    let server = server_with(A2aOptions {
        header_read_timeout: short,
        body_read_timeout: short,
        idle_connection_timeout: short,
        write_stall_timeout: short,
        ..A2aOptions::default()
    })
    .await;
    // Ten chunks 150 ms apart: the stream lasts well past every timeout above.
    let text = directive(json!([{"text": "abcdefghij", "chunk": 1, "delay_ms": 150}]));
    let events =
        server.rpc_stream(KEY, Some("1.0"), "SendStreamingMessage", send_params(&text, None)).await;
    let last = events.last().unwrap();
    assert_eq!(last["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
    let streamed: String = events
        .iter()
        .filter_map(|e| e["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(streamed, "abcdefghij");
}

/// Waits for a task file in `state` (the task `id`, or any).
async fn wait_for_task_state(server: &TestServer, id: Option<&str>, state: &str) -> Value {
    let dir = server.ws().join(".volcanic/a2a/tasks");
    tokio::time::timeout(DEADLINE, async {
        loop {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
                let Ok(task) = serde_json::from_str::<Value>(&text) else { continue };
                if task["status"]["state"] == state && id.is_none_or(|id| task["id"] == id) {
                    return task;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("no task reached the state in time")
}

#[tokio::test]
async fn sse_client_that_never_reads_does_not_stall_the_run_or_others() {
    let server = server_with(A2aOptions {
        write_stall_timeout: Duration::from_secs(1),
        ..A2aOptions::default()
    })
    .await;
    // 4 MiB of answer in 2,048 events, about 4.7 MB of SSE with the framing: more than the
    // socket buffers hold even at the largest send buffer Linux grows to by default (4 MiB).
    let answer = "0123456789abcdef".repeat(256 * 1024);
    let text = directive(json!([{"text": answer, "chunk": 2048}]));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
        "params": send_params(&text, None)})
    .to_string();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stuck = tokio::time::timeout(DEADLINE, socket.connect(server.addr().parse().unwrap()))
        .await
        .unwrap()
        .unwrap();
    stuck.write_all(request_head("/a2a", body.len()).as_bytes()).await.unwrap();
    stuck.write_all(body.as_bytes()).await.unwrap();
    // Others are served while the stuck stream's run is under way.
    let working = wait_for_task_state(&server, None, "TASK_STATE_WORKING").await;
    let id = working["id"].as_str().unwrap();
    assert_healthy(&server).await;
    // The stuck client reads nothing; the run still ends and is persisted in full.
    let task = wait_for_task_state(&server, Some(id), "TASK_STATE_COMPLETED").await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"].as_str().map(str::len), Some(answer.len()));
    assert_healthy(&server).await;
    // The client still reads nothing for longer than the stall timeout (and the watcher's tick):
    // the run can end well within it, as the socket refused its first write only just before.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The server gave up on the stuck connection: what it had written ends without the final
    // status, then the connection closes.
    let received = read_to_close(&mut stuck).await;
    let tail =
        String::from_utf8_lossy(&received[received.len().saturating_sub(4096)..]).to_string();
    assert!(!tail.contains("TASK_STATE_COMPLETED"), "the whole stream was delivered: {tail}");
    assert!(received.len() < 3 * answer.len(), "{} bytes", received.len());
}

/// The answer a client puts together from a JSON-RPC stream's artifact updates (appends append,
/// the others replace), and the stream's last event.
fn streamed_answer(body: &str) -> (String, Value) {
    let mut answer = String::new();
    let mut last = Value::Null;
    // A block without data is a keep-alive comment (the stream can outlast its 15 s interval on
    // a loaded machine): no event.
    for data in body.split("\n\n").map(data_of).filter(|data| !data.is_empty()) {
        let event: Value = serde_json::from_str(&data).unwrap();
        let update = &event["result"]["artifactUpdate"];
        if update.is_object() && update["artifact"]["name"] == "response" {
            let text = update["artifact"]["parts"][0]["text"].as_str().unwrap();
            if update["append"] != true {
                answer.clear();
            }
            answer.push_str(text);
        }
        last = event;
    }
    (answer, last)
}

/// A stream whose client reads nothing until the run has ended (it falls far behind the run),
/// then reads it all: it shows the whole answer exactly once and ends with the final status.
async fn late_reader_sees_the_answer_once_and_the_final_status(delay_ms: u64) {
    let server = TestServer::start().await;
    // 6 MiB in 1,100 chunks (more than a stream's queue of 1,024 events). The first event (the
    // task, echoing the message) alone is more than the socket buffers hold, so the stream is
    // stuck on it while the run goes on.
    let answer = "0123456789abcdef".repeat(384 * 1024);
    let text = directive(json!([{"text": answer, "chunk": 5720, "delay_ms": delay_ms}]));
    let request = server
        .client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", KEY)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": send_params(&text, None)}));
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    // Not `wait_for_task_state`: parsing the 6 MiB task file every few milliseconds on the
    // test's thread (the server's too) would slow the run it waits for.
    let dir = server.ws().join(".volcanic/a2a/tasks");
    tokio::time::timeout(DEADLINE, async {
        loop {
            let mut entries = tokio::fs::read_dir(&dir).await.unwrap();
            while let Some(entry) = entries.next_entry().await.unwrap() {
                let text = tokio::fs::read(entry.path()).await.unwrap_or_default();
                if String::from_utf8_lossy(&text).contains("\"TASK_STATE_COMPLETED\"") {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the run did not complete in time");
    let body = tokio::time::timeout(DEADLINE, response.text()).await.unwrap().unwrap();
    let (streamed, last) = streamed_answer(&body);
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "the stream did not end with the final status: {last}"
    );
    assert!(
        streamed == answer,
        "streamed {} bytes of a {}-byte answer",
        streamed.len(),
        answer.len()
    );
}

#[tokio::test]
async fn stream_that_falls_behind_a_paced_run_gets_the_answer_once_and_the_final_status() {
    // Paced chunks: the run's own consumer keeps up, the stuck stream falls behind by more
    // than its queue and catches up with one replacing update.
    late_reader_sees_the_answer_once_and_the_final_status(1).await;
}

#[tokio::test]
async fn stream_of_a_run_whose_chunks_outpace_the_server_gets_the_answer_once() {
    // Unpaced chunks: the session may drop deltas the run's consumer has not taken; the stream
    // still ends with the final answer.
    late_reader_sees_the_answer_once_and_the_final_status(0).await;
}

#[tokio::test]
async fn shutdown_closes_idle_and_streaming_connections_in_bounded_time() {
    let server = TestServer::start().await;
    let mut idle = server.connect().await;
    let stream = {
        let text = directive(json!([{"text": "never finishes", "chunk": 1, "delay_ms": 60_000}]));
        let request = server
            .client
            .post(format!("{}/a2a", server.base))
            .header("X-API-Key", KEY)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                "params": send_params(&text, None)}));
        tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap()
    };
    assert_eq!(stream.status(), 200);
    let (workspace, _, _) = server.stop().await;
    assert_eq!(read_to_close(&mut idle).await, b"");
    let rest = tokio::time::timeout(DEADLINE, stream.text()).await.unwrap().unwrap_or_default();
    assert!(rest.contains("TASK_STATE_CANCELED") || rest.contains("TASK_STATE_FAILED"), "{rest}");
    drop(workspace);
}

#[tokio::test]
async fn shutdown_drops_connections_still_busy_after_the_grace() {
    let server = TestServer::start().await;
    // A request whose body never completes: graceful shutdown would wait for it for the whole
    // body timeout (2 minutes); the 10-second grace cuts it short.
    let mut busy = server.connect().await;
    busy.write_all(request_head("/a2a", 1000).as_bytes()).await.unwrap();
    busy.write_all(b"{\"jsonrpc\":").await.unwrap();
    // The head has been read once the server answers another request on a new connection.
    assert_healthy(&server).await;
    let stopped = tokio::time::timeout(DEADLINE, server.stop()).await;
    assert!(stopped.is_ok(), "shutdown was not bounded");
    read_to_close(&mut busy).await;
}
