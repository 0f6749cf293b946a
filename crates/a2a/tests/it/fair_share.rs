//! Fair share (issue 17, guarantee 6): a caller at its cap of streams, requests or connections,
//! or a peer at its cap of unauthenticated connections, is refused with 429 and `Retry-After`
//! and its connection closed, while the public card and other callers keep being served; and one
//! client with 64 connections is never refused by the defaults.

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use volcanic_a2a::A2aOptions;
use volcanic_test_support::sse::json_events;

use crate::support::*;

type Events = BoxStream<'static, Value>;

/// A stream the server has accepted: its task and the events still to come.
struct OpenStream {
    task_id: String,
    events: Events,
}

impl OpenStream {
    /// Reads the rest of the stream; returns its last event.
    async fn last(mut self) -> Value {
        let mut last = Value::Null;
        tokio::time::timeout(DEADLINE, async {
            while let Some(event) = self.events.next().await {
                last = event;
            }
        })
        .await
        .expect("the stream did not end in time");
        last
    }
}

/// Sends a streaming request and waits for its first event (the task).
async fn open_stream(request: reqwest::RequestBuilder) -> OpenStream {
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let mut events: Events = json_events(response);
    let first = tokio::time::timeout(DEADLINE, events.next()).await.unwrap().unwrap();
    // The task comes as `result.task` (JSON-RPC 1.0), `task` (REST) or `result` (0.3).
    let task = [&first["result"]["task"], &first["task"], &first["result"]]
        .into_iter()
        .find(|task| task["id"].is_string())
        .unwrap_or_else(|| panic!("no task in the first event: {first}"));
    OpenStream { task_id: task["id"].as_str().unwrap().to_string(), events }
}

fn rpc_request(
    server: &TestServer,
    key: &str,
    version: &str,
    method: &str,
    params: Value,
) -> reqwest::RequestBuilder {
    server
        .client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", key)
        .header("A2A-Version", version)
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
}

fn rest_request(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::RequestBuilder {
    let request = server
        .client
        .request(method, format!("{}/a2a/v1{path}", server.base))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0");
    match body {
        Some(body) => request.json(&body),
        None => request,
    }
}

/// Status, `Retry-After` and body of an answer.
async fn answer(request: reqwest::RequestBuilder) -> (u16, Option<String>, Value) {
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    let status = response.status().as_u16();
    let retry_after =
        response.headers().get("retry-after").map(|value| value.to_str().unwrap().to_string());
    // A stream that was not refused would run on: show its content type instead of reading it.
    let content_type = response.headers().get("content-type").cloned();
    if content_type.is_some_and(|value| value == "text/event-stream") {
        return (status, retry_after, Value::String("an SSE stream".into()));
    }
    let text = tokio::time::timeout(DEADLINE, response.text()).await.unwrap().unwrap();
    (status, retry_after, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn error_info(reason: &str, limit: usize) -> Value {
    json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
        "domain": "a2a-protocol.org", "metadata": {"limit": limit.to_string()}})
}

/// The JSON-RPC refusal body.
fn rpc_refusal(id: Value, reason: &str, message: &str, limit: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": -32029, "message": message, "data": [error_info(reason, limit)]}})
}

/// The REST (google.rpc.Status) refusal body.
fn rest_refusal(reason: &str, message: &str, limit: usize) -> Value {
    json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": message,
        "details": [error_info(reason, limit)]}})
}

fn v03_params(text: &str) -> Value {
    json!({"message": {"kind": "message", "messageId": uuid(), "role": "user",
        "parts": [{"kind": "text", "text": text}]}})
}

/// A run that lasts until it is cancelled.
fn endless() -> String {
    directive(json!([{"text": "never finishes", "delay_ms": 60_000}]))
}

/// A server with `options`, whose idle connections outlive [`DEADLINE`] (the default idle
/// timeout equals it), so that a connection a test sees closed in time was closed on purpose.
async fn server_with(options: A2aOptions) -> TestServer {
    let options = A2aOptions { idle_connection_timeout: DEADLINE * 6, ..options };
    TestServer::with(Setup { options, ..Setup::default() }).await
}

