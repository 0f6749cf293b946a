//! Model gates and usage (issue 23): a gate is asked before every model call and a refusal ends
//! the run as failed with its reason before the call is made; Faux reports scripted usage; a
//! provider that reports none is counted by an estimate, never as free.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use volcanic_core::extension::ModelGate;
use volcanic_core::message::{Message, Usage};
use volcanic_core::{Extension, Registrar, RunFailure, RunOutcome, SessionOptions};

use crate::support::*;

/// Allows the first `allowed` calls, then refuses; records the models it was asked about.
struct Budget {
    allowed: usize,
    asked: AtomicUsize,
    models: Mutex<Vec<String>>,
}

impl ModelGate for Budget {
    fn check(&self, model: &str) -> Result<(), String> {
        self.models.lock().unwrap().push(model.to_string());
        if self.asked.fetch_add(1, Ordering::SeqCst) < self.allowed {
            Ok(())
        } else {
            Err("the daily token cap is reached".into())
        }
    }
}

struct Gated(Arc<Budget>);

impl Extension for Gated {
    fn name(&self) -> &str {
        "budget"
    }

    fn register(&self, registrar: &mut Registrar) {
        registrar.model_gate(self.0.clone());
    }
}

fn budget(allowed: usize) -> Arc<Budget> {
    Arc::new(Budget { allowed, asked: AtomicUsize::new(0), models: Mutex::new(Vec::new()) })
}

#[tokio::test]
async fn model_gate_refusal_ends_the_run_before_the_next_call_with_its_reason() {
    let dirs = Dirs::new();
    let faux = faux();
    let factory = factory(&dirs, faux.clone());
    let gate = budget(1);
    let mut options = SessionOptions::new("gated", dirs.ws());
    options.extensions.push(Arc::new(Gated(gate.clone())));
    let session = factory.open(options).await.unwrap();
    let text = directive(json!([
        {"usage": {"input": 1200, "output": 34}},
        {"tool": "bash", "args": {"command": "echo ran > marker"}},
        {"text": "never said"}
    ]));

    let (_, settled) = collect(session.prompt(text).unwrap()).await;

    assert_eq!(
        settled.outcome,
        RunOutcome::Failed {
            error: RunFailure::Stopped { reason: "the daily token cap is reached".into() }
        }
    );
    assert!(dirs.ws().join("marker").exists(), "the first answer's tool ran");
    assert_eq!(faux.requests().len(), 1, "the refused call was not made");
    assert_eq!(*gate.models.lock().unwrap(), ["faux", "faux"]);
    // Faux reported the scripted counts, and the run adds them up.
    assert_eq!((settled.usage.input_tokens, settled.usage.output_tokens), (1200, 34));
    assert!(!settled.usage.estimated);
}

#[tokio::test]
async fn model_gate_refusal_is_kept_in_the_journal_as_a_stop() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let mut options = SessionOptions::new("gated", dirs.ws());
    options.extensions.push(Arc::new(Gated(budget(0))));
    let session = factory.open(options).await.unwrap();
    let (_, settled) = collect(session.prompt("hello").unwrap()).await;
    assert!(matches!(settled.outcome, RunOutcome::Failed { error: RunFailure::Stopped { .. } }));
    // Nothing was asked of the model: the journal holds the user message and no answer.
    let answers = session.messages().iter().filter(|m| matches!(m, Message::Assistant(_))).count();
    assert_eq!(answers, 0);
    session.close().unwrap();
    let journal = std::fs::read_dir(factory.session_dir("gated"))
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .unwrap();
    assert!(journal.contains(r#""cause":"stopped""#), "{journal}");
}

#[tokio::test]
async fn estimate_stands_in_for_usage_a_provider_does_not_report() {
    let request = volcanic_core::provider::ModelRequest {
        model: "m".into(),
        system: "s".repeat(400),
        messages: vec![Message::user("u".repeat(400))],
        tools: Arc::from(Vec::new()),
        max_output_tokens: 100,
    };
    let answer = volcanic_core::message::AssistantMessage {
        content: vec![volcanic_core::message::AssistantBlock::Text { text: "a".repeat(40) }],
        stop_reason: volcanic_core::message::StopReason::Stop,
        error: None,
        usage: Usage::default(),
        provider: "p".into(),
        model: "m".into(),
    };
    let usage = volcanic_core::provider::estimate_usage(&request, &answer);
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.estimated), (200, 10, true));
}
