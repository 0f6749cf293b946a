//! Sessions end to end with the Faux provider and the real tools.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use volcanic_core::message::{Message, StopReason};
use volcanic_core::provider::faux::{FauxProvider, FauxScript};
use volcanic_core::session::Role;
use volcanic_core::tool::ToolStop;
use volcanic_core::{Error, EventKind, RunFailure, RunOutcome, SessionFactory, SessionOptions};

use crate::support::*;

#[tokio::test]
async fn echo_streams_deltas_then_message_end_then_settled() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "echo").await;
    let (events, settled) = collect(session.prompt("hello there").unwrap()).await;

    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert_eq!(settled.final_text, "echo: hello there");
    assert_eq!(settled.turns, 1);
    let names = names(&events);
    assert_eq!(names.first(), Some(&"run_start"));
    assert_eq!(names.last(), Some(&"settled"));
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(deltas.len() >= 2, "echo streams in a few chunks: {deltas:?}");
    assert_eq!(deltas.concat(), "echo: hello there");
    let last_delta = names.iter().rposition(|n| *n == "text_delta").unwrap();
    let assistant_end = events
        .iter()
        .rposition(|e| matches!(e, EventKind::MessageEnd { message, .. } if matches!(**message, Message::Assistant(_))))
        .unwrap();
    assert!(last_delta < assistant_end && assistant_end < names.len() - 1);
    match &events[names.len() - 1] {
        EventKind::Settled(s) => assert_eq!(s, &settled),
        other => panic!("last event {other:?}"),
    }
}

#[tokio::test]
async fn events_carry_session_run_and_increasing_seq() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "envelope").await;
    let mut stream = session.subscribe();
    let handle = session.prompt("hi").unwrap();
    let run_id = handle.run_id().to_string();
    handle.settled().await;
    let mut seqs = Vec::new();
    while let Ok(Some(event)) =
        tokio::time::timeout(Duration::from_millis(200), stream.recv()).await
    {
        assert_eq!(&*event.session_id, session.id());
        assert_eq!(&*event.run_id, run_id);
        seqs.push(event.seq);
        if matches!(event.kind, EventKind::Settled(_)) {
            break;
        }
    }
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
}

#[tokio::test]
async fn prompt_while_running_is_busy() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "busy").await;
    let handle = session.prompt(directive(json!([{"sleep_ms": 30000}]))).unwrap();
    assert!(session.is_running());
    match session.prompt("again") {
        Err(Error::Busy { scope }) => assert_eq!(scope, "busy"),
        other => panic!("expected busy, got {:?}", other.map(|h| h.run_id().to_string())),
    }
    assert!(session.abort());
    let (_, settled) = collect(handle).await;
    assert_eq!(settled.outcome, RunOutcome::Aborted);
    assert!(!session.is_running());
    let (_, settled) = collect(session.prompt("after").unwrap()).await;
    assert_eq!(settled.final_text, "echo: after");
}

#[tokio::test]
async fn bash_tool_round_trip_emits_start_and_end() {
    let dirs = Dirs::new();
    let faux = faux();
    let factory = factory(&dirs, faux.clone());
    let session = open(&factory, &dirs, "tools").await;
    let prompt =
        directive(json!([{"tool": "bash", "args": {"command": "echo hi"}}, {"text": "ok"}]));
    let (events, settled) = collect(session.prompt(prompt).unwrap()).await;
    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert_eq!(settled.final_text, "ok");
    assert_eq!(settled.turns, 2);
    let start = events.iter().find_map(|e| match e {
        EventKind::ToolStart { name, args, .. } => Some((name.clone(), args.clone())),
        _ => None,
    });
    assert_eq!(start, Some(("bash".to_string(), json!({"command": "echo hi"}))));
    let result = tool_results(&events).remove(0);
    assert!(!result.is_error);
    assert!(result.content.starts_with("hi\n"), "{}", result.content);
    // The second model call saw the tool result.
    let requests = faux.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        matches!(requests[1].messages.last(), Some(Message::ToolResult(r)) if r.content.starts_with("hi"))
    );
}

