//! Unit tests of the JSON-RPC binding: decode tables, version rules and exact encodings.

use super::*;
use serde::de::DeserializeOwned;

use crate::push::PushFormat;
use crate::task::view::{PageTask, TaskPage};

fn body(method: &str, params: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string().into_bytes()
}

fn from<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn decoded(version: Version, request: Request) -> Result<Decoded, (Value, A2aError)> {
    Ok(Decoded { id: json!(7), version, request })
}

fn user_message() -> Value {
    json!({"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]})
}

fn send_request(configuration: Value) -> a2a::SendMessageRequest {
    from(json!({"message": user_message(), "configuration": configuration}))
}

#[test]
fn decode_every_method_yields_its_request() {
    let v03_message = json!({"kind": "message", "messageId": "m-1", "role": "user",
                             "parts": [{"kind": "text", "text": "hi"}]});
    let push = json!({"taskId": "t1", "id": "c1", "url": "https://hook"});
    let v03_push =
        json!({"taskId": "t1", "pushNotificationConfig": {"id": "c1", "url": "https://hook"}});
    let cases: Vec<(&str, Value, Version, Request)> = vec![
        (
            "SendMessage",
            json!({"message": user_message()}),
            Version::V1_0,
            Request::SendMessage(SendParams::v1(from(json!({"message": user_message()})))),
        ),
        (
            "SendStreamingMessage",
            json!({"message": user_message()}),
            Version::V1_0,
            Request::SendStreamingMessage(SendParams::v1(from(json!({"message": user_message()})))),
        ),
        (
            "GetTask",
            json!({"id": "t1", "historyLength": 0}),
            Version::V1_0,
            Request::GetTask(from(json!({"id": "t1", "historyLength": 0}))),
        ),
        (
            "ListTasks",
            json!({"contextId": "c", "status": "TASK_STATE_WORKING", "pageSize": 10,
                   "statusTimestampAfter": "2026-03-12T10:15:00.0000000+00:00"}),
            Version::V1_0,
            Request::ListTasks(from(json!({"contextId": "c", "status": "TASK_STATE_WORKING",
                "pageSize": 10, "statusTimestampAfter": "2026-03-12T10:15:00Z"}))),
        ),
        (
            "CancelTask",
            json!({"id": "t1", "metadata": {"k": null}}),
            Version::V1_0,
            Request::CancelTask(from(json!({"id": "t1", "metadata": {"k": null}}))),
        ),
        (
            "SubscribeToTask",
            json!({"id": "t1"}),
            Version::V1_0,
            Request::SubscribeToTask { request: from(json!({"id": "t1"})), after: None },
        ),
        (
            "CreateTaskPushNotificationConfig",
            push.clone(),
            Version::V1_0,
            Request::CreatePushConfig { config: from(push.clone()), format: PushFormat::V1_0 },
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": "t1", "id": "c1"}),
            Version::V1_0,
            Request::GetPushConfig(from(json!({"taskId": "t1", "id": "c1"}))),
        ),
        (
            "ListTaskPushNotificationConfigs",
            json!({"taskId": "t1", "pageSize": 5}),
            Version::V1_0,
            Request::ListPushConfigs(from(json!({"taskId": "t1", "pageSize": 5}))),
        ),
        (
            "ListTaskPushNotificationConfig",
            json!({"taskId": "t1"}),
            Version::V1_0,
            Request::ListPushConfigs(from(json!({"taskId": "t1"}))),
        ),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": "t1", "id": "c1"}),
            Version::V1_0,
            Request::DeletePushConfig(from(json!({"taskId": "t1", "id": "c1"}))),
        ),
        ("GetExtendedAgentCard", json!({}), Version::V1_0, Request::GetExtendedAgentCard),
        (
            "message/send",
            json!({"message": v03_message.clone()}),
            Version::V0_3,
            Request::SendMessage(SendParams {
                request: send_request(json!({"returnImmediately": false})),
                push_format: PushFormat::V0_3,
            }),
        ),
        (
            "message/stream",
            json!({"message": v03_message}),
            Version::V0_3,
            Request::SendStreamingMessage(SendParams {
                request: send_request(json!({"returnImmediately": false})),
                push_format: PushFormat::V0_3,
            }),
        ),
        (
            "tasks/get",
            json!({"id": "t1", "historyLength": 3, "metadata": {}}),
            Version::V0_3,
            Request::GetTask(from(json!({"id": "t1", "historyLength": 3}))),
        ),
        (
            "tasks/cancel",
            json!({"id": "t1"}),
            Version::V0_3,
            Request::CancelTask(from(json!({"id": "t1"}))),
        ),
        (
            "tasks/resubscribe",
            json!({"id": "t1"}),
            Version::V0_3,
            Request::SubscribeToTask { request: from(json!({"id": "t1"})), after: None },
        ),
        (
            "tasks/pushNotificationConfig/set",
            v03_push,
            Version::V0_3,
            Request::CreatePushConfig { config: from(push), format: PushFormat::V0_3 },
        ),
        (
            "tasks/pushNotificationConfig/get",
            json!({"id": "t1", "pushNotificationConfigId": "c1"}),
            Version::V0_3,
            Request::GetPushConfig(from(json!({"taskId": "t1", "id": "c1"}))),
        ),
        (
            "tasks/pushNotificationConfig/get",
            json!({"id": "t1"}),
            Version::V0_3,
            Request::GetPushConfig(from(json!({"taskId": "t1", "id": ""}))),
        ),
        (
            "tasks/pushNotificationConfig/list",
            json!({"id": "t1"}),
            Version::V0_3,
            Request::ListPushConfigs(from(json!({"taskId": "t1"}))),
        ),
        (
            "tasks/pushNotificationConfig/delete",
            json!({"id": "t1", "pushNotificationConfigId": "c1"}),
            Version::V0_3,
            Request::DeletePushConfig(from(json!({"taskId": "t1", "id": "c1"}))),
        ),
        (
            "agent/getAuthenticatedExtendedCard",
            json!({}),
            Version::V0_3,
            Request::GetExtendedAgentCard,
        ),
    ];
    for (method, params, version, request) in cases {
        assert_eq!(decode(&body(method, params), None), decoded(version, request), "{method}");
    }
}

#[test]
fn decode_version_rules_follow_section_8_2() {
    let mismatch = |requested: &str, method: &str| {
        Err((
            json!(7),
            A2aError::VersionNotSupported {
                requested: format!("{requested} with method {method}"),
            },
        ))
    };
    let cases = [
        ("GetTask", Some(Version::V1_0), Ok(Version::V1_0)),
        ("GetTask", None, Ok(Version::V1_0)),
        ("GetTask", Some(Version::V0_3), mismatch("0.3", "GetTask")),
        ("tasks/get", None, Ok(Version::V0_3)),
        ("tasks/get", Some(Version::V0_3), Ok(Version::V0_3)),
        ("tasks/get", Some(Version::V1_0), mismatch("1.0", "tasks/get")),
    ];
    for (method, requested, expected) in cases {
        let version = decode(&body(method, json!({"id": "t1"})), requested).map(|d| d.version);
        assert_eq!(version, expected, "{method} {requested:?}");
    }
}

#[test]
fn decode_envelope_errors_table() {
    let invalid = |detail: &str| A2aError::InvalidRequest(detail.to_owned());
    let cases: [(&[u8], Value, A2aError); 10] = [
        (
            b"{not json",
            Value::Null,
            A2aError::Parse("key must be a string at line 1 column 2".into()),
        ),
        (
            br#"[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]"#,
            Value::Null,
            invalid("batch requests are not supported"),
        ),
        (br#""GetTask""#, Value::Null, invalid("the request must be a JSON object")),
        (
            br#"{"jsonrpc":"1.0","id":"a","method":"GetTask"}"#,
            json!("a"),
            invalid("`jsonrpc` must be \"2.0\""),
        ),
        (br#"{"id":"a","method":"GetTask"}"#, json!("a"), invalid("`jsonrpc` must be \"2.0\"")),
        (
            br#"{"jsonrpc":"2.0","id":{"x":1},"method":"GetTask"}"#,
            Value::Null,
            invalid("`id` must be a string, a whole number or null"),
        ),
        (
            br#"{"jsonrpc":"2.0","id":1.5,"method":"GetTask"}"#,
            Value::Null,
            invalid("`id` must be a string, a whole number or null"),
        ),
        (br#"{"jsonrpc":"2.0","id":3}"#, json!(3), invalid("`method` must be a string")),
        (
            br#"{"jsonrpc":"2.0","id":3,"method":"tasks/list"}"#,
            json!(3),
            A2aError::MethodNotFound("tasks/list".into()),
        ),
        (
            br#"{"jsonrpc":"2.0","id":3,"method":"GetTask","params":["t1"]}"#,
            json!(3),
            A2aError::InvalidParams("`params` must be an object".into()),
        ),
    ];
    for (raw, id, error) in cases {
        assert_eq!(decode(raw, None), Err((id, error)), "{}", String::from_utf8_lossy(raw));
    }
}

#[test]
fn decode_missing_params_is_an_empty_object() {
    let cases = [
        (
            br#"{"jsonrpc":"2.0","id":null,"method":"GetExtendedAgentCard"}"#.as_slice(),
            Ok(Decoded {
                id: Value::Null,
                version: Version::V1_0,
                request: Request::GetExtendedAgentCard,
            }),
        ),
        (
            br#"{"jsonrpc":"2.0","method":"GetTask","params":null}"#.as_slice(),
            Err((Value::Null, A2aError::InvalidParams("missing field `id`".into()))),
        ),
    ];
    for (raw, expected) in cases {
        assert_eq!(decode(raw, None), expected);
    }
}

#[test]
fn decode_enum_integers_and_nulls_are_accepted() {
    let params = json!({
        "message": {"messageId": "m-1", "role": 1, "parts": [{"text": "hi"}], "taskId": null},
        "configuration": null
    });
    let list = json!({"status": 6, "pageToken": null});
    assert_eq!(
        (decode(&body("SendMessage", params), None), decode(&body("ListTasks", list), None)),
        (
            decoded(
                Version::V1_0,
                Request::SendMessage(SendParams::v1(from(json!({"message": user_message()})))),
            ),
            decoded(
                Version::V1_0,
                Request::ListTasks(from(json!({"status": "TASK_STATE_INPUT_REQUIRED"})))
            ),
        )
    );
}

#[test]
fn decode_dotnet_push_shapes_are_flattened() {
    let flat = json!({"taskId": "t1", "id": "c1", "url": "https://hook", "token": "tok"});
    let cases = [
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t1", "configId": "c1", "config": {"url": "https://hook", "token": "tok"}}),
            Request::CreatePushConfig { config: from(flat.clone()), format: PushFormat::V1_0 },
        ),
        (
            "CreateTaskPushNotificationConfig",
            json!({"id": "c1", "taskId": "t1", "pushNotificationConfig": {"url": "https://hook", "token": "tok"}}),
            Request::CreatePushConfig { config: from(flat), format: PushFormat::V1_0 },
        ),
        (
            "SendMessage",
            json!({"message": user_message(),
                   "configuration": {"pushNotificationConfig": {"id": "c1", "url": "https://hook"}}}),
            Request::SendMessage(SendParams::v1(send_request(
                json!({"taskPushNotificationConfig": {"id": "c1", "url": "https://hook"}}),
            ))),
        ),
    ];
    for (method, params, request) in cases {
        assert_eq!(
            decode(&body(method, params), None),
            decoded(Version::V1_0, request),
            "{method}"
        );
    }
}

#[test]
fn decode_v03_message_send_converts_parts_blocking_and_history() {
    let params = json!({
        "message": {"messageId": "m-1", "role": "user", "parts": [
            {"text": "hi"},
            {"file": {"name": "a.pdf", "mimeType": "application/pdf", "uri": "https://f/a.pdf"}},
            {"kind": "file", "file": {"bytes": "AAE="}},
            {"data": {"k": "v"}}
        ]},
        "configuration": {"blocking": false, "historyLength": 0,
                          "pushNotificationConfig": {"url": "https://hook",
                              "authentication": {"schemes": ["Bearer"], "credentials": "s"}}}
    });
    let expected: a2a::SendMessageRequest = from(json!({
        "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [
            {"text": "hi"},
            {"url": "https://f/a.pdf", "filename": "a.pdf", "mediaType": "application/pdf"},
            {"raw": "AAE="},
            {"data": {"k": "v"}}
        ]},
        "configuration": {"returnImmediately": true, "taskPushNotificationConfig": {
            "url": "https://hook", "authentication": {"scheme": "Bearer", "credentials": "s"}}}
    }));
    assert_eq!(
        decode(&body("message/send", params), None),
        decoded(
            Version::V0_3,
            Request::SendMessage(SendParams { request: expected, push_format: PushFormat::V0_3 })
        )
    );
}

#[test]
fn decode_v03_history_length_zero_means_unset() {
    let cases = [
        (json!({"id": "t1", "historyLength": 0}), json!({"id": "t1"})),
        (json!({"id": "t1", "historyLength": 2}), json!({"id": "t1", "historyLength": 2})),
    ];
    for (params, expected) in cases {
        assert_eq!(
            decode(&body("tasks/get", params), None),
            decoded(Version::V0_3, Request::GetTask(from(expected)))
        );
    }
}

#[test]
fn decode_bad_params_name_the_field() {
    let params = json!({"message": {"messageId": "m", "role": "ROLE_BOT", "parts": []}});
    assert_eq!(
        decode(&body("SendMessage", params), None),
        Err((
            json!(7),
            A2aError::InvalidParams(
                "message: unknown variant `ROLE_BOT`, expected one of `ROLE_USER`, \
                 `ROLE_AGENT`, `ROLE_UNSPECIFIED`"
                    .into()
            )
        ))
    );
}

#[test]
fn request_id_table() {
    let cases: [(&[u8], Value); 5] = [
        (br#"{"id":"a","method":"x"}"#, json!("a")),
        (br#"{"id":12}"#, json!(12)),
        (br#"{"id":{"x":1}}"#, Value::Null),
        (br#"[{"id":1}]"#, Value::Null),
        (b"{oops", Value::Null),
    ];
    for (raw, id) in cases {
        assert_eq!(request_id(raw), id);
    }
}

fn sample_task() -> Value {
    json!({
        "id": "t-1",
        "contextId": "c-1",
        "status": {
            "state": "TASK_STATE_CANCELED",
            "timestamp": "2026-03-12T10:15:00.120Z",
            "message": {"messageId": "m-2", "role": "ROLE_AGENT", "taskId": "t-1",
                        "contextId": "c-1", "parts": [{"text": "Stopped"}]}
        },
        "artifacts": [{"artifactId": "a-1", "name": "response", "parts": [
            {"raw": "AAE=", "filename": "a.bin", "mediaType": "application/octet-stream"},
            {"url": "https://f/x.pdf", "mediaType": "application/pdf"},
            {"data": {"k": "v"}},
            {"data": 42}
        ]}],
        "history": [{"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Book a room"}]}],
        "metadata": {"k": "v"}
    })
}

/// The response object a reply goes out as, parsed back from its bytes.
fn encode_reply(id: &Value, version: Version, reply: &Reply) -> Value {
    serde_json::from_slice(&encode_reply_bytes(id, version, reply)).unwrap()
}

#[test]
fn encode_reply_task_v1_is_exact_and_has_no_kind() {
    let task: a2a::Task = from(sample_task());
    assert_eq!(
        encode_reply(&json!(7), Version::V1_0, &Reply::Task(task)),
        json!({"jsonrpc": "2.0", "id": 7, "result": sample_task()})
    );
}

#[test]
fn encode_reply_task_v03_has_kinds_states_and_file_parts() {
    let task: a2a::Task = from(sample_task());
    assert_eq!(
        encode_reply(&json!("r"), Version::V0_3, &Reply::Task(task)),
        json!({"jsonrpc": "2.0", "id": "r", "result": {
            "kind": "task",
            "id": "t-1",
            "contextId": "c-1",
            "status": {
                "state": "canceled",
                "timestamp": "2026-03-12T10:15:00.120Z",
                "message": {"kind": "message", "messageId": "m-2", "role": "agent", "taskId": "t-1",
                            "contextId": "c-1", "parts": [{"kind": "text", "text": "Stopped"}]}
            },
            "artifacts": [{"artifactId": "a-1", "name": "response", "parts": [
                {"kind": "file", "file": {"bytes": "AAE=", "name": "a.bin", "mimeType": "application/octet-stream"}},
                {"kind": "file", "file": {"uri": "https://f/x.pdf", "mimeType": "application/pdf"}},
                {"kind": "data", "data": {"k": "v"}},
                {"kind": "data", "data": {"value": 42}}
            ]}],
            "history": [{"kind": "message", "messageId": "m-1", "role": "user",
                         "parts": [{"kind": "text", "text": "Book a room"}]}],
            "metadata": {"k": "v"}
        }})
    );
}

#[test]
fn encode_reply_table_per_version() {
    let task = json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}});
    let v03_task =
        json!({"kind": "task", "id": "t", "contextId": "c", "status": {"state": "working"}});
    let config = json!({"id": "c1", "taskId": "t", "url": "https://hook"});
    let v03_config =
        json!({"taskId": "t", "pushNotificationConfig": {"id": "c1", "url": "https://hook"}});
    let message = json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]});
    let list =
        json!({"tasks": [task.clone()], "nextPageToken": "", "pageSize": 50, "totalSize": 1});
    let cases = [
        (
            Reply::Send(a2a::SendMessageResponse::Task(from(task.clone()))),
            json!({"task": task}),
            v03_task.clone(),
        ),
        (
            Reply::Send(a2a::SendMessageResponse::Message(from(message.clone()))),
            json!({"message": message}),
            json!({"kind": "message", "messageId": "m", "role": "agent", "parts": [{"kind": "text", "text": "hi"}]}),
        ),
        (
            Reply::TaskPage(TaskPage {
                tasks: vec![PageTask::Task(Box::new(from(task.clone())))],
                next_page_token: String::new(),
                page_size: 50,
                total_size: 1,
            }),
            list,
            json!({"tasks": [v03_task], "nextPageToken": "", "pageSize": 50, "totalSize": 1}),
        ),
        (Reply::PushConfig(from(config.clone())), config.clone(), v03_config.clone()),
        (
            Reply::PushConfigs(from(json!({"configs": [config.clone()]}))),
            json!({"configs": [config]}),
            json!([v03_config]),
        ),
        (Reply::PushConfigs(from(json!({}))), json!({}), json!([])),
        (Reply::Deleted, Value::Null, Value::Null),
    ];
    for (reply, v1, v03) in cases {
        // REST's body is the 1.0 result, but for a deletion's `{}`.
        let (status, bytes) = crate::binding::rest::encode_reply_bytes(Version::V1_0, &reply);
        let rest: Value = serde_json::from_slice(&bytes).unwrap();
        let rest_v1 = if matches!(reply, Reply::Deleted) { json!({}) } else { v1.clone() };
        assert_eq!((status, rest), (200, rest_v1), "{reply:?}");
        assert_eq!(
            (
                encode_reply(&json!(1), Version::V1_0, &reply),
                encode_reply(&json!(1), Version::V0_3, &reply)
            ),
            (
                json!({"jsonrpc": "2.0", "id": 1, "result": v1}),
                json!({"jsonrpc": "2.0", "id": 1, "result": v03})
            ),
            "{reply:?}"
        );
    }
}

