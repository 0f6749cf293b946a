//! Configuration: a TOML file overridden by environment variables with .NET-style names
//! (`Provider__Kind`, `Agent__MaxTurns`, `A2A__MaxHops`), turned into typed settings.
//!
//! This is the only place that reads configuration; libraries receive the typed structs.
//! Every key is documented in docs/configuration.md.

use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use serde::{Deserialize, Deserializer};
use volcanic_core::config::AgentConfig;

mod a2a;
#[cfg(test)]
mod example;
mod usage;

pub use a2a::{A2aSettings, SandboxMode, SandboxSettings};

/// Sections whose environment variables we read (matched case-insensitively).
const ENV_SECTIONS: &[&str] = &["provider", "agent", "a2a", "telegram"];

/// The name prefixes (upper case) of the variables [`load`] reads, one per section: the owner's
/// sessions never get them (`volcanic_core::exec::ExecEnv::from_host`).
pub const ENV_PREFIXES: &[&str] = &["PROVIDER__", "AGENT__", "A2A__", "TELEGRAM__"];

/// Everything the binary can be configured with.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub provider: ProviderSettings,
    pub agent: AgentSettings,
    pub a2a: A2aSettings,
    pub telegram: TelegramSettings,
}

/// The longest `Telegram__StartupTimeoutSeconds`: a day (0 waits for ever).
const MAX_STARTUP_TIMEOUT_SECONDS: u64 = 86_400;

/// The Telegram host (`[telegram]`, `Telegram__*`); defaults live in
/// `volcanic_telegram::TelegramConfig::new`.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelegramSettings {
    /// The bot token from BotFather. Never printed.
    pub bot_token: Option<String>,
    /// Users served: a TOML array, or comma-separated in `Telegram__AllowedUserIds`; the first
    /// is the owner. Positive ids only.
    #[serde(deserialize_with = "id_list")]
    pub allowed_user_ids: Vec<i64>,
    /// Groups served (`Telegram__AllowedGroupIds`, same forms); negative ids only.
    #[serde(deserialize_with = "id_list")]
    pub allowed_group_ids: Vec<i64>,
    /// Each allowed chat's workspace is `<workspace_root>/<chatId>`.
    pub workspace_root: Option<PathBuf>,
    /// Bot API base URL; unset = `https://api.telegram.org`.
    pub api_url: Option<String>,
    /// Longest `notify_owner` text shown, in characters; unset = 2,000.
    pub notify_max_chars: Option<usize>,
    /// `notify_owner` messages one A2A caller may send per minute; unset = 5.
    pub notify_per_minute: Option<usize>,
    /// Longest a Bot API call may take, in seconds; unset = the library's default.
    pub call_timeout_seconds: Option<u64>,
    /// How long start-up waits for Telegram to answer getMe before it exits, in seconds; 0 waits
    /// for ever; unset = the library's default.
    pub startup_timeout_seconds: Option<u64>,
}

impl std::fmt::Debug for TelegramSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSettings")
            .field("bot_token", &self.bot_token.as_ref().map(|_| "[redacted]"))
            .field("allowed_user_ids", &self.allowed_user_ids)
            .field("allowed_group_ids", &self.allowed_group_ids)
            .field("workspace_root", &self.workspace_root)
            .field("api_url", &self.api_url)
            .field("notify_max_chars", &self.notify_max_chars)
            .field("notify_per_minute", &self.notify_per_minute)
            .field("call_timeout_seconds", &self.call_timeout_seconds)
            .field("startup_timeout_seconds", &self.startup_timeout_seconds)
            .finish()
    }
}

impl TelegramSettings {
    /// The host's settings, with its state folder. Every setting is checked before any answer,
    /// so one run names everything to fix.
    ///
    /// # Errors
    /// Each problem on a line of its own, naming the variable: a missing token, user list or
    /// workspace root, a token not of BotFather's shape, a group id among the users or a user id
    /// among the groups, an API URL that is not http(s), a number out of its range.
    pub fn to_config(
        &self,
        state_dir: &Path,
    ) -> Result<volcanic_telegram::TelegramConfig, ConfigError> {
        let mut problems = Vec::new();
        let token = self.bot_token.as_deref().map(str::trim).filter(|t| !t.is_empty());
        let token = token.map(volcanic_telegram::BotToken::new);
        match &token {
            None => {
                problems.push("Telegram__BotToken: not set (the token BotFather gave you)".into())
            }
            Some(token) => {
                if let Some(problem) = token.shape_problem() {
                    problems.push(format!("Telegram__BotToken: not a bot token: {problem}"));
                }
            }
        }
        if self.allowed_user_ids.is_empty() {
            problems.push(
                "Telegram__AllowedUserIds: not set (comma-separated user ids to serve)".into(),
            );
        }
        if let Some(group) = self.allowed_user_ids.iter().find(|&&id| id <= 0) {
            problems.push(format!(
                "Telegram__AllowedUserIds: {group} is not a user id (groups have negative ids); \
list groups in Telegram__AllowedGroupIds"
            ));
        }
        if let Some(user) = self.allowed_group_ids.iter().find(|&&id| id >= 0) {
            problems.push(format!(
                "Telegram__AllowedGroupIds: {user} is not a group id (group ids are negative); \
list users in Telegram__AllowedUserIds"
            ));
        }
        if self.workspace_root.is_none() {
            problems
                .push("Telegram__WorkspaceRoot: not set (the folder for chat workspaces)".into());
        }
        for (key, value) in [
            ("Telegram__NotifyMaxChars", self.notify_max_chars),
            ("Telegram__NotifyPerMinute", self.notify_per_minute),
        ] {
            if value == Some(0) {
                problems.push(format!("{key}: must be at least 1, got 0"));
            }
        }
        let api_url = self.api_url.as_ref().map(|url| (url, url.trim().trim_end_matches('/')));
        if let Some((url, trimmed)) = api_url
            && !(trimmed.starts_with("https://") || trimmed.starts_with("http://"))
        {
            problems.push(format!("Telegram__ApiUrl: expected an http(s) URL, got {url:?}"));
        }
        if let Some(seconds) = self.call_timeout_seconds
            && !(1..=600).contains(&seconds)
        {
            problems.push(format!(
                "Telegram__CallTimeoutSeconds: expected 1 to 600 seconds, got {seconds}"
            ));
        }
        if let Some(seconds) = self.startup_timeout_seconds
            && seconds > MAX_STARTUP_TIMEOUT_SECONDS
        {
            problems.push(format!(
                "Telegram__StartupTimeoutSeconds: expected 0 (wait for ever) to \
{MAX_STARTUP_TIMEOUT_SECONDS} seconds, got {seconds}"
            ));
        }
        let (Some(token), Some(root), []) = (token, self.workspace_root.clone(), &problems[..])
        else {
            return Err(ConfigError(match &problems[..] {
                [one] => one.clone(),
                many => {
                    format!("{} Telegram settings to fix:\n  {}", many.len(), many.join("\n  "))
                }
            }));
        };
        let mut config = volcanic_telegram::TelegramConfig::new(
            token,
            self.allowed_user_ids.clone(),
            root,
            state_dir.to_path_buf(),
        );
        config.allowed_groups = self.allowed_group_ids.clone();
        if let Some(n) = self.notify_max_chars {
            config.notify_max_chars = n;
        }
        if let Some(n) = self.notify_per_minute {
            config.notify_limit = n;
        }
        if let Some((_, trimmed)) = api_url {
            config.api_url = trimmed.to_string();
        }
        if let Some(seconds) = self.call_timeout_seconds {
            config.call_timeout = Duration::from_secs(seconds);
        }
        if let Some(seconds) = self.startup_timeout_seconds {
            config.startup_timeout = (seconds > 0).then(|| Duration::from_secs(seconds));
        }
        Ok(config)
    }
}

