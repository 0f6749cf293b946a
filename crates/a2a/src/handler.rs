//! The operations, binding- and version-independent: one [`Request`] in, a [`Reply`] or a stream
//! of `a2a::StreamResponse` out. Task access is always scoped to the authenticated caller.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a::{StreamResponse, TaskState, TaskStatus};
use futures_util::{FutureExt, Stream};
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};
use volcanic_core::{EventKind, RunHandle, RunOutcome, session::Role};

use crate::auth::Caller;
use crate::error::{A2aError, CONTEXT_BUSY};
use crate::extension::{A2aSessionExtension, REQUEST_INPUT, WorkspaceSecrets};
use crate::live::LiveTask;
use crate::pool::{Claim, Reservation};
use crate::push::StoredPushConfig;
use crate::request::{Reply, Request};
use crate::server::ServerInner;
use crate::task::TaskFile;
use crate::task::cache::TaskView;
use crate::task::id::is_valid_id;
use crate::task::state::{ends_stream, state_name};
use crate::task::status::{agent_message, now};
use crate::task::store::{Loaded, apply_history_length, history_length};
use crate::{card, files};

/// A stream of A2A events for SSE.
pub type EventStream = Pin<Box<dyn Stream<Item = StreamResponse> + Send>>;

/// What an operation answers.
pub enum Outcome {
    Reply(Box<Reply>),
    Stream(EventStream),
}

/// The metadata key of the recursion guard.
pub const HOPS_KEY: &str = "volcanic.hops";

/// What a failed run tells the caller when the failure was not the model's.
pub const UNEXPECTED_FAILURE: &str = "The run failed unexpectedly.";

/// How long CancelTask waits for an aborted run to settle.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

impl ServerInner {
    /// Runs one operation for an authenticated caller. `base_url` gives the server's base URL as
    /// the request names it; only the extended card needs it, so it is built only then.
    pub async fn handle(
        self: &Arc<Self>,
        caller: &Caller,
        request: Request,
        base_url: &(dyn Fn() -> String + Sync),
    ) -> Result<Outcome, A2aError> {
        match request {
            Request::SendMessage(params) => self.send(caller, params, false).await,
            Request::SendStreamingMessage(params) => self.send(caller, params, true).await,
            Request::GetTask(req) => {
                let reply = match self.task(caller, &req.id).await? {
                    Loaded::Settled(cached) => {
                        let history = history_length("historyLength", req.history_length)?;
                        Reply::TaskView(TaskView::new(cached, history, true))
                    }
                    Loaded::File(file) => {
                        let mut task = file.task;
                        apply_history_length(&mut task, req.history_length)?;
                        Reply::Task(task)
                    }
                };
                Ok(Outcome::Reply(Box::new(reply)))
            }
            Request::ListTasks(req) => {
                let live = self.live.clone();
                let page =
                    self.store.list_page(caller, &req, &move |id: &str| live.is_live(id)).await?;
                Ok(Outcome::Reply(Box::new(Reply::TaskPage(page))))
            }
            Request::CancelTask(req) => {
                self.cancel(caller, &req.id).await.map(|t| Outcome::Reply(Box::new(Reply::Task(t))))
            }
            Request::SubscribeToTask(req) => self.subscribe(caller, &req.id).await,
            Request::CreatePushConfig { config, format } => {
                let config = self.create_push_config(caller, config, format).await?;
                Ok(Outcome::Reply(Box::new(Reply::PushConfig(config))))
            }
            Request::GetPushConfig(req) => {
                let config = self.get_push_config(caller, &req.task_id, &req.id).await?;
                Ok(Outcome::Reply(Box::new(Reply::PushConfig(config))))
            }
            Request::ListPushConfigs(req) => {
                let list = self.list_push_configs(caller, &req.task_id).await?;
                Ok(Outcome::Reply(Box::new(Reply::PushConfigs(list))))
            }
            Request::DeletePushConfig(req) => {
                self.delete_push_config(caller, &req.task_id, &req.id).await?;
                Ok(Outcome::Reply(Box::new(Reply::Deleted)))
            }
            Request::GetExtendedAgentCard => {
                // Blocking: it reads card.json and PERSONA.md.
                let (options, workspace, base) =
                    (self.options.clone(), caller.workspace.clone(), base_url());
                let card = tokio::task::spawn_blocking(move || {
                    card::extended_card(&options, &workspace, &base)
                })
                .await
                .map_err(|err| {
                    tracing::error!(error = %err, "building the extended card failed");
                    A2aError::Internal
                })?;
                Ok(Outcome::Reply(Box::new(Reply::Card(Box::new(card)))))
            }
        }
    }

