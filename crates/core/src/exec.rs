//! The environment child processes run with, and the secrets taken out of it.
//!
//! Tools never inherit the host environment as is: variables whose names look like credentials
//! (and the host's own configuration sections) are removed, and their values are handed to the
//! [`Redactor`](crate::redact::Redactor) so that they are hidden wherever they still show up.
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

/// Name prefixes (upper case) of provider variables and host configuration: kept from children
/// (the agent has no business with the host's setup) but not redacted unless they look secret.
const HOST_PREFIXES: &[&str] = &[
    "ANTHROPIC_",
    "OPENAI_",
    "GEMINI_",
    "OPENROUTER_",
    "AZURE_OPENAI_",
    "TELEGRAM__",
    "A2A__",
    "PROVIDER__",
    "AGENT__",
    "GOOGLE__",
];

/// Whether a variable's value is a secret (kept from children and redacted).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|part| upper.contains(part))
        || upper.split('_').any(|word| SECRET_NAME_WORDS.contains(&word))
        || SECRET_NAMES.contains(&upper.as_str())
        || SECRET_PREFIXES.iter().any(|prefix| upper.starts_with(prefix))
}

/// Whether a variable belongs to the host's configuration (kept from children).
pub fn is_host_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    HOST_PREFIXES.iter().any(|prefix| upper.starts_with(prefix))
}

/// The environment for child processes plus the secrets removed from it.
#[derive(Clone, Default)]
pub struct ExecEnv {
    vars: BTreeMap<String, String>,
    /// Secret variables: kept from children and redacted.
    removed: Vec<Secret>,
}

impl fmt::Debug for ExecEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecEnv")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("removed", &self.removed.len())
            .finish()
    }
}

impl ExecEnv {
    /// Builds the child environment from the host's variables. `allow` re-admits names on purpose
    /// (for example a `GH_TOKEN` the owner wants the agent to use).
    pub fn from_host(host: impl IntoIterator<Item = (String, String)>, allow: &[String]) -> Self {
        let mut vars = BTreeMap::new();
        let mut removed = Vec::new();
        for (name, value) in host {
            if allow.iter().any(|a| a.eq_ignore_ascii_case(&name)) {
                vars.insert(name, value);
            } else if is_secret_name(&name) {
                removed.push(Secret { name, value });
            } else if !is_host_name(&name) {
                vars.insert(name, value);
            }
        }
        ExecEnv { vars, removed }
    }

    /// The variables a child process gets.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The secrets removed from the host environment (host configuration that is not secret is
    /// removed too, but not listed here: it is not redacted).
    pub fn removed(&self) -> &[Secret] {
        &self.removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names_are_removed_and_host_config_kept_from_children() {
        let host = [
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
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = ExecEnv::from_host(host, &["gh_token".to_string()]);
        let kept: Vec<&str> = env.vars().map(|(k, _)| k).collect();
        assert_eq!(kept, vec!["AWS_REGION", "GH_TOKEN", "GIT_AUTHOR_NAME", "HOME", "PATH"]);
        let mut removed: Vec<&str> = env.removed().iter().map(|s| s.name.as_str()).collect();
        removed.sort_unstable();
        assert_eq!(
            removed,
            vec![
                "ANTHROPIC_API_KEY",
                "AWS_SECRET_ACCESS_KEY",
                "ConnectionStrings__Main",
                "HTTP_AUTH",
                "MY_SERVICE_TOKEN",
                "PG_DSN",
                "Telegram__BotToken",
                "db_password"
            ]
        );
    }
}
