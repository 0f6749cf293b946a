//! One worker per allowed chat: its workspace, its main session (scope `telegram-<chatId>`), and
//! its queue.
//!
//! One run at a time per chat. Messages that arrive during a run wait in a bounded queue and run
//! in order; when the queue is full the message is not run. `/stop`
//! aborts the current run and drops the queue: every job carries the generation it was queued
//! in, `/stop` starts a new generation, and the worker skips jobs of an older one. Only the
//! first message dropped in a burst of overflow is answered at once; when the queue has
//! drained, the worker says how many were dropped in all. `/new` is
//! queued like a message, so it applies after what was sent before it.
//!
//! Nothing is lost silently: a job leaves the host's record of accepted messages (`pending`)
//! only once it is done, so a restart replays or reports it. Answer parts that could not be
//! delivered are owed to the chat: tried again right after the run and then whenever Telegram
//! answers a call again (at most [`OWED_ROUNDS`] rounds and [`OWED_LIMIT`] texts), prefixed with
//! a note saying they could not be delivered at first; what still cannot be delivered is logged
//! as an error and reported after a restart.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use volcanic_core::message::Message as CoreMessage;
use volcanic_core::sandbox::OwnerConfinement;
use volcanic_core::session::Role;
use volcanic_core::{EventKind, RunHandle, RunOutcome, Session, SessionFactory, SessionOptions};

use crate::api::{ApiError, BotApi, Message};
use crate::attachments;
use crate::channel::TelegramChannel;
use crate::config::TelegramConfig;
use crate::intake;
use crate::pending::Pending;
use crate::render::{self, Stream};

/// How long closing a chat waits for an aborted run to settle.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// Rounds of delivery an owed text gets (each round is a send with its usual attempts) before
/// it is dropped with an error log.
pub const OWED_ROUNDS: u32 = 5;

/// Owed texts a chat keeps; beyond that the oldest is dropped with an error log.
pub const OWED_LIMIT: usize = 20;

/// What every chat worker shares.
pub struct Ctx {
    pub api: BotApi,
    pub config: Arc<TelegramConfig>,
    pub factory: Arc<SessionFactory>,
    pub shutdown: CancellationToken,
    pub tracker: TaskTracker,
    /// The sandbox of the chats' own sessions; `None`: their tools run unconfined.
    pub owner: Option<Arc<OwnerConfinement>>,
    /// The accepted messages not yet answered.
    pub pending: Arc<Pending>,
}

impl Ctx {
    /// Sends a short text, logging a failure (the chat is the only place to report it).
    pub async fn say(&self, chat_id: i64, text: &str) {
        if let Err(err) = self.try_say(chat_id, text).await {
            tracing::warn!(chat_id, error = %err, "cannot send a message");
        }
    }

    /// Sends a short text.
    async fn try_say(&self, chat_id: i64, text: &str) -> Result<(), ApiError> {
        render::send_text(&self.api, chat_id, text, &self.shutdown).await
    }
}

/// What a chat's worker does next.
pub enum JobKind {
    Prompt(Box<Message>),
    NewSession,
    /// `/compact`, with what to keep.
    Compact(Option<String>),
    /// A notice that must reach the chat (owed like an answer when it cannot be sent).
    Report(String),
}

struct Job {
    generation: u64,
    /// The update it came from, in the record of accepted messages.
    update_id: Option<i64>,
    kind: JobKind,
}

/// A text that could not be delivered yet.
struct Owed {
    update_id: Option<i64>,
    text: String,
    rounds: u32,
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Done (answered, reported, or nothing to do).
    Done,
    /// Cut short by shutdown: it stays in the record, for the next start to report.
    Interrupted,
}

/// Whether a job was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    Accepted,
    /// The queue is full; the job was not taken. `first` is true for the first job dropped
    /// since the queue last drained: only that one is answered at once (one notice per burst),
    /// and the worker tells the count once the queue has drained.
    Full {
        first: bool,
    },
}

