//! The service: the server's state ([`Service`]) and the dispatch of one [`Request`] to its
//! operation, binding- and version-independent: one request in, a [`Reply`] or a stream of
//! `a2a::StreamResponse` out. Task access is always scoped to the authenticated caller.
//!
//! Each operation lives in its own file as functions over the state: `send` (SendMessage and
//! SendStreamingMessage up to the start of the run), `run` (the run driver, the one place session
//! events become task changes and A2A events), `cancel`, `subscribe`, `get` (GetTask,
//! ListTasks), `push_config` (the four push config operations), `card` (the extended card);
//! `stream` follows a live task's events for the streaming operations; `retry` recognises a
//! repeated send and answers it with the first send's task; `approve` holds a caller's new task
//! for the owner's approval and applies the owner's decision. Every operation reaches tasks, on
//! file or live, through the state's [`Tasks`].
//!
//! Invariant: this module knows nothing of HTTP, bindings or versions; the HTTP layer (`server`,
//! `connection`, `binding`) calls it and nothing here calls back up. Only this file writes
//! `impl Service`.

pub(crate) mod approve;
mod cancel;
mod card;
mod get;
mod launch;
mod push_config;
mod retry;
mod run;
mod send;
mod session;
mod stream;
mod subscribe;
mod tool_approval;

use std::pin::Pin;
use std::sync::Arc;

use futures_util::Stream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::{Caller, CallerDirectory};
use crate::config::A2aOptions;
use crate::error::{A2aError, Error};
use crate::push::{PushSender, UrlCheck};
use crate::request::{Generations, Reply, Request};
use crate::run::extension::OwnerNotifier;
use crate::run::pool::SessionPool;
use crate::task::AcceptedMessages;
use crate::task::events::StreamEvent;
use crate::tasks::Tasks;

/// The server's state: what every operation shares.
pub(crate) struct Service {
    pub(crate) options: A2aOptions,
    pub(crate) directory: Arc<dyn CallerDirectory>,
    /// Every task, on file or live: the one way the operations reach them.
    pub(crate) tasks: Tasks,
    pub(crate) pool: Arc<SessionPool>,
    /// Each caller's accepted messages, for safe retries (`retry`).
    pub(crate) accepted: Arc<AcceptedMessages>,
    /// Requests waiting for the owner's decision, and callers approved once (`approve`).
    pub(crate) approvals: Arc<crate::approval::Approvals>,
    /// Tells the owner of each new request, when the host can (Telegram).
    pub(crate) approval_notifier: Option<Arc<dyn crate::approval::ApprovalNotifier>>,
    pub(crate) notifier: Option<Arc<dyn OwnerNotifier>>,
    /// The one outbound client (file downloads, pushes), behind the SSRF guard.
    pub(crate) guard: crate::push::guard::GuardedClient,
    /// Owns every task the service spawns; shutdown waits for it.
    pub(crate) tracker: TaskTracker,
    /// Cancelled when the server stops: every timer of the service (an approval's time limit,
    /// the usage flusher) selects on it, so none holds the shutdown up.
    pub(crate) shutdown: CancellationToken,
    /// Decides which webhook URLs push configs may use (checked on registration and before
    /// every delivery).
    pub(crate) push_url_check: UrlCheck,
    /// POSTs task updates to the webhooks of push configs.
    pub(crate) push: Arc<PushSender>,
    /// Each caller's requests per minute and model usage per day, against their caps.
    pub(crate) meter: Arc<crate::usage::Meter>,
}

/// A stream of A2A events for SSE, each with its position (the SSE `id:`).
pub type EventStream = Pin<Box<dyn Stream<Item = StreamEvent> + Send>>;

/// What an operation answers.
pub enum Outcome {
    /// A reply; `generation` is the generation of the task it shows, when it shows one (for
    /// callers that activate the task-generation extension).
    Reply {
        reply: Box<Reply>,
        generation: Option<u64>,
    },
    Stream(EventStream),
}

