//! A running host over a fake Bot API, temp workspaces and the Faux provider.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use volcanic_a2a::A2aOptions;
use volcanic_core::SessionFactory;
use volcanic_core::provider::faux::FauxProvider;
use volcanic_telegram::config::Backoff;
use volcanic_telegram::{BotToken, CallbackHandler, TelegramConfig, TelegramHost};
use volcanic_test_support::telegram::{FakeBotApi, SentMessage};

/// Every wait in these tests is bounded by this.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub const TOKEN: &str = "123456:AAE-test-token-sekrit";
pub const OWNER: i64 = 4711;
pub const OTHER_OWNER: i64 = 5000;
pub const STRANGER: i64 = 999;
/// An allowed supergroup (`Setup::groups`), and one that is not.
pub const GROUP: i64 = -1_001_234_567;
pub const OTHER_GROUP: i64 = -1_009_999_999;

/// How a test host is set up.
pub struct Setup {
    pub allowed: Vec<i64>,
    /// Allowed groups (`Telegram__AllowedGroupIds`).
    pub groups: Vec<i64>,
    pub a2a: bool,
    pub queue_capacity: usize,
    /// Point the host at this URL instead of a fresh fake (the test starts the fake itself).
    pub api_url: Option<String>,
    /// Changes to the settings after the test defaults.
    pub configure: Option<fn(&mut TelegramConfig)>,
    /// The Bot API call timeout, when not the default.
    pub call_timeout: Option<Duration>,
    /// Where button presses go.
    pub callbacks: Option<Arc<dyn CallbackHandler>>,
    /// The workspace root and state folder of a host that ran before (what [`Bot::stop`]
    /// returns), for a restart; fresh ones when `None`.
    pub dirs: Option<(tempfile::TempDir, tempfile::TempDir)>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            allowed: vec![OWNER],
            groups: Vec::new(),
            a2a: false,
            queue_capacity: 20,
            api_url: None,
            configure: None,
            call_timeout: None,
            callbacks: None,
            dirs: None,
        }
    }
}

pub struct Bot {
    pub api: Option<FakeBotApi>,
    pub root: tempfile::TempDir,
    pub state: tempfile::TempDir,
    pub faux: Arc<FauxProvider>,
    /// `http://127.0.0.1:PORT` of the A2A server, when enabled.
    pub a2a_url: Option<String>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<volcanic_telegram::Result<()>>,
}

impl Bot {
    pub async fn start() -> Bot {
        Bot::with(Setup::default()).await
    }

    pub async fn with(setup: Setup) -> Bot {
        let (api, url) = match setup.api_url {
            Some(url) => (None, url),
            None => {
                let api = FakeBotApi::start(TOKEN).await;
                let url = api.url.clone();
                (Some(api), url)
            }
        };
        let (root, state) = match setup.dirs {
            Some(dirs) => dirs,
            None => (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()),
        };
        let faux = Arc::new(FauxProvider::new());
        let shutdown = CancellationToken::new();
        let factory = Arc::new(
            SessionFactory::builder(faux.clone(), state.path())
                .secret("Telegram__BotToken", TOKEN)
                // As the CLI does: the token's secret part alone is the token too.
                .secret("Telegram__BotToken", TOKEN.split_once(':').unwrap().1)
                .shutdown(shutdown.clone())
                .build(),
        );
        let mut config = TelegramConfig::new(
            BotToken::new(TOKEN),
            setup.allowed,
            root.path().to_path_buf(),
            state.path().to_path_buf(),
        );
        config.api_url = url;
        config.allowed_groups = setup.groups;
        config.poll_timeout = Duration::from_secs(2);
        config.backoff =
            Backoff { base: Duration::from_millis(20), cap: Duration::from_millis(200) };
        config.edit_interval = Duration::from_millis(50);
        config.typing_interval = Duration::from_millis(500);
        config.queue_capacity = setup.queue_capacity;
        if let Some(timeout) = setup.call_timeout {
            config.call_timeout = timeout;
        }
        if let Some(configure) = setup.configure {
            configure(&mut config);
        }
        let mut builder = TelegramHost::builder(config, factory).shutdown(shutdown.clone());
        if let Some(handler) = setup.callbacks {
            builder = builder.callback_handler(handler);
        }
        let mut a2a_url = None;
        if setup.a2a {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            a2a_url = Some(format!("http://{}", listener.local_addr().unwrap()));
            let options = A2aOptions { allow_private_push_urls: true, ..A2aOptions::default() };
            builder = builder.a2a(options, listener);
        }
        let host = builder.build().unwrap();
        let task = tokio::spawn(host.run());
        Bot { api, root, state, faux, a2a_url, shutdown, task }
    }

    pub fn api(&self) -> &FakeBotApi {
        self.api.as_ref().expect("a fake started by the support code")
    }

    pub fn workspace(&self, chat_id: i64) -> PathBuf {
        self.root.path().join(chat_id.to_string())
    }

    /// Whether the host is still running.
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    /// Waits for a message to `chat_id` whose text satisfies `check`.
    pub async fn message(&self, chat_id: i64, check: impl Fn(&str) -> bool) -> SentMessage {
        self.api().wait_for_message(chat_id, DEADLINE, |m| check(&m.text)).await
    }

    /// Waits for the host to end on its own (no shutdown asked); its result.
    pub async fn ended(self) -> volcanic_telegram::Result<()> {
        tokio::time::timeout(DEADLINE, self.task).await.unwrap().unwrap()
    }

    /// Stops the host; it must exit cleanly. Returns the workspace root and the state folder,
    /// for a look at the files afterwards.
    pub async fn stop(self) -> (tempfile::TempDir, tempfile::TempDir) {
        self.shutdown.cancel();
        let result = tokio::time::timeout(DEADLINE, self.task).await.unwrap().unwrap();
        assert!(result.is_ok(), "{result:?}");
        (self.root, self.state)
    }
}

/// A `faux>` directive line.
pub fn directive(steps: Value) -> String {
    format!("faux> {}", json!({ "steps": steps }))
}

/// A JSON-RPC SendMessage with one text part; returns (HTTP status, body).
pub async fn a2a_send(base: &str, key: &str, text: &str) -> (u16, Value) {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {
            "messageId": format!("m-{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()),
            "role": "ROLE_USER", "parts": [{"text": text}],
        }},
    });
    let response = tokio::time::timeout(
        DEADLINE,
        reqwest::Client::new()
            .post(format!("{base}/a2a"))
            .header("X-API-Key", key)
            .header("A2A-Version", "1.0")
            .json(&body)
            .send(),
    )
    .await
    .unwrap()
    .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}
