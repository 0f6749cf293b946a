//! Hostile bodies and headers on every binding (JSON-RPC 1.0 and 0.3, REST): each is answered
//! with its own status and code, nothing is created, and the server keeps serving.

use base64::Engine;
use serde_json::{Value, json};
use volcanic_a2a::A2aOptions;

use crate::support::*;

/// Where a body goes: JSON-RPC with a version, or REST `message:send`.
#[derive(Debug, Clone, Copy)]
enum Target {
    JsonRpc10,
    JsonRpc03,
    Rest,
}

const TARGETS: [Target; 3] = [Target::JsonRpc10, Target::JsonRpc03, Target::Rest];

/// What came back: the HTTP status and the body (JSON when it parses).
async fn post(
    server: &TestServer,
    target: Target,
    content_type: &str,
    body: Vec<u8>,
    headers: &[(String, String)],
) -> (u16, Value) {
    // A fresh connection each time: an error answer may close it.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let (path, version) = match target {
        Target::JsonRpc10 => ("/a2a", "1.0"),
        Target::JsonRpc03 => ("/a2a", "0.3"),
        Target::Rest => ("/a2a/v1/message:send", "1.0"),
    };
    let mut request = client
        .post(format!("{}{path}", server.base))
        .header("X-API-Key", KEY)
        .header("A2A-Version", version)
        .header("content-type", content_type)
        .body(body);
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
    let status = response.status().as_u16();
    let text = tokio::time::timeout(DEADLINE, response.text()).await.unwrap().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A send request whose only part is `part` (1.0 shape, or 0.3 `kind` shape).
fn send_body(target: Target, part: Value, id: Value) -> Vec<u8> {
    let message = match target {
        Target::JsonRpc03 => {
            json!({"kind": "message", "messageId": uuid(), "role": "user", "parts": [part]})
        }
        Target::JsonRpc10 | Target::Rest => {
            json!({"messageId": uuid(), "role": "ROLE_USER", "parts": [part]})
        }
    };
    let body = match target {
        Target::JsonRpc10 => json!({"jsonrpc": "2.0", "id": id, "method": "SendMessage",
            "params": {"message": message}}),
        Target::JsonRpc03 => json!({"jsonrpc": "2.0", "id": id, "method": "message/send",
            "params": {"message": message}}),
        Target::Rest => json!({"message": message}),
    };
    body.to_string().into_bytes()
}

fn file_part(target: Target, base64: &str) -> Value {
    match target {
        Target::JsonRpc03 => json!({"kind": "file", "file": {"bytes": base64, "name": "a.bin"}}),
        Target::JsonRpc10 | Target::Rest => json!({"raw": base64, "filename": "a.bin"}),
    }
}

/// The (HTTP status, JSON-RPC code or REST status name) of an answer.
fn outcome(target: Target, (status, body): &(u16, Value)) -> (u16, Value) {
    match target {
        Target::JsonRpc10 | Target::JsonRpc03 => (*status, body["error"]["code"].clone()),
        Target::Rest => (*status, body["error"]["status"].clone()),
    }
}

fn task_count(server: &TestServer) -> usize {
    std::fs::read_dir(server.ws().join(".volcanic/a2a/tasks")).map_or(0, Iterator::count)
}

async fn assert_healthy(server: &TestServer) {
    assert_eq!(server.send("still alive").await["task"]["status"]["state"], "TASK_STATE_COMPLETED");
}

/// (what, content type, body, expected JSON-RPC (status, code), expected REST (status, name)).
type Case = (&'static str, &'static str, Vec<u8>, (u16, Value), (u16, Value));

