//! Push configs (A2A 1.0.1 §4.3.1) as the task file stores them: the config, its payload
//! format, the rules of the list (upsert, a cap) and of secrets. The CRUD operations over them are
//! the service's (`service::push_config`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Push tokens and credentials shorter than this are refused at registration: they are redacted
/// from everything a session sends out, and a short one would match ordinary text.
pub const MIN_PUSH_SECRET_CHARS: usize = 8;

/// The payload shape a webhook gets: the version the config was registered through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PushFormat {
    /// The 1.0 StreamResponse `{"task": …}` (A2A 1.0.1 §4.3.3).
    #[default]
    #[serde(rename = "1.0")]
    V1_0,
    /// The bare 0.3 Task with `"kind": "task"` (what 0.3 webhooks got).
    #[serde(rename = "0.3")]
    V0_3,
}

/// A push config as the task file keeps it: the 1.0 flat config (with its `id` always set) plus
/// the payload format.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredPushConfig {
    #[serde(flatten)]
    pub config: a2a::TaskPushNotificationConfig,
    #[serde(default)]
    pub format: PushFormat,
}

impl StoredPushConfig {
    /// The config id (assigned when the config was stored).
    pub fn id(&self) -> &str {
        self.config.id.as_deref().unwrap_or("")
    }
}

/// The token and credentials are secrets of the caller and its webhook.
impl fmt::Debug for StoredPushConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |set: bool| if set { "[redacted]" } else { "none" };
        f.debug_struct("StoredPushConfig")
            .field("id", &self.config.id)
            .field("task_id", &self.config.task_id)
            .field(
                "host",
                &reqwest::Url::parse(&self.config.url)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_string)),
            )
            .field("token", &redacted(self.config.token.is_some()))
            .field(
                "authentication",
                &self.config.authentication.as_ref().map(|auth| {
                    format!("{} {}", auth.scheme, redacted(auth.credentials.is_some()))
                }),
            )
            .field("format", &self.format)
            .finish()
    }
}

/// Most push configs one task keeps: each state change is POSTed to every one, so an unbounded
/// list would let a caller turn one task into a flood of requests at someone else's webhook.
pub const MAX_PUSH_CONFIGS: usize = 10;

/// Adds `config` to `configs`, replacing the config with the same id (create is an upsert). A new
/// config beyond [`MAX_PUSH_CONFIGS`] replaces the oldest one.
pub(crate) fn upsert(configs: &mut Vec<StoredPushConfig>, config: StoredPushConfig) {
    match configs.iter_mut().find(|existing| existing.id() == config.id()) {
        Some(existing) => *existing = config,
        None => {
            if configs.len() >= MAX_PUSH_CONFIGS {
                configs.remove(0);
            }
            configs.push(config);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(id: &str, url: &str) -> StoredPushConfig {
        StoredPushConfig {
            config: a2a::TaskPushNotificationConfig {
                url: url.into(),
                id: Some(id.into()),
                task_id: "t1".into(),
                token: Some("tok-secret".into()),
                authentication: Some(a2a::AuthenticationInfo {
                    scheme: "Bearer".into(),
                    credentials: Some("cred-secret".into()),
                }),
                tenant: None,
            },
            format: PushFormat::V0_3,
        }
    }

    #[test]
    fn stored_push_config_json_is_flat_with_format() {
        let stored = config("c1", "https://hook");
        let value = serde_json::to_value(&stored).unwrap();
        assert_eq!(
            value,
            json!({"url": "https://hook", "id": "c1", "taskId": "t1", "token": "tok-secret",
                   "authentication": {"scheme": "Bearer", "credentials": "cred-secret"},
                   "format": "0.3"})
        );
        assert_eq!(serde_json::from_value::<StoredPushConfig>(value).unwrap(), stored);
    }

    #[test]
    fn stored_push_config_without_format_reads_as_v1() {
        let stored: StoredPushConfig =
            serde_json::from_value(json!({"url": "https://hook", "id": "c1"})).unwrap();
        assert_eq!(stored.format, PushFormat::V1_0);
    }

    #[test]
    fn stored_push_config_debug_hides_secrets() {
        let text = format!("{:?}", config("c1", "https://hook.example.com/in?key=query-secret"));
        assert!(!text.contains("tok-secret") && !text.contains("cred-secret"), "{text}");
        assert!(!text.contains("query-secret") && text.contains("hook.example.com"), "{text}");
        assert!(text.contains("Bearer [redacted]"), "{text}");
    }

    #[test]
    fn upsert_replaces_same_id_and_appends_new() {
        let mut configs = vec![config("a", "https://one"), config("b", "https://two")];
        upsert(&mut configs, config("a", "https://three"));
        upsert(&mut configs, config("c", "https://four"));
        let mut many = Vec::new();
        for i in 0..(MAX_PUSH_CONFIGS + 3) {
            upsert(&mut many, config(&format!("id-{i}"), "https://hook"));
        }
        assert_eq!(many.len(), MAX_PUSH_CONFIGS);
        assert_eq!(many[0].id(), "id-3", "the oldest go first");
        let urls: Vec<(&str, &str)> =
            configs.iter().map(|c| (c.id(), c.config.url.as_str())).collect();
        assert_eq!(urls, [("a", "https://three"), ("b", "https://two"), ("c", "https://four")]);
    }
}
