//! `[a2a]` (`A2A__*`): the A2A server's settings, its callers' sandbox, the card and card
//! signing, turned into `volcanic_a2a::A2aOptions` (docs/configuration.md, "A2A").

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, opt_duration, string_list, usage};

/// The A2A server (`[a2a]`, `A2A__*`); defaults live in `volcanic_a2a::A2aOptions`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct A2aSettings {
    /// Whether the Telegram host mounts the A2A endpoints (`volcanic serve` always does).
    pub enabled: bool,
    /// Where the Telegram host listens when enabled; unset = `0.0.0.0:8080`.
    pub listen: Option<String>,
    pub public_url: Option<String>,
    pub max_hops: Option<u32>,
    #[serde(default, deserialize_with = "opt_duration")]
    pub session_idle_timeout: Option<Duration>,
    pub max_open_sessions: Option<usize>,
    pub max_sessions_per_caller: Option<usize>,
    pub max_file_bytes: Option<u64>,
    pub allow_private_push_urls: Option<bool>,
    pub extra_ca_certificates: Option<PathBuf>,
    #[serde(default, deserialize_with = "opt_duration")]
    pub header_read_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "opt_duration")]
    pub body_read_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "opt_duration")]
    pub idle_connection_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "opt_duration")]
    pub write_stall_timeout: Option<Duration>,
    pub max_connections: Option<usize>,
    pub max_unauthenticated_connections_per_peer: Option<usize>,
    pub max_requests_per_caller: Option<usize>,
    pub max_streams_per_caller: Option<usize>,
    pub max_connections_per_caller: Option<usize>,
    pub max_header_bytes: Option<usize>,
    pub max_inbox_bytes: Option<u64>,
    pub max_inbox_bytes_per_caller: Option<u64>,
    pub max_tasks: Option<usize>,
    pub task_cache_bytes: Option<usize>,
    pub push_max_attempts: Option<u32>,
    #[serde(default, deserialize_with = "opt_duration")]
    pub push_max_age: Option<Duration>,
    pub push_max_pending_per_webhook: Option<usize>,
    pub push_max_pending_bytes: Option<u64>,
    /// How long an accepted `messageId` is remembered for safe retries; zero remembers none.
    #[serde(default, deserialize_with = "opt_duration")]
    pub retry_window: Option<Duration>,
    pub retry_records_per_caller: Option<usize>,
    /// Longest a GetTask with `currentGeneration` waits for its task to move; zero waits not.
    #[serde(default, deserialize_with = "opt_duration")]
    pub max_generation_wait: Option<Duration>,
    /// How long a task waits for the owner's approval before it is rejected.
    #[serde(default, deserialize_with = "opt_duration")]
    pub approval_timeout: Option<Duration>,
    /// Most bytes of messages kept for requests waiting for the owner's approval.
    pub max_pending_approval_bytes: Option<u64>,
    pub card: CardSettings,
    pub card_signing: CardSigningSettings,
    /// `[a2a.retention]`, `A2A__Retention__*`: what is removed in the background.
    pub retention: RetentionSettings,
    pub sandbox: SandboxSettings,
    /// `[a2a.limits]`, `A2A__Limits__*`: caps over all callers of a workspace, the day's zone.
    pub limits: usage::LimitsSettings,
    /// `[a2a.prices]`, `A2A__Prices`: US dollars per million tokens, per model.
    #[serde(deserialize_with = "usage::prices")]
    pub prices: std::collections::BTreeMap<String, usage::PriceSettings>,
}

/// `[a2a.retention]`, `A2A__Retention__*`: old settled tasks, their sessions and inbox files,
/// and the size cap of callers' records (docs/a2a.md, "Retention").
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionSettings {
    /// Whether retention runs; default true.
    pub enabled: Option<bool>,
    /// Settled tasks older than this many days are removed; 0 keeps them forever; default 90.
    pub task_days: Option<u64>,
    /// Most bytes of callers' session folders and inbox files per workspace; 0 = no cap;
    /// default 2 GiB.
    pub max_bytes: Option<u64>,
    /// Time between rounds; default 1 h.
    #[serde(default, deserialize_with = "opt_duration")]
    pub interval: Option<Duration>,
}

