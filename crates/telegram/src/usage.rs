//! The owner hears when an A2A caller's daily cap (or the caps of all callers together) reaches
//! 80 % and 100 %: once per day per cap (the A2A server decides when; docs/telegram-bot.md,
//! "Spend caps").
//!
//! Routing as for `notify_owner`: a private chat's workspace tells that chat; a group's
//! workspace tells the owner in their private chat, never the group.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use volcanic_a2a::usage::{UsageAlert, UsageNotifier};

use crate::api::BotApi;
use crate::config::TelegramConfig;

/// Usage alerts as Telegram messages.
pub struct UsageAlerts {
    api: BotApi,
    config: Arc<TelegramConfig>,
    cancel: CancellationToken,
}

impl UsageAlerts {
    pub fn new(api: BotApi, config: Arc<TelegramConfig>, cancel: CancellationToken) -> Self {
        UsageAlerts { api, config, cancel }
    }
}

#[async_trait::async_trait]
impl UsageNotifier for UsageAlerts {
    async fn alert(&self, alert: &UsageAlert) {
        let Ok(chat) = alert.owner_id.parse::<i64>() else {
            tracing::warn!("a usage alert has no Telegram chat to go to");
            return;
        };
        let (target, text) = if self.config.is_allowed_group(chat) {
            let Some(owner) = self.config.owner() else { return };
            (owner, format!("📊 A2A usage (group {chat}): {}", alert.text()))
        } else {
            (chat, format!("📊 A2A usage: {}", alert.text()))
        };
        if let Err(err) = self.api.send_message(target, &text, &self.cancel).await {
            tracing::warn!(error = %err, "could not tell the owner of a usage alert in Telegram (it is in the log)");
        }
    }
}
