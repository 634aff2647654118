//! Per-limiter counters and a wait histogram; optionally also sent to the `metrics` facade.

use std::sync::atomic::{AtomicU64, Ordering};
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
const BUCKETS: usize = BOUNDS_US.len() + 1;

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

/// The pushback events the live counters keep, in [`PushbackMetrics`]' order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    Response429,
    Response503,
    ResponseOther,
    Retry,
    AttemptsRanOut,
    NotResent,
    PauseUnchanged,
    Cut,
    CutSameEpisode,
    Sync,
    SyncUnchanged,
    HeldByPause,
    HeardPause,
    PauseCheck,
    PauseConfirm,
    Unconfirmed,
}

impl Event {
    const COUNT: usize = 16;

    /// The label in the `metrics` facade's `throttle_pushback_total{event}`.
    #[cfg(feature = "metrics")]
    fn label(self) -> &'static str {
        match self {
            Event::Response429 => "response_429",
            Event::Response503 => "response_503",
            Event::ResponseOther => "response_other",
            Event::Retry => "retry",
            Event::AttemptsRanOut => "attempts_ran_out",
            Event::NotResent => "not_resent",
            Event::PauseUnchanged => "pause_unchanged",
            Event::Cut => "cut",
            Event::CutSameEpisode => "cut_same_episode",
            Event::Sync => "sync",
            Event::SyncUnchanged => "sync_unchanged",
            Event::HeldByPause => "held_by_pause",
            Event::HeardPause => "heard_pause",
            Event::PauseCheck => "pause_check",
            Event::PauseConfirm => "pause_confirm",
            Event::Unconfirmed => "unconfirmed",
        }
    }
}

impl From<HttpEvent> for Event {
    fn from(event: HttpEvent) -> Event {
        match event {
            HttpEvent::Response429 => Event::Response429,
            HttpEvent::Response503 => Event::Response503,
            HttpEvent::ResponseOther => Event::ResponseOther,
            HttpEvent::Retry => Event::Retry,
            HttpEvent::AttemptsRanOut => Event::AttemptsRanOut,
            HttpEvent::NotResent => Event::NotResent,
        }
    }
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

fn bucket_of(wait: Duration) -> usize {
    let us = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
    BOUNDS_US.partition_point(|bound| *bound < us)
}

/// Moves a count of things held (slots, places in line) one up or one down, never below 0
/// whatever the order of a hold and its end: the change made, for the gauge that mirrors it.
fn step(held: &AtomicU64, up: bool) -> Option<f64> {
    if up {
        held.fetch_add(1, Ordering::Relaxed);
        return Some(1.0);
    }
    held.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .ok()
        .map(|_| -1.0)
}

/// The live counters behind a [`MetricsSnapshot`].
#[derive(Debug)]
pub(crate) struct Metrics {
    granted: AtomicU64,
    denied: AtomicU64,
    gave_up: AtomicU64,
    errors: AtomicU64,
    round_trips: AtomicU64,
    given_back: AtomicU64,
    pauses: AtomicU64,
    held_by_floor: AtomicU64,
    debited: AtomicU64,
    slots_held: AtomicU64,
    slot_waits: AtomicU64,
    joined_line: AtomicU64,
    heard_handed: AtomicU64,
    in_line: AtomicU64,
    last_place: AtomicU64,
    leases_lost: AtomicU64,
    slots_released: AtomicU64,
    events: [AtomicU64; Event::COUNT],
    total_wait_us: AtomicU64,
    max_wait_us: AtomicU64,
    failed_open: AtomicU64,
    histogram: [AtomicU64; BUCKETS],
    #[cfg(feature = "metrics")]
    facade: facade::Facade,
}

impl Metrics {
    /// Counters for the limiter named `name` (the label in the `metrics` facade).
    pub(crate) fn new(name: &str) -> Metrics {
        #[cfg(not(feature = "metrics"))]
        let _ = name;
        Metrics {
            granted: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            gave_up: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            round_trips: AtomicU64::new(0),
            given_back: AtomicU64::new(0),
            pauses: AtomicU64::new(0),
            held_by_floor: AtomicU64::new(0),
            debited: AtomicU64::new(0),
            slots_held: AtomicU64::new(0),
            slot_waits: AtomicU64::new(0),
            joined_line: AtomicU64::new(0),
            heard_handed: AtomicU64::new(0),
            in_line: AtomicU64::new(0),
            last_place: AtomicU64::new(0),
            leases_lost: AtomicU64::new(0),
            slots_released: AtomicU64::new(0),
            events: std::array::from_fn(|_| AtomicU64::new(0)),
            total_wait_us: AtomicU64::new(0),
            max_wait_us: AtomicU64::new(0),
            failed_open: AtomicU64::new(0),
            histogram: std::array::from_fn(|_| AtomicU64::new(0)),
            #[cfg(feature = "metrics")]
            facade: facade::Facade::new(name),
        }
    }

