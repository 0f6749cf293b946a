//! Task access: tenancy, GetTask, ListTasks.

use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn tasks_other_callers_task_not_found() {
    let server = TestServer::start().await;
    let task = server.send("mine").await["task"].clone();
    let id = task["id"].as_str().unwrap();
    let random = server
        .rpc(OTHER_KEY, "GetTask", json!({"id": "3f36680c-7f37-4a5f-945e-d78981fafd36"}))
        .await;
    let foreign = server.rpc(OTHER_KEY, "GetTask", json!({"id": id})).await;
    assert_eq!(foreign["error"]["code"], -32001);
    // Same error as an id that does not exist, apart from the id itself.
    assert_eq!(foreign["error"]["message"], random["error"]["message"]);
    for method in ["CancelTask", "SubscribeToTask"] {
        let body = if method == "SubscribeToTask" {
            server.rpc_stream(OTHER_KEY, Some("1.0"), method, json!({"id": id})).await.remove(0)
        } else {
            server.rpc(OTHER_KEY, method, json!({"id": id})).await
        };
        assert_eq!(body["error"]["code"], -32001, "{method}");
    }
    let continued = server
        .rpc(OTHER_KEY, "SendMessage", send_params("hijack", Some(json!({"taskId": id}))))
        .await;
    assert_eq!(continued["error"]["code"], -32001);
    let (status, _) =
        server.rest(OTHER_KEY, reqwest::Method::GET, &format!("/tasks/{id}"), None).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn tasks_list_tasks_only_callers_tasks() {
    let server = TestServer::start().await;
    let mine_a = server.send("a").await["task"]["id"].clone();
    let mine_b = server.send("b").await["task"]["id"].clone();
    server.rpc(OTHER_KEY, "SendMessage", send_params("other", None)).await;
    let list = server.rpc(KEY, "ListTasks", json!({})).await["result"].clone();
    let ids: Vec<&Value> = list["tasks"].as_array().unwrap().iter().map(|t| &t["id"]).collect();
    assert_eq!(ids, vec![&mine_b, &mine_a], "newest first, only mine");
    assert_eq!(list["totalSize"], 2);
    assert_eq!(list["nextPageToken"], "");
    assert!(list["tasks"][0].get("artifacts").is_none(), "artifacts omitted by default");
    let (status, body) = server
        .rest(KEY, reqwest::Method::GET, "/tasks?pageSize=1&includeArtifacts=true", None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["tasks"].as_array().unwrap().len(), 1);
    assert_ne!(body["nextPageToken"], "");
    assert!(body["tasks"][0]["artifacts"].is_array());
}

#[tokio::test]
async fn get_task_honours_history_length() {
    let server = TestServer::start().await;
    let id = server.send("hello").await["task"]["id"].clone();
    let full = server.rpc(KEY, "GetTask", json!({"id": id})).await["result"].clone();
    assert_eq!(full["history"].as_array().unwrap().len(), 1);
    let none =
        server.rpc(KEY, "GetTask", json!({"id": id, "historyLength": 0})).await["result"].clone();
    assert!(none.get("history").is_none());
    let bad = server.rpc(KEY, "GetTask", json!({"id": id, "historyLength": -1})).await;
    assert_eq!(bad["error"]["code"], -32602);
}
