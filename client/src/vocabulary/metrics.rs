//! What a limiter tells of itself: its counters as a [`MetricsSnapshot`] (the engine keeps them
//! live, `crate::engine::metrics`), the wait histogram, and the HTTP layers' events it counts.

use std::time::Duration;

/// Upper bounds of the wait histogram's buckets (a 1-2-5 log scale), in microseconds; the
/// last bucket counts everything above the last bound.
const BOUNDS_US: [u64; 16] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
];
pub(crate) const BUCKETS: usize = BOUNDS_US.len() + 1;

/// A limiter's counters since it was built; from [`Throttle::metrics`](crate::Throttle::metrics).
///
/// A call's *wait* is the whole time it spent in the limiter: round trips and sleeps.
///
/// ```
/// use redis_throttle::MetricsSnapshot;
///
/// fn report(name: &str, m: &MetricsSnapshot) {
///     println!(
///         "{name}: {} granted, {} gave up, mean wait {:?}, p99 wait <= {:?}",
///         m.granted,
///         m.gave_up,
///         m.mean_wait().unwrap_or_default(),
///         m.wait_histogram.quantile(0.99),
///     );
/// }
/// report("payments", &MetricsSnapshot::default());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// Calls that got their tokens (acquire and try_acquire).
    pub granted: u64,
    /// `try_acquire` calls refused because the tokens were not there.
    pub denied: u64,
    /// Calls that gave up: a deadline that could not be met, or polls used up.
    pub gave_up: u64,
    /// Calls that failed with any other error (connection, module missing, ...).
    pub errors: u64,
    /// Calls let through without the bucket because Redis could not be reached and the
    /// limiter fails open ([`Unreachable::FailOpen`](crate::Unreachable::FailOpen)); counted
    /// in `errors` too, not in `granted`.
    pub failed_open: u64,
    /// Round trips to the server, by all calls (takes, pauses, give-backs, peeks).
    pub round_trips: u64,
    /// Tokens given back with [`Throttle::give_back`](crate::Throttle::give_back) or by a
    /// waiting call that was dropped.
    pub tokens_given_back: u64,
    /// Pauses: [`pause`](crate::Throttle::pause) and [`cut`](crate::Throttle::cut) calls
    /// (a cut pauses too), the supplier pushed back.
    pub pauses: u64,
    /// Bulk takes ([`Priority::Bulk`](crate::Priority::Bulk)) the server refused, to keep the
    /// floor or for want of tokens in the bucket now, each asking again after the time it
    /// named: how often the bulk load yielded to the interactive calls.
    pub held_by_floor: u64,
    /// What serves the calls: [`Backend::Module`](crate::Backend::Module),
    /// [`Backend::Library`](crate::Backend::Library) or
    /// [`Backend::Script`](crate::Backend::Script) (`Auto` until the first call answered);
    /// `None` for a partitioned limiter, which spends in process and leases with plain
    /// commands.
    pub backend: Option<crate::Backend>,
    /// Sum of the waits of the granted calls.
    pub total_wait: Duration,
    /// Distribution of the waits of the granted calls.
    pub wait_histogram: WaitHistogram,
    /// The longest wait of a granted call (the histogram's quantiles are bucket bounds).
    pub max_wait: Duration,
    /// A partitioned limiter's leases (all 0 for the other limiters).
    pub leases: LeaseMetrics,
    /// The supplier's pushback: what the limiter and the HTTP layers saw and did about it.
    pub pushback: PushbackMetrics,
    /// Calls in flight, with a cap on them (all 0 without one).
    pub in_flight: InFlightMetrics,
}

/// Calls in flight under a cap
/// ([`LimiterBuilder::max_in_flight`](crate::LimiterBuilder::max_in_flight)), in a
/// [`MetricsSnapshot`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InFlightMetrics {
    /// Slots this limiter's grants hold now (this process only; `throttle status` shows the
    /// fleet's).
    pub held: u64,
    /// Calls that found every slot held and waited for one.
    pub waits: u64,
    /// Of those, the calls that waited in the server's line for one.
    pub joined_line: u64,
    /// Slots heard handed to a call of this limiter in line: granted with no take of its own.
    pub heard_handed: u64,
    /// Calls of this limiter in the server's line now.
    pub in_line: u64,
    /// The place in the server's line last told to a call of this limiter (1: first); 0
    /// before any call joined it.
    pub last_place: u64,
    /// Slots whose lease ran out while their grant held them (a renewal found the slot gone):
    /// a frozen process, or a lease too short for the round trips.
    pub leases_lost: u64,
    /// Slots whose `THROTTLE.RELEASE` the server answered. [`held`](Self::held) drops when a
    /// call ends, this once its release is done: a process about to exit waits until
    /// `released + leases_lost` reaches its capped grants, so that it leaves no slot to run
    /// out its lease (a release that failed is not counted: its lease frees it).
    pub released: u64,
}

