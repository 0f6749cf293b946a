//! Prompt building from message parts: whatever the parts and their file names, every saved file
//! lands directly in the caller's folder `inbox/a2a/<caller>/`, one per byte part, under the
//! workspace-relative path the prompt names.
//!
//! Input: a JSON array of 1.0 parts, or else one byte part built from `NAME\0MEDIA_TYPE\0BYTES`.
#![no_main]

use std::path::{Component, Path};
use std::sync::{Arc, LazyLock};

use a2a::{Part, PartContent};
use libfuzzer_sys::fuzz_target;
use tempfile::TempDir;
use volcanic_a2a::auth::{A2aWorkspace, Caller, CallerMode, CallerTier};
use volcanic_a2a::fuzzing::{build_prompt, inbox_file_name};

static ROOT: LazyLock<(TempDir, tokio::runtime::Runtime)> = LazyLock::new(|| {
    let dir = tempfile::tempdir().expect("a temp dir");
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    (dir, runtime)
});

/// The folders a prompt may create under the temp root: the workspace, its inbox, the A2A
/// inbox and the caller's folder in it.
const FOLDERS: [&str; 4] = ["ws", "ws/inbox", "ws/inbox/a2a", "ws/inbox/a2a/peer"];

fn parts(data: &[u8]) -> Vec<Part> {
    if let Ok(parts) = serde_json::from_slice::<Vec<Part>>(data) {
        return parts;
    }
    let mut fields = data.splitn(3, |&b| b == 0);
    let name = String::from_utf8_lossy(fields.next().unwrap_or_default()).into_owned();
    let media_type = fields.next().map(|m| String::from_utf8_lossy(m).into_owned());
    let bytes = fields.next().unwrap_or_default().to_vec();
    let mut part = Part::raw(bytes).with_filename(name);
    if let Some(media_type) = media_type {
        part = part.with_media_type(media_type);
    }
    vec![part]
}

/// Every path under `dir`, relative to it.
fn tree(dir: &Path, base: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable").flatten() {
        let path = entry.path();
        out.push(path.strip_prefix(base).expect("under base").to_path_buf());
        if entry.file_type().expect("a file type").is_dir() {
            tree(&path, base, out);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (root, runtime) = &*ROOT;
    let parts = parts(data);
    let bytes_parts = parts.iter().filter(|p| matches!(p.content, PartContent::Raw(_))).count();
    if bytes_parts > 20 {
        return;
    }
    for part in &parts {
        let url = match &part.content {
            PartContent::Url(url) => Some(url.as_str()),
            PartContent::Text(_) | PartContent::Raw(_) | PartContent::Data(_) => None,
        };
        let name = inbox_file_name(part, url, part.media_type.as_deref());
        let components: Vec<Component> = Path::new(&name).components().collect();
        assert!(
            matches!(components.as_slice(), [Component::Normal(n)] if *n == name.as_str()),
            "file name {name:?} is not one plain component"
        );
        assert!(!name.starts_with('.'), "hidden or dot file name {name:?}");
        assert!(name.len() <= 100, "file name of {} bytes", name.len());
    }

    let workspace_dir = root.path().join("ws");
    let caller = Caller {
        name: "peer".into(),
        mode: CallerMode::Isolated,
        tier: CallerTier::Workspace,
        approval: Default::default(),
        limits: Default::default(),
        workspace: Arc::new(A2aWorkspace {
            path: workspace_dir.clone(),
            scope_prefix: "fuzz".into(),
            owner_id: "owner".into(),
        }),
    };
    // The workspace exists (the server checks it at start, and the intake walks from it without
    // creating it); the intake makes the inbox folders below it.
    std::fs::create_dir_all(&workspace_dir).ok();
    let prompt = runtime.block_on(build_prompt(&caller, &parts, false));
    let mut found = Vec::new();
    tree(root.path(), root.path(), &mut found);
    let mut saved = Vec::new();
    for path in &found {
        let components: Vec<Component> = path.components().collect();
        match components.as_slice() {
            _ if FOLDERS.iter().any(|folder| path == Path::new(folder)) => {}
            [_, _, _, _, Component::Normal(name)] if path.starts_with("ws/inbox/a2a/peer") => {
                assert!(root.path().join(path).is_file(), "{path:?} is not a plain file");
                saved.push(name.to_string_lossy().into_owned());
            }
            _ => panic!("a file escaped inbox/a2a/peer/: {path:?}"),
        }
    }
    let prompt = prompt.expect("writing into a temp inbox succeeds");
    assert_eq!(saved.len(), bytes_parts, "one file per byte part");
    for name in &saved {
        let named = format!("inbox/a2a/peer/{name}");
        assert!(prompt.contains(&named), "the prompt does not name {named}");
    }
    std::fs::remove_dir_all(&workspace_dir).ok();
});
