//! The environment child processes run with, and the credentials found in the host's.
//!
//! Tools never inherit the host environment as is. The owner's sessions get it minus the
//! variables whose names look like credentials and the host's own configuration sections (a
//! deny-list, [`ExecEnv::from_host`]); callers' sessions get only a few variables every program
//! needs plus those the owner names (an allow-list, [`ExecEnv::for_callers`]), since a name that
//! looks harmless can hold a password all the same. Either way every value of the host
//! environment that looks like a credential, passed on or not, is handed to the
//! [`Redactor`](crate::redact::Redactor) so that it is hidden wherever it shows up.
//! The host passes its environment in; the core never reads process env vars itself.

use std::collections::BTreeMap;
use std::fmt;

use crate::redact::Secret;

/// Name fragments (upper case) that mark a variable as secret: kept from children, and its value
/// redacted wherever it shows up.
const SECRET_NAME_PARTS: &[&str] =
    &["KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE", "COOKIE"];

/// Whole `_`-separated words (upper case) that mark a variable as secret (`AUTH` as a word, so
/// `GIT_AUTHOR_NAME` is not one).
const SECRET_NAME_WORDS: &[&str] = &["AUTH", "AUTHORIZATION", "DSN"];

/// Exact names (upper case) that carry secrets without saying so.
const SECRET_NAMES: &[&str] = &["DATABASE_URL"];

/// Name prefixes (upper case) of sections whose every value is a secret.
const SECRET_PREFIXES: &[&str] = &["CONNECTIONSTRINGS__"];

/// More name fragments (upper case) whose values are credentials, though the owner's sessions
/// still get them (the deny-list above is what they always had): redacted only.
const CREDENTIAL_NAME_PARTS: &[&str] = &["WEBHOOK", "PASSPHRASE"];

/// More whole `_`-separated words (upper case) of credential names, redacted only: as parts
/// they would catch `PATH` (`PAT`), `PASSENGER_ENV` (`PASS`) or `PWD` itself.
const CREDENTIAL_NAME_WORDS: &[&str] =
    &["PWD", "PW", "PASS", "PAT", "SESSION", "CRED", "CREDS", "OTP", "TOTP", "NETRC"];

/// Names that hold a credential word without being credentials: the shell's working folders and
/// the desktop session's plumbing.
const NOT_CREDENTIAL_NAMES: &[&str] =
    &["PWD", "OLDPWD", "DBUS_SESSION_BUS_ADDRESS", "SESSION_MANAGER", "DESKTOP_SESSION"];

/// Words that end like a run-together credential word (`SSHPASS`) without being one.
const LOOKALIKE_WORDS: &[&str] = &["OLDPWD", "COMPASS", "BYPASS", "ENCOMPASS", "SURPASS"];

/// Prefixes (upper case) of names that are never credentials (the desktop session's facts).
const NOT_CREDENTIAL_PREFIXES: &[&str] = &["XDG_SESSION_"];

/// Name prefixes (upper case) of the model providers' variables: kept from children (the agent
/// has no business with the host's setup) but not redacted unless they look secret. The host's
/// own configuration variables are the host's to name ([`ExecEnv::from_host`]).
const PROVIDER_PREFIXES: &[&str] =
    &["ANTHROPIC_", "OPENAI_", "GEMINI_", "OPENROUTER_", "AZURE_OPENAI_", "GOOGLE__"];

/// The variables every caller's session gets from the host when they are set: what programs
/// need to be found and to speak the owner's language and time. `HOME` is the sandbox's own
/// where there is a sandbox.
pub const CALLER_ENV: &[&str] = &["PATH", "LANG", "TZ", "HOME", "TERM"];

/// The shortest value taken for a random token by its looks alone.
const MIN_TOKEN_LEN: usize = 20;

/// Whether a variable is removed from the owner's children (and its value redacted): the
/// deny-list.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|part| upper.contains(part))
        || upper.split('_').any(|word| SECRET_NAME_WORDS.contains(&word))
        || SECRET_NAMES.contains(&upper.as_str())
        || SECRET_PREFIXES.iter().any(|prefix| upper.starts_with(prefix))
}

