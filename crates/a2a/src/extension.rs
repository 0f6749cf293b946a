//! What an A2A session gets on top of a normal one: the `request_input` tool (ends the run; the
//! task becomes input-required), the `notify_owner` tool (only when the host has a notifier), the
//! workspace's caller keys as redaction values, and the chat channel that turns `send` into task
//! artifacts.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use volcanic_core::provider::ToolSpec;
use volcanic_core::tool::{Tool, ToolContext, ToolControl, ToolError, ToolOutput, parse_args};
use volcanic_core::{Extension, Registrar};

use crate::auth::Caller;
use crate::live::LiveTask;

/// Reaches an assistant's owner (Telegram: a message in the owner's chat).
#[async_trait::async_trait]
pub trait OwnerNotifier: Send + Sync {
    /// Delivers `text` from `caller` to the owner of the caller's workspace.
    ///
    /// # Errors
    /// Why it could not be delivered (shown to the model).
    async fn notify(&self, caller: &Caller, text: &str) -> Result<(), String>;
}

/// The per-session extension of A2A sessions.
pub struct A2aSessionExtension {
    pub caller: Caller,
    pub notifier: Option<Arc<dyn OwnerNotifier>>,
    /// Keys of every caller of the workspace: redacted wherever the session writes.
    pub keys: Vec<String>,
}

impl Extension for A2aSessionExtension {
    fn name(&self) -> &str {
        "a2a"
    }

    fn register(&self, registrar: &mut Registrar) {
        registrar.tool(Arc::new(RequestInputTool));
        if let Some(notifier) = &self.notifier {
            registrar.tool(Arc::new(NotifyOwnerTool {
                caller: self.caller.clone(),
                notifier: notifier.clone(),
            }));
        }
        for key in &self.keys {
            registrar.secret("a2a-caller-key", key.clone());
        }
    }
}

/// `request_input {question}`.
struct RequestInputTool;

/// The tool name the run mapping looks for.
pub const REQUEST_INPUT: &str = "request_input";

#[async_trait::async_trait]
impl Tool for RequestInputTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: REQUEST_INPUT.into(),
            description:
                "Ask the external agent a question and wait for its answer. Ends your turn; \
their answer arrives as the next message."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {"question": {"type": "string", "description": "The question for the caller"}},
                "required": ["question"],
                "additionalProperties": false
            }),
        }
    }

    async fn execute(&self, args: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        #[derive(serde::Deserialize)]
        struct Args {
            question: String,
        }
        let args: Args = parse_args(REQUEST_INPUT, args)?;
        if args.question.trim().is_empty() {
            return Err(ToolError("the question must not be empty".into()));
        }
        Ok(ToolOutput {
            control: ToolControl::EndRun { data: json!({ "question": args.question }) },
            ..ToolOutput::text(
                "Question sent to the caller. Your turn ends now; their answer will arrive as the next message.",
            )
        })
    }
}

/// `notify_owner {text}`.
struct NotifyOwnerTool {
    caller: Caller,
    notifier: Arc<dyn OwnerNotifier>,
}

#[async_trait::async_trait]
impl Tool for NotifyOwnerTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "notify_owner".into(),
            description: "Send a short message to your owner.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "What to tell your owner"}},
                "required": ["text"],
                "additionalProperties": false
            }),
        }
    }

    async fn execute(&self, args: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        #[derive(serde::Deserialize)]
        struct Args {
            text: String,
        }
        let args: Args = parse_args("notify_owner", args)?;
        self.notifier.notify(&self.caller, &args.text).await.map_err(ToolError)?;
        Ok(ToolOutput::text("delivered"))
    }
}

/// The chat channel of an A2A session: what the agent sends becomes an artifact of the task that
/// is running. Sessions outlive tasks, so the target is switched by the run driver.
#[derive(Default)]
pub struct A2aChatChannel {
    target: Mutex<Option<Arc<LiveTask>>>,
    max_file_bytes: u64,
}

impl A2aChatChannel {
    pub fn new(max_file_bytes: u64) -> Self {
        A2aChatChannel { target: Mutex::new(None), max_file_bytes }
    }

    /// Points the channel at the task now running (or at nothing).
    pub fn set_target(&self, task: Option<Arc<LiveTask>>) {
        *self.target.lock().unwrap_or_else(PoisonError::into_inner) = task;
    }

    fn target(&self) -> Result<Arc<LiveTask>, String> {
        self.target
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| "no task is running to send to".to_string())
    }
}

#[async_trait::async_trait]
impl volcanic_core::channel::ChatChannel for A2aChatChannel {
    async fn send_text(&self, text: &str) -> Result<(), String> {
        let task = self.target()?;
        task.add_artifact(None, vec![a2a::Part::text(text)]).await;
        Ok(())
    }

    async fn send_file(&self, path: &Path, caption: Option<&str>) -> Result<(), String> {
        let meta = tokio::fs::metadata(path).await.map_err(|e| e.to_string())?;
        self.check_size(meta.len())?;
        let bytes = tokio::fs::read(path).await.map_err(|e| e.to_string())?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "file".into());
        self.send_file_bytes(&name, bytes, caption).await
    }

    async fn send_file_bytes(
        &self,
        name: &str,
        bytes: Vec<u8>,
        caption: Option<&str>,
    ) -> Result<(), String> {
        let task = self.target()?;
        self.check_size(bytes.len() as u64)?;
        let media_type =
            mime_guess::from_path(name).first_or_octet_stream().essence_str().to_string();
        let mut parts =
            vec![a2a::Part::raw(bytes).with_filename(name.to_string()).with_media_type(media_type)];
        if let Some(caption) = caption {
            parts.push(a2a::Part::text(caption));
        }
        task.add_artifact(Some(name.to_string()), parts).await;
        Ok(())
    }
}

impl A2aChatChannel {
    /// Refuses a file over `A2A__MaxFileBytes`.
    fn check_size(&self, len: u64) -> Result<(), String> {
        if len > self.max_file_bytes {
            return Err(format!(
                "the file is {len} bytes; the limit is {} (A2A__MaxFileBytes)",
                self.max_file_bytes
            ));
        }
        Ok(())
    }
}
