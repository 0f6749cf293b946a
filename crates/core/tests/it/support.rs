//! Shared helpers: a factory over a temp state dir, event collection with deadlines, test tools.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use volcanic_core::config::{AgentConfig, RetryConfig};
use volcanic_core::message::ToolResult;
use volcanic_core::provider::faux::FauxProvider;
use volcanic_core::provider::{Provider, ToolSpec};
use volcanic_core::tool::{Tool, ToolContext, ToolControl, ToolError, ToolOutput, ToolStop};
use volcanic_core::{
    EventKind, Extension, Registrar, RunHandle, RunSettled, Session, SessionFactory, SessionOptions,
};

/// Every wait in these tests is bounded by this.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A temp workspace and state dir.
pub struct Dirs {
    pub workspace: tempfile::TempDir,
    pub state: tempfile::TempDir,
}

impl Dirs {
    pub fn new() -> Self {
        Dirs { workspace: tempfile::tempdir().unwrap(), state: tempfile::tempdir().unwrap() }
    }

    pub fn ws(&self) -> &Path {
        self.workspace.path()
    }
}

/// Retries that do not make tests wait.
pub fn fast_config() -> AgentConfig {
    AgentConfig {
        retry: RetryConfig {
            max_retries: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(20),
        },
        ..AgentConfig::default()
    }
}

pub fn factory(dirs: &Dirs, provider: Arc<dyn Provider>) -> SessionFactory {
    SessionFactory::builder(provider, dirs.state.path()).config(fast_config()).build()
}

pub async fn open(factory: &SessionFactory, dirs: &Dirs, scope: &str) -> Session {
    factory.open(SessionOptions::new(scope, dirs.ws())).await.unwrap()
}

pub fn faux() -> Arc<FauxProvider> {
    Arc::new(FauxProvider::new())
}

/// Collects a run's events until it settles.
pub async fn collect(mut handle: RunHandle) -> (Vec<EventKind>, RunSettled) {
    let mut events = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while let Some(event) = handle.events().recv().await {
            events.push(event.kind.clone());
        }
    })
    .await
    .expect("run did not settle in time");
    let settled = tokio::time::timeout(DEADLINE, handle.settled()).await.unwrap();
    (events, settled)
}

/// A `faux>` directive line.
pub fn directive(steps: Value) -> String {
    format!("faux> {}", json!({ "steps": steps }))
}

/// The names of events, for order assertions.
/// The results of a run's tool calls, in the order they ended.
pub fn tool_results(events: &[EventKind]) -> Vec<ToolResult> {
    events
        .iter()
        .filter_map(|e| match e {
            EventKind::ToolEnd { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect()
}

pub fn names(events: &[EventKind]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match e {
            EventKind::RunStart => "run_start",
            EventKind::TurnStart { .. } => "turn_start",
            EventKind::MessageStart { .. } => "message_start",
            EventKind::TextDelta { .. } => "text_delta",
            EventKind::ThinkingDelta { .. } => "thinking_delta",
            EventKind::MessageEnd { .. } => "message_end",
            EventKind::ToolStart { .. } => "tool_start",
            EventKind::ToolUpdate { .. } => "tool_update",
            EventKind::ToolEnd { .. } => "tool_end",
            EventKind::Retry { .. } => "retry",
            EventKind::Compacted(_) => "compacted",
            EventKind::Settled(_) => "settled",
        })
        .collect()
}

/// A tool that ends the run, like the A2A `request_input`.
pub struct AskTool;

#[async_trait::async_trait]
impl Tool for AskTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ask".into(),
            description: "Ask the caller a question. Ends your turn.".into(),
            parameters: json!({"type": "object", "properties": {"question": {"type": "string"}}}),
        }
    }

    async fn execute(&self, args: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let question = args["question"].as_str().unwrap_or("").to_string();
        Ok(ToolOutput {
            control: ToolControl::EndRun(ToolStop::InputRequired { question }),
            ..ToolOutput::text("question sent; your turn ends now")
        })
    }
}

/// An extension adding [`AskTool`], a prompt fragment and a secret.
pub struct AskExtension;

impl Extension for AskExtension {
    fn name(&self) -> &str {
        "ask"
    }

    fn register(&self, registrar: &mut Registrar) {
        registrar.tool(Arc::new(AskTool));
        registrar.prompt_fragment("# Ask\nUse ask to ask the caller.");
        registrar.secret("caller-key", "caller-key-value-123");
    }
}
