//! Push-config CRUD on every binding and version: create → get → list → delete, tenancy, URL
//! checks, and configs stored in the task file (also while the task's run is in progress).

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

const HOOK: &str = "https://hook.example.com/a2a";

fn task_file(server: &TestServer, task_id: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(server.task_path(task_id)).unwrap()).unwrap()
}

async fn task_id(server: &TestServer) -> String {
    server.send("hello").await["task"]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn push_config_crud_over_jsonrpc() {
    let server = TestServer::start().await;
    let task = task_id(&server).await;
    let created = server
        .rpc(
            KEY,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "url": HOOK, "token": "tok-0123456789",
                   "authentication": {"scheme": "Bearer", "credentials": "secret-0123456789"}}),
        )
        .await["result"]
        .clone();
    let id = created["id"].as_str().unwrap().to_string();
    assert!(!id.is_empty());
    let config = json!({"taskId": task, "id": id, "url": HOOK, "token": "tok-0123456789",
                        "authentication": {"scheme": "Bearer", "credentials": "secret-0123456789"}});
    assert_eq!(created, config);

    let got =
        server.rpc(KEY, "GetTaskPushNotificationConfig", json!({"taskId": task, "id": id})).await;
    assert_eq!(got["result"], config);
    let list = server.rpc(KEY, "ListTaskPushNotificationConfigs", json!({"taskId": task})).await;
    assert_eq!(list["result"], json!({"configs": [config]}));

    let stored = task_file(&server, &task)["pushConfigs"].clone();
    assert_eq!(
        stored,
        json!([{"taskId": task, "id": id, "url": HOOK, "token": "tok-0123456789",
                "authentication": {"scheme": "Bearer", "credentials": "secret-0123456789"}, "format": "1.0"}])
    );

    for _ in 0..2 {
        let deleted = server
            .rpc(KEY, "DeleteTaskPushNotificationConfig", json!({"taskId": task, "id": id}))
            .await;
        assert_eq!(deleted["result"], Value::Null, "{deleted}");
    }
    let gone =
        server.rpc(KEY, "GetTaskPushNotificationConfig", json!({"taskId": task, "id": id})).await;
    assert_eq!(gone["error"]["code"], -32001);
    let list = server.rpc(KEY, "ListTaskPushNotificationConfigs", json!({"taskId": task})).await;
    assert_eq!(list["result"], json!({}));
    assert!(task_file(&server, &task).get("pushConfigs").is_none());
}

#[tokio::test]
async fn push_config_create_with_same_id_replaces() {
    let server = TestServer::start().await;
    let task = task_id(&server).await;
    for url in [HOOK, "https://other.example.com/hook"] {
        let created = server
            .rpc(
                KEY,
                "CreateTaskPushNotificationConfig",
                json!({"taskId": task, "configId": "c1", "config": {"url": url}}),
            )
            .await;
        assert_eq!(created["result"], json!({"taskId": task, "id": "c1", "url": url}));
    }
    let list = server.rpc(KEY, "ListTaskPushNotificationConfig", json!({"taskId": task})).await;
    assert_eq!(
        list["result"]["configs"],
        json!([{"taskId": task, "id": "c1", "url": "https://other.example.com/hook"}])
    );
}