/// A chat's handle: queue jobs, stop runs.
pub struct Chat {
    tx: mpsc::Sender<Job>,
    generation: Arc<AtomicU64>,
    /// The session while a run is active, for `/stop`.
    running: Arc<Mutex<Option<Session>>>,
    /// Whether the worker is handling a job (a run may be about to start).
    busy: Arc<AtomicBool>,
    /// Jobs not taken since the queue last drained.
    overflow: Arc<AtomicUsize>,
}

impl Chat {
    /// Starts the chat's worker (owned by the context's tracker; it ends on shutdown).
    pub fn start(ctx: Arc<Ctx>, chat_id: i64) -> Chat {
        let (tx, rx) = mpsc::channel(ctx.config.queue_capacity.max(1));
        let generation = Arc::new(AtomicU64::new(0));
        let running = Arc::new(Mutex::new(None));
        let busy = Arc::new(AtomicBool::new(false));
        let overflow = Arc::new(AtomicUsize::new(0));
        let worker = Worker {
            ctx: ctx.clone(),
            chat_id,
            generation: generation.clone(),
            running: running.clone(),
            busy: busy.clone(),
            overflow: overflow.clone(),
            session: None,
            owed: VecDeque::new(),
        };
        ctx.tracker.spawn(worker.run(rx));
        Chat { tx, generation, running, busy, overflow }
    }

    /// Queues a job behind the current run; `update_id` names its entry in the record of
    /// accepted messages, which the worker removes once the job is done.
    pub fn enqueue(&self, kind: JobKind, update_id: Option<i64>) -> Enqueued {
        let job = Job { generation: self.generation.load(Ordering::SeqCst), update_id, kind };
        match self.tx.try_send(job) {
            Ok(()) => Enqueued::Accepted,
            // A closed queue means the host is shutting down; the job is dropped like a full one.
            Err(mpsc::error::TrySendError::Full(_) | mpsc::error::TrySendError::Closed(_)) => {
                Enqueued::Full { first: self.overflow.fetch_add(1, Ordering::SeqCst) == 0 }
            }
        }
    }

    /// `/stop`: drops queued jobs and aborts the current run. Returns (whether a job was being
    /// handled, how many queued jobs were dropped). A job between its dequeue and its run sees
    /// the new generation and stops before running, or aborts its run right after starting it.
    pub fn stop(&self) -> (bool, usize) {
        let queued = self.tx.max_capacity() - self.tx.capacity();
        self.generation.fetch_add(1, Ordering::SeqCst);
        let busy = self.busy.load(Ordering::SeqCst);
        if let Some(session) = self.running.lock().unwrap_or_else(PoisonError::into_inner).as_ref()
        {
            session.abort();
        }
        (busy, queued)
    }
}

struct Worker {
    ctx: Arc<Ctx>,
    chat_id: i64,
    generation: Arc<AtomicU64>,
    running: Arc<Mutex<Option<Session>>>,
    busy: Arc<AtomicBool>,
    overflow: Arc<AtomicUsize>,
    /// The chat's main session, opened on first use and kept open.
    session: Option<Session>,
    /// Texts not delivered yet, oldest first.
    owed: VecDeque<Owed>,
}

