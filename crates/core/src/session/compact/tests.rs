use serde_json::json;

use super::*;
use crate::message::{AssistantMessage, StopReason, ToolCall};

fn user(text: &str) -> Message {
    Message::user(text)
}

fn said(text: &str, usage: u64) -> Message {
    Message::Assistant(AssistantMessage {
        content: vec![AssistantBlock::Text { text: text.into() }],
        usage: Usage { input_tokens: usage, ..Usage::default() },
        ..AssistantMessage::default()
    })
}

fn call(id: &str) -> Message {
    Message::Assistant(AssistantMessage {
        content: vec![AssistantBlock::ToolCall(ToolCall {
            id: id.into(),
            name: "bash".into(),
            args: json!({"command": "cat big"}),
        })],
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    })
}

fn result(id: &str, bytes: usize) -> Message {
    Message::ToolResult(ToolResult {
        call_id: id.into(),
        tool: "bash".into(),
        content: "x".repeat(bytes),
        is_error: false,
        details: Value::Null,
    })
}

/// Ten exchanges of about 250 tokens each, the odd ones with a 4,000-byte tool result.
fn conversation() -> Vec<Message> {
    let mut messages = Vec::new();
    for i in 0..10 {
        messages.push(user(&format!("question {i} {}", "q".repeat(400))));
        if i % 2 == 1 {
            messages.push(call(&format!("c{i}")));
            messages.push(result(&format!("c{i}"), 4000));
        }
        messages.push(said(&format!("answer {i} {}", "a".repeat(400)), 0));
    }
    messages
}

fn config() -> CompactionConfig {
    CompactionConfig::default()
}

#[test]
fn a_cut_never_separates_a_call_from_its_result_nor_passes_the_latest_user_message() {
    let messages = conversation();
    let last_user = messages.iter().rposition(|m| matches!(m, Message::User { .. })).unwrap();
    for window in [400, 1000, 2000, 4000, 8000, 100_000] {
        for force in [Force::Threshold, Force::Overflow, Force::Owner] {
            let plan = plan(&messages, &Compaction::default(), window, &config(), force);
            assert!(plan.cut <= last_user, "{window} {force:?}: {plan:?}");
            for at in [plan.cut, plan.trim_before] {
                assert!(
                    !matches!(messages.get(at), Some(Message::ToolResult(_))),
                    "{window} {force:?}: {plan:?} lands on a result"
                );
            }
        }
    }
}

#[test]
fn the_recent_part_takes_at_most_its_share_and_the_owner_keeps_only_the_last_exchange() {
    let messages = conversation();
    // 25 % of 8,000 tokens: 2,000 tokens, the last exchanges up to the one whose 1,000-token
    // result would not fit.
    let plan = plan(&messages, &Compaction::default(), 8000, &config(), Force::Threshold);
    let kept: u64 = messages[plan.trim_before..].iter().map(message_tokens).sum();
    assert!(kept <= 2000, "{kept}");
    assert!(kept > 1000, "{kept}");
    let owner = super::plan(&messages, &Compaction::default(), 4000, &config(), Force::Owner);
    let last_user = messages.iter().rposition(|m| matches!(m, Message::User { .. })).unwrap();
    assert_eq!(owner, Plan { cut: last_user, trim_before: last_user });
    let overflow = super::plan(&messages, &Compaction::default(), 8000, &config(), Force::Overflow);
    assert!(overflow.trim_before > plan.trim_before, "{overflow:?} keeps half as much");
}

#[test]
fn cuts_and_trims_only_move_forward() {
    let messages = conversation();
    let current = Compaction {
        summary: Some(Summary { cut: 20, text: "earlier".into() }),
        trim_before: 22,
        trim_above: 2048,
        at: 25,
    };
    let plan = plan(&messages, &current, 1_000_000, &config(), Force::Threshold);
    assert_eq!(plan, Plan { cut: 20, trim_before: 22 });
}