fn status_update(state: &str) -> a2a::StreamResponse {
    a2a::StreamResponse::StatusUpdate(from(
        json!({"taskId": "t", "contextId": "c", "status": {"state": state}}),
    ))
}

#[test]
fn encode_stream_item_v1_is_the_stream_response() {
    assert_eq!(
        encode_stream_item(&json!(7), Version::V1_0, &status_update("TASK_STATE_COMPLETED")),
        json!({"jsonrpc": "2.0", "id": 7, "result": {"statusUpdate": {
            "taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}}})
    );
}

#[test]
fn encode_stream_item_v03_final_is_true_on_terminal_and_interrupted_states() {
    let cases = [
        ("TASK_STATE_COMPLETED", "completed", true),
        ("TASK_STATE_INPUT_REQUIRED", "input-required", true),
        ("TASK_STATE_AUTH_REQUIRED", "auth-required", true),
        ("TASK_STATE_REJECTED", "rejected", true),
        ("TASK_STATE_WORKING", "working", false),
        ("TASK_STATE_SUBMITTED", "submitted", false),
    ];
    for (state, v03_state, is_final) in cases {
        assert_eq!(
            encode_stream_item(&json!(7), Version::V0_3, &status_update(state)),
            json!({"jsonrpc": "2.0", "id": 7, "result": {"kind": "status-update", "taskId": "t",
                "contextId": "c", "status": {"state": v03_state}, "final": is_final}}),
            "{state}"
        );
    }
}

#[test]
fn encode_stream_item_v03_artifact_update_has_kind_and_v03_parts() {
    let item = a2a::StreamResponse::ArtifactUpdate(from(json!({"taskId": "t", "contextId": "c",
        "append": true, "lastChunk": false,
        "artifact": {"artifactId": "a", "parts": [{"text": "Hel"}]}})));
    assert_eq!(
        (
            encode_stream_item(&json!(7), Version::V0_3, &item),
            encode_stream_item(&json!(7), Version::V1_0, &item)
        ),
        (
            json!({"jsonrpc": "2.0", "id": 7, "result": {"kind": "artifact-update", "taskId": "t",
                "contextId": "c", "append": true, "lastChunk": false,
                "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "Hel"}]}}}),
            json!({"jsonrpc": "2.0", "id": 7, "result": {"artifactUpdate": {"taskId": "t",
                "contextId": "c", "append": true, "lastChunk": false,
                "artifact": {"artifactId": "a", "parts": [{"text": "Hel"}]}}}})
        )
    );
}

#[test]
fn encode_error_carries_the_id_and_the_error_object() {
    let error = A2aError::TaskNotFound { task_id: "t-404".into() };
    assert_eq!(
        encode_error(&json!("x"), &error),
        json!({"jsonrpc": "2.0", "id": "x", "error": error.jsonrpc_error()})
    );
}

#[test]
fn decode_fast_get_task_agrees_with_the_general_decoder() {
    let plain = br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"}}"#;
    let bodies: Vec<&[u8]> = vec![
        plain,
        br#" {"method":"GetTask","params":{"historyLength":2,"id":"t-1"},"id":"x","jsonrpc":"2.0"} "#,
        br#"{"jsonrpc":"2.0","method":"GetTask","params":{"id":"t-1"}}"#,
        br#"{"jsonrpc":"2.0","id":null,"method":"GetTask","params":{"id":""}}"#,
        br#"{"jsonrpc":"2.0","id":-3,"method":"GetTask","params":{"id":"t","historyLength":-1}}"#,
        // What the fast path leaves to the general decoder.
        br#"{"jsonrpc":"2.0","id":1.5,"method":"GetTask","params":{"id":"t-1"}}"#,
        br#"{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask","params":{"id":"t-1"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"GetTask","params":{"id":"t-1"}}"#,
        br#"{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"t-1"}}"#,
        br#"{"jsonrpc":2,"id":1,"method":"GetTask","params":{"id":"t-1"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t-1"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t\u002d1"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"Get\u0054ask","params":{"id":"t-1"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1","id":"t-2"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1","historyLength":"3"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1","historyLength":null}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1","historyLength":2.5}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1","historyLength":9999999999}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1","history_length":1}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1","tenant":"x"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"},"params":{"id":"t-2"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"tenant":"x"},"params":{"id":"t-2"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":null}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":7}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":null}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":["t-1"]}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask"}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"},"extra":true}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"}} x"#,
        br#"["2.0",1,"GetTask",{"id":"t-1"}]"#,
        br#"[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"}}]"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1""#,
        b"",
    ];
    let mut fast_answers = 0;
    for body in bodies {
        for requested in [None, Some(Version::V1_0), Some(Version::V0_3)] {
            let general = decode_general(body, requested);
            let shown = String::from_utf8_lossy(body);
            match fast::decode_get_task(body, requested) {
                Some(fast) => {
                    fast_answers += 1;
                    assert_eq!(Ok(fast), general, "{shown} with {requested:?}");
                }
                None => assert_eq!(decode(body, requested), general, "{shown} with {requested:?}"),
            }
        }
    }
    // The five plain bodies, each without a header and with 1.0.
    assert_eq!(fast_answers, 10);
    let expected = a2a::GetTaskRequest { id: "t-1".into(), history_length: None, tenant: None };
    assert_eq!(
        fast::decode_get_task(plain, None),
        Some(Decoded { id: json!(1), version: Version::V1_0, request: Request::GetTask(expected) })
    );
}
