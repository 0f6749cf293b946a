//! Secret redaction: exact secret values (and their base64 and percent-encoded forms) first, then
//! well-known secret shapes.
//!
//! Applied to tool output, tool errors, provider errors, run failures and every string written to
//! the journal, and by hosts to everything they send out (the A2A server: artifacts, stream
//! chunks, status messages, task files, push payloads), so a secret the runtime knows about never
//! lands in a transcript, a log line or an answer. It is best-effort: it cannot stop a session
//! from reading a secret file in its own workspace and paraphrasing it.
//!
//! Values a host names explicitly (a provider key, a caller key) are matched whatever their
//! length: the host knows they are secrets. Only guesses (an environment variable picked by its
//! name) and base64 forms have a minimum length, since a short guess or a short base64 fragment
//! would match ordinary text.
//!
//! A session's set of values can change while it is open (a key added to callers.json): a
//! [`LiveRedactor`] asks its [`SecretSource`]s for their version before each use and rebuilds
//! only when one changed.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use regex::Regex;
use serde_json::Value;

/// Guessed secrets (environment variables picked by their names) shorter than this are not
/// redacted: `MY_TOKEN=1` would otherwise hide every `1`. Explicit values have no minimum.
pub const MIN_GUESSED_SECRET_LEN: usize = 8;

/// Base64 forms shorter than this are not matched: a few base64 characters are ordinary text.
/// With it, the forms of a value of 8 bytes or more are always matched in all three alignments.
pub const MIN_BASE64_FORM_LEN: usize = 8;

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
    /// Longest value first, one per value.
    secrets: Vec<Secret>,
    /// The automaton's patterns: each value and its base64 forms.
    patterns: Vec<String>,
    /// Index into `secrets` of each pattern.
    pattern_secret: Vec<usize>,
    values: Option<AhoCorasick>,
    /// No pattern holds a character JSON escapes (`"`, `\`, a control character), so each
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

/// The values a redactor matches, in its order: empty ones dropped, longest first (a value that
/// contains another is replaced whole), one per value.
fn normalize(secrets: Vec<Secret>) -> Vec<Secret> {
    let mut secrets: Vec<Secret> = secrets.into_iter().filter(|s| !s.value.is_empty()).collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.value.len()));
    secrets.dedup_by(|a, b| a.value == b.value);
    secrets
}

/// The base64 forms of `value` that show wherever it is encoded, standard and URL-safe: in a
/// longer base64 stream a value starts at one of three byte offsets modulo 3, and each offset
/// encodes it differently. Each form is the characters that depend on the value's bytes only
/// (the first one or two characters of an unaligned start, and the last one of an unaligned
/// end, mix in neighbouring bytes). Padding is not part of a form, so padded and unpadded
/// encodings both contain it. Forms shorter than [`MIN_BASE64_FORM_LEN`] are left out.
fn base64_forms(value: &[u8]) -> Vec<String> {
    let mut forms: Vec<String> = Vec::new();
    for offset in 0..3usize {
        let mut bytes = vec![0u8; offset];
        bytes.extend_from_slice(value);
        // Characters before `start` hold bits of the leading filler bytes.
        let start = [0, 2, 3][offset];
        for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
            let encoded = engine.encode(&bytes);
            let end = encoded.len() - usize::from(bytes.len() % 3 != 0);
            if let Some(form) = encoded.get(start..end)
                && form.len() >= MIN_BASE64_FORM_LEN
                && !forms.iter().any(|f| f == form)
            {
                forms.push(form.to_string());
            }
        }
    }
    forms
}

/// The percent-encoded forms of `value` as a URL shows it (a token in a request path, a key in a
/// query string): every byte outside RFC 3986's unreserved set (`A-Z a-z 0-9 - . _ ~`) as
/// `%XX`, in upper- and lower-case hex. Empty when encoding changes nothing (the value itself is
/// matched anyway). Encoders that leave some reserved characters alone (`/`, `:` in a path)
/// produce a mix that this does not cover; the values we hold (tokens, keys) rarely contain
/// more than one kind of reserved character.
fn percent_forms(value: &[u8]) -> Vec<String> {
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    if value.iter().all(|&b| unreserved(b)) {
        return Vec::new();
    }
    let encode = |upper: bool| {
        let mut out = String::with_capacity(value.len() * 3);
        for &b in value {
            if unreserved(b) {
                out.push(char::from(b));
            } else if upper {
                out.push_str(&format!("%{b:02X}"));
            } else {
                out.push_str(&format!("%{b:02x}"));
            }
        }
        out
    };
    let (upper, lower) = (encode(true), encode(false));
    if upper == lower { vec![upper] } else { vec![upper, lower] }
}

