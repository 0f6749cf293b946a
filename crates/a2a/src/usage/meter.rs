//! The server's meter: admits requests against `requestsPerMinute`, counts the model's usage
//! of each caller's runs, refuses sends and model calls over a daily cap, holds room under the
//! daily caps for model calls in flight ([`super::reservation`]), and alerts the owner.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use volcanic_core::message::Usage;
use volcanic_core::provider::ModelRequest;

use super::ledger::{self, DayFile, WorkspaceDay, WorkspaceReport};
use super::rate::Rates;
use super::reservation::{self, Held, InFlight};
use super::{Cap, Clock, Limits, UsageAlert, UsageNotifier, UsageOptions};
use crate::auth::{A2aWorkspace, Caller};
use crate::error::A2aError;

/// How long after a change the day's file is written (and the most a crash can lose).
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// The thresholds the owner hears of, in percent of a cap.
const ALERT_PERCENTS: [u8; 2] = [80, 100];

/// Counts usage against the caps; one per server.
pub struct Meter {
    options: UsageOptions,
    clock: Clock,
    state_dir: PathBuf,
    rates: Rates,
    state: Mutex<State>,
    /// The counts changed since the file was last written.
    dirty: AtomicBool,
    flusher: AtomicBool,
    /// Held from a write's snapshot to its end, so an older snapshot never lands after a newer.
    writing: tokio::sync::Mutex<()>,
    notifier: Option<Arc<dyn UsageNotifier>>,
    /// Told when a model call in flight gives its room back.
    released: tokio::sync::Notify,
    /// Owns the flusher and the alerts, so the server's shutdown waits for them.
    tracker: TaskTracker,
    /// Ends the flusher (the server writes the counts once more after its runs have ended).
    shutdown: CancellationToken,
}

struct State {
    date: NaiveDate,
    ends: DateTime<Utc>,
    day: DayFile,
    /// A finished day not yet written.
    finished: Option<DayFile>,
    /// Each caller's caps as its latest request had them (callers.json may change while a
    /// session is open; its runs are held to the current caps).
    limits: HashMap<PathBuf, HashMap<String, Limits>>,
    /// The model calls in flight per workspace, and the room they hold under the daily caps.
    in_flight: HashMap<PathBuf, InFlight>,
}

impl State {
    /// `caller`'s caps as its latest request had them.
    fn limits_of(&self, caller: &Caller) -> Limits {
        self.limits
            .get(&caller.workspace.path)
            .and_then(|l| l.get(&caller.name))
            .copied()
            .unwrap_or(caller.limits)
    }
}

/// Whether a model call may start now.
enum Room {
    /// No daily cap applies: nothing to hold.
    Free,
    /// It may, holding this room.
    Held(Held),
    /// Not before a call in flight ends.
    Wait,
}

/// A send or model call over a daily cap: the caller's text and when the day ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Exhausted {
    pub reason: String,
    pub retry_after_secs: u64,
}

impl Meter {
    /// The clock the day follows (retention takes its "now" from it too).
    pub(crate) fn clock(&self) -> Clock {
        self.clock.clone()
    }

    /// A meter that continues today's counts from the state folder, first removing the temp
    /// files of day-file writes that a killed process left there (nothing of this meter's own
    /// is in flight yet). Its background work (the flusher, alerts) goes on `tracker` and the
    /// flusher ends with `shutdown`.
    pub fn new(
        options: UsageOptions,
        clock: Clock,
        state_dir: &Path,
        notifier: Option<Arc<dyn UsageNotifier>>,
        tracker: TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        volcanic_core::atomic::remove_stale_temp_files(
            &ledger::dir(state_dir),
            std::time::SystemTime::now(),
        );
        let (date, ends) = ledger::day_of(clock(), options.time_zone);
        let day = load(state_dir, date, options.zone_name());
        Meter {
            clock,
            state_dir: state_dir.to_path_buf(),
            rates: Rates::default(),
            state: Mutex::new(State {
                date,
                ends,
                day,
                finished: None,
                limits: HashMap::new(),
                in_flight: HashMap::new(),
            }),
            dirty: AtomicBool::new(false),
            flusher: AtomicBool::new(false),
            writing: tokio::sync::Mutex::new(()),
            notifier,
            options,
            released: tokio::sync::Notify::new(),
            tracker,
            shutdown,
        }
    }

