//! Unit tests of the REST binding: decode tables, version rules and exact encodings.

use super::*;
use serde::de::DeserializeOwned;

fn from<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn not_found(route: &str) -> Result<Request, A2aError> {
    Err(A2aError::MethodNotFound(route.to_owned()))
}

#[test]
fn decode_route_table() {
    let message = json!({"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
    let send = json!({"message": message}).to_string();
    let push = r#"{"url":"https://hook","token":"tok"}"#;
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, &'a str, Result<Request, A2aError>);
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/message:send",
            None,
            &send,
            Ok(Request::SendMessage(SendParams::v1(from(json!({"message": message}))))),
        ),
        (
            "POST",
            "/message:stream",
            None,
            &send,
            Ok(Request::SendStreamingMessage(SendParams::v1(from(json!({"message": message}))))),
        ),
        (
            "GET",
            "/tasks/t1",
            Some("historyLength=2"),
            "",
            Ok(Request::GetTask(from(json!({"id": "t1", "historyLength": 2})))),
        ),
        ("GET", "/tasks/a%2Fb", None, "", Ok(Request::GetTask(from(json!({"id": "a/b"}))))),
        ("GET", "/tasks/urn:x", None, "", Ok(Request::GetTask(from(json!({"id": "urn:x"}))))),
        ("GET", "/tasks", None, "", Ok(Request::ListTasks(from(json!({}))))),
        ("GET", "/tasks/", Some(""), "", Ok(Request::ListTasks(from(json!({}))))),
        ("POST", "/tasks/t1:cancel", None, "", Ok(Request::CancelTask(from(json!({"id": "t1"}))))),
        (
            "POST",
            "/tasks/t1:cancel",
            None,
            "{}",
            Ok(Request::CancelTask(from(json!({"id": "t1"})))),
        ),
        (
            "POST",
            "/tasks/t1:cancel",
            None,
            r#"{"metadata":{"why":"done"}}"#,
            Ok(Request::CancelTask(from(json!({"id": "t1", "metadata": {"why": "done"}})))),
        ),
        (
            "POST",
            "/tasks/a:b:cancel",
            None,
            "",
            Ok(Request::CancelTask(from(json!({"id": "a:b"})))),
        ),
        (
            "POST",
            "/tasks/a%3Ab:cancel",
            None,
            "",
            Ok(Request::CancelTask(from(json!({"id": "a:b"})))),
        ),
        (
            "POST",
            "/tasks/t1:subscribe",
            None,
            "",
            Ok(Request::SubscribeToTask { request: from(json!({"id": "t1"})), after: None }),
        ),
        (
            "GET",
            "/tasks/t1:subscribe",
            None,
            "",
            Ok(Request::SubscribeToTask { request: from(json!({"id": "t1"})), after: None }),
        ),
        (
            "POST",
            "/tasks/t1/pushNotificationConfigs",
            None,
            push,
            Ok(Request::CreatePushConfig {
                config: from(json!({"taskId": "t1", "url": "https://hook", "token": "tok"})),
                format: PushFormat::V1_0,
            }),
        ),
        (
            "POST",
            "/tasks/t1/pushNotificationConfigs",
            None,
            r#"{"taskId":"t1","configId":"c1","config":{"url":"https://hook"}}"#,
            Ok(Request::CreatePushConfig {
                config: from(json!({"taskId": "t1", "id": "c1", "url": "https://hook"})),
                format: PushFormat::V1_0,
            }),
        ),
        (
            "GET",
            "/tasks/t1/pushNotificationConfigs",
            Some("pageSize=5&pageToken=abc"),
            "",
            Ok(Request::ListPushConfigs(from(
                json!({"taskId": "t1", "pageSize": 5, "pageToken": "abc"}),
            ))),
        ),
        (
            "GET",
            "/tasks/t1/pushNotificationConfigs/c%201",
            None,
            "",
            Ok(Request::GetPushConfig(from(json!({"taskId": "t1", "id": "c 1"})))),
        ),
        (
            "DELETE",
            "/tasks/t1/pushNotificationConfigs/c1",
            None,
            "",
            Ok(Request::DeletePushConfig(from(json!({"taskId": "t1", "id": "c1"})))),
        ),
        (
            "GET",
            "/extendedAgentCard",
            Some("A2A-Version=1.0"),
            "",
            Ok(Request::GetExtendedAgentCard),
        ),
        ("GET", "/message:send", None, "", not_found("GET /message:send")),
        ("PUT", "/tasks/t1:subscribe", None, "", not_found("PUT /tasks/t1:subscribe")),
        ("GET", "/tasks/t1:cancel", None, "", not_found("GET /tasks/t1:cancel")),
        ("POST", "/tasks/t1", None, "", not_found("POST /tasks/t1")),
        (
            "DELETE",
            "/tasks/t1/pushNotificationConfigs",
            None,
            "",
            not_found("DELETE /tasks/t1/pushNotificationConfigs"),
        ),
        (
            "POST",
            "/tasks/t1/pushNotificationConfigs/c1",
            None,
            "",
            not_found("POST /tasks/t1/pushNotificationConfigs/c1"),
        ),
        ("POST", "/extendedAgentCard", None, "", not_found("POST /extendedAgentCard")),
        ("GET", "/tasks/:cancel", None, "", not_found("GET /tasks/:cancel")),
        ("POST", "/tasks/:cancel", None, "", not_found("POST /tasks/:cancel")),
        ("GET", "/card", None, "", not_found("GET /card")),
        ("GET", "/", None, "", not_found("GET /")),
        ("GET", "/v1/tasks/t1", None, "", not_found("GET /v1/tasks/t1")),
    ];
    for (verb, path, query, body, expected) in cases {
        assert_eq!(
            decode(Version::V1_0, verb, path, query, body.as_bytes()),
            expected,
            "{verb} {path}"
        );
    }
}

