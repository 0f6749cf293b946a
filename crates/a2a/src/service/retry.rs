//! Safe retries on the send path (docs/a2a.md, "Safe retries"): before a send creates or continues anything, its
//! (caller, messageId) is looked up among the caller's accepted messages (`task::accepted`). A
//! repeat of an accepted message is answered with that message's task, as it is now, and starts
//! nothing: a blocking send waits for the run in progress, a streaming one follows it, so a
//! repeat is never refused as "context busy". The same id with a different message is refused.
//! A new message claims its id until its task exists, so identical sends racing make one task.

use std::sync::Arc;
use std::time::Duration;

use crate::auth::Caller;
use crate::error::{A2aError, Error};
use crate::request::Reply;
use crate::task::accepted::expired;
use crate::task::query::apply_history_length;
use crate::task::{AcceptedMessage, Claim, Lookup, TaskFile, digest};

use super::stream::{closing_stream, task_stream, wait_settled};
use super::{Outcome, SendAnswer, Service};

/// How long a repeat waits for the first send of its message to create the task: that send only
/// reserves the context and writes one file before it does.
const PENDING_WAIT: Duration = Duration::from_secs(30);

/// How many times a send looks again after the send it waited for failed before its task
/// existed (each time, another identical send failed first).
const MAX_LOOKUPS: usize = 16;

/// What a send is, once its messageId has been looked up.
pub(super) enum Admission {
    /// A new message: its claim, to be accepted once its task exists.
    New(Claim),
    /// A repeat of the message that created or continued this task.
    Repeat { task_id: String },
}

/// Looks the message up among the caller's accepted messages, claiming its id when it is new.
/// `message` is as the client sent it (ids that ProtoJSON reads as unset already `None`).
///
/// # Errors
/// [`Error::MessageIdReused`] for the same id with a different message;
/// [`Error::StillAccepting`] when the first send of the message takes too long;
/// [`A2aError::Internal`] when the caller's records cannot be read.
pub(super) async fn admit(
    service: &Service,
    caller: &Caller,
    message: &a2a::Message,
) -> Result<Admission, Error> {
    let digest = digest(message).map_err(|err| {
        tracing::error!(error = %err, "cannot serialize a message's parts for its digest");
        Error::from(A2aError::Internal)
    })?;
    let records = service.accepted.workspace(&caller.workspace.path).await?;
    let still_accepting = || Error::StillAccepting { message_id: message.message_id.clone() };
    for _ in 0..MAX_LOOKUPS {
        match records.lookup(
            &caller.name,
            &message.message_id,
            &digest,
            service.tasks.store().now(),
        ) {
            Lookup::New(claim) => return Ok(Admission::New(claim)),
            Lookup::Repeat { task_id } => return Ok(Admission::Repeat { task_id }),
            Lookup::Differs => {
                return Err(Error::MessageIdReused { message_id: message.message_id.clone() });
            }
            Lookup::Pending(mut accepted) => {
                match tokio::time::timeout(PENDING_WAIT, accepted.wait_for(Option::is_some)).await {
                    Ok(Ok(task_id)) => {
                        let task_id = task_id.clone().unwrap_or_default();
                        return Ok(Admission::Repeat { task_id });
                    }
                    // That send failed before its task existed: this one may be new.
                    Ok(Err(_)) => {}
                    Err(_) => return Err(still_accepting()),
                }
            }
        }
    }
    Err(still_accepting())
}

/// The answer to a repeat: the task as it is now, or once its run in progress ends (blocking),
/// or its stream from now on (streaming), as the repeat's own send asks (`answer`, and
/// `history_length` of its configuration). Nothing of the task changes.
///
/// # Errors
/// [`A2aError::TaskNotFound`] when the task's file is gone (its owner deleted it);
/// [`A2aError::InvalidParams`] for a negative `historyLength`.
pub(super) async fn repeat(
    service: &Arc<Service>,
    caller: &Caller,
    task_id: &str,
    answer: SendAnswer,
    history_length: Option<i32>,
) -> Result<Outcome, Error> {
    tracing::debug!(task_id, caller = %caller.name, "a repeated message answered with its task");
    let (mut task, generation) = match service.tasks.live(caller, task_id) {
        Some(live) => match answer {
            SendAnswer::Stream => {
                return Ok(Outcome::Stream(task_stream(live.subscribe().await, live)));
            }
            SendAnswer::Immediately => {
                let view = live.view().await;
                service.tasks.make_durable(&live.workspace, &live.task_id).await?;
                view
            }
            SendAnswer::Settled => wait_settled(&live).await,
        },
        None => {
            let file = service.tasks.load(caller, task_id).await?;
            let generation = file.events.generation();
            match answer {
                SendAnswer::Stream => {
                    let position = file.events.status_position();
                    return Ok(Outcome::Stream(closing_stream(file.task, position, generation)));
                }
                SendAnswer::Settled | SendAnswer::Immediately => (file.task, generation),
            }
        }
    };
    apply_history_length(&mut task, history_length)?;
    Ok(Outcome::task(Reply::Send(a2a::SendMessageResponse::Task(task)), generation))
}

/// Records `accepted` in the task file it creates or continues (written with it), dropping the
/// records of the file that are past the window. With a zero window nothing is recorded.
pub(super) fn remember(file: &mut TaskFile, accepted: AcceptedMessage, window: Duration) {
    let now = accepted.at;
    file.accepted.retain(|old| !expired(window, old.at, now));
    if !window.is_zero() {
        file.accepted.push(accepted);
    }
}