impl RetentionSettings {
    /// Applies these settings to `options`.
    fn apply(
        &self,
        options: &mut volcanic_a2a::retention::RetentionOptions,
    ) -> Result<(), ConfigError> {
        /// Longest `TaskDays` taken: about 100 years, far inside what a timestamp can count back.
        const MAX_DAYS: u64 = 36_500;
        if let Some(v) = self.enabled {
            options.enabled = v;
        }
        match self.task_days {
            Some(0) => options.task_age = None,
            Some(days) if days > MAX_DAYS => {
                return Err(ConfigError(format!(
                    "a2a.retention.task_days: at most {MAX_DAYS} days (0 keeps tasks forever), got {days}"
                )));
            }
            Some(days) => options.task_age = Some(Duration::from_secs(days * 24 * 60 * 60)),
            None => {}
        }
        match self.max_bytes {
            Some(0) => options.max_bytes = None,
            Some(bytes) => options.max_bytes = Some(bytes),
            None => {}
        }
        if let Some(v) = self.interval {
            if v < Duration::from_secs(1) {
                return Err(ConfigError("a2a.retention.interval: must be at least 1s".into()));
            }
            options.interval = v;
        }
        Ok(())
    }
}

/// `[a2a.card_signing]`, `A2A__CardSigning__*`: the signed 1.0 cards (docs/a2a.md, "Signed card").
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CardSigningSettings {
    /// Whether the 1.0 cards are signed; default true.
    pub enabled: Option<bool>,
    /// An Ed25519 private key (PKCS#8 PEM) to sign with; default `<state dir>/a2a/card-signing-key.pem`,
    /// created on first start.
    pub key_file: Option<PathBuf>,
}

/// `[a2a.sandbox]`, `A2A__Sandbox__*`: how callers' tools are contained (docs/security.md).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSettings {
    /// `on` (default): callers' tools run in a bubblewrap sandbox, and when none can be had
    /// callers get tier chat. `off`: the owner's explicit opt-out, tools run unconfined.
    pub mode: SandboxMode,
    /// The bubblewrap program; default `bwrap` (looked up in `PATH`).
    pub bwrap: Option<PathBuf>,
    /// Workspace paths hidden from callers (a list in the file, comma-separated in the env).
    #[serde(deserialize_with = "string_list")]
    pub hide: Vec<String>,
    /// Whether callers may change PERSONA.md, MEMORY.md, AGENTS.md and CLAUDE.md. Default false.
    pub writable_context: bool,
    /// Host paths callers' sandboxes see read-only besides the system folders.
    #[serde(deserialize_with = "string_list")]
    pub read_only_paths: Vec<String>,
    /// Size cap of each of a sandbox's private `/tmp` and `/dev/shm`, in bytes; default 64 MiB.
    pub tmp_bytes: Option<u64>,
    /// Most processes and threads in one caller's sandbox; default 256.
    pub max_processes: Option<u64>,
    /// Most memory of one caller's sandbox, in bytes, where a memory cgroup can be had;
    /// default 1 GiB.
    pub memory_bytes: Option<u64>,
    /// Variables of the server's environment callers' tools get besides `PATH`, `LANG`, `TZ`,
    /// `HOME` and `TERM` (a list in the file, comma-separated in the env). Default none.
    #[serde(deserialize_with = "string_list")]
    pub allow_env: Vec<String>,
}

/// `a2a.sandbox.mode`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    #[default]
    On,
    Off,
}

/// `[a2a.card]`, `A2A__Card__*`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CardSettings {
    pub name: Option<String>,
    pub description: Option<String>,
}

