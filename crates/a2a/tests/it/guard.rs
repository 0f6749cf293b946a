//! The SSRF guard's client over real loopback sockets: DNS rebinding through an injected
//! resolver, redirects, the download cap, proxies from the environment.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use volcanic_a2a::push::guard::{GuardError, GuardedClient, Resolve};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::DEADLINE;

/// Answers each call with the next of its answers (the last one repeats).
struct Scripted {
    answers: Vec<Vec<IpAddr>>,
    calls: Arc<AtomicUsize>,
}

impl Resolve for Scripted {
    fn resolve(&self, _host: String) -> BoxFuture<'static, io::Result<Vec<IpAddr>>> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let answer = self.answers.get(call).or(self.answers.last()).cloned().unwrap_or_default();
        Box::pin(async move { Ok(answer) })
    }
}

fn scripted(allow_private: bool, answers: &[&[&str]]) -> (GuardedClient, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let answers =
        answers.iter().map(|ips| ips.iter().map(|ip| ip.parse().unwrap()).collect()).collect();
    let resolver = Scripted { answers, calls: calls.clone() };
    (GuardedClient::with_resolver(allow_private, Arc::new(resolver)).unwrap(), calls)
}

#[tokio::test]
async fn guard_dns_rebinding_to_loopback_is_refused() {
    let (client, calls) = scripted(false, &[&["93.184.216.34"], &["127.0.0.1"]]);
    let url = "https://rebind.example:9/hook";
    // The public answer is let through; with no internet the request then fails or times out,
    // and either way it is not the guard's refusal.
    let first = client.post_json(url, &json!({}), &[], Duration::from_secs(2)).await;
    match first {
        Ok(_) => {}
        Err(err) => assert!(!err.is_refusal(), "first request refused by the guard: {err}"),
    }
    let second = client.post_json(url, &json!({}), &[], DEADLINE).await;
    assert_eq!(second, Err(GuardError::ResolvesToBlocked { host: "rebind.example".into() }));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn guard_dns_answer_all_blocked_is_refused_for_downloads() {
    let (client, _) = scripted(false, &[&["10.0.0.7", "::ffff:169.254.169.254", "fd00::1"]]);
    let result = client.download("https://files.example/a.pdf", 100, DEADLINE).await;
    assert_eq!(result, Err(GuardError::ResolvesToBlocked { host: "files.example".into() }));
}

#[tokio::test]
async fn guard_dns_loopback_answer_allowed_when_private_allowed() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(204)).mount(&server).await;
    let port = server.address().port();
    let (client, _) = scripted(true, &[&["127.0.0.1"]]);
    let url = format!("http://rebind.example:{port}/hook");
    assert_eq!(client.post_json(&url, &json!({}), &[], DEADLINE).await, Ok(204));
}

#[tokio::test]
async fn guard_post_json_sends_body_and_headers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .and(header("x-a2a-notification-token", "tok"))
        .and(header("authorization", "Bearer abc"))
        .and(body_json(json!({"task": {"id": "t1"}})))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let client = GuardedClient::new(true).unwrap();
    let headers = [
        ("X-A2A-Notification-Token".to_string(), "tok".to_string()),
        ("Authorization".to_string(), "Bearer abc".to_string()),
    ];
    let url = format!("{}/hook", server.uri());
    let status = client.post_json(&url, &json!({"task": {"id": "t1"}}), &headers, DEADLINE).await;
    assert_eq!(status, Ok(200));
}

#[tokio::test]
async fn guard_post_json_literal_loopback_refused_without_allow() {
    let server = MockServer::start().await;
    let client = GuardedClient::new(false).unwrap();
    let url = format!("https://{}/hook", server.address());
    let result = client.post_json(&url, &json!({}), &[], DEADLINE).await;
    assert_eq!(result, Err(GuardError::BlockedAddress { host: "127.0.0.1".into() }));
    assert_eq!(server.received_requests().await.unwrap_or_default().len(), 0);
}

#[tokio::test]
async fn guard_redirect_is_returned_not_followed() {
    let target = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&target).await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(200)).mount(&target).await;
    let redirector = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(302)
                .insert_header("location", format!("{}/landing", target.uri())),
        )
        .mount(&redirector)
        .await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(307).insert_header("location", format!("{}/file", target.uri())),
        )
        .mount(&redirector)
        .await;
    let client = GuardedClient::new(true).unwrap();
    let url = format!("{}/hook", redirector.uri());
    assert_eq!(client.post_json(&url, &json!({}), &[], DEADLINE).await, Ok(302));
    let download = client.download(&url, 100, DEADLINE).await;
    assert_eq!(download, Err(GuardError::Status { status: 307 }));
    assert_eq!(target.received_requests().await.unwrap_or_default().len(), 0);
}

