//! Tenancy as a property: over random interleavings of operations by several callers (two sharing
//! a workspace, one in another), no operation by one caller on another caller's task succeeds,
//! changes that task, or answers differently from the same operation on an id that never existed
//! (JSON-RPC 1.0 and 0.3, REST). `VOLCANIC_TENANCY_SEED` replays a run; `VOLCANIC_TENANCY_STEPS`
//! makes it longer.

use std::time::Duration;

use serde_json::{Value, json};
use volcanic_test_support::rng::{Rng, seed_from_env};

use crate::support::{Setup, TestServer, directive, send_params, write_callers};

const CALLERS: [(&str, &str); 3] = [
    ("tenant-a", "k_tenant_a_key_0001"),
    ("tenant-b", "k_tenant_b_key_0002"),
    ("tenant-c", "k_tenant_c_key_0003"),
];

struct Owned {
    owner: usize,
    id: String,
    context: String,
}

/// One probe: an operation on a task id, over one binding.
#[derive(Clone, Copy, Debug)]
enum Probe {
    RpcGet,
    RpcCancel,
    RpcSubscribe,
    RpcContinue,
    RpcPushCreate,
    RpcPushGet,
    RpcPushList,
    RpcPushDelete,
    Rpc03Get,
    Rpc03Cancel,
    Rpc03PushGet,
    RestGet,
    RestCancel,
    RestSubscribe,
    RestPushList,
    RestPushCreate,
    RestPushGet,
    RestPushDelete,
}

const PROBES: [Probe; 18] = [
    Probe::RpcGet,
    Probe::RpcCancel,
    Probe::RpcSubscribe,
    Probe::RpcContinue,
    Probe::RpcPushCreate,
    Probe::RpcPushGet,
    Probe::RpcPushList,
    Probe::RpcPushDelete,
    Probe::Rpc03Get,
    Probe::Rpc03Cancel,
    Probe::Rpc03PushGet,
    Probe::RestGet,
    Probe::RestCancel,
    Probe::RestSubscribe,
    Probe::RestPushList,
    Probe::RestPushCreate,
    Probe::RestPushGet,
    Probe::RestPushDelete,
];

/// Runs a probe as `caller` on `id` and returns (HTTP status, body text) with the id masked.
async fn probe(server: &TestServer, caller: usize, probe: Probe, id: &str) -> (u16, String) {
    let key = CALLERS[caller].1;
    let hook = "https://hooks.example.com/a2a";
    let rpc = |version: &'static str, method: &'static str, params: Value| {
        server
            .client
            .post(format!("{}/a2a", server.base))
            .header("X-API-Key", key)
            .header("A2A-Version", version)
            .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
    };
    let rest = |method: reqwest::Method, path: String| {
        server
            .client
            .request(method, format!("{}/a2a/v1{path}", server.base))
            .header("X-API-Key", key)
            .header("A2A-Version", "1.0")
    };
    let request = match probe {
        Probe::RpcGet => rpc("1.0", "GetTask", json!({"id": id})),
        Probe::RpcCancel => rpc("1.0", "CancelTask", json!({"id": id})),
        Probe::RpcSubscribe => rpc("1.0", "SubscribeToTask", json!({"id": id})),
        Probe::RpcContinue => {
            let mut params = send_params("let me in", Some(json!({"taskId": id})));
            params["message"]["messageId"] = json!("fixed-message-id");
            rpc("1.0", "SendMessage", params)
        }
        Probe::RpcPushCreate => rpc(
            "1.0",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "id": "probe", "url": hook}),
        ),
        Probe::RpcPushGet => {
            rpc("1.0", "GetTaskPushNotificationConfig", json!({"taskId": id, "id": "probe"}))
        }
        Probe::RpcPushList => rpc("1.0", "ListTaskPushNotificationConfigs", json!({"taskId": id})),
        Probe::RpcPushDelete => {
            rpc("1.0", "DeleteTaskPushNotificationConfig", json!({"taskId": id, "id": "probe"}))
        }
        Probe::Rpc03Get => rpc("0.3", "tasks/get", json!({"id": id})),
        Probe::Rpc03Cancel => rpc("0.3", "tasks/cancel", json!({"id": id})),
        Probe::Rpc03PushGet => rpc(
            "0.3",
            "tasks/pushNotificationConfig/get",
            json!({"id": id, "pushNotificationConfigId": "probe"}),
        ),
        Probe::RestGet => rest(reqwest::Method::GET, format!("/tasks/{id}")),
        Probe::RestCancel => rest(reqwest::Method::POST, format!("/tasks/{id}:cancel")),
        Probe::RestSubscribe => rest(reqwest::Method::POST, format!("/tasks/{id}:subscribe")),
        Probe::RestPushList => {
            rest(reqwest::Method::GET, format!("/tasks/{id}/pushNotificationConfigs"))
        }
        Probe::RestPushCreate => {
            rest(reqwest::Method::POST, format!("/tasks/{id}/pushNotificationConfigs"))
                .json(&json!({"id": "probe", "url": hook}))
        }
        Probe::RestPushGet => {
            rest(reqwest::Method::GET, format!("/tasks/{id}/pushNotificationConfigs/probe"))
        }
        Probe::RestPushDelete => {
            rest(reqwest::Method::DELETE, format!("/tasks/{id}/pushNotificationConfigs/probe"))
        }
    };
    let response =
        tokio::time::timeout(Duration::from_secs(20), request.send()).await.unwrap().unwrap();
    let status = response.status().as_u16();
    let text =
        tokio::time::timeout(Duration::from_secs(20), response.text()).await.unwrap().unwrap();
    (status, text.replace(id, "<ID>"))
}

