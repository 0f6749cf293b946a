//! `send {path?, text?}`: delivers a workspace file and/or a text to whoever is on the other side
//! of the session's chat channel. Registered only for sessions that have a channel.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolOutput, parse_args};
use crate::provider::ToolSpec;

/// The `send` tool.
pub struct SendTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: Option<String>,
    text: Option<String>,
}

#[async_trait::async_trait]
impl Tool for SendTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "send".into(),
            description: "Send a file from the workspace and/or a text message to the person or \
agent you are talking with. With both, the text is the file's caption."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "A file to send, relative to the workspace"},
                    "text": {"type": "string", "description": "A message to send (the caption when a file is sent)"}
                },
                "additionalProperties": false
            }),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args("send", args)?;
        let channel = ctx
            .channel
            .clone()
            .ok_or_else(|| ToolError("this session has no chat channel to send to".into()))?;
        let text = args.text.filter(|t| !t.trim().is_empty());
        match (args.path, text) {
            (None, None) => Err(ToolError("give a path, a text, or both".into())),
            (None, Some(text)) => {
                channel.send_text(&text).await.map_err(ToolError)?;
                Ok(ToolOutput::text("text sent"))
            }
            (Some(path), caption) => {
                let full = ctx.resolve(&path);
                let meta = tokio::fs::metadata(&full)
                    .await
                    .map_err(|e| ToolError(format!("cannot send {path}: {e}")))?;
                if !meta.is_file() {
                    return Err(ToolError(format!("cannot send {path}: not a regular file")));
                }
                channel.send_file(&full, caption.as_deref()).await.map_err(ToolError)?;
                Ok(ToolOutput::text(format!("sent {path} ({} bytes)", meta.len())))
            }
        }
    }
}
