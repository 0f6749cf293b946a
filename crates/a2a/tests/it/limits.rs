//! Resource bounds: hitting `A2A__MaxTasks` or `A2A__MaxInboxBytes` is a clean refusal with a
//! reason, everything else keeps working, and freeing room (the owner deletes files) lifts it.

use serde_json::json;
use volcanic_a2a::A2aOptions;

use crate::support::*;

#[tokio::test]
async fn max_tasks_refuses_new_tasks_but_lets_existing_ones_continue() {
    let server = TestServer::with(Setup {
        options: A2aOptions { max_tasks: 2, ..A2aOptions::default() },
        ..Setup::default()
    })
    .await;
    let first = server.send("one").await["task"].clone();
    let question = directive(json!([{"tool": "request_input", "args": {"question": "Which?"}}]));
    let second = server.send(&question).await["task"].clone();
    assert_eq!(second["status"]["state"], "TASK_STATE_INPUT_REQUIRED");

    let refused = server.rpc(KEY, "SendMessage", send_params("three", None)).await;
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        "the assistant holds its maximum of 2 tasks; continue an existing task or ask its owner to remove old ones"
    );
    let (status, body) = server
        .rest(KEY, reqwest::Method::POST, "/message:send", Some(send_params("three", None)))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], "UNSUPPORTED_OPERATION");
    let dir = server.ws().join(".volcanic/a2a/tasks");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);

    // Continuing the waiting task is not a new task.
    let params = send_params("that one", Some(json!({"taskId": second["id"]})));
    let answer = server.rpc(KEY, "SendMessage", params).await;
    assert_eq!(answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");

    // The owner removes an old task: there is room again.
    std::fs::remove_file(server.task_path(first["id"].as_str().unwrap())).unwrap();
    assert_eq!(server.send("four").await["task"]["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn full_inbox_fails_the_task_with_the_reason_and_saves_nothing() {
    let server = TestServer::with(Setup {
        options: A2aOptions { max_inbox_bytes: 10, ..A2aOptions::default() },
        ..Setup::default()
    })
    .await;
    let file = |b64: &str, name: &str| {
        json!({"message": {"messageId": uuid(), "role": "ROLE_USER",
            "parts": [{"text": "here"}, {"raw": b64, "filename": name}]}})
    };
    // "hello" (5 bytes) fits; "goodbye!" (8 more) does not.
    let answer = server.rpc(KEY, "SendMessage", file("aGVsbG8=", "a.txt")).await;
    assert_eq!(answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    let answer = server.rpc(KEY, "SendMessage", file("Z29vZGJ5ZSE=", "b.txt")).await;
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{answer}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "message.parts[1]: the assistant's inbox is full (limit 10 bytes); the file was not saved"
    );
    let names = server.inbox_files();
    assert_eq!(
        names.iter().map(|f| redact_stamps(f)).collect::<Vec<_>>(),
        ["inbox/a2a/travel-bot/<time>-a.txt"]
    );
    // Text still works, and deleting the old file makes room.
    assert_eq!(server.send("no files").await["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    std::fs::remove_file(server.ws().join(&names[0])).unwrap();
    let answer = server.rpc(KEY, "SendMessage", file("Z29vZGJ5ZSE=", "b.txt")).await;
    assert_eq!(answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
}

/// Issue 33, 9: a caller's session could fill the inbox cap for everyone with a sparse file (no
/// bytes on disk, any length) or with real bytes of its own. A file counts for what is stored of
/// it, and a caller folder for at most the caller's share, which is also its own cap.
#[tokio::test]
async fn sparse_files_and_one_callers_own_files_do_not_fill_the_inbox_for_the_others() {
    let server = TestServer::with(Setup {
        options: A2aOptions {
            max_inbox_bytes: 1000,
            max_inbox_bytes_per_caller: 20,
            ..A2aOptions::default()
        },
        ..Setup::default()
    })
    .await;
    let other = server.ws().join("inbox/a2a/mallory");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::File::create(other.join("sparse.bin")).unwrap().set_len(2 << 30).unwrap();
    std::fs::write(other.join("real.bin"), vec![b'x'; 999]).unwrap();
    // And in this caller's own folder, where its own session could have made it.
    let own = server.ws().join("inbox/a2a/travel-bot");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::File::create(own.join("sparse.bin")).unwrap().set_len(2 << 30).unwrap();
    let file = |b64: &str, name: &str| {
        json!({"message": {"messageId": uuid(), "role": "ROLE_USER",
            "parts": [{"text": "here"}, {"raw": b64, "filename": name}]}})
    };
    // "hello": the 2 GiB of holes count for nothing, mallory's 999 bytes for its share of 20.
    let answer = server.rpc(KEY, "SendMessage", file("aGVsbG8=", "a.txt")).await;
    assert_eq!(answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    // 16 more bytes would take this caller's own folder over its share.
    let answer = server.rpc(KEY, "SendMessage", file("MDEyMzQ1Njc4OWFiY2RlZg==", "b.txt")).await;
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{answer}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "message.parts[1]: the assistant's inbox is full (limit 20 bytes); the file was not saved"
    );
}
