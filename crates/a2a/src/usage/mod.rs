//! Spend caps and rate limits (issue 23): what each caller may use (callers.json `"limits"`)
//! and what all callers of a workspace may use together (`A2A__Limits__*`), the usage counted
//! against them, and the owner's warnings at 80 % and 100 % of a daily cap.
//!
//! - `requestsPerMinute` counts every authenticated request; over it the request is refused
//!   before any work (HTTP 429 with `Retry-After`, [`crate::error::FAIR_SHARE_CODE`] on
//!   JSON-RPC). The limiter is `governor`'s GCRA: a full minute's worth may come at once, then
//!   one more every `60 / N` seconds.
//! - `tokensPerDay` and `usdPerDay` count the model's tokens (input, output and cached input, as
//!   the provider reports them, or the run loop's estimate when it reports none or the call was
//!   aborted) and their price from [`UsageOptions::prices`]. A send over a cap is refused before
//!   a task exists; a run that crosses one stops at its next model call and its task fails with
//!   the reason. Each model call holds room under the caps while it runs ([`reservation`]), so
//!   calls made at once end a caller's day at most one call past its cap.
//! - "Today" is the calendar day in UTC, or in [`UsageOptions::time_zone`]. The day's counts are
//!   kept in `<state dir>/a2a/usage/<date>.json` ([`ledger`]), written at most a second after
//!   they change and when the server stops, so a restart keeps them.

pub mod ledger;
mod meter;
mod rate;
mod reservation;

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::PathBuf;

use serde_json::Value;
use volcanic_core::message::Usage;

pub use meter::Meter;

/// What may be used: per caller (callers.json `"limits"`) or per workspace in total
/// (`A2A__Limits__*`). Each is optional; none set = no cap.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Limits {
    /// Authenticated requests per minute.
    pub requests_per_minute: Option<NonZeroU32>,
    /// Model tokens per day (input, output and cached input).
    pub tokens_per_day: Option<u64>,
    /// Model spending per day, in US dollars, priced by [`UsageOptions::prices`].
    pub usd_per_day: Option<f64>,
}

impl Limits {
    /// Whether no cap is set.
    pub fn is_none(&self) -> bool {
        self.requests_per_minute.is_none()
            && self.tokens_per_day.is_none()
            && self.usd_per_day.is_none()
    }

    /// Whether a daily cap (tokens or money) is set.
    pub fn has_daily(&self) -> bool {
        self.tokens_per_day.is_some() || self.usd_per_day.is_some()
    }

    /// callers.json's `"limits"`: an object with any of `requestsPerMinute` and `tokensPerDay`
    /// (whole numbers of at least 1) and `usdPerDay` (a number above 0). Anything else in it is
    /// an error, so a misspelt cap is never silently no cap.
    ///
    /// # Errors
    /// What is wrong, for the loader's warning (it never echoes a value).
    pub fn parse(value: &Value) -> Result<Limits, String> {
        let Value::Object(fields) = value else {
            return Err("limits must be an object".into());
        };
        let mut limits = Limits::default();
        for (key, value) in fields {
            match key.as_str() {
                "requestsPerMinute" => {
                    let n = value
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .and_then(NonZeroU32::new)
                        .ok_or("limits.requestsPerMinute must be a whole number of at least 1")?;
                    limits.requests_per_minute = Some(n);
                }
                "tokensPerDay" => {
                    let n = value
                        .as_u64()
                        .filter(|n| *n >= 1)
                        .ok_or("limits.tokensPerDay must be a whole number of at least 1")?;
                    limits.tokens_per_day = Some(n);
                }
                "usdPerDay" => {
                    let x = value
                        .as_f64()
                        .filter(|x| x.is_finite() && *x > 0.0)
                        .ok_or("limits.usdPerDay must be a number above 0")?;
                    limits.usd_per_day = Some(x);
                }
                _ => {
                    return Err(
                        "limits has an unknown field (requestsPerMinute, tokensPerDay, usdPerDay)"
                            .into(),
                    );
                }
            }
        }
        Ok(limits)
    }
}

/// A model's price in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrice {
    pub input: f64,
    pub output: f64,
    /// Cached input read back; unset = the input price.
    pub cache_read: Option<f64>,
    /// Input written to the cache; unset = the input price.
    pub cache_write: Option<f64>,
}

impl ModelPrice {
    /// What `usage` cost, in US dollars.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let per_token = |price: f64| price / 1_000_000.0;
        usage.input_tokens as f64 * per_token(self.input)
            + usage.output_tokens as f64 * per_token(self.output)
            + usage.cache_read_tokens as f64 * per_token(self.cache_read.unwrap_or(self.input))
            + usage.cache_write_tokens as f64 * per_token(self.cache_write.unwrap_or(self.input))
    }

    /// The most `usage` can cost when any part of its input may turn out to be read from or
    /// written to the provider's cache: every input token at the highest of the input prices.
    pub fn most(&self, usage: &Usage) -> f64 {
        let input = self
            .input
            .max(self.cache_read.unwrap_or(self.input))
            .max(self.cache_write.unwrap_or(self.input));
        let tokens = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
        (tokens as f64 * input + usage.output_tokens as f64 * self.output) / 1_000_000.0
    }
}

