//! A day's usage per workspace and caller, its file `<state dir>/a2a/usage/<YYYY-MM-DD>.json`,
//! and the owner's view of it ([`WorkspaceReport`], shared by `volcanic usage` and Telegram's
//! `/a2a`).
//!
//! The file lives in the sessions' state folder, out of every session's reach. It is written
//! whole and atomically by the server; `volcanic usage` only reads it. Files older than
//! [`KEEP_DAYS`] days are removed when a day begins.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Days, NaiveDate, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use super::{Limits, group_thousands};

/// Days of usage files kept.
pub const KEEP_DAYS: u64 = 90;

/// Largest usage file read; a bigger one is treated as absent, with a warning.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The format of the file, written as `version`.
const VERSION: u32 = 1;

/// What one caller (or a workspace's callers together) used in a day.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Counts {
    /// Authenticated requests admitted.
    pub requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Cached input read back and written, as the provider reports them.
    pub cached_tokens: u64,
    /// Spending in US dollars, from the price table.
    pub usd: f64,
    /// Model calls whose usage the provider did not report, counted by estimate.
    pub estimated_calls: u64,
    /// Model calls of a model without a price: their tokens count, their cost is unknown.
    pub unpriced_calls: u64,
}

impl Counts {
    /// Every token counted against a `tokensPerDay` cap.
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens).saturating_add(self.cached_tokens)
    }

    fn add(&mut self, other: &Counts) {
        self.requests += other.requests;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_tokens += other.cached_tokens;
        self.usd += other.usd;
        self.estimated_calls += other.estimated_calls;
        self.unpriced_calls += other.unpriced_calls;
    }
}

/// A workspace's day: each caller's counts, and the alerts already sent (so each goes once).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkspaceDay {
    pub callers: BTreeMap<String, Counts>,
    /// `caller:<name>:<cap>:<percent>` or `workspace:<cap>:<percent>`.
    pub alerts: BTreeSet<String>,
}

impl WorkspaceDay {
    /// All callers together.
    pub fn total(&self) -> Counts {
        let mut total = Counts::default();
        for counts in self.callers.values() {
            total.add(counts);
        }
        total
    }
}

/// One day's file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DayFile {
    pub version: u32,
    /// `YYYY-MM-DD` in [`DayFile::time_zone`].
    pub date: String,
    pub time_zone: String,
    /// By workspace path.
    #[serde(default)]
    pub workspaces: BTreeMap<String, WorkspaceDay>,
}

impl DayFile {
    pub(crate) fn new(date: NaiveDate, time_zone: &str) -> Self {
        DayFile {
            version: VERSION,
            date: date.to_string(),
            time_zone: time_zone.to_string(),
            workspaces: BTreeMap::new(),
        }
    }

    /// The day of `workspace`, if anything was counted for it.
    pub fn workspace(&self, workspace: &Path) -> Option<&WorkspaceDay> {
        self.workspaces.get(&*workspace.to_string_lossy())
    }
}

/// The folder of the usage files.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("a2a").join("usage")
}

/// The file of `date`.
pub fn path(state_dir: &Path, date: NaiveDate) -> PathBuf {
    dir(state_dir).join(format!("{date}.json"))
}

/// The calendar day `now` falls in, in `zone` (UTC when unset), and when it ends.
pub fn day_of(now: DateTime<Utc>, zone: Option<chrono_tz::Tz>) -> (NaiveDate, DateTime<Utc>) {
    match zone {
        None => {
            let date = now.date_naive();
            (date, start_of(Utc, next(date)))
        }
        Some(tz) => {
            let date = now.with_timezone(&tz).date_naive();
            (date, start_of(tz, next(date)))
        }
    }
}

fn next(date: NaiveDate) -> NaiveDate {
    date.checked_add_days(Days::new(1)).unwrap_or(date)
}

/// The first instant of `date` in `zone`. Where a clock change skips midnight, the day starts
/// at the first hour that exists.
fn start_of<Z: TimeZone>(zone: Z, date: NaiveDate) -> DateTime<Utc> {
    let midnight = date.and_hms_opt(0, 0, 0).unwrap_or_default();
    (0..4)
        .find_map(|hour| {
            zone.from_local_datetime(&(midnight + chrono::Duration::hours(hour)))
                .earliest()
                .map(|t| t.with_timezone(&Utc))
        })
        .unwrap_or_else(|| midnight.and_utc())
}

/// Reads the file of `date`: `None` when there is none (or it is not a regular file, too
/// large, or does not parse: each with a warning, and the day starts from zero).
///
/// # Errors
/// An I/O error other than the file missing.
pub fn read(state_dir: &Path, date: NaiveDate) -> io::Result<Option<DayFile>> {
    let file = path(state_dir, date);
    let Some(bytes) = volcanic_core::safe_file::read_config(&file, MAX_FILE_BYTES)? else {
        return Ok(None);
    };
    match serde_json::from_slice::<DayFile>(&bytes) {
        Ok(day) if day.date == date.to_string() => Ok(Some(day)),
        Ok(_) | Err(_) => {
            tracing::warn!(file = %file.display(), "usage file does not parse, counting the day from zero");
            Ok(None)
        }
    }
}

