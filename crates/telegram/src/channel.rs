//! The chat channel of a chat's main session: the `send` tool's texts become messages (split at
//! Telegram's limit) and its files become documents.
//!
//! Files leave like texts do, without the session's secrets (the bot token, provider keys),
//! under core's [`FileRule`] with Telegram's upload limit. A sandboxed session's files arrive as
//! bytes read inside its sandbox ([`ChatChannel::send_file_bytes`]).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;
use volcanic_core::channel::{ChatChannel, FileRule};
use volcanic_core::redact::Redactor;

use crate::api::{BotApi, UPLOAD_LIMIT};
use crate::render::{self, utf16_len};

/// Telegram's limit on a document caption, in UTF-16 code units.
const CAPTION_LIMIT: usize = 1024;

/// What a file must pass to become a document.
const FILE_RULE: FileRule =
    FileRule { max_bytes: UPLOAD_LIMIT, limit_name: "Telegram's upload limit" };

/// A chat, as the `send` tool's destination.
pub struct TelegramChannel {
    pub api: BotApi,
    pub chat_id: i64,
    pub cancel: CancellationToken,
    /// The session's redactor, set once the session is open (files are refused before).
    pub redactor: OnceLock<Arc<Redactor>>,
}

#[async_trait::async_trait]
impl ChatChannel for TelegramChannel {
    async fn send_text(&self, text: &str) -> Result<(), String> {
        render::send_text(&self.api, self.chat_id, text, &self.cancel)
            .await
            .map_err(|err| err.to_string())
    }

    async fn send_file(&self, path: &Path, caption: Option<&str>) -> Result<(), String> {
        let (name, bytes) = FILE_RULE.read(path).await?;
        self.send_file_bytes(&name, bytes, caption).await
    }

    async fn send_file_bytes(
        &self,
        name: &str,
        bytes: Vec<u8>,
        caption: Option<&str>,
    ) -> Result<(), String> {
        let Some(redactor) = self.redactor.get() else {
            return Err("the chat is not ready to take files yet".into());
        };
        let bytes = FILE_RULE.clean(redactor, bytes)?;
        // A caption over Telegram's limit would be refused: send it as a message after the file.
        let (caption, follow_up) = match caption {
            Some(text) if utf16_len(text) > CAPTION_LIMIT => (None, Some(text)),
            other => (other, None),
        };
        self.api
            .send_document(self.chat_id, name, bytes, caption, &self.cancel)
            .await
            .map_err(|err| err.to_string())?;
        if let Some(text) = follow_up {
            self.send_text(text).await?;
        }
        Ok(())
    }
}