#[test]
fn the_view_is_the_summary_then_the_rest_with_old_large_results_trimmed() {
    let messages = vec![
        user("first"),
        said("one", 0),
        user("second"),
        call("a"),
        result("a", 5000),
        said("two", 0),
        user("third"),
        call("b"),
        result("b", 5000),
    ];
    let compaction = Compaction {
        summary: Some(Summary { cut: 2, text: "They said first.".into() }),
        trim_before: 6,
        trim_above: 2048,
        at: 9,
    };
    let view = view(&messages, &compaction);
    assert_eq!(view.len(), 8);
    assert_eq!(view[0], Message::Note { text: format!("{SUMMARY_HEADER}\n\nThey said first.") });
    assert_eq!(
        view[1..4],
        messages[2..5].iter().take(2).chain([&view[3]]).cloned().collect::<Vec<_>>()[..]
    );
    let Message::ToolResult(trimmed) = &view[3] else { panic!("{:?}", view[3]) };
    assert!(trimmed.content.starts_with("[Trimmed to save room"), "{}", trimmed.content);
    assert!(trimmed.content.contains("5000 bytes"));
    assert!(trimmed.content.len() < 600);
    assert_eq!(view[4..], messages[5..]);
    assert_eq!(count_trimmed(&messages, 2, 6, 2048), 1);
}

#[test]
fn fullness_is_the_latest_reported_usage_plus_an_estimate_of_what_came_after() {
    let messages = vec![user("hi"), said("hello", 5000), user(&"z".repeat(400))];
    assert_eq!(occupied(300, &messages, &Compaction::default()), 5000 + 100);
    // An answer made before the latest compaction measured the old view: estimate instead.
    let compaction = Compaction { at: 2, ..Compaction::default() };
    let estimate = 300
        + [&messages[0], &messages[1], &messages[2]].iter().map(|m| message_tokens(m)).sum::<u64>();
    assert_eq!(occupied(300, &messages, &compaction), estimate);
}

#[test]
fn a_record_rebuilds_the_view_and_refuses_one_that_does_not_fit() {
    let messages = conversation();
    let compaction = Compaction {
        summary: Some(Summary { cut: 6, text: "s".into() }),
        trim_before: 9,
        trim_above: 2048,
        at: 12,
    };
    let record = compaction.record(Report { summarized: 6, ..Report::default() });
    let line = serde_json::to_string(&record).unwrap();
    let back: CompactionRecord = serde_json::from_str(&line).unwrap();
    assert_eq!(back.restore(&messages), Some(compaction.clone()));
    assert_eq!(back.restore(&messages[..5]), None, "cut past the end");
    let on_result = CompactionRecord { cut: 4, ..back.clone() };
    assert!(matches!(messages[4], Message::ToolResult(_)));
    assert_eq!(on_result.restore(&messages), None, "cut on a tool result");
}

#[test]
fn the_summary_request_folds_the_previous_summary_in_and_fits_the_window() {
    let messages = conversation();
    let compaction = Compaction {
        summary: Some(Summary { cut: 3, text: "remember: the cat is Tom".into() }),
        ..Compaction::default()
    };
    let request = summary_request("m", &messages, &compaction, 20, 100_000, Some("the dates"));
    assert_eq!(request.system, SUMMARY_SYSTEM_PROMPT);
    assert!(request.tools.is_empty());
    let Message::User { text } = &request.messages[0] else { panic!() };
    assert!(
        text.contains("### summary of the conversation before this part\nremember: the cat is Tom")
    );
    assert!(text.contains("### user\nquestion 2"), "starts at the cut");
    assert!(!text.contains("question 1 "), "what the summary covers is not sent again");
    assert!(text.contains("[tool call: bash {\"command\":\"cat big\"}]"));
    assert!(text.ends_with("keep in particular:\nthe dates"));
    // A small window keeps the newest part of the transcript only.
    let small = summary_request("m", &messages, &compaction, 20, 7000, None);
    let Message::User { text: small } = &small.messages[0] else { panic!() };
    assert!(small.len() < text.len());
    assert!(small.contains("older messages") && small.contains("left out"));
    assert!(small.contains("answer 6"), "the newest part is kept");
}

#[test]
fn the_owner_line_says_what_happened() {
    let notice = |summarized, trimmed, error: Option<&str>| {
        Compacted {
            summarized,
            trimmed,
            tokens_before: 96_400,
            tokens_after: 18_000,
            error: error.map(str::to_string),
            usage: Usage::default(),
            model: String::new(),
        }
        .to_string()
    };
    assert_eq!(notice(143, 2, None), "Compacted 143 older messages (96k → 18k tokens)");
    assert_eq!(notice(0, 4, None), "Trimmed 4 old tool results (96k → 18k tokens)");
    assert_eq!(notice(0, 0, None), "Nothing to compact yet (96k tokens)");
    assert_eq!(
        notice(0, 4, Some("overloaded")),
        "Compaction failed (overloaded); nothing was lost, 4 old tool results trimmed (96k → 18k tokens)"
    );
}
