//! The chat channel of a chat's main session: the `send` tool's texts become messages (split at
//! Telegram's limit) and its files become documents.
//!
//! Files leave like texts do, without the session's secrets (the bot token, provider keys): a
//! text file is sent redacted, a binary file holding a secret (or its base64 or percent-encoded
//! form) is refused whole, since redacting it in place would break it. A sandboxed session's
//! files arrive as bytes read inside its sandbox ([`ChatChannel::send_file_bytes`]).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;
use volcanic_core::channel::ChatChannel;
use volcanic_core::redact::Redactor;

use crate::api::{BotApi, UPLOAD_LIMIT};
use crate::render::{self, utf16_len};

/// Telegram's limit on a document caption, in UTF-16 code units.
const CAPTION_LIMIT: usize = 1024;

/// A chat, as the `send` tool's destination.
pub struct TelegramChannel {
    pub api: BotApi,
    pub chat_id: i64,
    pub cancel: CancellationToken,
    /// The session's redactor, set once the session is open (files are refused before).
    pub redactor: OnceLock<Arc<Redactor>>,
}

impl TelegramChannel {
    /// The bytes to upload: redacted text, or the binary as it is when it holds no secret.
    fn clean(&self, bytes: Vec<u8>) -> Result<Vec<u8>, String> {
        let Some(redactor) = self.redactor.get() else {
            return Err("the chat is not ready to take files yet".into());
        };
        match String::from_utf8(bytes) {
            Ok(text) => Ok(redactor.redact(&text).into_owned().into_bytes()),
            Err(err) if redactor.bytes_contain_value(err.as_bytes()) => {
                Err("the file contains a secret (or an encoded form of one) and cannot be sent"
                    .into())
            }
            Err(err) => Ok(err.into_bytes()),
        }
    }
}

#[async_trait::async_trait]
impl ChatChannel for TelegramChannel {
    async fn send_text(&self, text: &str) -> Result<(), String> {
        render::send_text(&self.api, self.chat_id, text, &self.cancel)
            .await
            .map_err(|err| err.to_string())
    }

    async fn send_file(&self, path: &Path, caption: Option<&str>) -> Result<(), String> {
        let size = tokio::fs::metadata(path)
            .await
            .map_err(|e| format!("cannot read the file: {e}"))?
            .len();
        if size > UPLOAD_LIMIT {
            return Err(format!(
                "the file is {size} bytes, larger than the {UPLOAD_LIMIT}-byte limit"
            ));
        }
        let bytes =
            tokio::fs::read(path).await.map_err(|e| format!("cannot read the file: {e}"))?;
        let name =
            path.file_name().map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
        self.send_file_bytes(&name, bytes, caption).await
    }

    async fn send_file_bytes(
        &self,
        name: &str,
        bytes: Vec<u8>,
        caption: Option<&str>,
    ) -> Result<(), String> {
        let bytes = self.clean(bytes)?;
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
