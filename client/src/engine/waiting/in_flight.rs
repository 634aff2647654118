//! A cap on calls in flight across the fleet (`THROTTLE.TAKE ... INFLIGHT n LEASE ms`): what a
//! limiter asks for, and when a held slot is renewed. Whether a refusal was for a slot and
//! when to look again are the policy's (`crate::engine::waiting::policy`); the wait is the loop's
//! (`crate::engine::waiting`); holding a slot is `buckets::slots`.

use std::time::Duration;

use throttle_bucket::{MAX_INFLIGHT, MAX_LEASE_MS};

use crate::QuotaError;

/// The lease a slot is held under unless the builder says: long enough that a renewal every
/// third of it survives a slow round trip or two, short enough that a crashed holder's slot
/// comes back soon.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// The shortest lease a limiter accepts: a renewal every third of it must come back well
/// within it, round trip included.
pub const MIN_LEASE: Duration = Duration::from_millis(300);

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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
