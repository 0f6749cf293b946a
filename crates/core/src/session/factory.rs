//! The factory of sessions: what every session of a host shares (provider, limits, the
//! scrubbed environment, host extensions, the shutdown token, the tracker of every run), and
//! [`SessionFactory::open`], which assembles one session (its tools and their specs, its
//! sandbox, its redactor, its system prompt) from its options and its journal.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::channel::ChatChannel;
use crate::config::AgentConfig;
use crate::exec::ExecEnv;
use crate::extension::{EventBus, Extension, Registrar};
use crate::provider::Provider;
use crate::redact::{LiveRedactor, RedactorCache, Secret};
use crate::sandbox::{Confinement, RemoteTool, ToolHost, ToolSet, ViewBase};
use crate::tool::{ContainedSendTool, SendTool, Tool, builtin_tools};
use crate::{Error, Result};

use super::fanout;
use super::journal::{self, Journal};
use super::{Inner, Prefetched, Session, State, is_valid_scope};

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
            super::compact::restore(&options.scope, loaded.compaction.as_ref(), &loaded.messages);
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
