//! Tasks with a run in progress: the in-memory task (authoritative while the run lives), the fan-out
//! of its A2A events to any number of streams, and the registry lazy restart recovery asks.
//!
//! Every change goes through one async mutex per task: mutate, persist when the status changed,
//! then broadcast. A subscriber takes the same lock to snapshot the task and subscribe, so it sees
//! every event after its snapshot and none before.
//!
//! Invariant: this is the one way agent output reaches a caller, and every text in it (the
//! response, its streamed chunks, status messages, the text and UTF-8 files of artifacts) passes
//! through the session's redactor here, before it enters the task. Task files, streams, GetTask
//! and push payloads are all made from the task, so none of them carries a secret the session
//! knows. The streamed answer and its held-back end are [`answer`]'s.

mod answer;
mod registry;

pub use self::registry::LiveTasks;

use std::sync::{Arc, Mutex, PoisonError};

use a2a::{
    Artifact, Part, StreamResponse, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};

use self::answer::{AnswerStream, Chunk};
use tokio::sync::{broadcast, watch};

use crate::auth::{A2aWorkspace, Caller};
use crate::error::Error;
use crate::push::StoredPushConfig;
use crate::run::event_log::{Event, EventLog, Resumed, Subscription};
use crate::run::parts::redact_part;
use crate::task::TaskFile;
use crate::task::events::{EventId, StreamEvent};
use crate::task::status::{agent_message, retire_status_message};
use crate::task::store::TaskStore;
use volcanic_core::redact::Redactor;

/// A task whose run is in progress.
pub struct LiveTask {
    pub task_id: String,
    pub context_id: String,
    pub caller: Caller,
    pub workspace: Arc<A2aWorkspace>,
    state: tokio::sync::Mutex<TaskFile>,
    /// The run's recent events and the ring that carries them to streams (`event_log.rs`): made
    /// by the first [`LiveTask::subscribe`] or [`LiveTask::resume`], so a task nobody streams (a
    /// blocking SendMessage) neither allocates it nor builds its events (their positions are
    /// still counted, in the file's `events`). Made and recorded to under `state`'s lock, so a
    /// subscriber misses nothing after its snapshot. The std mutex is only taken under `state`.
    log: std::sync::OnceLock<Mutex<EventLog>>,
    finished: watch::Sender<Option<a2a::Task>>,
    /// The task's generation (`task::events`), told to GetTask long polls; set under `state`.
    generation: watch::Sender<u64>,
    store: Arc<TaskStore>,
    /// The run's session, once it is open (the task is acknowledged before that).
    session: std::sync::OnceLock<volcanic_core::Session>,
    push: Arc<crate::push::PushSender>,
    /// The answer being streamed into the response artifact; used under `state`'s lock.
    answer: AnswerStream,
    /// Set by CancelTask; checked once the run has started, so an early cancel is not lost.
    cancel_requested: std::sync::atomic::AtomicBool,
    /// Whether the last durable write of the task file (its final state, or input-required)
    /// succeeded: until one has, the first version's own flush must not be skipped.
    durably_written: std::sync::atomic::AtomicBool,
}