#[tokio::test]
async fn guard_download_non_2xx_is_status_error() {
    let server = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(404)).mount(&server).await;
    let client = GuardedClient::new(true).unwrap();
    let result = client.download(&format!("{}/gone", server.uri()), 100, DEADLINE).await;
    assert_eq!(result, Err(GuardError::Status { status: 404 }));
}

/// A one-shot HTTP server on 127.0.0.1 that reads the request, writes `response`, never ends the
/// body, and reports when the client closes the connection.
async fn hanging_server(response: Vec<u8>) -> (String, oneshot::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (closed_tx, closed_rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0, "client closed before sending its request");
            request.extend_from_slice(&buf[..n]);
        }
        // A client that stops early may already have closed: a failed write is that close.
        if socket.write_all(&response).await.is_ok() {
            loop {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        }
        // The test may have finished already; nobody listening is fine.
        let _ = closed_tx.send(());
    });
    (format!("http://{address}/file"), closed_rx)
}

#[tokio::test]
async fn guard_download_cap_hit_mid_stream_stops_early() {
    const CAP: u64 = 64 * 1024;
    let mut response =
        b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    let chunk = vec![b'x'; 16 * 1024];
    for _ in 0..8 {
        response.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        response.extend_from_slice(&chunk);
        response.extend_from_slice(b"\r\n");
    }
    // No final zero-size chunk: the body never ends, so only stopping at the cap can return.
    let (url, closed) = hanging_server(response).await;
    let client = GuardedClient::new(true).unwrap();
    let result = client.download(&url, CAP, DEADLINE).await;
    assert_eq!(result, Err(GuardError::TooLarge { cap: CAP }));
    tokio::time::timeout(DEADLINE, closed).await.unwrap().unwrap();
}

#[tokio::test]
async fn guard_download_content_length_over_cap_refused_up_front() {
    // Announces 10 MB and sends none of it: only a check of the header can return.
    let response = b"HTTP/1.1 200 OK\r\ncontent-length: 10000000\r\n\r\n".to_vec();
    let (url, closed) = hanging_server(response).await;
    let client = GuardedClient::new(true).unwrap();
    let result = client.download(&url, 1000, DEADLINE).await;
    assert_eq!(result, Err(GuardError::TooLarge { cap: 1000 }));
    tokio::time::timeout(DEADLINE, closed).await.unwrap().unwrap();
}

#[tokio::test]
async fn guard_download_within_cap_returns_body_and_type() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(b"hello".to_vec(), "text/plain"))
        .mount(&server)
        .await;
    let client = GuardedClient::new(true).unwrap();
    let result = client.download(&format!("{}/a.txt", server.uri()), 5, DEADLINE).await.unwrap();
    assert_eq!(result.bytes, b"hello");
    assert_eq!(result.content_type.as_deref(), Some("text/plain"));
}

const CHILD_TARGET: &str = "VOLCANIC_GUARD_TEST_TARGET";
const CHILD_TEST: &str = "guard::guard_proxy_env_child_sends_one_plain_and_one_guarded_request";

/// Tests must not change their own environment, so the proxy variables are set on a child run of
/// this test binary that executes only the test below.
#[tokio::test]
async fn guard_proxy_env_is_ignored() {
    let proxy = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&proxy).await;
    let target = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&target).await;
    let exe = std::env::current_exe().unwrap();
    let mut command = tokio::process::Command::new(exe);
    command.args([CHILD_TEST, "--exact", "--test-threads=1"]).env(CHILD_TARGET, target.uri());
    for name in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
    {
        command.env(name, proxy.uri());
    }
    command.env_remove("NO_PROXY").env_remove("no_proxy").kill_on_drop(true);
    let output = tokio::time::timeout(DEADLINE, command.output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && stdout.contains("1 passed"), "child run: {stdout}");
    let paths = |requests: Vec<wiremock::Request>| -> Vec<String> {
        requests.iter().map(|r| r.url.path().to_string()).collect()
    };
    // The plain client shows the variables are honoured; the guarded one went direct.
    assert_eq!(paths(proxy.received_requests().await.unwrap()), ["/plain"]);
    assert_eq!(paths(target.received_requests().await.unwrap()), ["/guarded"]);
}

/// Does nothing unless started by [`guard_proxy_env_is_ignored`] with the proxy variables set.
#[tokio::test]
async fn guard_proxy_env_child_sends_one_plain_and_one_guarded_request() {
    let Ok(target) = std::env::var(CHILD_TARGET) else { return };
    let plain = reqwest::Client::new();
    let response = plain.post(format!("{target}/plain")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let guarded = GuardedClient::new(true).unwrap();
    let status = guarded.post_json(&format!("{target}/guarded"), &json!({}), &[], DEADLINE).await;
    assert_eq!(status, Ok(200));
}