#[tokio::test]
async fn push_config_crud_over_rest() {
    let server = TestServer::start().await;
    let task = task_id(&server).await;
    let path = format!("/tasks/{task}/pushNotificationConfigs");
    let (status, created) = server
        .rest(KEY, Method::POST, &path, Some(json!({"url": HOOK, "token": "tok-0123456789"})))
        .await;
    assert_eq!(status, 200, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let config = json!({"taskId": task, "id": id, "url": HOOK, "token": "tok-0123456789"});
    assert_eq!(created, config);

    let (status, got) = server.rest(KEY, Method::GET, &format!("{path}/{id}"), None).await;
    assert_eq!((status, got), (200, config.clone()));
    let (status, list) = server.rest(KEY, Method::GET, &path, None).await;
    assert_eq!((status, list), (200, json!({"configs": [config]})));
    for _ in 0..2 {
        let (status, deleted) =
            server.rest(KEY, Method::DELETE, &format!("{path}/{id}"), None).await;
        assert_eq!((status, deleted), (200, json!({})));
    }
    let (status, gone) = server.rest(KEY, Method::GET, &format!("{path}/{id}"), None).await;
    assert_eq!(status, 404);
    assert_eq!(gone["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
}

#[tokio::test]
async fn push_config_crud_over_v03() {
    let server = TestServer::start().await;
    let task = task_id(&server).await;
    let v03 = |method: &'static str, params: Value| {
        let server = &server;
        async move { server.rpc_versioned(KEY, Some("0.3"), method, params).await }
    };
    let created = v03(
        "tasks/pushNotificationConfig/set",
        json!({"taskId": task, "pushNotificationConfig": {"url": HOOK, "token": "tok-0123456789",
               "authentication": {"schemes": ["Bearer"], "credentials": "secret-0123456789"}}}),
    )
    .await["result"]
        .clone();
    let id = created["pushNotificationConfig"]["id"].as_str().unwrap().to_string();
    let config = json!({"taskId": task, "pushNotificationConfig": {"id": id, "url": HOOK,
        "token": "tok-0123456789", "authentication": {"schemes": ["Bearer"], "credentials": "secret-0123456789"}}});
    assert_eq!(created, config);
    assert_eq!(task_file(&server, &task)["pushConfigs"][0]["format"], "0.3");

    let got = v03(
        "tasks/pushNotificationConfig/get",
        json!({"id": task, "pushNotificationConfigId": id}),
    )
    .await;
    assert_eq!(got["result"], config);
    let first = v03("tasks/pushNotificationConfig/get", json!({"id": task})).await;
    assert_eq!(first["result"], config, "no config id: the first config");
    let list = v03("tasks/pushNotificationConfig/list", json!({"id": task})).await;
    assert_eq!(list["result"], json!([config]));
    for _ in 0..2 {
        let deleted = v03(
            "tasks/pushNotificationConfig/delete",
            json!({"id": task, "pushNotificationConfigId": id}),
        )
        .await;
        assert_eq!(deleted["result"], Value::Null, "{deleted}");
    }
    let gone = v03("tasks/pushNotificationConfig/get", json!({"id": task})).await;
    assert_eq!(gone["error"]["code"], -32001);
}

#[tokio::test]
async fn push_config_on_foreign_or_unknown_task_not_found() {
    let server = TestServer::start().await;
    let task = task_id(&server).await;
    let created = server
        .rpc(
            KEY,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "id": "c1", "url": HOOK}),
        )
        .await;
    assert_eq!(created["result"]["id"], "c1");
    for task in [task.as_str(), "3f36680c-7f37-4a5f-945e-d78981fafd36"] {
        let calls = [
            ("CreateTaskPushNotificationConfig", json!({"taskId": task, "url": HOOK})),
            ("GetTaskPushNotificationConfig", json!({"taskId": task, "id": "c1"})),
            ("ListTaskPushNotificationConfigs", json!({"taskId": task})),
            ("DeleteTaskPushNotificationConfig", json!({"taskId": task, "id": "c1"})),
        ];
        for (method, params) in calls {
            let body = server.rpc(OTHER_KEY, method, params).await;
            assert_eq!(body["error"]["code"], -32001, "{method} {body}");
        }
    }
    let (status, _) = server
        .rest(OTHER_KEY, Method::GET, &format!("/tasks/{task}/pushNotificationConfigs"), None)
        .await;
    assert_eq!(status, 404);
    // The owner's config is untouched.
    let list = server.rpc(KEY, "ListTaskPushNotificationConfigs", json!({"taskId": task})).await;
    assert_eq!(list["result"]["configs"][0]["id"], "c1");
}

#[tokio::test]
async fn push_config_non_https_url_invalid_params() {
    let server = TestServer::start().await;
    let task = task_id(&server).await;
    let body = server
        .rpc(
            KEY,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "url": "http://127.0.0.1:9/hook"}),
        )
        .await;
    // The refusal names the setting that would allow a local webhook (issue 36).
    assert_eq!(
        body["error"],
        json!({"code": -32602,
               "message": "Invalid parameters: URL scheme http is not allowed, use https; \
                           http and private addresses need the server option \
                           A2A__AllowPrivatePushUrls=true",
               "data": body["error"]["data"]})
    );
    let body = server
        .rpc(
            KEY,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "url": "https://127.0.0.1:9/hook"}),
        )
        .await;
    assert_eq!(
        body["error"]["message"],
        "Invalid parameters: 127.0.0.1 is a loopback, private or reserved address; \
         http and private addresses need the server option A2A__AllowPrivatePushUrls=true"
    );
    let (status, rest) = server
        .rest(
            KEY,
            Method::POST,
            &format!("/tasks/{task}/pushNotificationConfigs"),
            Some(json!({"url": "ftp://hook.example.com/"})),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(rest["error"]["details"][0]["reason"], "INVALID_PARAMS");
    // The setting would not allow ftp, so the refusal does not point at it.
    assert_eq!(
        rest["error"]["message"], "Invalid parameters: URL scheme ftp is not allowed, use https",
        "{rest}"
    );
    assert!(task_file(&server, &task).get("pushConfigs").is_none());
}

