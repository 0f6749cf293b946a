//! The `send` tool: a file and/or a text to the person or agent on the other side of the
//! session's [`ChatChannel`](crate::channel::ChatChannel).
//!
//! Sessions register it only when they have a channel; without one it answers with an error
//! result instead of failing the run.
//!
//! What it sends leaves the session directly, without passing the run loop's redaction, so it
//! redacts the text and caption itself, and it only sends files inside the workspace (symlinks
//! resolved), so a file elsewhere on the host cannot be handed out.
//!
//! A contained session has [`ContainedSendTool`] instead: its tool host reads the file inside
//! the sandbox (so the same view and the same symlink resolution as bash), and the bytes go to
//! the channel's [`send_file_bytes`](crate::channel::ChatChannel::send_file_bytes).

use std::io::ErrorKind;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolOutput, parse_args};
use crate::provider::ToolSpec;
use crate::sandbox::ToolHost;

/// Largest file a contained session's `send` reads out of its sandbox (the channel applies its
/// own, usually smaller, limit to the bytes).
const MAX_CONTAINED_SEND_BYTES: u64 = 64 * 1024 * 1024;

/// What is left to do once the arguments are checked: nothing (the text was sent or an error
/// found), or a file to send.
enum Prepared {
    Done(ToolOutput),
    File { channel: Arc<dyn crate::channel::ChatChannel>, path: String, text: Option<String> },
}

/// Parses the arguments, finds the channel, redacts the text, and sends it when there is no file.
async fn prepare_and_send_text(args: Value, ctx: &ToolContext) -> Result<Prepared, ToolError> {
    let args: SendArgs = parse_args("send", args)?;
    let Some(channel) = &ctx.channel else {
        return Ok(Prepared::Done(ToolOutput::error(
            "send is not available: this session has no chat channel",
        )));
    };
    let text = args
        .text
        .filter(|text| !text.trim().is_empty())
        .map(|text| ctx.redactor.redact(&text).into_owned());
    match (args.path, text) {
        (None, None) => Err(ToolError("give a path, a text or both".to_string())),
        (None, Some(text)) => Ok(Prepared::Done(match channel.send_text(&text).await {
            Ok(()) => ToolOutput::text("sent the text")
                .with_details(json!({"text_chars": text.chars().count()})),
            Err(err) => ToolOutput::error(format!("could not send the text: {err}")),
        })),
        (Some(path), text) => Ok(Prepared::File { channel: channel.clone(), path, text }),
    }
}

/// The file part's result text.
fn sent_file(shown: &str, captioned: bool, bytes: u64) -> ToolOutput {
    let caption = if captioned { " with its caption" } else { "" };
    ToolOutput::text(format!("sent {shown}{caption}"))
        .with_details(json!({"path": shown, "bytes": bytes}))
}

/// `send` of a contained session: the file is read by the session's tool host, in its sandbox.
pub(crate) struct ContainedSendTool {
    pub host: Arc<ToolHost>,
}