/// A task as its owner sees it, minus what moves by itself while a run works.
async fn snapshot(server: &TestServer, task: &Owned) -> Value {
    let body = server.rpc(CALLERS[task.owner].1, "GetTask", json!({"id": task.id})).await;
    let mut result = body["result"].clone();
    assert!(result.is_object(), "the owner lost its task: {body}");
    let configs = server
        .rpc(CALLERS[task.owner].1, "ListTaskPushNotificationConfigs", json!({"taskId": task.id}))
        .await;
    result["pushConfigs"] = configs["result"].clone();
    result
}

fn settled(task: &Value) -> bool {
    matches!(
        task["status"]["state"].as_str(),
        Some("TASK_STATE_COMPLETED" | "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_CANCELED")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_task_ids_behave_like_missing_ones() {
    let seed = seed_from_env("VOLCANIC_TENANCY_SEED", 11);
    let steps: usize =
        std::env::var("VOLCANIC_TENANCY_STEPS").ok().and_then(|v| v.parse().ok()).unwrap_or(150);
    let mut rng = Rng::new(seed);
    let server = TestServer::with(Setup { extra_workspaces: 1, ..Setup::default() }).await;
    write_callers(server.ws(), &[CALLERS[0], CALLERS[1]]);
    write_callers(server.extra[0].path(), &[CALLERS[2]]);
    let mut tasks: Vec<Owned> = Vec::new();
    let mut compared = 0;

    for step in 0..steps {
        let caller = rng.index(CALLERS.len());
        let foreign: Vec<usize> = (0..tasks.len()).filter(|&i| tasks[i].owner != caller).collect();
        if tasks.len() < 3 || foreign.is_empty() || rng.below(4) == 0 {
            // Make a task: answered, waiting for input, or left working.
            let text = match rng.below(3) {
                0 => "hello".to_string(),
                1 => directive(json!([{"tool": "request_input", "args": {"question": "who?"}}])),
                _ => directive(json!([{"sleep_ms": 30000}])),
            };
            let params = json!({
                "message": send_params(&text, None)["message"],
                "configuration": {"returnImmediately": true},
            });
            let body = server.rpc(CALLERS[caller].1, "SendMessage", params).await;
            let task = &body["result"]["task"];
            assert!(task.is_object(), "seed {seed}: {body}");
            tasks.push(Owned {
                owner: caller,
                id: task["id"].as_str().unwrap().to_string(),
                context: task["contextId"].as_str().unwrap().to_string(),
            });
            continue;
        }
        let target = &tasks[foreign[rng.index(foreign.len())]];
        let which = PROBES[rng.index(PROBES.len())];
        let before = snapshot(&server, target).await;
        let missing = uuid::Uuid::new_v4().to_string();
        let on_foreign = probe(&server, caller, which, &target.id).await;
        let on_missing = probe(&server, caller, which, &missing).await;
        assert_eq!(
            on_foreign, on_missing,
            "seed {seed} step {step}: {which:?} by {} on {}'s task differs from a missing id",
            CALLERS[caller].0, CALLERS[target.owner].0
        );
        assert!(on_foreign.0 >= 400 || on_foreign.1.contains("\"error\""), "{on_foreign:?}");
        let after = snapshot(&server, target).await;
        if settled(&before) {
            assert_eq!(before, after, "seed {seed} step {step}: {which:?} changed a foreign task");
        } else {
            assert_eq!(before["pushConfigs"], after["pushConfigs"], "seed {seed} step {step}");
            assert_ne!(after["status"]["state"], "TASK_STATE_CANCELED", "seed {seed} step {step}");
        }
        // A foreign context id is just a new, empty context of the caller's own.
        let listed =
            server.rpc(CALLERS[caller].1, "ListTasks", json!({"contextId": target.context})).await;
        assert_eq!(listed["result"]["tasks"], json!([]), "seed {seed} step {step}: {listed}");
        compared += 1;
        // The same probes do reach the caller's own tasks (so the comparison above means something).
        if let Some(own) = tasks.iter().find(|t| t.owner == caller) {
            let (status, body) = probe(&server, caller, Probe::RestGet, &own.id).await;
            assert_eq!(status, 200, "seed {seed}: own task unreadable: {body}");
            let (_, body) = probe(&server, caller, Probe::Rpc03Get, &own.id).await;
            assert!(body.contains("\"result\""), "seed {seed}: own task unreadable: {body}");
        }
    }
    assert!(compared >= steps / 2, "seed {seed}: only {compared} probes compared");
    // Stop the long runs so the server shuts down promptly.
    for task in &tasks {
        let _ = server.rpc(CALLERS[task.owner].1, "CancelTask", json!({"id": task.id})).await;
    }
}
