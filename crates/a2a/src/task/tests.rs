//! Tests of the task store through its public API, on real files in temp workspaces.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use a2a::{Artifact, ListTasksRequest, Message, Part, Role, Task, TaskState, TaskStatus};
use chrono::{DateTime, Utc};

use super::store::{RESTARTED_TEXT, tasks_dir};
use super::{TaskFile, TaskStore, apply_history_length};
use crate::auth::{A2aWorkspace, Caller, CallerMode};
use crate::error::A2aError;

fn never_live(_: &str) -> bool {
    false
}

fn always_live(_: &str) -> bool {
    true
}

fn workspace(path: &Path) -> Arc<A2aWorkspace> {
    Arc::new(A2aWorkspace {
        path: path.to_path_buf(),
        scope_prefix: "serve".into(),
        owner_id: "owner".into(),
    })
}

fn caller(workspace: &Arc<A2aWorkspace>, name: &str) -> Caller {
    Caller {
        name: name.into(),
        mode: CallerMode::Isolated,
        tier: crate::auth::CallerTier::Workspace,
        approval: Default::default(),
        limits: Default::default(),
        workspace: workspace.clone(),
    }
}

fn at(offset_secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000 + offset_secs, 0).unwrap()
}

fn message(id: &str) -> Message {
    Message {
        message_id: id.into(),
        context_id: None,
        task_id: None,
        role: Role::User,
        parts: vec![Part::text(id)],
        metadata: None,
        extensions: None,
        reference_task_ids: None,
    }
}

fn task_file(id: &str, context: &str, caller: &str, state: TaskState, secs: i64) -> TaskFile {
    TaskFile {
        task: Task {
            id: id.into(),
            context_id: context.into(),
            status: TaskStatus { state, message: None, timestamp: Some(at(secs)) },
            artifacts: Some(vec![Artifact {
                artifact_id: "a-1".into(),
                name: Some("response".into()),
                description: None,
                parts: vec![Part::text("answer")],
                metadata: None,
                extensions: None,
            }]),
            history: Some(vec![message("m1"), message("m2"), message("m3")]),
            metadata: None,
        },
        caller: caller.into(),
        push_configs: vec![],
        events: Default::default(),
        accepted: vec![],
    }
}

fn task_path(workspace: &Path, id: &str) -> PathBuf {
    tasks_dir(workspace).join(format!("{id}.json"))
}

fn read_file(workspace: &Path, id: &str) -> TaskFile {
    serde_json::from_slice(&std::fs::read(task_path(workspace, id)).unwrap()).unwrap()
}

fn not_found(id: &str) -> A2aError {
    A2aError::TaskNotFound { task_id: id.into() }
}

/// Ids, total and whether there is a next page.
type Listed<'a> = (Vec<&'a str>, i32, bool);

fn summary(response: &a2a::ListTasksResponse) -> Listed<'_> {
    let ids = response.tasks.iter().map(|task| task.id.as_str()).collect();
    (ids, response.total_size, !response.next_page_token.is_empty())
}

#[tokio::test]
async fn store_create_then_load_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    let mut file = task_file("t1", "c1", "alice", TaskState::Working, 0);
    file.push_configs = vec![
        serde_json::from_value(serde_json::json!({"id": "p1", "url": "https://example.com/hook"}))
            .unwrap(),
    ];
    store.create(&ws, &file).await.unwrap();
    assert_eq!(
        store.load(&caller(&ws, "alice"), "t1", &always_live).await.map_err(A2aError::from),
        Ok(file.clone())
    );
    assert_eq!(read_file(dir.path(), "t1"), file);
    assert_eq!(store.create(&ws, &file).await.map_err(A2aError::from), Err(A2aError::Internal));
    file.task.status.state = TaskState::Completed;
    store.save(&ws, &file).await.unwrap();
    assert_eq!(
        store.load(&caller(&ws, "alice"), "t1", &never_live).await.map_err(A2aError::from),
        Ok(file)
    );
}

#[tokio::test]
async fn store_save_unsafe_id_is_internal_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let file = task_file("../escape", "c1", "alice", TaskState::Completed, 0);
    assert_eq!(
        TaskStore::new().save(&ws, &file).await.map_err(A2aError::from),
        Err(A2aError::Internal)
    );
    assert!(!dir.path().join(".volcanic/a2a/escape.json").exists());
}

