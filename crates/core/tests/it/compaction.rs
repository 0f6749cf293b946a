//! Compaction end to end: Faux with a small simulated window, real sessions and journals.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use volcanic_core::config::{AgentConfig, CompactionConfig};
use volcanic_core::message::Message;
use volcanic_core::provider::faux::{FauxProvider, FauxScript};
use volcanic_core::session::{Compacted, SUMMARY_SYSTEM_PROMPT};
use volcanic_core::{EventKind, RunFailure, RunOutcome, Session, SessionFactory};

use crate::support::*;

/// The simulated window of these tests, in tokens.
const WINDOW: u64 = 16_000;

fn config(enabled: bool, window: u64) -> AgentConfig {
    AgentConfig {
        compaction: CompactionConfig {
            enabled,
            context_window: Some(window),
            ..CompactionConfig::default()
        },
        ..fast_config()
    }
}

fn factory_with(dirs: &Dirs, faux: &Arc<FauxProvider>, config: AgentConfig) -> SessionFactory {
    SessionFactory::builder(faux.clone(), dirs.state.path()).config(config).build()
}

/// Faux answering like a model with a window of `window` tokens.
fn faux_window(window: u64) -> Arc<FauxProvider> {
    Arc::new(FauxProvider::new().with_context_window(window))
}

/// A user message of about 500 tokens, numbered.
fn long_message(i: usize) -> String {
    format!("message {i}: {}", "words and more words ".repeat(100))
}

/// Runs one prompt; its outcome and the compactions it made.
async fn turn(session: &Session, text: String) -> (RunOutcome, Vec<Compacted>) {
    let (events, settled) = collect(session.prompt(text).unwrap()).await;
    (settled.outcome, compactions(&events))
}