    /// Admits an authenticated request of `caller`: refused over `requestsPerMinute` (the
    /// caller's or the workspace's), else counted in today's requests.
    ///
    /// # Errors
    /// [`A2aError::RateLimited`], with the wait until one more is allowed.
    pub(crate) fn admit(self: &Arc<Self>, caller: &Caller) -> Result<(), A2aError> {
        let workspace_cap = self.options.workspace.requests_per_minute;
        if caller.limits.requests_per_minute.is_some() || workspace_cap.is_some() {
            self.rates
                .check(
                    &caller.workspace.path,
                    &caller.name,
                    caller.limits.requests_per_minute,
                    workspace_cap,
                )
                .map_err(|refused| A2aError::RateLimited {
                    per_minute: refused.per_minute.get(),
                    workspace: refused.workspace,
                    retry_after_secs: refused.wait.as_secs_f64().ceil().max(1.0) as u64,
                })?;
        }
        {
            let mut guard = self.lock();
            let state = &mut *guard;
            // Found without allocating in the common case (a caller seen before, caps unchanged).
            match state.limits.get_mut(&caller.workspace.path) {
                Some(known) => match known.get_mut(&caller.name) {
                    Some(limits) => *limits = caller.limits,
                    None => {
                        known.insert(caller.name.clone(), caller.limits);
                    }
                },
                None => {
                    let limits = HashMap::from([(caller.name.clone(), caller.limits)]);
                    state.limits.insert(caller.workspace.path.clone(), limits);
                }
            }
            count_request(&mut state.day, &caller.workspace.path, &caller.name);
        }
        self.changed();
        Ok(())
    }

    /// Whether `caller` may start a run of `model` now: refused when the caller's or the
    /// workspace's daily token or spending cap is reached, or when a spending cap applies and
    /// `model` has no price.
    ///
    /// # Errors
    /// [`Exhausted`], with the reason for the caller.
    pub fn check(&self, caller: &Caller, model: &str) -> Result<(), Exhausted> {
        let state = self.lock();
        self.exhausted(&state, caller, &state.limits_of(caller), model)
    }

