//! Where task files live: `<workspace>/.volcanic/a2a/tasks/<taskId>.json`. The store, the index
//! and the push secrets' scan all build their paths here; it knows nothing of what the files hold.

use std::path::{Path, PathBuf};

/// The task folder of a workspace: `<workspace>/.volcanic/a2a/tasks`.
pub fn tasks_dir(workspace: &Path) -> PathBuf {
    in_tasks_dir(workspace, 0)
}

/// The file of task `id` (a valid id: [`super::id::is_valid_id`]).
pub(crate) fn task_path(workspace: &Path, id: &str) -> PathBuf {
    // One allocation: GetTask and every task of a list build this path.
    let mut path = in_tasks_dir(workspace, 1 + id.len() + ".json".len());
    path.push(id);
    path.as_mut_os_string().push(".json");
    path
}

/// [`tasks_dir`] with room for `more` bytes, in one allocation.
fn in_tasks_dir(workspace: &Path, more: usize) -> PathBuf {
    const PARTS: [&str; 3] = [".volcanic", "a2a", "tasks"];
    let extra: usize = PARTS.iter().map(|part| part.len() + 1).sum();
    let mut path = PathBuf::with_capacity(workspace.as_os_str().len() + extra + more);
    path.push(workspace);
    PARTS.iter().for_each(|part| path.push(part));
    path
}