impl LiveTask {
    /// A run of the task in `file`: its events are numbered in a new run (`task::events`).
    pub fn new(
        mut file: TaskFile,
        caller: Caller,
        store: Arc<TaskStore>,
        push: Arc<crate::push::PushSender>,
    ) -> Arc<Self> {
        file.events.begin_run();
        let (finished, _) = watch::channel(None);
        let (generation, _) = watch::channel(file.events.generation());
        let answer = AnswerStream::of(&file.task);
        Arc::new(LiveTask {
            task_id: file.task.id.clone(),
            context_id: file.task.context_id.clone(),
            workspace: caller.workspace.clone(),
            caller,
            state: tokio::sync::Mutex::new(file),
            log: std::sync::OnceLock::new(),
            finished,
            generation,
            store,
            session: std::sync::OnceLock::new(),
            push,
            answer,
            cancel_requested: std::sync::atomic::AtomicBool::new(false),
            durably_written: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The redactor for what this task sends out: its session's, as the session's secrets are
    /// now. Before the session is open only fixed texts go out, so none is needed then.
    pub fn redactor(&self) -> Arc<Redactor> {
        match self.session.get() {
            Some(session) => session.redactor(),
            None => Arc::new(Redactor::default()),
        }
    }

    /// Gives the task its run's session, once open. Set once; a second call is ignored.
    pub fn attach(&self, session: volcanic_core::Session) {
        let _ = self.session.set(session);
    }

    /// Whether the run's session is attached (the task holds its context's claim).
    pub fn has_session(&self) -> bool {
        self.session.get().is_some()
    }

    /// Aborts the run (CancelTask); the driver then settles the task as canceled. Before the
    /// session is attached only the request is recorded: the driver checks it once the run has
    /// started (the session is attached before that check, so one of the two sees the other).
    pub fn abort(&self) {
        self.cancel_requested.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(session) = self.session.get() {
            session.abort();
        }
    }

    /// Whether CancelTask asked for this run to stop.
    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Brings a stream that fell behind (its receiver reported `Lagged`) up to date: the events
    /// still queued for it, with the response's chunks among them replaced by the answer so far
    /// in one replacing update (`event_log::catch_up`, which says what ids they carry).
    ///
    /// Every event is sent under the task's lock, so draining `events` under that lock leaves the
    /// receiver exactly at the task's current position, which the replacing update shows.
    pub async fn catch_up(&self, events: &mut broadcast::Receiver<Event>) -> Vec<StreamEvent> {
        let file = self.state.lock().await;
        let mut queued = Vec::new();
        loop {
            match events.try_recv() {
                Ok(event) => queued.push(event),
                // Nothing is sent while the lock is held; a lag here would only skip more events.
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(
                    broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed,
                ) => break,
            }
        }
        let response_id = self.answer.id();
        let artifact = file.task.artifacts.iter().flatten().find(|a| a.artifact_id == response_id);
        let (now, generation) = (file.events.position(), file.events.generation());
        crate::run::event_log::catch_up(queued, response_id, now, generation, |last| {
            artifact.map(|artifact| self.artifact_update(artifact.clone(), Some(false), last))
        })
    }

    /// The current task, its position, and a subscription to every event after it.
    pub async fn subscribe(&self) -> Subscription {
        let file = self.state.lock().await;
        let position = file.events.position();
        let events = self.log(position).subscribe();
        Subscription {
            snapshot: file.task.clone(),
            position,
            generation: file.events.generation(),
            events,
            finished: self.finished.subscribe(),
        }
    }

    /// A stream resuming after `from` (SubscribeToTask with `Last-Event-ID`): the events after it
    /// and a subscription to every event after those, when the run's log still holds them all;
    /// otherwise the current task and a subscription after it, as [`LiveTask::subscribe`].
    pub async fn resume(&self, from: EventId) -> Resumed {
        let file = self.state.lock().await;
        let position = file.events.position();
        let log = self.log(position);
        let events = log.subscribe();
        let finished = self.finished.subscribe();
        match log.since(from, position) {
            Some(missed) => Resumed::Missed {
                missed,
                ended: crate::task::state::ends_stream(&file.task.status.state),
                events,
                finished,
            },
            None => Resumed::From(Box::new(Subscription {
                snapshot: file.task.clone(),
                position,
                generation: file.events.generation(),
                events,
                finished,
            })),
        }
    }

    /// The run's log, made at `now` when this is its first stream. Call under the task's lock.
    fn log(&self, now: EventId) -> std::sync::MutexGuard<'_, EventLog> {
        self.log
            .get_or_init(|| Mutex::new(EventLog::new(now)))
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the next position of the run and, once a stream has made the log, records the event
    /// `make` builds there and sends it to the streams (none listening is fine: the task file has
    /// everything). Call under the lock, with its file.
    fn send_event(&self, file: &mut TaskFile, make: impl FnOnce() -> StreamResponse) {
        let mark = self.advance(file);
        self.record(mark, make);
    }

    /// Takes the next position of the run, and with it the task's next generation, which long
    /// polls are told of (they read the task under the lock, so they see this change once the
    /// caller has made it). Call under the lock.
    fn advance(&self, file: &mut TaskFile) -> (EventId, u64) {
        let id = file.events.advance();
        let generation = file.events.generation();
        self.generation.send_replace(generation);
        (id, generation)
    }

    /// Records the event `make` builds at position and generation `mark`, taken before the file
    /// that names them was written, once a stream has made the log. Call under the lock.
    fn record(&self, (id, generation): (EventId, u64), make: impl FnOnce() -> StreamResponse) {
        if let Some(log) = self.log.get() {
            let event = Arc::new(StreamEvent { id, generation, response: make() });
            log.lock().unwrap_or_else(PoisonError::into_inner).record(event);
        }
    }

    /// The position of the task's latest event, and the task's generation.
    pub async fn position(&self) -> (EventId, u64) {
        let file = self.state.lock().await;
        (file.events.position(), file.events.generation())
    }

    /// The current task.
    pub async fn snapshot(&self) -> a2a::Task {
        self.state.lock().await.task.clone()
    }

    /// The task's state now (no copy of the task).
    pub async fn state(&self) -> a2a::TaskState {
        self.state.lock().await.task.status.state.clone()
    }

    /// The current task and its generation, read together.
    pub async fn view(&self) -> (a2a::Task, u64) {
        let file = self.state.lock().await;
        (file.task.clone(), file.events.generation())
    }

    /// The task's generation as it changes (the task-generation extension's long polls).
    pub fn generations(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// A receiver that holds the final task once the run has ended.
    pub fn finished(&self) -> watch::Receiver<Option<a2a::Task>> {
        self.finished.subscribe()
    }

    /// Sets the run's first status, `working`, writes the task file and broadcasts it: a new
    /// task's file is created in that state (one write, not `submitted` then `working`), a
    /// continued task's is replaced (not flushed, see [`LiveTask::set_status`]).
    ///
    /// # Errors
    /// The store's error when a new task's file cannot be created (the task does not exist
    /// then); a continued task's failed write is logged, its run goes on.
    pub async fn start_working(&self, create: bool) -> Result<(), Error> {
        let mut file = self.state.lock().await;
        let status = TaskStatus {
            state: TaskState::Working,
            message: None,
            timestamp: Some(self.store.now()),
        };
        retire_status_message(&mut file.task);
        let changed = file.task.status.state != status.state;
        file.task.status = status.clone();
        // The file records the status's position (and so the run's number) from the start.
        let mark = self.advance(&mut file);
        if create {
            self.store.create(&self.workspace, &file).await?;
        } else {
            self.persist_interim(&file).await;
        }
        if changed {
            self.push.notify(&file.task, &file.push_configs);
        }
        self.broadcast_status(mark, status);
        Ok(())
    }

    /// Sets the status (with an optional agent message), persists, and broadcasts it. A status
    /// that ends the run's part (terminal, input-required) is written durably, with the
    /// session's journal in the same barrier; the ones before it are interim writes (no disk
    /// flush: a crash fails the task on its next read whichever version survives).
    pub async fn set_status(&self, state: TaskState, message: Option<String>) {
        let message = message.map(|text| self.redactor().redact(&text).into_owned());
        let mut file = self.state.lock().await;
        let status = TaskStatus {
            state,
            message: message.map(|text| agent_message(&self.task_id, &self.context_id, text)),
            timestamp: Some(self.store.now()),
        };
        retire_status_message(&mut file.task);
        let changed = file.task.status.state != status.state;
        let durable = crate::task::state::ends_stream(&status.state);
        file.task.status = status.clone();
        let mark = self.advance(&mut file);
        if durable {
            // The run's last events go into the file with its last state, for resumes after the
            // run (the status itself is the task's).
            if let Some(log) = self.log.get() {
                file.events.tail = log.lock().unwrap_or_else(PoisonError::into_inner).tail();
            }
            self.persist(&file).await;
        } else {
            self.persist_interim(&file).await;
        }
        if changed {
            // Webhooks hear about state changes (not every "using <tool>"); never blocks.
            self.push.notify(&file.task, &file.push_configs);
        }
        self.broadcast_status(mark, status);
    }

    /// Records a status at its position and generation `mark` (taken before the file was
    /// written, so the file names them) and sends it to the task's streams (none listening is
    /// fine).
    fn broadcast_status(&self, mark: (EventId, u64), status: TaskStatus) {
        self.record(mark, || {
            StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: self.task_id.clone(),
                context_id: self.context_id.clone(),
                status,
                metadata: None,
            })
        });
    }

    /// The task's push configs.
    pub async fn push_configs(&self) -> Vec<StoredPushConfig> {
        self.state.lock().await.push_configs.clone()
    }

    /// Applies `change` (which says whether it changed anything) to the push configs and
    /// persists them under the task's lock, so the run's next write keeps them. `None` when the
    /// run has ended: the file is final then and belongs to whoever runs the task next, so the
    /// caller must change the file instead.
    pub async fn update_push_configs(
        &self,
        change: &(dyn Fn(&mut Vec<StoredPushConfig>) -> bool + Sync),
    ) -> Option<Result<(), Error>> {
        let mut file = self.state.lock().await;
        if self.finished.borrow().is_some() {
            return None;
        }
        if !change(&mut file.push_configs) {
            return Some(Ok(()));
        }
        Some(self.store.save(&self.workspace, &file).await.map_err(Error::from))
    }

    /// A new answer of the run begins: its first chunk replaces what streams show.
    pub async fn begin_answer(&self) {
        let _file = self.state.lock().await;
        self.answer.begin();
    }

    /// Streams a piece of the answer into the response artifact (not persisted per chunk),
    /// redacted, less an end that could be the start of a secret ([`answer`]).
    pub async fn stream_chunk(&self, text: &str) {
        let redactor = self.redactor();
        let mut file = self.state.lock().await;
        if let Some(chunk) = self.answer.chunk(&redactor, text) {
            self.send_chunk(&mut file, chunk);
        }
    }

    /// Ends the answer being streamed: what was held back of it goes out as its last chunk.
    pub async fn end_answer(&self) {
        let redactor = self.redactor();
        let mut file = self.state.lock().await;
        if let Some(chunk) = self.answer.end(&redactor) {
            self.send_chunk(&mut file, chunk);
        }
    }

    fn send_chunk(&self, file: &mut TaskFile, chunk: Chunk) {
        self.answer.apply(&mut file.task, &chunk);
        let Chunk { text, append, last } = chunk;
        self.send_event(file, || {
            self.artifact_update(self.answer.artifact(text), Some(append), last)
        });
    }

    /// Ends the run as it settled: the final answer replaces the response artifact (see
    /// [`AnswerStream::finish`]), the final status is set, and every waiter gets the task.
    pub async fn end(&self, final_text: &str, state: TaskState, message: Option<String>) {
        self.set_final_text(final_text).await;
        self.set_status(state, message).await;
        self.finish().await;
    }

    /// Ends the run as failed, for `reason` (the caller's text): the run could not start, or
    /// broke.
    pub async fn fail(&self, reason: String) {
        self.set_status(TaskState::Failed, Some(reason)).await;
        self.finish().await;
    }

    /// Replaces the response artifact's content with the final answer (or removes it when
    /// empty); streams get it as one replacing update when what they were streamed differs.
    async fn set_final_text(&self, text: &str) {
        let redactor = self.redactor();
        let text: &str = &redactor.redact(text);
        let mut file = self.state.lock().await;
        // Also when nothing was streamed (the session dropped every delta): the answer is a
        // change of the task, which goes out as an event (and so a generation) like any other.
        if self.answer.finish(&mut file.task, text) {
            self.send_event(&mut file, || {
                self.artifact_update(self.answer.artifact(text.to_string()), Some(false), true)
            });
        }
    }

    /// Adds a new artifact (something the agent sent), persists and broadcasts it. Its text
    /// parts and its files that are UTF-8 text are redacted; binary files must have been
    /// checked by whoever made them (see [`Redactor::bytes_contain_value`]).
    pub async fn add_artifact(&self, name: Option<String>, mut parts: Vec<Part>) {
        let redactor = self.redactor();
        for part in &mut parts {
            redact_part(&redactor, part);
        }
        let artifact = Artifact {
            artifact_id: uuid::Uuid::new_v4().to_string(),
            name,
            description: None,
            parts,
            metadata: None,
            extensions: None,
        };
        let mut file = self.state.lock().await;
        file.task.artifacts.get_or_insert_with(Vec::new).push(artifact.clone());
        let mark = self.advance(&mut file);
        self.persist_interim(&file).await;
        self.record(mark, || self.artifact_update(artifact, None, true));
    }

    /// Marks the run as over: every waiter gets the final task.
    async fn finish(&self) {
        let task = self.snapshot().await;
        self.finished.send_replace(Some(task));
    }

    /// An artifact event of this task: `append` says whether its parts extend the artifact the
    /// client has (`None`: a new artifact), `last_chunk` whether more of it follows.
    fn artifact_update(
        &self,
        artifact: Artifact,
        append: Option<bool>,
        last_chunk: bool,
    ) -> StreamResponse {
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            artifact,
            append,
            last_chunk: Some(last_chunk),
            metadata: None,
        })
    }

