//! Sessions: open or resume a conversation by scope, prompt it, follow and abort its runs.
//!
//! A [`SessionFactory`] holds what every session of a host shares (provider, limits, the scrubbed
//! environment, host extensions, the shutdown token). [`SessionFactory::open`] loads or creates the
//! scope's journal and returns a [`Session`]; [`Session::prompt`] starts one run on its own task
//! and returns a [`RunHandle`]. A prompt while a run is active is refused with [`Error::Busy`].
//!
//! Invariant: every run's task is spawned on the factory's tracker, and nothing in here spawns
//! outside it; [`SessionFactory::close_runs`] awaits them all.

pub(crate) mod compact;
mod event;
mod fanout;
pub(crate) mod journal;
mod run;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::channel::ChatChannel;
use crate::config::AgentConfig;
use crate::exec::ExecEnv;
use crate::extension::{EventBus, Extension, Listener, Registrar, ToolGate};
use crate::message::Message;
use crate::provider::Provider;
use crate::redact::{LiveRedactor, Redactor, RedactorCache, Secret};
use crate::sandbox::{Confinement, RemoteTool, ToolHost, ToolSet, ViewBase};
use crate::tool::{ContainedSendTool, SendTool, Tool, builtin_tools};
use crate::{Error, Result};

pub use compact::{Compacted, SUMMARY_SYSTEM_PROMPT};
pub use event::{EventKind, Role, RunFailure, RunOutcome, RunSettled, SessionEvent};
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

/// Opens sessions; one per host.
pub struct SessionFactory {
    shared: Arc<Shared>,
}

/// What every session of a factory shares.
pub(crate) struct Shared {
    pub provider: Arc<dyn Provider>,
    pub config: AgentConfig,
    pub limits: Arc<crate::config::ToolLimits>,
    pub state_dir: PathBuf,
    pub exec: Arc<ExecEnv>,
    pub secrets: Vec<Secret>,
    pub extensions: Vec<Arc<dyn Extension>>,
    pub shutdown: CancellationToken,
    /// Every run's task (see [`SessionFactory::close_runs`]).
    pub runs: TaskTracker,
    /// The last session's redactor: the next one with the same secrets shares it (building the
    /// automaton is a good part of opening a session).
    pub redactors: Arc<RedactorCache>,
    /// The last session's tool specs, and what they were made from.
    pub last_specs: Mutex<Option<SpecsMadeFrom>>,
}

/// Tool specs of a session and what decides them besides the constant built-ins: whether the
/// session has a channel (the `send` tool) and the specs of its extensions' tools.
pub(crate) struct SpecsMadeFrom {
    channel: bool,
    tool_set: ToolSet,
    extra: Vec<crate::provider::ToolSpec>,
    specs: Arc<[crate::provider::ToolSpec]>,
}

/// Builds a [`SessionFactory`].
pub struct SessionFactoryBuilder {
    provider: Arc<dyn Provider>,
    state_dir: PathBuf,
    config: AgentConfig,
    exec: ExecEnv,
    secrets: Vec<Secret>,
    extensions: Vec<Arc<dyn Extension>>,
    shutdown: CancellationToken,
}

impl SessionFactoryBuilder {
    /// Limits and knobs of the agent loop (default: [`AgentConfig::default`]).
    pub fn config(mut self, config: AgentConfig) -> Self {
        self.config = config;
        self
    }

    /// The environment child processes start from (unless a session is given its own); the
    /// credentials found in the host environment it was built from are redacted everywhere.
    /// Default: empty.
    pub fn exec_env(mut self, exec: ExecEnv) -> Self {
        self.exec = exec;
        self
    }

    /// More values to redact (provider keys from a config file, bot tokens, …).
    pub fn secret(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.secrets.push(Secret { name: name.into(), value: value.into() });
        self
    }

    /// An extension every session of this factory gets.
    pub fn extension(mut self, extension: Arc<dyn Extension>) -> Self {
        self.extensions.push(extension);
        self
    }

    /// The host's stop signal: cancelling it aborts every run.
    pub fn shutdown(mut self, token: CancellationToken) -> Self {
        self.shutdown = token;
        self
    }

