//! What a [`PartitionedLimiter`] does: the [`Throttle`] calls. It spends leased
//! partitions in process at a fixed share of the quota, so it cannot cut the fleet's rate
//! (that would change every process's share at once): a cut pauses the fleet, as
//! [`Throttle::pause`] does. The supplier's count pauses it when nothing is left; a
//! cost settles on the partition that served it.

use std::cmp::Ordering;
use std::time::Duration;

use redis::aio::ConnectionLike;
use tokio::time::Instant;

use super::{nanos, with_slot, PartitionedLimiter, Slot, NO_LEASE_PAUSE, NO_SLOT_PAUSE};
use crate::partitioned::metrics::Counters;
use crate::partitioned::share::Take;
use crate::partitioned::wire;
use crate::vocabulary::grant::{Grant, Receipt};
use crate::{
    BucketState, Cut, CutReport, Demand, Error, HttpEvent, MetricsSnapshot, Settled, SupplierCount,
    SupplierUnit, Throttle, TryAcquire,
};

impl<C> Throttle for PartitionedLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The limiter's name (the quota's unless
    /// [`PartitionedLimiterBuilder::name`](crate::partitioned::PartitionedLimiterBuilder::name)
    /// set one).
    fn name(&self) -> &str {
        &self.inner.core.name
    }

    /// Takes what `demand` asks for (one token unless it says) from one partition, within its
    /// deadline. A [`Priority::Bulk`](crate::Priority::Bulk) call keeps the floor's share of the
    /// partition (its floor times the partition's part of the burst, rounded up). With a cap
    /// on calls in flight, the call first takes a slot (a round trip; waiting for one if every
    /// slot is held), then its tokens, holding the slot meanwhile.
    async fn acquire_with(&self, demand: Demand) -> Result<Grant, Error> {
        let tokens = demand.tokens.unwrap_or(1);
        let floor = self.floor(tokens, demand.priority);
        let deadline = demand.deadline.unwrap_or(self.inner.core.max_wait);
        let start = Instant::now();
        self.check(tokens)?;
        // The slot first: a call that had its tokens and then waited for a slot would start
        // later than its tokens allow, bunched with others (faster than the quota).
        let slot = self.slot(Some(deadline)).await?;
        let grant = self.wait_for(tokens, floor, deadline, start).await?;
        Ok(with_slot(grant, slot))
    }

    /// Takes what `demand` asks for if a leased partition has it now; never waits, whatever
    /// its deadline. `Denied`: until a held partition will have it (or, holding none, the
    /// time a waiting caller looks again). With a cap on calls in flight, a slot too (a round
    /// trip): denied without one, for the time a waiting call would look again.
    async fn try_acquire_with(&self, demand: Demand) -> Result<TryAcquire, Error> {
        let tokens = demand.tokens.unwrap_or(1);
        let floor = self.floor(tokens, demand.priority);
        let core = &self.inner.core;
        self.check(tokens)?;
        let start = Instant::now();
        let slot = self.slot(None).await?;
        if let Slot::Busy = slot {
            core.metrics.denied();
            return Ok(TryAcquire::Denied {
                retry_after: NO_SLOT_PAUSE,
            });
        }
        // Denied for the tokens, the slot (if any) is released as it is dropped here.
        match self.take(tokens, floor) {
            Take::Granted {
                index,
                tat_ns,
                remaining,
            } => Ok(TryAcquire::Granted(with_slot(
                self.granted(tokens, index, tat_ns, remaining, start),
                slot,
            ))),
            Take::Wait { ns } => {
                core.metrics.denied();
                Ok(TryAcquire::Denied {
                    retry_after: ns.map_or(NO_LEASE_PAUSE, nanos),
                })
            }
        }
    }

    /// Gives back the tokens of a grant not used, to the partition that served it, if
    /// nothing was taken from it since (THROTTLE.GIVE's rule) and this process still holds
    /// it. Returns the tokens given back.
    async fn give_back(&self, grant: Grant) -> Result<u64, Error> {
        let (Some(index), Receipt::Partition(tat_ns)) = (grant.partition, grant.receipt) else {
            return Ok(0);
        };
        let core = &self.inner.core;
        let now = core.now_ns();
        let given = core
            .state()
            .shares
            .give_back(&core.share, index, grant.tokens, tat_ns, now);
        core.metrics.gave_back(given);
        if given > 0 {
            core.changed.notify_one();
        }
        Ok(given)
    }

    /// The partitions this process holds, as they stand: their tokens together, the longest
    /// until one is full, the pause; capacity and interval are the whole quota's, so
    /// [`BucketState::time_to_take`] is the fleet's.
    async fn peek(&self) -> Result<BucketState, Error> {
        let core = &self.inner.core;
        let now = core.now_ns();
        let state = core.state();
        let (remaining, until_full_ms) = state.shares.view(&core.share, now);
        let paused_ns = state.shares.paused_until_ns().saturating_sub(now).max(0);
        let total = core.quota.total();
        Ok(BucketState {
            paused_for: nanos(paused_ns),
            ..BucketState::new(
                remaining,
                Duration::from_millis(until_full_ms),
                total.capacity(),
                total.token_interval(),
            )
        })
    }

    /// The supplier pushed back (429 with `Retry-After`): this process takes nothing for
    /// `retry_after`, then resumes each partition from one token (no burst), as
    /// `THROTTLE.PAUSE` does; and it tells the fleet (`{name}:pause`, never shortening a
    /// longer pause): the processes that listen
    /// ([`PartitionedLimiterBuilder::listen`](crate::partitioned::PartitionedLimiterBuilder::listen))
    /// hear it within a round trip, the others follow at their next renewal round, within a
    /// third of a lease. Returns how long until the next token (at least `retry_after`).
    async fn pause(&self, retry_after: Duration) -> Result<Duration, Error> {
        let core = &self.inner.core;
        let until = core
            .now_ns()
            .saturating_add(i64::try_from(retry_after.as_nanos()).unwrap_or(i64::MAX));
        core.state().shares.pause(&core.share, until);
        core.metrics.paused();
        let until_ms = wire::pause_until_ms(std::time::SystemTime::now(), retry_after);
        let keep_ms = wire::pause_keep_ms(retry_after, core.quota.lease());
        let pause_ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
        let mut conn = self.conn.clone();
        Counters::add(&core.counters.round_trips, 1);
        wire::write_pause(&mut conn, core.quota.name(), until_ms, keep_ms, pause_ms).await?;
        Ok(retry_after)
    }

    /// The supplier is congested: pauses this process and the fleet for the cut's pause, as
    /// [`Throttle::pause`] does. The rate is not cut (`cut: false` in the report):
    /// each process's share of the quota is fixed by its leases.
    async fn cut(&self, cut: Cut) -> Result<CutReport, Error> {
        let next = self.pause(cut.pause()).await?;
        self.inner.core.metrics.cut(false);
        Ok(CutReport {
            cut: false,
            next,
            factor_bp: throttle_bucket::FULL_FACTOR_BP,
            recovers_in: Duration::ZERO,
        })
    }

    /// The supplier said how much is left, in calls: with nothing left and a reset, pauses
    /// the fleet until it (as [`Throttle::pause`]); a count above zero changes
    /// nothing, since the partitions' tokens are spread over the processes that hold them.
    /// Returns whether it paused.
    async fn sync(&self, count: SupplierCount) -> Result<bool, Error> {
        let metrics = &self.inner.core.metrics;
        let Some((remaining, reset)) = SupplierUnit::Calls.pick(&count, 1) else {
            return Ok(false);
        };
        let paused = remaining == 0 && !reset.is_zero();
        if paused {
            self.pause(reset).await?;
        }
        metrics.synced(paused);
        Ok(paused)
    }

    /// Brings a grant to the call's actual cost on the partition that served it: takes the
    /// extra now, into debt if need be (from the first partition held, if that one's lease
    /// has gone), or gives back what was not used by [`Throttle::give_back`]'s rule.
    async fn settle(&self, grant: Grant, actual: u64) -> Result<Settled, Error> {
        match actual.cmp(&grant.tokens) {
            Ordering::Equal => Ok(Settled::default()),
            Ordering::Greater => {
                let core = &self.inner.core;
                let extra = actual - grant.tokens;
                let index = grant.partition.unwrap_or(0);
                let now = core.now_ns();
                let debited = core.state().shares.debit(&core.share, index, extra, now);
                core.metrics.debited(debited);
                Ok(Settled {
                    debited,
                    given_back: 0,
                })
            }
            Ordering::Less => {
                let unused = grant.tokens - actual;
                let given_back = self
                    .give_back(Grant {
                        tokens: unused,
                        ..grant
                    })
                    .await?;
                Ok(Settled {
                    debited: 0,
                    given_back,
                })
            }
        }
    }

    fn count(&self, event: HttpEvent) {
        self.inner.core.metrics.event(event.into());
    }

    /// Counters since the limiter was built: its calls, and its leases
    /// ([`MetricsSnapshot::leases`]).
    fn metrics(&self) -> MetricsSnapshot {
        crate::report::Reported::snapshot(&*self.inner.core)
    }
}
