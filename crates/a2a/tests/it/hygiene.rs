//! Error hygiene: every error path we can provoke answers without internal paths, Rust type
//! names, source locations or stack traces; the details go to the log only.

use serde_json::{Value, json};
use volcanic_a2a::A2aOptions;

use crate::support::*;

/// What an error answer must never contain.
fn leaks(server: &TestServer, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let temp = std::env::temp_dir();
    let dirs = [server.ws(), server.state.path(), temp.as_path()];
    for dir in dirs {
        let dir = dir.to_string_lossy();
        if text.contains(dir.as_ref()) {
            found.push(format!("path {dir}"));
        }
    }
    let needles = [
        "src/",
        ".rs:",
        ".rs\"",
        "panicked",
        "stack backtrace",
        "RUST_BACKTRACE",
        "::",
        "expected struct",
        "expected enum",
        "volcanic_",
        "serde",
    ];
    for needle in needles {
        if text.contains(needle) {
            found.push(needle.to_string());
        }
    }
    found
}

async fn raw_rpc(server: &TestServer, version: &str, body: &str) -> String {
    let response = server
        .client
        .post(format!("{}/a2a", server.base))
        .header("X-API-Key", KEY)
        .header("A2A-Version", version)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    response.text().await.unwrap()
}

async fn raw_rest(server: &TestServer, method: reqwest::Method, path: &str, body: &str) -> String {
    let response = server
        .client
        .request(method, format!("{}/a2a/v1{path}", server.base))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    response.text().await.unwrap()
}

fn rpc(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
}

#[tokio::test]
async fn error_answers_never_reveal_paths_types_or_traces() {
    let server = TestServer::with(Setup {
        options: A2aOptions { allow_private_push_urls: true, ..A2aOptions::default() },
        ..Setup::default()
    })
    .await;
    let mut answers: Vec<(String, String)> = Vec::new();
    let requests = [
        ("1.0", "{not json".to_string()),
        ("1.0", "[".repeat(1000)),
        ("1.0", "12".to_string()),
        ("1.0", rpc("GetTask", json!({"id": 5}))),
        ("1.0", rpc("GetTask", json!(5))),
        ("1.0", rpc("GetTask", json!({"id": "no-such-task"}))),
        ("1.0", rpc("GetTask", json!({"id": "../../../etc/passwd"}))),
        ("1.0", rpc("CancelTask", json!({"id": "no-such-task"}))),
        ("1.0", rpc("ListTasks", json!({"pageToken": "forged"}))),
        ("1.0", rpc("ListTasks", json!({"pageSize": "many"}))),
        ("1.0", rpc("SendMessage", json!({"message": {"role": 7}}))),
        (
            "1.0",
            rpc(
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER",
            "parts": [{"raw": "%%%"}]}}),
            ),
        ),
        (
            "1.0",
            rpc(
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER",
            "parts": [{"unknown": 1}]}}),
            ),
        ),
        (
            "1.0",
            rpc(
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_AGENT",
            "parts": [{"text": "x"}]}}),
            ),
        ),
        (
            "1.0",
            rpc(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": "nope",
            "url": "file:///etc/passwd"}),
            ),
        ),
        ("1.0", rpc("NoSuchMethod", json!({}))),
        ("0.3", rpc("message/send", json!({"message": {"kind": "message", "role": "robot"}}))),
        ("0.3", rpc("tasks/get", json!({"id": 5}))),
        ("0.3", rpc("tasks/pushNotificationConfig/set", json!({"taskId": "x"}))),
        ("2.0", rpc("GetTask", json!({"id": "x"}))),
    ];
    for (version, body) in requests {
        let answer = raw_rpc(&server, version, &body).await;
        answers.push((format!("jsonrpc {version} {body:.80}"), answer));
    }
    let rest = [
        (reqwest::Method::POST, "/message:send", "{bad"),
        (reqwest::Method::POST, "/message:send", r#"{"message": 5}"#),
        (reqwest::Method::GET, "/tasks/no-such-task", ""),
        (reqwest::Method::GET, "/tasks?pageSize=abc", ""),
        (reqwest::Method::POST, "/tasks/no-such-task:cancel", ""),
        (reqwest::Method::GET, "/no/such/route", ""),
        (reqwest::Method::POST, "/tasks/x/pushNotificationConfigs", r#"{"url": 3}"#),
    ];
    for (method, path, body) in rest {
        let answer = raw_rest(&server, method.clone(), path, body).await;
        answers.push((format!("rest {method} {path}"), answer));
    }

    // A download that fails: the task fails with a reason, which must not leak either.
    let params = json!({"message": {"messageId": uuid(), "role": "ROLE_USER",
        "parts": [{"url": "https://127.0.0.1:9/missing/report.pdf"}]}});
    answers
        .push(("failed download".into(), server.rpc(KEY, "SendMessage", params).await.to_string()));

    // File writes that fail: inbox/ is a file, then the task folder is.
    std::fs::write(server.ws().join("inbox"), b"not a folder").unwrap();
    let params = json!({"message": {"messageId": uuid(), "role": "ROLE_USER",
        "parts": [{"raw": "aGVsbG8=", "filename": "a.txt"}]}});
    let answer = server.rpc(KEY, "SendMessage", params).await;
    assert!(
        answer.get("error").is_some()
            || answer["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED",
        "{answer}"
    );
    answers.push(("unwritable inbox".into(), answer.to_string()));
    let tasks = server.ws().join(".volcanic/a2a/tasks");
    std::fs::remove_dir_all(&tasks).ok();
    std::fs::write(&tasks, b"not a folder").unwrap();
    let answer = server.rpc(KEY, "SendMessage", send_params("hi", None)).await;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    answers.push(("unwritable task folder".into(), answer.to_string()));
    let answer = raw_rest(
        &server,
        reqwest::Method::POST,
        "/message:send",
        &send_params("hi", None).to_string(),
    )
    .await;
    answers.push(("unwritable task folder, rest".into(), answer));

    let mut problems = Vec::new();
    for (what, answer) in &answers {
        let found = leaks(&server, answer);
        if !found.is_empty() {
            problems.push(format!("{what}: {found:?} in {answer:.400}"));
        }
    }
    assert!(problems.is_empty(), "leaks:\n{}", problems.join("\n"));
}
