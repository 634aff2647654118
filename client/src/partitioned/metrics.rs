//! Counters of a partitioned limiter.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A partitioned limiter's counters since it was built; from
/// [`PartitionedLimiter::metrics`](super::PartitionedLimiter::metrics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionMetrics {
    /// Calls granted (acquire and try_acquire).
    pub granted: u64,
    /// `try_acquire` calls refused.
    pub denied: u64,
    /// Calls that gave up at their deadline.
    pub gave_up: u64,
    /// Requests to Redis (a lease pipeline counts one): the cost of the grants.
    pub round_trips: u64,
    /// Partitions held now.
    pub partitions_held: u64,
    /// Leases won (`SET NX` succeeded and was confirmed).
    pub leases_acquired: u64,
    /// Renewals confirmed.
    pub leases_renewed: u64,
    /// Leases found taken or gone at renewal: spending stopped at once.
    pub leases_lost: u64,
    /// Leases whose usable time ran out before a confirmed renewal (a server down, a
    /// replica that did not acknowledge, a process that was frozen).
    pub leases_lapsed: u64,
    /// Leases given back (idle, yielded to another process, or at shutdown).
    pub leases_released: u64,
    /// Leases given to a process that held fewer and asked.
    pub leases_yielded: u64,
    /// Acquire attempts that found the partition held by another process.
    pub acquire_refused: u64,
    /// Lease writes the replicas did not acknowledge in time (not spent on).
    pub unconfirmed: u64,
    /// Lease requests that failed (connection, cluster reconfiguration).
    pub errors: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub granted: AtomicU64,
    pub denied: AtomicU64,
    pub gave_up: AtomicU64,
    pub round_trips: AtomicU64,
    pub leases_acquired: AtomicU64,
    pub leases_renewed: AtomicU64,
    pub leases_lost: AtomicU64,
    pub leases_lapsed: AtomicU64,
    pub leases_released: AtomicU64,
    pub leases_yielded: AtomicU64,
    pub acquire_refused: AtomicU64,
    pub unconfirmed: AtomicU64,
    pub errors: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub fn snapshot(&self, held: usize) -> PartitionMetrics {
        let load = |c: &AtomicU64| c.load(Relaxed);
        PartitionMetrics {
            granted: load(&self.granted),
            denied: load(&self.denied),
            gave_up: load(&self.gave_up),
            round_trips: load(&self.round_trips),
            partitions_held: held as u64,
            leases_acquired: load(&self.leases_acquired),
            leases_renewed: load(&self.leases_renewed),
            leases_lost: load(&self.leases_lost),
            leases_lapsed: load(&self.leases_lapsed),
            leases_released: load(&self.leases_released),
            leases_yielded: load(&self.leases_yielded),
            acquire_refused: load(&self.acquire_refused),
            unconfirmed: load(&self.unconfirmed),
            errors: load(&self.errors),
        }
    }
}
