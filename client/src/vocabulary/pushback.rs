//! The supplier's real capacity, in the words every limiter takes it: a congestion cut, the
//! supplier's own count of what is left, and a call's cost settled after the fact.

use std::time::Duration;

use throttle_bucket::{FULL_FACTOR_BP, MIN_FACTOR_BP};

/// A congestion signal (a 429 or 503): pause the fleet, and cut its rate for a while.
///
/// The rate is multiplied by the factor ([`Cut::with_factor`], 0.7 by default, as AWS SDKs' adaptive retry
/// mode does per process; never below 0.01) and climbs back linearly to the configured rate
/// over the recovery ([`Cut::with_recovery`], 30 s by default) without another cut. Many replicas that see 429s
/// from one episode cut once: a cut while the bucket is still paused is the same episode, and
/// only pauses. The configured rate stays the ceiling.
///
/// ```
/// use std::time::Duration;
/// use redis_throttle::Cut;
///
/// let cut = Cut::after(Duration::from_secs(2))
///     .with_factor(0.5)
///     .with_recovery(Duration::from_secs(60));
/// assert_eq!(cut.factor_bp(), 5_000);
/// assert_eq!(cut.recovery(), Duration::from_secs(60));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    pause: Duration,
    factor_bp: u16,
    recovery: Duration,
}

impl Cut {
    /// A cut that pauses the fleet for `pause` (the supplier's `Retry-After`, or your own),
    /// with the default factor and recovery.
    pub fn after(pause: Duration) -> Cut {
        Cut {
            pause,
            factor_bp: 7_000,
            recovery: Duration::from_secs(30),
        }
    }

    /// What the rate is multiplied by: from 0.01 to 1 (clamped; 1 pauses without cutting).
    pub fn with_factor(mut self, factor: f64) -> Cut {
        let bp = (factor * f64::from(FULL_FACTOR_BP)).floor();
        self.factor_bp = if bp.is_nan() {
            FULL_FACTOR_BP
        } else {
            // The cast saturates; the clamp keeps it in the server's range.
            (bp as u16).clamp(MIN_FACTOR_BP, FULL_FACTOR_BP)
        };
        self
    }

    /// How long the rate takes to climb back to the configured one (at least 1 ms).
    pub fn with_recovery(mut self, recovery: Duration) -> Cut {
        self.recovery = recovery;
        self
    }

    // Only the HTTP layers pause with a cut of their own.
    #[cfg(any(feature = "tower", feature = "reqwest"))]
    /// The same factor and recovery with another pause: how a policy's cut is filled in
    /// with a response's `Retry-After` (the factor as it is, not back through `f64`).
    pub(crate) fn with_pause(self, pause: Duration) -> Cut {
        Cut { pause, ..self }
    }

    /// The pause.
    pub fn pause(&self) -> Duration {
        self.pause
    }

    /// The factor, in basis points (0.7 is 7 000).
    pub fn factor_bp(&self) -> u16 {
        self.factor_bp
    }

    /// How long the rate takes to climb back.
    pub fn recovery(&self) -> Duration {
        self.recovery
    }
}

/// What a [`Cut`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CutReport {
    /// This call cut the rate (`false`: the same episode as a pause or cut still on, or a
    /// limiter that can only pause).
    pub cut: bool,
    /// Until the next token is there: at least the pause asked for.
    pub next: Duration,
    /// The rate's factor now, in basis points (10 000: the configured rate).
    pub factor_bp: u16,
    /// Until the rate is the configured one again (zero: not cut).
    pub recovers_in: Duration,
}

/// What the supplier said of its own quota in one response: its calls and tokens left, and
/// a pause it asked for outside `Retry-After`. The HTTP layers read it from the response's
/// headers (`http::read_supplier_count`, features `tower` and `reqwest`); other code fills it
/// in from whatever the supplier sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SupplierCount {
    /// Calls (requests) left in the supplier's current window, and when it resets.
    pub requests: Option<Remaining>,
    /// Tokens (an LLM API's `x-ratelimit-remaining-tokens`) left, and when that resets.
    pub tokens: Option<Remaining>,
    /// A pause the supplier asked for in a header other than `Retry-After` (Azure's
    /// `x-ms-retry-after-ms`, `retry-after-ms`).
    pub retry_after: Option<Duration>,
}

/// How much of one of the supplier's quotas is left, and until when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remaining {
    /// What is left, in the quota's units (calls or tokens). Saturates at `u64::MAX` on an
    /// absurd value: the limiter clamps it to what its own bucket can use.
    pub left: u64,
    /// How long until the supplier's window refills. `Duration::ZERO` when the supplier did
    /// not say, or said it unreadably (unknown: the limiter does not pause).
    pub reset: Duration,
}

/// Which of the supplier's counts a [`Limiter`](crate::Limiter)'s bucket is in: calls (the
/// default: a bucket of requests, whatever its cost per call) or tokens (a bucket of an LLM
/// API's tokens per minute). A [`MultiLimiter`](crate::MultiLimiter) knows from each limit:
/// per-call limits take the requests count, per-token limits the tokens count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SupplierUnit {
    /// `requests`, times the limiter's cost per call.
    #[default]
    Calls,
    /// `tokens`.
    Tokens,
}

