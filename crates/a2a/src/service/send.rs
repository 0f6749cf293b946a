//! SendMessage and SendStreamingMessage up to the start of the run: checks, the hop guard, the
//! task to create or continue, the context's reservation, the task file and its first event.
//! What follows the acknowledgement (the session, the prompt, the run) is `run`'s.

use std::sync::Arc;

use a2a::{TaskState, TaskStatus};
use serde_json::Value;
use tokio::sync::watch;
use tracing::Instrument;

use crate::auth::Caller;
use crate::error::{A2aError, Error};
use crate::push::StoredPushConfig;
use crate::request::Reply;
use crate::run::files;
use crate::run::live::LiveTask;
use crate::task::id::is_valid_id;
use crate::task::query::{apply_history_length, history_length};
use crate::task::state::state_name;
use crate::task::status::{agent_message, retire_status_message};
use crate::task::store::Count;
use crate::task::{AcceptedMessage, TaskFile};

use super::launch::{AtRest, Launched, Started, launch, new_task_file, reserve};
use super::retry;
use super::stream::{closing_stream, task_stream, wait_settled};
use super::{EventStream, Outcome, SendAnswer, Service, push_config};

/// The metadata key of the recursion guard.
const HOPS_KEY: &str = "volcanic.hops";

pub(super) async fn send(
    service: &Arc<Service>,
    caller: &Caller,
    params: crate::request::SendParams,
    answer: SendAnswer,
    if_generation_match: Option<u64>,
) -> Result<Outcome, Error> {
    let crate::request::SendParams { request: req, push_format } = params;
    let mut message = req.message;
    if message.message_id.is_empty() {
        return Err(A2aError::InvalidParams("message.messageId is required".into()).into());
    }
    if message.role != a2a::Role::User {
        return Err(A2aError::InvalidParams("message.role must be ROLE_USER".into()).into());
    }
    files::precheck(
        &message.parts,
        service.options.max_file_bytes,
        service.options.allow_private_push_urls,
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
        )
        .into());
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
        Some(config) => Some(push_config::validate_inline(service, config, push_format)?),
        None => None,
    };

    // A repeat of an accepted message gets that message's task and starts nothing.
    let claim = match retry::admit(service, caller, &message).await? {
        retry::Admission::New(claim) => claim,
        retry::Admission::Repeat { task_id } => {
            let history_length = configuration.history_length;
            return retry::repeat(service, caller, &task_id, answer, history_length).await;
        }
    };
    // Over a daily cap nothing starts: no task, no session (the claim gives its id back).
    if let Err(exhausted) = service.meter.check(caller, &service.pool.model()) {
        return Err(A2aError::DailyLimitReached {
            reason: exhausted.reason,
            retry_after_secs: exhausted.retry_after_secs,
        }
        .into());
    }

    // From here on the work runs on its own task: a client that disconnects must not leave a
    // context claimed or a task half-created.
    let inner = service.clone();
    let owner = caller.clone();
    let started = service
        .tracker
        .spawn(
            async move {
                let accepted = claim.message().clone();
                let intake = Intake { message, hops, push, accepted, if_generation_match };
                let started = start(&inner, &owner, intake).await;
                // Repeats find the task from now on; a send that failed gives its id back.
                if let Ok(started) = &started {
                    claim.accept(started.task_id());
                }
                started
            }
            .instrument(tracing::Span::current()),
        )
        .await
        .map_err(|err| {
            tracing::error!(error = %err, "starting a task failed unexpectedly");
            A2aError::Internal
        })??;
    let history_length = configuration.history_length;
    let Launched { live, acknowledged } = match started {
        Started::AtRest(rest) => return Ok(rest_outcome(rest, answer, history_length)),
        Started::Running(launched) => launched,
    };
    // Durability of what the caller is told (docs/reliability.md): the task file exists, whole,
    // but it has not been flushed to disk. A stream acknowledges the task with its first
    // event, at once, and the flush runs beside the run (the final state is written durably
    // before the last event); a blocking answer waits for the flush, or for the final state.
    // The run waits for the acknowledgement, so a stream's subscription here sees all of it.
    let (mut task, generation) = match answer {
        SendAnswer::Stream => {
            let start = live.subscribe().await;
            flush_beside(service, &live, start.finished.clone());
            let stream = task_stream(start, live);
            return Ok(Outcome::Stream(acknowledging(stream, acknowledged)));
        }
        SendAnswer::Immediately => {
            let view = live.view().await;
            drop(acknowledged);
            service.tasks.make_durable(&live.workspace, &live.task_id).await?;
            view
        }
        SendAnswer::Settled => {
            drop(acknowledged);
            wait_settled(&live).await
        }
    };
    apply_history_length(&mut task, history_length)?;
    Ok(Outcome::task(Reply::Send(a2a::SendMessageResponse::Task(task)), generation))
}