#[test]
fn decode_list_tasks_reads_every_query_parameter() {
    let query = "contextId=c%201&status=TASK_STATE_WORKING&pageSize=10&pageToken=p&\
                 historyLength=0&statusTimestampAfter=2026-03-12T10:15:00+00:00&includeArtifacts=true";
    assert_eq!(
        decode(Version::V1_0, "GET", "/tasks", Some(query), b""),
        Ok(Request::ListTasks(from(json!({
            "contextId": "c 1", "status": "TASK_STATE_WORKING", "pageSize": 10, "pageToken": "p",
            "historyLength": 0, "statusTimestampAfter": "2026-03-12T10:15:00Z", "includeArtifacts": true
        }))))
    );
}

#[test]
fn decode_status_query_accepts_numbers_and_short_names() {
    for status in ["2", "working", "Working", "TASK_STATE_WORKING"] {
        assert_eq!(
            decode(Version::V1_0, "GET", "/tasks", Some(&format!("status={status}")), b""),
            Ok(Request::ListTasks(from(json!({"status": "TASK_STATE_WORKING"})))),
            "{status}"
        );
    }
}

#[test]
fn decode_bad_query_values_name_the_parameter() {
    let cases = [
        ("pageSize=ten", "query parameter pageSize: expected a whole number, got \"ten\""),
        (
            "historyLength=1.5",
            "query parameter historyLength: expected a whole number, got \"1.5\"",
        ),
        (
            "status=busy",
            "query parameter status: expected a task state such as TASK_STATE_WORKING, got \"busy\"",
        ),
        (
            "includeArtifacts=yes",
            "query parameter includeArtifacts: expected true or false, got \"yes\"",
        ),
        (
            "statusTimestampAfter=yesterday",
            "query parameter statusTimestampAfter: expected an RFC 3339 timestamp such as \
             2026-03-12T10:15:00Z, got \"yesterday\"",
        ),
    ];
    for (query, detail) in cases {
        assert_eq!(
            decode(Version::V1_0, "GET", "/tasks", Some(query), b""),
            Err(A2aError::InvalidParams(detail.to_owned())),
            "{query}"
        );
    }
}

#[test]
fn decode_bad_bodies_are_rejected() {
    let cases: [(&str, &str, &str, A2aError); 5] = [
        ("POST", "/message:send", "", A2aError::Parse("the request body is empty".into())),
        (
            "POST",
            "/message:send",
            "{oops",
            A2aError::Parse("key must be a string at line 1 column 2".into()),
        ),
        (
            "POST",
            "/tasks/t1:cancel",
            "[]",
            A2aError::InvalidParams("the request body must be a JSON object".into()),
        ),
        (
            "POST",
            "/message:send",
            r#"{"message":{"messageId":"m","role":"ROLE_USER"}}"#,
            A2aError::InvalidParams("message: missing field `parts`".into()),
        ),
        (
            "POST",
            "/tasks/t1/pushNotificationConfigs",
            r#"{"taskId":"t2","url":"https://hook"}"#,
            A2aError::InvalidParams(
                "taskId \"t2\" in the body does not match \"t1\" in the path".into(),
            ),
        ),
    ];
    for (verb, path, body, error) in cases {
        assert_eq!(
            decode(Version::V1_0, verb, path, None, body.as_bytes()),
            Err(error),
            "{path} {body}"
        );
    }
}