impl SupplierUnit {
    /// The bucket's share of what the supplier said: in the bucket's tokens, and the reset.
    pub(crate) fn pick(self, count: &SupplierCount, cost: u64) -> Option<(u64, Duration)> {
        match self {
            SupplierUnit::Calls => count
                .requests
                .map(|r| (r.left.saturating_mul(cost.max(1)), r.reset)),
            SupplierUnit::Tokens => count.tokens.map(|r| (r.left, r.reset)),
        }
    }
}

/// Which of the supplier's counts could lower a limiter's buckets, as they stood right after a
/// take: the HTTP layers sync only those, so a count no bucket is above costs no round trip,
/// and each unit is weighed against the buckets of that unit alone (29 requests say nothing of
/// a bucket of 2 900 tokens, nor 88 tokens of a bucket of 29 calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SyncBounds {
    /// A requests count below this lowers some bucket of calls (`None`: no bucket counts
    /// calls).
    requests: Option<u64>,
    /// The same for tokens.
    tokens: Option<u64>,
}

impl SyncBounds {
    // Only the HTTP layers read the supplier's counts against a grant.
    #[cfg(any(feature = "tower", feature = "reqwest"))]
    /// Nothing known of the buckets: every count may lower one.
    pub(crate) const UNKNOWN: SyncBounds = SyncBounds {
        requests: Some(u64::MAX),
        tokens: Some(u64::MAX),
    };

    /// No bucket yet; add them with [`SyncBounds::with`].
    pub(crate) const NONE: SyncBounds = SyncBounds {
        requests: None,
        tokens: None,
    };

    // Only the HTTP layers read the supplier's counts against a grant.
    #[cfg(any(feature = "tower", feature = "reqwest"))]
    /// One bucket of `remaining` tokens whose unit the caller does not know (a
    /// [`Limiter`](crate::Limiter)'s grant): either count below it may lower it.
    pub(crate) fn single(remaining: u64) -> SyncBounds {
        SyncBounds {
            requests: Some(remaining),
            tokens: Some(remaining),
        }
    }

    /// These bounds and a bucket counted in `unit`, at `cost` tokens a call, that holds
    /// `remaining` tokens: it is lowered by what [`SupplierUnit::pick`] makes of a count below
    /// its share (`r` requests are `r * cost` tokens, below `remaining` exactly when `r` is
    /// below `remaining / cost` rounded up).
    pub(crate) fn with(self, unit: SupplierUnit, remaining: u64, cost: u64) -> SyncBounds {
        let raise = |bound: Option<u64>, share: u64| Some(bound.map_or(share, |b| b.max(share)));
        match unit {
            SupplierUnit::Calls => SyncBounds {
                requests: raise(self.requests, remaining.div_ceil(cost.max(1))),
                ..self
            },
            SupplierUnit::Tokens => SyncBounds {
                tokens: raise(self.tokens, remaining),
                ..self
            },
        }
    }

    // Only the HTTP layers read the supplier's counts against a grant.
    #[cfg(any(feature = "tower", feature = "reqwest"))]
    /// The part of `count` that could lower a bucket: a count below its unit's bound, or
    /// nothing left with a reset (a pause, whatever the buckets hold) for a unit some bucket
    /// counts in. The pause the supplier asked for is kept as it is.
    pub(crate) fn filter(&self, count: &SupplierCount) -> SupplierCount {
        let keep = |left: Option<Remaining>, bound: Option<u64>| {
            left.filter(|r| {
                bound.is_some_and(|b| r.left < b || (r.left == 0 && !r.reset.is_zero()))
            })
        };
        SupplierCount {
            requests: keep(count.requests, self.requests),
            tokens: keep(count.tokens, self.tokens),
            retry_after: count.retry_after,
        }
    }
}

