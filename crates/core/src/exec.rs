//! The environment child processes run with, and the secrets taken out of it.
//!
//! Tools never inherit the host environment as is: variables whose names look like credentials
//! (and the host's own configuration sections) are removed, and their values are handed to the
//! [`Redactor`](crate::redact::Redactor) so that they are hidden wherever they still show up.
//! The host passes its environment in; the core never reads process env vars itself.

use std::collections::BTreeMap;
use std::fmt;

use crate::redact::Secret;

/// Name fragments (upper case) that mark a variable as secret.
const SECRET_NAME_PARTS: &[&str] =
    &["KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE", "COOKIE", "AUTH"];

/// Name prefixes (upper case) of provider variables and host config sections that carry secrets.
const SECRET_NAME_PREFIXES: &[&str] = &[
    "ANTHROPIC_",
    "OPENAI_",
    "GEMINI_",
    "OPENROUTER_",
    "AZURE_",
    "AWS_",
    "TELEGRAM__",
    "A2A__",
    "PROVIDER__",
    "CONNECTIONSTRINGS__",
    "GOOGLE__",
];

/// Exact names (upper case) that carry secrets without saying so.
const SECRET_NAMES: &[&str] = &["DATABASE_URL", "GOOGLE_API_KEY"];

/// Whether a variable with this name should be kept from child processes.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|part| upper.contains(part))
        || SECRET_NAME_PREFIXES.iter().any(|prefix| upper.starts_with(prefix))
        || SECRET_NAMES.contains(&upper.as_str())
        || upper.ends_with("_DSN")
}

/// The environment for child processes plus the secrets removed from it.
#[derive(Clone, Default)]
pub struct ExecEnv {
    vars: BTreeMap<String, String>,
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
            if is_secret_name(&name) && !allow.iter().any(|a| a.eq_ignore_ascii_case(&name)) {
                removed.push(Secret { name, value });
            } else {
                vars.insert(name, value);
            }
        }
        ExecEnv { vars, removed }
    }

    /// The variables a child process gets.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The secrets removed from the host environment.
    pub fn removed(&self) -> &[Secret] {
        &self.removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names_are_removed() {
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
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = ExecEnv::from_host(host, &["gh_token".to_string()]);
        let kept: Vec<&str> = env.vars().map(|(k, _)| k).collect();
        assert_eq!(kept, vec!["GH_TOKEN", "HOME", "PATH"]);
        let mut removed: Vec<&str> = env.removed().iter().map(|s| s.name.as_str()).collect();
        removed.sort_unstable();
        assert_eq!(
            removed,
            vec![
                "A2A__PublicUrl",
                "ANTHROPIC_API_KEY",
                "MY_SERVICE_TOKEN",
                "OPENAI_BASE_URL",
                "PG_DSN",
                "Telegram__BotToken",
                "db_password"
            ]
        );
    }
}
