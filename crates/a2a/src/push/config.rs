//! Push configs (PROTOCOL.md §2.7, §4.7): how they are stored in the task file, and the four
//! CRUD operations, scoped to the caller like every task operation.
//!
//! A task whose run is in progress is authoritative in memory, so its configs change through the
//! [`LiveTask`](crate::live::LiveTask) (the run's next write then keeps them). Any other task's
//! file is changed under a hold on its context, so no run can start from the old file while we
//! write the new one.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::auth::Caller;
use crate::error::{A2aError, CONTEXT_BUSY};
use crate::server::ServerInner;

/// How long a config change waits for a busy context (another task of it is starting).
const CHANGE_WAIT: Duration = Duration::from_secs(10);

/// How long to wait before looking at a busy context again.
const CHANGE_RETRY: Duration = Duration::from_millis(20);

/// Push tokens and credentials shorter than this are refused at registration: they are redacted
/// from everything a session sends out, and a short one would match ordinary text.
pub const MIN_PUSH_SECRET_CHARS: usize = 8;

/// The payload shape a webhook gets: the version the config was registered through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PushFormat {
    /// The 1.0 StreamResponse `{"task": …}` (PROTOCOL.md §11).
    #[default]
    #[serde(rename = "1.0")]
    V1_0,
    /// The bare 0.3 Task with `"kind": "task"` (PROTOCOL.md §10.4).
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

/// Whether `text` can be sent as an HTTP header value (visible ASCII, spaces and tabs).
fn is_header_value(text: &str) -> bool {
    text.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
}

impl ServerInner {
    /// Checks a config given inline in SendMessage (`configuration.taskPushNotificationConfig`)
    /// and makes it ready to store: the URL passes the push URL check and `id` is assigned when
    /// empty. The task id is left as it came; set it to the new task's id before storing the
    /// config (with [`upsert`]) in the task file.
    ///
    /// # Errors
    /// [`A2aError::InvalidParams`] naming the field and why the URL was refused.
    pub(crate) fn validate_inline(
        &self,
        config: a2a::TaskPushNotificationConfig,
        format: PushFormat,
    ) -> Result<StoredPushConfig, A2aError> {
        self.prepare(config, format).map_err(|reason| {
            A2aError::InvalidParams(format!("configuration.taskPushNotificationConfig: {reason}"))
        })
    }

    /// CreateTaskPushNotificationConfig: stores `config` on the caller's task (replacing the
    /// config with the same id) and returns it with its id.
    ///
    /// # Errors
    /// [`A2aError::InvalidParams`] for a missing task id or a refused URL (with the reason);
    /// [`A2aError::TaskNotFound`] for an unknown task or another caller's;
    /// [`A2aError::UnsupportedOperation`] when the task's context stays busy;
    /// [`A2aError::Internal`] when the task file cannot be written.
    pub(crate) async fn create_push_config(
        &self,
        caller: &Caller,
        config: a2a::TaskPushNotificationConfig,
        format: PushFormat,
    ) -> Result<a2a::TaskPushNotificationConfig, A2aError> {
        if config.task_id.is_empty() {
            return Err(A2aError::InvalidParams("taskId is required".into()));
        }
        let stored = self.prepare(config, format).map_err(A2aError::InvalidParams)?;
        let task_id = stored.config.task_id.clone();
        let created = stored.config.clone();
        self.change_push_configs(caller, &task_id, &|configs| {
            upsert(configs, stored.clone());
            true
        })
        .await?;
        Ok(created)
    }

    /// GetTaskPushNotificationConfig: the config `id` of the caller's task; an empty `id` is the
    /// task's first config (0.3 `get` without a config id, PROTOCOL.md §10.2).
    ///
    /// # Errors
    /// [`A2aError::TaskNotFound`] for an unknown task, another caller's, or a missing config
    /// (PROTOCOL.md §4.7).
    pub(crate) async fn get_push_config(
        &self,
        caller: &Caller,
        task_id: &str,
        id: &str,
    ) -> Result<a2a::TaskPushNotificationConfig, A2aError> {
        let configs = self.push_configs(caller, task_id).await?;
        let found = match id {
            "" => configs.into_iter().next(),
            id => configs.into_iter().find(|stored| stored.id() == id),
        };
        found
            .map(|stored| stored.config)
            .ok_or_else(|| A2aError::TaskNotFound { task_id: task_id.to_string() })
    }

    /// ListTaskPushNotificationConfigs: every config of the caller's task, in one page.
    ///
    /// # Errors
    /// [`A2aError::TaskNotFound`] for an unknown task or another caller's.
    pub(crate) async fn list_push_configs(
        &self,
        caller: &Caller,
        task_id: &str,
    ) -> Result<a2a::ListTaskPushNotificationConfigsResponse, A2aError> {
        let configs = self.push_configs(caller, task_id).await?;
        Ok(a2a::ListTaskPushNotificationConfigsResponse {
            configs: configs.into_iter().map(|stored| stored.config).collect(),
            next_page_token: None,
        })
    }