#[tokio::test]
async fn bad_bodies_get_their_own_errors_on_every_binding() {
    let server = TestServer::with(Setup {
        options: A2aOptions { max_file_bytes: 1024, ..A2aOptions::default() },
        ..Setup::default()
    })
    .await;
    let json = "application/json";
    let too_big = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 4096]);
    for target in TARGETS {
        let jsonrpc = !matches!(target, Target::Rest);
        let cases: Vec<Case> = vec![
            (
                "100k nested arrays",
                json,
                "[".repeat(100_000).into_bytes(),
                (200, json!(-32700)),
                (400, json!("INVALID_ARGUMENT")),
            ),
            (
                "100k nested objects",
                json,
                "{\"a\":".repeat(100_000).into_bytes(),
                (200, json!(-32700)),
                (400, json!("INVALID_ARGUMENT")),
            ),
            (
                "invalid UTF-8",
                json,
                {
                    let mut body = send_body(target, json!({"text": "MARK"}), json!(1));
                    let at = body.windows(4).position(|w| w == b"MARK").unwrap();
                    body[at..at + 4].copy_from_slice(&[0xff, 0xfe, 0xc0, 0x80]);
                    body
                },
                (200, json!(-32700)),
                (400, json!("INVALID_ARGUMENT")),
            ),
            (
                "file part over MaxFileBytes",
                json,
                send_body(target, file_part(target, &too_big), json!(1)),
                (200, json!(-32602)),
                (400, json!("INVALID_ARGUMENT")),
            ),
            (
                "malformed base64",
                json,
                send_body(target, file_part(target, "!!not*base64**"), json!(1)),
                (200, json!(-32602)),
                (400, json!("INVALID_ARGUMENT")),
            ),
            (
                "text/plain",
                "text/plain",
                send_body(target, json!({"text": "hi"}), json!(1)),
                (415, json!(-32005)),
                (415, json!("INVALID_ARGUMENT")),
            ),
            (
                "form data",
                "application/x-www-form-urlencoded",
                b"a=1&b=2".to_vec(),
                (415, json!(-32005)),
                (415, json!("INVALID_ARGUMENT")),
            ),
            (
                "not an object",
                json,
                b"12345".to_vec(),
                (200, json!(-32600)),
                (400, json!("INVALID_ARGUMENT")),
            ),
        ];
        for (what, content_type, body, expected_rpc, expected_rest) in cases {
            let answer = post(&server, target, content_type, body, &[]).await;
            let expected = if jsonrpc { expected_rpc } else { expected_rest };
            assert_eq!(outcome(target, &answer), expected, "{target:?} {what}: {}", answer.1);
        }
    }
    assert_eq!(task_count(&server), 0, "a refused request created a task");
    assert_healthy(&server).await;
}

#[tokio::test]
async fn oversized_body_is_413_on_every_binding() {
    let server = TestServer::with(Setup {
        options: A2aOptions { max_file_bytes: 1024, ..A2aOptions::default() },
        ..Setup::default()
    })
    .await;
    let limit = A2aOptions { max_file_bytes: 1024, ..A2aOptions::default() }.max_body_bytes();
    for target in TARGETS {
        let body = send_body(target, json!({"text": "x".repeat(limit + 1)}), json!(1));
        let answer = post(&server, target, "application/json", body, &[]).await;
        let expected = match target {
            Target::JsonRpc10 | Target::JsonRpc03 => (413, json!(-32600)),
            Target::Rest => (413, json!("RESOURCE_EXHAUSTED")),
        };
        assert_eq!(outcome(target, &answer), expected, "{target:?}: {}", answer.1);
    }
    assert_healthy(&server).await;
}

#[tokio::test]
async fn oversized_and_numerous_headers_are_431() {
    let server = TestServer::start().await;
    let long = vec![("X-Long".to_string(), "a".repeat(200 * 1024))];
    let many: Vec<(String, String)> = (0..300).map(|i| (format!("X-H{i}"), "v".into())).collect();
    for headers in [long, many] {
        for target in TARGETS {
            let body = send_body(target, json!({"text": "hi"}), json!(1));
            let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
            let mut request = client
                .post(format!("{}/a2a", server.base))
                .header("X-API-Key", KEY)
                .header("content-type", "application/json")
                .body(body);
            for (name, value) in &headers {
                request = request.header(name.as_str(), value.as_str());
            }
            // hyper answers 431 and closes; the client may see the close first while still
            // writing the head, which is just as clean.
            match tokio::time::timeout(DEADLINE, request.send()).await.unwrap() {
                Ok(response) => assert_eq!(response.status(), 431, "{target:?}"),
                Err(err) => assert!(err.is_request() || err.is_connect(), "{err}"),
            }
        }
    }
    assert_eq!(task_count(&server), 0);
    assert_healthy(&server).await;
}

