//! A [`PartitionedLimiter`]'s side of the supplier's real capacity. It spends leased
//! partitions in process at a fixed share of the quota, so it cannot cut the fleet's rate
//! (that would change every process's share at once): a cut pauses the fleet, as
//! [`PartitionedLimiter::pause`] does. The supplier's count pauses it when nothing is left; a
//! cost settles on the partition that served it.

use std::cmp::Ordering;
use std::time::Duration;

use redis::aio::ConnectionLike;

use super::PartitionedLimiter;
use crate::grant::Grant;
use crate::{Cut, CutReport, Error, Settled, SupplierCount, SupplierUnit};

impl<C> PartitionedLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The supplier is congested: pauses this process and the fleet for the cut's pause, as
    /// [`PartitionedLimiter::pause`] does. The rate is not cut (`cut: false` in the report):
    /// each process's share of the quota is fixed by its leases.
    pub async fn cut(&self, cut: Cut) -> Result<CutReport, Error> {
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
    /// the fleet until it (as [`PartitionedLimiter::pause`]); a count above zero changes
    /// nothing, since the partitions' tokens are spread over the processes that hold them.
    /// Returns whether it paused.
    pub async fn sync(&self, count: SupplierCount) -> Result<bool, Error> {
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
    /// has gone), or gives back what was not used by [`PartitionedLimiter::give_back`]'s rule.
    pub async fn settle(&self, grant: Grant, actual: u64) -> Result<Settled, Error> {
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
}
