//! The run loop: model call → tool calls → results → next model call, until the model answers
//! without tools, a tool ends the run, the turn limit is hit, the run is aborted, or it fails.
//!
//! Invariants: exactly one `RunStart` and one `Settled` per run (a panic anywhere in the loop is
//! caught and settles as failed); every message is appended to the journal before its
//! `MessageEnd` / `ToolEnd` is emitted; the session is marked idle before `Settled` is emitted, so
//! a listener may prompt again right away. Tool calls of one answer run one after the other, in
//! the order the model made them. No tool executes before every gate of the session
//! ([`crate::extension::ToolGate`]) allowed that call, and an abort ends a gate's wait at once
//! (the call then does not run). No model call, and no retry of one, is made before every model
//! gate of the session ([`crate::extension::ModelGate`]) admitted it, and what the gates keep for
//! an attempt is dropped only once its `MessageEnd` (with its usage) was emitted. A call that was sent is never counted as free: an answer without usage gets an
//! estimate, and so does a call aborted or failed while it streamed (what was sent, and what
//! streamed). A model call that would take the conversation over the compaction threshold
//! compacts it first, and a context overflow compacts once and retries once per run, never more
//! (see `compact`). Every run's task is on the factory's run tracker, so
//! [`SessionFactory::close_runs`](super::SessionFactory::close_runs) returns only once each run
//! has journaled its end and emitted `Settled`.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::journal::{self, ABORTED_NOTE, Entry, RunEnd};
use super::{EventKind, Inner, Role, RunFailure, RunHandle, RunOutcome, RunSettled, Running};
use crate::extension::{GateCall, GateDecision, ModelHold};
use crate::message::{
    AssistantBlock, AssistantMessage, Message, StopReason, ToolCall, ToolResult, Usage,
};
use crate::provider::{Delta, ModelRequest, ToolSpec};
use crate::tool::{ToolContext, ToolControl, ToolOutput};
use crate::{Error, Result};

/// How long a tool may take to wind down after an abort before it is dropped.
const ABORT_GRACE: Duration = Duration::from_secs(3);

/// The result of a call not executed because the run was aborted.
const NOT_EXECUTED_ABORTED: &str = "not executed: run aborted";

/// The refusal of a gate that panicked: its own words are lost, and the call must not run.
const GATE_FAILED: &str = "the approval check failed unexpectedly";

/// The failure of a run whose model gate panicked (the panic is logged).
const MODEL_GATE_FAILED: &str = "the check before the model call failed unexpectedly";

mod compact;

/// What a run is started with.
pub(crate) enum Input {
    /// A user message to answer.
    Prompt(String),
    /// Compact the conversation now, keeping what the instruction names (`/compact`).
    Compact(Option<String>),
}

pub(crate) fn start(inner: &Arc<Inner>, input: Input) -> Result<RunHandle> {
    let run_id: Arc<str> = format!("run_{}", uuid::Uuid::now_v7().simple()).into();
    let cancel = inner.shared.shutdown.child_token();
    let (sender, receiver) = watch::channel(None);
    {
        let mut state = inner.state();
        if state.journal.is_none() {
            return Err(Error::Closed { scope: inner.scope.clone() });
        }
        if state.running.is_some() {
            return Err(Error::Busy { scope: inner.scope.clone() });
        }
        state.running = Some(Running { cancel: cancel.clone(), settled: receiver.clone() });
    }
    let events = inner.hub.subscribe().for_run(run_id.clone());
    let task_inner = inner.clone();
    let task_run_id = run_id.clone();
    inner.shared.runs.spawn(async move {
        let mut run = Run::new(&task_inner, task_run_id.clone(), cancel);
        let settled = match AssertUnwindSafe(run.execute(input)).catch_unwind().await {
            Ok(settled) => settled,
            Err(_) => {
                tracing::error!(scope = %task_inner.scope, run_id = %task_run_id, "run panicked");
                run.settle(RunOutcome::Failed { error: RunFailure::Unexpected })
            }
        };
        task_inner.state().running = None;
        task_inner.emit(&task_run_id, EventKind::Settled(settled.clone()));
        sender.send_replace(Some(settled));
    });
    Ok(RunHandle { run_id, events, settled: receiver })
}

/// One run's working state.
struct Run<'a> {
    inner: &'a Arc<Inner>,
    run_id: Arc<str>,
    cancel: CancellationToken,
    turns: u32,
    usage: Usage,
    message_index: u32,
    final_text: String,
    /// Whether this run warned that the provider reports no usage (once per run).
    warned_estimate: bool,
}

