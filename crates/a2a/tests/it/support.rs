//! The test server and client helpers.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use volcanic_a2a::auth::{A2aWorkspace, Caller, WorkspaceCallerDirectory};
use volcanic_a2a::{A2aOptions, A2aServer, OwnerNotifier};
use volcanic_core::config::{AgentConfig, RetryConfig};
use volcanic_core::provider::faux::FauxProvider;
use volcanic_core::{EventKind, Extension, Registrar, SessionFactory};
use volcanic_test_support::sse::collect_json;

/// Every wait in these tests is bounded by this.
pub const DEADLINE: Duration = Duration::from_secs(20);

pub const KEY: &str = "k_travel_bot_key_0001";
pub const OTHER_KEY: &str = "k_other_bot_key_0002";

/// Records owner notifications.
#[derive(Default)]
pub struct Notes(pub Mutex<Vec<(String, String)>>);

#[async_trait::async_trait]
impl OwnerNotifier for Notes {
    async fn notify(&self, caller: &Caller, text: &str) -> Result<(), String> {
        self.0.lock().unwrap().push((caller.name.clone(), text.to_string()));
        Ok(())
    }
}

/// Counts the runs of every session (their `RunStart` events).
#[derive(Default)]
pub struct Runs(pub Arc<AtomicUsize>);

impl Extension for Runs {
    fn name(&self) -> &str {
        "run-counter"
    }