impl Redactor {
    /// A redactor for these exact values (empty ones are ignored) and their base64 and
    /// percent-encoded forms.
    pub fn new(secrets: Vec<Secret>) -> Self {
        let secrets = normalize(secrets);
        let mut patterns: Vec<String> = Vec::with_capacity(secrets.len() * 4);
        let mut pattern_secret = Vec::with_capacity(secrets.len() * 4);
        for (index, secret) in secrets.iter().enumerate() {
            patterns.push(secret.value.clone());
            pattern_secret.push(index);
        }
        for (index, secret) in secrets.iter().enumerate() {
            let bytes = secret.value.as_bytes();
            for form in base64_forms(bytes).into_iter().chain(percent_forms(bytes)) {
                if !patterns.contains(&form) {
                    patterns.push(form);
                    pattern_secret.push(index);
                }
            }
        }
        let values = if patterns.is_empty() {
            None
        } else {
            AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&patterns).ok()
        };
        let values_verbatim_in_json = patterns
            .iter()
            .all(|p| !p.chars().any(|c| c == '"' || c == '\\' || c.is_ascii_control()));
        Redactor { secrets, patterns, pattern_secret, values, values_verbatim_in_json }
    }

    /// The length in bytes of the longest end of `text` that is the start of a known value (or
    /// base64 form) but not all of it: what a stream must hold back until more text shows
    /// whether a secret follows. 0 when no value can be starting.
    pub fn partial_match_len(&self, text: &str) -> usize {
        let text = text.as_bytes();
        let mut longest = 0;
        for pattern in &self.patterns {
            let pattern = pattern.as_bytes();
            let most = (pattern.len() - 1).min(text.len());
            // Longest first: the first end that matches is this pattern's answer.
            for len in (longest + 1..=most).rev() {
                if text[text.len() - len..] == pattern[..len] {
                    longest = len;
                    break;
                }
            }
        }
        longest
    }

    /// Whether `bytes` (any bytes, not only UTF-8) contain a known value or a base64 form of
    /// one: for binary data that cannot be redacted in place.
    pub fn bytes_contain_value(&self, bytes: &[u8]) -> bool {
        self.values.as_ref().is_some_and(|ac| ac.is_match(bytes))
    }

    /// Whether a redactor built from `secrets` would be this one (same names and values): a
    /// host that opens many sessions with the same secrets reuses one automaton.
    pub fn is_built_from(&self, secrets: Vec<Secret>) -> bool {
        let other = normalize(secrets);
        other.len() == self.secrets.len()
            && other.iter().zip(&self.secrets).all(|(a, b)| a.name == b.name && a.value == b.value)
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
            let name = self
                .pattern_secret
                .get(m.pattern().as_usize())
                .and_then(|&index| self.secrets.get(index))
                .map_or("SECRET", |s| s.name.as_str());
            out.push_str("[REDACTED:");
            out.push_str(name);
            out.push(']');
            last = m.end();
        }
        out.push_str(&text[last..]);
        Cow::Owned(out)
    }

    /// Replaces known values that a line break splits (wrapped base64, as `base64` prints it
    /// 76 characters a line): each is replaced whole, its line breaks included. `None` when there
    /// is none.
    fn redact_across_line_breaks(&self, text: &str) -> Option<String> {
        let ac = self.values.as_ref()?;
        if !text.contains('\n') {
            return None;
        }
        // The text without line breaks, and where each of its bytes was in `text`.
        let mut joined = Vec::with_capacity(text.len());
        let mut origin = Vec::with_capacity(text.len());
        for (index, byte) in text.bytes().enumerate() {
            if byte != b'\n' && byte != b'\r' {
                joined.push(byte);
                origin.push(index);
            }
        }
        let mut out = String::new();
        let mut last = 0;
        for m in ac.find_iter(&joined) {
            let (Some(&start), Some(&end)) = (origin.get(m.start()), origin.get(m.end() - 1))
            else {
                continue;
            };
            let end = end + 1;
            // Matches within one line were replaced by `redact_values` already.
            if end - start == m.len() || start < last {
                continue;
            }
            let name = self
                .pattern_secret
                .get(m.pattern().as_usize())
                .and_then(|&index| self.secrets.get(index))
                .map_or("SECRET", |s| s.name.as_str());
            out.push_str(text.get(last..start)?);
            out.push_str("[REDACTED:");
            out.push_str(name);
            out.push(']');
            last = end;
        }
        if last == 0 {
            return None;
        }
        out.push_str(text.get(last..)?);
        Some(out)
    }

    /// Replaces known values (also where line breaks split them) and anything shaped like a
    /// secret.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut current = self.redact_values(text);
        if let Some(joined) = self.redact_across_line_breaks(&current) {
            current = Cow::Owned(joined);
        }
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

