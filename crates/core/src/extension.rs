//! Extensions: how a host adds tools, prompt fragments, listeners, secrets and tool gates to a
//! session, and the per-session [`EventBus`] for custom events (the A2A server emits
//! `a2a.inbound` on it).
//!
//! Extensions are plain Rust values handed to the factory (host defaults) or to one session
//! (`SessionOptions::extensions`); nothing is loaded from disk, because the workspace is writable
//! by the agent and by A2A callers' sessions.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::broadcast;

use crate::provider::ModelRequest;
use crate::redact::{Secret, SecretSource};
use crate::session::SessionEvent;
use crate::tool::Tool;

/// Something that adds behaviour to a session when it is opened.
pub trait Extension: Send + Sync {
    /// A short name for logs.
    fn name(&self) -> &str;

    /// Called once when a session is opened or resumed.
    fn register(&self, registrar: &mut Registrar);
}

/// A listener on a session's events. Called in registration order, before subscribers see the
/// event, on the run's task: it must not block.
pub type Listener = Arc<dyn Fn(&SessionEvent) + Send + Sync>;

/// A check every tool call of a session's runs passes before its tool executes: it may hold the
/// call (for example while the owner decides) and then allows or refuses it.
///
/// The run asks a session's gates in registration order, after the call's `ToolStart` event and
/// once the tool is known; the first refusal wins and later gates are not asked. A refused call
/// does not run: the model gets an error result, `not executed: <reason>`, and the run goes on.
/// A gate that panics refuses with a fixed reason and the panic is logged.
#[async_trait::async_trait]
pub trait ToolGate: Send + Sync {
    /// Decides about one call.
    ///
    /// # Cancel safety
    /// When the run is aborted the future is dropped at whatever await it is at, and the call
    /// does not run: a gate must not rely on being polled to the end.
    async fn check(&self, call: &GateCall) -> GateDecision;
}

/// A check before each model call of a session's runs (for example the owner's daily spending
/// caps): it may hold the call until there is room for it, keeps what it needs while the call
/// runs (a [`ModelHold`]), and a refusal ends the run before the call is made, failed with the
/// reason.
///
/// The run asks a session's model gates in registration order before every attempt of a model
/// call (its retries after a provider failure too: each is billed on its own), once the request
/// is built; the first refusal wins, and the holds of the gates that admitted it are dropped at
/// once.
#[async_trait::async_trait]
pub trait ModelGate: Send + Sync {
    /// Decides about the call that would send `request`: `Ok(hold)` lets it be made, and the
    /// run keeps `hold` until the call has ended (see [`ModelHold`]); `Err(reason)` stops the
    /// run, and `reason` becomes its failure text ([`crate::RunFailure::Stopped`]), shown to
    /// whoever waits for the run after redaction.
    ///
    /// # Cancel safety
    /// When the run is aborted the future is dropped at whatever await it is at, and no call is
    /// made: a gate must not rely on being polled to the end.
    async fn admit(&self, request: &ModelRequest) -> Result<ModelHold, String>;
}

/// What a [`ModelGate`] keeps while the call it admitted runs (for example room reserved under
/// a budget). The run drops it once that attempt has ended and its usage has reached the
/// session's listeners (`MessageEnd`), before any wait for a retry, or when the run stops before
/// making the call; dropping it is how the gate learns that the call is over.
pub struct ModelHold(Option<Box<dyn Send + Sync>>);

impl ModelHold {
    /// Nothing to keep.
    pub fn none() -> Self {
        ModelHold(None)
    }

    /// Keeps `value` until the call has ended, then drops it.
    pub fn new(value: impl Send + Sync + 'static) -> Self {
        ModelHold(Some(Box::new(value)))
    }
}

impl std::fmt::Debug for ModelHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "ModelHold(..)" } else { "ModelHold(none)" })
    }
}

/// A tool call as a [`ToolGate`] sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct GateCall {
    /// The model's id for the call (also on its `ToolStart` and `ToolEnd` events).
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model gave them, not redacted: a gate that shows them to anyone
    /// redacts them first (with the session's redactor).
    pub args: Value,
}

/// What a [`ToolGate`] decided about a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateDecision {
    /// The call may run, as far as this gate is concerned.
    Allow,
    /// The call does not run; `reason` goes to the model verbatim (after redaction).
    Refuse { reason: String },
}

