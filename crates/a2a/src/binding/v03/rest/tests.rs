use super::*;
use crate::binding::params::normalize;

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

#[test]
fn send_request_to_params_reads_the_python_and_json_name_shapes() {
    let python = json!({
        "request": {"message_id": "m1", "role": "ROLE_USER", "context_id": "c1", "content": [
            {"text": "hi"},
            {"file": {"file_with_bytes": "AAE=", "mime_type": "application/pdf", "name": "a.pdf"}},
            {"file": {"file_with_uri": "https://f.example.com/a"}},
            {"data": {"data": {"k": "v"}}, "metadata": {"m": 1}}
        ]},
        "configuration": {"blocking": true, "history_length": 2,
                          "push_notification": {"url": "https://h", "authentication": {"schemes": ["Bearer"]}}},
        "metadata": {"volcanic.hops": 1}
    });
    let expected = json!({
        "message": {"messageId": "m1", "role": "ROLE_USER", "contextId": "c1", "parts": [
            {"text": "hi"},
            {"raw": "AAE=", "mediaType": "application/pdf", "filename": "a.pdf"},
            {"url": "https://f.example.com/a"},
            {"data": {"k": "v"}, "metadata": {"m": 1}}
        ]},
        "configuration": {"returnImmediately": false, "historyLength": 2,
                          "pushNotificationConfig": {"url": "https://h", "authentication": {"schemes": ["Bearer"]}}},
        "metadata": {"volcanic.hops": 1}
    });
    let mut body = python;
    normalize(&mut body);
    assert_eq!(super::super::send_params_to_v1(send_request_to_params(body)), Ok(expected));

    let json_name =
        json!({"message": {"messageId": "m2", "role": "ROLE_USER", "content": [{"text": "x"}]}});
    assert_eq!(
        super::super::send_params_to_v1(send_request_to_params(json_name)),
        Ok(json!({"message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "x"}]},
                  "configuration": {"returnImmediately": false}}))
    );
}

#[test]
fn send_request_blocking_is_the_proto_default_inside_a_configuration() {
    let cases = [
        (json!({"request": {}}), json!(false)),
        (json!({"request": {}, "configuration": {}}), json!(true)),
        (json!({"request": {}, "configuration": {"blocking": false}}), json!(true)),
        (json!({"request": {}, "configuration": {"blocking": true}}), json!(false)),
    ];
    for (body, return_immediately) in cases {
        let params = super::super::send_params_to_v1(send_request_to_params(body.clone())).unwrap();
        assert_eq!(params["configuration"]["returnImmediately"], return_immediately, "{body}");
    }
}

#[test]
fn push_config_to_v1_takes_every_0_3_shape() {
    let inner = json!({"url": "https://h", "token": "tok-12345678"});
    let cases = [
        (
            json!({"name": "tasks/t1/pushNotificationConfigs/c1", "pushNotificationConfig": inner}),
            json!({"url": "https://h", "token": "tok-12345678", "id": "c1"}),
        ),
        (
            json!({"parent": "tasks/t1", "configId": "c2", "config": {"pushNotificationConfig": inner}}),
            json!({"url": "https://h", "token": "tok-12345678", "id": "c2"}),
        ),
        (
            json!({"parent": "tasks/t1", "configId": "", "config": {
                "name": "tasks/t1/pushNotificationConfigs/c3",
                "pushNotificationConfig": {"id": "", "url": "https://h"}}}),
            json!({"url": "https://h", "id": "c3"}),
        ),
        (
            json!({"parent": "tasks/t1", "config": {"pushNotificationConfig": {"id": "c4", "url": "https://h"}}}),
            json!({"url": "https://h", "id": "c4"}),
        ),
        (
            json!({"parent": "tasks/t1", "config": {"pushNotificationConfig": {"url": "https://h"}}}),
            json!({"url": "https://h"}),
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(push_config_to_v1(body.clone()), expected, "{body}");
    }
}

fn sample_task(state: &str) -> a2a::Task {
    from(json!({
        "id": "t1", "contextId": "c1",
        "status": {"state": state, "timestamp": "2026-03-12T10:15:00.000Z",
                   "message": {"messageId": "s", "role": "ROLE_AGENT", "parts": [{"text": "why"}]}},
        "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [
            {"text": "hi", "mediaType": "text/plain"},
            {"raw": "AAE=", "filename": "a.bin", "mediaType": "application/octet-stream"},
            {"url": "https://u", "metadata": {"k": 1}},
            {"data": {"k": "v"}},
            {"data": [1, 2]}
        ]}],
        "artifacts": [{"artifactId": "response", "parts": [{"text": "answer"}]}]
    }))
}