    pub(crate) fn round_trips_of(&self, backend: crate::Backend, trips: u32) {
        self.round_trips
            .fetch_add(u64::from(trips), Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.round_trips(backend, trips);
        #[cfg(not(feature = "metrics"))]
        let _ = backend;
    }

    pub(crate) fn gave_back(&self, tokens: u64) {
        self.given_back.fetch_add(tokens, Ordering::Relaxed);
    }

    pub(crate) fn paused(&self) {
        self.pauses.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.event("pause");
    }

    pub(crate) fn event(&self, event: Event) {
        self.events[event as usize].fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.event(event.label());
    }

    pub(crate) fn held_by_pause(&self) {
        self.event(Event::HeldByPause);
    }

    pub(crate) fn cut(&self, cut: bool) {
        self.event(if cut {
            Event::Cut
        } else {
            Event::CutSameEpisode
        });
    }

    pub(crate) fn synced(&self, lowered: bool) {
        self.event(if lowered {
            Event::Sync
        } else {
            Event::SyncUnchanged
        });
    }

    pub(crate) fn debited(&self, tokens: u64) {
        self.debited.fetch_add(tokens, Ordering::Relaxed);
    }

    pub(crate) fn granted(&self, wait: Duration) {
        self.granted.fetch_add(1, Ordering::Relaxed);
        let us = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
        self.total_wait_us.fetch_add(us, Ordering::Relaxed);
        self.max_wait_us.fetch_max(us, Ordering::Relaxed);
        self.histogram[bucket_of(wait)].fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.granted(wait);
    }

    pub(crate) fn denied(&self) {
        self.denied.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.outcome("denied");
    }

    pub(crate) fn held_by_floor(&self) {
        self.held_by_floor.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn slot_taken(&self) {
        self.slot_held(true);
    }

    pub(crate) fn slot_ended(&self) {
        self.slot_held(false);
    }

    fn slot_held(&self, taken: bool) {
        let change = step(&self.slots_held, taken);
        #[cfg(feature = "metrics")]
        if let Some(change) = change {
            self.facade.in_flight(change);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = change;
    }

    pub(crate) fn waited_for_slot(&self) {
        self.slot_waits.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.slot_event("wait");
    }

    /// A call joined the server's line for a slot (counted as a wait for one too).
    pub(crate) fn joined_line(&self) {
        self.waited_for_slot();
        self.joined_line.fetch_add(1, Ordering::Relaxed);
    }

    /// A call entered the server's line (`true`) or left it.
    pub(crate) fn in_line(&self, entered: bool) {
        let change = step(&self.in_line, entered);
        #[cfg(feature = "metrics")]
        if let Some(change) = change {
            self.facade.in_line(change);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = change;
    }

    /// The server told a call of this limiter its place in line.
    pub(crate) fn placed(&self, place: u64) {
        self.last_place.store(place, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.place(place);
    }

    /// A call in line heard its slot handed to it.
    pub(crate) fn heard_handed(&self) {
        self.heard_handed.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.slot_event("handed");
    }

    pub(crate) fn slot_released(&self) {
        self.slots_released.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn lease_lost(&self) {
        self.leases_lost.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.slot_event("lease_lost");
    }

    pub(crate) fn gave_up(&self) {
        self.gave_up.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.outcome("gave_up");
    }

    /// Counts a call let through while Redis is unreachable; returns how many so far.
    pub(crate) fn failed_open(&self) -> u64 {
        #[cfg(feature = "metrics")]
        self.facade.outcome("failed_open");
        self.failed_open.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.outcome("error");
    }

    pub(crate) fn snapshot(&self, backend: Option<crate::Backend>) -> MetricsSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MetricsSnapshot {
            granted: load(&self.granted),
            denied: load(&self.denied),
            gave_up: load(&self.gave_up),
            errors: load(&self.errors),
            failed_open: load(&self.failed_open),
            round_trips: load(&self.round_trips),
            tokens_given_back: load(&self.given_back),
            pauses: load(&self.pauses),
            held_by_floor: load(&self.held_by_floor),
            backend,
            total_wait: Duration::from_micros(load(&self.total_wait_us)),
            max_wait: Duration::from_micros(load(&self.max_wait_us)),
            wait_histogram: WaitHistogram {
                counts: std::array::from_fn(|i| load(&self.histogram[i])),
            },
            leases: LeaseMetrics::default(),
            pushback: self.pushback(),
            in_flight: InFlightMetrics {
                held: load(&self.slots_held),
                waits: load(&self.slot_waits),
                joined_line: load(&self.joined_line),
                heard_handed: load(&self.heard_handed),
                in_line: load(&self.in_line),
                last_place: load(&self.last_place),
                leases_lost: load(&self.leases_lost),
                released: load(&self.slots_released),
            },
        }
    }

    fn pushback(&self) -> PushbackMetrics {
        let load = |e: Event| self.events[e as usize].load(Ordering::Relaxed);
        PushbackMetrics {
            responses_429: load(Event::Response429),
            responses_503: load(Event::Response503),
            responses_other: load(Event::ResponseOther),
            retries: load(Event::Retry),
            attempts_ran_out: load(Event::AttemptsRanOut),
            not_resent: load(Event::NotResent),
            pauses_unchanged: load(Event::PauseUnchanged),
            cuts: load(Event::Cut),
            cuts_same_episode: load(Event::CutSameEpisode),
            syncs: load(Event::Sync),
            syncs_unchanged: load(Event::SyncUnchanged),
            tokens_debited: self.debited.load(Ordering::Relaxed),
            held_by_pause: load(Event::HeldByPause),
            heard_pauses: load(Event::HeardPause),
            pause_checks: load(Event::PauseCheck),
            pause_confirms: load(Event::PauseConfirm),
            unconfirmed: load(Event::Unconfirmed),
        }
    }
}

/// The same counters through the `metrics` crate facade, labelled `limiter = <name>`:
/// `throttle_calls_total{outcome=granted|denied|gave_up|error}`,
/// `throttle_round_trips_total{backend=module|script|auto}`, the histogram
/// `throttle_wait_seconds`, and `throttle_pushback_total{event=pause|cut|sync|response_429|...}`.
#[cfg(feature = "metrics")]
mod facade {
    use std::time::Duration;

    pub(super) const CALLS: &str = "throttle_calls_total";
    pub(super) const ROUND_TRIPS: &str = "throttle_round_trips_total";
    pub(super) const WAIT: &str = "throttle_wait_seconds";
    pub(super) const PUSHBACK: &str = "throttle_pushback_total";
    pub(super) const SLOTS: &str = "throttle_slots_total";
    pub(super) const IN_FLIGHT: &str = "throttle_in_flight";
    pub(super) const IN_LINE: &str = "throttle_in_line";
    pub(super) const LINE_PLACE: &str = "throttle_line_place";

    /// Looks the metrics up on every event rather than caching handles, so a recorder
    /// installed after the limiter was built still receives everything.
    #[derive(Debug)]
    pub(super) struct Facade {
        name: String,
    }

    impl Facade {
        pub(super) fn new(name: &str) -> Facade {
            ::metrics::describe_counter!(CALLS, "Calls to a redis-throttle limiter, by outcome.");
            ::metrics::describe_counter!(ROUND_TRIPS, "Round trips to the server, by backend.");
            ::metrics::describe_histogram!(
                WAIT,
                ::metrics::Unit::Seconds,
                "Time a granted call spent waiting for its tokens."
            );
            ::metrics::describe_counter!(
                PUSHBACK,
                "The supplier's pushback, by event: responses seen, pauses, cuts, syncs."
            );
            ::metrics::describe_counter!(
                SLOTS,
                "Calls in flight under a cap, by event: waits for a slot, leases lost."
            );
            ::metrics::describe_gauge!(IN_FLIGHT, "Slots the limiter's grants hold now.");
            ::metrics::describe_gauge!(
                IN_LINE,
                "Calls of the limiter in the server's line for a slot now."
            );
            ::metrics::describe_gauge!(
                LINE_PLACE,
                "The place in the server's line last told to a call of the limiter."
            );
            Facade {
                name: name.to_owned(),
            }
        }

        pub(super) fn in_flight(&self, change: f64) {
            ::metrics::gauge!(IN_FLIGHT, "limiter" => self.name.clone()).increment(change);
        }

        pub(super) fn in_line(&self, change: f64) {
            ::metrics::gauge!(IN_LINE, "limiter" => self.name.clone()).increment(change);
        }

        pub(super) fn place(&self, place: u64) {
            ::metrics::gauge!(LINE_PLACE, "limiter" => self.name.clone()).set(place as f64);
        }

        pub(super) fn slot_event(&self, event: &'static str) {
            ::metrics::counter!(SLOTS, "limiter" => self.name.clone(), "event" => event)
                .increment(1);
        }

        pub(super) fn round_trips(&self, backend: crate::Backend, trips: u32) {
            ::metrics::counter!(
                ROUND_TRIPS,
                "limiter" => self.name.clone(),
                "backend" => backend.name()
            )
            .increment(u64::from(trips));
        }

        pub(super) fn granted(&self, wait: Duration) {
            self.outcome("granted");
            ::metrics::histogram!(WAIT, "limiter" => self.name.clone()).record(wait.as_secs_f64());
        }

        pub(super) fn event(&self, event: &'static str) {
            ::metrics::counter!(PUSHBACK, "limiter" => self.name.clone(), "event" => event)
                .increment(1);
        }

        pub(super) fn outcome(&self, outcome: &'static str) {
            ::metrics::counter!(CALLS, "limiter" => self.name.clone(), "outcome" => outcome)
                .increment(1);
        }
    }
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

    #[test]
    fn snapshot_counts_means_and_quantiles() {
        let metrics = Metrics::new("test");
        assert_eq!(metrics.snapshot(None), MetricsSnapshot::default());
        assert_eq!(metrics.snapshot(None).mean_wait(), None);
        assert_eq!(metrics.snapshot(None).wait_histogram.quantile(0.5), None);

        for wait in [MS, MS * 3, MS * 3, MS * 150] {
            metrics.granted(wait);
        }
        metrics.denied();
        metrics.gave_up();
        metrics.gave_up();
        metrics.error();
        metrics.round_trips_of(crate::Backend::Module, 2);
        metrics.round_trips_of(crate::Backend::Module, 5);
        let snap = metrics.snapshot(None);
        assert_eq!(
            (snap.granted, snap.denied, snap.gave_up, snap.errors),
            (4, 1, 2, 1)
        );
        assert_eq!(snap.round_trips, 7);
        assert_eq!(snap.total_wait, MS * 157);
        assert_eq!(snap.mean_wait(), Some(Duration::from_micros(39_250)));
        let hist = &snap.wait_histogram;
        assert_eq!(hist.count(), 4);
        assert_eq!(hist.quantile(0.25), Some(MS));
        assert_eq!(hist.quantile(0.5), Some(MS * 5));
        assert_eq!(hist.quantile(0.75), Some(MS * 5));
        assert_eq!(hist.quantile(1.0), Some(MS * 200));
        let counted: Vec<_> = hist.buckets().filter(|(_, n)| *n > 0).collect();
        assert_eq!(
            counted,
            [(Some(MS), 1), (Some(MS * 5), 2), (Some(MS * 200), 1)]
        );
        assert_eq!(hist.buckets().count(), BUCKETS);
        assert_eq!(hist.buckets().last(), Some((None, 0)));
    }
}
