//! [`TelegramHost`]: polls the Bot API, routes each message to its chat's worker, answers the
//! commands, and serves the A2A endpoints over the allowed chats' workspaces when asked.
//!
//! Button presses (callback queries) go to the [`CallbackHandler`] the builder was given, in
//! tasks of their own, never through a chat's queue (see `callback`).
//!
//! A2A: the caller directory covers `<WorkspaceRoot>/<chatId>` for every allowed chat (each
//! callers.json is read on every request), with scope prefix `telegram-<chatId>` and owner id
//! `<chatId>`; `notify_owner` writes into that chat. Without a listener there is no HTTP
//! server at all.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use volcanic_a2a::auth::{A2aWorkspace, CallerDirectory, WorkspaceCallerDirectory};
use volcanic_a2a::task::TaskStore;
use volcanic_a2a::{A2aOptions, A2aServer, Containment};

use crate::approvals::ApprovalButtons;
use volcanic_core::SessionFactory;
use volcanic_core::sandbox::OwnerConfinement;

use crate::access::{self, Access, Ignored, Press};
use crate::api::{ApiError, BotApi, CallbackQuery, Update};
use crate::callback::{self, CallbackHandler};
use crate::chat::{Chat, Ctx, Enqueued, JobKind};
use crate::command::{self, Command};
use crate::config::TelegramConfig;
use crate::intake;
use crate::notifier::TelegramNotifier;
use crate::pending::{self, Entry, Pending, Request};
use crate::poll::{self, OffsetFile};
use crate::{Error, Result};

/// How long shutdown waits for runs to settle and replies to go out.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Builds a [`TelegramHost`].
pub struct TelegramHostBuilder {
    config: TelegramConfig,
    factory: Arc<SessionFactory>,
    shutdown: CancellationToken,
    a2a: Option<(A2aOptions, TcpListener)>,
    containment: Containment,
    caller_env: volcanic_core::exec::ExecEnv,
    owner: Option<OwnerConfinement>,
    callbacks: Option<Arc<dyn CallbackHandler>>,
}

impl TelegramHostBuilder {
    /// Where allowed users' button presses go; without one, every press is answered "This
    /// button is no longer active.".
    pub fn callback_handler(mut self, handler: Arc<dyn CallbackHandler>) -> Self {
        self.callbacks = Some(handler);
        self
    }

    /// How A2A callers' tools are contained (see [`A2aServerBuilder::containment`]); default:
    /// unavailable, so callers get no workspace tools unless the host says otherwise.
    ///
    /// [`A2aServerBuilder::containment`]: volcanic_a2a::A2aServerBuilder::containment
    pub fn containment(mut self, containment: Containment) -> Self {
        self.containment = containment;
        self
    }

    /// The environment of A2A callers' tools (see [`A2aServerBuilder::caller_env`]); default:
    /// empty.
    ///
    /// [`A2aServerBuilder::caller_env`]: volcanic_a2a::A2aServerBuilder::caller_env
    pub fn caller_env(mut self, env: volcanic_core::exec::ExecEnv) -> Self {
        self.caller_env = env;
        self
    }

    /// How the chats' own sessions' tools are contained (default: not at all). Each chat's
    /// sandbox also hides the other chats' workspaces.
    pub fn owner_confinement(mut self, owner: Option<OwnerConfinement>) -> Self {
        self.owner = owner;
        self
    }

    /// The host's stop signal; give the session factory the same token so runs abort with it.
    pub fn shutdown(mut self, token: CancellationToken) -> Self {
        self.shutdown = token;
        self
    }

    /// Serves the A2A endpoints on `listener` (A2A__Enabled); without this, no HTTP listener.
    pub fn a2a(mut self, options: A2aOptions, listener: TcpListener) -> Self {
        self.a2a = Some((options, listener));
        self
    }

