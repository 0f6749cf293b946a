//! What a request asks of tasks, checked once: the `historyLength` rule (a count of the most
//! recent messages, never negative) and a validated ListTasks query (page size, page token,
//! filters). Pure: no I/O.

use super::error::InvalidQuery;
use super::index::{Filter, SortKey};
use super::json::Artifacts;

/// ListTasks page size when the request has none (A2A 1.0.1 §3.1.4 leaves it to the server).
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// Largest ListTasks page size; a larger one is refused (A2A 1.0.1 §6.5, "Validation Error Example").
pub const MAX_PAGE_SIZE: usize = 100;

/// Applies a `historyLength` (A2A 1.0.1 §3.2.4) to a task about to be returned: `None` keeps
/// everything, 0 omits `history`, n keeps the n most recent messages.
///
/// # Errors
/// [`InvalidQuery`] for a negative length.
pub fn apply_history_length(
    task: &mut a2a::Task,
    history_length: Option<i32>,
) -> Result<(), InvalidQuery> {
    let Some(length) = self::history_length("historyLength", history_length)? else {
        return Ok(());
    };
    if length == 0 {
        task.history = None;
    } else if let Some(history) = &mut task.history {
        let excess = history.len().saturating_sub(length);
        history.drain(..excess);
    }
    Ok(())
}

/// A `historyLength` as a count of messages (see [`apply_history_length`]): the one check of
/// the field, wherever a request carries it; `field` is its name in the error.
///
/// # Errors
/// [`InvalidQuery`] for a negative length.
pub fn history_length(
    field: &str,
    history_length: Option<i32>,
) -> Result<Option<usize>, InvalidQuery> {
    history_length
        .map(|length| {
            usize::try_from(length)
                .map_err(|_| InvalidQuery(format!("{field} must not be negative, got {length}")))
        })
        .transpose()
}

/// A validated ListTasks request.
#[derive(Debug, Clone)]
pub(super) struct Query {
    pub(super) filter: Filter,
    pub(super) cursor: Option<SortKey>,
    pub(super) page_size: usize,
    pub(super) history_length: Option<usize>,
    pub(super) artifacts: Artifacts,
}

impl Query {
    pub(super) fn parse(request: &a2a::ListTasksRequest) -> Result<Query, InvalidQuery> {
        let page_size = match request.page_size {
            None => DEFAULT_PAGE_SIZE,
            Some(size) => usize::try_from(size)
                .ok()
                .filter(|size| (1..=MAX_PAGE_SIZE).contains(size))
                .ok_or_else(|| {
                    InvalidQuery(format!(
                        "pageSize must be between 1 and {MAX_PAGE_SIZE}, got {size}"
                    ))
                })?,
        };
        let history_length = history_length("historyLength", request.history_length)?;
        let cursor =
            match request.page_token.as_deref() {
                None | Some("") => None,
                Some(token) => Some(SortKey::from_token(token).ok_or_else(|| {
                    InvalidQuery("pageToken is not one this server issued".into())
                })?),
            };
        let filter = Filter {
            context_id: request.context_id.clone().filter(|id| !id.is_empty()),
            // TASK_STATE_UNSPECIFIED is the proto default, i.e. no filter.
            state: request.status.clone().filter(|s| *s != a2a::TaskState::Unspecified),
            after: request.status_timestamp_after,
        };
        Ok(Query {
            filter,
            cursor,
            page_size,
            history_length,
            artifacts: match request.include_artifacts {
                Some(true) => Artifacts::Shown,
                Some(false) | None => Artifacts::Omitted,
            },
        })
    }
}
