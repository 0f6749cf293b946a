//! The chat-channel seam: how a session reaches the person or agent on the other side.
//!
//! Hosts implement [`ChatChannel`] (Telegram sends messages into the chat, the A2A server turns
//! sends into task artifacts). A session with a channel gets the `send` tool. Every channel
//! lets a file out under one rule, [`FileRule`], with its own size limit.

use std::path::Path;

use crate::redact::Redactor;

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

/// What a file the session sends must pass before a channel lets it out: at most `max_bytes`;
/// text goes out redacted like any other text; binary data holding a secret (or its base64 or
/// percent-encoded form) is refused whole, since redacting it in place would break it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRule {
    /// The largest file let out, in bytes.
    pub max_bytes: u64,
    /// How the model is told the limit is named (a setting, or the chat service's own limit).
    pub limit_name: &'static str,
}

impl FileRule {
    /// The file at `path` (absolute), read when it is within the size limit: its name and bytes.
    ///
    /// # Errors
    /// A message for the model: the file cannot be read, or is over the limit.
    pub async fn read(&self, path: &Path) -> Result<(String, Vec<u8>), String> {
        let cannot_read = |e: std::io::Error| format!("cannot read the file: {e}");
        self.check_size(tokio::fs::metadata(path).await.map_err(cannot_read)?.len())?;
        let bytes = tokio::fs::read(path).await.map_err(cannot_read)?;
        let name =
            path.file_name().map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
        Ok((name, bytes))
    }

    /// The bytes to let out: text redacted, binary as it is when it holds no secret.
    ///
    /// # Errors
    /// A message for the model: the file is over the limit, or binary holding a secret.
    pub fn clean(&self, redactor: &Redactor, bytes: Vec<u8>) -> Result<Vec<u8>, String> {
        self.check_size(u64::try_from(bytes.len()).unwrap_or(u64::MAX))?;
        match String::from_utf8(bytes) {
            Ok(text) => match redactor.redact(&text) {
                std::borrow::Cow::Owned(redacted) => Ok(redacted.into_bytes()),
                std::borrow::Cow::Borrowed(_) => Ok(text.into_bytes()),
            },
            Err(err) if redactor.bytes_contain_value(err.as_bytes()) => {
                Err("the file contains a secret (or an encoded form of one) and cannot be sent"
                    .into())
            }
            Err(err) => Ok(err.into_bytes()),
        }
    }

    fn check_size(&self, len: u64) -> Result<(), String> {
        if len > self.max_bytes {
            return Err(format!(
                "the file is {len} bytes; the limit is {} ({})",
                self.max_bytes, self.limit_name
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::Secret;

    #[test]
    fn a_file_is_let_out_redacted_refused_with_a_secret_in_binary_or_over_the_limit() {
        let secret = "sk-file-rule-secret-0123456789";
        let redactor = Redactor::new(vec![Secret { name: "KEY".into(), value: secret.into() }]);
        let rule = FileRule { max_bytes: 64, limit_name: "Test__Limit" };
        let text = format!("key: {secret}\n").into_bytes();
        assert_eq!(rule.clean(&redactor, text), Ok(b"key: [REDACTED:KEY]\n".to_vec()));
        let mut binary = vec![0xff, 0x00];
        assert_eq!(rule.clean(&redactor, binary.clone()), Ok(binary.clone()));
        binary.extend_from_slice(secret.as_bytes());
        assert_eq!(
            rule.clean(&redactor, binary),
            Err("the file contains a secret (or an encoded form of one) and cannot be sent".into())
        );
        assert_eq!(
            rule.clean(&redactor, vec![b'a'; 65]),
            Err("the file is 65 bytes; the limit is 64 (Test__Limit)".into())
        );
    }
}
