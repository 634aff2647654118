//! A cap on calls in flight across the fleet (`THROTTLE.TAKE ... INFLIGHT n LEASE ms`): what a
//! limiter asks for, and the pure decisions about it (when to renew, whether a refusal was for
//! want of a slot, how often to look again). The I/O is in `buckets::slots`.

use std::time::Duration;

use throttle_bucket::{MAX_INFLIGHT, MAX_LEASE_MS};

use crate::reply::TakeReply;
use crate::QuotaError;

/// The lease a slot is held under unless the builder says: long enough that a renewal every
/// third of it survives a slow round trip or two, short enough that a crashed holder's slot
/// comes back soon.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// The shortest lease a limiter accepts: a renewal every third of it must come back well
/// within it, round trip included.
pub const MIN_LEASE: Duration = Duration::from_millis(300);

/// The first look again, after a refusal for want of a slot, for a slot another process
/// released (a release in this process wakes its waiter at once).
const FIRST_LOOK: Duration = Duration::from_millis(2);

/// The longest wait between two looks: a slot another process frees is found within this.
const LONGEST_LOOK: Duration = Duration::from_millis(50);

/// The longest a call that hears slots freed waits without looking: the releases are announced,
/// but a lease that runs out is not, and a subscription that died without a word is found only
/// by its pings.
const HEARD_LOOK: Duration = Duration::from_secs(1);

/// A limiter's cap on calls in flight: at most `cap` slots held across the fleet, each under
/// a lease of `lease`, renewed while held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InFlight {
    pub(crate) cap: u64,
    pub(crate) lease: Duration,
}

impl InFlight {
    /// `cap` slots under `lease`, or why not.
    pub(crate) fn new(cap: u64, lease: Duration) -> Result<InFlight, QuotaError> {
        if !(1..=MAX_INFLIGHT).contains(&cap) {
            return Err(QuotaError::InFlight { cap });
        }
        if lease < MIN_LEASE || lease > Duration::from_millis(MAX_LEASE_MS) {
            return Err(QuotaError::Lease { lease });
        }
        Ok(InFlight { cap, lease })
    }

    /// The lease in whole ms, as `LEASE` sends it.
    pub(crate) fn lease_ms(&self) -> u64 {
        u64::try_from(self.lease.as_millis()).unwrap_or(MAX_LEASE_MS)
    }

    /// How often a held slot is renewed: three times a lease, so that one late or lost renewal
    /// still leaves a third of it.
    pub(crate) fn renew_every(&self) -> Duration {
        self.lease / 3
    }

    /// Whether a refused take (asked with `max_wait_ms`) was refused for want of a slot, so
    /// that the call waits for one rather than give up. The reply cannot say: a refusal for
    /// the slots names the first lease's end or the tokens' wait, whichever is later, one for
    /// the tokens only their wait, beyond `max_wait_ms`. A wait within `max_wait_ms` is the
    /// slots'; one beyond the lease is the tokens' (no lease runs longer); one between the two
    /// may be either, and the call waits for a slot until its deadline.
    pub(crate) fn refused_for_slot(&self, reply: &TakeReply, max_wait_ms: u64) -> bool {
        !reply.granted
            && max_wait_ms > 0
            && (reply.wait <= Duration::from_millis(max_wait_ms) || reply.wait <= self.lease)
    }
}

/// After a look at `last` found no slot: the next one, doubling up to [`LONGEST_LOOK`], never
/// after the first lease ends (`wait`, when the server says a slot is free at the latest). A
/// refusal that names no time (a wait of 0: a slot table that can issue no id, which only a
/// forged state holds) bounds nothing, so the looks double all the same: never a spin.
pub(crate) fn next_look(last: Option<Duration>, wait: Duration) -> Duration {
    let look = last.map_or(FIRST_LOOK, |last| (last * 2).min(LONGEST_LOOK));
    if wait.is_zero() {
        look
    } else {
        look.min(wait)
    }
}

/// After a refusal for want of a slot, while the limiter hears the fleet's releases: the next
/// look when the first lease held runs out (`wait`, as the server names it), at most
/// [`HEARD_LOOK`] away; a refusal that names no time is looked at again as a poll would
/// ([`LONGEST_LOOK`]), not at once.
pub(crate) fn listening_look(wait: Duration) -> Duration {
    if wait.is_zero() {
        LONGEST_LOOK
    } else {
        wait.min(HEARD_LOOK)
    }
}