impl Worker {
    async fn run(mut self, mut rx: mpsc::Receiver<Job>) {
        let mut answered = self.ctx.api.answered();
        loop {
            let job = tokio::select! {
                biased;
                () = self.ctx.shutdown.cancelled() => break,
                // Telegram answered a call: it may take what is owed now.
                Ok(()) = answered.changed(), if !self.owed.is_empty() => {
                    self.deliver_owed(&mut answered).await;
                    continue;
                }
                job = rx.recv() => match job {
                    Some(job) => job,
                    None => break,
                },
            };
            if job.generation != self.generation.load(Ordering::SeqCst) {
                self.done_with(job.update_id).await;
                continue;
            }
            self.busy.store(true, Ordering::SeqCst);
            if let Some(update_id) = job.update_id {
                self.ctx.pending.start(update_id).await;
            }
            let ended = match job.kind {
                JobKind::Prompt(message) => {
                    self.prompt(*message, job.generation, job.update_id).await
                }
                JobKind::NewSession => {
                    self.new_session().await;
                    Ended::Done
                }
                JobKind::Compact(instruction) => self.compact(instruction, job.update_id).await,
                JobKind::Report(text) => {
                    if let Err(err) = self.ctx.try_say(self.chat_id, &text).await {
                        self.owe(job.update_id, text, &err);
                    }
                    Ended::Done
                }
            };
            // The run is over: a /stop from now on has nothing to abort.
            self.busy.store(false, Ordering::SeqCst);
            if !self.owed.is_empty() {
                self.deliver_owed(&mut answered).await;
            }
            if ended == Ended::Done {
                self.done_with(job.update_id).await;
            }
            if rx.is_empty() {
                self.report_overflow().await;
            }
        }
        if !self.owed.is_empty() {
            tracing::error!(
                chat_id = self.chat_id,
                texts = self.owed.len(),
                "undelivered answers left at shutdown; the next start reports them"
            );
        }
        self.close_session().await;
    }

    /// The queue has drained: says how many messages a burst of overflow dropped, when more
    /// than the one the sender was told about at once.
    async fn report_overflow(&self) {
        let dropped = self.overflow.swap(0, Ordering::SeqCst);
        if dropped > 1 {
            let text = format!(
                "⏳ While I was busy, {dropped} messages didn't fit in the queue and were not taken. \
Send again what still matters."
            );
            self.ctx.say(self.chat_id, &text).await;
        }
    }

    /// Removes a job's entry from the record, unless a text of it is still owed.
    async fn done_with(&self, update_id: Option<i64>) {
        let Some(update_id) = update_id else { return };
        if self.ctx.shutdown.is_cancelled()
            || self.owed.iter().any(|o| o.update_id == Some(update_id))
        {
            return;
        }
        self.ctx.pending.finish(update_id).await;
    }

    /// Keeps a text that could not be delivered, for [`Worker::deliver_owed`].
    fn owe(&mut self, update_id: Option<i64>, text: String, err: &ApiError) {
        tracing::warn!(chat_id = self.chat_id, error = %err, "a text could not be delivered; it is owed to the chat");
        let text = format!("⚠️ I couldn't deliver this at first ({err}):\n\n{text}");
        if self.owed.len() >= OWED_LIMIT
            && let Some(dropped) = self.owed.pop_front()
        {
            tracing::error!(
                chat_id = self.chat_id,
                chars = dropped.text.chars().count(),
                "too many undelivered texts; the oldest is dropped"
            );
        }
        self.owed.push_back(Owed { update_id, text, rounds: 0 });
    }

    /// Tries the owed texts in order; stops at the first that still fails (Telegram is not back
    /// yet). A text is dropped, with an error log, after [`OWED_ROUNDS`] rounds, on a refusal,
    /// or when it may have been delivered (sending it again could double it).
    async fn deliver_owed(&mut self, answered: &mut tokio::sync::watch::Receiver<u64>) {
        answered.mark_unchanged();
        while let Some(owed) = self.owed.front_mut() {
            let result =
                render::send_text(&self.ctx.api, self.chat_id, &owed.text, &self.ctx.shutdown)
                    .await;
            let update_id = owed.update_id;
            match result {
                Ok(()) => {}
                Err(ApiError::Cancelled) => return,
                Err(err) if err.is_retryable() && !err.is_maybe_delivered() => {
                    owed.rounds += 1;
                    if owed.rounds < OWED_ROUNDS {
                        tracing::warn!(chat_id = self.chat_id, error = %err, "owed text still not delivered; trying again when Telegram answers");
                        return;
                    }
                    tracing::error!(chat_id = self.chat_id, error = %err, "owed text dropped after repeated failures");
                }
                Err(err) => {
                    tracing::error!(chat_id = self.chat_id, error = %err, "owed text dropped: it was refused or may have arrived");
                }
            }
            self.owed.pop_front();
            self.done_with(update_id).await;
        }
    }

