//! Push notifications (A2A 1.0.1 §3.5.3, §4.3) and all outbound HTTP: the configs callers register
//! on their tasks (`config`: storage in the task file and the CRUD operations), the
//! [`PushSender`] that POSTs task updates to those webhooks (`deliver`: one POST and its answer;
//! `outbox`: pending deliveries as files in the state folder, so they survive a restart), and
//! the SSRF [`guard`] every outbound request (pushes, file-part downloads) goes through.

use std::sync::Arc;

pub(crate) mod config;
pub(crate) mod deliver;
pub mod guard;
pub(crate) mod outbox;
pub(crate) mod secrets;
pub(crate) mod sender;

pub use config::{PushFormat, StoredPushConfig};
pub use sender::PushSender;

/// Decides whether a webhook URL may be used; `Err` carries the reason for the caller. Called when
/// a config is registered and again before every delivery attempt.
pub type UrlCheck = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// The webhook URL check: the SSRF guard's syntactic check (https, or http and private hosts
/// with `AllowPrivatePushUrls`; IP literals in any notation checked against the blocked ranges).
/// Names are checked again at connect time by the guarded client's resolver.
pub fn url_check(allow_private: bool) -> UrlCheck {
    Arc::new(move |url: &str| {
        guard::check_url(url, allow_private).map(|_| ()).map_err(|err| err.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_check_uses_the_guard() {
        let strict = url_check(false);
        let relaxed = url_check(true);
        assert_eq!(strict("https://hook.example.com/a"), Ok(()));
        assert!(strict("http://hook.example.com/a").is_err());
        assert!(strict("https://127.0.0.1/a").is_err());
        assert!(strict("https://[::ffff:10.0.0.1]/a").is_err());
        assert_eq!(relaxed("http://127.0.0.1:8080/hook"), Ok(()));
        assert!(relaxed("ftp://hook.example.com").is_err());
    }
}