/// The workspace caps, the price table and the day's time zone (`A2A__Limits__*`,
/// `A2A__Prices`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UsageOptions {
    /// Caps over all callers of a workspace together (in the Telegram host: of each chat's
    /// workspace). Default none.
    pub workspace: Limits,
    /// Prices per model id. A model without a price cannot be held to a `usdPerDay` cap: its
    /// runs are refused while such a cap applies. Default empty.
    pub prices: BTreeMap<String, ModelPrice>,
    /// The time zone whose calendar day "today" is; unset = UTC.
    pub time_zone: Option<chrono_tz::Tz>,
}

impl UsageOptions {
    /// The time zone's name as the owner sees it.
    pub fn zone_name(&self) -> &str {
        self.time_zone.as_ref().map_or("UTC", |tz| tz.name())
    }
}

/// The clock the caps' days follow: the server's (`crate::clock`).
pub use crate::clock::{Clock, system_clock};

/// Which daily cap an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cap {
    Tokens,
    Usd,
}

impl Cap {
    /// The word in alert keys and listings.
    pub fn as_str(self) -> &'static str {
        match self {
            Cap::Tokens => "tokens",
            Cap::Usd => "usd",
        }
    }
}

/// A daily cap reached 80 % or 100 % for the first time today.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageAlert {
    /// The workspace the usage is of.
    pub workspace: PathBuf,
    /// Its owner, as the host names them (Telegram: the chat id).
    pub owner_id: String,
    /// The caller whose cap it is; `None` for the workspace's cap over all callers.
    pub caller: Option<String>,
    pub cap: Cap,
    /// 80 or 100.
    pub percent: u8,
    pub used: f64,
    pub limit: f64,
    /// The day, as `YYYY-MM-DD` in the caps' time zone.
    pub date: String,
}

impl UsageAlert {
    /// The owner's message.
    pub fn text(&self) -> String {
        let whose = match &self.caller {
            Some(name) => format!("A2A caller {name} has"),
            None => "Your A2A callers together have".to_string(),
        };
        let amount = |x: f64| match self.cap {
            Cap::Tokens => format!("{} tokens", group_thousands(x as u64)),
            Cap::Usd => format!("${x:.2}"),
        };
        let what = match self.cap {
            Cap::Tokens => "daily token cap",
            Cap::Usd => "daily spending cap",
        };
        let tail = if self.percent >= 100 {
            " Further requests that need the model are refused until the day ends."
        } else {
            ""
        };
        format!(
            "{whose} used {}% of the {what} ({} of {}) on {}.{tail}",
            self.percent,
            amount(self.used),
            amount(self.limit),
            self.date
        )
    }
}

/// `1234567` → `1,234,567`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Tells the owner of a cap reached (Telegram: a message in the owner's chat). Alerts are also
/// logged, with or without a notifier.
#[async_trait::async_trait]
pub trait UsageNotifier: Send + Sync {
    async fn alert(&self, alert: &UsageAlert);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn limits_parse_each_cap_and_refuse_anything_else() {
        let limits = Limits::parse(
            &json!({"requestsPerMinute": 30, "tokensPerDay": 100000, "usdPerDay": 2.5}),
        )
        .unwrap();
        assert_eq!(limits.requests_per_minute, NonZeroU32::new(30));
        assert_eq!((limits.tokens_per_day, limits.usd_per_day), (Some(100_000), Some(2.5)));
        assert!(Limits::parse(&json!({})).unwrap().is_none());
        for bad in [
            json!({"requestsPerMinute": 0}),
            json!({"requestsPerMinute": 1.5}),
            json!({"tokensPerDay": -1}),
            json!({"usdPerDay": 0}),
            json!({"usdPerDay": "5"}),
            json!({"tokenPerDay": 5}),
            json!([1]),
        ] {
            assert!(Limits::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn price_counts_each_kind_of_token() {
        let price =
            ModelPrice { input: 3.0, output: 15.0, cache_read: Some(0.3), cache_write: None };
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_tokens: 1_000_000,
            cache_write_tokens: 1_000_000,
            estimated: false,
        };
        assert!((price.cost(&usage) - (3.0 + 1.5 + 0.3 + 3.0)).abs() < 1e-9);
    }

    #[test]
    fn alert_text_names_the_cap_and_the_amounts() {
        let alert = UsageAlert {
            workspace: "/ws".into(),
            owner_id: "42".into(),
            caller: Some("travel-bot".into()),
            cap: Cap::Tokens,
            percent: 80,
            used: 80_000.0,
            limit: 100_000.0,
            date: "2026-12-04".into(),
        };
        assert_eq!(
            alert.text(),
            "A2A caller travel-bot has used 80% of the daily token cap (80,000 tokens of 100,000 tokens) on 2026-12-04."
        );
        let all = UsageAlert {
            caller: None,
            cap: Cap::Usd,
            percent: 100,
            used: 5.0,
            limit: 5.0,
            ..alert
        };
        assert!(all.text().starts_with(
            "Your A2A callers together have used 100% of the daily spending cap ($5.00 of $5.00)"
        ));
        assert_eq!(group_thousands(1_234_567), "1,234,567");
        assert_eq!(group_thousands(999), "999");
    }
}