/// Whether a variable's name says its value is a credential: the deny-list's names, and those
/// with a credential word (`MYSQL_PWD`, `SMTP_PASS`, `GH_PAT`, `SLACK_WEBHOOK_URL`,
/// `AWS_SESSION`), except the few that only look so (`PWD`, `DBUS_SESSION_BUS_ADDRESS`).
pub fn is_credential_name(name: &str) -> bool {
    if is_secret_name(name) {
        return true;
    }
    let upper = name.to_ascii_uppercase();
    if NOT_CREDENTIAL_NAMES.contains(&upper.as_str())
        || NOT_CREDENTIAL_PREFIXES.iter().any(|prefix| upper.starts_with(prefix))
    {
        return false;
    }
    let words = || upper.split('_').filter(|word| !word.is_empty());
    CREDENTIAL_NAME_PARTS.iter().any(|part| upper.contains(part))
        || words().any(|word| CREDENTIAL_NAME_WORDS.contains(&word))
        // Run together: `SSHPASS`, `PGPASS`, `MYSQLPWD`.
        || words().any(|word| {
            (word.ends_with("PASS") || word.ends_with("PWD")) && !LOOKALIKE_WORDS.contains(&word)
        })
        // A database's address, which holds its password more often than not: `DB_URI`,
        // `MONGODB_URI`, `POSTGRES_DB_URL`.
        || (words().any(|word| word.ends_with("DB") || word == "DATABASE")
            && words().any(|word| word == "URI" || word == "URL"))
        // A connection string (`CONN_STR`, `CONNECTION_STRING`), which carries its password.
        || (words().any(|word| word == "CONN" || word == "CONNECTION")
            && words().any(|word| word == "STR" || word == "STRING"))
}

/// Whether a variable belongs to a model provider's or the host's configuration (`host_config`:
/// the host's name prefixes, upper case): kept from children.
fn is_host_name(name: &str, host_config: &[&str]) -> bool {
    let upper = name.to_ascii_uppercase();
    PROVIDER_PREFIXES.iter().chain(host_config).any(|prefix| upper.starts_with(prefix))
}

/// The credentials in the host variable `name=value`, as the texts to redact: the whole value
/// when the name says it is one ([`is_credential_name`]) or the value looks like a random token;
/// for every URL in the value with a password in its user info (`redis://:pw@host`), or a
/// random-looking token in its path or query (a webhook), the whole value and that password
/// (also percent-decoded) or token. Empty when nothing looks like a credential.
pub fn credentials(name: &str, value: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut add = |text: &str| {
        if !text.is_empty() && !found.iter().any(|f| f == text) {
            found.push(text.to_string());
        }
    };
    if is_credential_name(name) || looks_like_token(value) {
        add(value);
    }
    for piece in value.split(|c: char| c.is_whitespace() || c == ',' || c == ';') {
        let Some(url) = UrlParts::of(piece) else { continue };
        if let Some(password) = url.password {
            add(value);
            add(password);
            add(&percent_decoded(password));
        }
        for token in url.rest.split(['/', '?', '&', '=', '#']).filter(|s| looks_like_token(s)) {
            add(value);
            add(token);
        }
    }
    found
}

/// Whether `name=value` holds a credential (see [`credentials`]).
pub fn looks_like_credential(name: &str, value: &str) -> bool {
    !credentials(name, value).is_empty()
}

/// What of a URL can hold a credential.
struct UrlParts<'a> {
    /// The user info's password, when it has a non-empty one.
    password: Option<&'a str>,
    /// The path, query and fragment.
    rest: &'a str,
}

impl<'a> UrlParts<'a> {
    /// `text` read as `scheme://[user[:password]@]host[/path][?query]`, or `None`.
    fn of(text: &'a str) -> Option<Self> {
        let (scheme, after) = text.split_once("://")?;
        let scheme_ok = scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c));
        if !scheme_ok {
            return None;
        }
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        let (authority, rest) = after.split_at(end);
        let password = authority
            .rfind('@')
            .and_then(|at| authority[..at].split_once(':'))
            .map(|(_, password)| password)
            .filter(|password| !password.is_empty());
        Some(UrlParts { password, rest })
    }
}