    /// The caller's task: the live view while its run lasts, else the file (a settled task
    /// through the cache).
    async fn task(&self, caller: &Caller, task_id: &str) -> Result<Loaded, A2aError> {
        if let Some(live) = self.live.get(task_id)
            && live.caller == *caller
        {
            let task = live.snapshot().await;
            let file = TaskFile { task, caller: caller.name.clone(), push_configs: Vec::new() };
            return Ok(Loaded::File(Box::new(file)));
        }
        let live = self.live.clone();
        self.store.load_view(caller, task_id, &move |id: &str| live.is_live(id)).await
    }

    async fn send(
        self: &Arc<Self>,
        caller: &Caller,
        params: crate::request::SendParams,
        streaming: bool,
    ) -> Result<Outcome, A2aError> {
        let crate::request::SendParams { request: req, push_format } = params;
        let mut message = req.message;
        if message.message_id.is_empty() {
            return Err(A2aError::InvalidParams("message.messageId is required".into()));
        }
        if message.role != a2a::Role::User {
            return Err(A2aError::InvalidParams("message.role must be ROLE_USER".into()));
        }
        files::precheck(
            &message.parts,
            self.options.max_file_bytes,
            self.options.allow_private_push_urls,
        )?;
        // ProtoJSON: an empty string is an unset field.
        if message.context_id.as_deref() == Some("") {
            message.context_id = None;
        }
        if message.task_id.as_deref() == Some("") {
            message.task_id = None;
        }
        if let Some(context_id) = &message.context_id
            && !is_valid_id(context_id)
        {
            return Err(A2aError::InvalidParams(
                "message.contextId must match [A-Za-z0-9_-]{1,100}".into(),
            ));
        }
        let hops = match message.metadata.as_ref().and_then(|m| m.get(HOPS_KEY)) {
            Some(value) => hops(value)?,
            None => match req.metadata.as_ref().and_then(|m| m.get(HOPS_KEY)) {
                Some(value) => hops(value)?,
                None => 0,
            },
        };
        let mut configuration = req.configuration.unwrap_or_default_config();
        history_length("configuration.historyLength", configuration.history_length)?;
        let push = match configuration.push.take() {
            Some(config) => Some(self.validate_inline(config, push_format)?),
            None => None,
        };

        // From here on the work runs on its own task: a client that disconnects must not leave a
        // context claimed or a task half-created.
        let inner = self.clone();
        let owner = caller.clone();
        let started = self
            .tracker
            .spawn(async move { inner.start(&owner, message, hops, push, streaming).await })
            .await
            .map_err(|err| {
                tracing::error!(error = %err, "starting a task failed unexpectedly");
                A2aError::Internal
            })??;
        let (snapshot, events, finished, live, acknowledged) = match started {
            Started::Finished(task) => {
                return Ok(finished_outcome(*task, streaming, configuration.history_length));
            }
            Started::Running { snapshot, events, finished, live, acknowledged } => {
                (*snapshot, events, finished, live, acknowledged)
            }
        };
        // Durability of what the caller is told (docs/reliability.md): the task file exists, whole,
        // but it has not been flushed to disk. A stream acknowledges the task with its first
        // event, at once, and the flush runs beside the run (the final state is written durably
        // before the last event); a blocking answer waits for the flush, or for the final state.
        if let Some(events) = events {
            let (store, run) = (self.store.clone(), live.clone());
            let mut ended = finished.clone();
            tokio::spawn(async move {
                // A run that ends within the grace, its final state written durably (with the
                // journal) before the last event, needs no flush of its first version. Waiting
                // first keeps a barrier's work off the path of a short run's first event.
                let ended_in_grace = matches!(
                    tokio::time::timeout(STREAM_FLUSH_GRACE, ended.wait_for(Option::is_some)).await,
                    Ok(Ok(_))
                );
                if ended_in_grace && run.durably_written() {
                    return;
                }
                // Logged by the store; the final state's durable write reports it again.
                let _ = store.make_durable(&run.workspace, &run.task_id).await;
            });
            let stream = task_stream(snapshot, events, finished, Some(live));
            return Ok(Outcome::Stream(acknowledging(stream, acknowledged)));
        }
        drop(acknowledged);
        let mut task = if configuration.return_immediately {
            self.store.make_durable(&live.workspace, &live.task_id).await?;
            snapshot
        } else {
            wait_finished(finished).await.unwrap_or(snapshot)
        };
        apply_history_length(&mut task, configuration.history_length)?;
        Ok(Outcome::Reply(Box::new(Reply::Send(a2a::SendMessageResponse::Task(task)))))
    }

