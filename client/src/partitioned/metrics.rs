//! Counters of a partitioned limiter's leases, kept by the lease task and read into its
//! [`MetricsSnapshot`](crate::MetricsSnapshot)'s [`LeaseMetrics`].

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::LeaseMetrics;

#[derive(Default)]
pub(crate) struct Counters {
    /// Requests to Redis (a lease pipeline counts one, a pause one).
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
    pub pauses_heard: AtomicU64,
}

impl Counters {
    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub(super) fn round_trips(&self) -> u64 {
        self.round_trips.load(Relaxed)
    }

    pub(super) fn leases(&self, held: usize) -> LeaseMetrics {
        let load = |c: &AtomicU64| c.load(Relaxed);
        LeaseMetrics {
            held: held as u64,
            acquired: load(&self.leases_acquired),
            renewed: load(&self.leases_renewed),
            lost: load(&self.leases_lost),
            lapsed: load(&self.leases_lapsed),
            released: load(&self.leases_released),
            yielded: load(&self.leases_yielded),
            refused: load(&self.acquire_refused),
            unconfirmed: load(&self.unconfirmed),
            errors: load(&self.errors),
            pauses_heard: load(&self.pauses_heard),
        }
    }
}