#[tokio::test]
async fn store_load_other_callers_task_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    store.create(&ws, &task_file("t1", "c1", "alice", TaskState::Completed, 0)).await.unwrap();
    assert_eq!(
        store.load(&caller(&ws, "bob"), "t1", &always_live).await.map_err(A2aError::from),
        Err(not_found("t1"))
    );
    let other = workspace(other_dir.path());
    assert_eq!(
        store.load(&caller(&other, "alice"), "t1", &always_live).await.map_err(A2aError::from),
        Err(not_found("t1"))
    );
    assert_eq!(
        store.load(&caller(&ws, "alice"), "t2", &always_live).await.map_err(A2aError::from),
        Err(not_found("t2"))
    );
}

#[tokio::test]
async fn store_unreadable_task_file_is_internal_not_missing() {
    // A disk that fails (here: a file where the task folder should be, ENOTDIR; in production,
    // out of descriptors) must not pass for a missing task.
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    store.create(&ws, &task_file("t1", "c1", "alice", TaskState::Completed, 0)).await.unwrap();
    let alice = caller(&ws, "alice");
    let listed = store.list_page(&alice, &request(), &always_live).await.unwrap().into_response();
    assert_eq!(listed.tasks.len(), 1);
    std::fs::remove_dir_all(tasks_dir(dir.path())).unwrap();
    std::fs::write(tasks_dir(dir.path()), "").unwrap();
    assert_eq!(
        store.load(&alice, "t1", &always_live).await.map_err(A2aError::from),
        Err(A2aError::Internal)
    );
}

#[tokio::test]
async fn store_task_file_that_is_not_a_regular_file_or_over_the_cap_is_not_found() {
    // Issue 17: what a caller's bash may plant in place of a task file reads as missing.
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new().with_file_cap(4096);
    let alice = caller(&ws, "alice");
    let file = task_file("t1", "c1", "alice", TaskState::Completed, 0);
    store.create(&ws, &file).await.unwrap();
    let path = task_path(dir.path(), "t1");
    let bytes = std::fs::read(&path).unwrap();
    let elsewhere = dir.path().join("elsewhere.json");
    std::fs::write(&elsewhere, &bytes).unwrap();
    let plants: [(&str, &dyn Fn()); 4] = [
        ("folder", &|| std::fs::create_dir(&path).unwrap()),
        ("link to a good copy", &|| std::os::unix::fs::symlink(&elsewhere, &path).unwrap()),
        ("link to /dev/zero", &|| std::os::unix::fs::symlink("/dev/zero", &path).unwrap()),
        ("over the cap", &|| {
            let mut padded = bytes.clone();
            padded.resize(4097, b' ');
            std::fs::write(&path, padded).unwrap();
        }),
    ];
    for (what, plant) in plants {
        let _ = std::fs::remove_file(&path).or_else(|_| std::fs::remove_dir(&path));
        plant();
        assert_eq!(
            store.load(&alice, "t1", &always_live).await.map_err(A2aError::from),
            Err(not_found("t1")),
            "{what}"
        );
        let listed =
            store.list_page(&alice, &request(), &always_live).await.unwrap().into_response();
        assert_eq!(listed.tasks, vec![], "{what}");
    }
    let _ = std::fs::remove_file(&path).or_else(|_| std::fs::remove_dir(&path));
    let mut padded = bytes.clone();
    padded.resize(4096, b' ');
    std::fs::write(&path, padded).unwrap();
    assert_eq!(store.load(&alice, "t1", &always_live).await.map_err(A2aError::from), Ok(file));
}