    /// Creates or continues the task and starts its run. Runs on its own task (see `send`).
    async fn start(
        self: &Arc<Self>,
        caller: &Caller,
        mut message: a2a::Message,
        hops: u32,
        push: Option<StoredPushConfig>,
        streaming: bool,
    ) -> Result<Started, A2aError> {
        let register = |file: &mut TaskFile| {
            if let Some(mut stored) = push.clone() {
                stored.config.task_id = file.task.id.clone();
                crate::push::config::upsert(&mut file.push_configs, stored);
            }
        };
        // The task to continue, if any, and the context.
        let continued = match &message.task_id {
            Some(task_id) => Some(self.continuable(caller, task_id, &message).await?),
            None => None,
        };
        if continued.is_none() {
            self.check_task_room(caller).await?;
        }
        let context_id = match (&continued, &message.context_id) {
            (Some(file), _) => file.task.context_id.clone(),
            (None, Some(context_id)) => context_id.clone(),
            (None, None) => uuid::Uuid::new_v4().to_string(),
        };
        let task_id = continued
            .as_ref()
            .map_or_else(|| uuid::Uuid::new_v4().to_string(), |f| f.task.id.clone());
        message.task_id = Some(task_id.clone());
        message.context_id = Some(context_id.clone());

        if hops > self.options.max_hops {
            // Refused before any session is opened or claimed.
            let mut file = continued.unwrap_or_else(|| new_task_file(caller, &message));
            if let Some(history) = file.task.history.as_mut()
                && history.last().map(|m| &m.message_id) != Some(&message.message_id)
            {
                history.push(message.clone());
            }
            file.task.status = TaskStatus {
                state: TaskState::Failed,
                message: Some(agent_message(&task_id, &context_id, "hop limit reached")),
                timestamp: Some(now()),
            };
            register(&mut file);
            self.store.save(&caller.workspace, &file).await?;
            self.push.notify(&file.task, &file.push_configs);
            tracing::info!(task_id = %task_id, caller = %caller.name, hops, max = self.options.max_hops, "a2a task refused: hop limit reached");
            return Ok(Started::Finished(Box::new(file.task)));
        }

        let reservation = self.pool.reserve(caller, &context_id).await?;
        // Gives a claimed session back if this code stops early (an error, a panic); an unopened
        // reservation gives itself back when dropped.
        let guard = match &reservation {
            Reservation::Ready(claim) => {
                Some(ClaimGuard::new(self.pool.clone(), claim.scope.clone()))
            }
            Reservation::Pending(_) => None,
        };

        // Under the reservation, the continued task cannot change any more: check it again (a
        // cancel or another continuation may have won the race).
        let mut file = match continued {
            Some(_) => {
                let file = self.continuable(caller, &task_id, &message).await?;
                let mut file = file;
                file.task.history.get_or_insert_with(Vec::new).push(message.clone());
                file
            }
            None => new_task_file(caller, &message),
        };
        files::strip_bytes(&mut file.task);
        register(&mut file);

        // Live before the file exists, so a concurrent read never takes it for a leftover of a
        // restart.
        let live =
            LiveTask::new(file.clone(), caller.clone(), self.store.clone(), self.push.clone());
        if let Reservation::Ready(claim) = &reservation {
            live.attach(claim.session.clone());
        }
        self.live.insert(live.clone());
        let is_new = file.task.status.state == TaskState::Submitted;
        if let Err(err) = live.start_working(is_new).await {
            self.live.remove(&live.task_id);
            match reservation {
                Reservation::Ready(claim) => self.pool.release(&claim.scope).await,
                Reservation::Pending(opening) => opening.abandon().await,
            }
            if let Some(guard) = guard {
                guard.disarm();
            }
            return Err(err);
        }
        // The task exists: its first event may go. Opening the session (creating or resuming its
        // journal), fetching file parts and starting the run follow on the run's own task, so a
        // failure there fails the task rather than the request.
        // A stream subscribes to the task's events; a blocking answer only waits for its end.
        let (snapshot, events, finished) = if streaming {
            let (snapshot, events, finished) = live.subscribe().await;
            (snapshot, Some(events), finished)
        } else {
            (live.snapshot().await, None, live.finished())
        };
        // The run waits until the task has been acknowledged (a stream's first event is on its
        // way, a blocking answer is being awaited): on a busy core, opening the session first
        // would delay the acknowledgement by the open's work.
        let (acknowledged, acknowledgement) = tokio::sync::oneshot::channel::<()>();
        let driver = self.clone();
        let driven = live.clone();
        let owner = caller.clone();
        if let Some(guard) = guard {
            guard.disarm();
        }
        self.tracker.spawn(async move {
            let ended = driver.clone();
            let task = driven.clone();
            let scope = crate::pool::scope(&owner, &task.context_id);
            // Sent or dropped, either way the task is acknowledged (or nobody waits for it).
            let _ = acknowledgement.await;
            let result = AssertUnwindSafe(driver.run(driven, reservation, owner, message, hops))
                .catch_unwind()
                .await;
            if result.is_err() {
                tracing::error!(task_id = %task.task_id, "the run driver panicked");
                task.set_status(TaskState::Failed, Some(UNEXPECTED_FAILURE.into())).await;
                task.finish().await;
                ended.live.remove(&task.task_id);
                // Only a task holding its session holds the claim; an unopened reservation gave
                // itself back when the panic dropped it.
                if task.has_session() {
                    ended.pool.release(&scope).await;
                }
            }
        });
        Ok(Started::Running { snapshot: Box::new(snapshot), events, finished, live, acknowledged })
    }

