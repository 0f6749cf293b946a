//! Journal round trip as a property: whatever a conversation holds (any text, tool calls with any
//! ids and arguments), appending it and loading the journal again gives the same messages and
//! nothing to repair.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::message::{AssistantBlock, AssistantMessage, StopReason, ToolCall, Usage};

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        any::<String>().prop_map(|text| Message::User { text }),
        any::<String>().prop_map(|text| Message::Note { text }),
        (any::<String>(), any::<String>(), any::<bool>(), any::<(u32, u32)>()).prop_map(
            |(text, thinking, is_error, (input, output))| {
                Message::Assistant(AssistantMessage {
                    content: vec![
                        AssistantBlock::Text { text },
                        AssistantBlock::Thinking { text: thinking, signature: None },
                    ],
                    stop_reason: if is_error { StopReason::Error } else { StopReason::Stop },
                    error: is_error.then(|| "provider failed".to_string()),
                    usage: Usage {
                        input_tokens: input.into(),
                        output_tokens: output.into(),
                        ..Usage::default()
                    },
                    provider: String::new(),
                    model: "m".into(),
                })
            }
        ),
    ]
}

/// A tool call and its result, with the same id.
fn tool_round() -> impl Strategy<Value = [Message; 2]> {
    (any::<String>(), any::<String>(), any::<String>(), any::<bool>()).prop_map(
        |(id, arg, content, is_error)| {
            let call =
                ToolCall { id: id.clone(), name: "bash".into(), args: json!({"command": arg}) };
            [
                Message::Assistant(AssistantMessage {
                    content: vec![AssistantBlock::ToolCall(call)],
                    stop_reason: StopReason::ToolUse,
                    ..AssistantMessage::default()
                }),
                Message::ToolResult(ToolResult {
                    call_id: id,
                    tool: "bash".into(),
                    content,
                    is_error,
                    details: serde_json::Value::Null,
                }),
            ]
        },
    )
}

fn conversation() -> impl Strategy<Value = Vec<Message>> {
    prop::collection::vec(
        prop_oneof![message().prop_map(|m| vec![m]), tool_round().prop_map(Vec::from)],
        0..12,
    )
    .prop_map(|rounds| rounds.into_iter().flatten().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn journal_appended_conversation_loads_back_unchanged(messages in conversation()) {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let redactor = Redactor::default();
        let cwd = Path::new("/ws");
        {
            let mut loaded = Journal::open(dir.path(), "prop", cwd, &redactor)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let run_id = "r1".to_string();
            let append = |journal: &mut Journal, entry: Entry| {
                journal.append(&entry, &redactor).map_err(|e| TestCaseError::fail(e.to_string()))
            };
            append(&mut loaded.journal, Entry::RunStart { run_id: run_id.clone(), ts: now() })?;
            for message in &messages {
                let entry =
                    Entry::Message { run_id: run_id.clone(), ts: now(), message: message.clone() };
                append(&mut loaded.journal, entry)?;
            }
            let end = Entry::RunEnd { run_id, ts: now(), outcome: RunEnd::Completed };
            append(&mut loaded.journal, end)?;
        }
        let again = Journal::open(dir.path(), "prop", cwd, &redactor)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(again.messages, messages);
        prop_assert_eq!(again.report, LoadReport::default());
    }
}
