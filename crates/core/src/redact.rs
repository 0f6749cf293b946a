//! Secret redaction: exact secret values first, then well-known secret shapes.
//!
//! Applied to tool output, tool errors, provider errors, run failures and every string written to
//! the journal, so a secret the runtime knows about never lands in a transcript, a log line or an
//! A2A artifact. It is best-effort: it cannot stop a session from reading a secret file in its own
//! workspace and paraphrasing it.

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, MatchKind};
use regex::Regex;
use serde_json::Value;

/// Values shorter than this are not treated as secrets: they would match ordinary text.
pub const MIN_SECRET_LEN: usize = 8;

/// A secret value with the name it is known by (an env var name, `caller-key`, …).
#[derive(Clone)]
pub struct Secret {
    pub name: String,
    pub value: String,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({}: [redacted])", self.name)
    }
}

/// Replaces secrets in text. Cheap to clone behind an `Arc`; build a new one when the set changes.
pub struct Redactor {
    /// Longest value first; the automaton's pattern ids index this list.
    secrets: Vec<Secret>,
    values: Option<AhoCorasick>,
    /// No value holds a character JSON escapes (`"`, `\`, a control character), so each value
    /// appears verbatim in the JSON text of any string that contains it.
    values_verbatim_in_json: bool,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} values)", self.secrets.len())
    }
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new(Vec::new())
    }
}

/// Shapes of secrets that are worth hiding even when we were not told the value.
/// Each pattern's first capture group (when present) is kept, the rest is replaced.
static PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    let sources = [
        // PEM private keys.
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        // Provider and platform keys.
        r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",
        r"\b(?:ghp|gho|ghs|ghr|ghu)_[A-Za-z0-9]{20,}",
        r"\bgithub_pat_[A-Za-z0-9_]{20,}",
        r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",
        r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
        // JWTs.
        r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        // Header values.
        r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=\-]{16,}",
        r"(?i)(\b(?:authorization|cookie|x-api-key)\s*:\s*)[^\r\n]+",
        // URL user info.
        r"([a-z][a-z0-9+.\-]*://[^/\s:@]+:)[^@\s/]+@",
        // key = value assignments.
        r#"(?i)(\b[a-z0-9_]*(?:api[_-]?key|token|secret|password|passwd)["']?\s*[:=]\s*["']?)[^\s"',;]{8,}"#,
    ];
    sources
        .iter()
        .filter_map(|source| match Regex::new(source) {
            Ok(re) => Some(re),
            Err(err) => {
                tracing::error!(pattern = source, error = %err, "redaction pattern does not compile");
                None
            }
        })
        .collect()
});

/// The values a redactor matches, in its order: shorter than [`MIN_SECRET_LEN`] dropped,
/// longest first (a value that contains another is replaced whole), one per value.
fn normalize(secrets: Vec<Secret>) -> Vec<Secret> {
    let mut secrets: Vec<Secret> =
        secrets.into_iter().filter(|s| s.value.len() >= MIN_SECRET_LEN).collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.value.len()));
    secrets.dedup_by(|a, b| a.value == b.value);
    secrets
}

