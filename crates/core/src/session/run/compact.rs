//! The run loop's side of compaction (the pure parts are in `session::compact`): measuring before
//! each model call, the summary call, the journal entry and the event.
//!
//! Invariants: a compaction is journaled before its `Compacted` event is emitted, and the
//! session's view changes only together with that entry (so a resume rebuilds it). The summary
//! call passes the session's model gates like any call, counts in the run's usage, and what the
//! gates keep for it is dropped only after the `Compacted` event (which carries its usage)
//! reached the listeners. A failed summary loses nothing: the view only gains the trims. One
//! compaction after a context overflow per run, then the run fails.

use std::sync::Arc;

use super::{GateStop, Run};
use crate::config::CompactionConfig;
use crate::message::Message;
use crate::provider::ToolSpec;
use crate::session::compact::{self, Compaction, Force, Report, Summary};
use crate::session::journal::{self, Entry};
use crate::session::{EventKind, RunFailure, RunOutcome};
use crate::{Error, Result};

/// What the owner is told when the conversation does not fit and compacting did not help.
const DOES_NOT_FIT: &str = "The conversation no longer fits the model's context window and \
compacting it did not make enough room. Nothing was lost: /compact tries again (say what to keep \
after it), /new starts a fresh conversation and keeps this one archived.";

/// What a run knows of the window for its calls.
#[derive(Clone)]
pub(super) struct Window {
    config: CompactionConfig,
    model: String,
    /// The window, in tokens.
    tokens: u64,
    /// Tokens of the system prompt and the tools, sent with every call.
    fixed: u64,
}

impl Window {
    pub(super) fn new(
        config: &CompactionConfig,
        model: &str,
        system: &str,
        tools: &[ToolSpec],
    ) -> Self {
        Window {
            config: config.clone(),
            model: model.to_string(),
            tokens: crate::provider::window::context_window(model, config.context_window),
            fixed: compact::fixed_tokens(system, tools),
        }
    }

    fn threshold(&self) -> u64 {
        compact::share(self.tokens, self.config.threshold_percent)
    }
}

/// The messages for the next model call, or how the run ends instead.
pub(super) enum Prepared {
    View(Vec<Message>),
    Stop(RunOutcome),
}

/// How a compaction went.
enum Compacting {
    /// It was made (journaled, announced); `changed` when the view is smaller than before.
    Done {
        changed: bool,
        failed: Option<String>,
        tokens_after: u64,
    },
    Aborted,
}