    pub fn build(self) -> SessionFactory {
        let mut secrets = self.secrets;
        // Guessed by their names or looks: a short value would hide ordinary text, so it is not
        // redacted.
        secrets.extend(
            self.exec
                .secrets()
                .iter()
                .filter(|s| s.value.len() >= crate::redact::MIN_GUESSED_SECRET_LEN)
                .cloned(),
        );
        let limits = Arc::new(self.config.tools.clone());
        SessionFactory {
            shared: Arc::new(Shared {
                provider: self.provider,
                config: self.config,
                limits,
                state_dir: self.state_dir,
                exec: Arc::new(self.exec),
                secrets,
                extensions: self.extensions,
                shutdown: self.shutdown,
                runs: TaskTracker::new(),
                redactors: Arc::new(RedactorCache::default()),
                last_specs: Mutex::new(None),
            }),
        }
    }
}

/// What a contained session's model is told about where its tools run, so it does not spend
/// calls finding out.
const SANDBOX_NOTE: &str = "Your tools run in a sandbox: you see the workspace (without its \
.volcanic/ folder and some private files; PERSONA.md, MEMORY.md, AGENTS.md and CLAUDE.md may be \
read-only), /tmp is private and emptied when this conversation closes, and there is no network.";

/// The same for the owner's own sessions, whose sandbox shows the whole machine but the
/// assistant's own configuration and records.
const HOST_SANDBOX_NOTE: &str = "Your tools run in a sandbox that hides this assistant's own \
configuration file, its state folder and its process (so its keys are out of reach); the rest \
of the machine and the network are as usual.";

/// How to open one session.
pub struct SessionOptions {
    /// The session's name: its journal lives in `<state dir>/sessions/<scope>/`.
    pub scope: String,
    /// The working folder (the workspace): tools run here and its files shape the system prompt.
    pub cwd: PathBuf,
    /// Where `send` delivers; without one the session has no `send` tool.
    pub channel: Option<Arc<dyn ChatChannel>>,
    /// Extensions for this session only, after the factory's.
    pub extensions: Vec<Arc<dyn Extension>>,
    /// Which built-in tools the session has (default: all).
    pub tool_set: ToolSet,
    /// The sandbox the built-in tools run in; `None` runs them in this process, unconfined
    /// (the owner's own sessions, or an owner's explicit opt-out).
    pub confinement: Option<Confinement>,
    /// The environment of this session's tools instead of the factory's (callers' sessions get
    /// an allow-list). Its credentials are not added to the redacted values, the factory's
    /// are: build both from the same host environment.
    pub exec: Option<Arc<ExecEnv>>,
}

impl SessionOptions {
    pub fn new(scope: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        SessionOptions {
            scope: scope.into(),
            cwd: cwd.into(),
            channel: None,
            extensions: Vec::new(),
            tool_set: ToolSet::All,
            confinement: None,
            exec: None,
        }
    }
}

impl SessionFactory {
    /// A builder over a provider and a state folder (journals go to `<state_dir>/sessions/`).
    pub fn builder(
        provider: Arc<dyn Provider>,
        state_dir: impl Into<PathBuf>,
    ) -> SessionFactoryBuilder {
        SessionFactoryBuilder {
            provider,
            state_dir: state_dir.into(),
            config: AgentConfig::default(),
            exec: ExecEnv::default(),
            secrets: Vec::new(),
            extensions: Vec::new(),
            shutdown: CancellationToken::new(),
        }
    }