/// `text` with its `%XX` escapes decoded (left as is when that is not UTF-8).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(high), Some(low)) =
                (bytes.get(i + 1).and_then(|&b| hex(b)), bytes.get(i + 2).and_then(|&b| hex(b)))
        {
            out.push(u8::try_from(high * 16 + low).unwrap_or(b'%'));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// Whether `text` looks like a random token (an API key, a hex digest, a base64 secret): at
/// least [`MIN_TOKEN_LEN`] characters of the alphabets tokens use, not a path, little
/// punctuation (version strings and file names have more), letters and digits mixed, and either
/// hex throughout or changing between upper case, lower case and digits as often as random text
/// does (words and names with a number change rarely).
fn looks_like_token(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() < MIN_TOKEN_LEN
        || !bytes.iter().all(|&b| b.is_ascii_alphanumeric() || b"+/=_-.~".contains(&b))
        || matches!(bytes.first(), Some(b'/' | b'.' | b'~'))
    {
        return false;
    }
    let punctuation = bytes.iter().filter(|b| !b.is_ascii_alphanumeric()).count();
    let digits = bytes.iter().filter(|b| b.is_ascii_digit()).count();
    let letters = bytes.iter().filter(|b| b.is_ascii_alphabetic()).count();
    if punctuation * 8 > bytes.len() || digits == 0 || letters == 0 {
        return false;
    }
    let alnum: Vec<u8> = bytes.iter().copied().filter(u8::is_ascii_alphanumeric).collect();
    if alnum.iter().all(u8::is_ascii_hexdigit) {
        return true;
    }
    let class = |b: u8| {
        if b.is_ascii_digit() {
            0
        } else if b.is_ascii_uppercase() {
            1
        } else {
            2
        }
    };
    let changes = alnum.windows(2).filter(|pair| class(pair[0]) != class(pair[1])).count();
    // Random base62 changes class at about 6 pairs in 10, random hex or upper case and digits at
    // 4 to 5; a word with a number at 1 or 2.
    changes * 10 >= (alnum.len() - 1) * 3
}

/// The environment for child processes, and the credentials of the host environment.
#[derive(Clone, Default)]
pub struct ExecEnv {
    vars: BTreeMap<String, String>,
    /// Every credential of the host environment, passed on or not: redacted.
    secrets: Vec<Secret>,
}

impl fmt::Debug for ExecEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecEnv")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl ExecEnv {
    /// The owner's sessions' environment: the host's variables minus those whose names look
    /// secret ([`is_secret_name`]), the model providers' variables, and the host's own
    /// configuration, named by its prefixes in `host_config` (upper case, such as `"AGENT__"`).
    /// `allow` re-admits names on purpose (for example a `GH_TOKEN` the owner wants the agent to
    /// use); their values are redacted all the same.
    pub fn from_host(
        host: impl IntoIterator<Item = (String, String)>,
        allow: &[String],
        host_config: &[&str],
    ) -> Self {
        let mut vars = BTreeMap::new();
        let mut secrets = Vec::new();
        for (name, value) in host {
            collect_credentials(&name, &value, &mut secrets);
            let allowed = allow.iter().any(|a| a.eq_ignore_ascii_case(&name));
            if allowed || (!is_secret_name(&name) && !is_host_name(&name, host_config)) {
                vars.insert(name, value);
            }
        }
        ExecEnv { vars, secrets }
    }

    /// Callers' sessions' environment: only the host's [`CALLER_ENV`] variables and those
    /// `named` by the owner, the named ones only when neither their name nor their value looks
    /// like a credential (see [`looks_like_credential`]; the owner learns of a left-out name
    /// by comparing with [`ExecEnv::vars`]). Names match exactly, as the environment spells them.
    pub fn for_callers(host: impl IntoIterator<Item = (String, String)>, named: &[String]) -> Self {
        let mut vars = BTreeMap::new();
        let mut secrets = Vec::new();
        for (name, value) in host {
            collect_credentials(&name, &value, &mut secrets);
            let passed = CALLER_ENV.contains(&name.as_str())
                || (named.contains(&name) && !looks_like_credential(&name, &value));
            if passed {
                vars.insert(name, value);
            }
        }
        ExecEnv { vars, secrets }
    }

    /// The variables a child process gets.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Every credential found in the host environment ([`credentials`]), whether it was passed
    /// on or not, named after its variable: the values to redact.
    pub fn secrets(&self) -> &[Secret] {
        &self.secrets
    }
}

