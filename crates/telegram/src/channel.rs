//! The chat channel of a chat's main session: the `send` tool's texts become messages (split at
//! Telegram's limit) and its files become documents.

use std::path::Path;

use tokio_util::sync::CancellationToken;
use volcanic_core::channel::ChatChannel;

use crate::api::BotApi;
use crate::render::{self, utf16_len};

/// Telegram's limit on a document caption, in UTF-16 code units.
const CAPTION_LIMIT: usize = 1024;

/// A chat, as the `send` tool's destination.
pub struct TelegramChannel {
    pub api: BotApi,
    pub chat_id: i64,
    pub cancel: CancellationToken,
}

#[async_trait::async_trait]
impl ChatChannel for TelegramChannel {
    async fn send_text(&self, text: &str) -> Result<(), String> {
        render::send_text(&self.api, self.chat_id, text, &self.cancel)
            .await
            .map_err(|err| err.to_string())
    }

    async fn send_file(&self, path: &Path, caption: Option<&str>) -> Result<(), String> {
        // A caption over Telegram's limit would be refused: send it as a message after the file.
        let (caption, follow_up) = match caption {
            Some(text) if utf16_len(text) > CAPTION_LIMIT => (None, Some(text)),
            other => (other, None),
        };
        self.api
            .send_document(self.chat_id, path, caption, &self.cancel)
            .await
            .map_err(|err| err.to_string())?;
        if let Some(text) = follow_up {
            self.send_text(text).await?;
        }
        Ok(())
    }
}