    fn is_stopped(&self, generation: u64) -> bool {
        generation != self.generation.load(Ordering::SeqCst) || self.ctx.shutdown.is_cancelled()
    }

    async fn prompt(&mut self, message: Message, generation: u64, update_id: Option<i64>) -> Ended {
        let typing = self.start_typing();
        let ended = self.prompt_typing(message, generation, update_id).await;
        typing.cancel();
        ended
    }

    async fn prompt_typing(
        &mut self,
        message: Message,
        generation: u64,
        update_id: Option<i64>,
    ) -> Ended {
        let workspace = match crate::workspace::ensure_workspace(&self.ctx.config, self.chat_id)
            .await
        {
            Ok(workspace) => workspace,
            Err(err) => {
                tracing::error!(chat_id = self.chat_id, error = %err, "cannot prepare the chat's workspace");
                self.ctx.say(self.chat_id, "⚠️ I can't prepare your workspace; see the log.").await;
                return Ended::Done;
            }
        };
        let text = self.prompt_text(&message, &workspace).await;
        if self.ctx.shutdown.is_cancelled() {
            return Ended::Interrupted;
        }
        let Some(text) = text else { return Ended::Done };
        if self.is_stopped(generation) {
            return Ended::Done;
        }
        let Some(session) = self.open_session(&workspace).await else { return Ended::Done };
        let mut handle = match session.prompt(text) {
            Ok(handle) => handle,
            Err(err) => {
                tracing::error!(chat_id = self.chat_id, error = %err, "cannot start a run");
                self.ctx.say(self.chat_id, &format!("⚠️ I can't start: {err}")).await;
                return Ended::Done;
            }
        };
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = Some(session.clone());
        // A /stop between the dequeue and now found no run to abort.
        if self.is_stopped(generation) {
            session.abort();
        }
        let ended = self.render(&mut handle, update_id).await;
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = None;
        ended
    }

    /// The user message for the session: the files saved to the inbox, then the text or
    /// caption. `None` when there is nothing to run (a sticker, or only failed files).
    async fn prompt_text(&self, message: &Message, workspace: &Path) -> Option<String> {
        let mut lines = Vec::new();
        if let Some(marker) = intake::forward_marker(message) {
            lines.push(marker);
        }
        if attachments::has_attachments(message) {
            let saved = attachments::save(
                &self.ctx.api,
                workspace,
                message,
                self.ctx.config.max_download_bytes,
                &self.ctx.shutdown,
            )
            .await;
            for result in saved {
                match result {
                    Ok(path) => lines.push(format!("[file received: {path}]")),
                    Err(why) => {
                        tracing::warn!(chat_id = self.chat_id, reason = %why, "attachment not received");
                        self.ctx.say(self.chat_id, &format!("⚠️ I couldn't receive {why}")).await;
                        lines.push(format!("[file not received: {why}]"));
                    }
                }
            }
            if !lines.iter().any(|l| l.starts_with("[file received")) && message.caption.is_none() {
                return None;
            }
        }
        if let Some(text) = message.text.as_ref().or(message.caption.as_ref()) {
            lines.push(text.clone());
        }
        let prompt = lines.join("\n");
        (!prompt.trim().is_empty()).then_some(prompt)
    }

