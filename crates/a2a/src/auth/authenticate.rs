//! Turning a request's credentials into exactly one [`Caller`] (A2A 1.0.1 §7.4; docs/a2a.md, "Authentication"): the key comes
//! from `X-API-Key` or `Authorization: Bearer <key>`, and must match exactly one caller.
//!
//! This module knows no HTTP framework: the glue passes the two header values in. Every failure
//! is the same 401 on the wire; [`AuthFailure`] says which for logs and tests.

use std::sync::Arc;

use tracing::{error, warn};

use super::{ApiKey, Caller, CallerDirectory};

/// Why a request is not authenticated. Carries no key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// Neither `X-API-Key` nor `Authorization: Bearer` carries a key.
    #[error("no API key: send X-API-Key or Authorization: Bearer")]
    MissingKey,
    /// `X-API-Key` and `Authorization: Bearer` carry different keys.
    #[error("X-API-Key and Authorization: Bearer carry different keys")]
    ConflictingKeys,
    /// No caller has the key.
    #[error("unknown API key")]
    UnknownKey,
    /// More than one caller has the key (two workspaces, or two entries of one file).
    #[error("the API key matches {matches} callers")]
    AmbiguousKey {
        /// How many callers hold the key.
        matches: usize,
    },
}

/// The key a request presents: the `X-API-Key` value or the credentials of an
/// `Authorization` header with the `Bearer` scheme (case-insensitive). Values are trimmed; empty
/// ones and other `Authorization` schemes count as absent.
///
/// # Errors
/// [`AuthFailure::MissingKey`] when neither carries a key, [`AuthFailure::ConflictingKeys`] when
/// both do and they differ.
pub fn presented_key<'a>(
    x_api_key: Option<&'a str>,
    authorization: Option<&'a str>,
) -> Result<&'a str, AuthFailure> {
    let api_key = x_api_key.map(str::trim).filter(|key| !key.is_empty());
    let bearer = authorization.and_then(bearer_credentials);
    match (api_key, bearer) {
        (Some(a), Some(b)) if a != b => Err(AuthFailure::ConflictingKeys),
        (Some(key), _) | (None, Some(key)) => Ok(key),
        (None, None) => Err(AuthFailure::MissingKey),
    }
}

fn bearer_credentials(authorization: &str) -> Option<&str> {
    let (scheme, credentials) = authorization.trim().split_once(char::is_whitespace)?;
    let credentials = credentials.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !credentials.is_empty()).then_some(credentials)
}

/// Resolves the request's key (see [`presented_key`]) to exactly one caller of `directory`.
/// A key held by several callers is refused with a warning naming their owners, never the key.
///
/// The directory is asked on this thread when it can answer from what it holds
/// ([`CallerDirectory::find_cached`]), else on the blocking pool: a callers file is never read
/// on an async worker, so one that is slow or hostile to read stalls only its own request.
///
/// # Errors
/// Every [`AuthFailure`]; all of them are answered with 401.
///
/// # Cancel safety
/// Dropping the future abandons the lookup; a read already on the blocking pool finishes there.
pub async fn authenticate(
    directory: &Arc<dyn CallerDirectory>,
    x_api_key: Option<&str>,
    authorization: Option<&str>,
) -> Result<Caller, AuthFailure> {
    let key = presented_key(x_api_key, authorization)?;
    let callers = match directory.find_cached(key) {
        Some(callers) => callers,
        None => {
            let (directory, key) = (directory.clone(), ApiKey::new(key));
            match tokio::task::spawn_blocking(move || directory.find(key.expose())).await {
                Ok(callers) => callers,
                Err(err) => {
                    error!(error = %err, "the caller lookup failed on the blocking pool");
                    Vec::new()
                }
            }
        }
    };
    one_caller(callers)
}

