//! `notify_owner` for A2A sessions: `🤖 A2A · <caller>: <text>` into the owner's chat. The
//! workspace's owner id is its chat id; a group's workspace notifies the owner (the first
//! allowed user) in their private chat, never the group, and the prefix names the group.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use volcanic_a2a::OwnerNotifier;
use volcanic_a2a::auth::Caller;

use crate::api::BotApi;
use crate::config::TelegramConfig;
use crate::render;

/// Delivers owner notifications as Telegram messages.
pub struct TelegramNotifier {
    pub api: BotApi,
    pub config: Arc<TelegramConfig>,
    pub cancel: CancellationToken,
}

/// The text an owner sees.
pub fn notification(caller: &str, text: &str) -> String {
    format!("🤖 A2A · {caller}: {text}")
}

impl TelegramNotifier {
    /// Where a notification from the workspace of `chat_id` goes, and how its caller is named:
    /// a private chat's own chat; for a group, the owner's private chat, naming the group.
    fn route(&self, chat_id: i64, caller: &str) -> Result<(i64, String), String> {
        if !self.config.is_allowed_group(chat_id) {
            return Ok((chat_id, caller.to_string()));
        }
        let owner =
            self.config.owner().ok_or("no owner to notify (Telegram__AllowedUserIds is empty)")?;
        Ok((owner, format!("{caller} (group {chat_id})")))
    }
}

#[async_trait::async_trait]
impl OwnerNotifier for TelegramNotifier {
    async fn notify(&self, caller: &Caller, text: &str) -> Result<(), String> {
        let owner = &caller.workspace.owner_id;
        let chat_id: i64 =
            owner.parse().map_err(|_| format!("the owner {owner:?} is not a Telegram chat"))?;
        let (target, name) = self.route(chat_id, &caller.name)?;
        render::send_text(&self.api, target, &notification(&name, text), &self.cancel)
            .await
            .map_err(|err| format!("could not reach the owner: {err}"))
    }
}
