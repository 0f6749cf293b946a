//! What a task status is made of besides its state: the agent's status message and the
//! timestamp, at the millisecond precision the protocol asks for (A2A 1.0.1 §5.6.1). The run, the
//! operations and restart recovery all build statuses with these; it knows only the wire types.

use chrono::SubsecRound;

/// `at` at the millisecond precision of a status timestamp ("now" is the store's clock,
/// `TaskStore::now`).
pub(crate) fn at_status_precision(
    at: chrono::DateTime<chrono::Utc>,
) -> chrono::DateTime<chrono::Utc> {
    at.trunc_subsecs(3)
}

/// Moves the task's status message out of the status, before a new status or a caller's message
/// takes its place. What the agent said to the caller (a question, an answer, a refusal) joins the
/// history, so the history keeps the conversation in the order it was said: the caller's message,
/// the agent's question, the caller's answer (as the official A2A Python SDK orders it). The
/// message of a `working` status is a progress line (`using <tool>`): a status update, which the
/// stream and GetTask showed while it was current, not a turn of the conversation; it is dropped.
pub(crate) fn retire_status_message(task: &mut a2a::Task) {
    if let Some(old) = task.status.message.take()
        && task.status.state != a2a::TaskState::Working
    {
        task.history.get_or_insert_with(Vec::new).push(old);
    }
}

/// A status message from the agent: one text part, addressed to the task and its context.
pub(crate) fn agent_message(
    task_id: &str,
    context_id: &str,
    text: impl Into<String>,
) -> a2a::Message {
    let mut message = a2a::Message::new(a2a::Role::Agent, vec![a2a::Part::text(text)]);
    message.task_id = Some(task_id.to_owned());
    message.context_id = Some(context_id.to_owned());
    message
}