    /// A session's tools (the built-ins of its tool set, `send` with a channel, then the
    /// extensions' tools, each replacing a tool of the same name) and their specs in the same
    /// order, the specs shared with the last session when they were made from the same things.
    /// With a tool host, the built-ins are stand-ins that run in its sandbox.
    fn tools(
        &self,
        channel: bool,
        tool_set: ToolSet,
        host: Option<&Arc<ToolHost>>,
        extra: Vec<Arc<dyn Tool>>,
    ) -> (Vec<Arc<dyn Tool>>, Arc<[crate::provider::ToolSpec]>) {
        let constant = crate::tool::builtin_specs();
        let mut tools: Vec<(Arc<dyn Tool>, &crate::provider::ToolSpec)> = builtin_tools()
            .into_iter()
            .zip(constant)
            .filter(|(_, spec)| tool_set.has(&spec.name))
            .map(|(tool, spec)| match host {
                None => (tool, spec),
                Some(host) => {
                    let remote: Arc<dyn Tool> = Arc::new(RemoteTool { spec, host: host.clone() });
                    (remote, spec)
                }
            })
            .collect();
        if channel && tool_set.has("send") {
            let send: Arc<dyn Tool> = match host {
                None => Arc::new(SendTool),
                Some(host) => Arc::new(ContainedSendTool { host: host.clone() }),
            };
            tools.push((send, &constant[constant.len() - 1]));
        }
        let extra_specs: Vec<crate::provider::ToolSpec> = extra.iter().map(|t| t.spec()).collect();
        for (tool, spec) in extra.into_iter().zip(&extra_specs) {
            tools.retain(|(_, s)| s.name != spec.name);
            tools.push((tool, spec));
        }
        let mut last = self.shared.last_specs.lock().unwrap_or_else(PoisonError::into_inner);
        let specs = match last.as_ref() {
            Some(made)
                if made.channel == channel
                    && made.tool_set == tool_set
                    && made.extra == extra_specs =>
            {
                made.specs.clone()
            }
            _ => {
                let specs: Arc<[crate::provider::ToolSpec]> =
                    tools.iter().map(|(_, spec)| (*spec).clone()).collect();
                *last = Some(SpecsMadeFrom {
                    channel,
                    tool_set,
                    extra: extra_specs.clone(),
                    specs: specs.clone(),
                });
                specs
            }
        };
        (tools.into_iter().map(|(tool, _)| tool).collect(), specs)
    }

    /// The tool host of a contained session: its view gains the state folder as a hidden path
    /// when the sandbox would show it: always for the owner's view of the whole host, and for
    /// a caller's when the folder lies inside the workspace (journals, task files and the
    /// host's own records must stay out of reach).
    fn tool_host(
        &self,
        scope: &str,
        confinement: Option<Confinement>,
        exec: &ExecEnv,
    ) -> Option<Arc<ToolHost>> {
        let mut confinement = confinement?;
        let state_dir = crate::sandbox::normalize_path(&self.shared.state_dir);
        if confinement.view.base == ViewBase::Host
            || state_dir.starts_with(&confinement.view.workspace)
        {
            confinement.view.hidden.push(state_dir);
        }
        let env = exec.vars().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Some(Arc::new(ToolHost::new(
            Arc::new(confinement),
            self.session_dir(scope).join("spill"),
            self.shared.limits.clone(),
            env,
        )))
    }

    /// Waits until every run this factory started has ended: journaled its end, emitted
    /// `Settled` and let go of its session. Hosts call it last on shutdown, after cancelling the
    /// shutdown token (so runs abort rather than finish) and before closing sessions, so that no
    /// run outlives the host. A run started after this call is still tracked: the next call
    /// waits for it too.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future stops the waiting, not the runs (bound it with a
    /// timeout).
    pub async fn close_runs(&self) {
        self.shared.runs.close();
        self.shared.runs.wait().await;
    }

    /// The model the factory's sessions call: the configured one, else the provider's default.
    pub fn model(&self) -> String {
        self.shared
            .config
            .model
            .clone()
            .unwrap_or_else(|| self.shared.provider.default_model().to_string())
    }

    /// The host's state folder (journals under `sessions/`; hosts keep their own records there
    /// too, out of every session's reach).
    pub fn state_dir(&self) -> &Path {
        &self.shared.state_dir
    }

    /// The folder holding a scope's journal.
    pub fn session_dir(&self, scope: &str) -> PathBuf {
        self.shared.state_dir.join("sessions").join(scope)
    }

