//! The one model every command shares: a bucket kept as one instant (GCRA).
//!
//! The state is the instant the bucket is full again (the theoretical arrival time, `tat`).
//! Seen from `now`, the bucket is `tat - now` in debt: it holds `(fill - debt) / interval`
//! tokens. Taking `n` tokens moves `tat` later by `n * interval`.
//!
//! A cut rate ([`RateCut`]) makes each token cost more time: `interval / factor`, rounded up, with
//! the fill (`capacity * interval`) as it was. So while cut the bucket refills at the cut rate,
//! holds its full-rate debt as more tokens of debt, and never hands out more than `capacity`
//! tokens plus the full rate's refill in any window. A bucket never cut runs exactly the
//! arithmetic it always did.
//!
//! Everything runs in `i128`, so no input can overflow; results that go back into an `i64`
//! are checked, and one that would not fit is refused (never wrapped).

use crate::limits::{MAX_DEBT_NS, MAX_NOW_NS};
use crate::slots::Slots;
use crate::state::{Pushback, RateCut, State, FULL_FACTOR_BP};
use crate::{Quota, NS_PER_MS};

/// What a command writes to the bucket's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// Store this state, expiring at `expire_at_ms`.
    Store {
        /// The new state.
        state: State,
        /// When the key may expire: once the bucket is full again, its pause and cut are
        /// over and the last lease of its calls in flight has ended (rounded up to ms). A
        /// missing key is a full bucket, so expiring any earlier would hand out tokens early.
        /// `None`: never, while it keeps a quota (which would go with the key).
        expire_at_ms: Option<i64>,
    },
    /// The bucket is full again and nothing holds it back: delete the key (a missing key is a
    /// full bucket), rather than keep one that expires within the millisecond.
    Delete,
}

impl Write {
    /// The instant the bucket is full again after the write (`None`: deleted).
    pub fn tat(&self) -> Option<i64> {
        match self {
            Write::Store { state, .. } => Some(state.tat),
            Write::Delete => None,
        }
    }

    /// What the key holds after the write (`None`: no key, a full bucket).
    pub fn stored(&self) -> Option<State> {
        match self {
            Write::Store { state, .. } => Some(state.clone()),
            Write::Delete => None,
        }
    }

    /// When the key expires after the write (`None`: deleted, or never while it keeps a
    /// quota).
    pub fn expire_at_ms(&self) -> Option<i64> {
        match self {
            Write::Store { expire_at_ms, .. } => *expire_at_ms,
            Write::Delete => None,
        }
    }

    /// The ticket THROTTLE.TAKE ... TICKET replies: the state in µs, rounded down, which a
    /// double holds exactly (so the Lua twin produces the same number). 0 for a delete.
    pub fn ticket_us(&self) -> i64 {
        self.tat().map_or(0, |tat| tat.div_euclid(1000))
    }
}

/// A bucket as seen at one instant, borrowing its stored slot table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct View<'a> {
    /// The clock, clamped to `0..=MAX_NOW_NS`.
    pub now: i128,
    /// When the bucket is full, never before `now`: time never runs backwards for a bucket,
    /// so a clock that reads earlier than the state adds no tokens.
    pub base: i128,
    pub interval: i128,
    pub fill: i128,
    /// The rate's factor now, in basis points (10 000: not cut).
    pub factor: u16,
    /// The supplier's pushback as stored.
    pub pushback: Option<Pushback>,
    /// The calls in flight as stored (leases that ran out included): every write carries
    /// those still held over.
    pub slots: &'a Slots,
    /// The quota an operator keeps for the key, which every write carries over (and which
    /// `interval` and `fill` are of).
    pub kept: Option<&'a Quota>,
}

/// The slot table of a bucket that holds none: no allocation.
static NO_SLOTS: Slots = Slots {
    next_id: 0,
    held: Vec::new(),
    cap: 0,
    waiters: Vec::new(),
    slack_ms: 0,
};