/// The public card and another caller's ListTasks still answer.
async fn assert_others_are_served(server: &TestServer) {
    let card = tokio::time::timeout(
        DEADLINE,
        server.client.get(format!("{}/.well-known/agent-card.json", server.base)).send(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(card.status(), 200);
    let listed = server.rpc(OTHER_KEY, "ListTasks", json!({})).await;
    assert!(listed["result"]["tasks"].is_array(), "{listed}");
}

async fn cancel(server: &TestServer, task_id: &str) {
    let canceled = server.rpc(KEY, "CancelTask", json!({"id": task_id})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
}

#[tokio::test]
async fn caller_at_its_stream_cap_gets_429_on_every_binding_and_version_while_others_are_served() {
    let server =
        server_with(A2aOptions { max_streams_per_caller: 4, ..A2aOptions::default() }).await;
    let long = endless();
    let open = vec![
        open_stream(rpc_request(
            &server,
            KEY,
            "1.0",
            "SendStreamingMessage",
            send_params(&long, None),
        ))
        .await,
        open_stream(rpc_request(
            &server,
            KEY,
            "1.0",
            "SendStreamingMessage",
            send_params(&long, None),
        ))
        .await,
        open_stream(rest_request(
            &server,
            reqwest::Method::POST,
            "/message:stream",
            Some(send_params(&long, None)),
        ))
        .await,
        open_stream(rpc_request(&server, KEY, "0.3", "message/stream", v03_params(&long))).await,
    ];
    let task = open[0].task_id.clone();
    let message = "Too many open streams for this caller (limit 4); retry when one has ended";
    let rpc_refused =
        (429, Some("1".to_string()), rpc_refusal(json!(7), "TOO_MANY_STREAMS", message, 4));
    assert_eq!(
        answer(rpc_request(&server, KEY, "1.0", "SubscribeToTask", json!({"id": task}))).await,
        rpc_refused
    );
    assert_eq!(
        answer(rpc_request(&server, KEY, "1.0", "SendStreamingMessage", send_params("x", None)))
            .await,
        rpc_refused
    );
    assert_eq!(
        answer(rpc_request(&server, KEY, "0.3", "tasks/resubscribe", json!({"id": task}))).await,
        rpc_refused
    );
    assert_eq!(
        answer(rest_request(
            &server,
            reqwest::Method::POST,
            &format!("/tasks/{task}:subscribe"),
            None
        ))
        .await,
        (429, Some("1".to_string()), rest_refusal("TOO_MANY_STREAMS", message, 4))
    );
    // The refused client does not keep its connection: the server closes it after the answer.
    let mut refused = server.connect().await;
    assert_eq!(
        exchange(&mut refused, &raw_rpc(KEY, "SubscribeToTask", json!({"id": task}))).await,
        (
            "HTTP/1.1 429 Too Many Requests".to_string(),
            closing(),
            rpc_refusal(json!(7), "TOO_MANY_STREAMS", message, 4)
        )
    );
    assert_eq!(rest_until_closed(&mut refused).await, b"");
    assert_others_are_served(&server).await;
    // The cap is on streams: the same caller's other requests go through.
    let got = server.rpc(KEY, "GetTask", json!({"id": task})).await;
    assert_eq!(got["result"]["id"], task.as_str(), "{got}");
    for stream in open {
        cancel(&server, &stream.task_id).await;
        let last = stream.last().await;
        let state = [&last["result"]["statusUpdate"], &last["statusUpdate"], &last["result"]]
            .into_iter()
            .find_map(|update| update["status"]["state"].as_str())
            .unwrap_or_else(|| panic!("no final status: {last}"))
            .to_string();
        assert!(["TASK_STATE_CANCELED", "canceled"].contains(&state.as_str()), "{last}");
    }
    // Once its streams have ended the caller streams again.
    let events = server
        .rpc_stream(KEY, Some("1.0"), "SendStreamingMessage", send_params("again", None))
        .await;
    let last = events.last().unwrap();
    assert_eq!(last["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
}

/// Opens a connection and starts a JSON-RPC ListTasks whose body is held back: with
/// `Expect: 100-continue` the server says `100 Continue` when it starts reading the body, after
/// authentication and the request cap, so the request is in progress once that arrives.
async fn held_request(server: &TestServer) -> (TcpStream, Vec<u8>) {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {}})
        .to_string()
        .into_bytes();
    let mut stream = server.connect().await;
    let head = format!(
        "POST /a2a HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {KEY}\r\nA2A-Version: 1.0\r\n\
Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let (status, _) = read_response_head(&mut stream).await;
    assert_eq!(status, "HTTP/1.1 100 Continue");
    (stream, body)
}

/// Reads one response head; returns its status line and its other lines, lower-cased.
async fn read_response_head(stream: &mut TcpStream) -> (String, Vec<String>) {
    let mut head = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "closed mid-head");
            head.push(byte[0]);
        }
    })
    .await
    .expect("no response head in time");
    let text = String::from_utf8(head).unwrap();
    let mut lines = text.trim_end().split("\r\n");
    let status = lines.next().unwrap_or_default().to_string();
    (status, lines.map(str::to_ascii_lowercase).collect())
}

