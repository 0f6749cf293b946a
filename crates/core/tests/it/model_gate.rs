//! Model gates and usage (issues 23 and 33): a gate is asked before every model call, may hold
//! it until there is room, keeps a hold until the call has ended and its usage was emitted, and
//! a refusal ends the run as failed with its reason before the call is made; Faux reports
//! scripted usage; a provider that reports none is counted by an estimate, and so is a call
//! aborted while it streams, never as free.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use volcanic_core::extension::{ModelGate, ModelHold};
use volcanic_core::message::{Message, StopReason, Usage};
use volcanic_core::provider::ModelRequest;
use volcanic_core::{EventKind, Extension, Registrar, RunFailure, RunOutcome, SessionOptions};

use crate::support::*;

/// Allows the first `allowed` calls, then refuses; records the models it was asked about.
struct Budget {
    allowed: usize,
    asked: AtomicUsize,
    models: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl ModelGate for Budget {
    async fn admit(&self, request: &ModelRequest) -> Result<ModelHold, String> {
        self.models.lock().unwrap().push(request.model.clone());
        if self.asked.fetch_add(1, Ordering::SeqCst) < self.allowed {
            Ok(ModelHold::none())
        } else {
            Err("the daily token cap is reached".into())
        }
    }
}

struct Gated(Arc<dyn ModelGate>);

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

/// Admits every call with a hold that marks `held` while it lives; counts the calls admitted.
struct Holding {
    held: Arc<AtomicBool>,
    admitted: AtomicUsize,
}

impl Holding {
    fn new() -> Arc<Self> {
        Arc::new(Holding { held: Arc::new(AtomicBool::new(false)), admitted: AtomicUsize::new(0) })
    }
}

struct Hold(Arc<AtomicBool>);

impl Drop for Hold {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl ModelGate for Holding {
    async fn admit(&self, _request: &ModelRequest) -> Result<ModelHold, String> {
        assert!(!self.held.swap(true, Ordering::SeqCst), "admitted while a hold is kept");
        self.admitted.fetch_add(1, Ordering::SeqCst);
        Ok(ModelHold::new(Hold(self.held.clone())))
    }
}

/// Records, at each assistant `MessageEnd`, whether the gate's hold was still kept.
struct Watch {
    gate: Arc<Holding>,
    at_message_end: Arc<Mutex<Vec<bool>>>,
}

impl Extension for Watch {
    fn name(&self) -> &str {
        "watch"
    }

    fn register(&self, registrar: &mut Registrar) {
        registrar.model_gate(self.gate.clone());
        let (held, seen) = (self.gate.held.clone(), self.at_message_end.clone());
        registrar.listener(Arc::new(move |event: &volcanic_core::SessionEvent| {
            if let EventKind::MessageEnd { message, .. } = &event.kind
                && let Message::Assistant(_) = &**message
            {
                seen.lock().unwrap().push(held.load(Ordering::SeqCst));
            }
        }));
    }
}

#[tokio::test]
async fn model_gate_hold_is_kept_until_the_call_has_ended_and_its_usage_was_emitted() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let gate = Holding::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut options = SessionOptions::new("held", dirs.ws());
    options.extensions.push(Arc::new(Watch { gate: gate.clone(), at_message_end: seen.clone() }));
    let session = factory.open(options).await.unwrap();
    let text = directive(json!([{"tool": "ls", "args": {}}, {"text": "ok"}]));
    let (_, settled) = collect(session.prompt(text).unwrap()).await;
    assert_eq!(settled.outcome, RunOutcome::Completed);
    // Two calls, each still held when its answer (and usage) was emitted, released after.
    assert_eq!(*seen.lock().unwrap(), [true, true]);
    assert!(!gate.held.load(Ordering::SeqCst), "the hold outlived the run");
}

#[tokio::test]
async fn each_retry_is_admitted_on_its_own_and_an_attempt_failed_while_streaming_counts() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let api = MockServer::start().await;
    // The first attempt streams part of an answer, then the API reports it is overloaded.
    let broken = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}"#,
        "\n\nevent: content_block_start\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        "\n\nevent: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"the first half of an answer"}}"#,
        "\n\nevent: error\n",
        r#"data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        "\n\n"
    );
    let sse = |body: String| {
        ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .set_body_string(body)
    };
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(sse(broken.to_string()))
        .up_to_n_times(1)
        .mount(&api)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(sse(crate::retry::sse_answer("whole")))
        .mount(&api)
        .await;
    let dirs = Dirs::new();
    let factory = factory(&dirs, crate::retry::anthropic(&api));
    let gate = Holding::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut options = SessionOptions::new("retried", dirs.ws());
    options.extensions.push(Arc::new(Watch { gate: gate.clone(), at_message_end: seen.clone() }));
    let session = factory.open(options).await.unwrap();
    let (events, settled) = collect(session.prompt("hello").unwrap()).await;
    assert_eq!(settled.outcome, RunOutcome::Completed, "{events:?}");
    // Two attempts, each admitted on its own and held until its answer was emitted.
    assert_eq!(gate.admitted.load(Ordering::SeqCst), 2);
    assert_eq!(*seen.lock().unwrap(), [true, true]);
    let answers: Vec<_> = session
        .messages()
        .into_iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(answers[0].stop_reason, StopReason::Error);
    // The failed attempt streamed: its input and what streamed count, by estimate.
    let failed = answers[0].usage;
    assert!(failed.estimated && failed.input_tokens > 0 && failed.output_tokens > 0, "{failed:?}");
    assert_eq!((answers[1].usage.input_tokens, answers[1].usage.output_tokens), (12, 5));
}

