//! `[a2a.limits]` (`A2A__Limits__*`) and `[a2a.prices]` (`A2A__Prices`): the caps over all
//! callers of a workspace, the day's time zone, and the model price table
//! (docs/configuration.md, "Spend caps and rate limits").

use std::collections::BTreeMap;
use std::num::NonZeroU32;

use serde::{Deserialize, Deserializer};
use volcanic_a2a::usage::{ModelPrice, UsageOptions};

use super::ConfigError;

/// `[a2a.limits]`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSettings {
    pub requests_per_minute: Option<u64>,
    pub tokens_per_day: Option<u64>,
    #[serde(deserialize_with = "opt_number")]
    pub usd_per_day: Option<f64>,
    /// An IANA time zone name (`Europe/Berlin`); unset = UTC.
    pub time_zone: Option<String>,
}

/// One model's price in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceSettings {
    pub input: f64,
    pub output: f64,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
}

/// `[a2a.prices]`: a table of model id → price, or in the environment
/// `model=INPUT/OUTPUT` pairs separated by commas (`claude-sonnet-4-5=3/15,gpt-4.1=2/8`).
pub fn prices<'de, D: Deserializer<'de>>(
    de: D,
) -> Result<BTreeMap<String, PriceSettings>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Table(BTreeMap<String, PriceSettings>),
        Text(String),
    }
    match Raw::deserialize(de)? {
        Raw::Table(table) => Ok(table),
        Raw::Text(text) => parse_price_list(&text).map_err(serde::de::Error::custom),
    }
}

fn parse_price_list(text: &str) -> Result<BTreeMap<String, PriceSettings>, String> {
    let mut table = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let problem =
            || format!("{item:?} is not MODEL=INPUT/OUTPUT (US dollars per million tokens)");
        let (model, price) = item.split_once('=').ok_or_else(problem)?;
        let (input, output) = price.split_once('/').ok_or_else(problem)?;
        let number = |s: &str| s.trim().parse::<f64>().map_err(|_| problem());
        let price = PriceSettings {
            input: number(input)?,
            output: number(output)?,
            cache_read: None,
            cache_write: None,
        };
        table.insert(model.trim().to_string(), price);
    }
    Ok(table)
}

/// A number, or text holding one (environment variables are text).
fn opt_number<'de, D: Deserializer<'de>>(de: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(f64),
        Text(String),
    }
    match Option::<Raw>::deserialize(de)? {
        None => Ok(None),
        Some(Raw::Number(x)) => Ok(Some(x)),
        Some(Raw::Text(text)) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("expected a number, got {text:?}"))),
    }
}

/// The server's usage options from these settings.
///
/// # Errors
/// A cap of zero or below, an unknown time zone, or a price that is negative or not a number,
/// naming the key.
pub fn to_options(
    limits: &LimitsSettings,
    prices: &BTreeMap<String, PriceSettings>,
) -> Result<UsageOptions, ConfigError> {
    let mut options = UsageOptions::default();
    if let Some(n) = limits.requests_per_minute {
        let n = u32::try_from(n).ok().and_then(NonZeroU32::new).ok_or_else(|| {
            ConfigError(format!(
                "A2A__Limits__RequestsPerMinute: expected 1 to {}, got {n}",
                u32::MAX
            ))
        })?;
        options.workspace.requests_per_minute = Some(n);
    }
    if let Some(n) = limits.tokens_per_day {
        if n == 0 {
            return Err(ConfigError("A2A__Limits__TokensPerDay: must be at least 1, got 0".into()));
        }
        options.workspace.tokens_per_day = Some(n);
    }
    if let Some(x) = limits.usd_per_day {
        if !(x.is_finite() && x > 0.0) {
            return Err(ConfigError(format!("A2A__Limits__UsdPerDay: must be above 0, got {x}")));
        }
        options.workspace.usd_per_day = Some(x);
    }
    if let Some(name) = &limits.time_zone {
        let zone = name.trim().parse::<chrono_tz::Tz>().map_err(|_| {
            ConfigError(format!(
                "A2A__Limits__TimeZone: {name:?} is not an IANA time zone name (like Europe/Berlin or UTC)"
            ))
        })?;
        options.time_zone = Some(zone);
    }
    for (model, price) in prices {
        let fine = |x: f64| x.is_finite() && x >= 0.0;
        if model.trim().is_empty()
            || ![Some(price.input), Some(price.output), price.cache_read, price.cache_write]
                .into_iter()
                .flatten()
                .all(fine)
        {
            return Err(ConfigError(format!(
                "A2A__Prices: the price of {model:?} must be numbers of 0 or more (US dollars per million tokens)"
            )));
        }
        options.prices.insert(
            model.trim().to_string(),
            ModelPrice {
                input: price.input,
                output: price.output,
                cache_read: price.cache_read,
                cache_write: price.cache_write,
            },
        );
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn price_list_from_the_environment_reads_each_model() {
        let table = parse_price_list("claude-sonnet-4-5=3/15, gpt-4.1 = 2 / 8,").unwrap();
        assert_eq!(table.len(), 2);
        assert_eq!((table["gpt-4.1"].input, table["gpt-4.1"].output), (2.0, 8.0));
        for bad in ["claude", "claude=3", "claude=a/b"] {
            assert!(parse_price_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_refuse_zero_caps_unknown_zones_and_negative_prices() {
        let ok = LimitsSettings {
            requests_per_minute: Some(60),
            tokens_per_day: Some(1000),
            usd_per_day: Some(2.5),
            time_zone: Some("Europe/Berlin".into()),
        };
        let options = to_options(&ok, &BTreeMap::new()).unwrap();
        assert_eq!(options.workspace.tokens_per_day, Some(1000));
        assert_eq!(options.zone_name(), "Europe/Berlin");
        for bad in [
            LimitsSettings { requests_per_minute: Some(0), ..Default::default() },
            LimitsSettings { tokens_per_day: Some(0), ..Default::default() },
            LimitsSettings { usd_per_day: Some(-1.0), ..Default::default() },
            LimitsSettings { time_zone: Some("Mars/Olympus".into()), ..Default::default() },
        ] {
            assert!(to_options(&bad, &BTreeMap::new()).is_err(), "{bad:?}");
        }
        let negative = BTreeMap::from([(
            "m".to_string(),
            PriceSettings { input: -1.0, output: 1.0, cache_read: None, cache_write: None },
        )]);
        assert!(to_options(&LimitsSettings::default(), &negative).is_err());
    }
}