/// The supplier's pushback, in a [`MetricsSnapshot`]: the responses the HTTP layers saw, and
/// what the limiter did with them (pauses are [`MetricsSnapshot::pauses`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PushbackMetrics {
    /// 429 (Too Many Requests) responses an HTTP layer saw.
    pub responses_429: u64,
    /// 503 (Service Unavailable) responses an HTTP layer saw.
    pub responses_503: u64,
    /// Pushback under another status an HTTP layer saw: a 403 that says it is a rate limit
    /// (GitHub's), or a status of `http::RetryPolicy::pushback_status`.
    pub responses_other: u64,
    /// Requests an HTTP layer sent again after a pushback (a 429, a 503, a rate-limit 403).
    pub retries: u64,
    /// Responses an HTTP layer passed on as they were (a pushback) because every attempt
    /// `http::RetryPolicy::max_attempts` allows was sent.
    pub attempts_ran_out: u64,
    /// Responses an HTTP layer passed on as they were (a pushback) with attempts left,
    /// because the request is not to be resent: a method that is not idempotent (POST, PATCH,
    /// ...) without `http::RetryPolicy::retry_non_idempotent`, or a body that cannot be
    /// copied. The facade's label is `not_resent`.
    pub not_resent: u64,
    /// Pauses that changed nothing: the bucket's pause or debt already lasted longer.
    pub pauses_unchanged: u64,
    /// Cuts that cut the rate.
    pub cuts: u64,
    /// Cuts within an episode already cut (or paused): they only paused.
    pub cuts_same_episode: u64,
    /// Syncs that lowered or paused the bucket to the supplier's count.
    pub syncs: u64,
    /// Syncs that changed nothing: the bucket held no more than the supplier said.
    pub syncs_unchanged: u64,
    /// Tokens taken on top of grants by [`settle`](crate::Throttle::settle).
    pub tokens_debited: u64,
    /// Reserved calls held back because a pause covered their send time: each acquired again
    /// after the pause.
    pub held_by_pause: u64,
    /// Of those, the ones woken by a pause announcement heard on the subscription
    /// ([`Announcements`](crate::Announcements)), without asking the server.
    pub heard_pauses: u64,
    /// `THROTTLE.PEEK`s sent after a reserved call's sleep to ask whether a pause covers its
    /// send: one per bucket, each time the call could not count on hearing it (no
    /// [`Announcements`](crate::Announcements), or its subscription was down or lost meanwhile).
    /// Each is a round trip of its own, in [`MetricsSnapshot::round_trips`].
    pub pause_checks: u64,
    /// `THROTTLE.PEEK`s sent to confirm an announcement heard before a reserved call obeys
    /// it: what is heard is a hint (anyone with publish rights on the channel can send it),
    /// so the server says whether the bucket is paused or cut. One per bucket per
    /// announcement, whichever of the calls it covers asks first; a round trip of its own.
    pub pause_confirms: u64,
    /// Announcements heard that the server did not confirm (no pause covering the call, no
    /// cut): the calls they named slept on as reserved.
    pub unconfirmed: u64,
}

/// What an HTTP layer saw, counted in its limiter's [`PushbackMetrics`] with
/// [`Throttle::count`](crate::Throttle::count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HttpEvent {
    /// A 429 response.
    Response429,
    /// A 503 response.
    Response503,
    /// Pushback under another status (a 403 that says it is a rate limit).
    ResponseOther,
    /// A request sent again after one.
    Retry,
    /// A pushback passed on: no attempt left.
    AttemptsRanOut,
    /// A pushback passed on with attempts left: the request is not to be resent (not
    /// idempotent, or its body cannot be copied).
    NotResent,
}

