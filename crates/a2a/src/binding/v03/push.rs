//! 0.3 push notification configs (A2A 0.3.0 §6.8, §6.10, §7.5): the nested
//! `{taskId, pushNotificationConfig: {…, authentication: {schemes}}}` shape, and get / list /
//! delete params where `id` is the task id and the config id is `pushNotificationConfigId`.
//! The 0.3 `set` params need no conversion here: the lenient params reader flattens that shape
//! for every version.

use serde_json::{Map, Value, json};

use super::required_string;
use crate::error::A2aError;

/// Converts 0.3 `tasks/pushNotificationConfig/get` params `{id, pushNotificationConfigId?}` to
/// 1.0 `{taskId, id}`. A missing config id becomes `""`: "the task's first config".
///
/// # Errors
///
/// [`A2aError::InvalidParams`] when `id` is missing or not a string.
pub(crate) fn get_params_to_v1(params: Value) -> Result<Value, A2aError> {
    let task_id = required_string(&params, "id")?;
    let config_id = params.get("pushNotificationConfigId").cloned().unwrap_or_else(|| json!(""));
    Ok(json!({"taskId": task_id, "id": config_id}))
}

/// Converts 0.3 `tasks/pushNotificationConfig/delete` params `{id, pushNotificationConfigId}`
/// to 1.0 `{taskId, id}`.
///
/// # Errors
///
/// [`A2aError::InvalidParams`] when either id is missing or not a string.
pub(crate) fn delete_params_to_v1(params: Value) -> Result<Value, A2aError> {
    let task_id = required_string(&params, "id")?;
    let config_id = required_string(&params, "pushNotificationConfigId")?;
    Ok(json!({"taskId": task_id, "id": config_id}))
}

/// Converts 0.3 `tasks/pushNotificationConfig/list` params `{id}` to 1.0 `{taskId}`.
///
/// # Errors
///
/// [`A2aError::InvalidParams`] when `id` is missing or not a string.
pub(crate) fn list_params_to_v1(params: Value) -> Result<Value, A2aError> {
    Ok(json!({"taskId": required_string(&params, "id")?}))
}

/// The 0.3 TaskPushNotificationConfig JSON of a 1.0 config.
pub(crate) fn push_config(config: &a2a::TaskPushNotificationConfig) -> Value {
    let mut inner = Map::new();
    if let Some(id) = &config.id {
        inner.insert("id".into(), json!(id));
    }
    inner.insert("url".into(), json!(config.url));
    if let Some(token) = &config.token {
        inner.insert("token".into(), json!(token));
    }
    if let Some(auth) = &config.authentication {
        let mut authentication = Map::new();
        authentication.insert("schemes".into(), json!([auth.scheme]));
        if let Some(credentials) = &auth.credentials {
            authentication.insert("credentials".into(), json!(credentials));
        }
        inner.insert("authentication".into(), Value::Object(authentication));
    }
    json!({"taskId": config.task_id, "pushNotificationConfig": inner})
}

/// The 0.3 `list` result: a bare array of 0.3 configs.
pub(crate) fn push_configs(list: &a2a::ListTaskPushNotificationConfigsResponse) -> Value {
    Value::Array(list.configs.iter().map(push_config).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_params_to_v1_table() {
        let missing_id = Err(A2aError::InvalidParams("missing field `id`".into()));
        type Convert = fn(Value) -> Result<Value, A2aError>;
        let cases: [(Convert, Value, Result<Value, A2aError>); 7] = [
            (
                get_params_to_v1,
                json!({"id": "t1", "pushNotificationConfigId": "c1"}),
                Ok(json!({"taskId": "t1", "id": "c1"})),
            ),
            (get_params_to_v1, json!({"id": "t1"}), Ok(json!({"taskId": "t1", "id": ""}))),
            (get_params_to_v1, json!({}), missing_id.clone()),
            (
                delete_params_to_v1,
                json!({"id": "t1", "pushNotificationConfigId": "c1"}),
                Ok(json!({"taskId": "t1", "id": "c1"})),
            ),
            (
                delete_params_to_v1,
                json!({"id": "t1"}),
                Err(A2aError::InvalidParams("missing field `pushNotificationConfigId`".into())),
            ),
            (list_params_to_v1, json!({"id": "t1"}), Ok(json!({"taskId": "t1"}))),
            (
                list_params_to_v1,
                json!({"id": 7}),
                Err(A2aError::InvalidParams(
                    "invalid type for `id`: expected a string, got 7".into(),
                )),
            ),
        ];
        for (convert, params, expected) in cases {
            assert_eq!(convert(params.clone()), expected, "{params}");
        }
    }

    #[test]
    fn push_config_nests_and_lists_schemes() {
        let config = a2a::TaskPushNotificationConfig {
            url: "https://hook".into(),
            id: Some("c1".into()),
            task_id: "t1".into(),
            token: Some("tok".into()),
            authentication: Some(a2a::AuthenticationInfo {
                scheme: "Bearer".into(),
                credentials: Some("secret".into()),
            }),
            tenant: None,
        };
        assert_eq!(
            push_config(&config),
            json!({"taskId": "t1", "pushNotificationConfig": {"id": "c1", "url": "https://hook",
                "token": "tok", "authentication": {"schemes": ["Bearer"], "credentials": "secret"}}})
        );
    }
}