    async fn open_session(&mut self, workspace: &Path) -> Option<Session> {
        if let Some(session) = &self.session {
            return Some(session.clone());
        }
        let channel = Arc::new(TelegramChannel {
            api: self.ctx.api.clone(),
            chat_id: self.chat_id,
            cancel: self.ctx.shutdown.clone(),
            redactor: std::sync::OnceLock::new(),
        });
        let mut options = SessionOptions::new(TelegramConfig::scope(self.chat_id), workspace);
        options.channel = Some(channel.clone());
        options.confinement = self.ctx.owner.as_ref().map(|owner| {
            let config = &self.ctx.config;
            // Every other served chat's workspace, the groups' included.
            let others = config.served_chats().filter(|&id| id != self.chat_id);
            owner.for_workspace(workspace, others.map(|id| config.workspace(id)))
        });
        match self.ctx.factory.open(options).await {
            Ok(session) => {
                // The session's secrets (the token, provider keys) are fixed for its life. The
                // channel is new, so the cell is empty and `set` cannot fail.
                let _ = channel.redactor.set(session.redactor());
                self.session = Some(session.clone());
                Some(session)
            }
            Err(err) => {
                tracing::error!(chat_id = self.chat_id, error = %err, "cannot open the chat's session");
                self.ctx
                    .say(self.chat_id, &format!("⚠️ I can't open our conversation: {err}"))
                    .await;
                None
            }
        }
    }

    /// Follows a run: the answer streams into messages, tool use shows as short lines. Parts
    /// that could not be delivered become owed; "✅ Done." is said only when the run completed
    /// without a word and nothing failed to arrive.
    async fn render(&mut self, handle: &mut RunHandle, update_id: Option<i64>) -> Ended {
        let ctx = self.ctx.clone();
        let mut stream: Option<Stream> = None;
        let mut said_anything = false;
        let mut lost: Vec<(String, ApiError)> = Vec::new();
        let mut unconfirmed = false;
        let mut ended = Ended::Interrupted;
        let mut tick = tokio::time::interval(ctx.config.edit_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let event = tokio::select! {
                event = handle.events().recv() => event,
                _ = tick.tick() => {
                    if let Some(stream) = &mut stream {
                        stream.flush().await;
                    }
                    continue;
                }
            };
            let Some(event) = event else { break };
            match &event.kind {
                EventKind::MessageStart { role: Role::Assistant, .. } => {
                    stream = Some(self.new_stream());
                }
                EventKind::TextDelta { text, .. } => {
                    if let Some(stream) = &mut stream {
                        stream.push(text).await;
                    }
                }
                EventKind::MessageEnd { message, .. } => {
                    if let CoreMessage::Assistant(answer) = message.as_ref() {
                        let full = answer.text();
                        let mut current = stream.take().unwrap_or_else(|| self.new_stream());
                        if !full.is_empty() {
                            current.finish(&full).await;
                        }
                        said_anything |= current.delivered;
                        unconfirmed |= current.unconfirmed;
                        let error = current.error.take().unwrap_or(ApiError::Cancelled);
                        lost.extend(current.undelivered.drain(..).map(|t| (t, error.clone())));
                    }
                }
                EventKind::ToolStart { name, args, .. } => {
                    ctx.say(self.chat_id, &render::tool_line(name, args)).await;
                    said_anything = true;
                }
                EventKind::Compacted(compacted) => {
                    ctx.say(self.chat_id, &format!("🗜 {compacted}")).await;
                    said_anything = true;
                }
                EventKind::Settled(settled) => {
                    let clean = lost.is_empty() && !unconfirmed;
                    let note = match &settled.outcome {
                        RunOutcome::Completed if !said_anything && clean => {
                            Some("✅ Done.".to_string())
                        }
                        RunOutcome::Failed { error } => {
                            Some(format!("⚠️ Something went wrong: {error}"))
                        }
                        RunOutcome::MaxTurns => Some(
                            "⚠️ I stopped after too many steps. Send a message to let me continue."
                                .to_string(),
                        ),
                        RunOutcome::Completed
                        | RunOutcome::Aborted
                        | RunOutcome::StoppedByTool { .. } => None,
                    };
                    // The run's outcome must arrive too: a failed note is owed like an answer.
                    if let Some(note) = note
                        && let Err(err) = ctx.try_say(self.chat_id, &note).await
                        && !ctx.shutdown.is_cancelled()
                        && !err.is_maybe_delivered()
                    {
                        lost.push((note, err));
                    }
                    let cut = matches!(settled.outcome, RunOutcome::Aborted)
                        && ctx.shutdown.is_cancelled();
                    ended = if cut { Ended::Interrupted } else { Ended::Done };
                    break;
                }
                EventKind::RunStart
                | EventKind::TurnStart { .. }
                | EventKind::MessageStart { .. }
                | EventKind::ThinkingDelta { .. }
                | EventKind::ToolUpdate { .. }
                | EventKind::ToolEnd { .. }
                | EventKind::Retry { .. } => {}
            }
        }
        if ended == Ended::Interrupted {
            // The restart's report covers what did not arrive.
            return ended;
        }
        if unconfirmed {
            ctx.say(
                self.chat_id,
                "⚠️ Telegram did not confirm that part of this answer arrived (the connection broke or timed out), and I don't send it twice. If something is missing, ask me to repeat it.",
            )
            .await;
        }
        for (text, error) in lost {
            self.owe(update_id, text, &error);
        }
        ended
    }

