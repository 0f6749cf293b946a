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

/// Every read answer for task `id`: GetTask in 1.0 (with several `historyLength`s), 0.3 and
/// REST, and ListTasks with and without artifacts.
async fn read_answers(server: &TestServer, id: &Value) -> Vec<Value> {
    let mut answers = Vec::new();
    for length in [None, Some(0), Some(1), Some(5)] {
        let mut params = json!({"id": id});
        if let Some(length) = length {
            params["historyLength"] = json!(length);
        }
        answers.push(server.rpc(KEY, "GetTask", params.clone()).await);
        answers.push(server.rpc_versioned(KEY, Some("0.3"), "tasks/get", params).await);
    }
    let path = format!("/tasks/{}?historyLength=1", id.as_str().unwrap());
    answers.push(server.rest(KEY, reqwest::Method::GET, &path, None).await.1);
    answers.push(server.rpc(KEY, "ListTasks", json!({})).await);
    answers.push(
        server.rpc(KEY, "ListTasks", json!({"includeArtifacts": true, "historyLength": 1})).await,
    );
    answers
}

#[tokio::test]
async fn cached_reads_answer_like_the_file_and_follow_outside_edits() {
    let server = TestServer::start().await;
    let id = server.send("hello").await["task"]["id"].clone();
    let path = server.task_path(id.as_str().unwrap());
    let from_file = || {
        let file: volcanic_a2a::task::TaskFile =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        serde_json::to_value(&file.task).unwrap()
    };
    // The first reads fill the cache from the file, the second are served from it.
    let first = read_answers(&server, &id).await;
    let second = read_answers(&server, &id).await;
    assert_eq!(first, second);
    assert_eq!(first[0]["result"], from_file());
    let mut listed = from_file();
    listed.as_object_mut().unwrap().remove("artifacts");
    assert_eq!(first[first.len() - 2]["result"]["tasks"], json!([listed]));
    // An outside edit of the file, in place and of the same length, shows at once.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"text\": \"hello\""), "{text}");
    std::fs::write(&path, text.replace("\"text\": \"hello\"", "\"text\": \"HELLO\"")).unwrap();
    let edited = read_answers(&server, &id).await;
    assert_eq!(edited[0]["result"], from_file());
    assert_eq!(edited, read_answers(&server, &id).await);
    assert_ne!(edited, first);
    assert_eq!(
        serde_json::to_string(&edited).unwrap(),
        serde_json::to_string(&first).unwrap().replace("\"text\":\"hello\"", "\"text\":\"HELLO\"")
    );
    // Our own write (a push config saved into the task file) is seen too.
    let config = json!({"taskId": id, "url": "https://example.com/hook"});
    let created = server.rpc(KEY, "CreateTaskPushNotificationConfig", config).await;
    assert!(created["result"].is_object(), "{created}");
    assert_eq!(read_answers(&server, &id).await, edited);
    // A removed file is a missing task, as for an id never seen.
    std::fs::remove_file(&path).unwrap();
    let gone = server.rpc(KEY, "GetTask", json!({"id": id})).await;
    assert_eq!(gone["error"]["code"], -32001);
}