    /// Opens the scope's session, resuming its journal if there is one.
    ///
    /// # Errors
    /// [`Error::InvalidScope`], [`Error::ScopeInUse`] when another open session (in any process)
    /// holds the scope, [`Error::Io`] when the journal cannot be read or created.
    pub async fn open(&self, options: SessionOptions) -> Result<Session> {
        if !is_valid_scope(&options.scope) {
            return Err(Error::InvalidScope { scope: options.scope });
        }
        let bus = EventBus::default();
        let mut registrar = Registrar::new(bus.clone());
        for extension in self.shared.extensions.iter().chain(&options.extensions) {
            extension.register(&mut registrar);
        }
        let mut secrets = self.shared.secrets.clone();
        secrets.extend(registrar.secrets);
        let redactor = Arc::new(LiveRedactor::new(
            secrets,
            registrar.secret_sources,
            self.shared.redactors.clone(),
        ));
        if let Some(confinement) = &options.confinement
            && options.tool_set != ToolSet::None
        {
            registrar.fragments.push(
                match confinement.view.base {
                    ViewBase::Workspace => SANDBOX_NOTE,
                    ViewBase::Host => HOST_SANDBOX_NOTE,
                }
                .to_string(),
            );
        }
        let exec = options.exec.unwrap_or_else(|| self.shared.exec.clone());
        let host = self.tool_host(&options.scope, options.confinement, &exec);
        let (tools, specs) =
            self.tools(options.channel.is_some(), options.tool_set, host.as_ref(), registrar.tools);

        let dir = self.session_dir(&options.scope);
        let scope = options.scope.clone();
        let cwd = options.cwd.clone();
        let journal_redactor = redactor.current();
        let limits = self.shared.config.context.clone();
        let (prompt_specs, fragments) = (specs.clone(), registrar.fragments.clone());
        // The system prompt for a run started right after the open is read on the same trip
        // to the blocking pool as the journal (see `Inner::prefetched_prompt`).
        let (loaded, prompt) = tokio::task::spawn_blocking(move || {
            let loaded = Journal::open(&dir, &scope, &cwd, &journal_redactor)?;
            let text = crate::workspace::system_prompt(
                &cwd,
                &limits,
                &prompt_specs,
                &fragments,
                chrono::Local::now(),
            );
            Ok::<_, Error>((loaded, Prefetched { read_at: std::time::Instant::now(), text }))
        })
        .await
        .map_err(|e| Error::io(self.session_dir(&options.scope), std::io::Error::other(e)))??;

        tracing::debug!(scope = %options.scope, messages = loaded.messages.len(), "session opened");
        let compaction =
            compact::restore(&options.scope, loaded.compaction.as_ref(), &loaded.messages);
        Ok(Session {
            inner: Arc::new(Inner {
                id: loaded.session_id.into(),
                scope: options.scope,
                cwd: options.cwd,
                spill_dir: self.session_dir_for_spill(&loaded.journal),
                shared: self.shared.clone(),
                exec,
                tools,
                specs,
                fragments: registrar.fragments,
                listeners: registrar.listeners,
                gates: registrar.gates,
                model_gates: registrar.model_gates,
                channel: options.channel,
                redactor,
                bus,
                hub: fanout::Hub::default(),
                seq: Mutex::new(0),
                state: Mutex::new(State {
                    messages: loaded.messages,
                    compaction,
                    journal: Some(loaded.journal),
                    running: None,
                }),
                load_report: loaded.report,
                sync_run_end: std::sync::atomic::AtomicBool::new(true),
                prefetched_prompt: Mutex::new(Some(prompt)),
            }),
        })
    }

    /// Archives the scope's conversation: its journal is moved aside (kept, renamed
    /// `session-<timestamp>.jsonl.archived`), so the next [`SessionFactory::open`] starts fresh.
    /// Close the scope's session first. Returns the archived file, `None` if there was none.
    ///
    /// # Errors
    /// [`Error::InvalidScope`]; [`Error::ScopeInUse`] while a session of the scope is open;
    /// [`Error::Io`] when the journal cannot be moved.
    pub async fn archive(&self, scope: &str) -> Result<Option<PathBuf>> {
        if !is_valid_scope(scope) {
            return Err(Error::InvalidScope { scope: scope.to_string() });
        }
        let dir = self.session_dir(scope);
        let owned = scope.to_string();
        let archived =
            tokio::task::spawn_blocking(move || journal::archive(&dir, &owned))
                .await
                .map_err(|e| Error::io(self.session_dir(scope), std::io::Error::other(e)))??;
        if let Some(path) = &archived {
            tracing::info!(scope, file = %path.display(), "session archived");
        }
        Ok(archived)
    }

    fn session_dir_for_spill(&self, journal: &Journal) -> PathBuf {
        journal.dir().join("spill")
    }
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
    pub run_id: Arc<str>,
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

    /// The id of the active run, if any.
    pub fn running_run_id(&self) -> Option<String> {
        self.inner.state().running.as_ref().map(|r| r.run_id.to_string())
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