    fn register(&self, registrar: &mut Registrar) {
        let runs = self.0.clone();
        registrar.listener(Arc::new(move |event| {
            if matches!(event.kind, EventKind::RunStart) {
                runs.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
}

/// Records usage alerts.
#[derive(Default)]
pub struct Alerts(pub Mutex<Vec<volcanic_a2a::usage::UsageAlert>>);

#[async_trait::async_trait]
impl volcanic_a2a::usage::UsageNotifier for Alerts {
    async fn alert(&self, alert: &volcanic_a2a::usage::UsageAlert) {
        self.0.lock().unwrap().push(alert.clone());
    }
}

/// A push the receiver accepted: (watch id, token, body).
pub type Push = (String, Option<String>, Value);

/// Options of a test server.
pub struct Setup {
    pub notifier: bool,
    pub options: A2aOptions,
    /// Extra workspaces (each gets its own callers.json written by the test).
    pub extra_workspaces: usize,
    /// Install a push handler that knows the watch `known-watch` and records what it gets.
    pub push_receiver: bool,
    /// The server's clock (default: the system's).
    pub clock: Option<volcanic_a2a::usage::Clock>,
    /// The model backend instead of Faux (a fake API on 127.0.0.1).
    pub provider: Option<Arc<dyn volcanic_core::Provider>>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            notifier: true,
            options: A2aOptions::default(),
            extra_workspaces: 0,
            push_receiver: false,
            clock: None,
            provider: None,
        }
    }
}

/// A running server with one workspace (plus extras), the Faux provider and a client.
pub struct TestServer {
    pub base: String,
    pub client: reqwest::Client,
    pub workspace: tempfile::TempDir,
    pub extra: Vec<tempfile::TempDir>,
    pub state: tempfile::TempDir,
    pub faux: Arc<FauxProvider>,
    pub notes: Arc<Notes>,
    /// Runs started so far, of every session.
    pub runs: Arc<AtomicUsize>,
    /// Pushes the receiver accepted.
    pub pushes: Arc<Mutex<Vec<Push>>>,
    /// Usage alerts the owner was sent.
    pub alerts: Arc<Alerts>,
    pub server: A2aServer,
    shutdown: CancellationToken,
    handle: Option<tokio::task::JoinHandle<()>>,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::with(Setup::default()).await
    }

    pub async fn with(setup: Setup) -> Self {
        crate::test_logs::init();
        let workspace = tempfile::tempdir().unwrap();
        let extra: Vec<tempfile::TempDir> =
            (0..setup.extra_workspaces).map(|_| tempfile::tempdir().unwrap()).collect();
        write_callers(workspace.path(), &[("travel-bot", KEY), ("other-bot", OTHER_KEY)]);
        let state = tempfile::tempdir().unwrap();
        Self::start_in(workspace, extra, state, setup).await
    }

    /// Starts a server over existing folders (restart tests).
    pub async fn start_in(
        workspace: tempfile::TempDir,
        extra: Vec<tempfile::TempDir>,
        state: tempfile::TempDir,
        setup: Setup,
    ) -> Self {
        crate::test_logs::init();
        let faux = Arc::new(FauxProvider::new());
        let runs = Runs::default();
        let started = runs.0.clone();
        let shutdown = CancellationToken::new();
        let config = AgentConfig {
            retry: RetryConfig {
                max_retries: 1,
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(5),
            },
            ..AgentConfig::default()
        };
        let provider: Arc<dyn volcanic_core::Provider> = match setup.provider {
            Some(provider) => provider,
            None => faux.clone(),
        };
        let factory = Arc::new(
            SessionFactory::builder(provider, state.path())
                .config(config)
                .extension(Arc::new(runs))
                .shutdown(shutdown.clone())
                .build(),
        );
        let mut workspaces = vec![A2aWorkspace {
            path: workspace.path().to_path_buf(),
            scope_prefix: "test".into(),
            owner_id: "owner-1".into(),
        }];
        for (i, dir) in extra.iter().enumerate() {
            workspaces.push(A2aWorkspace {
                path: dir.path().to_path_buf(),
                scope_prefix: format!("extra{i}"),
                owner_id: format!("owner-{}", i + 2),
            });
        }
        let directory =
            Arc::new(WorkspaceCallerDirectory::new(Arc::new(move || workspaces.clone())));
        let notes = Arc::new(Notes::default());
        // These tests are about the protocol; caller containment is proven against the real
        // binary (crates/cli/tests/it/containment.rs), so tools run unconfined here.
        let mut builder = A2aServer::builder(factory, directory)
            .options(setup.options)
            .containment(volcanic_a2a::Containment::Off);
        if setup.notifier {
            builder = builder.notifier(notes.clone());
        }
        let alerts = Arc::new(Alerts::default());
        builder = builder.usage_notifier(alerts.clone());
        if let Some(clock) = setup.clock {
            builder = builder.clock(clock);
        }
        let pushes: Arc<Mutex<Vec<Push>>> = Arc::default();
        if setup.push_receiver {
            let seen = pushes.clone();
            builder = builder.on_push(Arc::new(
                move |watch: String, token: Option<String>, body: Value| {
                    let seen = seen.clone();
                    Box::pin(async move {
                        if watch != "known-watch" {
                            return false;
                        }
                        seen.lock().unwrap().push((watch, token, body));
                        true
                    })
                },
            ));
        }
        let server = builder.build().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let stop = shutdown.clone();
        let serving = server.clone();
        let handle = tokio::spawn(async move { serving.serve(listener, stop).await.unwrap() });
        TestServer {
            base,
            client: reqwest::Client::new(),
            workspace,
            extra,
            state,
            faux,
            notes,
            runs: started,
            pushes,
            alerts,
            server,
            shutdown,
            handle: Some(handle),
        }
    }

    /// Stops the server and gives its folders back (for a restart).
    pub async fn stop(mut self) -> (tempfile::TempDir, Vec<tempfile::TempDir>, tempfile::TempDir) {
        self.shutdown.cancel();
        if let Some(handle) = self.handle.take() {
            tokio::time::timeout(DEADLINE, handle).await.unwrap().unwrap();
        }
        let TestServer { workspace, extra, state, .. } = self;
        (workspace, extra, state)
    }

    /// The server's `host:port`, for raw connections.
    pub fn addr(&self) -> String {
        self.base.trim_start_matches("http://").to_string()
    }

    /// A raw TCP connection to the server, opened within [`DEADLINE`].
    pub async fn connect(&self) -> tokio::net::TcpStream {
        tokio::time::timeout(DEADLINE, tokio::net::TcpStream::connect(self.addr()))
            .await
            .unwrap()
            .unwrap()
    }

    pub fn ws(&self) -> &Path {
        self.workspace.path()
    }

    /// Every file under the workspace's `inbox/`, by its workspace-relative path, sorted.
    pub fn inbox_files(&self) -> Vec<String> {
        fn walk(root: &Path, at: &Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(at).into_iter().flatten() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(root, &path, found);
                } else {
                    found.push(path.strip_prefix(root).unwrap().to_string_lossy().into_owned());
                }
            }
        }
        let mut found = Vec::new();
        walk(self.ws(), &self.ws().join("inbox"), &mut found);
        found.sort();
        found
    }

    pub fn task_path(&self, task_id: &str) -> PathBuf {
        self.ws().join(".volcanic/a2a/tasks").join(format!("{task_id}.json"))
    }

    /// A JSON-RPC call with a key and `A2A-Version: 1.0`; returns the whole response body.
    pub async fn rpc(&self, key: &str, method: &str, params: Value) -> Value {
        self.rpc_versioned(key, Some("1.0"), method, params).await
    }

    pub async fn rpc_versioned(
        &self,
        key: &str,
        version: Option<&str>,
        method: &str,
        params: Value,
    ) -> Value {
        let mut request = self
            .client
            .post(format!("{}/a2a", self.base))
            .header("X-API-Key", key)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        if let Some(version) = version {
            request = request.header("A2A-Version", version);
        }
        let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
        assert_eq!(response.status(), 200, "{method}");
        response.json().await.unwrap()
    }