#[tokio::test]
async fn tool_errors_go_back_to_the_model() {
    let dirs = Dirs::new();
    let faux = faux();
    let factory = factory(&dirs, faux.clone());
    let session = open(&factory, &dirs, "tool-errors").await;
    let prompt = directive(json!([
        {"calls": [
            {"tool": "nope", "args": {}},
            {"tool": "read", "args": {"path": "missing.txt"}},
            {"tool": "bash", "args": {"wrong": 1}}
        ]},
        {"text": "recovered"}
    ]));
    let (events, settled) = collect(session.prompt(prompt).unwrap()).await;
    assert_eq!(settled.final_text, "recovered");
    let results: Vec<_> = tool_results(&events);
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|r| r.is_error));
    assert!(results[0].content.starts_with("unknown tool \"nope\""), "{}", results[0].content);
    assert!(results[1].content.contains("missing.txt"), "{}", results[1].content);
    assert!(results[2].content.contains("invalid arguments for bash"), "{}", results[2].content);
}

#[tokio::test]
async fn run_ending_tool_stops_run_and_next_prompt_continues() {
    let dirs = Dirs::new();
    let faux = faux();
    let factory = factory(&dirs, faux.clone());
    let options = SessionOptions {
        extensions: vec![Arc::new(AskExtension)],
        ..SessionOptions::new("ask", dirs.ws())
    };
    let session = factory.open(options).await.unwrap();
    assert!(session.tool_names().contains(&"ask".to_string()));
    let prompt = directive(json!([
        {"calls": [{"tool": "ask", "args": {"question": "which city?"}}, {"tool": "bash", "args": {"command": "echo also-ran"}}]},
        {"text": "never reached"}
    ]));
    let (events, settled) = collect(session.prompt(prompt).unwrap()).await;
    match &settled.outcome {
        RunOutcome::StoppedByTool { tool, stop, .. } => {
            assert_eq!(tool, "ask");
            assert_eq!(stop, &ToolStop::InputRequired { question: "which city?".into() });
        }
        other => panic!("outcome {other:?}"),
    }
    // The rest of the batch still ran.
    assert_eq!(events.iter().filter(|e| matches!(e, EventKind::ToolEnd { .. })).count(), 2);
    assert_eq!(faux.requests().len(), 1);
    assert!(faux.requests()[0].system.contains("Use ask to ask the caller."));

    let (_, settled) = collect(session.prompt("Paris").unwrap()).await;
    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert_eq!(settled.final_text, "echo: Paris");
    let last = faux.requests().pop().unwrap();
    let roles: Vec<&str> = last
        .messages
        .iter()
        .map(|m| match m {
            Message::User { .. } => "user",
            Message::Assistant(_) => "assistant",
            Message::ToolResult(_) => "tool_result",
            Message::Note { .. } => "note",
        })
        .collect();
    assert_eq!(roles, vec!["user", "assistant", "tool_result", "tool_result", "user"]);
}

#[tokio::test]
async fn abort_during_sleep_kills_process_group_and_settles_quickly() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "abort").await;
    let pid_file = dirs.ws().join("child.pid");
    let command = format!("sleep 30 & echo $! > {}; sleep 30", pid_file.display());
    let mut handle = session
        .prompt(directive(
            json!([{"tool": "bash", "args": {"command": command}}, {"text": "unreachable"}]),
        ))
        .unwrap();
    // Wait for the tool to start and the grandchild to exist.
    tokio::time::timeout(DEADLINE, async {
        while let Some(event) = handle.events().recv().await {
            if matches!(event.kind, EventKind::ToolStart { .. }) {
                break;
            }
        }
        while !pid_file.exists() || std::fs::read_to_string(&pid_file).unwrap().trim().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let started = Instant::now();
    assert!(session.abort());
    let (events, settled) = collect(handle).await;
    let elapsed = started.elapsed();
    assert_eq!(settled.outcome, RunOutcome::Aborted);
    assert!(elapsed < Duration::from_secs(2), "settled after {elapsed:?}");
    let result = tool_results(&events).remove(0);
    assert!(result.is_error);
    // The grandchild is gone (or a zombie waiting for init), within a bounded wait.
    let gone = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let status = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if status.is_empty() || status.contains(") Z ") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "grandchild {pid} still running");
    // The model is told about the abort next time.
    let messages = session.messages();
    assert!(matches!(messages.last(), Some(Message::Note { text }) if text.contains("aborted")));
}