/// Reads one whole response with a Content-Length; returns its status line and JSON body.
async fn read_response(stream: &mut TcpStream) -> (String, Value) {
    let (status, _, body) = read_answer(stream).await;
    (status, body)
}

/// Reads one whole response with a Content-Length; returns its status line, its `Connection`
/// and `Retry-After` header lines (lower-cased, sorted) and its JSON body.
async fn read_answer(stream: &mut TcpStream) -> (String, Vec<String>, Value) {
    let (status, headers) = read_response_head(stream).await;
    let length: usize = headers
        .iter()
        .find_map(|line| line.strip_prefix("content-length: "))
        .unwrap_or_else(|| panic!("no content-length: {headers:?}"))
        .parse()
        .unwrap();
    let mut body = vec![0u8; length];
    tokio::time::timeout(DEADLINE, stream.read_exact(&mut body)).await.unwrap().unwrap();
    let mut refusal_headers: Vec<String> = headers
        .into_iter()
        .filter(|line| line.starts_with("connection:") || line.starts_with("retry-after:"))
        .collect();
    refusal_headers.sort();
    (status, refusal_headers, serde_json::from_slice(&body).unwrap())
}

/// Sends `request` on `stream` and reads the answer (see [`read_answer`]).
async fn exchange(stream: &mut TcpStream, request: &str) -> (String, Vec<String>, Value) {
    tokio::time::timeout(DEADLINE, stream.write_all(request.as_bytes())).await.unwrap().unwrap();
    read_answer(stream).await
}

/// What else arrives on `stream` until the server closes it (nothing, after a refusal).
async fn rest_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut rest = Vec::new();
    tokio::time::timeout(DEADLINE, stream.read_to_end(&mut rest))
        .await
        .expect("the server did not close the connection in time")
        .unwrap();
    rest
}

