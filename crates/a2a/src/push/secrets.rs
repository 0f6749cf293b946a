//! The push tokens and credentials of every task of each workspace, as redaction values.
//!
//! A caller's session must not give back another caller's push token (it could read it from a
//! task file before the sandbox hid them, and a model can be talked into repeating anything it
//! saw), so every token and credential registered on any task of a workspace is a secret of
//! every session of that workspace. The task store reports each task file it writes
//! ([`PushSecrets::record`]); the files written before this process started are read once per
//! workspace ([`PushSecrets::load`], blocking) before its first session opens.
//!
//! Invariant: no log line of this module contains a token or credential.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::Deserialize;
use volcanic_core::redact::{Secret, SecretSnapshot};

use super::StoredPushConfig;

/// Task files larger than this are not read for their push configs (a task file holds the
/// caller's messages and files, and its configs come first only by chance).
const MAX_SCANNED_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Push secrets by workspace folder.
#[derive(Default)]
pub struct PushSecrets {
    workspaces: Mutex<HashMap<PathBuf, Workspace>>,
}

impl std::fmt::Debug for PushSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PushSecrets([redacted])")
    }
}

#[derive(Default)]
struct Workspace {
    /// Whether the task files written before this process were read.
    loaded: bool,
    /// Each task's tokens and credentials.
    by_task: HashMap<String, Vec<String>>,
    /// Bumped whenever `by_task`'s values change.
    version: u64,
    /// Every value of `by_task`, made on the first snapshot after a change.
    snapshot: Option<Arc<[Secret]>>,
}

/// The part of a task file this module reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PushOnly {
    #[serde(default)]
    push_configs: Vec<StoredPushConfig>,
}

/// The values of `configs` worth redacting: tokens and authentication credentials.
fn values_of(configs: &[StoredPushConfig]) -> Vec<String> {
    let mut values = Vec::new();
    for stored in configs {
        if let Some(token) = stored.config.token.as_deref().filter(|t| !t.is_empty()) {
            values.push(token.to_string());
        }
        if let Some(credentials) = stored
            .config
            .authentication
            .as_ref()
            .and_then(|auth| auth.credentials.as_deref())
            .filter(|c| !c.is_empty())
        {
            values.push(credentials.to_string());
        }
    }
    values
}

impl PushSecrets {
    /// An empty registry.
    pub fn new() -> Self {
        PushSecrets::default()
    }

    /// Task `task_id` of `workspace` now has `configs` (called on every task file write).
    pub fn record(&self, workspace: &Path, task_id: &str, configs: &[StoredPushConfig]) {
        let values = values_of(configs);
        let mut workspaces = self.lock();
        let Some(entry) = workspaces.get_mut(workspace) else {
            if values.is_empty() {
                return;
            }
            let mut fresh = Workspace::default();
            fresh.by_task.insert(task_id.to_string(), values);
            fresh.version = 1;
            workspaces.insert(workspace.to_path_buf(), fresh);
            return;
        };
        let old = entry.by_task.get(task_id).map_or(&[][..], Vec::as_slice);
        if old == values.as_slice() {
            return;
        }
        if values.is_empty() {
            entry.by_task.remove(task_id);
        } else {
            entry.by_task.insert(task_id.to_string(), values);
        }
        entry.version += 1;
        entry.snapshot = None;
    }

    /// Whether [`PushSecrets::load`] has read `workspace`'s task files.
    pub fn is_loaded(&self, workspace: &Path) -> bool {
        self.lock().get(workspace).is_some_and(|w| w.loaded)
    }