/// What an extension can add to a session.
pub struct Registrar {
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    pub(crate) fragments: Vec<String>,
    pub(crate) listeners: Vec<Listener>,
    pub(crate) gates: Vec<Arc<dyn ToolGate>>,
    pub(crate) model_gates: Vec<Arc<dyn ModelGate>>,
    pub(crate) secrets: Vec<Secret>,
    pub(crate) secret_sources: Vec<Arc<dyn SecretSource>>,
    bus: EventBus,
}

impl Registrar {
    pub(crate) fn new(bus: EventBus) -> Self {
        Registrar {
            tools: Vec::new(),
            fragments: Vec::new(),
            listeners: Vec::new(),
            gates: Vec::new(),
            model_gates: Vec::new(),
            secrets: Vec::new(),
            secret_sources: Vec::new(),
            bus,
        }
    }

    /// Adds a tool. A tool with the name of an earlier one replaces it.
    pub fn tool(&mut self, tool: Arc<dyn Tool>) {
        self.tools.push(tool);
    }

    /// Adds a section to the end of the system prompt.
    pub fn prompt_fragment(&mut self, text: impl Into<String>) {
        self.fragments.push(text.into());
    }

    /// Adds a listener on every session event.
    pub fn listener(&mut self, listener: Listener) {
        self.listeners.push(listener);
    }

    /// Adds a gate every tool call must pass before it runs (see [`ToolGate`]); gates are asked
    /// in the order they were added.
    pub fn tool_gate(&mut self, gate: Arc<dyn ToolGate>) {
        self.gates.push(gate);
    }

    /// Adds a check every model call must pass (see [`ModelGate`]); gates are asked in the
    /// order they were added.
    pub fn model_gate(&mut self, gate: Arc<dyn ModelGate>) {
        self.model_gates.push(gate);
    }

    /// Adds values to redact wherever the session writes (for example caller keys).
    pub fn secret(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.secrets.push(Secret { name: name.into(), value: value.into() });
    }

    /// Adds values to redact that can change while the session is open (for example the keys
    /// of a callers.json): the session asks `source` before each use of its redactor.
    pub fn secret_source(&mut self, source: Arc<dyn SecretSource>) {
        self.secret_sources.push(source);
    }

    /// The session's event bus.
    pub fn bus(&self) -> &EventBus {
        &self.bus
    }
}

/// A custom event on a session's bus.
#[derive(Debug, Clone, PartialEq)]
pub struct BusEvent {
    pub topic: String,
    pub data: Value,
}

type Handler = Arc<dyn Fn(&BusEvent) + Send + Sync>;

/// A per-session bus for custom events between extensions and the host.
#[derive(Clone)]
pub struct EventBus {
    inner: Arc<BusInner>,
}

struct BusInner {
    handlers: Mutex<Vec<(String, Handler)>>,
    sender: broadcast::Sender<BusEvent>,
}

/// Events an async bus subscriber may have queued before it lags.
const BUS_CAPACITY: usize = 256;

impl Default for EventBus {
    fn default() -> Self {
        let (sender, _) = broadcast::channel(BUS_CAPACITY);
        EventBus { inner: Arc::new(BusInner { handlers: Mutex::new(Vec::new()), sender }) }
    }
}

impl EventBus {
    /// Publishes an event: handlers of the topic run first (in order), then async subscribers get it.
    pub fn emit(&self, topic: &str, data: Value) {
        let event = BusEvent { topic: topic.to_string(), data };
        let handlers: Vec<Handler> = self
            .inner
            .handlers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(t, _)| t == topic)
            .map(|(_, h)| h.clone())
            .collect();
        for handler in handlers {
            handler(&event);
        }
        // No receiver is fine: nobody listens to this topic asynchronously.
        let _ = self.inner.sender.send(event);
    }

    /// Calls `handler` for every event of `topic`.
    pub fn on(&self, topic: &str, handler: impl Fn(&BusEvent) + Send + Sync + 'static) {
        self.inner
            .handlers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((topic.to_string(), Arc::new(handler)));
    }

    /// An async subscription to every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<BusEvent> {
        self.inner.sender.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bus_delivers_to_handlers_and_subscribers() {
        let bus = EventBus::default();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        bus.on("a2a.inbound", move |e| sink.lock().unwrap().push(e.data.clone()));
        let mut rx = bus.subscribe();
        bus.emit("a2a.inbound", serde_json::json!({"hops": 1}));
        bus.emit("other", serde_json::json!(2));
        assert_eq!(*seen.lock().unwrap(), vec![serde_json::json!({"hops": 1})]);
        assert_eq!(rx.recv().await.unwrap().topic, "a2a.inbound");
        assert_eq!(rx.recv().await.unwrap().topic, "other");
    }
}