/// What [`settle`](crate::Throttle::settle) did to bring a grant to its actual cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settled {
    /// Tokens taken on top of the grant's (the call cost more than it took), into debt if
    /// need be.
    pub debited: u64,
    /// Tokens given back (the call cost less), by THROTTLE.GIVE's rule: only if nothing was
    /// taken after the grant, never beyond full.
    pub given_back: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_are_basis_points_clamped_to_the_servers_range() {
        let pause = Duration::from_secs(1);
        for (factor, bp) in [
            (0.7, 7_000),
            (0.5, 5_000),
            (1.0, 10_000),
            (2.0, 10_000),
            (0.001, 100),
            (0.0, 100),
            (-3.0, 100),
            (f64::NAN, 10_000),
            (f64::INFINITY, 10_000),
        ] {
            assert_eq!(
                Cut::after(pause).with_factor(factor).factor_bp(),
                bp,
                "{factor}"
            );
        }
        assert_eq!(Cut::after(pause).factor_bp(), 7_000);
    }

    #[test]
    fn a_bucket_of_calls_takes_requests_times_the_cost_and_one_of_tokens_the_tokens() {
        let reset = Duration::from_secs(6);
        let count = SupplierCount {
            requests: Some(Remaining { left: 4, reset }),
            tokens: Some(Remaining {
                left: 900,
                reset: Duration::ZERO,
            }),
            retry_after: None,
        };
        assert_eq!(SupplierUnit::Calls.pick(&count, 3), Some((12, reset)));
        assert_eq!(SupplierUnit::Calls.pick(&count, 0), Some((4, reset)));
        assert_eq!(
            SupplierUnit::Tokens.pick(&count, 3),
            Some((900, Duration::ZERO))
        );
        assert_eq!(
            SupplierUnit::Tokens.pick(&SupplierCount::default(), 3),
            None
        );
        let huge = SupplierCount {
            requests: Some(Remaining {
                left: u64::MAX,
                reset,
            }),
            ..SupplierCount::default()
        };
        assert_eq!(SupplierUnit::Calls.pick(&huge, 3), Some((u64::MAX, reset)));
    }

    #[cfg(any(feature = "tower", feature = "reqwest"))]
    fn left(left: u64, reset: Duration) -> Option<Remaining> {
        Some(Remaining { left, reset })
    }

    #[cfg(any(feature = "tower", feature = "reqwest"))]
    #[test]
    fn each_count_is_weighed_against_the_buckets_of_its_own_unit() {
        let reset = Duration::from_secs(60);
        // The user's case: 29 calls left of 30 beside 2 900 tokens of 3 000.
        let multi =
            SyncBounds::NONE
                .with(SupplierUnit::Calls, 29, 1)
                .with(SupplierUnit::Tokens, 2_900, 1);
        let llm = SupplierCount {
            requests: left(29, reset),
            tokens: left(88, reset),
            retry_after: None,
        };
        assert_eq!(
            multi.filter(&llm),
            SupplierCount {
                tokens: left(88, reset),
                ..SupplierCount::default()
            }
        );
        let fewer_calls = SupplierCount {
            requests: left(28, reset),
            ..llm
        };
        assert_eq!(multi.filter(&fewer_calls), fewer_calls);
        // Tokens at or above the bucket's: only the calls' count is left.
        let many_tokens = SupplierCount {
            tokens: left(2_900, reset),
            ..fewer_calls
        };
        assert_eq!(
            multi.filter(&many_tokens),
            SupplierCount {
                requests: left(28, reset),
                ..SupplierCount::default()
            }
        );
        // Nothing left with a reset pauses, whatever the bucket holds; without a reset, a 0
        // under an empty bucket says nothing.
        let empty = SyncBounds::NONE.with(SupplierUnit::Calls, 0, 1);
        let none_left = SupplierCount {
            requests: left(0, reset),
            tokens: left(0, reset),
            retry_after: Some(reset),
        };
        assert_eq!(
            empty.filter(&none_left),
            SupplierCount {
                requests: left(0, reset),
                retry_after: Some(reset),
                ..SupplierCount::default()
            }
        );
        let zero = SupplierCount {
            requests: left(0, Duration::ZERO),
            ..SupplierCount::default()
        };
        assert_eq!(empty.filter(&zero), SupplierCount::default());
        // No bucket of a unit: that unit's count is dropped, even a pause.
        assert_eq!(SyncBounds::NONE.filter(&none_left).requests, None);
        assert_eq!(SyncBounds::NONE.filter(&none_left).tokens, None);
    }

    #[cfg(any(feature = "tower", feature = "reqwest"))]
    #[test]
    fn a_calls_share_is_its_tokens_over_the_cost_rounded_up() {
        // 3 tokens a call, 10 left: 3 requests are 9 tokens (lower), 4 are 12 (do not).
        let bounds = SyncBounds::NONE.with(SupplierUnit::Calls, 10, 3);
        let count = |r| SupplierCount {
            requests: left(r, Duration::ZERO),
            ..SupplierCount::default()
        };
        assert_eq!(bounds.filter(&count(3)), count(3));
        assert_eq!(bounds.filter(&count(4)), SupplierCount::default());
        assert_eq!(
            SupplierUnit::Calls.pick(&count(3), 3),
            Some((9, Duration::ZERO))
        );
        // Of two buckets of a unit, the one holding more decides; cost 0 counts as 1.
        let two = bounds.with(SupplierUnit::Calls, 7, 0);
        assert_eq!(two.filter(&count(6)), count(6));
        assert_eq!(two.filter(&count(7)), SupplierCount::default());
        // One bucket of unknown unit, and nothing known: the count as it is.
        let both = SupplierCount {
            tokens: left(4, Duration::ZERO),
            ..count(4)
        };
        assert_eq!(SyncBounds::single(5).filter(&both), both);
        assert_eq!(
            SyncBounds::single(4).filter(&both),
            SupplierCount::default()
        );
        assert_eq!(SyncBounds::UNKNOWN.filter(&both), both);
    }
}
