//! The push config operations (A2A 1.0.1 §3.1.7 to §3.1.10), scoped to the caller like every task
//! operation; how configs are kept in the task file is `push::config`'s.
//!
//! A task whose run is in progress is authoritative in memory, so its configs change through the
//! [`LiveTask`](crate::run::live::LiveTask) (the run's next write then keeps them). Any other task's
//! file is changed under a hold on its context, so no run can start from the old file while we
//! write the new one.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::auth::Caller;
use crate::error::{A2aError, Error};
use crate::push::config::{MIN_PUSH_SECRET_CHARS, upsert};
use crate::push::{PushFormat, StoredPushConfig};
use crate::run::live::LiveTask;

use super::Service;

/// How long a config change waits for a busy context (another task of it is starting).
const CHANGE_WAIT: Duration = Duration::from_secs(10);

/// Whether `text` can be sent as an HTTP header value (visible ASCII, spaces and tabs).
fn is_header_value(text: &str) -> bool {
    text.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
}

/// Checks a config given inline in SendMessage (`configuration.taskPushNotificationConfig`)
/// and makes it ready to store: the URL passes the push URL check and `id` is assigned when
/// empty. The task id is left as it came; set it to the new task's id before storing the
/// config (with [`upsert`]) in the task file.
///
/// # Errors
/// [`A2aError::InvalidParams`] naming the field and why the URL was refused.
pub(super) fn validate_inline(
    service: &Service,
    config: a2a::TaskPushNotificationConfig,
    format: PushFormat,
) -> Result<StoredPushConfig, A2aError> {
    prepare(service, config, format).map_err(|reason| {
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
pub(super) async fn create_push_config(
    service: &Service,
    caller: &Caller,
    config: a2a::TaskPushNotificationConfig,
    format: PushFormat,
) -> Result<a2a::TaskPushNotificationConfig, Error> {
    if config.task_id.is_empty() {
        return Err(A2aError::InvalidParams("taskId is required".into()).into());
    }
    let stored = prepare(service, config, format).map_err(A2aError::InvalidParams)?;
    let task_id = stored.config.task_id.clone();
    let created = stored.config.clone();
    change_push_configs(service, caller, &task_id, &|configs| {
        upsert(configs, stored.clone());
        true
    })
    .await?;
    Ok(created)
}

/// GetTaskPushNotificationConfig: the config `id` of the caller's task; an empty `id` is the
/// task's first config (0.3 `get` without a config id, A2A 0.3.0 §7.6.1).
///
/// # Errors
/// [`A2aError::TaskNotFound`] for an unknown task, another caller's, or a missing config
/// (A2A 1.0.1 §3.1.8).
pub(super) async fn get_push_config(
    service: &Service,
    caller: &Caller,
    task_id: &str,
    id: &str,
) -> Result<a2a::TaskPushNotificationConfig, A2aError> {
    let configs = push_configs(service, caller, task_id).await?;
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
pub(super) async fn list_push_configs(
    service: &Service,
    caller: &Caller,
    task_id: &str,
) -> Result<a2a::ListTaskPushNotificationConfigsResponse, A2aError> {
    let configs = push_configs(service, caller, task_id).await?;
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
pub(super) async fn delete_push_config(
    service: &Service,
    caller: &Caller,
    task_id: &str,
    id: &str,
) -> Result<(), Error> {
    change_push_configs(service, caller, task_id, &|configs| {
        let before = configs.len();
        configs.retain(|stored| stored.id() != id);
        configs.len() != before
    })
    .await
}

/// Checks the URL and assigns an id; `Err` is the reason.
fn prepare(
    service: &Service,
    mut config: a2a::TaskPushNotificationConfig,
    format: PushFormat,
) -> Result<StoredPushConfig, String> {
    (service.push_url_check)(&config.url)?;
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
    service: &Service,
    caller: &Caller,
    task_id: &str,
) -> Result<Vec<StoredPushConfig>, A2aError> {
    if let Some(live) = service.tasks.live(caller, task_id) {
        return Ok(live.push_configs().await);
    }
    Ok(service.tasks.load(caller, task_id).await?.push_configs)
}

/// Applies `change` (which says whether it changed anything) to the configs of the caller's
/// task and persists them.
async fn change_push_configs(
    service: &Service,
    caller: &Caller,
    task_id: &str,
    change: &(dyn Fn(&mut Vec<StoredPushConfig>) -> bool + Sync),
) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + CHANGE_WAIT;
    // `None`: the run has just ended; its file is final and the next look finds the task idle.
    let on_live = |live: Arc<LiveTask>| -> BoxFuture<'_, _> {
        Box::pin(async move { live.update_push_configs(change).await })
    };
    let changed = service.tasks.change(
        caller,
        task_id,
        deadline,
        on_live,
        |_| Ok(()),
        |file| change(&mut file.push_configs),
    );
    changed.await.map(|_| ())
}