    /// # Errors
    /// [`Error::Client`] when the Bot API's HTTP client cannot be built; [`Error::A2aBuild`]
    /// when the A2A server cannot be.
    pub fn build(self) -> Result<TelegramHost> {
        let config = Arc::new(self.config);
        let api = BotApi::new(&config).map_err(|e| Error::Client(e.to_string()))?;
        let workspaces = {
            let config = config.clone();
            Arc::new(move || {
                config.served_chats().map(|chat_id| chat_workspace(&config, chat_id)).collect()
            })
        };
        let directory = Arc::new(WorkspaceCallerDirectory::new(workspaces));
        // Owns every task the host spawns: chat workers, replies, deferred notices.
        let tracker = TaskTracker::new();
        let mut callbacks = self.callbacks;
        let a2a = match self.a2a {
            None => None,
            Some((options, listener)) => {
                // Requests waiting for the owner's approval become messages with buttons; the
                // buttons' presses decide them (unless the host was given its own handler).
                let buttons = Arc::new(ApprovalButtons::new(
                    api.clone(),
                    config.clone(),
                    self.shutdown.clone(),
                ));
                let notifier = Arc::new(TelegramNotifier::new(
                    api.clone(),
                    config.clone(),
                    self.shutdown.clone(),
                    tracker.clone(),
                ));
                let server = A2aServer::builder(self.factory.clone(), directory.clone())
                    .options(options)
                    .notifier(notifier)
                    .approval_notifier(buttons.clone())
                    .usage_notifier(Arc::new(crate::usage::UsageAlerts::new(
                        api.clone(),
                        config.clone(),
                        self.shutdown.clone(),
                    )))
                    .containment(self.containment.clone())
                    .caller_env(self.caller_env.clone())
                    .build()
                    .map_err(Error::A2aBuild)?;
                buttons.attach(server.clone());
                if callbacks.is_none() {
                    callbacks = Some(buttons);
                }
                Some((server, listener))
            }
        };
        // The `/a2a` listing reads task files through the server's store when there is a
        // server (one index per workspace, the server's cap), else through its own.
        let tasks = match &a2a {
            Some((server, _)) => server.task_store(),
            None => Arc::new(
                TaskStore::new().with_file_cap(A2aOptions::default().max_task_file_bytes()),
            ),
        };
        Ok(TelegramHost {
            api,
            config,
            factory: self.factory,
            shutdown: self.shutdown,
            a2a,
            directory,
            tasks,
            owner: self.owner.map(Arc::new),
            tracker,
            callbacks,
        })
    }
}

/// A fresh entry of the record of accepted messages.
fn update_id_entry(update_id: i64, chat_id: i64, request: Request) -> Entry {
    Entry { update_id, chat_id, request, started: false }
}

/// The A2A view of a chat's workspace.
fn chat_workspace(config: &TelegramConfig, chat_id: i64) -> A2aWorkspace {
    A2aWorkspace {
        path: config.workspace(chat_id),
        scope_prefix: TelegramConfig::scope(chat_id),
        owner_id: chat_id.to_string(),
    }
}

/// The Telegram host.
pub struct TelegramHost {
    api: BotApi,
    config: Arc<TelegramConfig>,
    factory: Arc<SessionFactory>,
    shutdown: CancellationToken,
    a2a: Option<(A2aServer, TcpListener)>,
    directory: Arc<WorkspaceCallerDirectory>,
    tasks: Arc<TaskStore>,
    owner: Option<Arc<OwnerConfinement>>,
    tracker: TaskTracker,
    callbacks: Option<Arc<dyn CallbackHandler>>,
}

impl TelegramHost {
    /// A builder over the settings and the session factory every chat shares.
    pub fn builder(config: TelegramConfig, factory: Arc<SessionFactory>) -> TelegramHostBuilder {
        TelegramHostBuilder {
            config,
            factory,
            shutdown: CancellationToken::new(),
            a2a: None,
            containment: Containment::default(),
            caller_env: volcanic_core::exec::ExecEnv::default(),
            owner: None,
            callbacks: None,
        }
    }