#[test]
fn version_is_the_header_else_the_shape_else_1_0() {
    let send_v03 = br#"{"request": {"messageId": "m", "content": [{"text": "hi"}]}}"#;
    let send_v03_json_name = br#"{"message": {"messageId": "m", "content": [{"text": "hi"}]}}"#;
    let send_v1 = br#"{"message": {"messageId": "m", "parts": [{"text": "hi"}]}}"#;
    let push_v03 = br#"{"name": "tasks/t/pushNotificationConfigs/c", "pushNotificationConfig": {"url": "https://h"}}"#;
    let push_python = br#"{"parent": "tasks/t", "config_id": "c", "config": {"push_notification_config": {"url": "https://h"}}}"#;
    let push_v1 = br#"{"url": "https://h", "token": "tok"}"#;
    let push_dotnet = br#"{"taskId": "t", "pushNotificationConfig": {"url": "https://h"}}"#;
    let cases: [(Option<Version>, &str, &[u8], Version); 13] = [
        (Some(Version::V0_3), "/tasks/t", b"", Version::V0_3),
        (Some(Version::V1_0), "/message:send", send_v03, Version::V1_0),
        (None, "/message:send", send_v03, Version::V0_3),
        (None, "/message:stream", send_v03_json_name, Version::V0_3),
        (None, "/message:send", send_v1, Version::V1_0),
        (None, "/tasks/t/pushNotificationConfigs", push_v03, Version::V0_3),
        (None, "/tasks/t/pushNotificationConfigs", push_python, Version::V0_3),
        (None, "/tasks/t/pushNotificationConfigs", push_v1, Version::V1_0),
        (None, "/tasks/t/pushNotificationConfigs", push_dotnet, Version::V1_0),
        (None, "/tasks/t:cancel", br#"{"name": "tasks/t"}"#, Version::V0_3),
        (None, "/tasks/t:cancel", b"", Version::V1_0),
        (None, "/card", b"", Version::V0_3),
        (None, "/tasks/t", b"", Version::V1_0),
    ];
    for (requested, path, body, expected) in cases {
        assert_eq!(version(requested, path, body), expected, "{requested:?} {path}");
    }
}

#[test]
fn decode_routes_of_the_other_version_are_not_found() {
    let cases = [
        (Version::V0_3, "GET", "/tasks"),
        (Version::V0_3, "GET", "/extendedAgentCard"),
        (Version::V1_0, "GET", "/card"),
    ];
    for (version, verb, path) in cases {
        assert_eq!(decode(version, verb, path, None, b""), not_found(&format!("{verb} {path}")));
    }
    assert_eq!(decode(Version::V0_3, "GET", "/card", None, b""), Ok(Request::GetExtendedAgentCard));
}

/// The status and the parsed body a reply goes out with.
fn encode_reply(reply: &Reply) -> (u16, Value) {
    let (status, bytes) = encode_reply_bytes(Version::V1_0, reply);
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[test]
fn encode_reply_is_200_and_deleted_is_an_empty_object() {
    let task = json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}});
    let cases = [
        (Reply::Deleted, json!({})),
        (Reply::Task(from(task.clone())), task.clone()),
        (Reply::Send(a2a::SendMessageResponse::Task(from(task.clone()))), json!({"task": task})),
    ];
    for (reply, body) in cases {
        assert_eq!(encode_reply(&reply), (200, body));
    }
}

#[test]
fn encode_error_and_stream_items_use_the_rest_shapes() {
    let error = A2aError::TaskNotFound { task_id: "t-404".into() };
    let item = a2a::StreamResponse::StatusUpdate(from(
        json!({"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}),
    ));
    assert_eq!(
        (encode_error(Version::V1_0, &error), encode_stream_item(Version::V1_0, &item)),
        (
            (404, error.rest_body()),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_COMPLETED"}}})
        )
    );
}