#[tokio::test]
async fn abort_while_model_streams_keeps_partial_text() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "abort-stream").await;
    let mut handle = session
        .prompt(directive(json!([{"text": "abcdefghij", "chunk": 2, "delay_ms": 200}])))
        .unwrap();
    tokio::time::timeout(DEADLINE, async {
        while let Some(event) = handle.events().recv().await {
            if matches!(event.kind, EventKind::TextDelta { .. }) {
                break;
            }
        }
    })
    .await
    .unwrap();
    session.abort();
    let (_, settled) = collect(handle).await;
    assert_eq!(settled.outcome, RunOutcome::Aborted);
    assert!(settled.final_text.starts_with("ab"), "{}", settled.final_text);
    let aborted = session.messages().into_iter().find_map(|m| match m {
        Message::Assistant(a) => Some(a),
        _ => None,
    });
    assert_eq!(aborted.map(|a| a.stop_reason), Some(StopReason::Aborted));
}

#[tokio::test]
async fn faux_error_step_fails_the_run() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "fail").await;
    let (events, settled) =
        collect(session.prompt(directive(json!([{"error": "model exploded"}]))).unwrap()).await;
    assert_eq!(
        settled.outcome,
        RunOutcome::Failed { error: RunFailure::Provider { message: "model exploded".into() } }
    );
    assert!(!names(&events).contains(&"retry"), "scripted errors are not retried");
}

#[tokio::test]
async fn faux_steps_run_out_with_done_and_sleep_waits() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "done").await;
    let started = Instant::now();
    let prompt = directive(json!([{"sleep_ms": 150}, {"tool": "ls", "args": {}}]));
    let (_, settled) = collect(session.prompt(prompt).unwrap()).await;
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(settled.final_text, "done");
    assert_eq!(settled.turns, 2);
}

#[tokio::test]
async fn faux_text_step_streams_in_chunks() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "chunks").await;
    let (events, settled) = collect(
        session.prompt(directive(json!([{"text": "abcdefg", "chunk": 3, "delay_ms": 1}]))).unwrap(),
    )
    .await;
    let deltas: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::TextDelta { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, vec!["abc", "def", "g"]);
    assert_eq!(settled.final_text, "abcdefg");
}