    /// The part of a send after the task is acknowledged: opens the context's session if it was
    /// not open, builds the prompt (downloading file parts), starts the run and drives it. Every
    /// failure here ends the task as failed.
    async fn run(
        self: Arc<Self>,
        live: Arc<LiveTask>,
        reservation: Reservation,
        caller: Caller,
        message: a2a::Message,
        hops: u32,
    ) {
        let claim = match reservation {
            Reservation::Ready(claim) => claim,
            Reservation::Pending(opening) => {
                // The push secrets of task files written before this process started are read
                // once per workspace, before its first session can see them.
                let push_secrets = self.store.push_secrets().clone();
                if !push_secrets.is_loaded(&caller.workspace.path) {
                    let path = caller.workspace.path.clone();
                    let loaded =
                        tokio::task::spawn_blocking(move || push_secrets.load(&path)).await;
                    if loaded.is_err() {
                        tracing::error!(task_id = %live.task_id, "reading push secrets panicked");
                    }
                }
                let extension = {
                    let caller = caller.clone();
                    let notifier = self.notifier.clone();
                    let secrets: Arc<dyn volcanic_core::redact::SecretSource> =
                        Arc::new(WorkspaceSecrets::new(
                            self.directory.clone(),
                            caller.workspace.clone(),
                            self.store.push_secrets().clone(),
                        ));
                    move || -> Arc<dyn volcanic_core::Extension> {
                        Arc::new(A2aSessionExtension { caller, notifier, secrets })
                    }
                };
                let opened = opening.open(extension).await;
                match opened {
                    Ok(claim) => {
                        live.attach(claim.session.clone());
                        claim
                    }
                    Err(_) => {
                        // Logged by the pool; the context is free again.
                        live.set_status(TaskState::Failed, Some(UNEXPECTED_FAILURE.into())).await;
                        live.finish().await;
                        self.live.remove(&live.task_id);
                        return;
                    }
                }
            }
        };
        claim.channel.set_target(Some(live.clone()));
        let prompt = files::build_prompt_with_downloads(
            &caller,
            &message.parts,
            self.notifier.is_some(),
            &self.guard,
            files::Caps {
                max_file_bytes: self.options.max_file_bytes,
                max_inbox_bytes: self.options.max_inbox_bytes,
            },
        )
        .await;
        let prompt = match prompt {
            Ok(prompt) => prompt,
            Err(err) => {
                // A file that cannot be fetched or stored fails the task with the reason; anything
                // else is ours and stays generic.
                let reason = match &err {
                    files::PromptError::Download { .. } | files::PromptError::InboxFull { .. } => {
                        err.to_string()
                    }
                    files::PromptError::A2a(inner) => {
                        tracing::error!(task_id = %live.task_id, error = %inner, "cannot store the message's files");
                        UNEXPECTED_FAILURE.to_string()
                    }
                };
                live.set_status(TaskState::Failed, Some(reason)).await;
                live.finish().await;
                self.end_live(&live, &claim).await;
                return;
            }
        };
        claim.session.bus().emit("a2a.inbound", json!({"hops": hops, "caller": caller.name}));
        let handle = match claim.session.prompt(prompt) {
            Ok(handle) => handle,
            Err(err) => {
                tracing::error!(task_id = %live.task_id, error = %err, "cannot start the run");
                live.set_status(TaskState::Failed, Some(UNEXPECTED_FAILURE.into())).await;
                live.finish().await;
                self.end_live(&live, &claim).await;
                return;
            }
        };
        if live.cancel_requested() {
            live.abort();
        }
        self.drive(live, handle, claim).await;
    }

