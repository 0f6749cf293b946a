//! The owner's approvals in Telegram (docs/telegram-bot.md, "Approving callers"): a
//! caller's request that waits for the owner becomes a message in the owner's private chat with
//! Approve and Deny buttons, and a press of one decides it through the A2A server.
//!
//! The message names the caller in a bold heading and shows the caller's request in a block
//! quote (both message entities, never a parse mode): nothing the caller writes can pass for the
//! heading of another caller's request above the buttons.
//!
//! Only a human decides: the buttons are inline keyboard callbacks, which only a Telegram client
//! can send (a session would need the bot token, which no session can read: docs/security.md),
//! and the host hands a press to [`ApprovalButtons`] only when it comes from an allowed user on a
//! message in a chat the bot serves (`access::decide_press`). A press on a request that was
//! decided already (at the shell, by its time limit, or by another press) answers that it is no
//! longer pending and takes the buttons away.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use volcanic_a2a::approval::{ApprovalNotifier, Decision, PendingApproval, Settled};
use volcanic_a2a::auth::Caller;
use volcanic_a2a::{A2aServer, DecideError};

use crate::api::{BotApi, Button, CallbackQuery, Entity, EntityKind};
use crate::callback::{CallbackHandler, CallbackReply, MessageEdit};
use crate::config::TelegramConfig;
use crate::render::utf16_len;

/// The prefix of the buttons' callback data: `appr:y:<id>` approves, `appr:n:<id>` denies.
const PREFIX: &str = "appr:";

/// Approval requests as Telegram messages with buttons, and the presses that decide them.
pub struct ApprovalButtons {
    api: BotApi,
    config: Arc<TelegramConfig>,
    cancel: CancellationToken,
    /// The server the presses decide on; set once it is built (it is built with this notifier).
    server: OnceLock<A2aServer>,
    /// The messages that ask, by request id, until the request is settled: a request decided
    /// elsewhere (at the shell, by its time limit, a cancel) gets its message edited and its
    /// buttons taken away.
    asked: Mutex<HashMap<String, Asked>>,
}

/// A message that asks: where it is, its text and marks.
#[derive(Debug, Clone)]
struct Asked {
    chat: i64,
    message: i64,
    text: String,
    entities: Vec<Entity>,
}

/// The message asking about `request` of `caller`: the heading naming the caller in bold, the
/// caller's request in a block quote, and what the buttons do.
fn asking(caller: &str, request: &str) -> (String, Vec<Entity>) {
    let heading = format!("🔐 A2A · {caller} asks for your approval:");
    let text = format!(
        "{heading}\n\n{request}\n\nApprove to let it run, or deny it. (It is rejected if nobody decides in time.)"
    );
    let bold = utf16_len(&heading);
    let mut entities = vec![Entity { kind: EntityKind::Bold, offset: 0, length: bold }];
    // Trailing whitespace is left out of the quote: Telegram trims it off a text's parts.
    let quoted = utf16_len(request.trim_end());
    if quoted > 0 {
        entities.push(Entity { kind: EntityKind::Blockquote, offset: bold + 2, length: quoted });
    }
    (text, entities)
}

impl ApprovalButtons {
    pub fn new(api: BotApi, config: Arc<TelegramConfig>, cancel: CancellationToken) -> Self {
        ApprovalButtons { api, config, cancel, server: OnceLock::new(), asked: Mutex::default() }
    }

    /// Gives the buttons the server to decide on. Set once; a second call is ignored.
    pub fn attach(&self, server: A2aServer) {
        let _ = self.server.set(server);
    }

    /// The chat a request of the workspace of `chat_id` goes to: that private chat; for a
    /// group's workspace, the owner's private chat (never the group: its members are not all
    /// the owner).
    fn target(&self, chat_id: i64) -> Option<i64> {
        if self.config.is_allowed_group(chat_id) { self.config.owner() } else { Some(chat_id) }
    }
}

