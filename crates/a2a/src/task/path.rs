//! Where task files live: `<workspace>/.volcanic/a2a/tasks/<taskId>.json`. The store, the index,
//! the push secrets' scan and the safe-retry records build their paths and list the folder here;
//! it knows nothing of what the files hold.

use std::fs::{self, DirEntry, Metadata};
use std::io;
use std::path::{Path, PathBuf};

use super::id::is_valid_id;

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

/// One task file found by [`task_files`]: a regular file named `<valid task id>.json`.
pub(crate) struct ListedTaskFile {
    /// The file name, `<id>.json`.
    name: String,
    pub(crate) entry: DirEntry,
    pub(crate) meta: Metadata,
}

impl ListedTaskFile {
    /// The task id the file is named for.
    pub(crate) fn id(&self) -> &str {
        &self.name[..self.name.len() - ".json".len()]
    }
}

/// The task files of the folder `dir`, in the folder's order. Skipped: names that are not a valid
/// task id plus `.json` (so the `.tmp*` files of writes in progress: a dot is not allowed in an
/// id), entries whose metadata cannot be read, and anything but regular files (`metadata` of a
/// directory entry does not follow links, so a planted symlink is skipped too).
///
/// # Errors
/// The folder cannot be listed (a missing folder is `NotFound`).
pub(crate) fn task_files(dir: &Path) -> io::Result<impl Iterator<Item = ListedTaskFile> + use<>> {
    Ok(fs::read_dir(dir)?.flatten().filter_map(|entry| {
        let name = entry.file_name().into_string().ok()?;
        if !name.strip_suffix(".json").is_some_and(is_valid_id) {
            return None;
        }
        let meta = entry.metadata().ok()?;
        meta.is_file().then_some(ListedTaskFile { name, entry, meta })
    }))
}
