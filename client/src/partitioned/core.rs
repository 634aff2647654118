//! What the callers (`limiter`) and the lease task (`keeper`) share: the held partitions, the
//! clock they are measured on, the signals between the two sides, and the lease events.
//! Its own file so that neither side imports the other for it.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use throttle_bucket::Quota as BucketQuota;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::lease::ReplicaAcks;
use super::metrics::Counters;
use super::plan::{Rules, Timing};
use super::quota::PartitionedQuota;
use super::share::Shares;
use crate::wire::listen::Ears;

/// A change to one of this process's leases, for [`PartitionedLimiterBuilder::on_lease`].
///
/// [`PartitionedLimiterBuilder::on_lease`]: super::PartitionedLimiterBuilder::on_lease
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseEvent {
    /// The partition.
    pub partition: u32,
    /// What happened.
    pub kind: LeaseEventKind,
    /// When: for a confirmation, when its reply came; for the others, the instant from
    /// which nothing more is spent from the partition.
    pub at: Instant,
}

/// What happened to a lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseEventKind {
    /// Acquired or renewed, and confirmed: the partition is spent from `usable_from` (when it
    /// was leased) until `valid_until`, exclusive.
    Confirmed {
        /// When this hold began.
        usable_from: Instant,
        /// Nothing is spent from it at or after this instant unless a renewal confirms.
        valid_until: Instant,
    },
    /// A renewal found the key gone or another owner's: spending stopped at once.
    Lost,
    /// The usable time ran out before a renewal confirmed.
    Lapsed,
    /// Given back (idle, yielded, or at shutdown).
    Released,
}

/// The caller's callback for lease events, shared by the builder and the core.
pub(crate) type Observer = Arc<dyn Fn(&LeaseEvent) + Send + Sync>;

/// What the callers and the keeper share.
pub(crate) struct Core {
    pub quota: PartitionedQuota,
    pub share: BucketQuota,
    pub name: String,
    pub owner: String,
    pub origin: Instant,
    pub timing: Timing,
    pub rules: Rules,
    pub acks: ReplicaAcks,
    pub wait_timeout: Duration,
    /// How long a call waits unless its demand says.
    pub max_wait: Duration,
    pub state: Mutex<State>,
    /// Callers wait their turn here, first come first served; the one holding it sleeps
    /// until the next token.
    pub turn: tokio::sync::Mutex<()>,
    /// A partition was added or extended, or the limiter stopped: the waiting caller looks
    /// again.
    pub changed: Notify,
    /// A caller waits longer than the rules like: the keeper looks again.
    pub demand: Notify,
    /// Callers waiting now (written by the callers, read by the keeper's rules).
    pub waiters: AtomicUsize,
    /// When the caller holding the turn began waiting (ns since `origin`; -1: none).
    pub turn_since: AtomicI64,
    /// The callers' counters (grants, waits, denials), as every limiter keeps them.
    pub metrics: crate::engine::metrics::Metrics,
    /// The leases' counters.
    pub counters: Counters,
    pub stopped: AtomicBool,
    pub observer: Option<Observer>,
    /// The fleet pause channel, where the limiter listens.
    pub ears: Option<Arc<Ears>>,
    /// With a cap on calls in flight: the counters of the limiter that keeps the slots.
    pub slots: Option<Arc<dyn crate::report::Reported>>,
}

#[derive(Default)]
pub(crate) struct State {
    pub shares: Shares,
}

impl crate::report::Reported for Core {
    /// Its calls' counters, its leases' ([`crate::MetricsSnapshot::leases`]) and, with a cap,
    /// its slots' ([`crate::MetricsSnapshot::in_flight`]; their round trips counted in).
    fn snapshot(&self) -> crate::MetricsSnapshot {
        let mut snapshot = self.metrics.snapshot(None);
        snapshot.round_trips = snapshot
            .round_trips
            .saturating_add(self.counters.round_trips());
        snapshot.leases = self.counters.leases(self.state().shares.len());
        if let Some(slots) = &self.slots {
            let slots = slots.snapshot();
            snapshot.round_trips = snapshot.round_trips.saturating_add(slots.round_trips);
            snapshot.in_flight = slots.in_flight;
        }
        snapshot
    }
}

impl Core {
    pub(super) fn now_ns(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(i64::MAX)
    }

    pub(super) fn instant(&self, ns: i64) -> Instant {
        self.origin + Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The partitions held now, in preference order.
    pub(super) fn held(&self) -> Vec<u32> {
        self.state().shares.held().iter().map(|h| h.index).collect()
    }

    pub(super) fn waiters(&self) -> usize {
        self.waiters.load(Relaxed)
    }

    /// How long the longest-waiting caller has waited, ns.
    pub(super) fn longest_wait_ns(&self, now_ns: i64) -> i64 {
        match self.turn_since.load(Relaxed) {
            since if since >= 0 => now_ns.saturating_sub(since),
            _ => 0,
        }
    }

    pub(super) fn observe(&self, partition: u32, kind: LeaseEventKind, at_ns: i64) {
        if let Some(observer) = &self.observer {
            observer(&LeaseEvent {
                partition,
                kind,
                at: self.instant(at_ns),
            });
        }
    }
}