/// Writes `day` atomically (the server owns the file: a link in its place is replaced).
pub(crate) fn write(state_dir: &Path, day: &DayFile) -> io::Result<()> {
    let date = NaiveDate::parse_from_str(&day.date, "%Y-%m-%d").map_err(io::Error::other)?;
    let bytes = serde_json::to_vec_pretty(day).map_err(io::Error::other)?;
    volcanic_core::atomic::write_atomic_with(&path(state_dir, date), &bytes, &[])
}

/// Removes usage files of days more than [`KEEP_DAYS`] before `today`.
pub(crate) fn prune(state_dir: &Path, today: NaiveDate) {
    let Some(oldest) = today.checked_sub_days(Days::new(KEEP_DAYS)) else { return };
    let Ok(entries) = std::fs::read_dir(dir(state_dir)) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(date) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
        else {
            continue;
        };
        if date < oldest
            && let Err(err) = std::fs::remove_file(entry.path())
        {
            tracing::warn!(file = %entry.path().display(), error = %err, "cannot remove an old usage file");
        }
    }
}

/// One caller's line of the owner's view.
#[derive(Debug, Clone, PartialEq)]
pub struct CallerReport {
    pub name: String,
    pub counts: Counts,
    pub limits: Limits,
    /// Whether the caller is still in callers.json (usage of a removed caller is still shown).
    pub listed: bool,
}

/// A workspace's usage today, against its caps: what `volcanic usage` and `/a2a` show.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceReport {
    pub date: String,
    pub time_zone: String,
    pub callers: Vec<CallerReport>,
    pub total: Counts,
    /// The caps over all callers together.
    pub limits: Limits,
}

impl WorkspaceReport {
    /// The report of `day` (nothing counted yet when `None`) for the callers of callers.json,
    /// in its order, then callers counted today that it no longer lists.
    pub fn new(
        date: &str,
        time_zone: &str,
        day: Option<&WorkspaceDay>,
        callers: &[(String, Limits)],
        limits: Limits,
    ) -> Self {
        let counted =
            |name: &str| day.and_then(|d| d.callers.get(name)).copied().unwrap_or_default();
        let mut lines: Vec<CallerReport> = callers
            .iter()
            .map(|(name, limits)| CallerReport {
                name: name.clone(),
                counts: counted(name),
                limits: *limits,
                listed: true,
            })
            .collect();
        if let Some(day) = day {
            for (name, counts) in &day.callers {
                if !callers.iter().any(|(listed, _)| listed == name) {
                    lines.push(CallerReport {
                        name: name.clone(),
                        counts: *counts,
                        limits: Limits::default(),
                        listed: false,
                    });
                }
            }
        }
        WorkspaceReport {
            date: date.to_string(),
            time_zone: time_zone.to_string(),
            callers: lines,
            total: day.map(WorkspaceDay::total).unwrap_or_default(),
            limits,
        }
    }

    /// The report as text lines: a heading, one line per caller, one for all together.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!("Usage on {} ({}):", self.date, self.time_zone)];
        for caller in &self.callers {
            let gone = if caller.listed { "" } else { " (no longer in callers.json)" };
            out.push(format!(
                "  {}{gone}: {}",
                caller.name,
                describe(&caller.counts, &caller.limits)
            ));
        }
        out.push(format!("  all callers: {}", describe(&self.total, &self.limits)));
        out
    }

    /// The report as JSON, for `volcanic usage --json`.
    pub fn to_json(&self) -> serde_json::Value {
        let limits = |l: &Limits| {
            serde_json::json!({
                "requestsPerMinute": l.requests_per_minute.map(|n| n.get()),
                "tokensPerDay": l.tokens_per_day,
                "usdPerDay": l.usd_per_day,
            })
        };
        serde_json::json!({
            "date": self.date,
            "timeZone": self.time_zone,
            "callers": self.callers.iter().map(|c| serde_json::json!({
                "name": c.name,
                "listed": c.listed,
                "usage": c.counts,
                "tokens": c.counts.tokens(),
                "limits": limits(&c.limits),
            })).collect::<Vec<_>>(),
            "total": {"usage": self.total, "tokens": self.total.tokens(), "limits": limits(&self.limits)},
        })
    }
}