fn compactions(events: &[EventKind]) -> Vec<Compacted> {
    events
        .iter()
        .filter_map(|e| match e {
            EventKind::Compacted(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

fn summary_calls(faux: &FauxProvider) -> usize {
    faux.requests().iter().filter(|r| r.system == SUMMARY_SYSTEM_PROMPT).count()
}

fn user_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::User { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// Answers the provider refused as too long.
fn refusals(session: &Session) -> usize {
    session
        .messages()
        .iter()
        .filter(|m| {
            matches!(m, Message::Assistant(a) if a.error.as_deref().is_some_and(|e| e.starts_with("prompt is too long")))
        })
        .count()
}

/// Lines of each type in the scope's journal.
fn journal_types(dirs: &Dirs, scope: &str) -> std::collections::BTreeMap<String, usize> {
    let text = std::fs::read_to_string(
        dirs.state.path().join("sessions").join(scope).join("session.jsonl"),
    )
    .unwrap();
    let mut counts = std::collections::BTreeMap::new();
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        *counts.entry(value["type"].as_str().unwrap().to_string()).or_default() += 1;
    }
    counts
}

#[tokio::test]
async fn a_conversation_longer_than_the_window_compacts_and_keeps_answering() {
    let dirs = Dirs::new();
    let faux = faux_window(WINDOW);
    let factory = factory_with(&dirs, &faux, config(true, WINDOW));
    let session = open(&factory, &dirs, "long").await;
    let mut seen = Vec::new();
    for i in 0..60 {
        let (outcome, compacted) = turn(&session, long_message(i)).await;
        assert_eq!(outcome, RunOutcome::Completed, "turn {i}");
        seen.extend(compacted);
    }
    assert!(seen.len() >= 2, "{seen:?}");
    for c in &seen {
        assert!(c.summarized > 0 && c.error.is_none(), "{c}");
        assert!(c.tokens_after < c.tokens_before, "{c}");
        assert!(c.to_string().starts_with("Compacted "), "{c}");
    }
    assert_eq!(summary_calls(&faux), seen.len());
    assert_eq!(refusals(&session), 0, "compacted before the window was full");
    // The model's view opens with the summary; the journal still holds every message.
    let view = session.model_view();
    assert!(matches!(&view[0], Message::Note { text } if text.contains("Faux summary of")));
    assert_eq!(user_texts(&session.messages()).len(), 60);
    assert_eq!(journal_types(&dirs, "long")["compaction"], seen.len());
}

#[tokio::test]
async fn without_compaction_the_same_conversation_overflows() {
    let dirs = Dirs::new();
    let faux = faux_window(WINDOW);
    let factory = factory_with(&dirs, &faux, config(false, WINDOW));
    let session = open(&factory, &dirs, "off").await;
    let mut failed = None;
    for i in 0..60 {
        let (outcome, compacted) = turn(&session, long_message(i)).await;
        assert!(compacted.is_empty());
        if let RunOutcome::Failed { error } = outcome {
            failed = Some((i, error));
            break;
        }
    }
    let (i, error) = failed.expect("a 16k window cannot hold 60 messages of 500 tokens");
    assert!(i < 40, "{i}");
    let text = error.to_string();
    assert!(text.starts_with("prompt is too long:"), "{text}");
    assert!(text.contains("/compact") && text.contains("/new"), "{text}");
    assert_eq!(summary_calls(&faux), 0);
}

#[tokio::test]
async fn large_old_tool_results_are_trimmed_before_anything_is_summarised() {
    let dirs = Dirs::new();
    let faux = faux_window(WINDOW);
    let factory = factory_with(&dirs, &faux, config(true, WINDOW));
    let session = open(&factory, &dirs, "trim").await;
    // About 7,500 tokens of output, whole in the journal.
    let big = directive(json!([
        {"tool": "bash", "args": {"command": "head -c 30000 /dev/zero | tr '\\0' x"}},
        {"text": "That was long."}
    ]));
    assert_eq!(turn(&session, big).await.0, RunOutcome::Completed);
    let mut seen = Vec::new();
    for i in 0..12 {
        let (outcome, compacted) = turn(&session, long_message(i)).await;
        assert_eq!(outcome, RunOutcome::Completed);
        seen.extend(compacted);
        if !seen.is_empty() {
            break;
        }
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!((seen[0].summarized, seen[0].trimmed), (0, 1), "{}", seen[0]);
    assert!(seen[0].to_string().starts_with("Trimmed 1 old tool results"));
    assert_eq!(summary_calls(&faux), 0, "trimming was enough");
    let full = session
        .messages()
        .iter()
        .find_map(|m| match m {
            Message::ToolResult(r) => Some(r.content.clone()),
            _ => None,
        })
        .unwrap();
    assert!(full.starts_with(&"x".repeat(30_000)), "the journal keeps the whole output");
    let shown = session
        .model_view()
        .iter()
        .find_map(|m| match m {
            Message::ToolResult(r) => Some(r.content.clone()),
            _ => None,
        })
        .unwrap();
    assert!(shown.starts_with("[Trimmed to save room") && shown.len() < 1000, "{shown}");
    let last = faux.requests().pop().unwrap();
    assert!(
        last.messages.iter().any(|m| matches!(m, Message::ToolResult(r) if r.content == shown))
    );
}

#[tokio::test]
async fn a_resumed_session_shows_the_model_the_view_it_had() {
    let dirs = Dirs::new();
    let faux = faux_window(WINDOW);
    let before = {
        let factory = factory_with(&dirs, &faux, config(true, WINDOW));
        let session = open(&factory, &dirs, "resume").await;
        let mut compacted = 0;
        let mut i = 0;
        while compacted < 2 {
            let (outcome, seen) = turn(&session, long_message(i)).await;
            assert_eq!(outcome, RunOutcome::Completed);
            compacted += seen.len();
            i += 1;
        }
        let view = session.model_view();
        session.close().unwrap();
        view
    };
    let factory = factory_with(&dirs, &faux, config(true, WINDOW));
    let session = open(&factory, &dirs, "resume").await;
    assert_eq!(session.model_view(), before);
    assert_eq!(*session.load_report(), Default::default());
    let (outcome, _) = turn(&session, "and now?".into()).await;
    assert_eq!(outcome, RunOutcome::Completed);
    let sent = faux.requests().pop().unwrap();
    assert_eq!(sent.messages[..before.len()], before[..]);
}

#[tokio::test]
async fn a_context_overflow_compacts_once_and_retries() {
    let dirs = Dirs::new();
    // The session believes the window is large, so only the provider's refusal compacts.
    let faux = faux_window(WINDOW);
    let factory = factory_with(&dirs, &faux, config(true, 1_000_000));
    let session = open(&factory, &dirs, "overflow").await;
    let mut overflowed = None;
    for i in 0..60 {
        let (events, settled) = collect(session.prompt(long_message(i)).unwrap()).await;
        assert_eq!(settled.outcome, RunOutcome::Completed, "turn {i}");
        let refused = events.iter().any(|e| {
            matches!(e, EventKind::MessageEnd { message, .. }
                if matches!(&**message, Message::Assistant(a) if a.error.as_deref().is_some_and(|e| e.starts_with("prompt is too long"))))
        });
        if refused {
            overflowed = Some(compactions(&events));
            break;
        }
    }
    let compacted = overflowed.expect("the provider refused a request at some point");
    assert_eq!(compacted.len(), 1, "{compacted:?}");
    assert!(compacted[0].summarized > 0, "{}", compacted[0]);
    assert_eq!(summary_calls(&faux), 1);
}

#[tokio::test]
async fn an_overflow_that_compaction_cannot_cure_fails_after_one_retry() {
    let dirs = Dirs::new();
    // A conversation made with a model of a larger window, which a compaction can summarise; and
    // what a request sends besides the conversation, as Faux counts it.
    let probe = faux();
    {
        let factory = factory_with(&dirs, &probe, config(true, WINDOW));
        let session = open(&factory, &dirs, "incurable").await;
        for i in 0..3 {
            session.prompt(long_message(i)).unwrap().settled().await;
        }
        session.close().unwrap();
    }
    let request = &probe.requests()[0];
    let fixed = (request.system.len()
        + request.tools.iter().map(|t| t.name.len() + t.description.len()).sum::<usize>())
        / 4;
    // Room for a summary request, never for a real one.
    let faux = faux_window(fixed as u64 - 10);
    let factory = factory_with(&dirs, &faux, config(true, 1_000_000));
    let session = open(&factory, &dirs, "incurable").await;
    let before = faux.requests().len();
    let (events, settled) = collect(session.prompt("again").unwrap()).await;
    let made: Vec<_> =
        faux.requests()[before..].iter().map(|r| r.system == SUMMARY_SYSTEM_PROMPT).collect();
    assert_eq!(made, vec![false, true, false], "one call, one summary, one retry, no more");
    assert_eq!(compactions(&events).len(), 1);
    let RunOutcome::Failed { error: RunFailure::Provider { message } } = settled.outcome else {
        panic!("{:?}", settled.outcome)
    };
    assert!(message.starts_with("prompt is too long:"), "{message}");
    assert!(message.contains("/compact") && message.contains("/new"), "{message}");
}

#[tokio::test]
async fn a_failed_or_empty_summary_loses_nothing() {
    for (summary, error) in [
        (json!({"steps": [{"error": "summary refused"}]}), "summary refused"),
        (json!({"steps": [{"text": ""}]}), "the model answered with an empty summary"),
    ] {
        let dirs = Dirs::new();
        let script = FauxScript::parse(&json!({ "summary": summary }).to_string()).unwrap();
        let faux = Arc::new(FauxProvider::with_script(script).with_context_window(WINDOW));
        let factory = factory_with(&dirs, &faux, config(true, WINDOW));
        let session = open(&factory, &dirs, "failing").await;
        let mut first_failure = None;
        let mut end = None;
        for i in 0..60 {
            let (outcome, compacted) = turn(&session, long_message(i)).await;
            if first_failure.is_none() && !compacted.is_empty() {
                first_failure = Some((outcome.clone(), compacted[0].clone()));
            }
            if let RunOutcome::Failed { error } = outcome {
                end = Some(error.to_string());
                break;
            }
        }
        let (outcome, compacted) = first_failure.expect("a compaction was tried");
        assert_eq!(outcome, RunOutcome::Completed, "the run goes on while the conversation fits");
        assert_eq!(compacted.error.as_deref(), Some(error));
        assert!(
            compacted
                .to_string()
                .starts_with(&format!("Compaction failed ({error}); nothing was lost"))
        );
        let end = end.expect("once it no longer fits, the run fails");
        assert!(end.contains("/compact") && end.contains("/new"), "{end}");
        let users = user_texts(&session.messages());
        assert_eq!(users.last(), Some(&long_message(users.len() - 1)), "every message is kept");
        assert!(session.model_view().iter().all(
            |m| !matches!(m, Message::Note { text } if text.contains("Summary of the earlier"))
        ));
    }
}

#[tokio::test]
async fn compact_now_summarises_all_but_the_latest_exchange_keeping_what_the_owner_asks() {
    let dirs = Dirs::new();
    let faux = faux();
    let factory = factory_with(&dirs, &faux, config(true, WINDOW));
    let session = open(&factory, &dirs, "now").await;
    for text in ["remember: the cat is called Tom", "what is the weather", "and tomorrow?"] {
        session.prompt(text).unwrap().settled().await;
    }
    let (events, settled) = collect(session.compact(Some("the cat's name".into())).unwrap()).await;
    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert_eq!(settled.turns, 0);
    let compacted = compactions(&events);
    assert_eq!(compacted.len(), 1);
    assert_eq!(compacted[0].summarized, 4);
    assert!(!compacted[0].usage.is_empty(), "the summary call is counted");
    assert_eq!(settled.usage, compacted[0].usage);
    let sent = faux.requests().pop().unwrap();
    assert_eq!(sent.system, SUMMARY_SYSTEM_PROMPT);
    assert!(sent.tools.is_empty());
    let Message::User { text } = &sent.messages[0] else { panic!() };
    assert!(text.ends_with("keep in particular:\nthe cat's name"), "{text}");
    let view = session.model_view();
    assert_eq!(view.len(), 3, "{view:?}");
    let Message::Note { text } = &view[0] else { panic!("{view:?}") };
    assert!(
        text.contains("Faux summary of 4 messages.")
            && text.contains("- remember: the cat is called Tom"),
        "{text}"
    );
    assert_eq!(view[1], Message::user("and tomorrow?"));
    // Nothing newer to summarise: said so, nothing changes.
    let (events, settled) = collect(session.compact(None).unwrap()).await;
    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert!(compactions(&events)[0].to_string().starts_with("Nothing to compact yet"));
    assert_eq!(session.model_view(), view);
}

#[tokio::test]
async fn a_failed_compact_now_says_what_helps_and_changes_nothing() {
    let dirs = Dirs::new();
    let faux = faux();
    let factory = factory_with(&dirs, &faux, config(true, WINDOW));
    let session = open(&factory, &dirs, "now-fails").await;
    for text in ["one", "two"] {
        session.prompt(text).unwrap().settled().await;
    }
    let view = session.model_view();
    let instruction = format!("faux> {}", json!({"steps": [{"error": "no summary today"}]}));
    let settled = session.compact(Some(instruction)).unwrap().settled().await;
    let RunOutcome::Failed { error } = settled.outcome else { panic!("{:?}", settled.outcome) };
    let text = error.to_string();
    assert!(text.starts_with("compacting failed: no summary today."), "{text}");
    assert!(text.contains("/compact") && text.contains("/new"), "{text}");
    assert_eq!(session.model_view(), view);
}

/// The number: 2,000 turns with a 16k window, a restart half-way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_turns_in_a_16k_window_with_a_restart() {
    const TURNS: usize = 2000;
    let dirs = Dirs::new();
    let faux = faux_window(WINDOW);
    let started = Instant::now();
    let mut compactions_seen: Vec<Compacted> = Vec::new();
    for half in 0..2 {
        let factory = factory_with(&dirs, &faux, config(true, WINDOW));
        let session = open(&factory, &dirs, "months").await;
        for i in (half * TURNS / 2)..((half + 1) * TURNS / 2) {
            let text = match i {
                3 => "remember: the owner's sister is called Ada".to_string(),
                _ => format!("turn {i}: {}", "something to talk about ".repeat(15 + i % 40)),
            };
            let (outcome, compacted) = turn(&session, text).await;
            assert_eq!(outcome, RunOutcome::Completed, "turn {i}");
            compactions_seen.extend(compacted);
        }
        session.close().unwrap();
    }
    let elapsed = started.elapsed();
    let factory = factory_with(&dirs, &faux, config(true, WINDOW));
    let session = open(&factory, &dirs, "months").await;
    let users = user_texts(&session.messages());
    assert_eq!(users.len(), TURNS, "the journal holds every turn");
    assert!(users[TURNS - 1].starts_with(&format!("turn {}:", TURNS - 1)));
    let types = journal_types(&dirs, "months");
    assert_eq!(types["message"], 2 * TURNS);
    assert_eq!(types["compaction"], compactions_seen.len());
    assert!(compactions_seen.iter().all(|c| c.error.is_none() && c.summarized > 0));
    assert_eq!(refusals(&session), 0, "compacted before the window was full");
    let view = session.model_view();
    let Message::Note { text } = &view[0] else { panic!() };
    assert!(
        text.contains("remember: the owner's sister is called Ada"),
        "facts carry over: {text}"
    );
    let before: u64 = compactions_seen.iter().map(|c| c.tokens_before).sum();
    let after: u64 = compactions_seen.iter().map(|c| c.tokens_after).sum();
    println!(
        "2000 turns, 16k window: {} compactions, tokens before/after {} / {} on average, largest before {}, {:.1}s",
        compactions_seen.len(),
        before / compactions_seen.len() as u64,
        after / compactions_seen.len() as u64,
        compactions_seen.iter().map(|c| c.tokens_before).max().unwrap(),
        elapsed.as_secs_f64()
    );
}

#[tokio::test]
async fn an_aborted_summary_call_is_counted_and_changes_nothing() {
    let dirs = Dirs::new();
    let faux = faux();
    let factory = factory_with(&dirs, &faux, config(true, WINDOW));
    let session = open(&factory, &dirs, "abort").await;
    for text in ["one", "two"] {
        session.prompt(text).unwrap().settled().await;
    }
    let view = session.model_view();
    let instruction = format!("faux> {}", json!({"steps": [{"sleep_ms": 30000}]}));
    let mut handle = session.compact(Some(instruction)).unwrap();
    while faux.requests().last().is_none_or(|r| r.system != SUMMARY_SYSTEM_PROMPT) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(session.abort());
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(DEADLINE, handle.events().recv()).await.unwrap() {
        events.push(event.kind.clone());
    }
    let settled = handle.settled().await;
    assert_eq!(settled.outcome, RunOutcome::Aborted);
    let compacted = compactions(&events);
    assert_eq!(compacted.len(), 1);
    assert_eq!(compacted[0].error.as_deref(), Some("aborted"));
    assert!(!compacted[0].usage.is_empty(), "a call that was sent is never free");
    assert_eq!(settled.usage, compacted[0].usage);
    assert_eq!(session.model_view(), view);
}
