//! What an A2A session gets on top of a normal one: the `request_input` tool (ends the run; the
//! task becomes input-required), the `notify_owner` tool (only when the host has a notifier), the
//! workspace's secrets as redaction values that follow callers.json and push config changes
//! ([`WorkspaceSecrets`]), and the chat channel that turns `send` into task artifacts.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use volcanic_core::provider::ToolSpec;
use volcanic_core::redact::{Secret, SecretSnapshot, SecretSource};
use volcanic_core::tool::{
    Tool, ToolContext, ToolControl, ToolError, ToolOutput, ToolStop, parse_args,
};
use volcanic_core::{Extension, Registrar};

use crate::auth::{A2aWorkspace, Caller, CallerDirectory, CallerEntry};
use crate::push::secrets::PushSecrets;
use crate::run::live::LiveTask;

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
    /// The workspace's secrets (every plaintext caller key, every push token and credential):
    /// redacted wherever the session writes, and in everything the server sends back.
    pub secrets: Arc<dyn SecretSource>,
    /// Holds calls of the tools the owner approves one by one (callers.json `approveTools`).
    pub gate: Option<Arc<dyn volcanic_core::extension::ToolGate>>,
    /// Counts the model usage of the session's runs, holds room under the daily caps for each
    /// model call while it runs, and stops a run at its next model call once a daily cap is
    /// reached (callers.json `limits`, `A2A__Limits__*`).
    pub meter: Option<Arc<crate::usage::Meter>>,
}

/// The plaintext caller keys of a workspace's callers.json and the push tokens and credentials
/// of its tasks, as a [`SecretSource`]: each snapshot asks the caller directory (one `stat` of
/// callers.json while it is unchanged) and the push registry (a map lookup), and the version
/// moves only when the values did.
pub struct WorkspaceSecrets {
    directory: Arc<dyn CallerDirectory>,
    workspace: Arc<A2aWorkspace>,
    push: Arc<PushSecrets>,
    last: Mutex<LastSnapshot>,
}

#[derive(Default)]
struct LastSnapshot {
    /// The directory's entries the snapshot was made from (the same `Arc` while unchanged).
    callers: Option<Arc<[CallerEntry]>>,
    push_version: u64,
    version: u64,
    secrets: Option<Arc<[Secret]>>,
}

impl WorkspaceSecrets {
    pub(crate) fn new(
        directory: Arc<dyn CallerDirectory>,
        workspace: Arc<A2aWorkspace>,
        push: Arc<PushSecrets>,
    ) -> Self {
        WorkspaceSecrets { directory, workspace, push, last: Mutex::default() }
    }
}

impl SecretSource for WorkspaceSecrets {
    fn snapshot(&self) -> SecretSnapshot {
        let callers = self.directory.entries(&self.workspace);
        let push = self.push.snapshot(&self.workspace.path);
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let unchanged = last.callers.as_ref().is_some_and(|c| Arc::ptr_eq(c, &callers))
            && last.push_version == push.version;
        if !unchanged || last.secrets.is_none() {
            let mut secrets: Vec<Secret> = callers
                .iter()
                .filter_map(|entry| entry.key.plain())
                .map(|key| Secret { name: "a2a-caller-key".into(), value: key.expose().into() })
                .collect();
            secrets.extend(push.secrets.iter().cloned());
            let same = last.secrets.as_ref().is_some_and(|old| {
                old.len() == secrets.len()
                    && old.iter().zip(&secrets).all(|(a, b)| a.name == b.name && a.value == b.value)
            });
            if !same {
                last.version += 1;
                last.secrets = Some(Arc::from(secrets));
            }
            last.callers = Some(callers);
            last.push_version = push.version;
        }
        let secrets = last.secrets.clone().unwrap_or_else(|| Arc::from(Vec::new()));
        SecretSnapshot { version: last.version, secrets }
    }
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
        registrar.secret_source(self.secrets.clone());
        if let Some(gate) = &self.gate {
            registrar.tool_gate(gate.clone());
        }
        if let Some(meter) = &self.meter {
            registrar.model_gate(Arc::new(DailyCaps {
                meter: meter.clone(),
                caller: self.caller.clone(),
            }));
            let (meter, caller) = (meter.clone(), self.caller.clone());
            registrar.listener(Arc::new(move |event: &volcanic_core::SessionEvent| {
                if let volcanic_core::EventKind::MessageEnd { message, .. } = &event.kind
                    && let volcanic_core::message::Message::Assistant(answer) = &**message
                {
                    meter.record(&caller.workspace, &caller.name, &answer.model, &answer.usage);
                }
                // A compaction's summary call is billed like an answer (it has no `MessageEnd`).
                if let volcanic_core::EventKind::Compacted(compacted) = &event.kind
                    && !compacted.usage.is_empty()
                {
                    meter.record(
                        &caller.workspace,
                        &caller.name,
                        &compacted.model,
                        &compacted.usage,
                    );
                }
            }));
        }
    }
}

/// Stops a caller's run before a model call once one of its daily caps is reached, and holds
/// room under the caps while the call runs, so calls made at once cannot together run far past
/// them (a call waits while there is too little).
struct DailyCaps {
    meter: Arc<crate::usage::Meter>,
    caller: Caller,
}

#[async_trait::async_trait]
impl volcanic_core::extension::ModelGate for DailyCaps {
    async fn admit(
        &self,
        request: &volcanic_core::provider::ModelRequest,
    ) -> Result<volcanic_core::extension::ModelHold, String> {
        use volcanic_core::extension::ModelHold;
        match self.meter.reserve(&self.caller, request).await {
            Ok(Some(reservation)) => Ok(ModelHold::new(reservation)),
            Ok(None) => Ok(ModelHold::none()),
            Err(exhausted) => Err(exhausted.reason),
        }
    }
}

/// `request_input {question}`.
struct RequestInputTool;

/// The tool's name, as the model sees it. It ends the run with
/// [`ToolStop::InputRequired`], which the run driver makes the task's input-required state.
const REQUEST_INPUT: &str = "request_input";

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
            control: ToolControl::EndRun(ToolStop::InputRequired { question: args.question }),
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

    /// The task now running.
    ///
    /// # Errors
    /// When none is.
    pub(crate) fn target(&self) -> Result<Arc<LiveTask>, String> {
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
        let (name, bytes) = self.file_rule().read(path).await?;
        self.send_file_bytes(&name, bytes, caption).await
    }

    async fn send_file_bytes(
        &self,
        name: &str,
        bytes: Vec<u8>,
        caption: Option<&str>,
    ) -> Result<(), String> {
        let task = self.target()?;
        let bytes = self.file_rule().clean(&task.redactor(), bytes)?;
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
    /// What a file must pass to become an artifact: `A2A__MaxFileBytes`, and core's redaction.
    fn file_rule(&self) -> volcanic_core::channel::FileRule {
        volcanic_core::channel::FileRule {
            max_bytes: self.max_file_bytes,
            limit_name: "A2A__MaxFileBytes",
        }
    }
}