    /// Refuses a new task when the workspace already holds `A2A__MaxTasks` task files, as the
    /// task index counts them: O(1) per send, and a fresh look at the folder only at the cap (files
    /// the owner deleted make room at once). Concurrent sends may pass the cap by as many tasks
    /// as are being created at that moment.
    async fn check_task_room(&self, caller: &Caller) -> Result<(), A2aError> {
        let max = self.options.max_tasks;
        let mut count = self.store.count(&caller.workspace.path, false).await?;
        if count >= max {
            // The owner may have deleted task files since the index last looked: look again.
            count = self.store.count(&caller.workspace.path, true).await?;
        }
        if count >= max {
            tracing::warn!(caller = %caller.name, max, "task limit reached, a new task was refused");
            return Err(A2aError::UnsupportedOperation(format!(
                "the assistant holds its maximum of {max} tasks; continue an existing task or ask its owner to remove old ones"
            )));
        }
        Ok(())
    }

    /// Loads a task a message wants to continue and checks that it can be: the caller's, in the
    /// same context, input-required.
    async fn continuable(
        &self,
        caller: &Caller,
        task_id: &str,
        message: &a2a::Message,
    ) -> Result<TaskFile, A2aError> {
        let live = self.live.clone();
        let file = self.store.load(caller, task_id, &move |id: &str| live.is_live(id)).await?;
        if let Some(context_id) = &message.context_id
            && *context_id != file.task.context_id
        {
            return Err(A2aError::InvalidParams(
                "message.contextId does not match the task's contextId".into(),
            ));
        }
        match file.task.status.state {
            TaskState::InputRequired if !self.live.is_running(task_id) => Ok(file),
            ref state if state.is_terminal() => Err(A2aError::UnsupportedOperation(format!(
                "task {} is already {}; send a new message without taskId to start a new task",
                file.task.id,
                state_name(state)
            ))),
            _ => Err(A2aError::UnsupportedOperation(CONTEXT_BUSY.into())),
        }
    }

    /// Follows a run's session events and turns them into task changes and A2A events.
    async fn drive(self: Arc<Self>, live: Arc<LiveTask>, mut handle: RunHandle, claim: Claim) {
        let started = Instant::now();
        let mut response_started = false;
        let mut chunk_in_message = false;
        let mut settled = None;
        while let Some(event) = handle.events().recv().await {
            match &event.kind {
                EventKind::MessageStart { role: Role::Assistant, .. } => {
                    // Each answer replaces the previous one in the response artifact, so what a
                    // stream shows matches what GetTask returns at the end.
                    chunk_in_message = false;
                    response_started = false;
                }
                EventKind::TextDelta { text, .. } => {
                    live.stream_text(text.clone(), response_started, false).await;
                    response_started = true;
                    chunk_in_message = true;
                }
                EventKind::MessageEnd { message, .. } => {
                    if chunk_in_message
                        && matches!(**message, volcanic_core::message::Message::Assistant(_))
                    {
                        live.stream_text(String::new(), true, true).await;
                        chunk_in_message = false;
                    }
                }
                EventKind::ToolStart { name, .. } => {
                    live.set_status(TaskState::Working, Some(format!("using {name}"))).await;
                }
                EventKind::Settled(value) => settled = Some(value.clone()),
                EventKind::RunStart
                | EventKind::TurnStart { .. }
                | EventKind::MessageStart { .. }
                | EventKind::ThinkingDelta { .. }
                | EventKind::ToolUpdate { .. }
                | EventKind::ToolEnd { .. }
                | EventKind::Retry { .. } => {}
            }
        }
        let (state, message, final_text) = match settled {
            Some(settled) => {
                let (state, message) = match settled.outcome {
                    RunOutcome::Completed | RunOutcome::MaxTurns => (TaskState::Completed, None),
                    RunOutcome::StoppedByTool { tool, data, .. } if tool == REQUEST_INPUT => {
                        let question =
                            data.get("question").and_then(Value::as_str).unwrap_or("").to_string();
                        (TaskState::InputRequired, Some(question))
                    }
                    RunOutcome::StoppedByTool { .. } => (TaskState::Completed, None),
                    RunOutcome::Aborted => (TaskState::Canceled, None),
                    RunOutcome::Failed { error } => {
                        let text = if error == volcanic_core::session::UNEXPECTED_FAILURE {
                            UNEXPECTED_FAILURE.to_string()
                        } else {
                            error
                        };
                        (TaskState::Failed, Some(text))
                    }
                };
                (state, message, settled.final_text)
            }
            None => (TaskState::Failed, Some(UNEXPECTED_FAILURE.to_string()), String::new()),
        };
        live.set_final_text(&final_text).await;
        live.set_status(state.clone(), message).await;
        live.finish().await;
        tracing::info!(
            "a2a task {} owner={} caller={} state={} in {:.1}s",
            live.task_id,
            live.workspace.owner_id,
            live.caller.name,
            state_name(&state),
            started.elapsed().as_secs_f64()
        );
        self.end_live(&live, &claim).await;
    }