#[tokio::test]
async fn faux_invalid_directive_fails_with_reason() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "bad-directive").await;
    let (_, settled) = collect(session.prompt("faux> {not json").unwrap()).await;
    match settled.outcome {
        RunOutcome::Failed { error: RunFailure::Provider { message } } => {
            assert!(message.starts_with("faux: invalid directive"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn faux_script_rules_apply_without_directive() {
    let dirs = Dirs::new();
    let script = FauxScript::parse(
        r#"{"rules":[{"match":"(?i)weather","steps":[{"tool":"bash","args":{"command":"echo sunny"}},{"text":"It is sunny."}]}],
            "default":{"steps":[{"text":"default answer"}]}}"#,
    )
    .unwrap();
    let factory = factory(&dirs, Arc::new(FauxProvider::with_script(script)));
    let session = open(&factory, &dirs, "script").await;
    let (_, settled) = collect(session.prompt("What's the WEATHER?").unwrap()).await;
    assert_eq!(settled.final_text, "It is sunny.");
    let (_, settled) = collect(session.prompt("anything else").unwrap()).await;
    assert_eq!(settled.final_text, "default answer");
    let (_, settled) =
        collect(session.prompt(directive(json!([{"text": "directive wins"}]))).unwrap()).await;
    assert_eq!(settled.final_text, "directive wins");
}

#[tokio::test]
async fn max_turns_settles_as_max_turns() {
    let dirs = Dirs::new();
    let config = volcanic_core::config::AgentConfig { max_turns: 2, ..fast_config() };
    let factory = SessionFactory::builder(faux(), dirs.state.path()).config(config).build();
    let session = open(&factory, &dirs, "turns").await;
    let ls = json!({"tool": "ls", "args": {}});
    let (_, settled) =
        collect(session.prompt(directive(json!([ls, ls, ls, {"text": "x"}]))).unwrap()).await;
    assert_eq!(settled.outcome, RunOutcome::MaxTurns);
    assert_eq!(settled.turns, 2);
}

#[tokio::test]
async fn workspace_files_shape_the_system_prompt_and_edits_apply_next_run() {
    let dirs = Dirs::new();
    std::fs::write(dirs.ws().join("PERSONA.md"), "I am Ada, Eugene's assistant.").unwrap();
    std::fs::write(dirs.ws().join("CLAUDE.md"), "Claude rules apply.").unwrap();
    std::fs::write(dirs.ws().join("MEMORY.md"), "Eugene likes tea.").unwrap();
    let faux = faux();
    let factory = factory(&dirs, faux.clone());
    let session = open(&factory, &dirs, "context").await;
    collect(session.prompt("hi").unwrap()).await;
    let system = faux.requests()[0].system.clone();
    assert!(system.contains("I am Ada, Eugene's assistant."), "{system}");
    assert!(system.contains("Claude rules apply."));
    assert!(system.contains("Eugene likes tea."));

    std::fs::write(dirs.ws().join("AGENTS.md"), "Agents rules win.").unwrap();
    std::fs::write(dirs.ws().join("MEMORY.md"), "Eugene now likes coffee.").unwrap();
    collect(session.prompt("again").unwrap()).await;
    let system = faux.requests()[1].system.clone();
    assert!(system.contains("Agents rules win."));
    assert!(!system.contains("Claude rules apply."));
    assert!(system.contains("Eugene now likes coffee."));
    assert!(!system.contains("likes tea"));
}

/// The open reads the system prompt along with the journal for a run started right after it;
/// a first run started later than that read is fresh for reads the workspace again.
#[tokio::test]
async fn first_run_started_long_after_the_open_sees_workspace_edits_made_meanwhile() {
    let dirs = Dirs::new();
    std::fs::write(dirs.ws().join("MEMORY.md"), "Eugene likes tea.").unwrap();
    let faux = faux();
    let factory = factory(&dirs, faux.clone());
    let session = open(&factory, &dirs, "late").await;
    std::fs::write(dirs.ws().join("MEMORY.md"), "Eugene now likes coffee.").unwrap();
    // Longer than the 500 ms a prompt read at open is used for.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    collect(session.prompt("hi").unwrap()).await;
    let system = faux.requests()[0].system.clone();
    assert!(system.contains("Eugene now likes coffee."), "{system}");
    assert!(!system.contains("likes tea"), "{system}");
}

#[tokio::test]
async fn session_resumes_conversation_from_journal() {
    let dirs = Dirs::new();
    let faux = faux();
    let factory = factory(&dirs, faux.clone());
    let session = open(&factory, &dirs, "resume").await;
    let first_id = session.id().to_string();
    collect(session.prompt("first").unwrap()).await;
    // A second open of a live scope is refused.
    assert!(matches!(
        factory.open(SessionOptions::new("resume", dirs.ws())).await,
        Err(Error::ScopeInUse { .. })
    ));
    session.close().unwrap();
    assert!(matches!(session.prompt("x"), Err(Error::Closed { .. })));

    let session = open(&factory, &dirs, "resume").await;
    assert_eq!(session.id(), first_id);
    collect(session.prompt("second").unwrap()).await;
    let last = faux.requests().pop().unwrap();
    assert_eq!(last.messages.len(), 3);
    assert_eq!(last.messages[0], Message::user("first"));
}

#[tokio::test]
async fn invalid_scopes_are_refused() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    for scope in ["", "../x", ".hidden", "a/b", &"x".repeat(201)] {
        let result = factory.open(SessionOptions::new(scope, dirs.ws())).await;
        assert!(matches!(result, Err(Error::InvalidScope { .. })), "scope {scope:?}");
    }
}

#[tokio::test]
async fn message_starts_report_roles() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "roles").await;
    let (events, _) = collect(session.prompt("hi").unwrap()).await;
    let roles: Vec<Role> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::MessageStart { role, .. } => Some(*role),
            _ => None,
        })
        .collect();
    assert_eq!(roles, vec![Role::User, Role::Assistant]);
}