    /// DeleteTaskPushNotificationConfig: removes the config `id` from the caller's task.
    /// Idempotent: a config that is not there is already deleted.
    ///
    /// # Errors
    /// [`A2aError::TaskNotFound`] for an unknown task or another caller's;
    /// [`A2aError::UnsupportedOperation`] when the task's context stays busy;
    /// [`A2aError::Internal`] when the task file cannot be written.
    pub(crate) async fn delete_push_config(
        &self,
        caller: &Caller,
        task_id: &str,
        id: &str,
    ) -> Result<(), A2aError> {
        self.change_push_configs(caller, task_id, &|configs| {
            let before = configs.len();
            configs.retain(|stored| stored.id() != id);
            configs.len() != before
        })
        .await
    }

    /// Checks the URL and assigns an id; `Err` is the reason.
    fn prepare(
        &self,
        mut config: a2a::TaskPushNotificationConfig,
        format: PushFormat,
    ) -> Result<StoredPushConfig, String> {
        (self.push_url_check)(&config.url)?;
        // They become header values on every delivery: refuse what no request could carry now,
        // rather than fail every delivery later without the caller hearing of it.
        if let Some(token) = &config.token
            && !is_header_value(token)
        {
            return Err("token is not a valid HTTP header value".into());
        }
        // Both are redaction values of every session of the workspace: a short one would hide
        // ordinary text in answers.
        if let Some(token) = &config.token
            && !token.is_empty()
            && token.chars().count() < MIN_PUSH_SECRET_CHARS
        {
            return Err(format!(
                "token is shorter than {MIN_PUSH_SECRET_CHARS} characters; use a longer, random one"
            ));
        }
        if let Some(credentials) =
            config.authentication.as_ref().and_then(|auth| auth.credentials.as_deref())
            && !credentials.is_empty()
            && credentials.chars().count() < MIN_PUSH_SECRET_CHARS
        {
            return Err(format!(
                "authentication.credentials is shorter than {MIN_PUSH_SECRET_CHARS} characters; use a longer, random one"
            ));
        }
        if let Some(auth) = &config.authentication {
            let value = format!("{} {}", auth.scheme, auth.credentials.as_deref().unwrap_or(""));
            if auth.scheme.trim().is_empty() || !is_header_value(&value) {
                return Err("authentication is not a valid Authorization header value".into());
            }
        }
        if config.id.as_deref().is_none_or(str::is_empty) {
            config.id = Some(uuid::Uuid::new_v4().to_string());
        }
        Ok(StoredPushConfig { config, format })
    }

    /// The configs of the caller's task: the live view while its run lasts, else the file.
    async fn push_configs(
        &self,
        caller: &Caller,
        task_id: &str,
    ) -> Result<Vec<StoredPushConfig>, A2aError> {
        if let Some(live) = self.live.get(task_id)
            && live.caller == *caller
        {
            return Ok(live.push_configs().await);
        }
        let live = self.live.clone();
        Ok(self.store.load(caller, task_id, &move |id: &str| live.is_live(id)).await?.push_configs)
    }

    /// Applies `change` (which says whether it changed anything) to the configs of the caller's
    /// task and persists them.
    async fn change_push_configs(
        &self,
        caller: &Caller,
        task_id: &str,
        change: &(dyn Fn(&mut Vec<StoredPushConfig>) -> bool + Sync),
    ) -> Result<(), A2aError> {
        let deadline = tokio::time::Instant::now() + CHANGE_WAIT;
        loop {
            if let Some(live) = self.live.get(task_id)
                && live.caller == *caller
            {
                // `None`: the run has just ended; its file is final and the next look finds
                // the task idle.
                if let Some(result) = live.update_push_configs(change).await {
                    return result;
                }
            } else {
                let is_live = {
                    let live = self.live.clone();
                    move |id: &str| live.is_live(id)
                };
                let file = self.store.load(caller, task_id, &is_live).await?;
                // Under the hold no run of the context can start (or be running), so the file
                // is the truth and nothing writes it but us.
                if let Some(hold) = self.pool.try_hold(caller, &file.task.context_id).await {
                    let result = async {
                        let mut file = self.store.load(caller, task_id, &is_live).await?;
                        if change(&mut file.push_configs) {
                            self.store.save(&caller.workspace, &file).await?;
                        }
                        Ok(())
                    }
                    .await;
                    self.pool.release_hold(hold).await;
                    return result;
                }
            }
            // The context is busy: this task is about to run (it will be live in a moment), or
            // another task of the context is starting or running.
            if tokio::time::Instant::now() >= deadline {
                return Err(A2aError::UnsupportedOperation(CONTEXT_BUSY.into()));
            }
            tokio::time::sleep(CHANGE_RETRY).await;
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