#[tokio::test]
async fn store_load_malformed_file_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    std::fs::create_dir_all(tasks_dir(dir.path())).unwrap();
    let valid = serde_json::to_vec(&task_file("t9", "c1", "alice", TaskState::Completed, 0));
    let cases: [(&str, Vec<u8>); 4] = [
        ("t1", b"{not json".to_vec()),
        ("t2", br#"{"id":"t2","caller":"alice"}"#.to_vec()),
        ("t3", br#"[1,2,3]"#.to_vec()),
        // A file whose task id is not its name.
        ("t4", valid.unwrap()),
    ];
    for (id, bytes) in cases {
        std::fs::write(task_path(dir.path(), id), bytes).unwrap();
        assert_eq!(
            store.load(&caller(&ws, "alice"), id, &always_live).await.map_err(A2aError::from),
            Err(not_found(id)),
            "{id}"
        );
    }
}

#[tokio::test]
async fn store_load_unsafe_ids_are_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    // A readable task file where `../x` would lead if ids were used as paths unchecked.
    let escaped = dir.path().join(".volcanic/a2a/x.json");
    std::fs::create_dir_all(escaped.parent().unwrap()).unwrap();
    let file = task_file("../x", "c1", "alice", TaskState::Completed, 0);
    std::fs::write(&escaped, serde_json::to_vec(&file).unwrap()).unwrap();
    let long = "a".repeat(101);
    for id in ["../x", "..", "a/b", "", "x.json", ".tmp1", "x y", "é", long.as_str()] {
        assert_eq!(
            store.load(&caller(&ws, "alice"), id, &always_live).await.map_err(A2aError::from),
            Err(not_found(id)),
            "{id:?}"
        );
    }
}

#[tokio::test]
async fn store_load_working_without_live_run_is_failed_and_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    let original = task_file("t1", "c1", "alice", TaskState::Working, 0);
    store.create(&ws, &original).await.unwrap();
    let loaded = store.load(&caller(&ws, "alice"), "t1", &never_live).await.unwrap();

    let message = loaded.task.status.message.clone().unwrap();
    let timestamp = loaded.task.status.timestamp.unwrap();
    assert!(timestamp > at(0));
    let mut expected = original.clone();
    expected.task.status = TaskStatus {
        state: TaskState::Failed,
        message: Some(Message {
            message_id: message.message_id.clone(),
            context_id: Some("c1".into()),
            task_id: Some("t1".into()),
            role: Role::Agent,
            parts: vec![Part::text(RESTARTED_TEXT)],
            metadata: None,
            extensions: None,
            reference_task_ids: None,
        }),
        timestamp: Some(timestamp),
    };
    // The failure is a run of its own in the task's event positions (a lost run's last events may have gone out unrecorded).
    expected.events.record_status_change();
    assert_eq!(loaded, expected);
    assert_eq!(read_file(dir.path(), "t1"), expected);
    assert_eq!(
        serde_json::to_value(&message.parts).unwrap(),
        serde_json::json!([{"text": "server restarted"}])
    );
}

#[tokio::test]
async fn store_load_live_or_input_required_tasks_are_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    let working = task_file("t1", "c1", "alice", TaskState::Working, 0);
    let submitted = task_file("t2", "c1", "alice", TaskState::Submitted, 0);
    let waiting = task_file("t3", "c1", "alice", TaskState::InputRequired, 0);
    for file in [&working, &submitted, &waiting] {
        store.create(&ws, file).await.unwrap();
    }
    let alice = caller(&ws, "alice");
    assert_eq!(
        store.load(&alice, "t1", &always_live).await.map_err(A2aError::from),
        Ok(working.clone())
    );
    assert_eq!(
        store.load(&alice, "t2", &|id: &str| id == "t2").await.map_err(A2aError::from),
        Ok(submitted)
    );
    assert_eq!(
        store.load(&alice, "t3", &never_live).await.map_err(A2aError::from),
        Ok(waiting.clone())
    );
    assert_eq!(read_file(dir.path(), "t1"), working);
    assert_eq!(read_file(dir.path(), "t3"), waiting);
}

