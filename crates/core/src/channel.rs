//! The chat-channel seam: how a session reaches the person or agent on the other side.
//!
//! Hosts implement [`ChatChannel`] (Telegram sends messages into the chat, the A2A server turns
//! sends into task artifacts). A session with a channel gets the `send` tool.

use std::path::Path;

/// Somewhere a session can send texts and files to.
#[async_trait::async_trait]
pub trait ChatChannel: Send + Sync {
    /// Sends a text.
    ///
    /// # Errors
    /// A message for the model saying why it could not be delivered.
    async fn send_text(&self, text: &str) -> Result<(), String>;

    /// Sends a file, with an optional caption. `path` is absolute and exists.
    ///
    /// # Errors
    /// A message for the model saying why it could not be delivered.
    async fn send_file(&self, path: &Path, caption: Option<&str>) -> Result<(), String>;

    /// Sends a file given as its name and bytes, with an optional caption: how a contained
    /// session sends, since its files are read inside its sandbox. The default refuses.
    ///
    /// # Errors
    /// A message for the model saying why it could not be delivered.
    async fn send_file_bytes(
        &self,
        name: &str,
        bytes: Vec<u8>,
        caption: Option<&str>,
    ) -> Result<(), String> {
        let _ = (name, bytes, caption);
        Err("this chat cannot take files from a sandboxed session".to_string())
    }
}