impl Redactor {
    /// A redactor for these exact values (shorter than [`MIN_SECRET_LEN`] ones are ignored).
    pub fn new(secrets: Vec<Secret>) -> Self {
        let secrets = normalize(secrets);
        let values = if secrets.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(secrets.iter().map(|s| s.value.as_str()))
                .ok()
        };
        let values_verbatim_in_json = secrets
            .iter()
            .all(|s| !s.value.chars().any(|c| c == '"' || c == '\\' || c.is_ascii_control()));
        Redactor { secrets, values, values_verbatim_in_json }
    }

    /// Whether a redactor built from `secrets` would be this one (same names and values): a
    /// host that opens many sessions with the same secrets reuses one automaton.
    pub fn is_built_from(&self, secrets: Vec<Secret>) -> bool {
        let other = normalize(secrets);
        other.len() == self.secrets.len()
            && other.iter().zip(&self.secrets).all(|(a, b)| a.name == b.name && a.value == b.value)
    }

    /// A redactor with this one's values plus `more`.
    pub fn with_more(&self, more: Vec<Secret>) -> Self {
        let mut all = self.secrets.clone();
        all.extend(more);
        Redactor::new(all)
    }

    /// Whether `text` contains one of the known values.
    pub fn contains_value(&self, text: &str) -> bool {
        self.values.as_ref().is_some_and(|ac| ac.find(text).is_some())
    }

    /// Replaces known values by `[REDACTED:NAME]`, leaving other text alone.
    pub fn redact_values<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(ac) = &self.values else { return Cow::Borrowed(text) };
        if ac.find(text).is_none() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for m in ac.find_iter(text) {
            out.push_str(&text[last..m.start()]);
            let name =
                self.secrets.get(m.pattern().as_usize()).map_or("SECRET", |s| s.name.as_str());
            out.push_str("[REDACTED:");
            out.push_str(name);
            out.push(']');
            last = m.end();
        }
        out.push_str(&text[last..]);
        Cow::Owned(out)
    }

    /// Replaces known values and anything shaped like a secret.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut current = self.redact_values(text);
        for re in PATTERNS.iter() {
            if re.is_match(&current) {
                let replaced = re
                    .replace_all(&current, |caps: &regex::Captures<'_>| {
                        let keep = caps.get(1).map(|m| m.as_str()).unwrap_or("");
                        format!("{keep}[REDACTED]")
                    })
                    .into_owned();
                current = Cow::Owned(replaced);
            }
        }
        current
    }

    /// Whether the JSON text `json` (of any value) holds none of the known values in any of its
    /// strings (keys included): when it does not, [`Redactor::redact_json_values`] would change
    /// nothing. A `false` answer may be wrong (a value that spans JSON punctuation, or one that
    /// JSON would escape), never a `true` one.
    pub fn json_is_clean(&self, json: &[u8]) -> bool {
        match &self.values {
            None => true,
            Some(ac) => self.values_verbatim_in_json && !ac.is_match(json),
        }
    }

    /// Replaces known values in every string inside a JSON value (keys included).
    pub fn redact_json_values(&self, value: &mut Value) {
        if self.values.is_none() {
            return;
        }
        match value {
            Value::String(s) => {
                if let Cow::Owned(new) = self.redact_values(s) {
                    *s = new;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json_values(v)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut v) in entries {
                    self.redact_json_values(&mut v);
                    map.insert(self.redact_values(&key).into_owned(), v);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor() -> Redactor {
        Redactor::new(vec![
            Secret { name: "MY_TOKEN".into(), value: "s3cr3t-value-123".into() },
            Secret { name: "SHORT".into(), value: "abc".into() },
        ])
    }

    #[test]
    fn known_values_are_replaced_by_name() {
        assert_eq!(redactor().redact("a s3cr3t-value-123 b"), "a [REDACTED:MY_TOKEN] b");
    }

    #[test]
    fn short_values_are_not_secrets() {
        assert_eq!(redactor().redact("abc"), "abc");
    }

    #[test]
    fn secret_shapes_are_replaced() {
        let r = Redactor::default();
        let cases = [
            ("key sk-ant-api03-abcdefghijklmnop1234", "key [REDACTED]"),
            ("Authorization: Bearer abcdefghijklmnopqrstu", "Authorization: [REDACTED]"),
            ("curl -H 'x' bearer abcdefghijklmnopqrstuvwxyz", "curl -H 'x' bearer [REDACTED]"),
            ("https://user:hunter2hunter2@example.com/x", "https://user:[REDACTED]example.com/x"),
            ("API_KEY=abcdefgh12345", "API_KEY=[REDACTED]"),
            ("password: 'correcthorse'", "password: '[REDACTED]'"),
            ("AKIAABCDEFGHIJKLMNOP", "[REDACTED]"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123", "[REDACTED]"),
            ("nothing to see", "nothing to see"),
        ];
        for (input, want) in cases {
            assert_eq!(r.redact(input), want, "input: {input}");
        }
    }

    #[test]
    fn json_strings_are_redacted_in_place() {
        let mut v = serde_json::json!({"a": ["x s3cr3t-value-123"], "s3cr3t-value-123": 1});
        redactor().redact_json_values(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"a": ["x [REDACTED:MY_TOKEN]"], "[REDACTED:MY_TOKEN]": 1})
        );
    }

    #[test]
    fn json_is_clean_only_when_no_value_can_hide_in_the_text() {
        let r = redactor();
        assert!(r.json_is_clean(br#"{"a":"nothing here"}"#));
        assert!(!r.json_is_clean(br#"{"a":"x s3cr3t-value-123"}"#));
        assert!(Redactor::default().json_is_clean(br#"{"a":"s3cr3t-value-123"}"#));
        // A value JSON escapes would not show verbatim: such a redactor never answers clean.
        let quoted = Redactor::new(vec![Secret { name: "Q".into(), value: "a\"quoted\"b".into() }]);
        assert!(!quoted.json_is_clean(br#"{"a":"nothing here"}"#));
    }
}