#[tokio::test]
async fn push_config_http_url_allowed_with_allow_private() {
    let mut setup = Setup::default();
    setup.options.allow_private_push_urls = true;
    let server = TestServer::with(setup).await;
    let task = task_id(&server).await;
    let body = server
        .rpc(
            KEY,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "id": "c1", "url": "http://127.0.0.1:9/hook"}),
        )
        .await;
    assert_eq!(
        body["result"],
        json!({"taskId": task, "id": "c1", "url": "http://127.0.0.1:9/hook"})
    );
}

#[tokio::test]
async fn push_config_created_during_run_survives_its_end() {
    let server = TestServer::start().await;
    let params = send_params(&directive(json!([{"sleep_ms": 500}, {"text": "done"}])), None);
    let started = server
        .rpc(
            KEY,
            "SendMessage",
            json!({"message": params["message"], "configuration": {"returnImmediately": true}}),
        )
        .await;
    let task = started["result"]["task"]["id"].as_str().unwrap().to_string();
    let created = server
        .rpc(
            KEY,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "id": "c1", "url": HOOK}),
        )
        .await;
    assert_eq!(created["result"]["id"], "c1", "{created}");
    tokio::time::timeout(DEADLINE, async {
        while server.rpc(KEY, "GetTask", json!({"id": task})).await["result"]["status"]["state"]
            != "TASK_STATE_COMPLETED"
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the run did not complete in time");
    let file = task_file(&server, &task);
    assert_eq!(file["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        file["pushConfigs"],
        json!([{"taskId": task, "id": "c1", "url": HOOK, "format": "1.0"}])
    );
}

#[tokio::test]
async fn push_delivered_with_token() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let webhook = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&webhook)
        .await;
    let options = volcanic_a2a::A2aOptions { allow_private_push_urls: true, ..Default::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    let mut params = send_params("hello", None);
    params["configuration"] = json!({"taskPushNotificationConfig": {
        "url": format!("{}/hook", webhook.uri()), "token": "tok-1234567",
        "authentication": {"scheme": "Bearer", "credentials": "hook-secret"}}});
    let task = server.rpc(KEY, "SendMessage", params).await["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    // Deliveries are asynchronous: wait (bounded) for the completed one.
    let requests =
        pushes_until(&webhook, |b| b["task"]["status"]["state"] == "TASK_STATE_COMPLETED").await;
    let states: Vec<String> = requests
        .iter()
        .map(|r| {
            serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["task"]["status"]["state"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        states,
        vec!["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"],
        "in order, one per state change"
    );
    for request in &requests {
        assert_eq!(request.headers["x-a2a-notification-token"], "tok-1234567");
        assert_eq!(request.headers["authorization"], "Bearer hook-secret");
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["task"]["id"], task["id"]);
    }
    // The config is stored with the task.
    let configs =
        server.rpc(KEY, "ListTaskPushNotificationConfigs", json!({"taskId": task["id"]})).await;
    assert_eq!(configs["result"]["configs"][0]["token"], "tok-1234567");
}

#[tokio::test]
async fn push_private_url_rejected_unless_allowed() {
    let server = TestServer::start().await;
    let task = server.send("hi").await["task"].clone();
    for url in [
        "https://127.0.0.1/hook",
        "https://10.1.2.3/hook",
        "https://[::ffff:192.168.1.1]/hook",
        "https://0x7f.1/hook",
        "http://hook.example.com/x",
    ] {
        let body = server
            .rpc(KEY, "CreateTaskPushNotificationConfig", json!({"taskId": task["id"], "url": url}))
            .await;
        assert_eq!(body["error"]["code"], -32602, "{url}: {body}");
    }
    let mut params = send_params("hi", None);
    params["configuration"] =
        json!({"taskPushNotificationConfig": {"url": "https://169.254.169.254/latest"}});
    let body = server.rpc(KEY, "SendMessage", params).await;
    assert_eq!(body["error"]["code"], -32602, "inline configs are checked before a task exists");
    let options = volcanic_a2a::A2aOptions { allow_private_push_urls: true, ..Default::default() };
    let relaxed = TestServer::with(Setup { options, ..Setup::default() }).await;
    let task = relaxed.send("hi").await["task"].clone();
    let body = relaxed
        .rpc(
            KEY,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task["id"], "url": "http://127.0.0.1:9/hook"}),
        )
        .await;
    assert_eq!(body["result"]["url"], "http://127.0.0.1:9/hook", "{body}");
}

#[tokio::test]
async fn push_sent_when_lazy_recovery_fails_a_task() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let webhook = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&webhook).await;
    let options =
        || volcanic_a2a::A2aOptions { allow_private_push_urls: true, ..Default::default() };
    let server = TestServer::with(Setup { options: options(), ..Setup::default() }).await;
    let task = server.send("hi").await["task"].clone();
    let id = task["id"].as_str().unwrap().to_string();
    let created = server
        .rpc(
            KEY,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": format!("{}/hook", webhook.uri())}),
        )
        .await;
    assert!(created["result"]["id"].is_string(), "{created}");
    let path = server.task_path(&id);
    let (workspace, extra, state) = server.stop().await;
    // As if the process had died mid-run.
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    file["status"] =
        json!({"state": "TASK_STATE_WORKING", "timestamp": "2026-12-01T00:00:00.000Z"});
    std::fs::write(&path, file.to_string()).unwrap();

    let server = TestServer::start_in(
        workspace,
        extra,
        state,
        Setup { options: options(), ..Setup::default() },
    )
    .await;
    let read = server.rpc(KEY, "GetTask", json!({"id": id})).await["result"].clone();
    assert_eq!(read["status"]["state"], "TASK_STATE_FAILED");
    pushes_until(&webhook, |b| b["task"]["status"]["state"] == "TASK_STATE_FAILED").await;
}