/// Why the model gates did not let a call be made.
enum GateStop {
    /// A gate refused it, with this reason.
    Refused(String),
    /// The run was aborted while a gate held it.
    Aborted,
}

/// How a model call ended.
enum Answer {
    Ok(AssistantMessage),
    Aborted,
    Failed(String),
    /// A model gate refused an attempt, with this reason.
    Refused(String),
    /// The provider refused the request as too long for the model's context window.
    Overflow(String),
}

impl<'a> Run<'a> {
    fn new(inner: &'a Arc<Inner>, run_id: Arc<str>, cancel: CancellationToken) -> Self {
        Run {
            inner,
            run_id,
            cancel,
            turns: 0,
            usage: Usage::default(),
            message_index: 0,
            final_text: String::new(),
            warned_estimate: false,
        }
    }

    async fn execute(&mut self, input: Input) -> RunSettled {
        // An aborted compaction ran no tool and changed nothing: no note for the model.
        let answering = matches!(input, Input::Prompt(_));
        let outcome = match input {
            Input::Prompt(text) => self.run_loop(text).await,
            Input::Compact(instruction) => self.compact_now(instruction).await,
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(err) => {
                tracing::error!(scope = %self.inner.scope, error = %self.inner.redactor.current().redact(&err.to_string()), "run failed on the session journal");
                RunOutcome::Failed { error: RunFailure::Unexpected }
            }
        };
        if outcome == RunOutcome::Aborted
            && answering
            && let Err(err) = self.record(Message::Note { text: ABORTED_NOTE.into() })
        {
            tracing::error!(scope = %self.inner.scope, error = %err, "cannot journal the abort note");
        }
        self.settle(outcome)
    }

    /// Journals the end of the run and builds the settled value.
    fn settle(&mut self, outcome: RunOutcome) -> RunSettled {
        let end = match &outcome {
            RunOutcome::Completed => RunEnd::Completed,
            RunOutcome::StoppedByTool { tool, .. } => RunEnd::StoppedByTool { tool: tool.clone() },
            RunOutcome::Aborted => RunEnd::Aborted,
            RunOutcome::Failed { error } => RunEnd::Failed(error.clone()),
            RunOutcome::MaxTurns => RunEnd::MaxTurns,
        };
        let entry =
            Entry::RunEnd { run_id: self.run_id.to_string(), ts: journal::now(), outcome: end };
        let sync = self.inner.sync_run_end.load(std::sync::atomic::Ordering::Relaxed);
        let written = self.append(&entry).and_then(|()| if sync { self.sync() } else { Ok(()) });
        if let Err(err) = written {
            tracing::error!(scope = %self.inner.scope, error = %err, "cannot journal the end of a run");
        }
        RunSettled {
            outcome,
            final_text: std::mem::take(&mut self.final_text),
            usage: self.usage,
            turns: self.turns,
        }
    }

    async fn run_loop(&mut self, text: String) -> Result<RunOutcome> {
        self.append(&Entry::RunStart { run_id: self.run_id.to_string(), ts: journal::now() })?;
        self.emit(EventKind::RunStart);
        self.record(Message::user(text))?;

        let specs: Arc<[ToolSpec]> = self.inner.specs.clone();
        let config = &self.inner.shared.config;
        let system = self.system_prompt().await?;
        let model = config
            .model
            .clone()
            .unwrap_or_else(|| self.inner.shared.provider.default_model().to_string());
        let window =
            compact::Window::new(&self.inner.shared.config.compaction, &model, &system, &specs);
        let mut overflow_compacted = false;

        loop {
            if self.cancel.is_cancelled() {
                return Ok(RunOutcome::Aborted);
            }
            if self.turns >= config.max_turns {
                return Ok(RunOutcome::MaxTurns);
            }
            let messages = match self.prepare_view(&window).await? {
                compact::Prepared::View(messages) => messages,
                compact::Prepared::Stop(outcome) => return Ok(outcome),
            };
            let request = ModelRequest {
                model: model.clone(),
                system: system.clone(),
                messages,
                tools: specs.clone(),
                max_output_tokens: config.max_output_tokens,
            };
            let answer = match self.call_model(&request).await? {
                Answer::Ok(answer) => answer,
                Answer::Aborted => return Ok(RunOutcome::Aborted),
                Answer::Failed(message) => {
                    return Ok(RunOutcome::Failed { error: RunFailure::Provider { message } });
                }
                Answer::Overflow(message) => {
                    match self.after_overflow(&window, &mut overflow_compacted, message).await? {
                        Some(outcome) => return Ok(outcome),
                        None => continue,
                    }
                }
                Answer::Refused(reason) => {
                    let reason = self.inner.redactor.current().redact(&reason).into_owned();
                    tracing::info!(scope = %self.inner.scope, reason = %reason, "a model gate stopped the run");
                    return Ok(RunOutcome::Failed { error: RunFailure::Stopped { reason } });
                }
            };
            let calls: Vec<ToolCall> = answer.tool_calls().cloned().collect();
            if calls.is_empty() {
                return Ok(RunOutcome::Completed);
            }
            let mut stop = None;
            for call in calls {
                let output = self.call_tool(&call).await;
                if let (ToolControl::EndRun(reason), None) = (&output.control, &stop) {
                    stop = Some(RunOutcome::StoppedByTool {
                        tool: call.name.clone(),
                        call_id: call.id.clone(),
                        stop: reason.clone(),
                    });
                }
                let result = ToolResult {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    content: output.content,
                    is_error: output.is_error,
                    details: output.details,
                };
                self.record(Message::ToolResult(result.clone()))?;
                self.emit(EventKind::ToolEnd { call_id: call.id, name: call.name, result });
            }
            if self.cancel.is_cancelled() {
                return Ok(RunOutcome::Aborted);
            }
            if let Some(stop) = stop {
                return Ok(stop);
            }
        }
    }