/// A raw JSON-RPC 1.0 request (id 7) of `key`, with all of its body, on a kept-alive connection.
fn raw_rpc(key: &str, method: &str, params: Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
    format!(
        "POST /a2a HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {key}\r\nA2A-Version: 1.0\r\n\
Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A raw REST ListTasks of `key` on a kept-alive connection, with `extra` header lines.
fn raw_rest_list(key: &str, extra: &str) -> String {
    format!(
        "GET /a2a/v1/tasks HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {key}\r\nA2A-Version: 1.0\r\n\
{extra}\r\n"
    )
}

/// The headers of a refusal: the client is asked to wait a second and the connection closes.
fn closing() -> Vec<String> {
    vec!["connection: close".to_string(), "retry-after: 1".to_string()]
}

#[tokio::test]
async fn caller_at_its_request_cap_gets_429_on_every_binding_while_others_are_served() {
    let server =
        server_with(A2aOptions { max_requests_per_caller: 4, ..A2aOptions::default() }).await;
    // A stream counts as a request in progress, as do three requests whose bodies are pending.
    let stream = open_stream(rpc_request(
        &server,
        KEY,
        "1.0",
        "SendStreamingMessage",
        send_params(&endless(), None),
    ))
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(held_request(&server).await);
    }
    let message =
        "Too many requests in progress for this caller (limit 4); retry when one has finished";
    // Refused before the body is read, so the request id is not known.
    let rpc_refused =
        (429, Some("1".to_string()), rpc_refusal(Value::Null, "TOO_MANY_REQUESTS", message, 4));
    assert_eq!(answer(rpc_request(&server, KEY, "1.0", "ListTasks", json!({}))).await, rpc_refused);
    assert_eq!(
        answer(rpc_request(&server, KEY, "0.3", "tasks/get", json!({"id": stream.task_id}))).await,
        rpc_refused
    );
    assert_eq!(
        answer(rest_request(&server, reqwest::Method::GET, "/tasks", None)).await,
        (429, Some("1".to_string()), rest_refusal("TOO_MANY_REQUESTS", message, 4))
    );
    // The refused client does not keep its connection: the server closes it after the answer.
    let mut refused = server.connect().await;
    assert_eq!(
        exchange(&mut refused, &raw_rpc(KEY, "ListTasks", json!({}))).await,
        (
            "HTTP/1.1 429 Too Many Requests".to_string(),
            closing(),
            rpc_refusal(Value::Null, "TOO_MANY_REQUESTS", message, 4)
        )
    );
    assert_eq!(rest_until_closed(&mut refused).await, b"");
    assert_others_are_served(&server).await;
    // The held requests finish normally and give their slots back.
    for (mut connection, body) in held {
        connection.write_all(&body).await.unwrap();
        let (status, answer) = read_response(&mut connection).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(answer["result"]["tasks"].is_array(), "{answer}");
    }
    cancel(&server, &stream.task_id).await;
    let last = stream.last().await;
    assert_eq!(last["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_CANCELED");
    let listed = server.rpc(KEY, "ListTasks", json!({})).await;
    assert!(listed["result"]["tasks"].is_array(), "{listed}");
}

#[tokio::test]
async fn caller_at_its_connection_cap_gets_429_and_a_closed_connection_while_others_are_served() {
    let server =
        server_with(A2aOptions { max_connections_per_caller: 3, ..A2aOptions::default() }).await;
    // Three connections that each carried one cheap request and now sit idle, kept alive.
    let mut idle = Vec::new();
    for _ in 0..3 {
        let mut connection = server.connect().await;
        let (status, headers, listed) = exchange(&mut connection, &raw_rest_list(KEY, "")).await;
        assert_eq!(
            (status.as_str(), headers, &listed["tasks"]),
            ("HTTP/1.1 200 OK", vec![], &json!([]))
        );
        idle.push(connection);
    }
    let message = "Too many open connections for this caller (limit 3); reuse an open connection \
or close idle ones";
    let refused_status = "HTTP/1.1 429 Too Many Requests".to_string();
    // A fourth connection's first request is refused on both bindings, before its body is read
    // (so the JSON-RPC id is null), and the connection is closed after the answer.
    let mut fourth = server.connect().await;
    assert_eq!(
        exchange(&mut fourth, &raw_rpc(KEY, "ListTasks", json!({}))).await,
        (
            refused_status.clone(),
            closing(),
            rpc_refusal(Value::Null, "TOO_MANY_CALLER_CONNECTIONS", message, 3)
        )
    );
    assert_eq!(rest_until_closed(&mut fourth).await, b"");
    let mut fifth = server.connect().await;
    assert_eq!(
        exchange(&mut fifth, &raw_rest_list(KEY, "")).await,
        (
            refused_status.clone(),
            closing(),
            rest_refusal("TOO_MANY_CALLER_CONNECTIONS", message, 3)
        )
    );
    assert_eq!(rest_until_closed(&mut fifth).await, b"");
    assert_others_are_served(&server).await;
    // A request that closes its own connection holds no connection after it: it is served.
    let mut last = server.connect().await;
    let (status, headers, listed) =
        exchange(&mut last, &raw_rest_list(KEY, "Connection: close\r\n")).await;
    assert_eq!(
        (status.as_str(), headers, &listed["tasks"]),
        ("HTTP/1.1 200 OK", vec!["connection: close".to_string()], &json!([]))
    );
    // The caller's counted connections go on working.
    for connection in &mut idle {
        let (status, _, listed) = exchange(connection, &raw_rest_list(KEY, "")).await;
        assert_eq!((status.as_str(), &listed["tasks"]), ("HTTP/1.1 200 OK", &json!([])));
    }
    // Once one of them closes, a new connection is served. The server gives the count back as
    // it finishes closing its side, a moment after the client sees the close, so the first new
    // connections may still be refused (each answered and closed at once).
    let mut closed = idle.pop().unwrap();
    closed.shutdown().await.unwrap();
    assert_eq!(rest_until_closed(&mut closed).await, b"");
    let served = tokio::time::timeout(DEADLINE, async {
        loop {
            let mut connection = server.connect().await;
            let (status, _, listed) = exchange(&mut connection, &raw_rest_list(KEY, "")).await;
            if status != refused_status {
                break (status, listed);
            }
        }
    })
    .await
    .expect("a new connection was not served in time after one closed");
    assert_eq!((served.0.as_str(), &served.1["tasks"]), ("HTTP/1.1 200 OK", &json!([])));
}

#[tokio::test]
async fn peer_at_its_unauthenticated_connection_cap_is_refused_at_accept_while_callers_are_served()
{
    // Authenticated connections do not count: the other caller, from the same address, keeps
    // its kept-alive connection working while idle connections from that address fill the cap.
    let server = server_with(A2aOptions {
        max_unauthenticated_connections_per_peer: 3,
        ..A2aOptions::default()
    })
    .await;
    let listed = server.rpc(OTHER_KEY, "ListTasks", json!({})).await;
    assert!(listed["result"]["tasks"].is_array(), "{listed}");
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(server.connect().await);
    }
    let refused_text = refused_connection_text(&server).await;
    let (head, body) = refused_text.split_once("\r\n\r\n").unwrap();
    let mut head: Vec<String> = head.split("\r\n").map(str::to_ascii_lowercase).collect();
    head.sort();
    let length = body.len().to_string();
    let mut expected = vec![
        "http/1.1 429 too many requests".to_string(),
        "content-type: application/json".to_string(),
        "retry-after: 1".to_string(),
        format!("content-length: {length}"),
        "connection: close".to_string(),
    ];
    expected.sort();
    assert_eq!(head, expected);
    let message = "Too many unauthenticated connections from this address (limit 3); reuse a \
connection or present an API key";
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap(),
        rest_refusal("TOO_MANY_CONNECTIONS", message, 3)
    );
    // An HTTP client on a new connection reads the refusal as the answer to its request.
    let fresh = reqwest::Client::new();
    assert_eq!(
        answer(fresh.get(format!("{}/.well-known/agent-card.json", server.base))).await,
        (429, Some("1".to_string()), rest_refusal("TOO_MANY_CONNECTIONS", message, 3))
    );
    // The other caller's connection, and the card on it, still answer.
    assert_others_are_served(&server).await;
    // An idle connection that authenticates stops counting: a new one is accepted.
    let mut vouched = idle.pop().unwrap();
    vouched
        .write_all(
            format!(
                "GET /a2a/v1/tasks HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {KEY}\r\n\
A2A-Version: 1.0\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let (status, listed) = read_response(&mut vouched).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(listed["tasks"].is_array(), "{listed}");
    // A card-only client is served, and counts while it stays connected.
    let mut card_reader = server.connect().await;
    card_reader
        .write_all(b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let (status, card) = read_response(&mut card_reader).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(card["name"].is_string(), "{card}");
    assert!(refused_connection_text(&server).await.starts_with("HTTP/1.1 429 "));
}

/// Opens a connection, sends a request as a client would, and reads what comes back until the
/// server closes it.
async fn refused_connection_text(server: &TestServer) -> String {
    let mut stream = server.connect().await;
    // The request may or may not be written before the refusal arrives; either way the answer
    // must reach us intact. (`Connection: close`, so a connection that is served ends too.)
    let _written = stream
        .write_all(
            b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        )
        .await;
    let mut seen = Vec::new();
    tokio::time::timeout(DEADLINE, stream.read_to_end(&mut seen))
        .await
        .expect("the refused connection was not closed in time")
        .unwrap();
    String::from_utf8(seen).unwrap()
}

/// A JSON-RPC call of [`KEY`] on a connection that closes after it (`Connection: close`), so
/// it never counts against the caller's connections.
async fn rpc_closing(server: &TestServer, method: &str, params: Value) -> Value {
    let request = rpc_request(server, KEY, "1.0", method, params).header("Connection", "close");
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    tokio::time::timeout(DEADLINE, response.json()).await.unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_caller_with_64_connections_is_never_refused_by_the_defaults() {
    const CONNECTIONS: usize = 64;
    let server = TestServer::start().await;
    // The test's own calls close their connections, so the caller holds exactly the 128 below,
    // the default connection cap: twice a 64-connection client.
    let started = rpc_closing(
        &server,
        "SendMessage",
        json!({"message": send_params(&endless(), None)["message"],
            "configuration": {"returnImmediately": true}}),
    )
    .await;
    let task = started["result"]["task"]["id"].as_str().unwrap().to_string();
    // 64 clients, a connection each, every one holding a stream open at once.
    let clients: Vec<reqwest::Client> = (0..CONNECTIONS).map(|_| reqwest::Client::new()).collect();
    let streams = futures_util::future::join_all(clients.iter().map(|client| {
        open_stream(
            client
                .post(format!("{}/a2a", server.base))
                .header("X-API-Key", KEY)
                .header("A2A-Version", "1.0")
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
                    "params": {"id": task}})),
        )
    }))
    .await;
    assert_eq!(streams.len(), CONNECTIONS);
    // And 64 more connections, each with a request, while the streams are open.
    let fresh: Vec<reqwest::Client> = (0..CONNECTIONS).map(|_| reqwest::Client::new()).collect();
    let statuses = futures_util::future::join_all(fresh.iter().map(|client| async {
        let request = client
            .post(format!("{}/a2a", server.base))
            .header("X-API-Key", KEY)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task}}));
        tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap().status().as_u16()
    }))
    .await;
    assert_eq!(statuses, vec![200; CONNECTIONS]);
    let canceled = rpc_closing(&server, "CancelTask", json!({"id": task})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    for stream in streams {
        let last = stream.last().await;
        assert_eq!(last["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_CANCELED");
    }
}