    fn new_stream(&self) -> Stream {
        Stream::new(
            self.ctx.api.clone(),
            self.chat_id,
            self.ctx.config.edit_interval,
            self.ctx.shutdown.clone(),
        )
    }

    /// Renews the typing indicator until the returned token is cancelled (or shutdown).
    fn start_typing(&self) -> CancellationToken {
        let stop = self.ctx.shutdown.child_token();
        let (api, chat_id, every, token) =
            (self.ctx.api.clone(), self.chat_id, self.ctx.config.typing_interval, stop.clone());
        self.ctx.tracker.spawn(async move {
            loop {
                if let Err(err) = api.send_typing(chat_id, &token).await {
                    tracing::debug!(chat_id, error = %err, "typing indicator not sent");
                }
                tokio::select! {
                    () = token.cancelled() => break,
                    () = tokio::time::sleep(every) => {}
                }
            }
        });
        stop
    }

    /// `/compact`: compacts the chat's conversation now (a run of its own, followed like one).
    async fn compact(&mut self, instruction: Option<String>, update_id: Option<i64>) -> Ended {
        let workspace = match crate::workspace::ensure_workspace(&self.ctx.config, self.chat_id)
            .await
        {
            Ok(workspace) => workspace,
            Err(err) => {
                tracing::error!(chat_id = self.chat_id, error = %err, "cannot prepare the chat's workspace");
                self.ctx.say(self.chat_id, "⚠️ I can't prepare your workspace; see the log.").await;
                return Ended::Done;
            }
        };
        let Some(session) = self.open_session(&workspace).await else { return Ended::Done };
        let mut handle = match session.compact(instruction) {
            Ok(handle) => handle,
            Err(err) => {
                self.ctx.say(self.chat_id, &format!("⚠️ I can't compact now: {err}")).await;
                return Ended::Done;
            }
        };
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = Some(session.clone());
        let ended = self.render(&mut handle, update_id).await;
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = None;
        ended
    }

    /// `/new`: closes the session and archives its journal; the next message starts fresh.
    async fn new_session(&mut self) {
        self.close_session().await;
        let scope = TelegramConfig::scope(self.chat_id);
        match self.ctx.factory.archive(&scope).await {
            Ok(_) => {
                self.ctx
                    .say(
                        self.chat_id,
                        "🆕 Fresh conversation started (the previous one is archived).",
                    )
                    .await;
            }
            Err(err) => {
                tracing::error!(chat_id = self.chat_id, error = %err, "cannot archive the session");
                self.ctx.say(self.chat_id, &format!("⚠️ I can't start fresh: {err}")).await;
            }
        }
    }

    async fn close_session(&mut self) {
        let Some(session) = self.session.take() else { return };
        if tokio::time::timeout(CLOSE_GRACE, session.wait_idle()).await.is_err() {
            tracing::warn!(chat_id = self.chat_id, "run still settling; closing anyway");
        }
        if let Err(err) = session.close() {
            tracing::warn!(chat_id = self.chat_id, error = %err, "cannot close the chat's session");
        }
    }
}