/// alice: t1..t6 in contexts c1/c2 with distinct and tied timestamps; bob: b1; alice in
/// another workspace: o1.
async fn listing_fixture(store: &TaskStore, ws: &Arc<A2aWorkspace>, other: &Arc<A2aWorkspace>) {
    let files = [
        task_file("t1", "c1", "alice", TaskState::Completed, 10),
        task_file("t2", "c1", "alice", TaskState::InputRequired, 20),
        task_file("t3", "c2", "alice", TaskState::Completed, 30),
        task_file("t4", "c2", "alice", TaskState::Failed, 30),
        task_file("t5", "c1", "alice", TaskState::Completed, 40),
        task_file("t6", "c2", "alice", TaskState::Canceled, 5),
        task_file("b1", "c1", "bob", TaskState::Completed, 50),
    ];
    for file in &files {
        store.create(ws, file).await.unwrap();
    }
    store.create(other, &task_file("o1", "c1", "alice", TaskState::Completed, 60)).await.unwrap();
}

#[tokio::test]
async fn store_list_filters_order_and_totals() {
    let dir = tempfile::tempdir().unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let (ws, other) = (workspace(dir.path()), workspace(other_dir.path()));
    let store = TaskStore::new();
    listing_fixture(&store, &ws, &other).await;
    let alice = caller(&ws, "alice");
    let all = ["t5", "t3", "t4", "t2", "t1", "t6"];
    let cases: [(&str, ListTasksRequest, Listed); 9] = [
        ("everything, newest first, ties by id", request(), (all.to_vec(), 6, false)),
        (
            "context",
            ListTasksRequest { context_id: Some("c2".into()), ..request() },
            (vec!["t3", "t4", "t6"], 3, false),
        ),
        (
            "status",
            ListTasksRequest { status: Some(TaskState::Completed), ..request() },
            (vec!["t5", "t3", "t1"], 3, false),
        ),
        (
            "unspecified status is no filter",
            ListTasksRequest { status: Some(TaskState::Unspecified), ..request() },
            (all.to_vec(), 6, false),
        ),
        (
            "timestamp is inclusive",
            ListTasksRequest { status_timestamp_after: Some(at(30)), ..request() },
            (vec!["t5", "t3", "t4"], 3, false),
        ),
        (
            "combined",
            ListTasksRequest {
                context_id: Some("c1".into()),
                status: Some(TaskState::Completed),
                status_timestamp_after: Some(at(11)),
                ..request()
            },
            (vec!["t5"], 1, false),
        ),
        (
            "page size",
            ListTasksRequest { page_size: Some(2), ..request() },
            (vec!["t5", "t3"], 6, true),
        ),
        (
            "exact last page has no token",
            ListTasksRequest { page_size: Some(6), ..request() },
            (all.to_vec(), 6, false),
        ),
        (
            "no match",
            ListTasksRequest { context_id: Some("nope".into()), ..request() },
            (vec![], 0, false),
        ),
    ];
    for (label, request, expected) in cases {
        let response =
            store.list_page(&alice, &request, &always_live).await.unwrap().into_response();
        assert_eq!(summary(&response), expected, "{label}");
        let page_size = request.page_size.unwrap_or(50);
        assert_eq!(response.page_size, page_size, "{label}");
    }
    let bob = store
        .list_page(&caller(&ws, "bob"), &request(), &always_live)
        .await
        .unwrap()
        .into_response();
    assert_eq!(summary(&bob), (vec!["b1"], 1, false));
    let elsewhere = store
        .list_page(&caller(&other, "alice"), &request(), &always_live)
        .await
        .unwrap()
        .into_response();
    assert_eq!(summary(&elsewhere), (vec!["o1"], 1, false));
}

fn request() -> ListTasksRequest {
    ListTasksRequest {
        context_id: None,
        status: None,
        page_size: None,
        page_token: None,
        history_length: None,
        status_timestamp_after: None,
        include_artifacts: None,
        tenant: None,
    }
}

#[tokio::test]
async fn store_list_pages_walk_everything_once_despite_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let (ws, other) = (workspace(dir.path()), workspace(other_dir.path()));
    let store = TaskStore::new();
    listing_fixture(&store, &ws, &other).await;
    let alice = caller(&ws, "alice");
    let page = |token: String| ListTasksRequest {
        page_size: Some(2),
        page_token: Some(token),
        ..request()
    };
    let first =
        store.list_page(&alice, &page(String::new()), &always_live).await.unwrap().into_response();
    assert_eq!(summary(&first), (vec!["t5", "t3"], 6, true));
    // A newer task arriving between pages does not shift the next pages.
    store.create(&ws, &task_file("t7", "c1", "alice", TaskState::Completed, 99)).await.unwrap();
    let second = store
        .list_page(&alice, &page(first.next_page_token), &always_live)
        .await
        .unwrap()
        .into_response();
    assert_eq!(summary(&second), (vec!["t4", "t2"], 7, true));
    let third = store
        .list_page(&alice, &page(second.next_page_token), &always_live)
        .await
        .unwrap()
        .into_response();
    assert_eq!(summary(&third), (vec!["t1", "t6"], 7, false));
}