impl Run<'_> {
    /// The view for the next model call, compacting first when the conversation would take more
    /// than the threshold of the window. Fails the run when a summary could not be made and what
    /// is left does not fit the window.
    pub(super) async fn prepare_view(&mut self, window: &Window) -> Result<Prepared> {
        if window.config.enabled {
            let occupied = {
                let state = self.inner.state();
                compact::occupied(window.fixed, &state.messages, &state.compaction)
            };
            if occupied > window.threshold() {
                match self.compact(window, Force::Threshold, None, occupied).await? {
                    Compacting::Aborted => return Ok(Prepared::Stop(RunOutcome::Aborted)),
                    Compacting::Done { failed: Some(error), tokens_after, .. }
                        if tokens_after >= window.tokens =>
                    {
                        return Ok(Prepared::Stop(does_not_fit(&error)));
                    }
                    Compacting::Done { .. } => {}
                }
            }
        }
        let state = self.inner.state();
        Ok(Prepared::View(compact::view(&state.messages, &state.compaction)))
    }

    /// After the provider refused a call as too long: the first time in the run, compacts and
    /// returns `None` (call again); otherwise, or when compacting made no room, how the run ends.
    pub(super) async fn after_overflow(
        &mut self,
        window: &Window,
        compacted: &mut bool,
        message: String,
    ) -> Result<Option<RunOutcome>> {
        if !window.config.enabled || *compacted {
            return Ok(Some(does_not_fit(&message)));
        }
        *compacted = true;
        let occupied = {
            let state = self.inner.state();
            compact::occupied(window.fixed, &state.messages, &state.compaction)
        };
        // The window is smaller than believed (a local server's setting, or the estimate was
        // short): plan as if it were what was just refused.
        let refused = Window { tokens: window.tokens.min(occupied), ..window.clone() };
        Ok(match self.compact(&refused, Force::Overflow, None, occupied).await? {
            Compacting::Aborted => Some(RunOutcome::Aborted),
            Compacting::Done { changed: true, .. } => None,
            Compacting::Done { changed: false, failed, .. } => {
                Some(does_not_fit(failed.as_deref().unwrap_or(&message)))
            }
        })
    }

    /// The owner's `/compact`: a run that only compacts.
    pub(super) async fn compact_now(&mut self, instruction: Option<String>) -> Result<RunOutcome> {
        self.append(&Entry::RunStart { run_id: self.run_id.to_string(), ts: journal::now() })?;
        self.emit(EventKind::RunStart);
        let system = self.system_prompt().await?;
        let model = self
            .inner
            .shared
            .config
            .model
            .clone()
            .unwrap_or_else(|| self.inner.shared.provider.default_model().to_string());
        let specs: Arc<[ToolSpec]> = self.inner.specs.clone();
        let window = Window::new(&self.inner.shared.config.compaction, &model, &system, &specs);
        let occupied = {
            let state = self.inner.state();
            compact::occupied(window.fixed, &state.messages, &state.compaction)
        };
        Ok(match self.compact(&window, Force::Owner, instruction, occupied).await? {
            Compacting::Aborted => RunOutcome::Aborted,
            Compacting::Done { failed: Some(error), .. } => RunOutcome::Failed {
                error: RunFailure::Provider {
                    message: format!(
                        "compacting failed: {error}. Nothing was lost; try /compact again later, or /new to start a fresh conversation"
                    ),
                },
            },
            Compacting::Done { failed: None, .. } => RunOutcome::Completed,
        })
    }

    /// Compacts: trims old tool results, then (unless that was enough for an automatic
    /// compaction) summarises the older turns; journals the new view and announces it.
    async fn compact(
        &mut self,
        window: &Window,
        force: Force,
        instruction: Option<String>,
        tokens_before: u64,
    ) -> Result<Compacting> {
        let config = &window.config;
        let (messages, current) = {
            let state = self.inner.state();
            (state.messages.clone(), state.compaction.clone())
        };
        let plan = compact::plan(&messages, &current, window.tokens, config, force);
        let mut next = Compaction {
            summary: current.summary.clone(),
            trim_before: plan.trim_before,
            trim_above: config.trim_above_bytes,
            at: messages.len(),
        };
        let estimate = |view: &Compaction| {
            window.fixed
                + compact::view(&messages, view).iter().map(compact::message_tokens).sum::<u64>()
        };
        let trimmed_only = estimate(&next);
        let enough = force == Force::Threshold && trimmed_only <= window.threshold();
        let mut report = Report { tokens_before, instruction, ..Report::default() };
        if !enough && plan.cut > current.cut() {
            let request = compact::summary_request(
                &window.model,
                &messages,
                &next,
                plan.cut,
                window.tokens,
                report.instruction.as_deref(),
            );
            let holds = match self.pass_model_gates(&request).await {
                Ok(holds) => holds,
                Err(GateStop::Aborted) => return Ok(Compacting::Aborted),
                Err(GateStop::Refused(reason)) => {
                    report.error = Some(self.inner.redactor.current().redact(&reason).into_owned());
                    Vec::new()
                }
            };
            if report.error.is_none() {
                let provider = self.inner.shared.provider.clone();
                let result = tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => None,
                    result = provider.complete(&request, &|_| {}, &self.cancel) => Some(result),
                };
                match result {
                    None => {
                        // Sent, so billed like an aborted answer: counted, journaled and
                        // announced (listeners meter it), the view unchanged.
                        report.usage = crate::provider::estimate_stopped_usage(&request, 0);
                        report.model = request.model.clone();
                        report.error = Some("aborted".into());
                        self.usage.add(&report.usage);
                        let unchanged = Compaction { trim_before: current.trim_before, ..next };
                        self.commit(unchanged, report, &messages, &current, estimate)?;
                        drop(holds);
                        return Ok(Compacting::Aborted);
                    }
                    Some(Ok(answer)) => {
                        let usage = if answer.usage.is_empty() {
                            crate::provider::estimate_usage(&request, &answer)
                        } else {
                            answer.usage
                        };
                        report.usage = usage;
                        report.model = request.model.clone();
                        let text = answer.text();
                        if text.trim().is_empty() {
                            report.error = Some("the model answered with an empty summary".into());
                        } else {
                            let redacted =
                                self.inner.redactor.current().redact(text.trim()).into_owned();
                            next.summary = Some(Summary { cut: plan.cut, text: redacted });
                            report.summarized = plan.cut - current.cut();
                        }
                    }
                    Some(Err(err)) => {
                        report.error =
                            Some(self.inner.redactor.current().redact(&err.message).into_owned());
                    }
                }
            }
            self.usage.add(&report.usage);
            let outcome = self.commit(next, report, &messages, &current, estimate);
            drop(holds);
            return outcome;
        }
        self.commit(next, report, &messages, &current, estimate)
    }

    /// Journals the new view, makes it the session's, and announces it.
    fn commit(
        &mut self,
        next: Compaction,
        mut report: Report,
        messages: &[Message],
        current: &Compaction,
        estimate: impl Fn(&Compaction) -> u64,
    ) -> Result<Compacting> {
        let shown_from = next.cut().max(current.trim_before);
        report.trimmed =
            compact::count_trimmed(messages, shown_from, next.trim_before, next.trim_above);
        report.tokens_after = estimate(&next);
        let changed = next.cut() > current.cut() || report.trimmed > 0;
        let failed = report.error.clone();
        let tokens_after = report.tokens_after;
        let record = next.record(report);
        if let Some(error) = &failed {
            tracing::warn!(scope = %self.inner.scope, error = %crate::escape::one_line(error), trimmed = record.trimmed, "no summary could be made; the conversation was only trimmed");
        } else {
            tracing::info!(scope = %self.inner.scope, summarized = record.summarized, trimmed = record.trimmed, tokens_before = record.tokens_before, tokens_after = record.tokens_after, "conversation compacted");
        }
        let notice = record.notice();
        let entry = Entry::Compaction {
            run_id: self.run_id.to_string(),
            ts: journal::now(),
            compaction: record,
        };
        {
            let redactor = self.inner.redactor.current();
            let mut state = self.inner.state();
            let journal = state
                .journal
                .as_mut()
                .ok_or_else(|| Error::Closed { scope: self.inner.scope.clone() })?;
            journal.append(&entry, &redactor)?;
            state.compaction = next;
        }
        self.emit(EventKind::Compacted(notice));
        Ok(Compacting::Done { changed, failed, tokens_after })
    }
}

/// The run's end when the conversation does not fit: `cause` and what the owner can do.
fn does_not_fit(cause: &str) -> RunOutcome {
    RunOutcome::Failed {
        error: RunFailure::Provider { message: format!("{cause}. {DOES_NOT_FIT}") },
    }
}