impl A2aSettings {
    /// The server's options with these overrides applied.
    pub fn to_options(&self) -> Result<volcanic_a2a::A2aOptions, ConfigError> {
        let mut options = volcanic_a2a::A2aOptions::default();
        if let Some(url) = &self.public_url {
            let trimmed = url.trim().trim_end_matches('/');
            if !(trimmed.starts_with("https://") || trimmed.starts_with("http://")) {
                return Err(ConfigError(format!(
                    "a2a.public_url: expected an http(s) URL, got {url:?}"
                )));
            }
            options.public_url = Some(trimmed.to_string());
        }
        if let Some(v) = self.max_hops {
            options.max_hops = v;
        }
        if let Some(v) = self.session_idle_timeout {
            if v.is_zero() {
                return Err(ConfigError(
                    "a2a.session_idle_timeout: must be longer than zero".into(),
                ));
            }
            options.session_idle_timeout = v;
        }
        for (key, value, option) in [
            ("a2a.max_open_sessions", self.max_open_sessions, &mut options.max_open_sessions),
            (
                "a2a.max_sessions_per_caller",
                self.max_sessions_per_caller,
                &mut options.max_sessions_per_caller,
            ),
        ] {
            if let Some(v) = value {
                if v == 0 {
                    return Err(ConfigError(format!("{key}: must be at least 1, got 0")));
                }
                *option = v;
            }
        }
        if let Some(v) = self.max_file_bytes {
            options.max_file_bytes = v;
        }
        if let Some(v) = self.allow_private_push_urls {
            options.allow_private_push_urls = v;
        }
        if let Some(v) = &self.extra_ca_certificates {
            options.extra_ca_certificates = Some(v.clone());
        }
        if let Some(v) = self.card_signing.enabled {
            options.card_signing = v;
        }
        if let Some(v) = &self.card_signing.key_file {
            options.card_signing_key_file = Some(v.clone());
        }
        let timeouts = [
            ("header_read_timeout", self.header_read_timeout, &mut options.header_read_timeout),
            ("body_read_timeout", self.body_read_timeout, &mut options.body_read_timeout),
            (
                "idle_connection_timeout",
                self.idle_connection_timeout,
                &mut options.idle_connection_timeout,
            ),
            ("write_stall_timeout", self.write_stall_timeout, &mut options.write_stall_timeout),
        ];
        for (key, value, slot) in timeouts {
            if let Some(v) = value {
                if v.is_zero() {
                    return Err(ConfigError(format!("a2a.{key}: must be longer than zero")));
                }
                *slot = v;
            }
        }
        let counts = [
            ("max_connections", self.max_connections, &mut options.max_connections),
            (
                "max_unauthenticated_connections_per_peer",
                self.max_unauthenticated_connections_per_peer,
                &mut options.max_unauthenticated_connections_per_peer,
            ),
            (
                "max_requests_per_caller",
                self.max_requests_per_caller,
                &mut options.max_requests_per_caller,
            ),
            (
                "max_streams_per_caller",
                self.max_streams_per_caller,
                &mut options.max_streams_per_caller,
            ),
            (
                "max_connections_per_caller",
                self.max_connections_per_caller,
                &mut options.max_connections_per_caller,
            ),
            ("max_header_bytes", self.max_header_bytes, &mut options.max_header_bytes),
            ("max_tasks", self.max_tasks, &mut options.max_tasks),
            (
                "push_max_pending_per_webhook",
                self.push_max_pending_per_webhook,
                &mut options.push_max_pending_per_webhook,
            ),
            (
                "retry_records_per_caller",
                self.retry_records_per_caller,
                &mut options.retry_records_per_caller,
            ),
        ];
        for (key, value, slot) in counts {
            if let Some(v) = value {
                if v == 0 {
                    return Err(ConfigError(format!("a2a.{key}: must be at least 1")));
                }
                *slot = v;
            }
        }
        if let Some(v) = self.max_inbox_bytes {
            options.max_inbox_bytes = v;
        }
        if let Some(v) = self.max_inbox_bytes_per_caller {
            options.max_inbox_bytes_per_caller = v;
        }
        if let Some(v) = self.task_cache_bytes {
            options.task_cache_bytes = v;
        }
        if let Some(v) = self.push_max_attempts {
            if v == 0 {
                return Err(ConfigError("a2a.push_max_attempts: must be at least 1".into()));
            }
            options.push_max_attempts = v;
        }
        if let Some(v) = self.push_max_age {
            if v.is_zero() {
                return Err(ConfigError("a2a.push_max_age: must be longer than zero".into()));
            }
            options.push_max_age = v;
        }
        if let Some(v) = self.push_max_pending_bytes {
            options.push_max_pending_bytes = v;
        }
        if let Some(v) = self.max_generation_wait {
            options.max_generation_wait = v;
        }
        if let Some(v) = self.approval_timeout {
            if v.is_zero() {
                return Err(ConfigError("a2a.approval_timeout: must be longer than zero".into()));
            }
            options.approval_timeout = v;
        }
        if let Some(v) = self.max_pending_approval_bytes {
            if v == 0 {
                return Err(ConfigError(
                    "a2a.max_pending_approval_bytes: must be at least 1".into(),
                ));
            }
            options.max_pending_approval_bytes = v;
        }
        if let Some(v) = self.retry_window {
            options.retry_window = v;
        }
        if let Some(v) = &self.card.name {
            options.card_name = v.clone();
        }
        if let Some(v) = &self.card.description {
            options.card_description = v.clone();
        }
        options.usage = usage::to_options(&self.limits, &self.prices)?;
        self.retention.apply(&mut options.retention)?;
        Ok(options)
    }
}