impl<'a> View<'a> {
    /// `stored` is the key's state (`None`: no key, a full bucket), seen with its kept quota
    /// if it has one, else with the caller's `quota`. A clock reading outside
    /// `0..=MAX_NOW_NS` is clamped, which can only make the bucket stricter.
    pub(crate) fn at(quota: &Quota, stored: Option<&'a State>, now_ns: i64) -> View<'a> {
        let now = i128::from(now_ns.clamp(0, MAX_NOW_NS));
        let (base, pushback, slots, kept) = match stored {
            Some(s) => (
                now.max(i128::from(s.tat)),
                s.pushback,
                &s.slots,
                s.kept.as_deref(),
            ),
            None => (now, None, &NO_SLOTS, None),
        };
        let quota = kept.unwrap_or(quota);
        let interval = i128::from(quota.interval.ns());
        View {
            now,
            base,
            interval,
            fill: i128::from(quota.capacity) * interval,
            factor: factor_at(pushback, now),
            pushback,
            slots,
            kept,
        }
    }

    /// How far ahead of `now` the bucket is full.
    pub(crate) fn debt(&self) -> i128 {
        self.base - self.now
    }

    /// The cost of `tokens` at the rate now, ns: `tokens * interval`, or while cut that over
    /// the factor, rounded up (more time, never less).
    pub(crate) fn cost(&self, tokens: u64) -> i128 {
        cost(tokens, self.interval, self.factor)
    }

    /// The cost of `tokens` at the configured rate: the least any take of them cost.
    pub(crate) fn full_cost(&self, tokens: u64) -> i128 {
        i128::from(tokens) * self.interval
    }

    /// How long until `cost` is there: once the bucket has refilled to `cost` below full.
    pub(crate) fn wait(&self, cost: i128) -> i128 {
        (self.debt() + cost - self.fill).max(0)
    }

    /// How long until a take of `tokens` that leaves `floor` more behind it can be granted.
    ///
    /// Mostly [`View::wait`] of their cost now. But a cut makes tokens cost more while the fill
    /// stays, so a deep cut can leave a bucket that cannot hold them at all (capacity 1 at half
    /// the rate holds half a token): however long the debt runs down, they are there only once
    /// the rate has climbed back far enough to hold them. The wait is then until that instant
    /// (the least factor that holds them, and when the recovering cut reaches it), and at least
    /// until the debt, at the cost then, allows them. Never early: the cost only falls after.
    pub(crate) fn wait_for(&self, tokens: u64, floor: u64) -> i128 {
        let need =
            |factor: u16| cost(tokens, self.interval, factor) + cost(floor, self.interval, factor);
        let now = need(self.factor);
        let cut = self.pushback.and_then(|p| p.cut);
        let Some(cut) = cut.filter(|_| now > self.fill) else {
            return self.wait(now);
        };
        // At the full rate they fit (tokens + floor <= capacity): find the least factor that
        // holds them. `need` only falls as the factor climbs.
        let (mut short, mut holds) = (self.factor, FULL_FACTOR_BP);
        while holds - short > 1 {
            let mid = short + (holds - short) / 2;
            if need(mid) <= self.fill {
                holds = mid;
            } else {
                short = mid;
            }
        }
        let then = cut.reaches(holds).max(self.now);
        (then - self.now).max(self.wait(need(cut.factor_at(then))))
    }

    /// Where a pause until `until` puts the state, with `cut` as the bucket's cut: the first
    /// token exactly at `until`, and no burst after (one token short of full then).
    pub(crate) fn paused_state(&self, until: i128, cut: Option<RateCut>) -> i128 {
        let factor_then = cut.map_or(FULL_FACTOR_BP, |c| c.factor_at(until));
        until + self.fill - cost(1, self.interval, factor_then)
    }

    /// The earliest state a give-back may leave while the stored pause lasts (`now` when none
    /// does): where the pause put it, so that giving back never shortens a pause. (It can lie
    /// before `now` under a deep cut.)
    pub(crate) fn pause_floor(&self) -> i128 {
        match self.pushback {
            Some(p) if self.paused_for() > 0 => {
                self.paused_state(i128::from(p.paused_until), p.cut)
            }
            _ => self.now,
        }
    }

    /// The state after taking `cost` for use at `act` (`now` or later). Taking at `act` is a
    /// take by a clock that reads `act`: a use scheduled later than the bucket alone would
    /// schedule it (THROTTLE.MTAKE waits for its slowest bucket) then cannot bunch up with
    /// the uses after it.
    pub(crate) fn taken(&self, cost: i128, act: i128) -> i128 {
        self.base.max(act) + cost
    }

    /// Whether a take that leaves the state at `tat` leaves the bucket out of debt (at most
    /// full `fill` ahead of now): what a floored take must, so that callers without a floor
    /// never find a debt a bulk reservation made. It holds iff the take's tokens are there now
    /// and its wait is not a deep cut's (which takes them as of a later instant).
    pub(crate) fn leaves_no_debt(&self, tat: i128) -> bool {
        tat - self.now <= self.fill
    }

    /// Whole tokens left with `debt` ahead of `now`, at the rate now: 0 while in debt past
    /// the capacity.
    pub(crate) fn remaining(&self, debt: i128) -> u64 {
        let room = (self.fill - debt).max(0);
        let tokens = if self.factor >= FULL_FACTOR_BP {
            room / self.interval
        } else {
            room * i128::from(self.factor) / (self.interval * i128::from(FULL_FACTOR_BP))
        };
        u64::try_from(tokens).unwrap_or(0)
    }

    /// How long the pause lasts from now (0: not paused).
    pub(crate) fn paused_for(&self) -> i128 {
        self.pushback
            .map_or(0, |p| (i128::from(p.paused_until) - self.now).max(0))
    }

    /// The write that leaves the bucket full at `tat`, with the stored pushback carried over
    /// while it is in effect. `None` (the call is refused) if it would move the state more than
    /// [`MAX_DEBT_NS`] (20 years) after the clock: only a reservation under a deep cut gets
    /// there (a cut token costs up to 100 times its time, more than the fill), and a state that
    /// far ahead reads as no bucket at all. Or if `tat` does not fit an `i64` (a forged state).
    pub(crate) fn write(&self, tat: i128) -> Option<Write> {
        self.write_with(tat, self.pushback)
    }

    /// The write that leaves the bucket full at `tat` with `pushback`, kept only as far as it
    /// is in effect: a pause that is over and a cut that has recovered are dropped, so the key
    /// goes back to 8 bytes. A full bucket with nothing in effect is deleted.
    pub(crate) fn write_with(&self, tat: i128, pushback: Option<Pushback>) -> Option<Write> {
        self.write_all(tat, pushback, self.slots)
    }

    /// [`View::write_with`] with `slots` as the calls in flight: those whose lease ran out are
    /// dropped, and the key lives until the last lease left ends.
    pub(crate) fn write_all(
        &self,
        tat: i128,
        pushback: Option<Pushback>,
        slots: &Slots,
    ) -> Option<Write> {
        if tat > self.base && tat - self.now > i128::from(MAX_DEBT_NS) {
            return None;
        }
        let tat_ns = i64::try_from(tat).ok()?;
        let pushback = pushback.and_then(|p| in_effect(p, self.now));
        let mut until = tat;
        if let Some(p) = pushback {
            until = until.max(i128::from(p.paused_until));
            if let Some(cut) = p.cut {
                until = until.max(cut.recovered_at());
            }
        }
        let slots = slots.pruned(self.now);
        if let Some(end) = slots.latest_end() {
            until = until.max(i128::from(end));
        }
        let state = State {
            tat: tat_ns,
            pushback,
            slots,
            kept: self.kept.map(|quota| Box::new(*quota)),
        };
        if state.kept.is_some() {
            // The quota goes with the key: it never expires, and is kept when full.
            return Some(Write::Store {
                state,
                expire_at_ms: None,
            });
        }
        if until <= self.now {
            return Some(Write::Delete);
        }
        // Past the clock, so positive: whole ms rounded up, in unsigned arithmetic.
        let until = u128::try_from(until).ok()?;
        let expire_at_ms = i64::try_from(until.div_ceil(NS_PER_MS.unsigned_abs().into())).ok()?;
        Some(Write::Store {
            state,
            expire_at_ms: Some(expire_at_ms),
        })
    }
}

/// The rate's factor at `now` (basis points): the full rate unless a cut is in effect.
pub(crate) fn factor_at(pushback: Option<Pushback>, now: i128) -> u16 {
    pushback
        .and_then(|p| p.cut)
        .map_or(FULL_FACTOR_BP, |cut| cut.factor_at(now))
}

/// The cost of `tokens` at `factor` (basis points), ns, rounded up.
pub(crate) fn cost(tokens: u64, interval: i128, factor: u16) -> i128 {
    let full = i128::from(tokens) * interval;
    if factor >= FULL_FACTOR_BP {
        return full;
    }
    let scaled = full * i128::from(FULL_FACTOR_BP);
    let factor = i128::from(factor.max(1));
    scaled / factor + i128::from(scaled % factor > 0)
}

/// The part of `pushback` still in effect at `now`: a pause not yet over, a cut not yet
/// recovered (or cut by a clock that reads later than this one). `None` when neither is.
pub(crate) fn in_effect(pushback: Pushback, now: i128) -> Option<Pushback> {
    let cut = pushback.cut.filter(|cut| cut.recovered_at() > now);
    let paused = i128::from(pushback.paused_until) > now;
    (paused || cut.is_some()).then_some(Pushback {
        paused_until: pushback.paused_until,
        cut,
    })
}

/// An `i128` duration as an `i64`, saturating (only forged states get near the limit).
pub(crate) fn saturate(ns: i128) -> i64 {
    i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX })
}

/// Rounds a non-negative duration up to whole ms, so a caller that sleeps it is never early.
pub(crate) fn ceil_ms(ns: i64) -> i64 {
    ns.div_euclid(NS_PER_MS) + i64::from(ns.rem_euclid(NS_PER_MS) > 0)
}

/// [`ceil_ms`] of an `i128`, for a non-negative duration.
pub(crate) fn ceil_ms_wide(ns: i128) -> i128 {
    let ms = i128::from(NS_PER_MS);
    ns.div_euclid(ms) + i128::from(ns.rem_euclid(ms) > 0)
}