/// How a send is answered, decided once from its operation and configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendAnswer {
    /// SendStreamingMessage: the task, then its events as they happen.
    Stream,
    /// SendMessage: the task once its run has ended or is interrupted.
    Settled,
    /// SendMessage with `returnImmediately`: the task as soon as it exists, written durably.
    Immediately,
}

impl Outcome {
    /// A reply that shows no task (or several).
    fn reply(reply: Reply) -> Self {
        Outcome::Reply { reply: Box::new(reply), generation: None }
    }

    /// A reply that shows one task, at `generation`.
    fn task(reply: Reply, generation: u64) -> Self {
        Outcome::Reply { reply: Box::new(reply), generation: Some(generation) }
    }
}

impl Service {
    /// Tells the host's approval notifier that request `id` is no longer pending, on a task of
    /// its own.
    pub(crate) fn approval_settled(&self, id: &str, outcome: crate::approval::Settled) {
        if let Some(notifier) = self.approval_notifier.clone() {
            let id = id.to_string();
            self.tracker.spawn(async move { notifier.settled(&id, outcome).await });
        }
    }

    /// Runs one operation for an authenticated caller. `base_url` gives the server's base URL as
    /// the request names it; only the extended card needs it, so it is built only then.
    ///
    /// # Errors
    /// The operation's refusal or failure, as the wire error the caller gets (the one
    /// translation of [`Error`]).
    pub async fn handle(
        self: &Arc<Self>,
        caller: &Caller,
        request: Request,
        generations: Option<Generations>,
        base_url: &(dyn Fn() -> String + Sync),
    ) -> Result<Outcome, A2aError> {
        self.dispatch(caller, request, generations.unwrap_or_default(), base_url)
            .await
            .map_err(A2aError::from)
    }

    async fn dispatch(
        self: &Arc<Self>,
        caller: &Caller,
        request: Request,
        generations: Generations,
        base_url: &(dyn Fn() -> String + Sync),
    ) -> Result<Outcome, Error> {
        let if_match = generations.if_match;
        match request {
            Request::SendMessage(params) => {
                let answer = match params.request.configuration.as_ref() {
                    Some(config) if config.return_immediately == Some(true) => {
                        SendAnswer::Immediately
                    }
                    Some(_) | None => SendAnswer::Settled,
                };
                send::send(self, caller, params, answer, if_match).await
            }
            Request::SendStreamingMessage(params) => {
                send::send(self, caller, params, SendAnswer::Stream, if_match).await
            }
            Request::GetTask(req) => {
                let (reply, generation) =
                    get::get_task(self, caller, &req, generations.current).await?;
                Ok(Outcome::task(reply, generation))
            }
            Request::ListTasks(req) => {
                let page = get::list_tasks(self, caller, &req).await?;
                Ok(Outcome::reply(Reply::TaskPage(page)))
            }
            Request::CancelTask(req) => {
                let (task, generation) = cancel::cancel(self, caller, &req.id).await?;
                Ok(Outcome::task(Reply::Task(task), generation))
            }
            Request::SubscribeToTask { request, after } => {
                subscribe::subscribe(self, caller, &request.id, after).await
            }
            Request::CreatePushConfig { config, format } => {
                let config = push_config::create_push_config(self, caller, config, format).await?;
                Ok(Outcome::reply(Reply::PushConfig(config)))
            }
            Request::GetPushConfig(req) => {
                let config =
                    push_config::get_push_config(self, caller, &req.task_id, &req.id).await?;
                Ok(Outcome::reply(Reply::PushConfig(config)))
            }
            Request::ListPushConfigs(req) => {
                let list = push_config::list_push_configs(self, caller, &req.task_id).await?;
                Ok(Outcome::reply(Reply::PushConfigs(list)))
            }
            Request::DeletePushConfig(req) => {
                push_config::delete_push_config(self, caller, &req.task_id, &req.id).await?;
                Ok(Outcome::reply(Reply::Deleted))
            }
            Request::GetExtendedAgentCard => {
                let card = card::extended_card(self, caller, base_url()).await?;
                Ok(Outcome::reply(Reply::Card(Box::new(card))))
            }
        }
    }
}
