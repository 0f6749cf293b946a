//! Sessions: open or resume a conversation by scope, prompt it, follow and abort its runs.
//!
//! A [`SessionFactory`] (`factory.rs`) holds what every session of a host shares (provider,
//! limits, the scrubbed environment, host extensions, the shutdown token).
//! [`SessionFactory::open`] loads or creates the scope's journal and returns a [`Session`] (this
//! file: the handle, its state, its runs); [`Session::prompt`] starts one run on its own task
//! (`run.rs`) and returns a [`RunHandle`]. A prompt while a run is active is refused with [`Error::Busy`].
//!
//! Invariant: every run's task is spawned on the factory's tracker, and nothing in here spawns
//! outside it; [`SessionFactory::close_runs`] awaits them all.

pub(crate) mod compact;
mod event;
mod factory;
mod fanout;
pub(crate) mod journal;
mod run;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::channel::ChatChannel;
use crate::exec::ExecEnv;
use crate::extension::{EventBus, Listener, ToolGate};
use crate::message::Message;
use crate::redact::{LiveRedactor, Redactor};
use crate::tool::Tool;
use crate::{Error, Result};

pub use compact::{Compacted, SUMMARY_SYSTEM_PROMPT};
pub use event::{EventKind, Role, RunFailure, RunOutcome, RunSettled, SessionEvent};
pub(crate) use factory::Shared;
pub use factory::{SessionFactory, SessionFactoryBuilder, SessionOptions};
pub use fanout::{EventStream, SUBSCRIBER_CAPACITY};
pub use journal::{
    ABORTED_NOTE, DANGLING_TOOL_RESULT, DurableMark, INTERRUPTED_NOTE, JournalFile, LoadReport,
};

use journal::Journal;

/// Longest a scope may be.
const MAX_SCOPE_LEN: usize = 200;

/// Checks a scope: 1-200 characters of `A-Z a-z 0-9 . _ -`, not starting with a dot.
pub fn is_valid_scope(scope: &str) -> bool {
    !scope.is_empty()
        && scope.len() <= MAX_SCOPE_LEN
        && !scope.starts_with('.')
        && scope.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// An open session. Cheap to clone; all clones are the same session.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub id: Arc<str>,
    pub scope: String,
    pub cwd: PathBuf,
    pub spill_dir: PathBuf,
    pub shared: Arc<Shared>,
    /// The environment of the session's tools (the factory's, or the session's own).
    pub exec: Arc<ExecEnv>,
    pub tools: Vec<Arc<dyn Tool>>,
    /// The tools' specs, in the same order (computed once, shared by every request of the session).
    pub specs: Arc<[crate::provider::ToolSpec]>,
    pub fragments: Vec<String>,
    pub listeners: Vec<Listener>,
    /// What every tool call passes before it runs, in registration order.
    pub gates: Vec<Arc<dyn ToolGate>>,
    /// What every model call passes before it is made, in registration order.
    pub model_gates: Vec<Arc<dyn crate::extension::ModelGate>>,
    pub channel: Option<Arc<dyn ChatChannel>>,
    pub redactor: Arc<LiveRedactor>,
    pub bus: EventBus,
    pub hub: fanout::Hub,
    /// The next event number; also serialises delivery (see `emit`).
    pub seq: Mutex<u64>,
    pub state: Mutex<State>,
    pub load_report: LoadReport,
    /// Whether a run's end syncs the journal before the run settles (see
    /// [`Session::defer_run_end_sync`]).
    pub sync_run_end: std::sync::atomic::AtomicBool,
    /// The system prompt as read when the session was opened, for the first run when it starts
    /// within [`PROMPT_FRESH`] of that read (an A2A task opens its session and starts its run at
    /// once); taken by that run or dropped, so later runs read the workspace files again.
    pub prefetched_prompt: Mutex<Option<Prefetched>>,
}

/// How old a system prompt read at [`SessionFactory::open`] may be for the first run to use it
/// instead of reading the workspace files again.
pub(crate) const PROMPT_FRESH: std::time::Duration = std::time::Duration::from_millis(500);

/// A system prompt read ahead of the run that uses it.
pub(crate) struct Prefetched {
    pub read_at: std::time::Instant,
    pub text: String,
}