#[tokio::test]
async fn store_list_invalid_params_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    let alice = caller(&ws, "alice");
    use base64::Engine;
    let encode = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
    let cases = [
        (ListTasksRequest { page_size: Some(0), ..request() }, "pageSize"),
        (ListTasksRequest { page_size: Some(101), ..request() }, "pageSize"),
        (ListTasksRequest { page_size: Some(-1), ..request() }, "pageSize"),
        (ListTasksRequest { history_length: Some(-1), ..request() }, "historyLength"),
        (ListTasksRequest { page_token: Some("!!".into()), ..request() }, "pageToken"),
        (ListTasksRequest { page_token: Some(encode("no bar")), ..request() }, "pageToken"),
        (ListTasksRequest { page_token: Some(encode("x|../t1")), ..request() }, "pageToken"),
        (ListTasksRequest { page_token: Some(encode("2026|t1")), ..request() }, "pageToken"),
    ];
    for (request, field) in cases {
        match store.list_page(&alice, &request, &always_live).await.map_err(A2aError::from) {
            Err(A2aError::InvalidParams(message)) => assert!(message.contains(field), "{message}"),
            other => panic!("{request:?}: {other:?}"),
        }
    }
    let ok = ListTasksRequest { page_size: Some(100), history_length: Some(0), ..request() };
    let empty = store.list_page(&alice, &ok, &always_live).await.unwrap().into_response();
    assert_eq!(
        empty,
        a2a::ListTasksResponse {
            tasks: vec![],
            next_page_token: String::new(),
            page_size: 100,
            total_size: 0,
        }
    );
}

#[tokio::test]
async fn store_list_history_length_and_artifacts_shape_each_task() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    let file = task_file("t1", "c1", "alice", TaskState::Completed, 0);
    store.create(&ws, &file).await.unwrap();
    let alice = caller(&ws, "alice");
    let full = file.task.clone();
    let shaped = |artifacts: bool, history: Option<Vec<Message>>| Task {
        artifacts: if artifacts { full.artifacts.clone() } else { None },
        history,
        ..full.clone()
    };
    let all_history = Some(vec![message("m1"), message("m2"), message("m3")]);
    let cases = [
        (None, None, shaped(false, all_history.clone())),
        (Some(false), Some(0), shaped(false, None)),
        (Some(true), None, shaped(true, all_history.clone())),
        (Some(true), Some(2), shaped(true, Some(vec![message("m2"), message("m3")]))),
        (None, Some(5), shaped(false, all_history)),
    ];
    for (include_artifacts, history_length, expected) in cases {
        let request = ListTasksRequest { include_artifacts, history_length, ..request() };
        let response =
            store.list_page(&alice, &request, &always_live).await.unwrap().into_response();
        assert_eq!(response.tasks, vec![expected], "{include_artifacts:?} {history_length:?}");
    }
}