    /// Holds room under the daily caps for one model call of `caller` that sends `request`,
    /// waiting while the caller's other calls in flight leave too little
    /// ([`super::reservation`]); the room is given back when the returned reservation is
    /// dropped. `None` when no daily cap applies to the caller: nothing needs holding (calls
    /// that start before the owner sets a cap are not counted as in flight under it).
    ///
    /// # Errors
    /// [`Exhausted`] when a daily cap is reached (or a spending cap applies to a model without a
    /// price), as [`Meter::check`].
    ///
    /// # Cancel safety
    /// Dropping the future while it waits holds nothing.
    pub(crate) async fn reserve(
        self: &Arc<Self>,
        caller: &Caller,
        request: &ModelRequest,
    ) -> Result<Option<Reservation>, Exhausted> {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            // Registered before the look, so a release between the look and the wait wakes it.
            released.as_mut().enable();
            match self.try_reserve(caller, request)? {
                Room::Free => return Ok(None),
                Room::Held(held) => {
                    let (workspace, name) = (caller.workspace.path.clone(), caller.name.clone());
                    return Ok(Some(Reservation::new(self.clone(), workspace, name, held)));
                }
                Room::Wait => {
                    tracing::debug!(caller = %caller.name, "a model call waits for room under a daily cap until a call in flight ends");
                    released.await;
                }
            }
        }
    }

    /// Reserves room for the call if it may start now.
    fn try_reserve(&self, caller: &Caller, request: &ModelRequest) -> Result<Room, Exhausted> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let limits = state.limits_of(caller);
        self.exhausted(state, caller, &limits, &request.model)?;
        let workspace = &self.options.workspace;
        if !limits.has_daily() && !workspace.has_daily() {
            return Ok(Room::Free);
        }
        let ceiling = volcanic_core::provider::usage_ceiling(request);
        let usd = self.options.prices.get(&request.model).map_or(0.0, |p| p.most(&ceiling));
        let need = Held { calls: 1, tokens: ceiling.total(), usd };
        let path = &caller.workspace.path;
        let day = state.day.workspace(path);
        let own = day.and_then(|d| d.callers.get(&caller.name)).copied().unwrap_or_default();
        let total = day.map(WorkspaceDay::total).unwrap_or_default();
        let held = state
            .in_flight
            .get(path)
            .map(|flight| (flight.of(&caller.name), flight.total()))
            .unwrap_or_default();
        if !reservation::fits(&limits, workspace, (&own, held.0), (&total, held.1), need) {
            return Ok(Room::Wait);
        }
        match state.in_flight.get_mut(path) {
            Some(flight) => flight.add(&caller.name, need),
            None => {
                let mut flight = InFlight::default();
                flight.add(&caller.name, need);
                state.in_flight.insert(path.clone(), flight);
            }
        }
        Ok(Room::Held(need))
    }

    /// Gives back the room a call of `caller` held, and wakes the calls waiting for room.
    pub(crate) fn release(&self, workspace: &Path, caller: &str, held: Held) {
        {
            let mut state = self.lock();
            if let Some(flight) = state.in_flight.get_mut(workspace)
                && flight.remove(caller, held)
            {
                state.in_flight.remove(workspace);
            }
        }
        self.released.notify_waiters();
    }

    /// Refuses `caller` a run or model call of `model` when one of its daily caps or the
    /// workspace's is reached, or when a spending cap applies and `model` has no price.
    fn exhausted(
        &self,
        state: &State,
        caller: &Caller,
        limits: &Limits,
        model: &str,
    ) -> Result<(), Exhausted> {
        let workspace = &self.options.workspace;
        if !limits.has_daily() && !workspace.has_daily() {
            return Ok(());
        }
        let day = state.day.workspace(&caller.workspace.path);
        let own = day.and_then(|d| d.callers.get(&caller.name)).copied().unwrap_or_default();
        let total = day.map(WorkspaceDay::total).unwrap_or_default();
        let refuse = |reason: String| Exhausted {
            reason: format!(
                "{reason} for {} ({}); it resets in {}",
                state.date,
                self.options.zone_name(),
                until(state.ends, (self.clock)())
            ),
            retry_after_secs: (state.ends - (self.clock)()).num_seconds().max(1) as u64,
        };
        if (limits.usd_per_day.is_some() || workspace.usd_per_day.is_some())
            && !self.options.prices.contains_key(model)
        {
            tracing::warn!(
                model,
                "a usdPerDay cap applies but the model has no price (A2A__Prices): refusing its runs"
            );
            return Err(Exhausted {
                reason: format!(
                    "the model {model} has no price in the assistant's configuration, so its daily spending cap cannot be kept; ask the assistant's owner to add one"
                ),
                retry_after_secs: (state.ends - (self.clock)()).num_seconds().max(1) as u64,
            });
        }
        let name = &caller.name;
        if let Some(cap) = limits.tokens_per_day
            && own.tokens() >= cap
        {
            return Err(refuse(format!(
                "{name} has used its daily token cap ({} of {} tokens)",
                own.tokens(),
                cap
            )));
        }
        if let Some(cap) = limits.usd_per_day
            && own.usd >= cap
        {
            return Err(refuse(format!(
                "{name} has used its daily spending cap (${:.2} of ${cap:.2})",
                own.usd
            )));
        }
        if let Some(cap) = workspace.tokens_per_day
            && total.tokens() >= cap
        {
            return Err(refuse(format!(
                "this assistant's callers have used their daily token cap together ({} of {} tokens)",
                total.tokens(),
                cap
            )));
        }
        if let Some(cap) = workspace.usd_per_day
            && total.usd >= cap
        {
            return Err(refuse(format!(
                "this assistant's callers have used their daily spending cap together (${:.2} of ${cap:.2})",
                total.usd
            )));
        }
        Ok(())
    }

    /// Counts one model call of a run of `caller` (by workspace and name), and alerts the owner
    /// of each cap it takes past 80 % or 100 % for the first time today.
    pub fn record(
        self: &Arc<Self>,
        workspace: &A2aWorkspace,
        caller: &str,
        model: &str,
        usage: &Usage,
    ) {
        if usage.is_empty() {
            return;
        }
        let (owner_id, workspace) = (&workspace.owner_id, workspace.path.as_path());
        let price = self.options.prices.get(model);
        let alerts = {
            let mut guard = self.lock();
            let state = &mut *guard;
            let limits = state
                .limits
                .get(workspace)
                .and_then(|l| l.get(caller))
                .copied()
                .unwrap_or_default();
            let date = state.date.to_string();
            let entry =
                state.day.workspaces.entry(workspace.to_string_lossy().into_owned()).or_default();
            let counts = entry.callers.entry(caller.to_string()).or_default();
            counts.input_tokens += usage.input_tokens;
            counts.output_tokens += usage.output_tokens;
            counts.cached_tokens += usage.cache_read_tokens + usage.cache_write_tokens;
            match price {
                Some(price) => counts.usd += price.cost(usage),
                None => counts.unpriced_calls += 1,
            }
            if usage.estimated {
                counts.estimated_calls += 1;
            }
            let own = *counts;
            let total = entry.total();
            let mut alerts = Vec::new();
            for (who, limits, used) in
                [(Some(caller), limits, own), (None, self.options.workspace, total)]
            {
                let caps = [
                    (Cap::Tokens, limits.tokens_per_day.map(|c| c as f64), used.tokens() as f64),
                    (Cap::Usd, limits.usd_per_day, used.usd),
                ];
                for (cap, limit, used) in caps {
                    let Some(limit) = limit else { continue };
                    for percent in ALERT_PERCENTS {
                        if used < limit * f64::from(percent) / 100.0 {
                            continue;
                        }
                        let key = match who {
                            Some(name) => format!("caller:{name}:{}:{percent}", cap.as_str()),
                            None => format!("workspace:{}:{percent}", cap.as_str()),
                        };
                        // Once per day per cap and threshold (the set is in the day's file,
                        // so a restart does not repeat one).
                        if entry.alerts.insert(key) {
                            alerts.push(UsageAlert {
                                workspace: workspace.to_path_buf(),
                                owner_id: owner_id.clone(),
                                caller: who.map(str::to_string),
                                cap,
                                percent,
                                used,
                                limit,
                                date: date.clone(),
                            });
                        }
                    }
                }
            }
            alerts
        };
        self.changed();
        for alert in alerts {
            // Owner notifications are logged (ARCHITECTURE.md); the notifier tells the owner.
            tracing::warn!(
                caller = alert.caller.as_deref().unwrap_or("all callers"),
                cap = alert.cap.as_str(),
                percent = alert.percent,
                "{}",
                alert.text()
            );
            if let Some(notifier) = self.notifier.clone() {
                self.tracker.spawn(async move { notifier.alert(&alert).await });
            }
        }
    }

    /// Today's usage of `workspace`'s callers against their caps (`callers`: each caller of
    /// callers.json, in order, with its caps).
    pub fn report(&self, workspace: &Path, callers: &[(String, Limits)]) -> WorkspaceReport {
        let state = self.lock();
        WorkspaceReport::new(
            &state.date.to_string(),
            self.options.zone_name(),
            state.day.workspace(workspace),
            callers,
            self.options.workspace,
        )
    }

    /// Writes the counts now if they changed (the server calls it when it stops).
    pub async fn flush(&self) {
        let _writing = self.writing.lock().await;
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return;
        }
        let (finished, day) = {
            let mut state = self.lock();
            (state.finished.take(), state.day.clone())
        };
        let dir = self.state_dir.clone();
        let written = tokio::task::spawn_blocking(move || {
            // The finished day first; handed back when it could not be written.
            if let Some(done) = &finished
                && let Err(err) = ledger::write(&dir, done)
            {
                return (finished, Err(err));
            }
            (None, ledger::write(&dir, &day))
        })
        .await;
        match written {
            Ok((_, Ok(()))) => {}
            Ok((unwritten, Err(err))) => {
                tracing::error!(dir = %ledger::dir(&self.state_dir).display(), error = %err, "cannot write the usage file; trying again in a second");
                if let Some(unwritten) = unwritten {
                    self.lock().finished.get_or_insert(unwritten);
                }
                self.dirty.store(true, Ordering::Release);
            }
            Err(err) => tracing::error!(error = %err, "writing the usage file panicked"),
        }
    }

    /// The state, with the day moved on when it ended: the finished day is kept to be
    /// written, and the new day continues a file of its date if there is one.
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let now = (self.clock)();
        if now >= state.ends {
            let (date, ends) = ledger::day_of(now, self.options.time_zone);
            if date != state.date {
                // Small and once a day: read while holding the lock, so no count is lost.
                let day = load(&self.state_dir, date, self.options.zone_name());
                let finished = std::mem::replace(&mut state.day, day);
                state.finished = Some(finished);
                state.date = date;
                self.dirty.store(true, Ordering::Release);
                ledger::prune(&self.state_dir, date);
            }
            state.ends = ends;
        }
        state
    }

    /// Marks the counts changed and makes sure a task writes them within [`FLUSH_EVERY`].
    fn changed(self: &Arc<Self>) {
        self.dirty.store(true, Ordering::Release);
        if self.flusher.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.flusher.store(false, Ordering::Release);
            return;
        };
        let meter: Weak<Meter> = Arc::downgrade(self);
        let stop = self.shutdown.clone();
        let flusher = async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(FLUSH_EVERY) => {}
                    // The server's last flush comes after its runs (`A2aServer::serve`).
                    () = stop.cancelled() => return,
                }
                let Some(meter) = meter.upgrade() else { return };
                meter.flush().await;
            }
        };
        self.tracker.spawn_on(flusher, &runtime);
    }
}