#[tokio::test]
async fn header_fields_are_capped_at_100() {
    let server = TestServer::start().await;
    // The client adds a few fields of its own (Host, Content-Type, Content-Length, the key): 90
    // extra fields stay under the cap of 100, 100 extra fields go over it.
    for (extra, expected) in [(90, 200), (100, 431)] {
        let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
        let mut request = client
            .post(format!("{}/a2a", server.base))
            .header("X-API-Key", KEY)
            .header("content-type", "application/json")
            .body(
                json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}})
                    .to_string(),
            );
        for i in 0..extra {
            request = request.header(format!("X-H{i}"), "v");
        }
        match tokio::time::timeout(DEADLINE, request.send()).await.unwrap() {
            Ok(response) => assert_eq!(response.status(), expected, "{extra} extra fields"),
            // hyper may close before the client has written the whole head (see above).
            Err(err) => {
                assert_eq!(expected, 431, "{extra} extra fields: {err}");
                assert!(err.is_request() || err.is_connect(), "{err}");
            }
        }
    }
    assert_healthy(&server).await;
}

#[tokio::test]
async fn huge_ids_and_strings_in_valid_requests_are_bounded() {
    let server = TestServer::start().await;
    let huge = "x".repeat(512 * 1024);
    // A huge JSON-RPC id is echoed as given (it is the caller's own bytes, within the body cap).
    let body = json!({"jsonrpc": "2.0", "id": huge, "method": "GetTask", "params": {"id": "nope"}});
    let answer =
        post(&server, Target::JsonRpc10, "application/json", body.to_string().into_bytes(), &[])
            .await;
    assert_eq!(outcome(Target::JsonRpc10, &answer), (200, json!(-32001)));
    assert_eq!(answer.1["id"].as_str().map(str::len), Some(huge.len()));
    // A huge task id never reaches the disk and is not found, on both bindings.
    let answer = server.rpc(KEY, "GetTask", json!({"id": huge})).await;
    assert_eq!(answer["error"]["code"], -32001);
    let (status, _) =
        server.rest(KEY, reqwest::Method::GET, &format!("/tasks/{}", &huge[..8000]), None).await;
    assert_eq!(status, 404);
    // A huge context id is refused; a huge message id and text are just a message.
    let answer = server
        .rpc(KEY, "SendMessage", send_params("hi", Some(json!({"contextId": huge.clone()}))))
        .await;
    assert_eq!(answer["error"]["code"], -32602);
    let params = json!({"message": {"messageId": huge.clone(), "role": "ROLE_USER",
        "parts": [{"text": huge.clone()}]}});
    let answer = server.rpc(KEY, "SendMessage", params).await;
    assert_eq!(answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    assert_healthy(&server).await;
}

#[tokio::test]
async fn max_header_bytes_sets_the_head_cap() {
    let padding = "p".repeat(6 * 1024);
    for (max_header_bytes, expected) in [(4 * 1024, 431), (64 * 1024, 200)] {
        let server = TestServer::with(Setup {
            options: A2aOptions { max_header_bytes, ..A2aOptions::default() },
            ..Setup::default()
        })
        .await;
        let body = send_body(Target::JsonRpc10, json!({"text": "hi"}), json!(1));
        let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
        let request = client
            .post(format!("{}/a2a", server.base))
            .header("X-API-Key", KEY)
            .header("A2A-Version", "1.0")
            .header("content-type", "application/json")
            .header("X-Padding", padding.as_str())
            .body(body);
        let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
        assert_eq!(response.status(), expected, "cap {max_header_bytes}");
        assert_healthy(&server).await;
    }
}