/// Which model backend to use. Keys come from `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` only.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderSettings {
    /// `anthropic`, `openai` or `faux`; unset = inferred from which API key is set.
    pub kind: Option<ProviderKind>,
    /// Model id; unset = the provider's default.
    pub model: Option<String>,
    /// API base URL (for OpenAI-compatible servers: `http://localhost:11434/v1` for Ollama).
    pub base_url: Option<String>,
    /// The model's context window in tokens; unset = the built-in table for the model, else
    /// `volcanic_core::provider::window::DEFAULT_CONTEXT_WINDOW`. With Faux, also the window
    /// Faux simulates.
    pub context_window: Option<u64>,
}

/// A model backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Anthropic,
    Openai,
    Faux,
}

/// Agent loop limits (`[agent]`, `Agent__*`); defaults live in `volcanic_core::config`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentSettings {
    /// Where session journals are kept; unset = `$XDG_STATE_HOME/volcanic` or `~/.local/state/volcanic`.
    pub state_dir: Option<PathBuf>,
    pub max_turns: Option<u32>,
    pub max_output_tokens: Option<u32>,
    pub max_retries: Option<u32>,
    #[serde(default, deserialize_with = "opt_duration")]
    pub bash_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "opt_duration")]
    pub bash_max_timeout: Option<Duration>,
    pub max_output_bytes: Option<usize>,
    pub max_output_lines: Option<usize>,
    /// Environment variables re-admitted for child processes although their names look secret
    /// (a list in the file, comma-separated in `Agent__AllowEnv`).
    #[serde(deserialize_with = "string_list")]
    pub allow_env: Vec<String>,
    /// `[agent.sandbox]`: how the owner's own sessions' tools are contained.
    pub sandbox: OwnerSandboxSettings,
    /// `[agent.compaction]`: when a long conversation is compacted.
    pub compaction: CompactionSettings,
}

/// `[agent.compaction]`, `Agent__Compaction__*`; defaults live in
/// `volcanic_core::config::CompactionConfig`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionSettings {
    /// Whether sessions compact; default true.
    pub enabled: Option<bool>,
    /// Percent of the context window above which a model call compacts first; default 80.
    pub threshold_percent: Option<u8>,
    /// Percent of the window the most recent conversation keeps verbatim; default 25.
    pub keep_recent_percent: Option<u8>,
    /// Old tool results longer than this many bytes are trimmed; default 2,048.
    pub trim_above_bytes: Option<usize>,
}

impl CompactionSettings {
    /// Checks the values against each other and the window.
    ///
    /// # Errors
    /// A share outside 1–100, a recent part not below the threshold, or a window too small to
    /// hold anything, naming the key.
    fn validate(&self, context_window: Option<u64>) -> Result<(), ConfigError> {
        let defaults = volcanic_core::config::CompactionConfig::default();
        let threshold = self.threshold_percent.unwrap_or(defaults.threshold_percent);
        let keep = self.keep_recent_percent.unwrap_or(defaults.keep_recent_percent);
        if !(1..=100).contains(&threshold) {
            return Err(ConfigError(format!(
                "Agent__Compaction__ThresholdPercent: expected 1 to 100, got {threshold}"
            )));
        }
        if keep == 0 || keep >= threshold {
            return Err(ConfigError(format!(
                "Agent__Compaction__KeepRecentPercent: expected 1 to {} (below ThresholdPercent {threshold}), got {keep}",
                threshold - 1
            )));
        }
        if let Some(window) = context_window
            && window < MIN_CONTEXT_WINDOW
        {
            return Err(ConfigError(format!(
                "Provider__ContextWindow: expected at least {MIN_CONTEXT_WINDOW} tokens, got {window}"
            )));
        }
        Ok(())
    }
}

/// The smallest context window accepted: a system prompt with the tools takes about this much.
const MIN_CONTEXT_WINDOW: u64 = 2048;

/// `[agent.sandbox]`, `Agent__Sandbox__*`: the sandbox of the owner's own sessions (Telegram
/// chats, `volcanic chat`), which shows the whole machine but the server's process, its config
/// file and its state folder (docs/security.md).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OwnerSandboxSettings {
    /// `auto` (default): sandboxed when a sandbox can be had here, else unconfined with a
    /// warning. `on`: refuse to start without one. `off`: unconfined.
    pub mode: OwnerSandboxMode,
    /// The bubblewrap program; default: `A2A__Sandbox__Bwrap`, else `bwrap` in `PATH`.
    pub bwrap: Option<PathBuf>,
    /// More paths hidden from the owner's sessions: absolute, or relative to the workspace (a
    /// list in the file, comma-separated in the env).
    #[serde(deserialize_with = "string_list")]
    pub hide: Vec<String>,
}

/// `agent.sandbox.mode`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OwnerSandboxMode {
    #[default]
    Auto,
    On,
    Off,
}