pub(crate) struct State {
    pub messages: Vec<Message>,
    /// The model's view of `messages` (see [`compact`]).
    pub compaction: compact::Compaction,
    /// `None` once the session is closed.
    pub journal: Option<Journal>,
    pub running: Option<Running>,
}

pub(crate) struct Running {
    pub cancel: CancellationToken,
    pub settled: watch::Receiver<Option<RunSettled>>,
}

impl Inner {
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The system prompt read at open, once, if it is still fresh (see [`PROMPT_FRESH`]).
    pub(crate) fn take_prefetched_prompt(&self) -> Option<String> {
        let prefetched =
            self.prefetched_prompt.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        (prefetched.read_at.elapsed() <= PROMPT_FRESH).then_some(prefetched.text)
    }

    /// Stamps and delivers an event: listeners first, then subscribers. One lock covers the
    /// numbering and the delivery, so events reach everyone in `seq` order even when an old run's
    /// last event and a new run's first one race. A panicking listener is logged and skipped.
    pub(crate) fn emit(&self, run_id: &Arc<str>, kind: EventKind) {
        let mut seq = self.seq.lock().unwrap_or_else(PoisonError::into_inner);
        let event = Arc::new(SessionEvent {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            seq: *seq,
            kind,
        });
        *seq += 1;
        for listener in &self.listeners {
            let call = std::panic::AssertUnwindSafe(|| listener(&event));
            if std::panic::catch_unwind(call).is_err() {
                tracing::error!(scope = %self.scope, "a session listener panicked");
            }
        }
        self.hub.publish(event);
    }
}

impl Session {
    /// The session id (stable across resumes: it is the journal's).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The scope this session was opened with.
    pub fn scope(&self) -> &str {
        &self.inner.scope
    }

    /// The working folder.
    pub fn cwd(&self) -> &Path {
        &self.inner.cwd
    }

    /// The redactor for the session's secrets as they are now (they can change while it is
    /// open, see [`crate::redact::SecretSource`]): hosts pass what they send out through it.
    pub fn redactor(&self) -> Arc<Redactor> {
        self.inner.redactor.current()
    }

    /// Stops syncing the journal at the end of each run: the host makes the run's entries
    /// durable itself, with its own next durable write ([`Session::journal_file`] into the same
    /// barrier, [`crate::atomic::write_atomic_with`]), so a run's end costs one disk flush, not
    /// two. Until then a power loss (not a killed process) may lose the run's last entries;
    /// loading repairs a journal cut short. [`Session::close`] still syncs.
    pub fn defer_run_end_sync(&self) {
        self.inner.sync_run_end.store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// A handle on the journal file for a durability barrier covering it, `None` once closed.
    /// Mark it covered ([`DurableMark::covered`]) after the barrier returns, so that
    /// closing the session does not flush again what the barrier already did.
    ///
    /// # Errors
    /// [`Error::Io`] when the descriptor cannot be duplicated.
    pub fn journal_file(&self) -> Result<Option<JournalFile>> {
        let state = self.inner.state();
        state.journal.as_ref().map(Journal::handle).transpose()
    }

    /// What loading the journal found and repaired.
    pub fn load_report(&self) -> &LoadReport {
        &self.inner.load_report
    }

    /// The conversation so far, including failed and aborted answers.
    pub fn messages(&self) -> Vec<Message> {
        self.inner.state().messages.clone()
    }

    /// Names of the tools the model is offered.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner.specs.iter().map(|s| s.name.clone()).collect()
    }

    /// The session's custom event bus.
    pub fn bus(&self) -> &EventBus {
        &self.inner.bus
    }

    /// Follows every event of this session from now on.
    pub fn subscribe(&self) -> EventStream {
        self.inner.hub.subscribe()
    }

    /// Whether a run is active.
    pub fn is_running(&self) -> bool {
        self.inner.state().running.is_some()
    }

    /// Starts a run with this user message.
    ///
    /// # Errors
    /// [`Error::Busy`] while a run is active, [`Error::Closed`] after [`Session::close`].
    pub fn prompt(&self, text: impl Into<String>) -> Result<RunHandle> {
        run::start(&self.inner, run::Input::Prompt(text.into()))
    }