/// Makes the first version of a streamed task's file durable beside its run, unless the run
/// ends within [`STREAM_FLUSH_GRACE`] with its final state written durably (with the journal)
/// before the last event: waiting first keeps a barrier's work off the path of a short run's
/// first event.
fn flush_beside(
    service: &Service,
    live: &Arc<LiveTask>,
    mut ended: watch::Receiver<Option<a2a::Task>>,
) {
    let (store, run) = (service.tasks.store().clone(), live.clone());
    service.tracker.spawn(async move {
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
}

/// A checked send, as `start` takes it.
struct Intake {
    message: a2a::Message,
    hops: u32,
    /// The inline push config, validated.
    push: Option<StoredPushConfig>,
    /// The retry record the task file keeps of this message.
    accepted: AcceptedMessage,
    /// `configuration.ifGenerationMatch`, when the caller activated task generations.
    if_generation_match: Option<u64>,
}

/// Creates or continues the task and starts its run. Runs on its own task (see `send`).
async fn start(service: &Arc<Service>, caller: &Caller, intake: Intake) -> Result<Started, Error> {
    let Intake { mut message, hops, push, accepted, if_generation_match } = intake;
    let window = service.options.retry_window;
    let register = |file: &mut TaskFile| {
        if let Some(mut stored) = push.clone() {
            stored.config.task_id = file.task.id.clone();
            crate::push::config::upsert(&mut file.push_configs, stored);
        }
    };
    // The task to continue, if any, and the context.
    let continued = match &message.task_id {
        Some(task_id) => {
            Some(continuable(service, caller, task_id, &message, if_generation_match).await?)
        }
        None => None,
    };
    if continued.is_none() {
        check_task_room(service, caller).await?;
    }
    let context_id = match (&continued, &message.context_id) {
        (Some(file), _) => file.task.context_id.clone(),
        (None, Some(context_id)) => context_id.clone(),
        (None, None) => uuid::Uuid::new_v4().to_string(),
    };
    let task_id =
        continued.as_ref().map_or_else(|| uuid::Uuid::new_v4().to_string(), |f| f.task.id.clone());
    message.task_id = Some(task_id.clone());
    message.context_id = Some(context_id.clone());
    // This runs in the request's span (see `send`): a new task's ids are known only now.
    let span = tracing::Span::current();
    span.record("task_id", task_id.as_str());
    span.record("context_id", context_id.as_str());

    if hops > service.options.max_hops {
        // Refused before any session is opened or claimed.
        let mut file = match continued {
            Some(mut file) => {
                add_reply(&mut file.task, &message);
                file
            }
            None => new_task_file(caller, &message, service.tasks.store().now()),
        };
        file.task.status = TaskStatus {
            state: TaskState::Failed,
            message: Some(agent_message(&task_id, &context_id, "hop limit reached")),
            timestamp: Some(service.tasks.store().now()),
        };
        register(&mut file);
        file.events.record_status_change();
        retry::remember(&mut file, accepted, window);
        service.tasks.save(&caller.workspace, &file).await?;
        service.push.notify(&file.task, &file.push_configs);
        tracing::info!(task_id = %task_id, caller = %caller.name, hops, max = service.options.max_hops, "a2a task refused: hop limit reached");
        return Ok(Started::AtRest(AtRest::of(file)));
    }

    // A context with a task waiting for the owner is busy until it is decided.
    if service.approvals.waits_in_context(&caller.workspace.path, &caller.name, &context_id) {
        return Err(Error::ContextBusy);
    }
    let approval = super::approve::needed(service, caller);
    if approval && continued.is_none() {
        let request = super::approve::Request { message, hops, accepted, window };
        return super::approve::request(service, caller, request, &register).await;
    }

    let reserved = reserve(service, caller, &context_id).await?;

    // Under the reservation, the continued task cannot change any more: check it again (a
    // cancel or another continuation may have won the race).
    let mut asked = None;
    let mut file = match continued {
        Some(_) => {
            let mut file =
                continuable(service, caller, &task_id, &message, if_generation_match).await?;
            asked = super::approve::question(&file.task);
            add_reply(&mut file.task, &message);
            file
        }
        None => new_task_file(caller, &message, service.tasks.store().now()),
    };
    files::strip_bytes(&mut file.task);
    register(&mut file);
    retry::remember(&mut file, accepted, window);
    if approval {
        // A reply to a task the owner approved is a new instruction: it waits for the owner
        // too (a new task's did above).
        let reply = super::approve::Reply { message, hops, asked };
        return super::approve::request_reply(service, caller, file, reserved, reply).await;
    }
    launch(service, caller, file, reserved, message).await.map(Started::Running)
}

/// Adds the caller's reply to a continued task's history, after what the task last said (its
/// question, which leaves the status for the history first).
fn add_reply(task: &mut a2a::Task, message: &a2a::Message) {
    retire_status_message(task);
    task.history.get_or_insert_with(Vec::new).push(message.clone());
}

/// Refuses a new task when the workspace already holds `A2A__MaxTasks` task files, as the
/// task index counts them: O(1) per send, and a fresh look at the folder only at the cap (files
/// the owner deleted make room at once). Concurrent sends may pass the cap by as many tasks
/// as are being created at that moment.
async fn check_task_room(service: &Service, caller: &Caller) -> Result<(), Error> {
    let max = service.options.max_tasks;
    let mut count = service.tasks.count(&caller.workspace, Count::Known).await?;
    if count >= max {
        // The owner may have deleted task files since the index last looked: look again.
        count = service.tasks.count(&caller.workspace, Count::Rescanned).await?;
    }
    if count >= max {
        tracing::warn!(caller = %caller.name, max, "task limit reached, a new task was refused");
        return Err(Error::TaskLimit { max });
    }
    Ok(())
}

/// Loads a task a message wants to continue and checks that it can be: the caller's, in the
/// same context, input-required, and at generation `if_generation_match` when one is given
/// (the task-generation extension).
async fn continuable(
    service: &Service,
    caller: &Caller,
    task_id: &str,
    message: &a2a::Message,
    if_generation_match: Option<u64>,
) -> Result<TaskFile, Error> {
    let file = service.tasks.load(caller, task_id).await?;
    if let Some(expected) = if_generation_match
        && expected != file.events.generation()
    {
        return Err(A2aError::TaskGenerationMismatch {
            task_id: file.task.id.clone(),
            expected,
            current: file.events.generation(),
        }
        .into());
    }
    if let Some(context_id) = &message.context_id
        && *context_id != file.task.context_id
    {
        return Err(A2aError::InvalidParams(
            "message.contextId does not match the task's contextId".into(),
        )
        .into());
    }
    match file.task.status.state {
        TaskState::InputRequired if !service.tasks.is_running(task_id) => Ok(file),
        TaskState::AuthRequired => Err(Error::AwaitingApproval { task_id: file.task.id.clone() }),
        ref state if state.is_terminal() => {
            Err(Error::NotContinuable { task_id: file.task.id.clone(), state: state_name(state) })
        }
        _ => Err(Error::ContextBusy),
    }
}

/// Send configuration with defaults applied (`returnImmediately` is the [`SendAnswer`]'s).
struct Config {
    history_length: Option<i32>,
    push: Option<a2a::TaskPushNotificationConfig>,
}

trait DefaultConfig {
    fn unwrap_or_default_config(self) -> Config;
}

impl DefaultConfig for Option<a2a::SendMessageConfiguration> {
    fn unwrap_or_default_config(self) -> Config {
        match self {
            Some(c) => {
                Config { history_length: c.history_length, push: c.task_push_notification_config }
            }
            None => Config { history_length: None, push: None },
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

/// The answer to a send whose task is at rest (ended before any run, or waiting for the
/// owner): a one-event stream, or the task.
fn rest_outcome(rest: AtRest, answer: SendAnswer, history_length: Option<i32>) -> Outcome {
    let AtRest { task, position, generation } = rest;
    let mut task = *task;
    match answer {
        SendAnswer::Stream => Outcome::Stream(closing_stream(task, position, generation)),
        SendAnswer::Settled | SendAnswer::Immediately => {
            // A negative length was refused with the request; ignore the error here.
            let _ = apply_history_length(&mut task, history_length);
            Outcome::task(Reply::Send(a2a::SendMessageResponse::Task(task)), generation)
        }
    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use a2a::StreamResponse;
    use futures_util::StreamExt;

    use super::*;
    use crate::task::events::EventId;

    fn two_events() -> EventStream {
        let task = a2a::Task {
            id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus { state: TaskState::Completed, message: None, timestamp: None },
            artifacts: None,
            history: None,
            metadata: None,
        };
        closing_stream(task, EventId { run: 1, seq: 1 }, 1)
    }

    #[tokio::test]
    async fn acknowledging_stream_signals_when_its_first_event_is_taken() {
        let (sender, mut receiver) = tokio::sync::oneshot::channel();
        let mut stream = acknowledging(two_events(), sender);
        assert!(receiver.try_recv().is_err(), "nothing taken yet");
        assert!(matches!(stream.next().await.map(|e| e.response), Some(StreamResponse::Task(_))));
        assert_eq!(receiver.try_recv(), Ok(()));
        let next = stream.next().await.map(|e| e.response);
        assert!(matches!(next, Some(StreamResponse::StatusUpdate(_))));
    }

    #[tokio::test]
    async fn acknowledging_stream_dropped_unread_lets_the_run_start() {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        drop(acknowledging(two_events(), sender));
        let waited = tokio::time::timeout(Duration::from_secs(5), receiver).await;
        assert!(matches!(waited, Ok(Err(_))), "the sender is gone: the run does not wait");
    }
}