#[tokio::test]
async fn store_list_follows_outside_edits_deletions_and_ignores_other_files() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    let alice = caller(&ws, "alice");
    for (id, secs) in [("t1", 1), ("t2", 2), ("t3", 3)] {
        store.create(&ws, &task_file(id, "c1", "alice", TaskState::Completed, secs)).await.unwrap();
    }
    let c1 = ListTasksRequest { context_id: Some("c1".into()), ..request() };
    let listed = store.list_page(&alice, &c1, &always_live).await.unwrap().into_response();
    assert_eq!(summary(&listed), (vec!["t3", "t2", "t1"], 3, false));

    // Same-size in-place edit (context c1 → c2), a deletion, a malformed file, a new file
    // written by someone else, and files that are not tasks.
    let path = task_path(dir.path(), "t2");
    let edited = std::fs::read_to_string(&path).unwrap().replace("\"c1\"", "\"c2\"");
    std::fs::write(&path, edited).unwrap();
    std::fs::remove_file(task_path(dir.path(), "t3")).unwrap();
    std::fs::write(task_path(dir.path(), "t1"), b"{broken").unwrap();
    let outside = task_file("t4", "c1", "alice", TaskState::Completed, 4);
    std::fs::write(task_path(dir.path(), "t4"), serde_json::to_vec(&outside).unwrap()).unwrap();
    let stray = serde_json::to_vec(&task_file("t5", "c1", "alice", TaskState::Completed, 5));
    let stray = stray.unwrap();
    std::fs::write(tasks_dir(dir.path()).join(".tmpAbC12"), &stray).unwrap();
    std::fs::write(tasks_dir(dir.path()).join(".tmpt5.json"), &stray).unwrap();
    std::fs::write(tasks_dir(dir.path()).join("t5.json.bak"), &stray).unwrap();
    std::fs::write(tasks_dir(dir.path()).join("notes.txt"), "hello").unwrap();
    std::fs::create_dir(tasks_dir(dir.path()).join("t6.json")).unwrap();

    let listed = store.list_page(&alice, &c1, &always_live).await.unwrap().into_response();
    assert_eq!(summary(&listed), (vec!["t4"], 1, false));
    let c2 = ListTasksRequest { context_id: Some("c2".into()), ..request() };
    let listed = store.list_page(&alice, &c2, &always_live).await.unwrap().into_response();
    assert_eq!(summary(&listed), (vec!["t2"], 1, false));

    // A repaired file comes back.
    let repaired = task_file("t1", "c1", "alice", TaskState::Completed, 1);
    std::fs::write(task_path(dir.path(), "t1"), serde_json::to_vec(&repaired).unwrap()).unwrap();
    let listed = store.list_page(&alice, &c1, &always_live).await.unwrap().into_response();
    assert_eq!(summary(&listed), (vec!["t4", "t1"], 2, false));
}

/// Sets the task folder's mtime an hour back, as if nothing had changed there for a while: an
/// equal mtime then proves nothing was added or removed, and lists skip the scan.
fn settle_folder(workspace: &Path) {
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let folder = std::fs::File::open(tasks_dir(workspace)).unwrap();
    folder.set_times(std::fs::FileTimes::new().set_modified(past)).unwrap();
}

#[tokio::test]
async fn store_list_of_a_settled_folder_sees_files_added_and_removed_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    let alice = caller(&ws, "alice");
    for (id, secs) in [("t1", 1), ("t2", 2)] {
        store.create(&ws, &task_file(id, "c1", "alice", TaskState::Completed, secs)).await.unwrap();
    }
    settle_folder(dir.path());
    let listed = store.list_page(&alice, &request(), &always_live).await.unwrap().into_response();
    assert_eq!(summary(&listed), (vec!["t2", "t1"], 2, false));

    let added = task_file("t3", "c1", "alice", TaskState::Completed, 3);
    std::fs::write(task_path(dir.path(), "t3"), serde_json::to_vec(&added).unwrap()).unwrap();
    let listed = store.list_page(&alice, &request(), &always_live).await.unwrap().into_response();
    assert_eq!(summary(&listed), (vec!["t3", "t2", "t1"], 3, false));

    settle_folder(dir.path());
    store.list_page(&alice, &request(), &always_live).await.unwrap();
    std::fs::remove_file(task_path(dir.path(), "t2")).unwrap();
    let listed = store.list_page(&alice, &request(), &always_live).await.unwrap().into_response();
    assert_eq!(summary(&listed), (vec!["t3", "t1"], 2, false));

    // Our own writes keep it current too, settled or not.
    settle_folder(dir.path());
    store.list_page(&alice, &request(), &always_live).await.unwrap();
    store.save(&ws, &task_file("t1", "c2", "alice", TaskState::Failed, 4)).await.unwrap();
    let c2 = ListTasksRequest { context_id: Some("c2".into()), ..request() };
    let listed = store.list_page(&alice, &c2, &always_live).await.unwrap().into_response();
    assert_eq!(summary(&listed), (vec!["t1"], 1, false));
}