    async fn end_live(&self, live: &LiveTask, claim: &Claim) {
        claim.channel.set_target(None);
        self.live.remove(&live.task_id);
        self.pool.release(&claim.scope).await;
    }

    async fn cancel(&self, caller: &Caller, task_id: &str) -> Result<a2a::Task, A2aError> {
        let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
        loop {
            if let Some(live) = self.live.get(task_id)
                && live.caller == *caller
            {
                let finished = live.finished();
                live.abort();
                return match tokio::time::timeout_at(deadline, wait_finished(finished)).await {
                    Ok(Some(task)) => Ok(task),
                    Ok(None) | Err(_) => Ok(live.snapshot().await),
                };
            }
            let live = self.live.clone();
            let file = self.store.load(caller, task_id, &move |id: &str| live.is_live(id)).await?;
            let state = file.task.status.state.clone();
            if state.is_terminal() {
                return Err(A2aError::TaskNotCancelable {
                    task_id: task_id.to_string(),
                    state: state_name(&state).into(),
                });
            }
            // Hold the context so a continuation cannot start between our read and our write.
            match self.pool.try_hold(caller, &file.task.context_id).await {
                Some(hold) => {
                    let live = self.live.clone();
                    let mut file =
                        self.store.load(caller, task_id, &move |id: &str| live.is_live(id)).await?;
                    let state = file.task.status.state.clone();
                    let result = if state.is_terminal() {
                        Err(A2aError::TaskNotCancelable {
                            task_id: task_id.to_string(),
                            state: state_name(&state).into(),
                        })
                    } else {
                        if let Some(old) = file.task.status.message.take() {
                            file.task.history.get_or_insert_with(Vec::new).push(old);
                        }
                        file.task.status = TaskStatus {
                            state: TaskState::Canceled,
                            message: None,
                            timestamp: Some(now()),
                        };
                        let saved = self.store.save(&caller.workspace, &file).await;
                        if saved.is_ok() {
                            self.push.notify(&file.task, &file.push_configs);
                        }
                        saved.map(|()| file.task)
                    };
                    self.pool.release_hold(hold).await;
                    return result;
                }
                // The context is busy: this task is about to run again (it will be live in a
                // moment), or another task of the context runs. Look again shortly.
                None if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                None => return Err(A2aError::UnsupportedOperation(CONTEXT_BUSY.into())),
            }
        }
    }

    async fn subscribe(&self, caller: &Caller, task_id: &str) -> Result<Outcome, A2aError> {
        if let Some(live) = self.live.get(task_id)
            && live.caller == *caller
        {
            let (snapshot, events, finished) = live.subscribe().await;
            return Ok(Outcome::Stream(task_stream(snapshot, events, finished, Some(live))));
        }
        let live = self.live.clone();
        let file = self.store.load(caller, task_id, &move |id: &str| live.is_live(id)).await?;
        let state = file.task.status.state.clone();
        if state.is_terminal() {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {task_id} is already {}",
                state_name(&state)
            )));
        }
        Ok(Outcome::Stream(closing_stream(file.task)))
    }
}

