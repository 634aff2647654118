//! The one model every command shares: a bucket kept as one instant (GCRA).
//!
//! The state is the instant the bucket is full again (the theoretical arrival time, `tat`).
//! Seen from `now`, the bucket is `tat - now` in debt: it holds `(fill - debt) / interval`
//! tokens. Taking `n` tokens moves `tat` later by `n * interval`.
//!
//! Everything runs in `i128`, so no input can overflow; results that go back into an `i64`
//! are checked, and one that would not fit is refused (never wrapped).

use crate::limits::MAX_NOW_NS;
use crate::{Quota, NS_PER_MS};

/// A new bucket state to store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write {
    /// The instant the bucket is full again, ns since the Unix epoch.
    pub tat_ns: i64,
    /// When the key may expire (the same instant, rounded up to ms): a missing key is a full
    /// bucket, so expiring any earlier would hand out tokens early.
    pub expire_at_ms: i64,
}

impl Write {
    /// A state to store, or `None` if it does not fit an `i64` (only a forged state can get
    /// there: the limits keep every real one decades inside).
    pub(crate) fn at(tat: i128) -> Option<Write> {
        let tat_ns = i64::try_from(tat).ok()?;
        Some(Write {
            tat_ns,
            expire_at_ms: ceil_ms(tat_ns),
        })
    }

    /// The ticket THROTTLE.TAKE ... TICKET replies: this state in µs, rounded down, which a
    /// double holds exactly (so the Lua twin produces the same number).
    pub fn ticket_us(&self) -> i64 {
        self.tat_ns.div_euclid(1000)
    }
}

/// A bucket as seen at one instant.
#[derive(Clone, Copy, Debug)]
pub(crate) struct View {
    /// The clock, clamped to `0..=MAX_NOW_NS`.
    pub now: i128,
    /// When the bucket is full, never before `now`: time never runs backwards for a bucket,
    /// so a clock that reads earlier than the state adds no tokens.
    pub base: i128,
    pub interval: i128,
    pub fill: i128,
}

impl View {
    /// `stored` is the key's state (`None`: no key, a full bucket). A clock reading outside
    /// `0..=MAX_NOW_NS` is clamped, which can only make the bucket stricter.
    pub fn at(quota: &Quota, stored: Option<i64>, now_ns: i64) -> View {
        let now = i128::from(now_ns.clamp(0, MAX_NOW_NS));
        let interval = i128::from(quota.interval.ns());
        View {
            now,
            base: stored.map_or(now, |tat| now.max(i128::from(tat))),
            interval,
            fill: i128::from(quota.capacity) * interval,
        }
    }

    /// How far ahead of `now` the bucket is full.
    pub fn debt(&self) -> i128 {
        self.base - self.now
    }

    /// The cost of `tokens`, ns.
    pub fn cost(&self, tokens: u64) -> i128 {
        i128::from(tokens) * self.interval
    }

    /// How long until `cost` is there: once the bucket has refilled to `cost` below full.
    pub fn wait(&self, cost: i128) -> i128 {
        (self.debt() + cost - self.fill).max(0)
    }

    /// The state after taking `cost` for use at `act` (`now` or later). Taking at `act` is a
    /// take by a clock that reads `act`: a use scheduled later than the bucket alone would
    /// schedule it (THROTTLE.MTAKE waits for its slowest bucket) then cannot bunch up with
    /// the uses after it.
    pub fn taken(&self, cost: i128, act: i128) -> i128 {
        self.base.max(act) + cost
    }

    /// Whole tokens left with `debt` ahead of `now`: 0 while in debt past the capacity.
    pub fn remaining(&self, debt: i128) -> u64 {
        u64::try_from((self.fill - debt).max(0) / self.interval).unwrap_or(0)
    }
}

/// An `i128` duration as an `i64`, saturating (only forged states get near the limit).
pub(crate) fn saturate(ns: i128) -> i64 {
    i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX })
}

/// Rounds a non-negative duration up to whole ms, so a caller that sleeps it is never early.
pub fn ceil_ms(ns: i64) -> i64 {
    ns.div_euclid(NS_PER_MS) + i64::from(ns.rem_euclid(NS_PER_MS) > 0)
}