    /// Runs until the shutdown token fires: serves A2A (if enabled), checks the token, polls.
    /// Bot API failures are retried, never fatal. On shutdown: polling stops, runs are aborted
    /// (through the factory's token) and settle, sessions close, the A2A server stops.
    ///
    /// # Errors
    /// [`Error::TokenRejected`] when the Bot API refuses the token; [`Error::A2aServe`] when the
    /// A2A listener failed.
    pub async fn run(mut self) -> Result<()> {
        let shutdown = self.shutdown.clone();
        let tracker = self.tracker.clone();
        let a2a_server = self.a2a.as_ref().map(|(server, _)| server.clone());
        let server = self.a2a.take().map(|(server, listener)| {
            let stop = shutdown.clone();
            tracker.spawn(async move { server.serve(listener, stop).await })
        });

        let started = self.start(&shutdown).await;
        if let Ok(username) = &started {
            let bot_id = self.config.token.bot_id();
            let (pending, left) = Pending::load(&self.config.state_dir, bot_id).await;
            let ctx = Arc::new(Ctx {
                api: self.api.clone(),
                config: self.config.clone(),
                factory: self.factory.clone(),
                shutdown: shutdown.clone(),
                tracker: tracker.clone(),
                owner: self.owner.clone(),
                pending: Arc::new(pending),
            });
            let mut router = Router {
                ctx,
                directory: self.directory.clone(),
                tasks: self.tasks.clone(),
                a2a_enabled: server.is_some(),
                server: a2a_server.clone(),
                chats: HashMap::new(),
                refused: HashSet::new(),
                username: username.clone(),
                callbacks: self.callbacks.clone(),
            };
            router.replay(left).await;
            let offsets = OffsetFile::new(&self.config.state_dir, bot_id);
            let pending = router.ctx.pending.clone();
            poll::run(&self.api, &offsets, &pending, &shutdown, |update| router.route(update))
                .await;
        }
        // Either way, stop everything else too.
        shutdown.cancel();
        tracker.close();
        if tokio::time::timeout(SHUTDOWN_GRACE * 2, tracker.wait()).await.is_err() {
            tracing::warn!("chats still busy after the shutdown grace; exiting anyway");
        }
        if tokio::time::timeout(SHUTDOWN_GRACE, self.factory.close_runs()).await.is_err() {
            tracing::warn!("session runs still ending after the shutdown grace; exiting anyway");
        }
        started?;
        if let Some(server) = server
            && let Some(Ok(Err(err))) = server.now_or_never()
        {
            return Err(Error::A2aServe(err));
        }
        Ok(())
    }

    /// getMe (retried while the API is unreachable) and the command menu (best effort).
    /// Returns the bot's username, which commands addressed to a bot must name.
    async fn start(&self, shutdown: &CancellationToken) -> Result<Option<String>> {
        let config = &self.config;
        let ids = |ids: &[i64]| ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        tracing::info!(
            users = %ids(&config.allowed_users),
            groups = %ids(&config.allowed_groups),
            owner = config.owner(),
            "serving these Telegram users (in private chats and the groups) and groups"
        );
        let username = match self.api.get_me(shutdown).await {
            Ok(me) => {
                tracing::info!(
                    bot_id = me.id,
                    username = me.username.as_deref().unwrap_or("?"),
                    "connected to Telegram"
                );
                me.username
            }
            Err(ApiError::Cancelled) => return Ok(None),
            Err(err @ ApiError::Rejected { status: 401 | 404, .. }) => {
                return Err(Error::TokenRejected(err));
            }
            Err(err) => {
                tracing::warn!(error = %err, "getMe failed; polling anyway, commands addressed to a bot by name are ignored");
                None
            }
        };
        if let Err(err) = self.api.set_my_commands(command::MENU, shutdown).await {
            tracing::debug!(error = %err, "the command menu was not set");
        }
        Ok(username)
    }
}

/// Polls' receiver: chats by id, and who has been refused.
struct Router {
    ctx: Arc<Ctx>,
    directory: Arc<WorkspaceCallerDirectory>,
    tasks: Arc<TaskStore>,
    a2a_enabled: bool,
    /// The A2A server, for `/a2a`'s usage figures.
    server: Option<A2aServer>,
    chats: HashMap<i64, Chat>,
    /// Chats that got their one refusal (private chats) or their one warning line (groups) in
    /// this process.
    refused: HashSet<i64>,
    /// The bot's username (getMe), if known.
    username: Option<String>,
    callbacks: Option<Arc<dyn CallbackHandler>>,
}