    /// Reads the push configs of every task file of `workspace` the first time it is asked
    /// for; later calls return at once. Blocking: run it on the blocking pool.
    pub fn load(&self, workspace: &Path) {
        if self.is_loaded(workspace) {
            return;
        }
        let dir = crate::task::path::tasks_dir(workspace);
        let mut found: Vec<(String, Vec<String>)> = Vec::new();
        if let Ok(files) = crate::task::path::task_files(&dir) {
            for listed in files {
                if listed.meta.len() > MAX_SCANNED_FILE_BYTES {
                    continue;
                }
                let Ok(bytes) = std::fs::read(listed.entry.path()) else { continue };
                let Ok(file) = serde_json::from_slice::<PushOnly>(&bytes) else { continue };
                let values = values_of(&file.push_configs);
                if !values.is_empty() {
                    found.push((listed.id().to_string(), values));
                }
            }
        }
        let mut workspaces = self.lock();
        let entry = workspaces.entry(workspace.to_path_buf()).or_default();
        if entry.loaded {
            return;
        }
        entry.loaded = true;
        for (id, values) in found {
            // A write recorded while the folder was read is newer than the file we read.
            entry.by_task.entry(id).or_insert(values);
        }
        entry.version += 1;
        entry.snapshot = None;
    }

    /// The workspace's tokens and credentials now (named `a2a-push-secret`).
    pub fn snapshot(&self, workspace: &Path) -> SecretSnapshot {
        let mut workspaces = self.lock();
        let Some(entry) = workspaces.get_mut(workspace) else {
            return SecretSnapshot { version: 0, secrets: Arc::from(Vec::new()) };
        };
        let secrets = entry
            .snapshot
            .get_or_insert_with(|| {
                entry
                    .by_task
                    .values()
                    .flatten()
                    .map(|value| Secret { name: "a2a-push-secret".into(), value: value.clone() })
                    .collect()
            })
            .clone();
        SecretSnapshot { version: entry.version, secrets }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<PathBuf, Workspace>> {
        self.workspaces.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(token: Option<&str>, credentials: Option<&str>) -> StoredPushConfig {
        let mut value = serde_json::json!({"url": "https://hook.example.com", "id": "c1"});
        if let Some(token) = token {
            value["token"] = token.into();
        }
        if let Some(credentials) = credentials {
            value["authentication"] =
                serde_json::json!({"scheme": "Bearer", "credentials": credentials});
        }
        serde_json::from_value(value).unwrap()
    }

    fn values(secrets: &PushSecrets, workspace: &Path) -> Vec<String> {
        let mut values: Vec<String> =
            secrets.snapshot(workspace).secrets.iter().map(|s| s.value.clone()).collect();
        values.sort();
        values
    }

    #[test]
    fn push_secrets_follow_recorded_configs_and_files_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = crate::task::path::tasks_dir(dir.path());
        std::fs::create_dir_all(&tasks).unwrap();
        let on_disk = serde_json::json!({"id": "t-old", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
            "caller": "a", "pushConfigs": [{"url": "https://h", "id": "x", "token": "old-token-123"}]});
        std::fs::write(tasks.join("t-old.json"), on_disk.to_string()).unwrap();
        let secrets = PushSecrets::new();
        secrets.record(dir.path(), "t1", &[config(Some("token-one-1"), Some("cred-one-1"))]);
        let before = secrets.snapshot(dir.path()).version;
        secrets.load(dir.path());
        assert_eq!(
            values(&secrets, dir.path()),
            vec!["cred-one-1", "old-token-123", "token-one-1"]
        );
        assert!(secrets.snapshot(dir.path()).version > before);
        let loaded = secrets.snapshot(dir.path()).version;
        secrets.record(dir.path(), "t1", &[config(Some("token-one-1"), Some("cred-one-1"))]);
        assert_eq!(secrets.snapshot(dir.path()).version, loaded);
        secrets.record(dir.path(), "t1", &[]);
        assert_eq!(values(&secrets, dir.path()), vec!["old-token-123"]);
        assert!(secrets.snapshot(dir.path()).version > loaded);
        assert_eq!(values(&secrets, Path::new("/elsewhere")), Vec::<String>::new());
    }
}
