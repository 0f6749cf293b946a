//! The vocabulary of task states that every layer shares: their lower-case names and which ones
//! end a stream. It sits at the bottom of the crate, beside the task files, so the bindings, the
//! live registry and the operations all import it downward; it knows nothing of any of them.

use a2a::TaskState;

/// The lower-case name of a task state (`completed`, `input-required`), for messages and logs.
pub fn state_name(state: &TaskState) -> &'static str {
    match state {
        TaskState::Unspecified => "unspecified",
        TaskState::Submitted => "submitted",
        TaskState::Working => "working",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::InputRequired => "input-required",
        TaskState::Rejected => "rejected",
        TaskState::AuthRequired => "auth-required",
    }
}

/// Whether a status ends a stream: terminal or interrupted (A2A 1.0.1 §3.1.2, §11.7). The same
/// states set 0.3's `final` flag (A2A 0.3.0 §7.2.2) and make a status change durable at once.
pub(crate) fn ends_stream(state: &TaskState) -> bool {
    state.is_terminal() || matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [TaskState; 9] = [
        TaskState::Unspecified,
        TaskState::Submitted,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::InputRequired,
        TaskState::Rejected,
        TaskState::AuthRequired,
    ];

    #[test]
    fn state_names_are_the_wire_names_in_lower_case() {
        let names: Vec<_> = ALL.iter().map(state_name).collect();
        assert_eq!(
            names,
            [
                "unspecified",
                "submitted",
                "working",
                "completed",
                "failed",
                "canceled",
                "input-required",
                "rejected",
                "auth-required"
            ]
        );
    }

    #[test]
    fn streams_end_at_terminal_and_interrupted_states_only() {
        let ending: Vec<_> =
            ALL.iter().filter(|state| ends_stream(state)).map(state_name).collect();
        assert_eq!(
            ending,
            ["completed", "failed", "canceled", "input-required", "rejected", "auth-required"]
        );
    }
}