fn collect_credentials(name: &str, value: &str, into: &mut Vec<Secret>) {
    for credential in credentials(name, value) {
        into.push(Secret { name: name.to_string(), value: credential });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn secret_names(env: &ExecEnv) -> Vec<&str> {
        let mut names: Vec<&str> = env.secrets().iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    #[test]
    fn secret_looking_names_are_removed_and_host_config_kept_from_the_owners_children() {
        let host = host(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/me"),
            ("ANTHROPIC_API_KEY", "sk-ant-x"),
            ("OPENAI_BASE_URL", "http://x"),
            ("MY_SERVICE_TOKEN", "t"),
            ("db_password", "p"),
            ("Telegram__BotToken", "b"),
            ("A2A__PublicUrl", "u"),
            ("PG_DSN", "d"),
            ("GH_TOKEN", "allowed"),
            ("GIT_AUTHOR_NAME", "Ada"),
            ("AWS_REGION", "eu-west-1"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("HTTP_AUTH", "h"),
            ("ConnectionStrings__Main", "Server=x;Password=y"),
        ]);
        let env = ExecEnv::from_host(host, &["gh_token".to_string()], &["TELEGRAM__", "A2A__"]);
        let kept: Vec<&str> = env.vars().map(|(k, _)| k).collect();
        assert_eq!(kept, vec!["AWS_REGION", "GH_TOKEN", "GIT_AUTHOR_NAME", "HOME", "PATH"]);
        // Allowed through, and redacted all the same.
        assert_eq!(
            secret_names(&env),
            vec![
                "ANTHROPIC_API_KEY",
                "AWS_SECRET_ACCESS_KEY",
                "ConnectionStrings__Main",
                "GH_TOKEN",
                "HTTP_AUTH",
                "MY_SERVICE_TOKEN",
                "PG_DSN",
                "Telegram__BotToken",
                "db_password"
            ]
        );
    }

    /// The variables of the reported leak, and how each one is recognised.
    const LEAKED: &[(&str, &str)] = &[
        ("MYSQL_PWD", "mysql-pw-Zq81vX"),
        ("REDIS_URL", "redis://:r3dis-Pa55@cache.internal:6379/0"),
        ("SMTP_PASS", "smtp-pass-Jk2Lm9"),
        ("GH_PAT", "ghpat-value-H7fK2pQ9"),
        ("SLACK_WEBHOOK_URL", "https://hooks.slack.com/services/T0/B0/abc"),
        ("AWS_SESSION", "aws-session-Qm3Rt8"),
    ];

    #[test]
    fn the_owners_sessions_keep_their_variables_but_every_credential_is_redacted() {
        let mut pairs = LEAKED.to_vec();
        pairs.push(("LANG", "C.UTF-8"));
        let env = ExecEnv::from_host(host(&pairs), &[], &[]);
        let kept: Vec<&str> = env.vars().map(|(k, _)| k).collect();
        assert_eq!(
            kept,
            vec![
                "AWS_SESSION",
                "GH_PAT",
                "LANG",
                "MYSQL_PWD",
                "REDIS_URL",
                "SLACK_WEBHOOK_URL",
                "SMTP_PASS"
            ],
            "the deny-list is what it was"
        );
        let values: Vec<&str> = env.secrets().iter().map(|s| s.value.as_str()).collect();
        for (_, value) in LEAKED {
            assert!(values.contains(value), "{value} is redacted");
        }
        assert!(values.contains(&"r3dis-Pa55"), "the URL's password alone too");
        assert!(!values.contains(&"C.UTF-8"));
    }

    #[test]
    fn callers_get_the_allow_list_and_named_variables_that_hold_no_credential() {
        let mut pairs = LEAKED.to_vec();
        pairs.extend([
            ("PATH", "/usr/bin:/bin"),
            ("LANG", "C.UTF-8"),
            ("TZ", "Europe/Berlin"),
            ("HOME", "/home/me"),
            ("TERM", "xterm"),
            ("EDITOR", "vi"),
            ("TOOL_MODE", "fast"),
            ("BUILD_URL", "https://u:hunter22@ci.example/job"),
            ("path", "/not/the/path"),
        ]);
        let named = ["TOOL_MODE".to_string(), "BUILD_URL".to_string(), "GH_PAT".to_string()];
        let env = ExecEnv::for_callers(host(&pairs), &named);
        let kept: Vec<(&str, &str)> = env.vars().collect();
        assert_eq!(
            kept,
            vec![
                ("HOME", "/home/me"),
                ("LANG", "C.UTF-8"),
                ("PATH", "/usr/bin:/bin"),
                ("TERM", "xterm"),
                ("TOOL_MODE", "fast"),
                ("TZ", "Europe/Berlin"),
            ]
        );
        // What callers do not get is still redacted.
        assert!(secret_names(&env).contains(&"BUILD_URL"));
        assert!(secret_names(&env).contains(&"MYSQL_PWD"));
    }

    #[test]
    fn credential_names_are_told_from_lookalikes() {
        for name in [
            "MYSQL_PWD",
            "SMTP_PASS",
            "GH_PAT",
            "SLACK_WEBHOOK_URL",
            "AWS_SESSION",
            "AWS_SESSION_TOKEN",
            "GPG_PASSPHRASE",
            "TERM_SESSION_ID",
            "api_key",
            "DATABASE_URL",
            "SSHPASS",
            "PGPASS",
            "MYSQLPWD",
            "DB_URI",
            "MONGODB_URI",
            "POSTGRES_DB_URL",
            "ADMIN_PW",
            "LDAP_BIND_PW",
            "PW",
            "CREDS",
            "OTP_SEED",
            "CONN_STR",
            "CONNECTION_STRING",
            "NETRC",
        ] {
            assert!(is_credential_name(name), "{name}");
        }
        for name in [
            "PWD",
            "OLDPWD",
            "PATH",
            "LD_LIBRARY_PATH",
            "PYTHONPATH",
            "PASSENGER_APP_ENV",
            "COMPASS_HOME",
            "PROXY_BYPASS",
            "DBUS_SESSION_BUS_ADDRESS",
            "XDG_SESSION_TYPE",
            "SESSION_MANAGER",
            "DESKTOP_SESSION",
            "GIT_AUTHOR_NAME",
            "LANG",
        ] {
            assert!(!is_credential_name(name), "{name}");
        }
    }

    #[test]
    fn random_tokens_are_told_from_versions_paths_and_words() {
        for token in [
            "d41d8cd98f00b204e9800998ecf8427e",
            "5f0c2e5e-3b1a-4c77-9a3e-2f5d1c9b8a7e",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "Xq7pLm2Nz9Rt4Kw8Vb1Yc6Hd",
            "AB12CD34EF56GH78IJ90KL12",
            "dGhpcyBpcyBhIHNlY3JldCB2YWx1ZQ==",
        ] {
            assert!(looks_like_token(token), "{token}");
        }
        for text in [
            "C.UTF-8",
            "1.2.3-alpha.4+build.567890",
            "/usr/local/bin:/usr/bin:/bin",
            "/home/me/projects/x1234567890abcdef",
            "x86_64-unknown-linux-gnu",
            "MyApplication2024Production",
            "production_environment_name",
            "abcdefghijklmnopqrstuvwxyz",
            "12345678901234567890123",
            "short1A",
            "has spaces 8f00b204e9800998ecf8427e",
        ] {
            assert!(!looks_like_token(text), "{text}");
        }
    }

    #[test]
    fn urls_give_their_password_and_path_tokens() {
        assert_eq!(
            credentials("CACHE", "redis://:p%40ss-w0rd@cache:6379/0"),
            vec!["redis://:p%40ss-w0rd@cache:6379/0", "p%40ss-w0rd", "p@ss-w0rd"]
        );
        assert_eq!(
            credentials("MIRRORS", "https://a.example/x, https://user:pw123456@b.example/y"),
            vec!["https://a.example/x, https://user:pw123456@b.example/y", "pw123456"]
        );
        let hook = "https://hooks.example.com/services/T00/B00/Xq7pLm2Nz9Rt4Kw8Vb1Yc6Hd";
        assert_eq!(credentials("NOTIFY", hook), vec![hook, "Xq7pLm2Nz9Rt4Kw8Vb1Yc6Hd"]);
        let query = "https://api.example/v1?access_token=d41d8cd98f00b204e9800998ecf8427e&x=1";
        assert_eq!(credentials("FEED", query), vec![query, "d41d8cd98f00b204e9800998ecf8427e"]);
        assert!(credentials("HOMEPAGE", "https://user@example.com/docs/page-1").is_empty());
        assert!(credentials("PROXY", "http://proxy.internal:3128").is_empty());
        assert!(credentials("EDITOR", "vi").is_empty());
    }
}
