//! Writing a workspace's `.volcanic/a2a/callers.json`, the file the A2A server authenticates
//! callers against, for tests that start a server (in process or as a child) with known keys.

use std::path::Path;

use serde_json::{Value, json};

/// Writes `callers` (name, plaintext key) as the workspace's callers.json, creating its folder.
pub fn write_callers(workspace: &Path, callers: &[(&str, &str)]) {
    let dir = workspace.join(".volcanic/a2a");
    std::fs::create_dir_all(&dir).unwrap();
    let list: Vec<Value> =
        callers.iter().map(|(name, key)| json!({"name": name, "key": key})).collect();
    std::fs::write(dir.join("callers.json"), serde_json::to_string_pretty(&list).unwrap()).unwrap();
}