/// Holds every call until the run is aborted; tells when it was asked.
struct Closed {
    asked: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl ModelGate for Closed {
    async fn admit(&self, _request: &ModelRequest) -> Result<ModelHold, String> {
        self.asked.notify_one();
        std::future::pending().await
    }
}

#[tokio::test]
async fn an_abort_ends_a_model_gate_wait_and_no_call_is_made() {
    let dirs = Dirs::new();
    let faux = faux();
    let factory = factory(&dirs, faux.clone());
    let mut options = SessionOptions::new("waiting", dirs.ws());
    let gate = Arc::new(Closed { asked: tokio::sync::Notify::new() });
    options.extensions.push(Arc::new(Gated(gate.clone())));
    let session = factory.open(options).await.unwrap();
    let handle = session.prompt("hello").unwrap();
    tokio::time::timeout(DEADLINE, gate.asked.notified()).await.unwrap();
    assert!(session.abort());
    let (_, settled) = tokio::time::timeout(DEADLINE, collect(handle)).await.unwrap();
    assert_eq!(settled.outcome, RunOutcome::Aborted);
    assert!(faux.requests().is_empty(), "a call was made past a gate that never admitted it");
}

#[tokio::test]
async fn a_call_aborted_while_it_streams_counts_what_was_sent_and_what_streamed() {
    let dirs = Dirs::new();
    let faux = faux();
    let factory = factory(&dirs, faux.clone());
    let session = open(&factory, &dirs, "aborted-usage").await;
    let text = directive(json!([{"text": "abcdefgh".repeat(20), "chunk": 8, "delay_ms": 100}]));
    let mut handle = session.prompt(text).unwrap();
    let mut streamed = 0;
    tokio::time::timeout(DEADLINE, async {
        while let Some(event) = handle.events().recv().await {
            if let EventKind::TextDelta { text, .. } = &event.kind {
                streamed += text.len();
                break;
            }
        }
    })
    .await
    .unwrap();
    session.abort();
    let (_, settled) = collect(handle).await;
    assert_eq!(settled.outcome, RunOutcome::Aborted);
    let aborted = session
        .messages()
        .into_iter()
        .find_map(|m| match m {
            Message::Assistant(a) => Some(a),
            _ => None,
        })
        .unwrap();
    assert_eq!(aborted.stop_reason, StopReason::Aborted);
    let request = faux.requests().pop().unwrap();
    let sent = volcanic_core::provider::estimate_stopped_usage(&request, 0);
    assert!(sent.input_tokens > 100, "{sent:?}");
    let usage = aborted.usage;
    assert_eq!(usage.input_tokens, sent.input_tokens, "{usage:?}");
    assert!(usage.output_tokens >= (streamed / 4) as u64 && usage.output_tokens > 0, "{usage:?}");
    assert!(usage.estimated);
    assert_eq!(settled.usage, usage, "the run's usage leaves the aborted call out");
}

#[tokio::test]
async fn usage_ceiling_is_at_least_every_estimate_of_the_same_call() {
    let request = volcanic_core::provider::ModelRequest {
        model: "m".into(),
        system: "s".repeat(400),
        messages: vec![Message::user("u".repeat(400))],
        tools: Arc::from(Vec::new()),
        max_output_tokens: 100,
    };
    let ceiling = volcanic_core::provider::usage_ceiling(&request);
    // Every byte a token, a margin for the provider's framing, and the output maximum.
    assert_eq!(ceiling.output_tokens, 100);
    assert!(ceiling.input_tokens >= 800, "{ceiling:?}");
    let long = volcanic_core::message::AssistantMessage {
        content: vec![volcanic_core::message::AssistantBlock::Text { text: "a".repeat(4000) }],
        ..Default::default()
    };
    let estimated = volcanic_core::provider::estimate_usage(&request, &long);
    // An estimate never counts more output than the call could make.
    assert_eq!(estimated.output_tokens, 100);
    let stopped = volcanic_core::provider::estimate_stopped_usage(&request, 4000);
    for usage in [estimated, stopped] {
        assert!(usage.input_tokens <= ceiling.input_tokens, "{usage:?}");
        assert!(usage.output_tokens <= ceiling.output_tokens, "{usage:?}");
    }
    assert_eq!(Usage { estimated: false, ..stopped }.total(), 200 + 100);
}