impl AgentSettings {
    /// The core's config with these overrides applied.
    pub fn to_core(&self, provider: &ProviderSettings) -> AgentConfig {
        let mut config = AgentConfig { model: provider.model.clone(), ..AgentConfig::default() };
        config.compaction.context_window = provider.context_window;
        let compaction = &self.compaction;
        if let Some(v) = compaction.enabled {
            config.compaction.enabled = v;
        }
        if let Some(v) = compaction.threshold_percent {
            config.compaction.threshold_percent = v;
        }
        if let Some(v) = compaction.keep_recent_percent {
            config.compaction.keep_recent_percent = v;
        }
        if let Some(v) = compaction.trim_above_bytes {
            config.compaction.trim_above_bytes = v;
        }
        if let Some(v) = self.max_turns {
            config.max_turns = v;
        }
        if let Some(v) = self.max_output_tokens {
            config.max_output_tokens = v;
        }
        if let Some(v) = self.max_retries {
            config.retry.max_retries = v;
        }
        if let Some(v) = self.bash_timeout {
            config.tools.bash_default_timeout = v;
        }
        if let Some(v) = self.bash_max_timeout {
            config.tools.bash_max_timeout = v;
        }
        if let Some(v) = self.max_output_bytes {
            config.tools.max_output_bytes = v;
        }
        if let Some(v) = self.max_output_lines {
            config.tools.max_output_lines = v;
        }
        config
    }
}

/// Bad configuration: the message names the key and the problem.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Loads settings from `file` (or `volcanic.toml` in `workspace` if present) and the environment.
///
/// # Errors
/// A missing explicit file, bad TOML or a value of the wrong type, naming the key.
pub fn load(
    file: Option<&Path>,
    workspace: &Path,
    env: &[(String, String)],
) -> Result<Settings, ConfigError> {
    let mut figment = Figment::new();
    let file = match file {
        Some(path) => {
            if !path.is_file() {
                return Err(ConfigError(format!("--config {}: no such file", path.display())));
            }
            Some(path.to_path_buf())
        }
        None => Some(workspace.join("volcanic.toml")).filter(|default| default.is_file()),
    };
    if let Some(path) = &file {
        figment = figment.merge(Toml::file_exact(path));
    }
    // Which variable set which key, to name it when the key is unknown.
    let mut from_env: Vec<(String, &str)> = Vec::new();
    for (name, value) in env {
        // An empty variable is unset (compose files pass `${VAR:-}` through as "").
        if value.is_empty() {
            continue;
        }
        if let Some(key) = env_key(name) {
            figment = figment.merge(Serialized::default(&key, parse_env_value(value)));
            from_env.push((key, name));
        }
    }
    let settings = figment
        .extract::<Settings>()
        .map_err(|err| ConfigError(describe(err, file.as_deref(), &from_env)))?;
    settings.agent.compaction.validate(settings.provider.context_window)?;
    Ok(settings)
}

/// `Agent__MaxTurns` → `agent.max_turns`; `None` for variables that are not ours.
fn env_key(name: &str) -> Option<String> {
    let mut parts = name.split("__");
    let section = parts.next()?.to_ascii_lowercase();
    if !ENV_SECTIONS.contains(&section.as_str()) {
        return None;
    }
    let rest: Vec<String> = parts.map(to_snake).collect();
    if rest.is_empty() || rest.iter().any(String::is_empty) {
        return None;
    }
    Some(format!("{section}.{}", rest.join(".")))
}

/// `MaxHops` → `max_hops`, `A2A` → `a2a`, `BaseUrl` → `base_url`.
fn to_snake(part: &str) -> String {
    let mut out = String::with_capacity(part.len() + 4);
    let mut prev_lower = false;
    for c in part.chars() {
        if c.is_ascii_uppercase() && prev_lower {
            out.push('_');
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit() && prev_lower;
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Env values are strings; numbers and booleans are recognised so typed fields accept them.
fn parse_env_value(value: &str) -> figment::value::Value {
    use figment::value::Value;
    if let Ok(n) = value.parse::<u64>() {
        return Value::from(n);
    }
    match value.to_ascii_lowercase().as_str() {
        "true" => Value::from(true),
        "false" => Value::from(false),
        _ => Value::from(value.to_string()),
    }
}

/// The error's message, naming the key. An unknown key (a misspelt one, mostly) is named as it
/// was given, in the file or as a variable, with the nearest valid key.
fn describe(err: figment::Error, file: Option<&Path>, from_env: &[(String, &str)]) -> String {
    if let figment::error::Kind::UnknownField(field, expected) = &err.kind {
        return unknown_key(&err.path, field, expected, file, from_env);
    }
    let key = err.path.join(".");
    let problem = err.kind.to_string();
    if key.is_empty() { problem } else { format!("{key}: {problem}") }
}

/// "unknown setting", for the key `field` of the table at `path`.
fn unknown_key(
    path: &[String],
    field: &str,
    expected: &[&str],
    file: Option<&Path>,
    from_env: &[(String, &str)],
) -> String {
    // Figment's path ends with the unknown key itself; the table is what comes before it.
    let path = match path.split_last() {
        Some((last, table)) if last == field => table,
        _ => path,
    };
    let dotted = path.iter().map(String::as_str).chain([field]).collect::<Vec<_>>().join(".");
    let nearest = nearest(field, expected);
    let variable = from_env
        .iter()
        .find(|(key, _)| key == &dotted || key.starts_with(&format!("{dotted}.")))
        .map(|(_, name)| *name);
    if let Some(name) = variable {
        // The variable's own spelling, with the unknown part replaced by the nearest key.
        let hint = nearest
            .map(|valid| {
                let mut parts: Vec<String> = name.split("__").map(str::to_string).collect();
                if let Some(part) = parts.get_mut(path.len()) {
                    *part = to_pascal(valid);
                }
                format!("; did you mean {}?", parts.join("__"))
            })
            .unwrap_or_default();
        return format!(
            "{name}: unknown setting {dotted} (variables named Provider__*, Agent__*, A2A__* and Telegram__* are Volcanic's settings){hint}"
        );
    }
    let shown = file.map_or_else(|| "the config file".to_string(), |f| f.display().to_string());
    if path.is_empty() {
        let hint = nearest.map(|valid| format!("; did you mean [{valid}]?")).unwrap_or_default();
        return format!(
            "{shown}: unknown section [{field}] (the sections are {}){hint}",
            expected.iter().map(|s| format!("[{s}]")).collect::<Vec<_>>().join(", ")
        );
    }
    let table = path.join(".");
    let hint = nearest.map(|valid| format!("; did you mean {valid}?")).unwrap_or_default();
    format!("{shown}: unknown key {field} in [{table}]{hint}")
}

/// The valid name closest to `given` when it is close enough to be a slip, else none: at most a
/// third of its letters (at least one) typed wrong, left out, added, or two neighbours swapped.
fn nearest<'a>(given: &str, valid: &[&'a str]) -> Option<&'a str> {
    let given = given.to_ascii_lowercase();
    let allowed = (given.chars().count() / 3).max(1);
    valid
        .iter()
        .map(|name| (strsim::osa_distance(&given, name), *name))
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// `max_turns` → `MaxTurns`, `a2a` → `A2A`: a key as its variable spells it.
fn to_pascal(key: &str) -> String {
    if key == "a2a" {
        return "A2A".into();
    }
    key.split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Parses `00:30:00`, `30m`, `90s`, `2h`, `1h30m` or a number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bad = || format!("expected a duration like 00:30:00, 30m or 90s, got {text:?}");
    if text.contains(':') {
        let parts: Vec<&str> = text.split(':').collect();
        if parts.len() != 3 {
            return Err(bad());
        }
        let mut secs = 0u64;
        for part in parts {
            let n: u64 = part.parse().map_err(|_| bad())?;
            secs = secs.checked_mul(60).and_then(|s| s.checked_add(n)).ok_or_else(bad)?;
        }
        return Ok(Duration::from_secs(secs));
    }
    if let Ok(n) = text.parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    let mut total = 0u64;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: u64 = number.parse().map_err(|_| bad())?;
        number.clear();
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        total = total.checked_add(n.checked_mul(unit).ok_or_else(bad)?).ok_or_else(bad)?;
    }
    if !number.is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

fn string_list<'de, D: Deserializer<'de>>(de: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        List(Vec<String>),
        Text(String),
    }
    Ok(match Raw::deserialize(de)? {
        Raw::List(list) => list,
        Raw::Text(text) => {
            text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
        }
    })
}

