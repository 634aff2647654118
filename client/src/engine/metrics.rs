//! A limiter's live counters, read as a [`MetricsSnapshot`]; optionally also sent to the
//! `metrics` facade.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::vocabulary::metrics::{bucket_of, BUCKETS};
use crate::{
    HttpEvent, InFlightMetrics, LeaseMetrics, MetricsSnapshot, PushbackMetrics, WaitHistogram,
};

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
            wait_histogram: WaitHistogram::new(std::array::from_fn(|i| load(&self.histogram[i]))),
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