/// A channel that records what was sent.
#[derive(Default)]
struct RecordingChannel {
    sent: std::sync::Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl volcanic_core::channel::ChatChannel for RecordingChannel {
    async fn send_text(&self, text: &str) -> Result<(), String> {
        self.sent.lock().unwrap().push(format!("text:{text}"));
        Ok(())
    }

    async fn send_file(&self, path: &std::path::Path, caption: Option<&str>) -> Result<(), String> {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        self.sent.lock().unwrap().push(format!("file:{name}:{}", caption.unwrap_or("")));
        Ok(())
    }
}

#[tokio::test]
async fn send_tool_exists_only_with_a_channel_and_delivers() {
    let dirs = Dirs::new();
    std::fs::write(dirs.ws().join("report.txt"), "data").unwrap();
    let factory = factory(&dirs, faux());
    let plain = open(&factory, &dirs, "no-channel").await;
    assert!(!plain.tool_names().contains(&"send".to_string()));

    let channel = Arc::new(RecordingChannel::default());
    let options = SessionOptions {
        channel: Some(channel.clone()),
        ..SessionOptions::new("channel", dirs.ws())
    };
    let session = factory.open(options).await.unwrap();
    assert!(session.tool_names().contains(&"send".to_string()));
    let prompt = directive(json!([
        {"calls": [
            {"tool": "send", "args": {"text": "hello owner"}},
            {"tool": "send", "args": {"path": "report.txt", "text": "the report"}},
            {"tool": "send", "args": {"path": "missing.txt"}}
        ]},
        {"text": "sent"}
    ]));
    let (events, _) = collect(session.prompt(prompt).unwrap()).await;
    assert_eq!(
        *channel.sent.lock().unwrap(),
        vec!["text:hello owner", "file:report.txt:the report"]
    );
    let errors: Vec<bool> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::ToolEnd { result, .. } => Some(result.is_error),
            _ => None,
        })
        .collect();
    assert_eq!(errors, vec![false, false, true]);
}

/// An extension whose listener prompts again when a run settles, or panics.
struct ReactingExtension {
    session: std::sync::Mutex<Option<volcanic_core::Session>>,
    second: std::sync::Mutex<Option<volcanic_core::RunHandle>>,
    panic: bool,
}

struct ReactingRegistration(Arc<ReactingExtension>);

impl volcanic_core::Extension for ReactingRegistration {
    fn name(&self) -> &str {
        "reacting"
    }

    fn register(&self, registrar: &mut volcanic_core::Registrar) {
        let this = self.0.clone();
        registrar.listener(Arc::new(move |event| {
            if this.panic {
                panic!("listener bug");
            }
            if let EventKind::Settled(s) = &event.kind
                && s.final_text == "echo: first"
            {
                let session = this.session.lock().unwrap().clone().unwrap();
                *this.second.lock().unwrap() = Some(session.prompt("second").unwrap());
            }
        }));
    }
}

#[tokio::test]
async fn listener_may_prompt_again_and_the_new_run_sees_only_its_own_events() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let reacting = Arc::new(ReactingExtension {
        session: Default::default(),
        second: Default::default(),
        panic: false,
    });
    let options = SessionOptions {
        extensions: vec![Arc::new(ReactingRegistration(reacting.clone()))],
        ..SessionOptions::new("react", dirs.ws())
    };
    let session = factory.open(options).await.unwrap();
    *reacting.session.lock().unwrap() = Some(session.clone());
    let (_, first) = collect(session.prompt("first").unwrap()).await;
    assert_eq!(first.final_text, "echo: first");
    let second = reacting.second.lock().unwrap().take().expect("the listener prompted");
    let run_id = second.run_id().to_string();
    let mut second = second;
    let mut kinds = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while let Some(event) = second.events().recv().await {
            assert_eq!(&*event.run_id, run_id);
            kinds.push(event.kind.clone());
        }
    })
    .await
    .unwrap();
    assert!(matches!(kinds.first(), Some(EventKind::RunStart)));
    assert!(matches!(kinds.last(), Some(EventKind::Settled(s)) if s.final_text == "echo: second"));
}

#[tokio::test]
async fn panicking_listener_does_not_lose_settled() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let reacting = Arc::new(ReactingExtension {
        session: Default::default(),
        second: Default::default(),
        panic: true,
    });
    let options = SessionOptions {
        extensions: vec![Arc::new(ReactingRegistration(reacting))],
        ..SessionOptions::new("panicky", dirs.ws())
    };
    let session = factory.open(options).await.unwrap();
    let (events, settled) = collect(session.prompt("hi").unwrap()).await;
    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert_eq!(events.iter().filter(|e| matches!(e, EventKind::Settled(_))).count(), 1);
}