/// The one caller of `callers`, or why not.
fn one_caller(mut callers: Vec<Caller>) -> Result<Caller, AuthFailure> {
    match callers.len() {
        0 => Err(AuthFailure::UnknownKey),
        1 => callers.pop().ok_or(AuthFailure::UnknownKey),
        matches => {
            let mut owners: Vec<&str> = Vec::new();
            for caller in &callers {
                if !owners.contains(&caller.workspace.owner_id.as_str()) {
                    owners.push(&caller.workspace.owner_id);
                }
            }
            let owners = owners.join(", ");
            let names: Vec<String> = callers
                .iter()
                .map(|caller| format!("{}/{}", caller.workspace.owner_id, caller.name))
                .collect();
            warn!(
                matches,
                owners = %owners,
                callers = %names.join(", "),
                "key matches {matches} callers (owners: {owners}), refusing it"
            );
            Err(AuthFailure::AmbiguousKey { matches })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::auth::{A2aWorkspace, CallerEntry, CallerMode};
    use crate::test_logs::capture_logs;

    #[test]
    fn presented_key_table() {
        let cases = [
            (None, None, Err(AuthFailure::MissingKey)),
            (Some("k1"), None, Ok("k1")),
            (Some("  k1 "), None, Ok("k1")),
            (Some(""), None, Err(AuthFailure::MissingKey)),
            (None, Some("Bearer k2"), Ok("k2")),
            (None, Some("bearer k2"), Ok("k2")),
            (None, Some("BEARER   k2  "), Ok("k2")),
            (None, Some("Bearer"), Err(AuthFailure::MissingKey)),
            (None, Some("Bearer   "), Err(AuthFailure::MissingKey)),
            (None, Some("Basic k2"), Err(AuthFailure::MissingKey)),
            (None, Some("Bearerk2"), Err(AuthFailure::MissingKey)),
            (Some("k1"), Some("Bearer k1"), Ok("k1")),
            (Some("k1"), Some("Bearer k2"), Err(AuthFailure::ConflictingKeys)),
            (Some("k1"), Some("Basic xyz"), Ok("k1")),
            (Some(""), Some("Bearer k2"), Ok("k2")),
        ];
        for (api_key, authorization, expected) in cases {
            assert_eq!(
                presented_key(api_key, authorization),
                expected,
                "{api_key:?} {authorization:?}"
            );
        }
    }

    struct Fixed(Vec<Caller>);

    impl CallerDirectory for Fixed {
        fn find(&self, key: &str) -> Vec<Caller> {
            if key == "sekrit-key" { self.0.clone() } else { Vec::new() }
        }

        fn entries(&self, _workspace: &A2aWorkspace) -> Arc<[CallerEntry]> {
            Arc::from(Vec::new())
        }
    }

    fn caller(owner: &str, name: &str) -> Caller {
        Caller {
            name: name.into(),
            mode: CallerMode::Isolated,
            tier: crate::auth::CallerTier::Workspace,
            approval: Default::default(),
            limits: Default::default(),
            workspace: Arc::new(A2aWorkspace {
                path: PathBuf::from(format!("/ws/{owner}")),
                scope_prefix: format!("telegram-{owner}"),
                owner_id: owner.into(),
            }),
        }
    }

    fn fixed(callers: Vec<Caller>) -> Arc<dyn CallerDirectory> {
        Arc::new(Fixed(callers))
    }

    #[tokio::test]
    async fn authenticate_one_match_returns_the_caller() {
        let directory = fixed(vec![caller("41", "a")]);
        assert_eq!(authenticate(&directory, Some("sekrit-key"), None).await, Ok(caller("41", "a")));
        assert_eq!(
            authenticate(&directory, None, Some("Bearer sekrit-key")).await,
            Ok(caller("41", "a"))
        );
    }

    #[tokio::test]
    async fn authenticate_unknown_or_missing_key_fails() {
        let directory = fixed(vec![caller("41", "a")]);
        assert_eq!(
            authenticate(&directory, Some("other"), None).await,
            Err(AuthFailure::UnknownKey)
        );
        assert_eq!(authenticate(&directory, None, None).await, Err(AuthFailure::MissingKey));
        assert_eq!(
            authenticate(&directory, Some("sekrit-key"), Some("Bearer other")).await,
            Err(AuthFailure::ConflictingKeys)
        );
    }

    #[test]
    fn authenticate_ambiguous_key_fails_and_warns_with_owners_not_the_key() {
        let callers = vec![caller("41", "a"), caller("42", "b"), caller("41", "c")];
        let mut result = None;
        let logs = capture_logs(|| result = Some(one_caller(callers)));
        assert_eq!(result, Some(Err(AuthFailure::AmbiguousKey { matches: 3 })));
        assert!(logs.contains("key matches 3 callers (owners: 41, 42)"), "{logs}");
        assert!(!logs.contains("sekrit"), "{logs}");
    }
}
