//! The owner's approvals in Telegram (issue 22; docs/telegram-bot.md, "Approving callers"): a
//! caller's request that waits for the owner becomes a message in the owner's private chat with
//! Approve and Deny buttons, and a press of one decides it through the A2A server.
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
use volcanic_a2a::approval::{ApprovalNotifier, Decision, PendingApproval};
use volcanic_a2a::auth::Caller;
use volcanic_a2a::{A2aServer, DecideError};

use crate::api::{BotApi, Button, CallbackQuery};
use crate::callback::{CallbackHandler, CallbackReply, MessageEdit};
use crate::config::TelegramConfig;

/// The prefix of the buttons' callback data: `appr:y:<id>` approves, `appr:n:<id>` denies.
const PREFIX: &str = "appr:";

/// Approval requests as Telegram messages with buttons, and the presses that decide them.
pub struct ApprovalButtons {
    api: BotApi,
    config: Arc<TelegramConfig>,
    cancel: CancellationToken,
    /// The server the presses decide on; set once it is built (it is built with this notifier).
    server: OnceLock<A2aServer>,
    /// The messages that ask, by request id (chat, message, text), until the request is
    /// settled: a request decided elsewhere (at the shell, by its time limit, a cancel) gets
    /// its message edited and its buttons taken away.
    asked: Mutex<HashMap<String, (i64, i64, String)>>,
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
        let asked = match &request.question {
            Some(question) => format!("(A reply to a task that asked: {question})\n\n"),
            None => String::new(),
        };
        let text = format!(
            "🔐 A2A · {} asks for your approval:\n\n{asked}{}\n\nApprove to let it run, or deny it. (It is rejected if nobody decides in time.)",
            caller.name, request.request
        );
        let buttons = vec![vec![
            Button::new("✅ Approve", format!("{PREFIX}y:{}", request.id)),
            Button::new("❌ Deny", format!("{PREFIX}n:{}", request.id)),
        ]];
        match self.api.send_message_with_buttons(target, &text, &buttons, &self.cancel).await {
            Ok(message) => {
                self.lock().insert(request.id.clone(), (target, message.message_id, text));
            }
            Err(err) => {
                tracing::warn!(approval = %request.id, error = %err, "could not ask the owner in Telegram; the request waits for volcanic approve");
            }
        }
    }

    async fn settled(&self, id: &str, outcome: &'static str) {
        // Gone when a press here decided (the press edits its own message).
        let Some((chat, message, text)) = self.lock().remove(id) else { return };
        let text = format!("{text}\n\n(Decided elsewhere: {outcome}.)");
        if let Err(err) =
            self.api.edit_message_text_with_buttons(chat, message, &text, &[], &self.cancel).await
        {
            tracing::warn!(approval = %id, error = %err, "could not mark a decided approval in Telegram");
        }
    }
}

impl ApprovalButtons {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (i64, i64, String)>> {
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
            let shown = query.message.as_ref().and_then(|m| m.text.clone()).unwrap_or_default();
            let done = |answer: &str, note: &str| CallbackReply::Handled {
                answer: Some(answer.to_string()),
                edit: Some(MessageEdit { text: format!("{shown}\n\n{note}"), buttons: Vec::new() }),
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