#[tokio::test]
async fn abort_right_after_prompt_settles_aborted() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "early-abort").await;
    for _ in 0..20 {
        let handle =
            session.prompt(directive(json!([{"sleep_ms": 20}, {"text": "too late"}]))).unwrap();
        assert!(session.abort());
        let (events, settled) = collect(handle).await;
        assert_eq!(settled.outcome, RunOutcome::Aborted);
        let starts = events.iter().filter(|e| matches!(e, EventKind::ToolStart { .. })).count();
        let ends = events.iter().filter(|e| matches!(e, EventKind::ToolEnd { .. })).count();
        assert_eq!(starts, ends);
    }
}

#[tokio::test]
async fn faux_text_then_tool_is_one_answer() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "text-tool").await;
    let prompt = directive(
        json!([{"text": "let me check"}, {"tool": "ls", "args": {}}, {"text": "all good"}]),
    );
    let (events, settled) = collect(session.prompt(prompt).unwrap()).await;
    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert_eq!(settled.final_text, "all good");
    assert_eq!(settled.turns, 2);
    let first = events.iter().find_map(|e| match e {
        EventKind::MessageEnd { message, .. } => match &**message {
            Message::Assistant(a) => Some(a.clone()),
            _ => None,
        },
        _ => None,
    });
    let first = first.unwrap();
    assert_eq!(first.text(), "let me check");
    assert_eq!(first.tool_calls().count(), 1);
}

#[tokio::test]
async fn close_if_durable_closes_only_a_session_with_nothing_left_to_flush() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "durable-close").await;
    session.defer_run_end_sync();

    // Busy while a run is going, like `close`.
    let handle = session.prompt(directive(json!([{"sleep_ms": 30000}]))).unwrap();
    assert!(matches!(session.close_if_durable(), Some(Err(Error::Busy { .. }))));
    assert!(session.abort());
    collect(handle).await;

    // The run's end was not synced (deferred to the host): closing would have to flush.
    collect(session.prompt("first").unwrap()).await;
    assert!(session.close_if_durable().is_none());
    // ... and leaves it open.
    collect(session.prompt("second").unwrap()).await;

    // The host's barrier covers the journal: now it closes without I/O, scope released.
    let (file, mark) = session.journal_file().unwrap().unwrap().split();
    volcanic_core::durable::sync_files(&[&file]).unwrap();
    mark.covered();
    assert!(matches!(session.close_if_durable(), Some(Ok(()))));
    assert!(matches!(session.prompt("x"), Err(Error::Closed { .. })));
    // Closing again is a no-op, as with `close`.
    assert!(matches!(session.close_if_durable(), Some(Ok(()))));

    let reopened = open(&factory, &dirs, "durable-close").await;
    let messages = reopened.messages();
    assert!(messages.contains(&Message::user("first")), "{messages:?}");
    assert!(messages.contains(&Message::user("second")), "{messages:?}");
}

/// Shutdown waits for the runs: once `close_runs` returns after the token fired, a run that was
/// in a model call has journaled its end and let go of its session (a run task nobody tracks
/// would still be on its way).
#[tokio::test]
async fn close_runs_returns_after_aborted_runs_have_journaled_their_end() {
    let dirs = Dirs::new();
    let shutdown = CancellationToken::new();
    let factory = SessionFactory::builder(faux(), dirs.state.path())
        .config(fast_config())
        .shutdown(shutdown.clone())
        .build();
    let session = open(&factory, &dirs, "shutdown").await;
    let mut handle = session.prompt(directive(json!([{"sleep_ms": 60_000}]))).unwrap();
    tokio::time::timeout(DEADLINE, async {
        while let Some(event) = handle.events().recv().await {
            if matches!(event.kind, EventKind::TurnStart { .. }) {
                return;
            }
        }
        panic!("the run ended before its model call");
    })
    .await
    .expect("the model call starts in time");

    shutdown.cancel();
    tokio::time::timeout(DEADLINE, factory.close_runs()).await.expect("the run ends in time");

    assert!(!session.is_running());
    let journal =
        std::fs::read_to_string(dirs.state.path().join("sessions/shutdown/session.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(journal.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "run_end");
    assert_eq!(last["outcome"], json!({"kind": "aborted"}));
}