    /// A streaming JSON-RPC call: every SSE event's data, parsed, until the stream closes.
    pub async fn rpc_stream(
        &self,
        key: &str,
        version: Option<&str>,
        method: &str,
        params: Value,
    ) -> Vec<Value> {
        let mut request = self
            .client
            .post(format!("{}/a2a", self.base))
            .header("X-API-Key", key)
            .json(&json!({"jsonrpc": "2.0", "id": "s1", "method": method, "params": params}));
        if let Some(version) = version {
            request = request.header("A2A-Version", version);
        }
        let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        collect_json(response, DEADLINE).await
    }

    /// SubscribeToTask over JSON-RPC 1.0: the stream's events, or, for a task that settled
    /// before the subscription arrived, the plain error answer as the one element.
    pub async fn subscribe_or_refusal(&self, key: &str, task_id: &str) -> Vec<Value> {
        let response = self
            .client
            .post(format!("{}/a2a", self.base))
            .header("X-API-Key", key)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": "s1", "method": "SubscribeToTask", "params": {"id": task_id}}));
        let response = tokio::time::timeout(DEADLINE, response.send()).await.unwrap().unwrap();
        if response.headers()["content-type"] == "text/event-stream" {
            return collect_json(response, DEADLINE).await;
        }
        let refusal: Value = response.json().await.unwrap();
        assert_eq!(refusal["error"]["code"], -32004, "{refusal}");
        vec![refusal]
    }

    /// A REST call with `A2A-Version: 1.0`; returns status and body.
    pub async fn rest(
        &self,
        key: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.rest_versioned(key, Some("1.0"), method, path, body).await
    }

    /// A REST call with the given `A2A-Version`, or none; returns status and body.
    pub async fn rest_versioned(
        &self,
        key: &str,
        version: Option<&str>,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .request(method, format!("{}/a2a/v1{path}", self.base))
            .header("Authorization", format!("Bearer {key}"));
        if let Some(version) = version {
            request = request.header("A2A-Version", version);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub async fn rest_stream(&self, key: &str, path: &str, body: Value) -> Vec<Value> {
        self.rest_stream_versioned(key, Some("1.0"), reqwest::Method::POST, path, Some(body)).await
    }

    /// A streaming REST call with the given `A2A-Version`, or none: every SSE event's data.
    pub async fn rest_stream_versioned(
        &self,
        key: &str,
        version: Option<&str>,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Vec<Value> {
        let mut request = self
            .client
            .request(method, format!("{}/a2a/v1{path}", self.base))
            .header("X-API-Key", key);
        if let Some(version) = version {
            request = request.header("A2A-Version", version);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = tokio::time::timeout(DEADLINE, request.send()).await.unwrap().unwrap();
        assert_eq!(response.status(), 200);
        collect_json(response, DEADLINE).await
    }

    /// Sends a message (blocking) and returns the JSON-RPC result.
    pub async fn send(&self, text: &str) -> Value {
        let body = self.rpc(KEY, "SendMessage", send_params(text, None)).await;
        body.get("result").cloned().unwrap_or_else(|| panic!("no result: {body}"))
    }
}

/// SendMessage params for one text part.
pub fn send_params(text: &str, extra: Option<Value>) -> Value {
    let mut message = json!({"messageId": uuid(), "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(Value::Object(extra)) = extra {
        for (k, v) in extra {
            message[k] = v;
        }
    }
    json!({"message": message})
}

pub fn uuid() -> String {
    format!(
        "m-{}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    )
}

/// `text` with each `YYYYmmdd-HHMMSS-` stamp the A2A intake puts before a saved file's name
/// replaced by `<time>-`.
pub fn redact_stamps(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(|c: char| c.is_ascii_digit()) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let is_stamp = from.len() >= 16
            && from.bytes().take(16).enumerate().all(|(i, b)| match i {
                8 | 15 => b == b'-',
                _ => b.is_ascii_digit(),
            });
        let taken = if is_stamp { 16 } else { 1 };
        out.push_str(if is_stamp { "<time>-" } else { &from[..1] });
        rest = &from[taken..];
    }
    out.push_str(rest);
    out
}

/// A `faux>` directive line.
pub fn directive(steps: Value) -> String {
    format!("faux> {}", json!({ "steps": steps }))
}

/// Writes callers.json (see [`volcanic_test_support::callers::write_callers`]) and registers each
/// key as a secret the log check looks for.
pub fn write_callers(workspace: &Path, callers: &[(&str, &str)]) {
    for (_, key) in callers {
        crate::test_logs::register_secret(key);
    }
    volcanic_test_support::callers::write_callers(workspace, callers);
}
