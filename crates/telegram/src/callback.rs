//! Button presses (Telegram callback queries) and the one seam through which they reach the
//! host's code: [`CallbackHandler`].
//!
//! A press is not a chat message: it never enters a chat's queue, never reaches the model, and
//! is handled in a task of its own at once, even while the chat is busy with a run. Only an
//! allowed user's press on a message in a chat the bot serves reaches the handler (see
//! `access::decide_press`); any other press is answered with [`NOT_ALLOWED`]. A press nobody
//! handles (no handler, or data the handler does not know) is answered with [`STALE`].
//!
//! A press for the handler is recorded in `pending` before its update is acknowledged, like an
//! accepted message, and leaves the record once the handler has decided; a press whose
//! handling a restart cut is handed to the handler again after the restart, so a handler must
//! be idempotent (deciding twice on the same press must be harmless).
//!
//! This module knows nothing of what the buttons mean; the handler does.

use futures_util::future::BoxFuture;

use crate::api::{Button, CallbackQuery, Entity};
use crate::chat::Ctx;

/// The answer to a press nobody handles: an old message's button, or one from an older version.
pub const STALE: &str = "This button is no longer active.";

/// The answer to a press from someone who may not use the bot.
pub const NOT_ALLOWED: &str = "Sorry, this button is not for you.";

/// Decides what a press of a callback button means. The host calls it only for presses from an
/// allowed user on a message in a chat it serves, each in a task of its own (presses can be
/// handled concurrently).
pub trait CallbackHandler: Send + Sync {
    /// Handles a press. `query.data` is the button's callback data as the user's client sent it
    /// back: untrusted input. Should return within a few seconds (Telegram refuses an answer
    /// after about 15), and must be idempotent (see the module docs).
    fn handle<'a>(&'a self, query: &'a CallbackQuery) -> BoxFuture<'a, CallbackReply>;
}

/// What the host does after a press.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackReply {
    /// The handler does not know this button: answered with [`STALE`].
    Unknown,
    /// The handler decided: the press is answered with `answer` (a short notice in the user's
    /// client; none when `None`), and the pressed message is edited as `edit` says.
    Handled { answer: Option<String>, edit: Option<MessageEdit> },
}

/// A new text, its marks and inline keyboard for the pressed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageEdit {
    pub text: String,
    /// The marks of the new text (an edit keeps none it does not give again).
    pub entities: Vec<Entity>,
    /// The new buttons; none removes the keyboard.
    pub buttons: Vec<Vec<Button>>,
}

/// Hands a served press to `handler` (or answers [`STALE`] without one), answers it, edits the
/// message as the handler said, then takes the press out of the record of accepted messages.
/// A failed answer or edit is logged: the decision stands either way.
pub(crate) async fn handle(
    ctx: &Ctx,
    handler: Option<&dyn CallbackHandler>,
    update_id: i64,
    query: &CallbackQuery,
) {
    let reply = match handler {
        Some(handler) => handler.handle(query).await,
        None => CallbackReply::Unknown,
    };
    let (answer, edit) = match reply {
        CallbackReply::Unknown => {
            tracing::debug!(update_id, "press of a button nobody handles");
            (Some(STALE.to_string()), None)
        }
        CallbackReply::Handled { answer, edit } => (answer, edit),
    };
    answer_press(ctx, query, answer.as_deref()).await;
    if let Some(edit) = edit {
        match &query.message {
            Some(message) => {
                let (chat_id, message_id) = (message.chat.id, message.message_id);
                let edited = ctx
                    .api
                    .edit_message_text_with_buttons(
                        chat_id,
                        message_id,
                        &edit.text,
                        &edit.entities,
                        &edit.buttons,
                        &ctx.shutdown,
                    )
                    .await;
                if let Err(err) = edited {
                    tracing::warn!(chat_id, message_id, error = %err, "cannot edit a pressed message");
                }
            }
            None => tracing::debug!(update_id, "a press without its message; nothing to edit"),
        }
    }
    ctx.pending.finish(update_id).await;
}

/// Answers a press, logging a failure (an expired query after a restart, say: nothing to do).
pub(crate) async fn answer_press(ctx: &Ctx, query: &CallbackQuery, text: Option<&str>) {
    if let Err(err) = ctx.api.answer_callback_query(&query.id, text, &ctx.shutdown).await {
        tracing::debug!(user_id = query.from.id, error = %err, "cannot answer a button press");
    }
}