#[async_trait::async_trait]
impl ApprovalNotifier for ApprovalButtons {
    async fn requested(&self, caller: &Caller, request: &PendingApproval) {
        let Some(target) =
            caller.workspace.owner_id.parse::<i64>().ok().and_then(|chat| self.target(chat))
        else {
            tracing::warn!(approval = %request.id, "no Telegram chat to ask for this approval; it waits for volcanic approve");
            return;
        };
        // A reply's question is the task's (the caller's words too): quoted with the request.
        let shown = match &request.question {
            Some(question) => {
                format!("(A reply to a task that asked: {question})\n\n{}", request.request)
            }
            None => request.request.clone(),
        };
        let (text, entities) = asking(&caller.name, &shown);
        let buttons = vec![vec![
            Button::new("✅ Approve", format!("{PREFIX}y:{}", request.id)),
            Button::new("❌ Deny", format!("{PREFIX}n:{}", request.id)),
        ]];
        let sent = self
            .api
            .send_message_with_buttons(target, &text, &entities, &buttons, &self.cancel)
            .await;
        match sent {
            Ok(message) => {
                let asked = Asked { chat: target, message: message.message_id, text, entities };
                self.lock().insert(request.id.clone(), asked);
            }
            Err(err) => {
                tracing::warn!(approval = %request.id, error = %err, "could not ask the owner in Telegram; the request waits for volcanic approve");
            }
        }
    }

    async fn settled(&self, id: &str, outcome: Settled) {
        // Gone when a press here decided (the press edits its own message).
        let Some(Asked { chat, message, text, entities }) = self.lock().remove(id) else {
            return;
        };
        let text = format!("{text}\n\n(Decided elsewhere: {outcome}.)");
        let edited = self
            .api
            .edit_message_text_with_buttons(chat, message, &text, &entities, &[], &self.cancel)
            .await;
        if let Err(err) = edited {
            tracing::warn!(approval = %id, error = %err, "could not mark a decided approval in Telegram");
        }
    }
}

impl ApprovalButtons {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Asked>> {
        self.asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl CallbackHandler for ApprovalButtons {
    fn handle<'a>(&'a self, query: &'a CallbackQuery) -> BoxFuture<'a, CallbackReply> {
        Box::pin(async move {
            let Some((approve, id)) = parse(query.data.as_deref().unwrap_or_default()) else {
                return CallbackReply::Unknown;
            };
            let Some(server) = self.server.get() else { return CallbackReply::Unknown };
            // This press edits its own message: the settled notice must not edit it again.
            let asked = self.lock().remove(id);
            let decision =
                if approve { Decision::Approve } else { Decision::Deny { reason: None } };
            // The text as this server sent it, with its marks; after a restart, the text as the
            // press shows it, unmarked.
            let (shown, entities) = match &asked {
                Some(asked) => (asked.text.clone(), asked.entities.clone()),
                None => (
                    query.message.as_ref().and_then(|m| m.text.clone()).unwrap_or_default(),
                    Vec::new(),
                ),
            };
            let done = |answer: &str, note: &str| CallbackReply::Handled {
                answer: Some(answer.to_string()),
                edit: Some(MessageEdit {
                    text: format!("{shown}\n\n{note}"),
                    entities: entities.clone(),
                    buttons: Vec::new(),
                }),
            };
            match server.decide_approval(id, decision).await {
                Ok(_) if approve => done("Approved", "✅ Approved: it runs now."),
                Ok(_) => done("Denied", "❌ Denied."),
                Err(DecideError::NotPending) => {
                    done("This request is no longer pending.", "(No longer pending.)")
                }
                Err(DecideError::CallerGone) => {
                    done("The caller is gone; the request was rejected.", "(Caller removed.)")
                }
                // A busy moment or a failure: the buttons stay, the owner may press again (or
                // decide elsewhere, which then edits the message).
                Err(err) => {
                    if let Some(asked) = asked {
                        self.lock().insert(id.to_string(), asked);
                    }
                    CallbackReply::Handled { answer: Some(err.to_string()), edit: None }
                }
            }
        })
    }
}

/// `appr:y:<id>` → (true, id); `appr:n:<id>` → (false, id).
fn parse(data: &str) -> Option<(bool, &str)> {
    let rest = data.strip_prefix(PREFIX)?;
    let (verb, id) = rest.split_once(':')?;
    let approve = match verb {
        "y" => true,
        "n" => false,
        _ => return None,
    };
    volcanic_a2a::approval::is_valid_id(id).then_some((approve, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn button_data_is_read_strictly() {
        assert_eq!(parse("appr:y:0123abcd"), Some((true, "0123abcd")));
        assert_eq!(parse("appr:n:0123abcd"), Some((false, "0123abcd")));
        for bad in ["", "appr:", "appr:y:", "appr:x:0123abcd", "appr:y:0123ABCD", "y:0123abcd"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