/// What `start` produced.
enum Started {
    /// The task ended before any run (hop limit).
    Finished(Box<a2a::Task>),
    /// A run is under way.
    Running {
        snapshot: Box<a2a::Task>,
        /// The task's events after `snapshot`, for a stream; `None` for a blocking answer.
        events: Option<broadcast::Receiver<crate::live::Event>>,
        finished: watch::Receiver<Option<a2a::Task>>,
        live: Arc<LiveTask>,
        /// Sent or dropped once the task is acknowledged; the run starts then.
        acknowledged: tokio::sync::oneshot::Sender<()>,
    },
}

/// Gives a claimed context back if the code holding it stops early (a panic); disarmed once the
/// claim is handed to the run driver or released.
struct ClaimGuard {
    pool: Arc<crate::pool::SessionPool>,
    scope: Option<String>,
}

impl ClaimGuard {
    fn new(pool: Arc<crate::pool::SessionPool>, scope: String) -> Self {
        ClaimGuard { pool, scope: Some(scope) }
    }

    fn disarm(mut self) {
        self.scope = None;
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        if let Some(scope) = self.scope.take() {
            let pool = self.pool.clone();
            tokio::spawn(async move { pool.release(&scope).await });
        }
    }
}

/// A new task for a message, submitted.
fn new_task_file(caller: &Caller, message: &a2a::Message) -> TaskFile {
    TaskFile {
        task: a2a::Task {
            id: message.task_id.clone().unwrap_or_default(),
            context_id: message.context_id.clone().unwrap_or_default(),
            status: TaskStatus {
                state: TaskState::Submitted,
                message: None,
                timestamp: Some(now()),
            },
            artifacts: None,
            history: Some(vec![message.clone()]),
            metadata: None,
        },
        caller: caller.name.clone(),
        push_configs: Vec::new(),
    }
}

/// Send configuration with defaults applied.
struct Config {
    return_immediately: bool,
    history_length: Option<i32>,
    push: Option<a2a::TaskPushNotificationConfig>,
}

trait DefaultConfig {
    fn unwrap_or_default_config(self) -> Config;
}

impl DefaultConfig for Option<a2a::SendMessageConfiguration> {
    fn unwrap_or_default_config(self) -> Config {
        match self {
            Some(c) => Config {
                return_immediately: c.return_immediately.unwrap_or(false),
                history_length: c.history_length,
                push: c.task_push_notification_config,
            },
            None => Config { return_immediately: false, history_length: None, push: None },
        }
    }
}

/// The hop count from metadata: a whole number, or a numeric string. Anything else present is
/// refused: a recursion guard must not fail open.
fn hops(value: &Value) -> Result<u32, A2aError> {
    let number = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        Value::Null => Some(0.0),
        Value::Bool(_) | Value::Array(_) | Value::Object(_) => None,
    };
    match number {
        Some(n) if n.is_finite() && n >= 0.0 => {
            Ok(if n >= f64::from(u32::MAX) { u32::MAX } else { n.ceil() as u32 })
        }
        Some(_) | None => Err(A2aError::InvalidParams(format!(
            "metadata[\"{HOPS_KEY}\"] must be a whole number of hops"
        ))),
    }
}

/// A task that ended before any run: the reply or a one-event stream.
fn finished_outcome(mut task: a2a::Task, streaming: bool, history_length: Option<i32>) -> Outcome {
    if streaming {
        return Outcome::Stream(closing_stream(task));
    }
    // A negative length was refused with the request; ignore the error here.
    let _ = apply_history_length(&mut task, history_length);
    Outcome::Reply(Box::new(Reply::Send(a2a::SendMessageResponse::Task(task))))
}

async fn wait_finished(mut finished: watch::Receiver<Option<a2a::Task>>) -> Option<a2a::Task> {
    let task = match finished.wait_for(Option::is_some).await {
        Ok(task) => task.clone(),
        Err(_) => None,
    };
    task.or_else(|| finished.borrow().clone())
}

/// How long a stream's run may take before the first version of its task file is flushed on its
/// own (docs/reliability.md, "Power loss").
const STREAM_FLUSH_GRACE: std::time::Duration = std::time::Duration::from_millis(20);

