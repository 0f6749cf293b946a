//! The `send` tool: a file and/or a text to the person or agent on the other side of the
//! session's [`ChatChannel`](crate::channel::ChatChannel).
//!
//! Sessions register it only when they have a channel; without one it answers with an error
//! result instead of failing the run.

use std::io::ErrorKind;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolOutput, parse_args};
use crate::provider::ToolSpec;

/// Sends a file or a text through the chat channel: `send {path?, text?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendTool;

#[derive(Deserialize)]
struct SendArgs {
    path: Option<String>,
    text: Option<String>,
}

#[async_trait::async_trait]
impl Tool for SendTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "send".to_string(),
            description: "Send a file from the workspace and/or a text to the person or agent \
                          you are talking with, right away (your final answer is delivered \
                          anyway; use this for files and for messages that should not wait). \
                          With both, the text is the file's caption. Paths are relative to the \
                          working folder."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to send"},
                    "text": {"type": "string", "description": "Message, or the file's caption"}
                },
                "additionalProperties": false
            }),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: SendArgs = parse_args("send", args)?;
        let Some(channel) = &ctx.channel else {
            return Ok(ToolOutput::error(
                "send is not available: this session has no chat channel",
            ));
        };
        let text = args.text.filter(|text| !text.trim().is_empty());
        match (args.path, text) {
            (None, None) => Err(ToolError("give a path, a text or both".to_string())),
            (None, Some(text)) => Ok(match channel.send_text(&text).await {
                Ok(()) => ToolOutput::text("sent the text")
                    .with_details(json!({"text_chars": text.chars().count()})),
                Err(err) => ToolOutput::error(format!("could not send the text: {err}")),
            }),
            (Some(path), text) => {
                let path = ctx.resolve(&path);
                let shown = ctx.display_path(&path);
                let not_found = |err: std::io::Error| match err.kind() {
                    ErrorKind::NotFound => ToolError(format!("file not found: {shown}")),
                    _ => ToolError(format!("could not read {shown}: {err}")),
                };
                let absolute = tokio::fs::canonicalize(&path).await.map_err(not_found)?;
                let meta = tokio::fs::metadata(&absolute).await.map_err(not_found)?;
                if !meta.is_file() {
                    return Err(ToolError(format!("{shown} is not a regular file")));
                }
                let caption = if text.is_some() { " with its caption" } else { "" };
                Ok(match channel.send_file(&absolute, text.as_deref()).await {
                    Ok(()) => ToolOutput::text(format!("sent {shown}{caption}"))
                        .with_details(json!({"path": shown, "bytes": meta.len()})),
                    Err(err) => ToolOutput::error(format!("could not send {shown}: {err}")),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::channel::ChatChannel;
    use crate::tool::test_context;

    #[derive(Debug, PartialEq)]
    enum Sent {
        Text(String),
        File(PathBuf, Option<String>),
    }

    /// Records what is sent; refuses everything when `refuse` is set.
    #[derive(Default)]
    struct FakeChannel {
        sent: Mutex<Vec<Sent>>,
        refuse: bool,
    }

    #[async_trait::async_trait]
    impl ChatChannel for FakeChannel {
        async fn send_text(&self, text: &str) -> Result<(), String> {
            if self.refuse {
                return Err("chat is gone".to_string());
            }
            self.sent.lock().unwrap().push(Sent::Text(text.to_string()));
            Ok(())
        }

        async fn send_file(&self, path: &Path, caption: Option<&str>) -> Result<(), String> {
            if self.refuse {
                return Err("chat is gone".to_string());
            }
            let sent = Sent::File(path.to_path_buf(), caption.map(str::to_string));
            self.sent.lock().unwrap().push(sent);
            Ok(())
        }
    }

    fn context(dir: &Path, channel: &Arc<FakeChannel>) -> ToolContext {
        let mut ctx = test_context(dir);
        ctx.channel = Some(channel.clone());
        ctx
    }

    #[tokio::test]
    async fn send_text_goes_through_the_channel() {
        let dir = tempfile::tempdir().unwrap();
        let channel = Arc::new(FakeChannel::default());
        let out = SendTool.execute(json!({"text": "hi"}), context(dir.path(), &channel)).await;
        assert_eq!(
            out,
            Ok(ToolOutput::text("sent the text").with_details(json!({"text_chars": 2})))
        );
        assert_eq!(*channel.sent.lock().unwrap(), vec![Sent::Text("hi".to_string())]);
    }

    #[tokio::test]
    async fn send_file_with_text_uses_it_as_caption() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.pdf");
        std::fs::write(&file, "pdf").unwrap();
        let channel = Arc::new(FakeChannel::default());
        let args = json!({"path": "report.pdf", "text": "here it is"});
        let out = SendTool.execute(args, context(dir.path(), &channel)).await;
        assert_eq!(
            out,
            Ok(ToolOutput::text("sent report.pdf with its caption")
                .with_details(json!({"path": "report.pdf", "bytes": 3})))
        );
        assert_eq!(
            *channel.sent.lock().unwrap(),
            vec![Sent::File(file.canonicalize().unwrap(), Some("here it is".to_string()))]
        );
    }

    #[tokio::test]
    async fn send_without_a_channel_is_an_error_result() {
        let dir = tempfile::tempdir().unwrap();
        let out = SendTool.execute(json!({"text": "hi"}), test_context(dir.path())).await;
        assert_eq!(
            out,
            Ok(ToolOutput::error("send is not available: this session has no chat channel"))
        );
    }

    #[tokio::test]
    async fn send_without_path_or_text_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let channel = Arc::new(FakeChannel::default());
        let out = SendTool.execute(json!({"text": " "}), context(dir.path(), &channel)).await;
        assert_eq!(out, Err(ToolError("give a path, a text or both".to_string())));
    }

    #[tokio::test]
    async fn send_missing_file_or_folder_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let channel = Arc::new(FakeChannel::default());
        let missing =
            SendTool.execute(json!({"path": "nope"}), context(dir.path(), &channel)).await;
        assert_eq!(missing, Err(ToolError("file not found: nope".to_string())));
        let folder = SendTool.execute(json!({"path": "sub"}), context(dir.path(), &channel)).await;
        assert_eq!(folder, Err(ToolError("sub is not a regular file".to_string())));
        assert_eq!(*channel.sent.lock().unwrap(), vec![]);
    }

    #[tokio::test]
    async fn send_channel_failure_is_an_error_result() {
        let dir = tempfile::tempdir().unwrap();
        let channel = Arc::new(FakeChannel { refuse: true, ..FakeChannel::default() });
        let out = SendTool.execute(json!({"text": "hi"}), context(dir.path(), &channel)).await;
        assert_eq!(out, Ok(ToolOutput::error("could not send the text: chat is gone")));
    }
}