/// After a wake by a slot freed that found none (another process won it, or the message was
/// forged: anyone with publish rights on the channel can send one): the least time before the
/// next such wake counts, doubling from [`FIRST_LOOK`] up to [`LONGEST_LOOK`] after `last`, so
/// that a flood of them costs a waiter a few takes, not one each.
pub(crate) fn after_futile_wake(last: Option<Duration>) -> Duration {
    last.map_or(FIRST_LOOK, |last| (last * 2).min(LONGEST_LOOK))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(wait_ms: u64) -> TakeReply {
        TakeReply {
            granted: false,
            remaining: 0,
            wait: Duration::from_millis(wait_ms),
            reset: Duration::ZERO,
            ticket: 0,
            round_trips: 1,
        }
    }

    #[test]
    fn caps_and_leases_in_range_only() {
        let lease = Duration::from_secs(2);
        assert!(InFlight::new(1, lease).is_ok());
        assert!(InFlight::new(1024, lease).is_ok());
        assert_eq!(
            InFlight::new(0, lease),
            Err(QuotaError::InFlight { cap: 0 })
        );
        assert_eq!(
            InFlight::new(1025, lease),
            Err(QuotaError::InFlight { cap: 1025 })
        );
        let short = Duration::from_millis(299);
        assert_eq!(
            InFlight::new(4, short),
            Err(QuotaError::Lease { lease: short })
        );
        let long = Duration::from_millis(MAX_LEASE_MS + 1);
        assert_eq!(
            InFlight::new(4, long),
            Err(QuotaError::Lease { lease: long })
        );
        assert_eq!(InFlight::new(4, lease).map(|f| f.lease_ms()), Ok(2000));
        assert_eq!(
            InFlight::new(4, lease).map(|f| f.renew_every()),
            Ok(Duration::from_nanos(666_666_666))
        );
    }

    #[test]
    fn which_refusals_wait_for_a_slot() {
        let cap = InFlight::new(4, Duration::from_secs(2)).unwrap();
        // Within the deadline: the tokens were there, the slots were not.
        assert!(cap.refused_for_slot(&refused(500), 1_000));
        // Beyond the deadline but within a lease: a slot may free first; wait for it.
        assert!(cap.refused_for_slot(&refused(1_500), 1_000));
        // Beyond every lease: the tokens' wait, past the deadline.
        assert!(!cap.refused_for_slot(&refused(2_001), 1_000));
        // A call that may not wait never waits for a slot either.
        assert!(!cap.refused_for_slot(&refused(5), 0));
        let granted = TakeReply {
            granted: true,
            ..refused(0)
        };
        assert!(!cap.refused_for_slot(&granted, 1_000));
    }

    #[test]
    fn looks_double_up_to_the_longest_and_never_past_the_first_lease() {
        let far = Duration::from_secs(5);
        let looks: Vec<u64> = std::iter::successors(Some(next_look(None, far)), |last| {
            Some(next_look(Some(*last), far))
        })
        .take(8)
        .map(|d| d.as_millis() as u64)
        .collect();
        assert_eq!(looks, [2, 4, 8, 16, 32, 50, 50, 50]);
        assert_eq!(
            next_look(Some(Duration::from_millis(32)), Duration::from_millis(7)),
            Duration::from_millis(7)
        );
        // A refusal that names no time (a forged table): the looks double all the same.
        let forged: Vec<u64> =
            std::iter::successors(Some(next_look(None, Duration::ZERO)), |last| {
                Some(next_look(Some(*last), Duration::ZERO))
            })
            .take(7)
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(forged, [2, 4, 8, 16, 32, 50, 50]);
    }

    #[test]
    fn a_listening_call_looks_when_the_first_lease_ends_or_within_a_second() {
        let ms = Duration::from_millis;
        assert_eq!(listening_look(ms(300)), ms(300));
        assert_eq!(listening_look(ms(10_000)), ms(1000));
        assert_eq!(listening_look(ms(1)), ms(1));
        assert_eq!(
            listening_look(Duration::ZERO),
            ms(50),
            "names no time: not at once"
        );
    }

    #[test]
    fn futile_wakes_back_off() {
        let gaps: Vec<u64> = std::iter::successors(Some(after_futile_wake(None)), |last| {
            Some(after_futile_wake(Some(*last)))
        })
        .take(7)
        .map(|d| d.as_millis() as u64)
        .collect();
        assert_eq!(gaps, [2, 4, 8, 16, 32, 50, 50]);
    }
}
