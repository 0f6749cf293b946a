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