/// Chat ids: a list (numbers or strings), one number, or comma-separated text.
fn id_list<'de, D: Deserializer<'de>>(de: D) -> Result<Vec<i64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Number(i64),
        Text(String),
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        List(Vec<Id>),
        One(Id),
    }
    let texts: Vec<String> = match Raw::deserialize(de)? {
        Raw::List(ids) => ids
            .into_iter()
            .map(|id| match id {
                Id::Number(n) => n.to_string(),
                Id::Text(t) => t,
            })
            .collect(),
        Raw::One(Id::Number(n)) => vec![n.to_string()],
        Raw::One(Id::Text(text)) => text.split(',').map(str::to_string).collect(),
    };
    texts
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<i64>().map_err(|_| {
                serde::de::Error::custom(format!("expected chat ids (whole numbers), got {t:?}"))
            })
        })
        .collect()
}

fn opt_duration<'de, D: Deserializer<'de>>(de: D) -> Result<Option<Duration>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Secs(u64),
        Text(String),
    }
    match Option::<Raw>::deserialize(de)? {
        None => Ok(None),
        Some(Raw::Secs(n)) => Ok(Some(Duration::from_secs(n))),
        Some(Raw::Text(t)) => parse_duration(&t).map(Some).map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_section_read_from_the_environment_is_kept_from_the_owners_sessions() {
        let prefixes: Vec<String> =
            ENV_SECTIONS.iter().map(|s| format!("{}__", s.to_ascii_uppercase())).collect();
        assert_eq!(prefixes, ENV_PREFIXES);
    }

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn unknown_keys_in_the_file_are_refused_naming_the_nearest_valid_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("volcanic.toml");
        let shown = file.display().to_string();
        for (text, expected) in [
            (
                "[agnet]\nmax_turns = 3\n",
                format!(
                    "{shown}: unknown section [agnet] (the sections are [provider], [agent], [a2a], [telegram]); did you mean [agent]?"
                ),
            ),
            (
                "[agent]\nmax_turn = 3\n",
                format!("{shown}: unknown key max_turn in [agent]; did you mean max_turns?"),
            ),
            (
                "[a2a.sandbox]\nmdoe = \"off\"\n",
                format!("{shown}: unknown key mdoe in [a2a.sandbox]; did you mean mode?"),
            ),
            (
                "[a2a.limits]\nrequests_per_minut = 3\n",
                format!(
                    "{shown}: unknown key requests_per_minut in [a2a.limits]; did you mean requests_per_minute?"
                ),
            ),
            // Nothing close: no guess.
            ("[agent]\ncolour = \"red\"\n", format!("{shown}: unknown key colour in [agent]")),
        ] {
            std::fs::write(&file, text).unwrap();
            assert_eq!(load(None, dir.path(), &[]).unwrap_err().0, expected, "{text}");
        }
        // An explicit --config is named the same way.
        let other = dir.path().join("other.toml");
        std::fs::write(&other, "[provider]\nmodle = \"m\"\n").unwrap();
        let err = load(Some(&other), dir.path(), &[]).unwrap_err();
        assert_eq!(
            err.0,
            format!("{}: unknown key modle in [provider]; did you mean model?", other.display())
        );
    }

    #[test]
    fn unknown_variables_of_our_sections_are_refused_and_others_are_not_ours() {
        let dir = tempfile::tempdir().unwrap();
        for (name, expected) in [
            ("Agent__MaxTurn", "Agent__MaxTurn: unknown setting agent.max_turn"),
            ("AGENT__MAX_TURN", "AGENT__MAX_TURN: unknown setting agent.max_turn"),
            ("A2A__Sandboxx__Mode", "A2A__Sandboxx__Mode: unknown setting a2a.sandboxx"),
            ("Telegram__BotTokn", "Telegram__BotTokn: unknown setting telegram.bot_tokn"),
            ("Provider__Colour", "Provider__Colour: unknown setting provider.colour"),
        ] {
            let err = load(None, dir.path(), &env(&[(name, "3")])).unwrap_err();
            assert!(err.0.starts_with(expected), "{name}: {}", err.0);
        }
        let hint = |name: &str| load(None, dir.path(), &env(&[(name, "3")])).unwrap_err().0;
        assert!(hint("Agent__MaxTurn").ends_with("; did you mean Agent__MaxTurns?"));
        assert!(hint("A2A__Sandboxx__Mode").ends_with("; did you mean A2A__Sandbox__Mode?"));
        assert!(hint("Telegram__BotTokn").ends_with("; did you mean Telegram__BotToken?"));
        assert!(hint("A2A__Card__Nmae").ends_with("; did you mean A2A__Card__Name?"));
        assert!(!hint("Provider__Colour").contains("did you mean"));
        // Variables of sections Volcanic does not own, and empty ones, are not settings.
        let settings = load(
            None,
            dir.path(),
            &env(&[
                ("Logging__LogLevel__Default", "Debug"),
                ("ASPNETCORE__Urls", "x"),
                ("MY_APP__MaxTurn", "3"),
                ("Agent__MaxTurn", ""),
                ("Agent__MaxTurns", "4"),
            ]),
        )
        .unwrap();
        assert_eq!(settings.agent.max_turns, Some(4));
    }

    #[test]
    fn env_names_map_to_snake_keys() {
        assert_eq!(env_key("Provider__BaseUrl").as_deref(), Some("provider.base_url"));
        assert_eq!(env_key("A2A__MaxHops").as_deref(), Some("a2a.max_hops"));
        assert_eq!(env_key("A2A__Card__Name").as_deref(), Some("a2a.card.name"));
        assert_eq!(
            env_key("Telegram__AllowedUserIds").as_deref(),
            Some("telegram.allowed_user_ids")
        );
        assert_eq!(env_key("PATH"), None);
        assert_eq!(env_key("Other__Thing"), None);
    }

    #[test]
    fn env_overrides_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("volcanic.toml"),
            "[provider]\nkind = \"anthropic\"\nmodel = \"m1\"\n[agent]\nmax_turns = 5\n",
        )
        .unwrap();
        let settings = load(
            None,
            dir.path(),
            &env(&[
                ("Provider__Kind", "faux"),
                ("Agent__BashTimeout", "2m"),
                ("Agent__AllowEnv", "GH_TOKEN, NPM_TOKEN"),
                ("A2A__Sandbox__AllowEnv", "TOOL_MODE,LC_ALL"),
            ]),
        )
        .unwrap();
        assert_eq!(settings.agent.allow_env, vec!["GH_TOKEN", "NPM_TOKEN"]);
        assert_eq!(settings.a2a.sandbox.allow_env, vec!["TOOL_MODE", "LC_ALL"]);
        assert_eq!(settings.provider.kind, Some(ProviderKind::Faux));
        assert_eq!(settings.provider.model.as_deref(), Some("m1"));
        assert_eq!(settings.agent.max_turns, Some(5));
        assert_eq!(settings.agent.bash_timeout, Some(Duration::from_secs(120)));
    }

    #[test]
    fn compaction_env_names_fill_the_core_config() {
        let dir = tempfile::tempdir().unwrap();
        let settings = load(
            None,
            dir.path(),
            &env(&[
                ("Provider__ContextWindow", "16000"),
                ("Agent__Compaction__Enabled", "false"),
                ("Agent__Compaction__ThresholdPercent", "70"),
                ("Agent__Compaction__KeepRecentPercent", "20"),
                ("Agent__Compaction__TrimAboveBytes", "4096"),
            ]),
        )
        .unwrap();
        let config = settings.agent.to_core(&settings.provider).compaction;
        assert_eq!(
            config,
            volcanic_core::config::CompactionConfig {
                enabled: false,
                context_window: Some(16_000),
                threshold_percent: 70,
                keep_recent_percent: 20,
                trim_above_bytes: 4096,
            }
        );
        let defaults = load(None, dir.path(), &[]).unwrap();
        assert_eq!(
            defaults.agent.to_core(&defaults.provider).compaction,
            volcanic_core::config::CompactionConfig::default()
        );
    }

    #[test]
    fn a2a_card_signing_env_names_fill_the_server_options() {
        let dir = tempfile::tempdir().unwrap();
        let default = load(None, dir.path(), &[]).unwrap().a2a.to_options().unwrap();
        assert!(default.card_signing);
        assert_eq!(default.card_signing_key_file, None);
        let settings = load(
            None,
            dir.path(),
            &env(&[
                ("A2A__CardSigning__Enabled", "false"),
                ("A2A__CardSigning__KeyFile", "/etc/volcanic/card-key.pem"),
            ]),
        )
        .unwrap();
        let options = settings.a2a.to_options().unwrap();
        assert!(!options.card_signing);
        assert_eq!(options.card_signing_key_file, Some("/etc/volcanic/card-key.pem".into()));
    }

    #[test]
    fn a2a_retention_env_names_fill_the_server_options_and_zero_turns_a_limit_off() {
        use volcanic_a2a::retention::RetentionOptions;
        let dir = tempfile::tempdir().unwrap();
        let default = load(None, dir.path(), &[]).unwrap().a2a.to_options().unwrap();
        assert_eq!(default.retention, RetentionOptions::default());
        let day = 24 * 60 * 60;
        let vars = [
            ("A2A__Retention__TaskDays", "7"),
            ("A2A__Retention__MaxBytes", "1048576"),
            ("A2A__Retention__Interval", "10m"),
        ];
        let options = load(None, dir.path(), &env(&vars)).unwrap().a2a.to_options().unwrap();
        let expected = RetentionOptions {
            enabled: true,
            task_age: Some(Duration::from_secs(7 * day)),
            max_bytes: Some(1024 * 1024),
            interval: Duration::from_secs(600),
        };
        assert_eq!(options.retention, expected);
        let vars = [
            ("A2A__Retention__Enabled", "false"),
            ("A2A__Retention__TaskDays", "0"),
            ("A2A__Retention__MaxBytes", "0"),
        ];
        let options = load(None, dir.path(), &env(&vars)).unwrap().a2a.to_options().unwrap();
        let expected =
            RetentionOptions { enabled: false, task_age: None, max_bytes: None, ..expected };
        assert_eq!(
            options.retention,
            RetentionOptions { interval: default.retention.interval, ..expected }
        );
        for (key, value, message) in [
            ("A2A__Retention__Interval", "0s", "a2a.retention.interval: must be at least 1s"),
            (
                "A2A__Retention__TaskDays",
                "36501",
                "a2a.retention.task_days: at most 36500 days (0 keeps tasks forever), got 36501",
            ),
        ] {
            let settings = load(None, dir.path(), &env(&[(key, value)])).unwrap();
            assert_eq!(settings.a2a.to_options().unwrap_err().0, message);
        }
    }

    #[test]
    fn a2a_env_names_fill_the_server_options() {
        let dir = tempfile::tempdir().unwrap();
        let settings = load(
            None,
            dir.path(),
            &env(&[
                ("A2A__MaxHops", "5"),
                ("A2A__SessionIdleTimeout", "00:10:00"),
                ("A2A__MaxOpenSessions", "64"),
                ("A2A__MaxSessionsPerCaller", "8"),
                ("A2A__Card__Name", "Ada"),
                ("A2A__Enabled", "true"),
            ]),
        )
        .unwrap();
        let options = settings.a2a.to_options().unwrap();
        assert_eq!(options.max_hops, 5);
        assert_eq!(options.session_idle_timeout, Duration::from_secs(600));
        assert_eq!((options.max_open_sessions, options.max_sessions_per_caller), (64, 8));
        assert_eq!(options.card_name, "Ada");
        assert!(settings.a2a.enabled);
    }

    #[test]
    fn a2a_max_pending_approval_bytes_comes_from_env_and_zero_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let settings =
            load(None, dir.path(), &env(&[("A2A__MaxPendingApprovalBytes", "1048576")])).unwrap();
        assert_eq!(settings.a2a.to_options().unwrap().max_pending_approval_bytes, 1_048_576);
        let settings =
            load(None, dir.path(), &env(&[("A2A__MaxPendingApprovalBytes", "0")])).unwrap();
        let err = settings.a2a.to_options().unwrap_err();
        assert!(err.0.contains("a2a.max_pending_approval_bytes"), "{}", err.0);
    }

    #[test]
    fn a2a_push_delivery_limits_come_from_env_and_zero_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let settings = load(
            None,
            dir.path(),
            &env(&[
                ("A2A__PushMaxAttempts", "4"),
                ("A2A__PushMaxAge", "2h"),
                ("A2A__PushMaxPendingPerWebhook", "16"),
                ("A2A__PushMaxPendingBytes", "1048576"),
            ]),
        )
        .unwrap();
        let options = settings.a2a.to_options().unwrap();
        assert_eq!(
            (
                options.push_max_attempts,
                options.push_max_age,
                options.push_max_pending_per_webhook,
                options.push_max_pending_bytes
            ),
            (4, Duration::from_secs(7200), 16, 1_048_576)
        );
        for (key, value, named) in [
            ("A2A__PushMaxAttempts", "0", "a2a.push_max_attempts"),
            ("A2A__PushMaxAge", "0s", "a2a.push_max_age"),
            ("A2A__PushMaxPendingPerWebhook", "0", "a2a.push_max_pending_per_webhook"),
        ] {
            let settings = load(None, dir.path(), &env(&[(key, value)])).unwrap();
            let err = settings.a2a.to_options().unwrap_err();
            assert!(err.to_string().contains(named), "{key}: {err}");
        }
    }

    #[test]
    fn a2a_connection_and_resource_limits_come_from_env() {
        let dir = tempfile::tempdir().unwrap();
        let settings = load(
            None,
            dir.path(),
            &env(&[
                ("A2A__HeaderReadTimeout", "5s"),
                ("A2A__BodyReadTimeout", "00:01:30"),
                ("A2A__IdleConnectionTimeout", "7s"),
                ("A2A__WriteStallTimeout", "2m"),
                ("A2A__MaxConnections", "64"),
                ("A2A__MaxUnauthenticatedConnectionsPerPeer", "8"),
                ("A2A__MaxRequestsPerCaller", "16"),
                ("A2A__MaxStreamsPerCaller", "4"),
                ("A2A__MaxConnectionsPerCaller", "12"),
                ("A2A__MaxHeaderBytes", "16384"),
                ("A2A__MaxInboxBytes", "1048576"),
                ("A2A__MaxTasks", "2000"),
                ("A2A__TaskCacheBytes", "0"),
            ]),
        )
        .unwrap();
        let options = settings.a2a.to_options().unwrap();
        assert_eq!(
            (
                options.header_read_timeout,
                options.body_read_timeout,
                options.idle_connection_timeout,
                options.write_stall_timeout,
            ),
            (
                Duration::from_secs(5),
                Duration::from_secs(90),
                Duration::from_secs(7),
                Duration::from_secs(120)
            )
        );
        assert_eq!(
            (
                options.max_connections,
                options.max_header_bytes,
                options.max_inbox_bytes,
                options.max_tasks,
                options.task_cache_bytes
            ),
            (64, 16384, 1024 * 1024, 2000, 0)
        );
        assert_eq!(
            (
                options.max_unauthenticated_connections_per_peer,
                options.max_requests_per_caller,
                options.max_streams_per_caller,
                options.max_connections_per_caller
            ),
            (8, 16, 4, 12)
        );
        let zero = load(None, dir.path(), &env(&[("A2A__MaxConnections", "0")])).unwrap();
        let err = zero.a2a.to_options().unwrap_err();
        assert_eq!(err.0, "a2a.max_connections: must be at least 1");
        let zero = load(None, dir.path(), &env(&[("A2A__MaxStreamsPerCaller", "0")])).unwrap();
        let err = zero.a2a.to_options().unwrap_err();
        assert_eq!(err.0, "a2a.max_streams_per_caller: must be at least 1");
        let zero = load(None, dir.path(), &env(&[("A2A__MaxConnectionsPerCaller", "0")])).unwrap();
        let err = zero.a2a.to_options().unwrap_err();
        assert_eq!(err.0, "a2a.max_connections_per_caller: must be at least 1");
        let zero = load(None, dir.path(), &env(&[("A2A__HeaderReadTimeout", "0s")])).unwrap();
        let err = zero.a2a.to_options().unwrap_err();
        assert_eq!(err.0, "a2a.header_read_timeout: must be longer than zero");
    }

    #[test]
    fn a2a_retry_settings_come_from_env() {
        let dir = tempfile::tempdir().unwrap();
        let defaults = load(None, dir.path(), &[]).unwrap().a2a.to_options().unwrap();
        assert_eq!(
            (defaults.retry_window, defaults.retry_records_per_caller),
            (Duration::from_secs(24 * 3600), 10_000)
        );
        let vars = [("A2A__RetryWindow", "2h"), ("A2A__RetryRecordsPerCaller", "50")];
        let options = load(None, dir.path(), &env(&vars)).unwrap().a2a.to_options().unwrap();
        assert_eq!(
            (options.retry_window, options.retry_records_per_caller),
            (Duration::from_secs(7200), 50)
        );
        let off = load(None, dir.path(), &env(&[("A2A__RetryWindow", "0s")])).unwrap();
        assert_eq!(off.a2a.to_options().unwrap().retry_window, Duration::ZERO);
        let zero = load(None, dir.path(), &env(&[("A2A__RetryRecordsPerCaller", "0")])).unwrap();
        let err = zero.a2a.to_options().unwrap_err();
        assert_eq!(err.0, "a2a.retry_records_per_caller: must be at least 1");
    }

    #[test]
    fn owner_sandbox_settings_from_env_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let default = load(None, dir.path(), &[]).unwrap().agent.sandbox;
        assert_eq!(
            (default.mode, default.bwrap, default.hide.len()),
            (OwnerSandboxMode::Auto, None, 0)
        );
        let set = load(
            None,
            dir.path(),
            &env(&[
                ("Agent__Sandbox__Mode", "on"),
                ("Agent__Sandbox__Bwrap", "/opt/bin/bwrap"),
                ("Agent__Sandbox__Hide", "/root/.ssh, secrets"),
            ]),
        )
        .unwrap()
        .agent
        .sandbox;
        assert_eq!(set.mode, OwnerSandboxMode::On);
        assert_eq!(set.bwrap, Some(PathBuf::from("/opt/bin/bwrap")));
        assert_eq!(set.hide, vec!["/root/.ssh", "secrets"]);
        let err =
            load(None, dir.path(), &env(&[("Agent__Sandbox__Mode", "sometimes")])).unwrap_err();
        assert!(err.0.starts_with("agent.sandbox.mode:"), "{}", err.0);
    }

    #[test]
    fn sandbox_settings_from_env_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let default = load(None, dir.path(), &[]).unwrap().a2a.sandbox;
        assert_eq!(
            (default.mode, default.bwrap, default.hide, default.writable_context),
            (SandboxMode::On, None, Vec::<String>::new(), false)
        );
        let set = load(
            None,
            dir.path(),
            &env(&[
                ("A2A__Sandbox__Mode", "off"),
                ("A2A__Sandbox__Bwrap", "/opt/bin/bwrap"),
                ("A2A__Sandbox__Hide", "private, .env"),
                ("A2A__Sandbox__WritableContext", "true"),
                ("A2A__Sandbox__ReadOnlyPaths", "/opt/tools"),
            ]),
        )
        .unwrap()
        .a2a
        .sandbox;
        assert_eq!(set.mode, SandboxMode::Off);
        assert_eq!(set.bwrap, Some(PathBuf::from("/opt/bin/bwrap")));
        assert_eq!(set.hide, vec!["private".to_string(), ".env".to_string()]);
        assert!(set.writable_context);
        assert_eq!(set.read_only_paths, vec!["/opt/tools".to_string()]);
        std::fs::write(
            dir.path().join("volcanic.toml"),
            "[a2a.sandbox]\nhide = [\"a\", \"b/c\"]\n",
        )
        .unwrap();
        assert_eq!(load(None, dir.path(), &[]).unwrap().a2a.sandbox.hide, vec!["a", "b/c"]);
        let err = load(None, dir.path(), &env(&[("A2A__Sandbox__Mode", "maybe")])).unwrap_err();
        assert!(err.0.starts_with("a2a.sandbox.mode:"), "{}", err.0);
    }

    #[test]
    fn bad_values_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let err = load(None, dir.path(), &env(&[("Agent__MaxTurns", "three")])).unwrap_err();
        assert!(err.0.starts_with("agent.max_turns:"), "{}", err.0);
        let err = load(None, dir.path(), &env(&[("A2A__MaxHops", "three")])).unwrap_err();
        assert!(err.0.starts_with("a2a.max_hops:"), "{}", err.0);
        let settings = load(None, dir.path(), &env(&[("A2A__MaxOpenSessions", "0")])).unwrap();
        let err = settings.a2a.to_options().unwrap_err();
        assert_eq!(err.0, "a2a.max_open_sessions: must be at least 1, got 0");
        let err = load(None, dir.path(), &env(&[("Provider__Kind", "gemini")])).unwrap_err();
        assert!(err.0.starts_with("provider.kind:"), "{}", err.0);
    }

    #[test]
    fn telegram_call_timeout_is_a_setting_in_seconds() {
        let dir = tempfile::tempdir().unwrap();
        let base = [
            ("Telegram__BotToken", "123:abc"),
            ("Telegram__AllowedUserIds", "42"),
            ("Telegram__WorkspaceRoot", "/data/chats"),
        ];
        let config = load(None, dir.path(), &env(&base)).unwrap().telegram;
        assert_eq!(config.to_config(dir.path()).unwrap().call_timeout, Duration::from_secs(30));
        let with = |value: &str| {
            let mut vars = base.to_vec();
            vars.push(("Telegram__CallTimeoutSeconds", value));
            load(None, dir.path(), &env(&vars)).map(|s| s.telegram)
        };
        let config = with("5").unwrap().to_config(dir.path()).unwrap();
        assert_eq!(config.call_timeout, Duration::from_secs(5));
        let err = with("0").unwrap().to_config(dir.path()).unwrap_err();
        assert!(err.0.starts_with("Telegram__CallTimeoutSeconds"), "{}", err.0);
        let err = with("soon").unwrap_err();
        assert!(err.0.starts_with("telegram.call_timeout_seconds:"), "{}", err.0);
    }

    #[test]
    fn telegram_settings_from_env_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let settings = load(
            None,
            dir.path(),
            &env(&[
                ("Telegram__BotToken", "123:abc"),
                ("Telegram__AllowedUserIds", "42, 7"),
                ("Telegram__AllowedGroupIds", "-1001234"),
                ("Telegram__WorkspaceRoot", "/data/chats"),
                ("Telegram__ApiUrl", "http://127.0.0.1:9/"),
                ("A2A__Listen", "127.0.0.1:0"),
            ]),
        )
        .unwrap();
        assert_eq!(settings.telegram.allowed_user_ids, vec![42, 7]);
        assert_eq!(settings.telegram.allowed_group_ids, vec![-1_001_234]);
        assert!(!format!("{settings:?}").contains("123:abc"), "the token must not print");
        assert_eq!(settings.a2a.listen.as_deref(), Some("127.0.0.1:0"));
        let config = settings.telegram.to_config(dir.path()).unwrap();
        assert_eq!(config.api_url, "http://127.0.0.1:9");
        assert_eq!(config.workspace(42), PathBuf::from("/data/chats/42"));
        assert_eq!((config.allowed_users, config.allowed_groups), (vec![42, 7], vec![-1_001_234]));

        let one = load(
            None,
            dir.path(),
            &env(&[
                ("Telegram__AllowedUserIds", "42"),
                ("A2A__PublicUrl", ""),
                ("Provider__Kind", ""),
            ]),
        )
        .unwrap();
        assert_eq!(one.a2a.public_url, None, "an empty variable is unset");
        assert_eq!(one.provider.kind, None);
        assert_eq!(one.telegram.allowed_user_ids, vec![42]);
        std::fs::write(
            dir.path().join("volcanic.toml"),
            "[telegram]\nallowed_user_ids = [1, 2]\nbot_token = \"1:t\"\n",
        )
        .unwrap();
        let file = load(None, dir.path(), &[]).unwrap();
        assert_eq!(file.telegram.allowed_user_ids, vec![1, 2]);
        let err = file.telegram.to_config(dir.path()).unwrap_err();
        assert!(err.0.starts_with("Telegram__WorkspaceRoot"), "{}", err.0);
        let err = load(None, dir.path(), &env(&[("Telegram__AllowedUserIds", "me")])).unwrap_err();
        assert!(err.0.starts_with("telegram.allowed_user_ids:"), "{}", err.0);
    }

    #[test]
    fn telegram_names_every_setting_to_fix_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let err = TelegramSettings::default().to_config(dir.path()).unwrap_err();
        assert_eq!(
            err.0,
            "3 Telegram settings to fix:
  Telegram__BotToken: not set (the token BotFather gave you)
  Telegram__AllowedUserIds: not set (comma-separated user ids to serve)
  Telegram__WorkspaceRoot: not set (the folder for chat workspaces)"
        );
        // A token of the wrong shape is refused here, before any call to Telegram, unquoted.
        let settings = load(
            None,
            dir.path(),
            &env(&[
                ("Telegram__BotToken", "AAE-no-colon-sekrit"),
                ("Telegram__AllowedUserIds", "42"),
                ("Telegram__AllowedGroupIds", "7"),
                ("Telegram__CallTimeoutSeconds", "0"),
            ]),
        )
        .unwrap();
        let err = settings.telegram.to_config(dir.path()).unwrap_err();
        let lines: Vec<&str> = err.0.lines().collect();
        assert_eq!(lines[0], "4 Telegram settings to fix:", "{}", err.0);
        let named: Vec<&str> =
            lines[1..].iter().map(|line| line.trim().split(':').next().unwrap()).collect();
        assert_eq!(
            named,
            [
                "Telegram__BotToken",
                "Telegram__AllowedGroupIds",
                "Telegram__WorkspaceRoot",
                "Telegram__CallTimeoutSeconds"
            ],
            "{}",
            err.0
        );
        assert!(lines[1].contains("has no colon"), "{}", err.0);
        assert!(!err.0.contains("AAE-no-colon-sekrit"), "the token was quoted");
        // One problem is one line, as before.
        let one = TelegramSettings {
            bot_token: Some("123:abc".into()),
            allowed_user_ids: vec![42],
            ..TelegramSettings::default()
        };
        let err = one.to_config(dir.path()).unwrap_err();
        assert_eq!(err.0, "Telegram__WorkspaceRoot: not set (the folder for chat workspaces)");
    }

    #[test]
    fn telegram_startup_timeout_is_seconds_and_zero_waits_for_ever() {
        let dir = tempfile::tempdir().unwrap();
        let with = |value: Option<&str>| {
            let mut vars = vec![
                ("Telegram__BotToken", "123:abc"),
                ("Telegram__AllowedUserIds", "42"),
                ("Telegram__WorkspaceRoot", "/data/chats"),
            ];
            vars.extend(value.map(|value| ("Telegram__StartupTimeoutSeconds", value)));
            load(None, dir.path(), &env(&vars)).unwrap().telegram.to_config(dir.path())
        };
        assert_eq!(with(None).unwrap().startup_timeout, Some(Duration::from_secs(60)));
        assert_eq!(with(Some("5")).unwrap().startup_timeout, Some(Duration::from_secs(5)));
        assert_eq!(with(Some("0")).unwrap().startup_timeout, None);
        let err = with(Some("86401")).unwrap_err();
        assert_eq!(
            err.0,
            "Telegram__StartupTimeoutSeconds: expected 0 (wait for ever) to 86400 seconds, got 86401"
        );
    }

    #[test]
    fn telegram_group_ids_belong_in_their_own_setting() {
        let dir = tempfile::tempdir().unwrap();
        let settings = |vars: &[(&str, &str)]| {
            let mut all =
                vec![("Telegram__BotToken", "123:abc"), ("Telegram__WorkspaceRoot", "/w")];
            all.extend_from_slice(vars);
            load(None, dir.path(), &env(&all)).unwrap().telegram.to_config(dir.path())
        };
        let err = settings(&[("Telegram__AllowedUserIds", "42, -1001234")]).unwrap_err();
        assert_eq!(
            err.0,
            "Telegram__AllowedUserIds: -1001234 is not a user id (groups have negative ids); \
list groups in Telegram__AllowedGroupIds"
        );
        let err =
            settings(&[("Telegram__AllowedUserIds", "42"), ("Telegram__AllowedGroupIds", "42")])
                .unwrap_err();
        assert!(err.0.starts_with("Telegram__AllowedGroupIds: 42 is not a group id"), "{}", err.0);
        let config = settings(&[("Telegram__AllowedUserIds", "42")]).unwrap();
        assert_eq!(config.allowed_groups, Vec::<i64>::new(), "no groups by default");
        assert_eq!((config.notify_max_chars, config.notify_limit), (2_000, 5));
        let config = settings(&[
            ("Telegram__AllowedUserIds", "42"),
            ("Telegram__NotifyMaxChars", "500"),
            ("Telegram__NotifyPerMinute", "2"),
        ])
        .unwrap();
        assert_eq!((config.notify_max_chars, config.notify_limit), (500, 2));
        let err =
            settings(&[("Telegram__AllowedUserIds", "42"), ("Telegram__NotifyPerMinute", "0")])
                .unwrap_err();
        assert_eq!(err.0, "Telegram__NotifyPerMinute: must be at least 1, got 0");
        assert_eq!(config.owner(), Some(42));
    }

    #[test]
    fn durations_parse_in_every_form() {
        assert_eq!(parse_duration("00:30:00"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5x").is_err());
    }
}
