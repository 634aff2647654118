//! The counters a process reports of a limiter: each one's name on the report line and where
//! the limiter's metrics keep it, in one list that the line, its reader and the operator's tool
//! iterate, so that a counter is added here and nowhere else.

use crate::MetricsSnapshot;

/// One counter of a limiter's report ([`Counts`](super::Counts)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Counter {
    /// Calls granted.
    Granted,
    /// `try_acquire` calls refused.
    Denied,
    /// Calls that gave up (a deadline).
    GaveUp,
    /// Calls that failed otherwise.
    Errors,
    /// Round trips to Redis.
    RoundTrips,
    /// Pauses set (a 429's `Retry-After`, a cut).
    Pauses,
    /// Cuts that cut the rate.
    Cuts,
    /// Syncs to the supplier's count that lowered the bucket.
    Syncs,
    /// 429 responses the HTTP layers saw.
    Responses429,
    /// 503 responses the HTTP layers saw.
    Responses503,
    /// Reserved calls a pause held back.
    HeldByPause,
    /// Bulk takes refused to keep the floor (or for want of tokens now).
    HeldByFloor,
    /// Calls that found every slot held (a cap on calls in flight) and waited for one.
    SlotWaits,
    /// Of those, the calls that waited in the server's line.
    JoinedLine,
    /// Slots heard handed to a call in line: granted with no take of its own.
    HeardHanded,
    /// Slots whose lease ran out while their grant held them.
    LeasesLost,
}

impl Counter {
    /// How many there are.
    pub const COUNT: usize = Counter::ALL.len();

    /// Every counter, in the order of the report line.
    pub const ALL: [Counter; 16] = [
        Counter::Granted,
        Counter::Denied,
        Counter::GaveUp,
        Counter::Errors,
        Counter::RoundTrips,
        Counter::Pauses,
        Counter::Cuts,
        Counter::Syncs,
        Counter::Responses429,
        Counter::Responses503,
        Counter::HeldByPause,
        Counter::HeldByFloor,
        Counter::SlotWaits,
        Counter::JoinedLine,
        Counter::HeardHanded,
        Counter::LeasesLost,
    ];

    /// Its name on the report line.
    pub const fn name(self) -> &'static str {
        match self {
            Counter::Granted => "granted",
            Counter::Denied => "denied",
            Counter::GaveUp => "gave_up",
            Counter::Errors => "errors",
            Counter::RoundTrips => "round_trips",
            Counter::Pauses => "pauses",
            Counter::Cuts => "cuts",
            Counter::Syncs => "syncs",
            Counter::Responses429 => "r429",
            Counter::Responses503 => "r503",
            Counter::HeldByPause => "held_pause",
            Counter::HeldByFloor => "held_floor",
            Counter::SlotWaits => "slot_waits",
            Counter::JoinedLine => "joined_line",
            Counter::HeardHanded => "handed",
            Counter::LeasesLost => "leases_lost",
        }
    }

    /// The counter named `name` on the report line, if any.
    pub fn named(name: &str) -> Option<Counter> {
        Counter::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Its value in a limiter's metrics.
    pub fn of(self, snapshot: &MetricsSnapshot) -> u64 {
        let (pushback, in_flight) = (&snapshot.pushback, &snapshot.in_flight);
        match self {
            Counter::Granted => snapshot.granted,
            Counter::Denied => snapshot.denied,
            Counter::GaveUp => snapshot.gave_up,
            Counter::Errors => snapshot.errors,
            Counter::RoundTrips => snapshot.round_trips,
            Counter::Pauses => snapshot.pauses,
            Counter::Cuts => pushback.cuts,
            Counter::Syncs => pushback.syncs,
            Counter::Responses429 => pushback.responses_429,
            Counter::Responses503 => pushback.responses_503,
            Counter::HeldByPause => pushback.held_by_pause,
            Counter::HeldByFloor => snapshot.held_by_floor,
            Counter::SlotWaits => in_flight.waits,
            Counter::JoinedLine => in_flight.joined_line,
            Counter::HeardHanded => in_flight.heard_handed,
            Counter::LeasesLost => in_flight.leases_lost,
        }
    }

    /// Its place in [`Counter::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_has_its_place_and_a_name_of_its_own() {
        for (at, counter) in Counter::ALL.into_iter().enumerate() {
            assert_eq!(counter.index(), at, "{counter:?}");
            assert_eq!(Counter::named(counter.name()), Some(counter));
        }
        assert_eq!(
            Counter::named("waits"),
            None,
            "the histogram is not a counter"
        );
    }
}