    /// The run's system prompt: the one read at open when still fresh, else the workspace files
    /// read now.
    async fn system_prompt(&self) -> Result<String> {
        let specs: Arc<[ToolSpec]> = self.inner.specs.clone();
        let config = &self.inner.shared.config;
        Ok(if let Some(text) = self.inner.take_prefetched_prompt() {
            text
        } else {
            // File reads: off the async threads.
            let (cwd, limits, tools, fragments) = (
                self.inner.cwd.clone(),
                config.context.clone(),
                specs.clone(),
                self.inner.fragments.clone(),
            );
            tokio::task::spawn_blocking(move || {
                crate::workspace::system_prompt(
                    &cwd,
                    &limits,
                    &tools,
                    &fragments,
                    chrono::Local::now(),
                )
            })
            .await
            .map_err(|e| Error::io(&self.inner.cwd, std::io::Error::other(e)))?
        })
    }

    /// One model call with retries, each attempt admitted by the model gates first (the first
    /// one starts the turn). Every attempt is journaled as an assistant message, and what the
    /// gates keep for it is dropped only after that.
    async fn call_model(&mut self, request: &ModelRequest) -> Result<Answer> {
        let retry = self.inner.shared.config.retry.clone();
        let provider = self.inner.shared.provider.clone();
        let mut attempt = 0;
        loop {
            // Kept until the attempt has ended and its usage reached the listeners.
            let holds = match self.pass_model_gates(request).await {
                Ok(holds) => holds,
                Err(GateStop::Aborted) => return Ok(Answer::Aborted),
                Err(GateStop::Refused(reason)) => return Ok(Answer::Refused(reason)),
            };
            if attempt == 0 {
                self.turns += 1;
                self.emit(EventKind::TurnStart { turn: self.turns });
            }
            self.message_index += 1;
            let index = self.message_index;
            self.emit(EventKind::MessageStart { index, role: Role::Assistant });
            let partial = Mutex::new(String::new());
            // Characters of thinking streamed: billed as output like the text.
            let thought = AtomicUsize::new(0);
            let result = {
                let sink = |delta: Delta| match delta {
                    Delta::Text(text) => {
                        partial.lock().unwrap_or_else(PoisonError::into_inner).push_str(&text);
                        self.emit(EventKind::TextDelta { index, text });
                    }
                    Delta::Thinking(text) => {
                        thought.fetch_add(text.len(), Ordering::Relaxed);
                        self.emit(EventKind::ThinkingDelta { index, text });
                    }
                };
                tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => None,
                    result = provider.complete(request, &sink, &self.cancel) => Some(result),
                }
            };
            let partial = partial.into_inner().unwrap_or_else(PoisonError::into_inner);
            let streamed = partial.len() + thought.into_inner();
            let stopped = |stop_reason, error, usage| AssistantMessage {
                content: if partial.is_empty() {
                    Vec::new()
                } else {
                    vec![AssistantBlock::Text { text: partial.clone() }]
                },
                stop_reason,
                error,
                usage,
                provider: provider.name().to_string(),
                model: request.model.clone(),
            };
            match result {
                Some(Ok(mut answer)) => {
                    if answer.provider.is_empty() {
                        answer.provider = provider.name().to_string();
                    }
                    if answer.usage.is_empty() {
                        // Never counted as free: caps and the owner's usage figures rely on it.
                        answer.usage = crate::provider::estimate_usage(request, &answer);
                        if !self.warned_estimate {
                            self.warned_estimate = true;
                            tracing::warn!(scope = %self.inner.scope, provider = provider.name(), model = %request.model, "the provider reported no token usage; counting an estimate (four characters a token)");
                        }
                    }
                    self.usage.add(&answer.usage);
                    self.final_text = answer.text();
                    self.record_assistant(index, answer.clone())?;
                    return Ok(Answer::Ok(answer));
                }
                None => {
                    // The request was sent: its input is billed, and whatever streamed.
                    let usage = crate::provider::estimate_stopped_usage(request, streamed);
                    self.usage.add(&usage);
                    self.final_text = partial.clone();
                    self.record_assistant(index, stopped(StopReason::Aborted, None, usage))?;
                    return Ok(Answer::Aborted);
                }
                Some(Err(err)) => {
                    let message = self.inner.redactor.current().redact(&err.message).into_owned();
                    // A failure before the answer began is not billed; one while it streamed is,
                    // like an abort.
                    let usage = if streamed > 0 {
                        crate::provider::estimate_stopped_usage(request, streamed)
                    } else {
                        Usage::default()
                    };
                    self.usage.add(&usage);
                    self.record_assistant(
                        index,
                        stopped(StopReason::Error, Some(message.clone()), usage),
                    )?;
                    // Not held through the wait: the next attempt is admitted on its own.
                    drop(holds);
                    if err.kind == crate::provider::ProviderErrorKind::ContextOverflow {
                        return Ok(Answer::Overflow(message));
                    }
                    if !err.kind.is_retryable() || attempt >= retry.max_retries {
                        return Ok(Answer::Failed(message));
                    }
                    attempt += 1;
                    let delay = retry.delay(attempt, err.retry_after);
                    // A provider's error text can quote what the caller wrote: one line, shown.
                    tracing::warn!(scope = %self.inner.scope, attempt, delay_ms = delay.as_millis() as u64, error = %crate::escape::one_line(&message), "model call failed, retrying");
                    self.emit(EventKind::Retry {
                        attempt,
                        max: retry.max_retries,
                        delay,
                        error: message,
                    });
                    tokio::select! {
                        biased;
                        () = self.cancel.cancelled() => return Ok(Answer::Aborted),
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    /// Runs one tool call once the session's gates allow it; every failure and refusal becomes an
    /// error result.
    async fn call_tool(&mut self, call: &ToolCall) -> ToolOutput {
        if self.cancel.is_cancelled() {
            return ToolOutput::error(NOT_EXECUTED_ABORTED);
        }
        self.emit(EventKind::ToolStart {
            call_id: call.id.clone(),
            name: call.name.clone(),
            args: call.args.clone(),
        });
        let Some(tool) = self.inner.tools.iter().find(|t| t.spec().name == call.name).cloned()
        else {
            let names: Vec<String> = self.inner.tools.iter().map(|t| t.spec().name).collect();
            return ToolOutput::error(format!(
                "unknown tool {:?}; available tools: {}",
                call.name,
                names.join(", ")
            ));
        };
        if let Err(refusal) = self.pass_gates(call).await {
            let redactor = self.inner.redactor.current();
            return ToolOutput::error(redactor.redact(&refusal).into_owned());
        }
        let updates = {
            let inner = self.inner.clone();
            let run_id = self.run_id.clone();
            let (call_id, name) = (call.id.clone(), call.name.clone());
            Arc::new(move |partial: String| {
                let partial = inner.redactor.current().redact(&partial).into_owned();
                inner.emit(
                    &run_id,
                    EventKind::ToolUpdate { call_id: call_id.clone(), name: name.clone(), partial },
                );
            })
        };
        let ctx = ToolContext {
            call_id: call.id.clone(),
            cwd: self.inner.cwd.clone(),
            cancel: self.cancel.clone(),
            limits: self.inner.shared.limits.clone(),
            exec: self.inner.exec.clone(),
            redactor: self.inner.redactor.current(),
            spill_dir: self.inner.spill_dir.clone(),
            channel: self.inner.channel.clone(),
            updates,
        };
        let execution = AssertUnwindSafe(tool.execute(call.args.clone(), ctx)).catch_unwind();
        tokio::pin!(execution);
        let finished = tokio::select! {
            biased;
            () = self.cancel.cancelled() => tokio::time::timeout(ABORT_GRACE, &mut execution).await.ok(),
            result = &mut execution => Some(result),
        };
        let mut output = match finished {
            Some(Ok(Ok(output))) => output,
            Some(Ok(Err(err))) => ToolOutput::error(err.0),
            Some(Err(_)) => {
                tracing::error!(tool = %crate::escape::one_line(&call.name), "tool panicked");
                ToolOutput::error(format!("the {} tool failed unexpectedly", call.name))
            }
            None => ToolOutput::error("aborted"),
        };
        let redactor = self.inner.redactor.current();
        output.content = redactor.redact(&output.content).into_owned();
        redactor.redact_json_values(&mut output.details);
        output
    }

    /// Asks the session's model gates about the call that would send `request`, in registration
    /// order, until one refuses; returns what the gates keep while the call runs. A gate that
    /// panics refuses with a fixed reason; an abort ends a gate's wait.
    async fn pass_model_gates(
        &self,
        request: &ModelRequest,
    ) -> std::result::Result<Vec<ModelHold>, GateStop> {
        let mut holds = Vec::new();
        for gate in &self.inner.model_gates {
            // Inside the async block, so a panic while making the future is caught as well.
            let admit = AssertUnwindSafe(async { gate.admit(request).await }).catch_unwind();
            let decision = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Err(GateStop::Aborted),
                decision = admit => decision,
            };
            match decision {
                Ok(Ok(hold)) => holds.push(hold),
                Ok(Err(reason)) => return Err(GateStop::Refused(reason)),
                Err(_) => {
                    tracing::error!(scope = %self.inner.scope, "a model gate panicked");
                    return Err(GateStop::Refused(MODEL_GATE_FAILED.to_string()));
                }
            }
        }
        Ok(holds)
    }

    /// Asks the session's gates about a call, in registration order, until one refuses.
    ///
    /// # Errors
    /// The text of the call's error result when it must not run: a gate refused it (its reason),
    /// a gate panicked, or the run was aborted while a gate held it.
    async fn pass_gates(&self, call: &ToolCall) -> std::result::Result<(), String> {
        if self.inner.gates.is_empty() {
            return Ok(());
        }
        let asked =
            GateCall { call_id: call.id.clone(), name: call.name.clone(), args: call.args.clone() };
        for gate in &self.inner.gates {
            // Inside the async block, so a panic while making the future is caught as well.
            let check = AssertUnwindSafe(async { gate.check(&asked).await }).catch_unwind();
            let decision = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Err(NOT_EXECUTED_ABORTED.to_string()),
                decision = check => decision,
            };
            match decision {
                Ok(GateDecision::Allow) => {}
                Ok(GateDecision::Refuse { reason }) => {
                    return Err(format!("not executed: {reason}"));
                }
                Err(_) => {
                    tracing::error!(scope = %self.inner.scope, tool = %crate::escape::one_line(&call.name), "a tool gate panicked");
                    return Err(format!("not executed: {GATE_FAILED}"));
                }
            }
        }
        Ok(())
    }

    fn record_assistant(&mut self, index: u32, answer: AssistantMessage) -> Result<()> {
        let message = Arc::new(Message::Assistant(answer));
        self.persist((*message).clone())?;
        self.emit(EventKind::MessageEnd { index, message });
        Ok(())
    }

    /// Journals a non-assistant message and emits its start and end.
    fn record(&mut self, message: Message) -> Result<()> {
        self.message_index += 1;
        let index = self.message_index;
        let role = Role::of(&message);
        self.persist(message.clone())?;
        self.emit(EventKind::MessageStart { index, role });
        self.emit(EventKind::MessageEnd { index, message: Arc::new(message) });
        Ok(())
    }

    fn persist(&self, message: Message) -> Result<()> {
        let entry = Entry::Message {
            run_id: self.run_id.to_string(),
            ts: journal::now(),
            message: message.clone(),
        };
        let redactor = self.inner.redactor.current();
        let mut state = self.inner.state();
        let journal = state
            .journal
            .as_mut()
            .ok_or_else(|| Error::Closed { scope: self.inner.scope.clone() })?;
        journal.append(&entry, &redactor)?;
        state.messages.push(message);
        Ok(())
    }

    fn append(&self, entry: &Entry) -> Result<()> {
        let redactor = self.inner.redactor.current();
        let mut state = self.inner.state();
        let journal = state
            .journal
            .as_mut()
            .ok_or_else(|| Error::Closed { scope: self.inner.scope.clone() })?;
        journal.append(entry, &redactor)
    }

    fn sync(&self) -> Result<()> {
        let state = self.inner.state();
        match &state.journal {
            Some(journal) => journal.sync(),
            None => Ok(()),
        }
    }

    fn emit(&self, kind: EventKind) {
        self.inner.emit(&self.run_id, kind);
    }
}