/// Secret values that can change while a session is open (the keys of a callers.json, push
/// tokens). A [`LiveRedactor`] asks for a snapshot before every use, so it must be cheap when
/// nothing changed (a `stat`, an atomic load).
pub trait SecretSource: Send + Sync {
    /// The values now.
    fn snapshot(&self) -> SecretSnapshot;
}

/// What a [`SecretSource`] holds at one moment.
#[derive(Clone, Debug)]
pub struct SecretSnapshot {
    /// Changes whenever `secrets` does (equal versions of one source mean equal values).
    pub version: u64,
    pub secrets: Arc<[Secret]>,
}

/// Shares the last redactor it built: sessions opened with the same values get the same
/// automaton (building it is a good part of opening a session).
#[derive(Default)]
pub struct RedactorCache {
    last: Mutex<Option<Arc<Redactor>>>,
}

impl fmt::Debug for RedactorCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RedactorCache")
    }
}

impl RedactorCache {
    /// A redactor for `secrets`: the last one when it was built from the same values.
    pub fn get(&self, secrets: Vec<Secret>) -> Arc<Redactor> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(redactor) = last.as_ref()
            && redactor.is_built_from(secrets.clone())
        {
            return redactor.clone();
        }
        let redactor = Arc::new(Redactor::new(secrets));
        *last = Some(redactor.clone());
        redactor
    }
}

/// A session's redactor: fixed values plus [`SecretSource`]s, rebuilt when a source's version
/// changes. [`LiveRedactor::current`] is what to redact with now.
pub struct LiveRedactor {
    fixed: Vec<Secret>,
    sources: Vec<Arc<dyn SecretSource>>,
    cache: Arc<RedactorCache>,
    /// The redactor for the sources' versions it was built at.
    built: Mutex<(Vec<u64>, Arc<Redactor>)>,
}

impl fmt::Debug for LiveRedactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LiveRedactor({} fixed, {} sources)", self.fixed.len(), self.sources.len())
    }
}

impl LiveRedactor {
    /// A redactor for `fixed` plus whatever `sources` hold, built through `cache`.
    pub fn new(
        fixed: Vec<Secret>,
        sources: Vec<Arc<dyn SecretSource>>,
        cache: Arc<RedactorCache>,
    ) -> Self {
        let snapshots: Vec<SecretSnapshot> = sources.iter().map(|s| s.snapshot()).collect();
        let redactor = build(&fixed, &snapshots, &cache);
        let versions = snapshots.iter().map(|s| s.version).collect();
        LiveRedactor { fixed, sources, cache, built: Mutex::new((versions, redactor)) }
    }

    /// A redactor whose values never change.
    pub fn fixed(redactor: Arc<Redactor>) -> Self {
        LiveRedactor {
            fixed: redactor.secrets.clone(),
            sources: Vec::new(),
            cache: Arc::new(RedactorCache::default()),
            built: Mutex::new((Vec::new(), redactor)),
        }
    }

    /// The redactor for the values as they are now: one snapshot per source, and a rebuild
    /// only when a version changed.
    pub fn current(&self) -> Arc<Redactor> {
        if self.sources.is_empty() {
            return self.lock().1.clone();
        }
        let snapshots: Vec<SecretSnapshot> = self.sources.iter().map(|s| s.snapshot()).collect();
        let mut built = self.lock();
        if built.0.len() == snapshots.len()
            && built.0.iter().zip(&snapshots).all(|(version, s)| *version == s.version)
        {
            return built.1.clone();
        }
        let redactor = build(&self.fixed, &snapshots, &self.cache);
        *built = (snapshots.iter().map(|s| s.version).collect(), redactor.clone());
        redactor
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<u64>, Arc<Redactor>)> {
        self.built.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn build(fixed: &[Secret], snapshots: &[SecretSnapshot], cache: &RedactorCache) -> Arc<Redactor> {
    let mut all = fixed.to_vec();
    for snapshot in snapshots {
        all.extend(snapshot.secrets.iter().cloned());
    }
    cache.get(all)
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
    fn short_explicit_values_are_redacted() {
        assert_eq!(redactor().redact("x abc y"), "x [REDACTED:SHORT] y");
    }

    #[test]
    fn base64_forms_are_redacted_at_every_offset_and_alphabet() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE};
        let secret = "k?>~s3cr3t-value-123?>~";
        let r = Redactor::new(vec![Secret { name: "K".into(), value: secret.into() }]);
        for prefix in ["", "a", "ab", "abc", "abcd"] {
            for suffix in ["", "z", "zy", "zyx\n"] {
                let plain = format!("{prefix}{secret}{suffix}");
                for engine in [STANDARD, URL_SAFE, STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
                    let encoded = engine.encode(&plain);
                    let redacted = r.redact_values(&encoded);
                    assert!(redacted.contains("[REDACTED:K]"), "{prefix:?} {suffix:?} {encoded}");
                    assert!(r.bytes_contain_value(encoded.as_bytes()));
                }
            }
        }
        assert!(!r.bytes_contain_value(b"nothing here at all"));
    }