#[tokio::test]
async fn push_inline_in_v03_send_gets_the_v03_payload() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let webhook = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&webhook).await;
    let options = volcanic_a2a::A2aOptions { allow_private_push_urls: true, ..Default::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    let params = json!({
        "message": {"kind": "message", "messageId": uuid(), "role": "user", "parts": [{"kind": "text", "text": "hi"}]},
        "configuration": {"pushNotificationConfig": {"url": format!("{}/hook", webhook.uri()), "token": "t03-0123456789"}}
    });
    let body = server.rpc_versioned(KEY, None, "message/send", params).await;
    assert_eq!(body["result"]["status"]["state"], "completed", "{body}");
    let requests = pushes_until(&webhook, |b| b["status"]["state"] == "completed").await;
    let last: serde_json::Value = serde_json::from_slice(&requests.last().unwrap().body).unwrap();
    assert_eq!(last["kind"], "task");
    assert!(last.get("task").is_none(), "0.3 payload is the bare task: {last}");
}

/// Waits (bounded) until the webhook got a JSON body matching `done`; returns every request so far.
async fn pushes_until(
    webhook: &wiremock::MockServer,
    done: impl Fn(&serde_json::Value) -> bool,
) -> Vec<wiremock::Request> {
    tokio::time::timeout(DEADLINE, async {
        loop {
            let requests = webhook.received_requests().await.unwrap_or_default();
            let seen = requests.iter().any(|r| {
                serde_json::from_slice::<serde_json::Value>(&r.body).is_ok_and(|b| done(&b))
            });
            if seen {
                return requests;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the expected push never arrived")
}

#[tokio::test]
async fn push_config_with_unsendable_token_is_invalid_params() {
    let server = TestServer::start().await;
    let task = server.send("hi").await["task"].clone();
    for config in [
        json!({"taskId": task["id"], "url": "https://hook.example.com/a", "token": "line\nbreak"}),
        json!({"taskId": task["id"], "url": "https://hook.example.com/a", "authentication": {"scheme": "Bearer", "credentials": "x\r\ny"}}),
    ] {
        let body = server.rpc(KEY, "CreateTaskPushNotificationConfig", config).await;
        assert_eq!(body["error"]["code"], -32602, "{body}");
    }
}
