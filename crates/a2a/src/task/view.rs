//! The reply view of settled tasks: a GetTask answer ([`TaskView`]) and a ListTasks page
//! ([`TaskPage`]) whose tasks are spliced in as cached JSON bytes, with the answer's
//! `historyLength` and artifacts choice. The bindings encode them; the cache never sees them.

use std::sync::Arc;

use super::cache::CachedTask;
use super::json::Artifacts;

/// A settled task as one answer shows it: its cached JSON, with the answer's `historyLength`
/// and whether artifacts are included.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    task: Arc<CachedTask>,
    history_length: Option<usize>,
    artifacts: Artifacts,
}

impl TaskView {
    pub(crate) fn new(
        task: Arc<CachedTask>,
        history_length: Option<usize>,
        artifacts: Artifacts,
    ) -> Self {
        TaskView { task, history_length, artifacts }
    }

    /// Appends the task's 1.0 wire JSON to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        self.task.json.write(out, self.history_length, self.artifacts);
    }

    /// At least the bytes [`TaskView::write_json`] appends (the whole task's JSON), so an answer
    /// can reserve them at once.
    pub fn size_hint(&self) -> usize {
        self.task.json.size()
    }

    /// The task as a value (for the 0.3 shapes, which are converted from it).
    pub fn to_task(&self) -> a2a::Task {
        self.task.json.to_task(self.history_length, self.artifacts)
    }
}

/// One task of a [`TaskPage`]: from the cache, or built for this answer (a task that was just
/// recovered, or one that cannot be cached).
#[derive(Debug, Clone, PartialEq)]
pub enum PageTask {
    View(TaskView),
    Task(Box<a2a::Task>),
}

impl PageTask {
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            PageTask::View(view) => view.write_json(out),
            PageTask::Task(task) => {
                // a2a wire types serialize infallibly into a Vec (see `binding::wire_json`).
                #[allow(clippy::expect_used)]
                serde_json::to_writer(out, &**task).expect("an a2a::Task serializes");
            }
        }
    }

    /// The bytes of a cached task's JSON; a task built for this answer counts for nothing.
    fn size_hint(&self) -> usize {
        match self {
            PageTask::View(view) => view.size_hint(),
            PageTask::Task(_) => 0,
        }
    }

    fn into_task(self) -> a2a::Task {
        match self {
            PageTask::View(view) => view.to_task(),
            PageTask::Task(task) => *task,
        }
    }
}

/// A ListTasks answer whose tasks are spliced in as JSON bytes: `a2a::ListTasksResponse` without
/// the value tree.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskPage {
    pub tasks: Vec<PageTask>,
    pub next_page_token: String,
    pub page_size: i32,
    pub total_size: i32,
}

impl TaskPage {
    /// Appends the page's 1.0 wire JSON to `out`, as `serde_json::to_vec` of the
    /// `a2a::ListTasksResponse` would write it.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"tasks\":[");
        for (i, task) in self.tasks.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            task.write_json(out);
        }
        out.extend_from_slice(b"],\"nextPageToken\":");
        #[allow(clippy::expect_used)]
        serde_json::to_writer(&mut *out, &self.next_page_token).expect("a string serializes");
        out.extend_from_slice(
            format!(",\"pageSize\":{},\"totalSize\":{}}}", self.page_size, self.total_size)
                .as_bytes(),
        );
    }

    /// About the bytes [`TaskPage::write_json`] appends, to reserve them at once.
    pub fn size_hint(&self) -> usize {
        // The envelope's members, with room for the token and the numbers.
        const ENVELOPE: usize = 128;
        ENVELOPE
            + self.next_page_token.len()
            + self.tasks.iter().map(|task| task.size_hint() + 1).sum::<usize>()
    }

    /// The page as a value (for the 0.3 shape, and for the fuzz target and tests that compare
    /// pages).
    pub fn into_response(self) -> a2a::ListTasksResponse {
        a2a::ListTasksResponse {
            tasks: self.tasks.into_iter().map(PageTask::into_task).collect(),
            next_page_token: self.next_page_token,
            page_size: self.page_size,
            total_size: self.total_size,
        }
    }
}