    /// Starts a run that only compacts the conversation now (the owner's `/compact`): all but
    /// the latest exchange is summarised, keeping in particular what `instruction` names. The
    /// run emits one [`EventKind::Compacted`] and settles completed, or failed when no summary
    /// could be made (nothing is lost then).
    ///
    /// # Errors
    /// [`Error::Busy`] while a run is active, [`Error::Closed`] after [`Session::close`].
    pub fn compact(&self, instruction: Option<String>) -> Result<RunHandle> {
        run::start(&self.inner, run::Input::Compact(instruction))
    }

    /// The conversation as the model is shown it now: after compactions, the summary and the
    /// recent messages (with old large tool results trimmed), where [`Session::messages`] has
    /// them all.
    pub fn model_view(&self) -> Vec<Message> {
        let state = self.inner.state();
        compact::view(&state.messages, &state.compaction)
    }

    /// Aborts the active run, if any: the model call is dropped and running tools are killed
    /// (bash kills its whole process group). Returns whether a run was active; the run settles
    /// as aborted shortly after (wait with [`RunHandle::settled`] or [`Session::wait_idle`]).
    pub fn abort(&self) -> bool {
        match &self.inner.state().running {
            Some(running) => {
                running.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Waits until no run is active.
    pub async fn wait_idle(&self) {
        let receiver = self.inner.state().running.as_ref().map(|r| r.settled.clone());
        if let Some(mut receiver) = receiver {
            // An error means the run task is gone, which also means it is over.
            let _ = receiver.wait_for(Option::is_some).await;
        }
    }

    /// Closes the session: flushes the journal, releases the scope, ends every event stream.
    ///
    /// # Errors
    /// [`Error::Busy`] while a run is active; [`Error::Io`] if the final sync fails.
    pub fn close(&self) -> Result<()> {
        self.close_unless(|_| false).unwrap_or(Ok(()))
    }

    /// [`Session::close`] when closing needs no disk flush (a barrier already covered every
    /// journal entry, as the last durable write of a run does), so it may run on an async
    /// thread: what is left is closing descriptors. `None` when the journal still has entries
    /// to flush: call [`Session::close`] off the async threads then.
    ///
    /// # Errors
    /// [`Error::Busy`] while a run is active.
    pub fn close_if_durable(&self) -> Option<Result<()>> {
        self.close_unless(|journal| !journal.is_durable())
    }

    /// Closes the session unless `keep_open` says so of its journal (then `None`).
    fn close_unless(&self, keep_open: impl Fn(&Journal) -> bool) -> Option<Result<()>> {
        let journal = {
            let mut state = self.inner.state();
            if state.running.is_some() {
                return Some(Err(Error::Busy { scope: self.inner.scope.clone() }));
            }
            if state.journal.as_ref().is_some_and(&keep_open) {
                return None;
            }
            state.journal.take()
        };
        self.inner.hub.close();
        if let Some(journal) = journal {
            // Returns at once when a barrier already covered the journal.
            if let Err(err) = journal.sync() {
                return Some(Err(err));
            }
            tracing::debug!(scope = %self.inner.scope, "session closed");
        }
        Some(Ok(()))
    }
}

/// A started run: its id, its events and its outcome.
pub struct RunHandle {
    run_id: Arc<str>,
    events: EventStream,
    settled: watch::Receiver<Option<RunSettled>>,
}

impl RunHandle {
    /// The run's id (also on every event of the run).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The run's events from `RunStart` to `Settled` (the stream ends after `Settled`).
    pub fn events(&mut self) -> &mut EventStream {
        &mut self.events
    }

    /// Waits for the run to settle.
    pub async fn settled(mut self) -> RunSettled {
        let settled = match self.settled.wait_for(Option::is_some).await {
            Ok(value) => value.clone(),
            Err(_) => None,
        };
        settled.or_else(|| self.settled.borrow().clone()).unwrap_or_else(lost_run)
    }
}

/// What a run that vanished without settling reports (its task panicked past every guard).
fn lost_run() -> RunSettled {
    RunSettled {
        outcome: RunOutcome::Failed { error: RunFailure::Unexpected },
        final_text: String::new(),
        usage: Default::default(),
        turns: 0,
    }
}