    /// Whether the task file's last durable write succeeded (none yet: false).
    pub fn durably_written(&self) -> bool {
        self.durably_written.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Persists a state of the run before its last (not flushed to disk; see `set_status`):
    /// a crash fails the task on the next read whichever version survives.
    async fn persist_interim(&self, file: &TaskFile) {
        if let Err(err) = self.store.save_interim(&self.workspace, file).await {
            tracing::error!(task_id = %self.task_id, error = %err, "cannot write the task file");
        }
    }

    /// Persists durably, with the run's journal entries so far (one barrier for both).
    async fn persist(&self, file: &TaskFile) {
        // No session (it could not be opened): no journal to cover.
        let journal = self.session.get().and_then(|session| {
            session.journal_file().unwrap_or_else(|err| {
                // Without the handle the journal is synced when its session closes.
                tracing::warn!(task_id = %self.task_id, error = %err, "cannot sync the journal with the task");
                None
            })
        });
        let (files, mark) = match journal.map(volcanic_core::session::JournalFile::split) {
            Some((journal, mark)) => (vec![journal], Some(mark)),
            None => (Vec::new(), None),
        };
        let written = self.store.save_with(&self.workspace, file, files).await;
        self.durably_written.store(written.is_ok(), std::sync::atomic::Ordering::Release);
        match written {
            // The barrier covered the journal: closing the session need not flush it again.
            Ok(()) => {
                if let Some(mark) = mark {
                    mark.covered();
                }
            }
            Err(err) => {
                tracing::error!(task_id = %self.task_id, error = %err, "cannot write the task file");
            }
        }
    }
}