#[tokio::test]
async fn store_list_after_a_restart_matches_the_list_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let alice = caller(&ws, "alice");
    let requests = [
        request(),
        ListTasksRequest { page_size: Some(2), ..request() },
        ListTasksRequest { context_id: Some("c2".into()), ..request() },
        ListTasksRequest { status: Some(TaskState::Completed), ..request() },
        ListTasksRequest { status_timestamp_after: Some(at(3)), ..request() },
    ];
    let before = TaskStore::new();
    for (id, context, state, secs) in [
        ("t1", "c1", TaskState::Completed, 1),
        ("t2", "c2", TaskState::Failed, 2),
        ("t3", "c2", TaskState::Completed, 3),
        ("t4", "c1", TaskState::InputRequired, 4),
    ] {
        before.create(&ws, &task_file(id, context, "alice", state, secs)).await.unwrap();
    }
    before.save(&ws, &task_file("t1", "c1", "alice", TaskState::Canceled, 5)).await.unwrap();
    before.create(&ws, &task_file("b1", "c1", "bob", TaskState::Completed, 6)).await.unwrap();
    let mut listed_before = Vec::new();
    for request in &requests {
        listed_before
            .push(before.list_page(&alice, request, &always_live).await.unwrap().into_response());
    }
    assert_eq!(summary(&listed_before[0]), (vec!["t1", "t4", "t3", "t2"], 4, false));

    // A new process: a fresh store, the same files.
    let after = TaskStore::new();
    for (request, expected) in requests.iter().zip(&listed_before) {
        assert_eq!(
            &after.list_page(&alice, request, &always_live).await.unwrap().into_response(),
            expected
        );
    }
}

#[tokio::test]
async fn store_list_recovers_stale_tasks_before_filtering() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    let alice = caller(&ws, "alice");
    store.create(&ws, &task_file("t1", "c1", "alice", TaskState::Working, 1)).await.unwrap();
    store.create(&ws, &task_file("t2", "c1", "alice", TaskState::Working, 2)).await.unwrap();
    store.create(&ws, &task_file("t3", "c1", "alice", TaskState::InputRequired, 3)).await.unwrap();
    let live = |id: &str| id == "t2";
    let working = ListTasksRequest { status: Some(TaskState::Working), ..request() };
    let listed = store.list_page(&alice, &working, &live).await.unwrap().into_response();
    assert_eq!(summary(&listed), (vec!["t2"], 1, false));
    let failed = ListTasksRequest { status: Some(TaskState::Failed), ..request() };
    let listed = store.list_page(&alice, &failed, &live).await.unwrap().into_response();
    assert_eq!(summary(&listed), (vec!["t1"], 1, false));
    assert_eq!(listed.tasks[0].status, read_file(dir.path(), "t1").task.status);
    assert_eq!(read_file(dir.path(), "t3").task.status.state, TaskState::InputRequired);
}

#[test]
fn apply_history_length_table() {
    let task = task_file("t1", "c1", "alice", TaskState::Completed, 0).task;
    let history = |ids: &[&str]| Some(ids.iter().map(|id| message(id)).collect::<Vec<_>>());
    let cases = [
        (None, Ok(history(&["m1", "m2", "m3"]))),
        (Some(0), Ok(None)),
        (Some(1), Ok(history(&["m3"]))),
        (Some(3), Ok(history(&["m1", "m2", "m3"]))),
        (Some(4), Ok(history(&["m1", "m2", "m3"]))),
        (Some(-1), Err(super::InvalidQuery("historyLength must not be negative, got -1".into()))),
    ];
    for (length, expected) in cases {
        let mut shaped = task.clone();
        let result = apply_history_length(&mut shaped, length).map(|()| shaped.history);
        assert_eq!(result, expected, "{length:?}");
    }
    let mut bare = Task { history: None, ..task };
    assert_eq!(apply_history_length(&mut bare, Some(2)), Ok(()));
    assert_eq!(bare.history, None);
}