impl Router {
    /// Takes up what the previous run accepted and did not finish: messages that never started
    /// run now, in order; a run the restart cut is reported to its chat (see `pending`).
    async fn replay(&mut self, left: Vec<Entry>) {
        if !left.is_empty() {
            tracing::info!(messages = left.len(), "taking up messages accepted before the restart");
        }
        for entry in left {
            let (update_id, chat_id) = (entry.update_id, entry.chat_id);
            if let Request::Press { query } = entry.request {
                // Settings may have changed here too; a press refused now is only forgotten
                // (its query has expired, so there is no one to answer).
                match access::decide_press(&self.ctx.config, &query) {
                    Press::Serve => self.dispatch_press(update_id, *query),
                    Press::Refuse(why) => {
                        tracing::warn!(
                            chat_id,
                            reason = why.as_str(),
                            "a press accepted before the restart is no longer allowed; dropped"
                        );
                        self.ctx.pending.forget(update_id);
                    }
                }
                continue;
            }
            // The settings may have changed across the restart: decide access again.
            let still_allowed = match &entry.request {
                Request::Prompt { message } => {
                    access::decide(&self.ctx.config, message) == Access::Serve
                }
                Request::NewSession => self.ctx.config.served_chats().any(|c| c == chat_id),
                // Taken up above.
                Request::Press { .. } => false,
            };
            if !still_allowed {
                tracing::warn!(
                    chat_id,
                    "a message accepted before the restart is no longer allowed; dropped"
                );
                self.ctx.pending.forget(update_id);
                continue;
            }
            let job = match entry.request {
                request if entry.started && matches!(request, Request::Prompt { .. }) => {
                    JobKind::Report(pending::interrupted_notice(&request))
                }
                Request::Prompt { message } => JobKind::Prompt(message),
                Request::NewSession => JobKind::NewSession,
                Request::Press { .. } => continue,
            };
            self.enqueue(chat_id, job, update_id);
        }
        self.ctx.pending.persist().await;
    }

    /// Handles one update without waiting: messages are queued, replies are sent in the
    /// background.
    fn route(&mut self, update: Update) {
        if let Some(query) = update.callback_query {
            self.press(update.update_id, query);
            return;
        }
        let Some(message) = update.message else { return };
        let chat_id = message.chat.id;
        let sender = message.from.as_ref().map(|user| user.id);
        match access::decide(&self.ctx.config, &message) {
            Access::Serve => {}
            Access::Refuse => {
                if self.refused.insert(chat_id) {
                    tracing::warn!(
                        chat_id,
                        "message from a user who is not allowed; refusing once"
                    );
                    self.reply(chat_id, command::REFUSAL.to_string());
                } else {
                    tracing::debug!(chat_id, "message from a refused user ignored");
                }
                return;
            }
            Access::Ignore(Ignored::GroupNotAllowed) if self.refused.insert(chat_id) => {
                tracing::warn!(
                    chat_id,
                    "message in a group that is not allowed; ignored without a word (allow it in Telegram__AllowedGroupIds)"
                );
                return;
            }
            Access::Ignore(why) => {
                tracing::debug!(chat_id, sender, reason = why.as_str(), "message ignored");
                return;
            }
        }
        if message
            .text
            .as_deref()
            .is_some_and(|text| command::is_for_another_bot(text, self.username.as_deref()))
        {
            tracing::debug!(chat_id, "command addressed to another bot ignored");
            return;
        }
        if let Some(what) = intake::unusable(&message) {
            tracing::debug!(chat_id, what, "message the bot cannot use");
            self.reply(chat_id, intake::unusable_reply(what));
            return;
        }
        let command = message.text.as_deref().and_then(command::parse);
        tracing::debug!(chat_id, update_id = update.update_id, "message received");
        match command {
            Some(Command::Start | Command::Help) => {
                self.reply(chat_id, command::help(self.ctx.config.queue_capacity));
            }
            Some(Command::Stop) => {
                let (aborted, dropped) = self.chat(chat_id).stop();
                self.ctx.pending.forget_chat(chat_id);
                let text = match (aborted, dropped) {
                    (false, 0) => "Nothing to stop.".to_string(),
                    (true, 0) => "⏹ Stopped.".to_string(),
                    (aborted, n) => format!(
                        "⏹ {}Dropped {n} queued message{}.",
                        if aborted { "Stopped. " } else { "" },
                        if n == 1 { "" } else { "s" }
                    ),
                };
                self.reply(chat_id, text);
            }
            Some(Command::New) => {
                self.accept(&update_id_entry(update.update_id, chat_id, Request::NewSession));
                self.enqueue(chat_id, JobKind::NewSession, update.update_id);
            }
            Some(Command::Compact) => {
                // Not kept for a restart to replay: a compaction cut short loses nothing.
                let instruction = message.text.as_deref().and_then(command::argument);
                self.enqueue(chat_id, JobKind::Compact(instruction), update.update_id);
            }
            Some(Command::A2a) => self.a2a(chat_id),
            None => {
                let message = Box::new(message);
                let request = Request::Prompt { message: message.clone() };
                self.accept(&update_id_entry(update.update_id, chat_id, request));
                self.enqueue(chat_id, JobKind::Prompt(message), update.update_id);
            }
        }
    }

