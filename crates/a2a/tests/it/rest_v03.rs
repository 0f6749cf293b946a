//! 0.3 callers on HTTP+JSON (docs/a2a.md, "0.3 over HTTP+JSON"): the same `/a2a/v1` paths as
//! 1.0, bodies and answers in the 0.3 proto JSON (`content`, `TASK_STATE_CANCELLED`, `final`,
//! push configs as named resources), the version taken from `A2A-Version` or else from the
//! body's shape, and 1.0 for header-less requests without a body.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

const HOOK: &str = "https://hook.example.com/a2a";

/// A 0.3 proto SendMessageRequest as the Python SDK prints it (`request`, snake_case names).
fn python_send(text: &str, configuration: Option<Value>) -> Value {
    let mut body = json!({"request": {"message_id": uuid(), "role": "ROLE_USER", "content": [{"text": text}]}});
    if let Some(configuration) = configuration {
        body["configuration"] = configuration;
    }
    body
}

/// Starts a task that runs until cancelled or `steps` end, without waiting (0.3 REST: a
/// configuration without `blocking` does not block).
async fn start(server: &TestServer, steps: Value) -> String {
    let body =
        python_send(&directive(steps), Some(json!({"accepted_output_modes": ["text/plain"]})));
    let (status, started) =
        server.rest_versioned(KEY, Some("0.3"), Method::POST, "/message:send", Some(body)).await;
    assert_eq!(status, 200, "{started}");
    assert_eq!(started["task"]["status"]["state"], "TASK_STATE_WORKING", "{started}");
    started["task"]["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn rest_v03_send_answers_the_proto_task() {
    let server = TestServer::start().await;
    let body = python_send("hello", Some(json!({"blocking": true})));
    let (status, answer) =
        server.rest_versioned(KEY, Some("0.3"), Method::POST, "/message:send", Some(body)).await;
    assert_eq!(status, 200, "{answer}");
    let task = &answer["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap().ends_with("hello"));
    let history = task["history"].as_array().unwrap();
    assert_eq!(history[0]["role"], "ROLE_USER");
    assert_eq!(history[0]["content"], json!([{"text": "hello"}]));
    assert!(history.iter().all(|m| m.get("parts").is_none() && m.get("kind").is_none()));
}

#[tokio::test]
async fn rest_v03_without_header_is_read_from_the_body() {
    let server = TestServer::start().await;
    // The JS SDK's shape: the message under its json_name, parts under `content`.
    let js = json!({"message": {"messageId": uuid(), "role": "ROLE_USER", "content": [{"text": "js"}]},
                    "configuration": {"blocking": true}});
    let (status, answer) =
        server.rest_versioned(KEY, None, Method::POST, "/message:send", Some(js)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["task"]["history"][0]["content"], json!([{"text": "js"}]));
    let python = python_send("py", Some(json!({"blocking": true})));
    let (_, answer) =
        server.rest_versioned(KEY, None, Method::POST, "/message:send", Some(python)).await;
    assert_eq!(answer["task"]["history"][0]["content"], json!([{"text": "py"}]));
    assert_eq!(answer["task"]["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn rest_v10_without_header_still_speaks_1_0() {
    let server = TestServer::start().await;
    let body = send_params("plain curl", None);
    let (status, answer) =
        server.rest_versioned(KEY, None, Method::POST, "/message:send", Some(body)).await;
    assert_eq!(status, 200, "{answer}");
    let task = answer["task"].clone();
    assert_eq!(task["history"][0]["parts"], json!([{"text": "plain curl"}]));
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    // A header-less request without a body is 1.0: GetTask as the docs' curl examples send it.
    let path = format!("/tasks/{}", task["id"].as_str().unwrap());
    let (status, got) = server.rest_versioned(KEY, None, Method::GET, &path, None).await;
    assert_eq!(status, 200);
    assert_eq!(got["history"][0]["parts"], json!([{"text": "plain curl"}]));
    assert!(got["history"][0].get("content").is_none());
    // The same task asked for as 0.3.
    let (_, got) = server.rest_versioned(KEY, Some("0.3"), Method::GET, &path, None).await;
    assert_eq!(got["history"][0]["content"], json!([{"text": "plain curl"}]));
    // 1.0 routes keep working without a header.
    let (status, list) = server.rest_versioned(KEY, None, Method::GET, "/tasks", None).await;
    assert_eq!(status, 200);
    assert_eq!(list["tasks"][0]["id"], task["id"]);
}

#[tokio::test]
async fn rest_v03_stream_wraps_events_and_ends_with_final() {
    let server = TestServer::start().await;
    let events = server
        .rest_stream_versioned(
            KEY,
            None,
            Method::POST,
            "/message:stream",
            Some(python_send("hello", None)),
        )
        .await;
    let first = events.first().unwrap();
    assert_eq!(first["task"]["status"]["state"], "TASK_STATE_WORKING", "{events:?}");
    let streamed: String = events
        .iter()
        .filter_map(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert!(streamed.ends_with("hello"), "{events:?}");
    let last = &events.last().unwrap()["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(last["final"], true);
    let finals = events.iter().filter(|e| e["statusUpdate"]["final"] == true).count();
    assert_eq!(finals, 1, "{events:?}");
    assert!(events.iter().all(|e| e.get("kind").is_none() && e.get("result").is_none()));
}

#[tokio::test]
async fn rest_v03_get_reads_history_length_zero_as_no_limit() {
    let server = TestServer::start().await;
    let body = python_send("hello", Some(json!({"blocking": true})));
    let (_, answer) =
        server.rest_versioned(KEY, Some("0.3"), Method::POST, "/message:send", Some(body)).await;
    let path = format!("/tasks/{}?historyLength=0", answer["task"]["id"].as_str().unwrap());
    let (status, got) = server.rest_versioned(KEY, Some("0.3"), Method::GET, &path, None).await;
    assert_eq!(status, 200);
    assert_eq!(got["history"][0]["content"], json!([{"text": "hello"}]), "{got}");
    // 1.0 reads 0 as "no history".
    let (_, got) = server.rest_versioned(KEY, Some("1.0"), Method::GET, &path, None).await;
    assert!(got.get("history").is_none(), "{got}");
}

#[tokio::test]
async fn rest_v03_cancel_answers_cancelled() {
    let server = TestServer::start().await;
    let id = start(&server, json!([{"sleep_ms": 30000}])).await;
    let (status, canceled) = server
        .rest_versioned(KEY, Some("0.3"), Method::POST, &format!("/tasks/{id}:cancel"), None)
        .await;
    assert_eq!(status, 200, "{canceled}");
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELLED");
    // Without a header, the 0.3 CancelTaskRequest body (`name`) says 0.3.
    let other = start(&server, json!([{"sleep_ms": 30000}])).await;
    let body = json!({"name": format!("tasks/{other}")});
    let (status, canceled) = server
        .rest_versioned(KEY, None, Method::POST, &format!("/tasks/{other}:cancel"), Some(body))
        .await;
    assert_eq!(status, 200, "{canceled}");
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELLED");
    // A second cancel: the 0.3 error body.
    let (status, refused) = server
        .rest_versioned(KEY, Some("0.3"), Method::POST, &format!("/tasks/{id}:cancel"), None)
        .await;
    assert_eq!(status, 400);
    assert_eq!(refused["code"], -32002, "{refused}");
    assert_eq!(refused["type"], "TaskNotCancelableError");
    assert_eq!(refused["error"]["details"][0]["reason"], "TASK_NOT_CANCELABLE");
}

#[tokio::test]
async fn rest_v03_subscribe_streams_until_final() {
    let server = TestServer::start().await;
    let id = start(&server, json!([{"sleep_ms": 500}, {"text": "late answer"}])).await;
    let events = server
        .rest_stream_versioned(
            KEY,
            Some("0.3"),
            Method::GET,
            &format!("/tasks/{id}:subscribe"),
            None,
        )
        .await;
    assert_eq!(events[0]["task"]["id"], id.as_str(), "{events:?}");
    let last = &events.last().unwrap()["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(last["final"], true);
}

#[tokio::test]
async fn rest_v03_push_config_crud() {
    let server = TestServer::start().await;
    let body = python_send("hello", Some(json!({"blocking": true})));
    let (_, answer) =
        server.rest_versioned(KEY, Some("0.3"), Method::POST, "/message:send", Some(body)).await;
    let task = answer["task"]["id"].as_str().unwrap().to_owned();
    let path = format!("/tasks/{task}/pushNotificationConfigs");
    // The Python SDK's create body, snake_case, without a header.
    let python = json!({"parent": format!("tasks/{task}"), "config_id": "c1", "config": {
        "push_notification_config": {"url": HOOK, "token": "tok-0123456789",
                                     "authentication": {"schemes": ["Bearer"], "credentials": "secret-123456"}}}});
    let (status, created) =
        server.rest_versioned(KEY, None, Method::POST, &path, Some(python)).await;
    assert_eq!(status, 200, "{created}");
    let c1 = json!({"name": format!("tasks/{task}/pushNotificationConfigs/c1"), "pushNotificationConfig": {
        "id": "c1", "url": HOOK, "token": "tok-0123456789",
        "authentication": {"schemes": ["Bearer"], "credentials": "secret-123456"}}});
    assert_eq!(created, c1);
    // The proto annotation's body (the JS SDK's), with the 0.3 header.
    let annotation = json!({"name": format!("tasks/{task}/pushNotificationConfigs/c2"),
                            "pushNotificationConfig": {"url": HOOK}});
    let (status, created) =
        server.rest_versioned(KEY, Some("0.3"), Method::POST, &path, Some(annotation)).await;
    assert_eq!(status, 200, "{created}");
    let c2 = json!({"name": format!("tasks/{task}/pushNotificationConfigs/c2"),
                    "pushNotificationConfig": {"id": "c2", "url": HOOK}});
    assert_eq!(created, c2);

    let (status, got) =
        server.rest_versioned(KEY, Some("0.3"), Method::GET, &format!("{path}/c1"), None).await;
    assert_eq!((status, got), (200, c1.clone()));
    let (status, list) = server.rest_versioned(KEY, Some("0.3"), Method::GET, &path, None).await;
    assert_eq!((status, list), (200, json!({"configs": [c1, c2]})));
    let (status, deleted) =
        server.rest_versioned(KEY, Some("0.3"), Method::DELETE, &format!("{path}/c1"), None).await;
    assert_eq!((status, deleted), (200, json!({})));
    let (status, gone) =
        server.rest_versioned(KEY, Some("0.3"), Method::GET, &format!("{path}/c1"), None).await;
    assert_eq!(status, 404);
    assert_eq!(gone["code"], -32001, "{gone}");
    assert_eq!(gone["type"], "TaskNotFoundError");
    assert_eq!(gone["error"]["status"], "NOT_FOUND");
    // The config registered through 0.3 gets 0.3 webhook payloads.
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(server.task_path(&task)).unwrap()).unwrap();
    assert_eq!(file["pushConfigs"][0]["id"], "c2", "{file}");
    assert_eq!(file["pushConfigs"][0]["format"], "0.3", "{file}");
}

#[tokio::test]
async fn rest_v03_card_is_the_0_3_proto_card() {
    let server = TestServer::start().await;
    let (status, card) = server.rest_versioned(KEY, None, Method::GET, "/card", None).await;
    assert_eq!(status, 200, "{card}");
    let base = &server.base;
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["url"], format!("{base}/a2a"));
    assert_eq!(card["preferredTransport"], "JSONRPC");
    assert_eq!(
        card["additionalInterfaces"],
        json!([{"url": format!("{base}/a2a"), "transport": "JSONRPC"},
               {"url": format!("{base}/a2a"), "transport": "HTTP+JSON"}])
    );
    assert_eq!(card["supportsAuthenticatedExtendedCard"], true);
    assert_eq!(card["security"][0], json!({"schemes": {"apiKey": {"list": []}}}));
    assert_eq!(
        card["securitySchemes"]["apiKey"],
        json!({"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}})
    );
    assert!(
        card.get("supportedInterfaces").is_none() && card.get("securityRequirements").is_none()
    );
    // Each version's routes only.
    let refusals =
        [(Some("1.0"), "/card"), (Some("0.3"), "/extendedAgentCard"), (Some("0.3"), "/tasks")];
    for (version, path) in refusals {
        let (status, body) = server.rest_versioned(KEY, version, Method::GET, path, None).await;
        assert_eq!(status, 404, "{version:?} {path}: {body}");
    }
    let (_, body) = server.rest_versioned(KEY, Some("0.3"), Method::GET, "/tasks", None).await;
    assert_eq!(body["code"], -32601, "{body}");
}
