//! Task files: parsing, the serialised form, and loading through the store (restart recovery
//! included) for whatever bytes a task file holds.
#![no_main]

use std::sync::{Arc, LazyLock};

use libfuzzer_sys::fuzz_target;
use tempfile::TempDir;
use volcanic_a2a::auth::{A2aWorkspace, Caller, CallerMode, CallerTier};
use volcanic_a2a::task::TaskFile;
use volcanic_a2a::task::store::{TaskStore, tasks_dir};

struct Fixture {
    _dir: TempDir,
    caller: Caller,
    runtime: tokio::runtime::Runtime,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let dir = tempfile::tempdir().expect("a temp dir");
    let workspace = A2aWorkspace {
        path: dir.path().to_path_buf(),
        scope_prefix: "fuzz".into(),
        owner_id: "owner".into(),
    };
    std::fs::create_dir_all(tasks_dir(&workspace.path)).expect("the tasks folder");
    let caller = Caller {
        name: "peer".into(),
        mode: CallerMode::Isolated,
        tier: CallerTier::Workspace,
        approval: Default::default(),
        limits: Default::default(),
        workspace: Arc::new(workspace),
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    Fixture { _dir: dir, caller, runtime }
});

const ID: &str = "t1";

fuzz_target!(|data: &[u8]| {
    let fixture = &*FIXTURE;
    let parsed = serde_json::from_slice::<TaskFile>(data).ok();
    if let Some(file) = &parsed {
        // What we write, we read back as the same value.
        let written = serde_json::to_value(file).expect("a task file serialises");
        let again: TaskFile = serde_json::from_value(written.clone()).expect("it parses back");
        assert_eq!(serde_json::to_value(&again).expect("serialises"), written);
    }

    let path = tasks_dir(&fixture.caller.workspace.path).join(format!("{ID}.json"));
    std::fs::write(&path, data).expect("the task file is writable");
    let store = TaskStore::new();
    let not_live = |_: &str| false;
    let loaded = fixture.runtime.block_on(store.load(&fixture.caller, ID, &not_live));
    let expected = parsed
        .as_ref()
        .is_some_and(|file| file.task.id == ID && file.caller == fixture.caller.name);
    assert_eq!(loaded.is_ok(), expected, "load disagrees with the parse: {loaded:?}");
    if let Ok(file) = &loaded {
        assert_eq!(file.task.id, ID);
        // Without a live run, a submitted or working task reads as failed, and is saved so.
        assert!(
            !matches!(file.task.status.state, a2a::TaskState::Submitted | a2a::TaskState::Working),
            "a stale task was not recovered"
        );
        let on_disk: TaskFile = serde_json::from_slice(&std::fs::read(&path).expect("readable"))
            .expect("the recovered file parses");
        assert_eq!(on_disk.task.status.state, file.task.status.state);
    }
    let everything = a2a::ListTasksRequest {
        context_id: None,
        status: None,
        page_size: None,
        page_token: None,
        history_length: None,
        status_timestamp_after: None,
        include_artifacts: None,
        tenant: None,
    };
    let listed = fixture
        .runtime
        .block_on(store.list_page(&fixture.caller, &everything, &not_live))
        .expect("listing never fails on a bad file")
        .into_response();
    if loaded.is_ok() {
        assert!(listed.tasks.iter().any(|task| task.id == ID), "a loadable task is not listed");
    }
});