/// `stream`, signalling `acknowledged` when its first event is taken (to be written) or when it
/// is dropped unread.
fn acknowledging(
    stream: EventStream,
    acknowledged: tokio::sync::oneshot::Sender<()>,
) -> EventStream {
    let mut acknowledged = Some(acknowledged);
    Box::pin(futures_util::StreamExt::inspect(stream, move |_| {
        if let Some(sender) = acknowledged.take() {
            let _ = sender.send(());
        }
    }))
}

/// A task that will not change while this stream is open: the task, then its status (0.3 callers
/// see `final: true` on it), then the end.
fn closing_stream(task: a2a::Task) -> EventStream {
    let status = a2a::TaskStatusUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        status: task.status.clone(),
        metadata: None,
    };
    Box::pin(futures_util::stream::iter([
        StreamResponse::Task(task),
        StreamResponse::StatusUpdate(status),
    ]))
}

/// The task first, then live events until the task is terminal or interrupted. A stream that
/// falls behind gets the answer so far in one replacing artifact update, then the events after
/// it (never the chunks it already holds, and always the final status).
fn task_stream(
    snapshot: a2a::Task,
    events: broadcast::Receiver<crate::live::Event>,
    finished: watch::Receiver<Option<a2a::Task>>,
    live: Option<Arc<LiveTask>>,
) -> EventStream {
    if ends_stream(&snapshot.status.state) {
        return closing_stream(snapshot);
    }
    let first = futures_util::stream::iter([StreamResponse::Task(snapshot)]);
    let follow = Follow { events, finished, live, caught_up: VecDeque::new(), closed: false };
    let rest = futures_util::stream::unfold(Some(follow), |state| async move {
        let mut follow = state?;
        let item = follow.next().await?;
        let last = matches!(&item, StreamResponse::StatusUpdate(u) if ends_stream(&u.status.state));
        Some((item, if last { None } else { Some(follow) }))
    });
    Box::pin(futures_util::StreamExt::chain(first, rest))
}

/// A stream's place in a live task's events.
struct Follow {
    events: broadcast::Receiver<crate::live::Event>,
    finished: watch::Receiver<Option<a2a::Task>>,
    live: Option<Arc<LiveTask>>,
    /// What a catch-up after a lag produced and the stream has not sent yet.
    caught_up: VecDeque<StreamResponse>,
    /// The run ended without this stream seeing its last status, which it has now been sent.
    closed: bool,
}

impl Follow {
    /// The next event for the stream; `None` when there is nothing more to send.
    async fn next(&mut self) -> Option<StreamResponse> {
        loop {
            if let Some(item) = self.caught_up.pop_front() {
                return Some(item);
            }
            match self.events.recv().await {
                Ok(item) => return Some(*item),
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    if let Some(task) = &self.live {
                        self.caught_up.extend(task.catch_up(&mut self.events).await);
                    }
                }
                Err(broadcast::error::RecvError::Closed) => {
                    if self.closed {
                        return None;
                    }
                    self.closed = true;
                    let task = wait_finished(self.finished.clone()).await?;
                    let update = a2a::TaskStatusUpdateEvent {
                        task_id: task.id.clone(),
                        context_id: task.context_id.clone(),
                        status: task.status.clone(),
                        metadata: None,
                    };
                    return Some(StreamResponse::StatusUpdate(update));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    fn two_events() -> EventStream {
        let task = a2a::Task {
            id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus { state: TaskState::Completed, message: None, timestamp: None },
            artifacts: None,
            history: None,
            metadata: None,
        };
        closing_stream(task)
    }

    #[tokio::test]
    async fn acknowledging_stream_signals_when_its_first_event_is_taken() {
        let (sender, mut receiver) = tokio::sync::oneshot::channel();
        let mut stream = acknowledging(two_events(), sender);
        assert!(receiver.try_recv().is_err(), "nothing taken yet");
        assert!(matches!(stream.next().await, Some(StreamResponse::Task(_))));
        assert_eq!(receiver.try_recv(), Ok(()));
        assert!(matches!(stream.next().await, Some(StreamResponse::StatusUpdate(_))));
    }

    #[tokio::test]
    async fn acknowledging_stream_dropped_unread_lets_the_run_start() {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        drop(acknowledging(two_events(), sender));
        let waited = tokio::time::timeout(Duration::from_secs(5), receiver).await;
        assert!(matches!(waited, Ok(Err(_))), "the sender is gone: the run does not wait");
    }
}