/// `12 requests, 45,210 tokens of 100,000 (45%), $0.31 of $2.00 (15%), at most 30 requests/min`.
/// Money shows where there is a spending cap or a cost.
fn describe(counts: &Counts, limits: &Limits) -> String {
    // The small epsilon keeps 1,150 of 1,000 at 115 % despite the float's rounding.
    let percent = |used: f64, limit: f64| (used * 100.0 / limit + 1e-9).floor() as u64;
    let plural = |n: u64, word: &str| {
        format!("{} {word}{}", group_thousands(n), if n == 1 { "" } else { "s" })
    };
    let mut text = format!(
        "{}, {} tokens",
        plural(counts.requests, "request"),
        group_thousands(counts.tokens())
    );
    if let Some(cap) = limits.tokens_per_day {
        text.push_str(&format!(
            " of {} ({}%)",
            group_thousands(cap),
            percent(counts.tokens() as f64, cap as f64)
        ));
    }
    if counts.usd > 0.0 || limits.usd_per_day.is_some() {
        text.push_str(&format!(", ${:.2}", counts.usd));
    }
    if let Some(cap) = limits.usd_per_day {
        text.push_str(&format!(" of ${cap:.2} ({}%)", percent(counts.usd, cap)));
        if counts.unpriced_calls > 0 {
            text.push_str(&format!(
                ", {} without a price",
                plural(counts.unpriced_calls, "model call")
            ));
        }
    }
    if let Some(n) = limits.requests_per_minute {
        text.push_str(&format!(", at most {n} requests/min"));
    }
    if counts.estimated_calls > 0 {
        text.push_str(&format!(", {} estimated", plural(counts.estimated_calls, "model call")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn day_is_the_calendar_day_of_the_zone() {
        let now = at("2026-12-04T23:30:00Z");
        let (date, ends) = day_of(now, None);
        assert_eq!(
            (date.to_string(), ends),
            ("2026-12-04".to_string(), at("2026-12-05T00:00:00Z"))
        );
        let (date, ends) = day_of(now, Some(chrono_tz::Europe::Berlin));
        assert_eq!(
            (date.to_string(), ends),
            ("2026-12-05".to_string(), at("2026-12-05T23:00:00Z"))
        );
        let (date, ends) = day_of(now, Some(chrono_tz::America::New_York));
        assert_eq!(
            (date.to_string(), ends),
            ("2026-12-04".to_string(), at("2026-12-05T05:00:00Z"))
        );
    }

    #[test]
    fn a_day_whose_midnight_is_skipped_starts_at_the_first_hour_that_exists() {
        // Santiago moved its clocks from 00:00 to 01:00 on 2026-09-06.
        let (date, ends) = day_of(at("2026-09-05T12:00:00Z"), Some(chrono_tz::America::Santiago));
        assert_eq!(date.to_string(), "2026-09-05");
        assert_eq!(ends, at("2026-09-06T04:00:00Z"));
    }

    #[test]
    fn file_round_trips_and_a_bad_file_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let date = NaiveDate::from_ymd_opt(2026, 12, 4).unwrap();
        assert_eq!(read(dir.path(), date).unwrap(), None);
        let mut day = DayFile::new(date, "UTC");
        let ws = day.workspaces.entry("/ws".into()).or_default();
        ws.callers
            .insert("bot".into(), Counts { requests: 2, input_tokens: 10, ..Counts::default() });
        ws.alerts.insert("caller:bot:tokens:80".into());
        write(dir.path(), &day).unwrap();
        assert_eq!(read(dir.path(), date).unwrap(), Some(day));
        std::fs::write(path(dir.path(), date), b"{not json").unwrap();
        assert_eq!(read(dir.path(), date).unwrap(), None);
    }

    #[test]
    fn prune_removes_only_files_older_than_the_kept_days() {
        let dir = tempfile::tempdir().unwrap();
        let today = NaiveDate::from_ymd_opt(2026, 12, 4).unwrap();
        let old = today.checked_sub_days(Days::new(KEEP_DAYS + 1)).unwrap();
        let kept = today.checked_sub_days(Days::new(KEEP_DAYS)).unwrap();
        for date in [old, kept, today] {
            write(dir.path(), &DayFile::new(date, "UTC")).unwrap();
        }
        std::fs::write(super::dir(dir.path()).join("notes.txt"), b"x").unwrap();
        prune(dir.path(), today);
        assert!(!path(dir.path(), old).exists());
        assert!(path(dir.path(), kept).exists() && path(dir.path(), today).exists());
        assert!(super::dir(dir.path()).join("notes.txt").exists());
    }

    #[test]
    fn report_lists_callers_of_the_file_then_removed_ones_with_the_total() {
        let mut day = WorkspaceDay::default();
        day.callers.insert(
            "a".into(),
            Counts {
                requests: 1,
                input_tokens: 800,
                output_tokens: 200,
                usd: 0.5,
                ..Counts::default()
            },
        );
        day.callers.insert("gone".into(), Counts { requests: 3, ..Counts::default() });
        let limits =
            Limits { tokens_per_day: Some(1000), usd_per_day: Some(2.0), ..Limits::default() };
        let report = WorkspaceReport::new(
            "2026-12-04",
            "UTC",
            Some(&day),
            &[("a".into(), limits), ("b".into(), Limits::default())],
            Limits::default(),
        );
        assert_eq!(
            report.lines(),
            [
                "Usage on 2026-12-04 (UTC):",
                "  a: 1 request, 1,000 tokens of 1,000 (100%), $0.50 of $2.00 (25%)",
                "  b: 0 requests, 0 tokens",
                "  gone (no longer in callers.json): 3 requests, 0 tokens",
                "  all callers: 4 requests, 1,000 tokens, $0.50",
            ]
        );
    }
}
