//! Room held under the daily caps for model calls in flight, so that calls made at once cannot
//! together run far past a cap that each of them alone would respect.
//!
//! Before a model call the meter reserves the most the call can use
//! ([`volcanic_core::provider::usage_ceiling`], priced for spending caps); the call may start
//! when the caller has no other call in flight (its usage so far is under each cap), or when
//! what is spent plus what the calls in flight hold plus this reservation stays within every
//! cap that applies. Otherwise it waits until a call in flight ends. A reservation is given back
//! when its call has ended, by which time the call's usage is counted (the run drops it after
//! the call's `MessageEnd`), so each call is counted once as held, once as spent, and for a
//! moment as both, never as neither.
//!
//! The bound that follows, per caller: every call but the last one a caller makes alone was
//! started with its reservation inside the cap, so a caller's day ends at most one model call
//! past its cap, as long as each call uses no more than its reservation. For a workspace cap
//! over all callers the same holds per caller: at most one call of each caller past it.
//! This module knows nothing of HTTP, runs or providers; it only keeps the sums.

use std::collections::HashMap;

use super::Limits;
use super::ledger::Counts;

/// What calls in flight hold: how many there are, and the tokens and dollars they reserved.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Held {
    pub calls: u32,
    pub tokens: u64,
    pub usd: f64,
}

impl Held {
    fn add(&mut self, other: Held) {
        self.calls += other.calls;
        self.tokens = self.tokens.saturating_add(other.tokens);
        self.usd += other.usd;
    }

    /// Takes `other` away; with no call left, nothing is held (no rounding left behind).
    fn remove(&mut self, other: Held) {
        self.calls = self.calls.saturating_sub(other.calls);
        if self.calls == 0 {
            *self = Held::default();
        } else {
            self.tokens = self.tokens.saturating_sub(other.tokens);
            self.usd = (self.usd - other.usd).max(0.0);
        }
    }
}

/// The calls in flight of one workspace: per caller and all callers together.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    total: Held,
    callers: HashMap<String, Held>,
}

impl InFlight {
    /// What `caller`'s calls in flight hold.
    pub fn of(&self, caller: &str) -> Held {
        self.callers.get(caller).copied().unwrap_or_default()
    }

    /// What every caller's calls in flight hold together.
    pub fn total(&self) -> Held {
        self.total
    }

    pub fn add(&mut self, caller: &str, held: Held) {
        self.total.add(held);
        match self.callers.get_mut(caller) {
            Some(own) => own.add(held),
            None => {
                self.callers.insert(caller.to_string(), held);
            }
        }
    }

    /// Gives `held` of `caller` back; returns whether nothing is in flight any more.
    pub fn remove(&mut self, caller: &str, held: Held) -> bool {
        self.total.remove(held);
        if let Some(own) = self.callers.get_mut(caller) {
            own.remove(held);
            if own.calls == 0 {
                self.callers.remove(caller);
            }
        }
        self.callers.is_empty()
    }
}

/// Whether a call that reserves `need` may start now, next to calls in flight: for each daily
/// cap that applies (the caller's and the workspace's), what is spent, what the calls in flight
/// hold and `need` together stay within it. A caller with no call in flight needs no room (its
/// spent usage is under each cap: the meter checked that first).
pub(crate) fn fits(
    limits: &Limits,
    workspace: &Limits,
    (own, own_held): (&Counts, Held),
    (total, total_held): (&Counts, Held),
    need: Held,
) -> bool {
    if own_held.calls == 0 {
        return true;
    }
    let tokens = |cap: Option<u64>, used: u64, held: u64| {
        cap.is_none_or(|cap| used.saturating_add(held).saturating_add(need.tokens) <= cap)
    };
    let usd = |cap: Option<f64>, used: f64, held: f64| {
        cap.is_none_or(|cap| used + held + need.usd <= cap)
    };
    tokens(limits.tokens_per_day, own.tokens(), own_held.tokens)
        && usd(limits.usd_per_day, own.usd, own_held.usd)
        && tokens(workspace.tokens_per_day, total.tokens(), total_held.tokens)
        && usd(workspace.usd_per_day, total.usd, total_held.usd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(tokens: u64, usd: f64) -> Counts {
        Counts { input_tokens: tokens, usd, ..Counts::default() }
    }

    fn held(calls: u32, tokens: u64, usd: f64) -> Held {
        Held { calls, tokens, usd }
    }

    #[test]
    fn a_call_fits_next_to_others_only_within_every_cap() {
        let caller = Limits { tokens_per_day: Some(10_000), ..Limits::default() };
        let none = Limits::default();
        let zero = counts(0, 0.0);
        let need = held(1, 4_000, 0.0);
        // Alone, it needs no room.
        assert!(fits(
            &caller,
            &none,
            (&counts(9_999, 0.0), Held::default()),
            (&zero, held(5, 0, 0.0)),
            need
        ));
        // Next to one call of 4,000 with 1,000 spent: 9,000 fits, with 3,000 spent it does not.
        assert!(fits(
            &caller,
            &none,
            (&counts(1_000, 0.0), held(1, 4_000, 0.0)),
            (&zero, Held::default()),
            need
        ));
        assert!(!fits(
            &caller,
            &none,
            (&counts(3_000, 0.0), held(1, 4_000, 0.0)),
            (&zero, Held::default()),
            need
        ));
        // The workspace's cap counts every caller's calls in flight.
        let workspace = Limits { usd_per_day: Some(1.0), ..Limits::default() };
        let need = held(1, 0, 0.3);
        assert!(fits(
            &none,
            &workspace,
            (&zero, held(1, 0, 0.3)),
            (&counts(0, 0.2), held(2, 0, 0.5)),
            need
        ));
        assert!(!fits(
            &none,
            &workspace,
            (&zero, held(1, 0, 0.3)),
            (&counts(0, 0.3), held(2, 0, 0.5)),
            need
        ));
    }

    #[test]
    fn in_flight_gives_back_exactly_what_was_held() {
        let mut flight = InFlight::default();
        flight.add("a", held(1, 100, 0.1));
        flight.add("a", held(1, 50, 0.2));
        flight.add("b", held(1, 10, 0.3));
        assert_eq!(flight.of("a"), held(2, 150, 0.1 + 0.2));
        assert_eq!(flight.total().tokens, 160);
        assert!(!flight.remove("a", held(1, 100, 0.1)));
        assert_eq!(flight.of("a").tokens, 50);
        assert!(!flight.remove("a", held(1, 50, 0.2)));
        assert_eq!(flight.of("a"), Held::default());
        assert!(flight.remove("b", held(1, 10, 0.3)));
        // No call left: no dollars left over from rounding either.
        assert_eq!(flight.total(), Held::default());
    }
}
