//! `notify_owner` for A2A sessions: `🤖 A2A · <caller>: <text>` into the owner's chat (the
//! workspace's owner id is the chat id).

use tokio_util::sync::CancellationToken;
use volcanic_a2a::OwnerNotifier;
use volcanic_a2a::auth::Caller;

use crate::api::BotApi;
use crate::render;

/// Delivers owner notifications as Telegram messages.
pub struct TelegramNotifier {
    pub api: BotApi,
    pub cancel: CancellationToken,
}

/// The text an owner sees.
pub fn notification(caller: &str, text: &str) -> String {
    format!("🤖 A2A · {caller}: {text}")
}

#[async_trait::async_trait]
impl OwnerNotifier for TelegramNotifier {
    async fn notify(&self, caller: &Caller, text: &str) -> Result<(), String> {
        let owner = &caller.workspace.owner_id;
        let chat_id: i64 =
            owner.parse().map_err(|_| format!("the owner {owner:?} is not a Telegram chat"))?;
        render::send_text(&self.api, chat_id, &notification(&caller.name, text), &self.cancel)
            .await
            .map_err(|err| format!("could not reach the owner: {err}"))
    }
}