/// A [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter)'s leases, in its
/// [`MetricsSnapshot`]. Its requests to Redis for them count in
/// [`MetricsSnapshot::round_trips`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseMetrics {
    /// Partitions held now.
    pub held: u64,
    /// Leases won (`SET NX` succeeded and was confirmed).
    pub acquired: u64,
    /// Renewals confirmed.
    pub renewed: u64,
    /// Leases found taken or gone at renewal: spending stopped at once.
    pub lost: u64,
    /// Leases whose usable time ran out before a confirmed renewal (a server down, a
    /// replica that did not acknowledge, a process that was frozen).
    pub lapsed: u64,
    /// Leases given back (idle, yielded to another process, or at shutdown).
    pub released: u64,
    /// Leases given to a process that held fewer and asked.
    pub yielded: u64,
    /// Acquire attempts that found the partition held by another process.
    pub refused: u64,
    /// Lease writes the replicas did not acknowledge in time (not spent on).
    pub unconfirmed: u64,
    /// Lease requests that failed (connection, cluster reconfiguration).
    pub errors: u64,
    /// Fleet pauses heard on the subscription
    /// ([`PartitionedLimiterBuilder::listen`](crate::partitioned::PartitionedLimiterBuilder::listen)),
    /// each obeyed at once rather than at the next renewal round.
    pub pauses_heard: u64,
}

impl MetricsSnapshot {
    /// Mean wait of the granted calls; `None` before the first grant.
    pub fn mean_wait(&self) -> Option<Duration> {
        let granted = u32::try_from(self.granted).ok().filter(|n| *n > 0)?;
        Some(self.total_wait / granted)
    }
}

/// Counts of granted calls by wait, in fixed log-scale buckets (1 ms, 2 ms, 5 ms, 10 ms, ...
/// 100 s, and above).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitHistogram {
    counts: [u64; BUCKETS],
}

impl WaitHistogram {
    /// Every bucket as `(upper bound, count)`; the last bound is `None` (no limit). A wait
    /// equal to a bound is counted in that bound's bucket.
    pub fn buckets(&self) -> impl Iterator<Item = (Option<Duration>, u64)> + '_ {
        let bounds = BOUNDS_US
            .iter()
            .map(|us| Some(Duration::from_micros(*us)))
            .chain([None]);
        bounds.zip(self.counts.iter().copied())
    }

    /// Number of waits counted.
    pub fn count(&self) -> u64 {
        // Saturating: a histogram read back from a report holds whatever the report said.
        self.counts
            .iter()
            .fold(0u64, |sum, n| sum.saturating_add(*n))
    }

    /// An upper bound for the `q` quantile (`0.0..=1.0`): the bound of the bucket it falls
    /// in. `None` when nothing is counted, or when it falls in the last, unbounded bucket.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bound, count) in self.buckets() {
            seen = u64::saturating_add(seen, count);
            if seen >= rank {
                return bound;
            }
        }
        None
    }
}

impl WaitHistogram {
    /// A histogram of `counts`, one per bucket.
    pub(crate) fn new(counts: [u64; BUCKETS]) -> WaitHistogram {
        WaitHistogram { counts }
    }

    /// The counts, bucket by bucket (as [`WaitHistogram::buckets`] gives them with bounds).
    pub(crate) fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// A histogram of `counts`, one per bucket; `None` for another number of them.
    pub(crate) fn from_counts(counts: &[u64]) -> Option<WaitHistogram> {
        Some(WaitHistogram {
            counts: counts.try_into().ok()?,
        })
    }

    /// Both counted together, bucket by bucket, saturating.
    pub(crate) fn plus(&self, other: &WaitHistogram) -> WaitHistogram {
        WaitHistogram {
            counts: std::array::from_fn(|i| {
                let at = |h: &WaitHistogram| h.counts.get(i).copied().unwrap_or(0);
                at(self).saturating_add(at(other))
            }),
        }
    }

    /// What was counted since `earlier`, bucket by bucket.
    pub(crate) fn since(&self, earlier: &WaitHistogram) -> WaitHistogram {
        WaitHistogram {
            counts: std::array::from_fn(|i| {
                self.counts
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(earlier.counts.get(i).copied().unwrap_or(0))
            }),
        }
    }
}

/// The bucket of the histogram a call that waited `wait` is counted in.
pub(crate) fn bucket_of(wait: Duration) -> usize {
    let us = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
    BOUNDS_US.partition_point(|bound| *bound < us)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn buckets_are_upper_bounds() {
        assert_eq!(bucket_of(Duration::ZERO), 0);
        assert_eq!(bucket_of(MS), 0);
        assert_eq!(bucket_of(MS + Duration::from_micros(1)), 1);
        assert_eq!(bucket_of(MS * 5), 2);
        assert_eq!(bucket_of(Duration::from_secs(100)), BUCKETS - 2);
        assert_eq!(bucket_of(Duration::from_secs(101)), BUCKETS - 1);
        assert_eq!(bucket_of(Duration::MAX), BUCKETS - 1);
    }
}
