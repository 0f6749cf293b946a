//! The HTTP providers against local fake APIs: wiremock servers that answer with the SSE bodies the
//! real APIs send, plus a raw TCP server for streams that stall.

mod anthropic;
mod openai;

use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use volcanic_core::message::{
    AssistantBlock, AssistantMessage, Message, StopReason, ToolCall, ToolResult,
};
use volcanic_core::provider::{Delta, ModelRequest, ToolSpec};
use wiremock::ResponseTemplate;

/// How long a test waits for a call that should end promptly before failing instead of hanging.
const DEADLINE: Duration = Duration::from_secs(10);

/// Collects the deltas a provider reports.
#[derive(Default)]
struct Deltas(Mutex<Vec<Delta>>);

impl Deltas {
    fn push(&self, delta: Delta) {
        self.0.lock().unwrap().push(delta);
    }

    fn seen(&self) -> Vec<Delta> {
        self.0.lock().unwrap().clone()
    }
}

/// A 200 answer carrying `body` as an event stream.
fn sse(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.to_owned(), "text/event-stream")
}

/// Runs a session over `provider` (whose fake API at `server` answers every call with the same
/// text): one exchange, then the owner's `/compact keep the dates`. Returns the body of the
/// summary call.
async fn summary_call(
    provider: std::sync::Arc<dyn volcanic_core::Provider>,
    server: &wiremock::MockServer,
) -> serde_json::Value {
    let state = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let factory = volcanic_core::SessionFactory::builder(provider, state.path()).build();
    let session =
        factory.open(volcanic_core::SessionOptions::new("wire", workspace.path())).await.unwrap();
    for text in ["hello", "and again"] {
        let settled =
            tokio::time::timeout(DEADLINE, session.prompt(text).unwrap().settled()).await.unwrap();
        assert_eq!(settled.outcome, volcanic_core::RunOutcome::Completed);
    }
    let compacted = session.compact(Some("keep the dates".into())).unwrap();
    let settled = tokio::time::timeout(DEADLINE, compacted.settled()).await.unwrap();
    assert_eq!(settled.outcome, volcanic_core::RunOutcome::Completed);
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 3);
    requests[2].body_json().unwrap()
}

/// The text of the summary call [`summary_call`] makes, the model having said `answer`.
fn summary_request_text(answer: &str) -> String {
    format!(
        "This is the part of the conversation to summarise:\n\n<conversation>\n### user\nhello\n\n### assistant\n{answer}\n</conversation>\n\nWrite the summary now.\n\nThe owner asks that the summary keep in particular:\nkeep the dates"
    )
}

/// A request with a one-line conversation and no tools.
fn simple_request(model: &str) -> ModelRequest {
    ModelRequest {
        model: model.to_owned(),
        system: "You are terse.".to_owned(),
        messages: vec![Message::user("Say hello")],
        tools: Vec::new().into(),
        max_output_tokens: 1024,
    }
}

/// A request whose conversation has every kind of message: thinking with and without a
/// signature, an empty text block, two tool calls, their results (one failed) with a note
/// between them, and user text after them.
fn round_trip_request(model: &str) -> ModelRequest {
    let answer = AssistantMessage {
        content: vec![
            AssistantBlock::Thinking {
                text: "I should list it.".to_owned(),
                signature: Some("sig-1".to_owned()),
            },
            AssistantBlock::Thinking { text: "unsigned".to_owned(), signature: None },
            AssistantBlock::Text { text: String::new() },
            AssistantBlock::Text { text: "Listing.".to_owned() },
            AssistantBlock::ToolCall(ToolCall {
                id: "call_1".to_owned(),
                name: "ls".to_owned(),
                args: json!({"path": "src"}),
            }),
            AssistantBlock::ToolCall(ToolCall {
                id: "call_2".to_owned(),
                name: "read".to_owned(),
                args: json!({"path": "README.md"}),
            }),
        ],
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    };
    let result = |call_id: &str, tool: &str, content: &str, is_error: bool| {
        Message::ToolResult(ToolResult {
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            content: content.to_owned(),
            is_error,
            details: json!({"not": "sent"}),
        })
    };
    ModelRequest {
        model: model.to_owned(),
        system: "You are terse.".to_owned(),
        messages: vec![
            Message::user("What is in src?"),
            Message::Assistant(answer),
            result("call_1", "ls", "main.rs", false),
            Message::Note { text: "the run was resumed".to_owned() },
            result("call_2", "read", "no such file", true),
            Message::user("Thanks, go on"),
        ],
        tools: vec![ToolSpec {
            name: "ls".to_owned(),
            description: "List a folder".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"]
            }),
        }]
        .into(),
        max_output_tokens: 2048,
    }
}

/// A server that answers one request with a streaming 200, sends `events`, then stays silent
/// with the connection open until it is dropped.
struct StalledServer {
    url: String,
    task: JoinHandle<()>,
}

impl Drop for StalledServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StalledServer {
    async fn start(events: &'static str) -> StalledServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            read_request(&mut socket).await;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        transfer-encoding: chunked\r\n\r\n";
            let chunk = format!("{:x}\r\n{events}\r\n", events.len());
            socket.write_all(head.as_bytes()).await.unwrap();
            socket.write_all(chunk.as_bytes()).await.unwrap();
            socket.flush().await.unwrap();
            std::future::pending::<()>().await;
        });
        StalledServer { url, task }
    }
}

/// Reads one HTTP request (head and `content-length` body) so the answer does not race it.
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = socket.read(&mut chunk).await.unwrap();
        assert_ne!(read, 0, "client closed before sending its request");
        buffer.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&buffer);
        let Some(head_end) = text.find("\r\n\r\n") else { continue };
        let length = text[..head_end]
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0usize);
        if buffer.len() >= head_end + 4 + length {
            return;
        }
    }
}

/// A loopback URL where nothing listens.
async fn refused_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}