#[test]
fn store_futures_are_send() {
    fn is_send<T: Send>(_: &T) {}
    let store = TaskStore::new();
    let ws = workspace(Path::new("/nonexistent"));
    let alice = caller(&ws, "alice");
    let file = task_file("t1", "c1", "alice", TaskState::Completed, 0);
    is_send(&store.load(&alice, "t1", &always_live));
    is_send(&store.list_page(&alice, &request(), &always_live));
    is_send(&store.save(&ws, &file));
}

#[tokio::test]
async fn store_recent_lists_every_caller_newest_first_within_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let store = TaskStore::new();
    for (i, name) in ["alice", "bob", "alice"].iter().enumerate() {
        let id = format!("t{i}");
        let secs = i64::try_from(i).unwrap();
        store.create(&ws, &task_file(&id, "c", name, TaskState::Completed, secs)).await.unwrap();
    }
    let recent = store.recent(dir.path(), 2).await.unwrap();
    let listed: Vec<(&str, &str)> =
        recent.iter().map(|t| (t.id.as_str(), t.caller.as_str())).collect();
    assert_eq!(listed, vec![("t2", "alice"), ("t1", "bob")]);
    assert_eq!(crate::task::state_name(&recent[0].state), "completed");
}

#[test]
fn tasks_dir_is_the_workspace_a2a_tasks_folder() {
    for workspace in ["/srv/ws", "/srv/ws/", "relative/ws", ""] {
        let workspace = Path::new(workspace);
        assert_eq!(tasks_dir(workspace), workspace.join(".volcanic").join("a2a").join("tasks"));
    }
}

/// GetTask's view of a task, from the cache or the file.
#[cfg(target_os = "linux")]
async fn view(store: &TaskStore, alice: &Caller, id: &str) -> Task {
    match store.load_view(alice, id, &never_live).await.unwrap() {
        super::read::Loaded::Settled(cached) => {
            cached.json.to_task(None, super::json::Artifacts::Shown)
        }
        super::read::Loaded::File(file) => file.task,
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn store_cache_follows_task_files_changed_through_another_name() {
    // The task folder's watch reports changes made through the folder only; a task file that
    // has a second hard link elsewhere is checked by its stamp.
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(&dir.path().join("ws"));
    let alice = caller(&ws, "alice");
    let store = TaskStore::new();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(tasks_dir(&ws.path)).unwrap();
    let text_of =
        |task: &Task| task.artifacts.as_ref().unwrap()[0].parts[0].as_text().map(str::to_string);
    type Link<'a> = (&'a str, &'a dyn Fn(&Path, &Path));
    // A symbolic link is not read at all (`safe_file` refuses it, so a caller cannot make the store read outside the folder; see
    // `store_task_file_that_is_not_a_regular_file_or_over_the_cap_is_not_found`).
    let cases: [Link; 2] = [
        ("plain", &|_, _| {}),
        ("hard link", &|inside, target| std::fs::hard_link(target, inside).unwrap()),
    ];
    for (n, (what, link)) in cases.into_iter().enumerate() {
        let id = format!("t{n}");
        let inside = task_path(&ws.path, &id);
        let target = outside.join(format!("{id}.json"));
        let file_of = |text: &str| {
            let mut file = task_file(&id, "c1", "alice", TaskState::Completed, 1);
            file.task.artifacts.as_mut().unwrap()[0].parts = vec![Part::text(text)];
            file
        };
        // In place (the same inode), as an editor that truncates and rewrites does.
        let put = |path: &Path, text: &str| {
            std::fs::write(path, serde_json::to_vec_pretty(&file_of(text)).unwrap()).unwrap();
        };
        if what == "plain" {
            put(&inside, "before");
        } else {
            put(&target, "before");
            link(&inside, &target);
        }
        // Read twice: the second answer is the cache's.
        assert_eq!(text_of(&view(&store, &alice, &id).await).as_deref(), Some("before"), "{what}");
        assert_eq!(text_of(&view(&store, &alice, &id).await).as_deref(), Some("before"), "{what}");
        // Changed through the other name (for the plain file, through its own).
        put(if what == "plain" { &inside } else { &target }, "after, and longer");
        assert_eq!(
            text_of(&view(&store, &alice, &id).await).as_deref(),
            Some("after, and longer"),
            "{what}"
        );
    }
}