#[async_trait::async_trait]
impl Tool for ContainedSendTool {
    fn spec(&self) -> ToolSpec {
        SendTool.spec()
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let (channel, path, text) = match prepare_and_send_text(args, &ctx).await? {
            Prepared::Done(output) => return Ok(output),
            Prepared::File { channel, path, text } => (channel, path, text),
        };
        let (name, shown, bytes) = self.host.read_file(&path, MAX_CONTAINED_SEND_BYTES).await?;
        let size = bytes.len() as u64;
        Ok(match channel.send_file_bytes(&name, bytes, text.as_deref()).await {
            Ok(()) => sent_file(&shown, text.is_some(), size),
            Err(err) => ToolOutput::error(format!("could not send {shown}: {err}")),
        })
    }
}

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
                          working folder, and only files inside it can be sent."
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
        let (channel, path, text) = match prepare_and_send_text(args, &ctx).await? {
            Prepared::Done(output) => return Ok(output),
            Prepared::File { channel, path, text } => (channel, path, text),
        };
        let path = ctx.resolve(&path);
        let shown = ctx.display_path(&path);
        let not_found = |err: std::io::Error| match err.kind() {
            ErrorKind::NotFound => ToolError(format!("file not found: {shown}")),
            _ => ToolError(format!("could not read {shown}: {err}")),
        };
        let absolute = tokio::fs::canonicalize(&path).await.map_err(not_found)?;
        let workspace = tokio::fs::canonicalize(&ctx.cwd)
            .await
            .map_err(|err| ToolError(format!("could not resolve the working folder: {err}")))?;
        if !absolute.starts_with(&workspace) {
            return Ok(ToolOutput::error("can only send files inside the workspace"));
        }
        let meta = tokio::fs::metadata(&absolute).await.map_err(not_found)?;
        if !meta.is_file() {
            return Err(ToolError(format!("{shown} is not a regular file")));
        }
        Ok(match channel.send_file(&absolute, text.as_deref()).await {
            Ok(()) => sent_file(&shown, text.is_some(), meta.len()),
            Err(err) => ToolOutput::error(format!("could not send {shown}: {err}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::channel::ChatChannel;
    use crate::redact::{Redactor, Secret};
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

    #[tokio::test]
    async fn send_text_and_caption_with_a_planted_secret_arrive_redacted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "notes").unwrap();
        let channel = Arc::new(FakeChannel::default());
        let mut ctx = context(dir.path(), &channel);
        let secret = Secret {
            name: "MY_API_TOKEN".to_string(),
            value: "planted-secret-value-42".to_string(),
        };
        ctx.redactor = Arc::new(Redactor::new(vec![secret]));
        let text = json!({"text": "the key is planted-secret-value-42"});
        let sent_text = SendTool.execute(text, ctx.clone()).await;
        let file = json!({"path": "notes.txt", "text": "key: planted-secret-value-42"});
        let sent_file = SendTool.execute(file, ctx).await;
        assert_eq!(
            (sent_text, sent_file),
            (
                Ok(ToolOutput::text("sent the text").with_details(json!({"text_chars": 34}))),
                Ok(ToolOutput::text("sent notes.txt with its caption")
                    .with_details(json!({"path": "notes.txt", "bytes": 5})))
            )
        );
        assert_eq!(
            *channel.sent.lock().unwrap(),
            vec![
                Sent::Text("the key is [REDACTED:MY_API_TOKEN]".to_string()),
                Sent::File(
                    dir.path().join("notes.txt").canonicalize().unwrap(),
                    Some("key: [REDACTED:MY_API_TOKEN]".to_string())
                ),
            ]
        );
    }

    #[tokio::test]
    async fn send_parent_path_outside_the_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(dir.path().join("x"), "outside").unwrap();
        let channel = Arc::new(FakeChannel::default());
        let out = SendTool.execute(json!({"path": "../x"}), context(&workspace, &channel)).await;
        assert_eq!(out, Ok(ToolOutput::error("can only send files inside the workspace")));
        assert_eq!(*channel.sent.lock().unwrap(), vec![]);
    }

    #[tokio::test]
    async fn send_absolute_path_outside_the_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        let outside = dir.path().join("x");
        std::fs::write(&outside, "outside").unwrap();
        let channel = Arc::new(FakeChannel::default());
        let args = json!({"path": outside.display().to_string()});
        let out = SendTool.execute(args, context(&workspace, &channel)).await;
        assert_eq!(out, Ok(ToolOutput::error("can only send files inside the workspace")));
        assert_eq!(*channel.sent.lock().unwrap(), vec![]);
    }

    #[tokio::test]
    async fn send_symlink_pointing_outside_the_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(dir.path().join("secret.txt"), "outside").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), workspace.join("link.txt"))
            .unwrap();
        let channel = Arc::new(FakeChannel::default());
        let out =
            SendTool.execute(json!({"path": "link.txt"}), context(&workspace, &channel)).await;
        assert_eq!(out, Ok(ToolOutput::error("can only send files inside the workspace")));
        assert_eq!(*channel.sent.lock().unwrap(), vec![]);
    }

    #[tokio::test]
    async fn send_file_inside_a_workspace_reached_through_a_symlink_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(workspace.join("plain.txt"), "plain").unwrap();
        std::os::unix::fs::symlink(&workspace, dir.path().join("ws-link")).unwrap();
        let channel = Arc::new(FakeChannel::default());
        let ctx = context(&dir.path().join("ws-link"), &channel);
        let out = SendTool.execute(json!({"path": "plain.txt"}), ctx).await;
        assert_eq!(
            out,
            Ok(ToolOutput::text("sent plain.txt")
                .with_details(json!({"path": "plain.txt", "bytes": 5})))
        );
        assert_eq!(
            *channel.sent.lock().unwrap(),
            vec![Sent::File(workspace.join("plain.txt").canonicalize().unwrap(), None)]
        );
    }
}