/// The day's file, or a new day when there is none (or it cannot be read: logged).
fn load(state_dir: &Path, date: NaiveDate, zone: &str) -> DayFile {
    match ledger::read(state_dir, date) {
        Ok(Some(day)) => day,
        Ok(None) => DayFile::new(date, zone),
        Err(err) => {
            tracing::error!(dir = %ledger::dir(state_dir).display(), error = %err, "cannot read today's usage file; counting from zero");
            DayFile::new(date, zone)
        }
    }
}

/// Counts a request of `caller` in `workspace` (without allocating once both are known).
fn count_request(day: &mut DayFile, workspace: &Path, caller: &str) {
    let key = workspace.to_string_lossy();
    if let Some(counts) =
        day.workspaces.get_mut(key.as_ref()).and_then(|ws| ws.callers.get_mut(caller))
    {
        counts.requests += 1;
        return;
    }
    let entry = day.workspaces.entry(key.into_owned()).or_default();
    entry.callers.entry(caller.to_string()).or_default().requests += 1;
}

/// `3 h 12 min` until `ends`.
fn until(ends: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let minutes = (ends - now).num_minutes().max(1);
    match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}
/// The room one model call of a caller holds under the daily caps. Dropping it gives the room
/// back and wakes the calls waiting for room; the run drops it once the call has ended and its
/// usage is counted.
pub(crate) struct Reservation {
    meter: Arc<Meter>,
    workspace: PathBuf,
    caller: String,
    held: Held,
}

impl Reservation {
    pub(crate) fn new(meter: Arc<Meter>, workspace: PathBuf, caller: String, held: Held) -> Self {
        Reservation { meter, workspace, caller, held }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.meter.release(&self.workspace, &self.caller, self.held);
    }
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("caller", &self.caller)
            .field("tokens", &self.held.tokens)
            .field("usd", &self.held.usd)
            .finish()
    }
}