    #[test]
    fn percent_encoded_forms_are_redacted_in_either_hex_case() {
        let r = Redactor::new(vec![Secret { name: "T".into(), value: "123456:AAE-x y/z".into() }]);
        for text in [
            "GET /bot123456%3AAAE-x%20y%2Fz/getMe",
            "GET /bot123456%3aAAE-x%20y%2fz/getMe",
            "GET /bot123456:AAE-x y/z/getMe",
        ] {
            assert_eq!(r.redact_values(text), "GET /bot[REDACTED:T]/getMe", "{text}");
            assert!(r.bytes_contain_value(text.as_bytes()), "{text}");
        }
        assert_eq!(percent_forms(b"sk-ant_0.9~"), Vec::<String>::new());
        assert_eq!(percent_forms(b"a:1"), vec!["a%3A1".to_string(), "a%3a1".to_string()]);
    }

    #[test]
    fn values_split_by_line_breaks_are_redacted_whole() {
        use base64::engine::general_purpose::STANDARD;
        let r = redactor();
        assert_eq!(r.redact("a s3cr3t-va\nlue-123 b\nc"), "a [REDACTED:MY_TOKEN] b\nc");
        // `base64` wraps its output every 76 characters.
        let encoded = STANDARD.encode(format!("{}s3cr3t-value-123 and more", "x".repeat(50)));
        let wrapped = format!("{}\n{}", &encoded[..76], &encoded[76..]);
        let redacted = r.redact(&wrapped);
        assert!(redacted.contains("[REDACTED:MY_TOKEN]"), "{redacted}");
        assert_eq!(r.redact("no\nsecret\r\nhere"), "no\nsecret\r\nhere");
    }

    #[test]
    fn partial_match_len_is_the_longest_end_that_starts_a_value() {
        let r = redactor();
        assert_eq!(r.partial_match_len("x s3cr3t-va"), "s3cr3t-va".len());
        assert_eq!(r.partial_match_len("x ab"), 2);
        assert_eq!(r.partial_match_len("x abd"), 0);
        // `c` starts a base64 form of the long value (`czNj…`).
        assert_eq!(r.partial_match_len("x abc"), 1);
        assert_eq!(r.partial_match_len("nothing"), 0);
        assert_eq!(r.partial_match_len(""), 0);
        assert_eq!(Redactor::default().partial_match_len("s3cr3t"), 0);
    }

    #[test]
    fn base64_forms_of_short_values_are_not_matched() {
        assert_eq!(base64_forms(b"abc"), Vec::<String>::new());
        assert_eq!(redactor().redact("YWJj"), "YWJj");
    }

    struct Switch(Mutex<SecretSnapshot>);

    impl SecretSource for Switch {
        fn snapshot(&self) -> SecretSnapshot {
            self.0.lock().unwrap().clone()
        }
    }

    #[test]
    fn live_redactor_follows_its_sources() {
        let source = Arc::new(Switch(Mutex::new(SecretSnapshot {
            version: 1,
            secrets: Arc::from(vec![Secret { name: "A".into(), value: "one".into() }]),
        })));
        let fixed = vec![Secret { name: "F".into(), value: "fixed-value".into() }];
        let live =
            LiveRedactor::new(fixed, vec![source.clone()], Arc::new(RedactorCache::default()));
        assert_eq!(live.current().redact("one two fixed-value"), "[REDACTED:A] two [REDACTED:F]");
        let before = live.current();
        assert!(Arc::ptr_eq(&before, &live.current()));
        *source.0.lock().unwrap() = SecretSnapshot {
            version: 2,
            secrets: Arc::from(vec![Secret { name: "B".into(), value: "two".into() }]),
        };
        assert_eq!(live.current().redact("one two fixed-value"), "one [REDACTED:B] [REDACTED:F]");
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
