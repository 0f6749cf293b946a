//! Tool gates (issue 22): no tool runs before every gate of its session allowed the call, a
//! refusal reaches the model as the call's result, and an abort ends a gate's wait.
//!
//! Each test has the Faux model call bash to create a marker file in a temp workspace, so whether
//! the tool ran is read from the disk.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;
use volcanic_core::extension::{GateCall, GateDecision, ToolGate};
use volcanic_core::message::{Message, ToolResult};
use volcanic_core::{
    EventKind, Extension, Registrar, RunOutcome, Session, SessionFactory, SessionOptions,
};

use crate::support::*;

/// How long an aborted run may take to settle.
const ABORT_DEADLINE: Duration = Duration::from_secs(5);

/// The bash call every test's model makes: it creates `marker` in the workspace.
fn marker_args() -> Value {
    json!({"command": "echo hi > marker"})
}

/// A run that creates the marker, then answers `ok`.
fn marker_then_ok() -> String {
    directive(json!([{"tool": "bash", "args": marker_args()}, {"text": "ok"}]))
}

/// A gate that always answers the same and records what it was asked.
struct Decides {
    decision: GateDecision,
    asked: Mutex<Vec<GateCall>>,
}

impl Decides {
    fn new(decision: GateDecision) -> Arc<Self> {
        Arc::new(Decides { decision, asked: Mutex::new(Vec::new()) })
    }

    fn refusing(reason: &str) -> Arc<Self> {
        Decides::new(GateDecision::Refuse { reason: reason.into() })
    }

    fn asked(&self) -> Vec<GateCall> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl ToolGate for Decides {
    async fn check(&self, call: &GateCall) -> GateDecision {
        self.asked.lock().unwrap().push(call.clone());
        self.decision.clone()
    }
}

/// A gate that holds each call until released, as one waiting for the owner does.
#[derive(Default)]
struct Holds {
    entered: Notify,
    release: Notify,
    entries: AtomicUsize,
}

impl Holds {
    /// Waits until the gate holds a call.
    async fn wait_entered(&self) {
        tokio::time::timeout(DEADLINE, self.entered.notified())
            .await
            .expect("the gate was not asked in time");
    }
}

#[async_trait::async_trait]
impl ToolGate for Holds {
    async fn check(&self, _call: &GateCall) -> GateDecision {
        self.entries.fetch_add(1, Ordering::SeqCst);
        self.entered.notify_one();
        self.release.notified().await;
        GateDecision::Allow
    }
}

/// A gate with a bug.
struct Panics;

#[async_trait::async_trait]
impl ToolGate for Panics {
    async fn check(&self, _call: &GateCall) -> GateDecision {
        panic!("a bug in the gate")
    }
}

/// Registers its gates in order.
struct Gates(Vec<Arc<dyn ToolGate>>);

impl Extension for Gates {
    fn name(&self) -> &str {
        "gates"
    }

    fn register(&self, registrar: &mut Registrar) {
        for gate in &self.0 {
            registrar.tool_gate(gate.clone());
        }
    }
}

async fn open_gated(
    factory: &SessionFactory,
    dirs: &Dirs,
    gates: Vec<Arc<dyn ToolGate>>,
) -> Session {
    let mut options = SessionOptions::new("gated", dirs.ws());
    options.extensions.push(Arc::new(Gates(gates)));
    factory.open(options).await.unwrap()
}

/// The id of the run's one tool call, from its `ToolStart`.
fn call_id(events: &[EventKind]) -> String {
    let ids: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::ToolStart { call_id, .. } => Some(call_id),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 1, "one tool call expected");
    ids[0].clone()
}

/// The error result of a bash call that was not executed.
fn not_executed(call_id: String, text: &str) -> ToolResult {
    ToolResult {
        call_id,
        tool: "bash".into(),
        content: text.into(),
        is_error: true,
        details: Value::Null,
    }
}

#[tokio::test]
async fn tool_gate_that_allows_lets_the_call_run_and_sees_the_call() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let gate = Decides::new(GateDecision::Allow);
    let session = open_gated(&factory, &dirs, vec![gate.clone()]).await;

    let (events, settled) = collect(session.prompt(marker_then_ok()).unwrap()).await;

    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert_eq!(settled.final_text, "ok");
    assert!(dirs.ws().join("marker").exists(), "the allowed call ran");
    let results = tool_results(&events);
    assert!(!results[0].is_error, "{:?}", results[0]);
    let expected = GateCall { call_id: call_id(&events), name: "bash".into(), args: marker_args() };
    assert_eq!(gate.asked(), vec![expected]);
}