#[test]
fn task_is_0_3_proto_json() {
    assert_eq!(
        task(&sample_task("TASK_STATE_CANCELED")),
        json!({
            "id": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_CANCELLED", "timestamp": "2026-03-12T10:15:00Z",
                       "message": {"messageId": "s", "role": "ROLE_AGENT", "content": [{"text": "why"}]}},
            "history": [{"messageId": "m", "role": "ROLE_USER", "content": [
                {"text": "hi"},
                {"file": {"fileWithBytes": "AAE=", "name": "a.bin", "mimeType": "application/octet-stream"}},
                {"file": {"fileWithUri": "https://u"}, "metadata": {"k": 1}},
                {"data": {"data": {"k": "v"}}},
                {"data": {"data": {"value": [1, 2]}}}
            ]}],
            "artifacts": [{"artifactId": "response", "parts": [{"text": "answer"}]}]
        })
    );
}

#[test]
fn stream_items_are_wrapped_and_status_updates_say_final() {
    let status = |state: &str| -> a2a::StreamResponse {
        from(
            json!({"statusUpdate": {"taskId": "t1", "contextId": "c1", "status": {"state": state}}}),
        )
    };
    let artifact: a2a::StreamResponse =
        from(json!({"artifactUpdate": {"taskId": "t1", "contextId": "c1",
        "artifact": {"artifactId": "a", "parts": [{"raw": "AAE="}]}, "append": true}}));
    let cases = [
        (
            status("TASK_STATE_WORKING"),
            json!({"statusUpdate": {"taskId": "t1", "contextId": "c1",
                   "status": {"state": "TASK_STATE_WORKING"}, "final": false}}),
        ),
        (
            status("TASK_STATE_CANCELED"),
            json!({"statusUpdate": {"taskId": "t1", "contextId": "c1",
                   "status": {"state": "TASK_STATE_CANCELLED"}, "final": true}}),
        ),
        (
            status("TASK_STATE_INPUT_REQUIRED"),
            json!({"statusUpdate": {"taskId": "t1", "contextId": "c1",
                   "status": {"state": "TASK_STATE_INPUT_REQUIRED"}, "final": true}}),
        ),
        (
            artifact,
            json!({"artifactUpdate": {"taskId": "t1", "contextId": "c1",
                   "artifact": {"artifactId": "a", "parts": [{"file": {"fileWithBytes": "AAE="}}]}, "append": true}}),
        ),
        (
            a2a::StreamResponse::Task(sample_task("TASK_STATE_WORKING")),
            json!({"task": task(&sample_task("TASK_STATE_WORKING"))}),
        ),
    ];
    for (item, expected) in cases {
        assert_eq!(stream_item(&item), expected);
    }
}

#[test]
fn push_config_is_a_named_resource() {
    let config = a2a::TaskPushNotificationConfig {
        url: "https://hook".into(),
        id: Some("c1".into()),
        task_id: "t1".into(),
        token: Some("tok".into()),
        authentication: Some(a2a::AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: Some("secret".into()),
        }),
        tenant: None,
    };
    let expected = json!({"name": "tasks/t1/pushNotificationConfigs/c1", "pushNotificationConfig": {
        "id": "c1", "url": "https://hook", "token": "tok",
        "authentication": {"schemes": ["Bearer"], "credentials": "secret"}}});
    assert_eq!(push_config(&config), expected);
    let list = a2a::ListTaskPushNotificationConfigsResponse {
        configs: vec![config],
        next_page_token: None,
    };
    assert_eq!(push_configs(&list), json!({"configs": [expected]}));
}

#[test]
fn card_is_0_3_proto_json() {
    let card: a2a::AgentCard = from(json!({
        "name": "n", "description": "d", "version": "1.0.0",
        "supportedInterfaces": [
            {"url": "https://b/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "https://b/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "https://b/a2a", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"}
        ],
        "capabilities": {"streaming": true, "extendedAgentCard": true},
        "securitySchemes": {"apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}}},
        "securityRequirements": [{"schemes": {"apiKey": {"list": []}}}],
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"],
                    "securityRequirements": [{"schemes": {"apiKey": {"list": []}}}]}]
    }));
    assert_eq!(
        super::card(&card),
        json!({
            "protocolVersion": "0.3.0", "name": "n", "description": "d", "version": "1.0.0",
            "url": "https://b/a2a", "preferredTransport": "JSONRPC",
            "additionalInterfaces": [
                {"url": "https://b/a2a", "transport": "JSONRPC"},
                {"url": "https://b/a2a", "transport": "HTTP+JSON"}
            ],
            "capabilities": {"streaming": true},
            "securitySchemes": {"apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}}},
            "security": [{"schemes": {"apiKey": {"list": []}}}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"],
                        "security": [{"schemes": {"apiKey": {"list": []}}}]}],
            "supportsAuthenticatedExtendedCard": true
        })
    );
}
