//! Limits and knobs of the agent core. Every default is written once, in the `Default` impls here;
//! hosts fill these structs from their configuration (the CLI maps `Agent__*` names onto them).

use std::time::Duration;

/// Settings of the agent loop.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// Model id; `None` = the provider's default.
    pub model: Option<String>,
    /// Model calls per run before it settles as `max_turns`. Default 50.
    pub max_turns: u32,
    /// Output token cap per model call. Default 8192.
    pub max_output_tokens: u32,
    /// Retries of failed model calls.
    pub retry: RetryConfig,
    /// Caps of the built-in tools.
    pub tools: ToolLimits,
    /// Caps of the workspace files put into the system prompt.
    pub context: ContextLimits,
    /// When and how a long conversation is compacted to fit the model's context window.
    pub compaction: CompactionConfig,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            model: None,
            max_turns: 50,
            max_output_tokens: 8192,
            retry: RetryConfig::default(),
            tools: ToolLimits::default(),
            context: ContextLimits::default(),
            compaction: CompactionConfig::default(),
        }
    }
}

/// Compaction of a conversation that outgrows the model's context window (see
/// `session::compact`): old tool results trimmed in the model's view first, then older turns
/// summarised by the model. The journal always keeps everything.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionConfig {
    /// Whether sessions compact at all. Default true.
    pub enabled: bool,
    /// The model's context window in tokens; `None` = the built-in table for the model
    /// ([`crate::provider::window`]), else its default for unknown models.
    pub context_window: Option<u64>,
    /// How full the window may get, in percent, before a model call compacts first. Default 80.
    pub threshold_percent: u8,
    /// How much of the window the most recent conversation may take and stay verbatim, in
    /// percent. Default 25.
    pub keep_recent_percent: u8,
    /// Tool results longer than this, in bytes, are trimmed in the model's view once they are
    /// older than the recent part. Default 2,048.
    pub trim_above_bytes: usize,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            enabled: true,
            context_window: None,
            threshold_percent: 80,
            keep_recent_percent: 25,
            trim_above_bytes: 2048,
        }
    }
}

/// Retries of model calls that failed with a transient error (429, 5xx, overloaded, network).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    /// Retries after the first attempt. Default 3.
    pub max_retries: u32,
    /// Wait before the first retry; doubles each time. Default 2 s.
    pub base_delay: Duration,
    /// Longest wait, also the cap on a provider's `retry-after`. Default 60 s.
    pub max_delay: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 3,
            base_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryConfig {
    /// The wait before retry number `attempt` (1-based), honouring the provider's request.
    pub fn delay(&self, attempt: u32, requested: Option<Duration>) -> Duration {
        let backoff =
            self.base_delay.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        requested.unwrap_or(backoff).min(self.max_delay)
    }
}

/// Output caps and timeouts of the built-in tools. Serializable because a sandboxed session's
/// tool host receives them over its pipe (see `sandbox`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolLimits {
    /// Most bytes of tool output the model sees. Default 50 KiB.
    pub max_output_bytes: usize,
    /// Most lines of tool output the model sees. Default 2000.
    pub max_output_lines: usize,
    /// Most bytes of one output kept in the spill file. Default 16 MiB.
    pub max_spill_bytes: u64,
    /// bash timeout when the call gives none. Default 120 s.
    pub bash_default_timeout: Duration,
    /// Longest bash timeout a call may ask for. Default 600 s.
    pub bash_max_timeout: Duration,
    /// Longest line `read` shows before cutting it. Default 2000 characters.
    pub read_max_line_chars: usize,
    /// Most matches `grep` returns. Default 100.
    pub grep_max_matches: usize,
    /// Most paths `find` returns. Default 1000.
    pub find_max_results: usize,
    /// Most entries `ls` returns. Default 500.
    pub ls_max_entries: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            max_output_bytes: 50 * 1024,
            max_output_lines: 2000,
            max_spill_bytes: 16 * 1024 * 1024,
            bash_default_timeout: Duration::from_secs(120),
            bash_max_timeout: Duration::from_secs(600),
            read_max_line_chars: 2000,
            grep_max_matches: 100,
            find_max_results: 1000,
            ls_max_entries: 500,
        }
    }
}

/// Caps on the workspace files (PERSONA.md, AGENTS.md / CLAUDE.md, MEMORY.md) in the system prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextLimits {
    /// Characters per file before it is cut with a marker. Default 20 000.
    pub max_file_chars: usize,
    /// Characters of all files together. Default 60 000.
    pub max_total_chars: usize,
}

impl Default for ContextLimits {
    fn default() -> Self {
        ContextLimits { max_file_chars: 20_000, max_total_chars: 60_000 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_doubles_and_is_capped() {
        let retry = RetryConfig::default();
        assert_eq!(retry.delay(1, None), Duration::from_secs(2));
        assert_eq!(retry.delay(3, None), Duration::from_secs(8));
        assert_eq!(retry.delay(30, None), Duration::from_secs(60));
        assert_eq!(retry.delay(1, Some(Duration::from_secs(5))), Duration::from_secs(5));
        assert_eq!(retry.delay(1, Some(Duration::from_secs(500))), Duration::from_secs(60));
    }
}