#[tokio::test]
async fn tool_gate_refusal_skips_the_call_and_the_model_sees_the_reason() {
    let dirs = Dirs::new();
    let faux = faux();
    let factory = factory(&dirs, faux.clone());
    let session = open_gated(&factory, &dirs, vec![Decides::refusing("the owner said no")]).await;

    let (events, settled) = collect(session.prompt(marker_then_ok()).unwrap()).await;

    assert!(!dirs.ws().join("marker").exists(), "the refused call ran");
    let refused = not_executed(call_id(&events), "not executed: the owner said no");
    assert_eq!(tool_results(&events), vec![refused.clone()]);
    // The run went on to its next step, and the refusal is in the journal and the model's view.
    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert_eq!(settled.final_text, "ok");
    assert!(session.messages().contains(&Message::ToolResult(refused.clone())));
    let requests = faux.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].messages.last(), Some(&Message::ToolResult(refused)));
}

#[tokio::test]
async fn tool_gate_holding_a_call_keeps_it_from_running_until_released() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let gate = Arc::new(Holds::default());
    let session = open_gated(&factory, &dirs, vec![gate.clone()]).await;

    let handle = session.prompt(marker_then_ok()).unwrap();
    gate.wait_entered().await;
    assert!(!dirs.ws().join("marker").exists(), "the held call ran");
    assert!(session.is_running());
    gate.release.notify_one();
    let (events, settled) = collect(handle).await;

    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert!(dirs.ws().join("marker").exists(), "the released call did not run");
    assert!(!tool_results(&events)[0].is_error);
    assert_eq!(gate.entries.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tool_gate_wait_ends_at_once_when_the_run_is_aborted() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let gate = Arc::new(Holds::default());
    let session = open_gated(&factory, &dirs, vec![gate.clone()]).await;

    let handle = session.prompt(marker_then_ok()).unwrap();
    gate.wait_entered().await;
    assert!(session.abort());
    let (events, settled) = tokio::time::timeout(ABORT_DEADLINE, collect(handle))
        .await
        .expect("an abort did not end the gate's wait");

    assert_eq!(settled.outcome, RunOutcome::Aborted);
    assert!(!dirs.ws().join("marker").exists(), "the call ran after the abort");
    let aborted = not_executed(call_id(&events), "not executed: run aborted");
    assert_eq!(tool_results(&events), vec![aborted]);
}

#[tokio::test]
async fn tool_gates_are_all_asked_and_a_later_refusal_wins_over_an_earlier_allow() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let (first, second) = (Decides::new(GateDecision::Allow), Decides::refusing("second says no"));
    let session = open_gated(&factory, &dirs, vec![first.clone(), second.clone()]).await;

    let (events, settled) = collect(session.prompt(marker_then_ok()).unwrap()).await;

    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert!(!dirs.ws().join("marker").exists(), "the refused call ran");
    let refused = not_executed(call_id(&events), "not executed: second says no");
    assert_eq!(tool_results(&events), vec![refused]);
    assert_eq!((first.asked().len(), second.asked().len()), (1, 1));
}

#[tokio::test]
async fn tool_gates_after_a_refusal_are_not_asked() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let (first, second) = (Decides::refusing("first says no"), Decides::new(GateDecision::Allow));
    let session = open_gated(&factory, &dirs, vec![first.clone(), second.clone()]).await;

    let (events, settled) = collect(session.prompt(marker_then_ok()).unwrap()).await;

    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert!(!dirs.ws().join("marker").exists(), "the refused call ran");
    let refused = not_executed(call_id(&events), "not executed: first says no");
    assert_eq!(tool_results(&events), vec![refused]);
    assert_eq!((first.asked().len(), second.asked().len()), (1, 0));
}

#[tokio::test]
async fn tool_gate_that_panics_refuses_and_the_run_completes() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open_gated(&factory, &dirs, vec![Arc::new(Panics)]).await;

    let (events, settled) = collect(session.prompt(marker_then_ok()).unwrap()).await;

    assert_eq!(settled.outcome, RunOutcome::Completed);
    assert_eq!(settled.final_text, "ok");
    assert!(!dirs.ws().join("marker").exists(), "the call ran past a broken gate");
    let refused =
        not_executed(call_id(&events), "not executed: the approval check failed unexpectedly");
    assert_eq!(tool_results(&events), vec![refused]);
}

#[tokio::test]
async fn tool_gate_is_not_asked_about_an_unknown_tool() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let gate = Decides::new(GateDecision::Allow);
    let session = open_gated(&factory, &dirs, vec![gate.clone()]).await;

    let prompt = directive(json!([{"tool": "nope", "args": {}}, {"text": "ok"}]));
    let (events, settled) = collect(session.prompt(prompt).unwrap()).await;

    assert_eq!(settled.outcome, RunOutcome::Completed);
    let result = tool_results(&events).remove(0);
    assert!(result.is_error && result.content.starts_with("unknown tool \"nope\""), "{result:?}");
    assert_eq!(gate.asked(), Vec::new());
}
