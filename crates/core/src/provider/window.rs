//! How many tokens a model's context window holds: a built-in table for the models the
//! Anthropic and OpenAI-compatible providers name today, and a conservative default for the
//! rest (local models served through an OpenAI-compatible API, whose window depends on how the
//! server was started).
//!
//! The table follows the providers' model pages as read in December 2026 (docs/configuration.md
//! lists it with that date). Where a model's input limit is below its advertised total (OpenAI's
//! GPT-5 family: 400,000 in all, at most 272,000 of them input), the input limit is the window:
//! compaction keeps the input under it. Claude models are counted at 200,000, the window of the
//! Messages API without the 1M-context beta header, which Volcanic does not send.
//! `Provider__ContextWindow` overrides the table.

/// The window assumed for a model the table does not know: small enough for the usual local
/// servers' settings, large enough to hold the system prompt, the tools and a conversation.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 32_768;

/// Known model families: the first entry whose prefix the model id starts with wins, so more
/// specific prefixes come first.
const TABLE: &[(&str, u64)] = &[
    // Anthropic.
    ("claude-", 200_000),
    // OpenAI: chat snapshots of GPT-5 have the smaller window of the ChatGPT models.
    ("gpt-5-chat", 128_000),
    ("gpt-5.1-chat", 128_000),
    ("gpt-5", 272_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4-32k", 32_768),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o1-mini", 128_000),
    ("o1-preview", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    // Faux's model has no window of its own: a test or a trial simulates one with
    // `Provider__ContextWindow` (which Faux then enforces).
    ("faux", 1_000_000),
];

/// The table's window for `model`, `None` when it does not know the model. A router's vendor
/// prefix (`openai/gpt-4o`, `anthropic/claude-sonnet-4.5`) is ignored.
pub fn known_context_window(model: &str) -> Option<u64> {
    let id = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    TABLE.iter().find(|(prefix, _)| id.starts_with(prefix)).map(|&(_, window)| window)
}

/// The window of `model`: `configured` when set, else the table's, else
/// [`DEFAULT_CONTEXT_WINDOW`].
pub fn context_window(model: &str, configured: Option<u64>) -> u64 {
    configured.or_else(|| known_context_window(model)).unwrap_or(DEFAULT_CONTEXT_WINDOW)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_matches_families_most_specific_first() {
        let cases = [
            ("claude-sonnet-4-5", Some(200_000)),
            ("claude-opus-4-1-20250805", Some(200_000)),
            ("anthropic/claude-haiku-4.5", Some(200_000)),
            ("gpt-5", Some(272_000)),
            ("gpt-5-mini", Some(272_000)),
            ("gpt-5-chat-latest", Some(128_000)),
            ("gpt-4.1-mini", Some(1_047_576)),
            ("openai/gpt-4o-mini", Some(128_000)),
            ("gpt-4-turbo-2024-04-09", Some(128_000)),
            ("gpt-4-0613", Some(8_192)),
            ("GPT-3.5-Turbo", Some(16_385)),
            ("o1-mini", Some(128_000)),
            ("o3-mini", Some(200_000)),
            ("llama3.1:8b", None),
            ("faux", Some(1_000_000)),
        ];
        for (model, want) in cases {
            assert_eq!(known_context_window(model), want, "{model}");
        }
    }

    #[test]
    fn the_setting_wins_and_unknown_models_get_the_default() {
        assert_eq!(context_window("claude-sonnet-4-5", Some(16_000)), 16_000);
        assert_eq!(context_window("qwen2.5-coder:32b", None), DEFAULT_CONTEXT_WINDOW);
        assert_eq!(context_window("gpt-4o", None), 128_000);
    }
}
