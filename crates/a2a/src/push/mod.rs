//! Push notifications (PROTOCOL.md §4.7, §11): the configs callers register on their tasks
//! (`config`: storage in the task file and the CRUD operations) and the [`PushSender`] that POSTs
//! task updates to those webhooks.
//!
//! Outbound HTTP is not this module's to guard: the sender takes its `reqwest::Client` and the
//! URL check ([`UrlCheck`]) from outside, so the SSRF guard stays one concept of its own.

use std::sync::Arc;

pub(crate) mod config;
pub(crate) mod sender;

pub use config::{PushFormat, StoredPushConfig};
pub use sender::PushSender;

/// Decides whether a webhook URL may be used; `Err` carries the reason for the caller. Called when
/// a config is registered and again before every delivery attempt.
pub type UrlCheck = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// The URL check used until a host installs the SSRF guard: `https` URLs with a host, plus
/// `http` ones when `allow_http` (`AllowPrivatePushUrls`).
pub fn scheme_check(allow_http: bool) -> UrlCheck {
    Arc::new(move |url: &str| {
        let parsed = reqwest::Url::parse(url).map_err(|err| format!("url {url:?}: {err}"))?;
        let scheme_ok = match parsed.scheme() {
            "https" => true,
            "http" => allow_http,
            _ => false,
        };
        if !scheme_ok {
            return Err(if allow_http {
                "url must use https or http".to_string()
            } else {
                "url must use https (http needs AllowPrivatePushUrls)".to_string()
            });
        }
        match parsed.host_str() {
            Some(host) if !host.is_empty() => Ok(()),
            Some(_) | None => Err("url must name a host".to_string()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_check_table() {
        let https_only = scheme_check(false);
        let with_http = scheme_check(true);
        let https_reason = "url must use https (http needs AllowPrivatePushUrls)";
        type Expected = Result<(), &'static str>;
        let cases: [(&str, Expected, Expected); 6] = [
            ("https://hook.example.com/a", Ok(()), Ok(())),
            ("HTTPS://hook.example.com", Ok(()), Ok(())),
            ("http://127.0.0.1:8080/hook", Err(https_reason), Ok(())),
            ("ftp://hook.example.com", Err(https_reason), Err("url must use https or http")),
            ("file:///etc/passwd", Err(https_reason), Err("url must use https or http")),
            ("https://", Err("url \"https://\": empty host"), Err("url \"https://\": empty host")),
        ];
        for (url, strict, relaxed) in cases {
            assert_eq!(https_only(url), strict.map_err(str::to_string), "{url}");
            assert_eq!(with_http(url), relaxed.map_err(str::to_string), "{url} (http allowed)");
        }
    }
}