    /// A button press: refused, or handed to the callback handler in a task of its own (and
    /// recorded, like an accepted message, until the handler has decided). Chats' queues never
    /// see it.
    fn press(&mut self, update_id: i64, query: CallbackQuery) {
        match access::decide_press(&self.ctx.config, &query) {
            Press::Serve => {}
            Press::Refuse(why) => {
                tracing::warn!(
                    user_id = query.from.id,
                    reason = why.as_str(),
                    "button press refused"
                );
                let ctx = self.ctx.clone();
                self.ctx.tracker.spawn(async move {
                    callback::answer_press(&ctx, &query, Some(callback::NOT_ALLOWED)).await;
                });
                return;
            }
        }
        let chat_id = query.message.as_ref().map_or(query.from.id, |m| m.chat.id);
        tracing::debug!(chat_id, update_id, "button pressed");
        if self.callbacks.is_some() {
            let request = Request::Press { query: Box::new(query.clone()) };
            self.accept(&update_id_entry(update_id, chat_id, request));
        }
        self.dispatch_press(update_id, query);
    }

    /// Runs a served press's handling in a task of its own.
    fn dispatch_press(&self, update_id: i64, query: CallbackQuery) {
        let ctx = self.ctx.clone();
        let handler = self.callbacks.clone();
        self.ctx.tracker.spawn(async move {
            callback::handle(&ctx, handler.as_deref(), update_id, &query).await;
        });
    }

    /// Records an accepted message; the poll loop writes the record before acknowledging it.
    fn accept(&self, entry: &Entry) {
        self.ctx.pending.accept(entry.clone());
    }

    fn chat(&mut self, chat_id: i64) -> &Chat {
        let ctx = &self.ctx;
        self.chats.entry(chat_id).or_insert_with(|| Chat::start(ctx.clone(), chat_id))
    }

    fn enqueue(&mut self, chat_id: i64, job: JobKind, update_id: i64) {
        match self.chat(chat_id).enqueue(job, Some(update_id)) {
            Enqueued::Accepted => {}
            Enqueued::Full { first } => {
                self.ctx.pending.forget(update_id);
                if !first {
                    tracing::debug!(chat_id, "chat queue still full; message not taken");
                    return;
                }
                tracing::warn!(chat_id, "chat queue full; message not taken");
                let capacity = self.ctx.config.queue_capacity;
                self.reply(
                    chat_id,
                    format!(
                        "⏳ I'm still answering and {capacity} messages are already waiting, so \
I didn't take this one. Send it again later, or /stop to clear the queue. (If more don't fit, \
I'll tell you how many once I'm through.)"
                    ),
                );
            }
        }
    }

    fn reply(&self, chat_id: i64, text: String) {
        let ctx = self.ctx.clone();
        self.ctx.tracker.spawn(async move { ctx.say(chat_id, &text).await });
    }

    /// `/a2a`: the chat's callers and latest server tasks.
    fn a2a(&self, chat_id: i64) {
        let ctx = self.ctx.clone();
        let (directory, tasks, enabled) =
            (self.directory.clone(), self.tasks.clone(), self.a2a_enabled);
        let workspace = chat_workspace(&ctx.config, chat_id);
        let server = self.server.clone();
        self.ctx.tracker.spawn(async move {
            let path = workspace.path.clone();
            // Today's usage against the caps (the server reads callers.json: off this thread).
            let usage = match server {
                Some(server) => {
                    let workspace = workspace.clone();
                    tokio::task::spawn_blocking(move || server.usage_report(&workspace)).await.ok()
                }
                None => None,
            };
            let callers = tokio::task::spawn_blocking(move || directory.entries(&workspace))
                .await
                .map(|entries| entries.to_vec())
                .unwrap_or_default();
            let recent = match tasks.recent(&path, command::A2A_TASKS).await {
                Ok(recent) => recent,
                Err(err) => {
                    tracing::warn!(chat_id, error = %err, "cannot list A2A tasks");
                    Vec::new()
                }
            };
            let mut text = command::a2a_listing(enabled, &callers, &recent, chrono::Utc::now());
            if let Some(usage) = usage {
                text.push_str("\n\n");
                text.push_str(&usage.lines().join("\n"));
            }
            ctx.say(chat_id, &text).await;
        });
    }
}
