//! A [`Limiter`]'s side of the supplier's real capacity: a congestion cut (`THROTTLE.CUT`),
//! the supplier's own count (`THROTTLE.SYNC`), a cost settled after the call
//! (`THROTTLE.DEBIT` or `THROTTLE.GIVE`), and the look a reserved call takes before it is sent.

use std::cmp::Ordering;
use std::time::Duration;

use redis::aio::ConnectionLike;
use throttle_bucket::{Command, CutArgs, DebitArgs, SyncArgs, MAX_CAPACITY, MAX_WAIT_MS};

use super::{pause_ms, Limiter};
use crate::grant::Grant;
use crate::reply;
use crate::{Cut, CutReport, Error, Settled, SupplierCount};

impl<C> Limiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The supplier is congested (a 429 or 503): pauses the whole fleet on this bucket for
    /// the cut's pause and cuts its rate by the cut's factor, climbing back to the configured
    /// rate over its recovery time (`THROTTLE.CUT`). Replicas that see the same episode cut
    /// once: a cut while the bucket is still paused only pauses. The HTTP layers call this on
    /// every 429 and 503 unless their policy says otherwise.
    pub async fn cut(&self, cut: Cut) -> Result<CutReport, Error> {
        let args = CutArgs {
            quota: *self.shared.quota.bucket(),
            pause_ms: pause_ms(cut.pause()),
            factor_bp: cut.factor_bp(),
            recovery_ms: pause_ms(cut.recovery()),
        };
        let value = self.send(Command::Cut, args.words()).await?;
        let reply = reply::cut(&value).map_err(|reply| Error::UnexpectedReply { reply })?;
        self.shared.metrics.paused();
        self.shared.metrics.cut(reply.cut);
        tracing::debug!(key = %self.shared.key, cut = reply.cut, factor_bp = reply.factor_bp,
            "the supplier is congested: the fleet paused and slowed down");
        Ok(CutReport {
            cut: reply.cut,
            next: Duration::from_millis(reply.next_ms),
            factor_bp: reply.factor_bp,
            recovers_in: Duration::from_millis(reply.recovered_ms),
        })
    }

    /// The supplier said how much of its quota is left: lowers the bucket to hold at most
    /// that (in the limiter's [`SupplierUnit`](crate::SupplierUnit)), never raises it, and
    /// pauses it until the supplier's reset when nothing is left (`THROTTLE.SYNC`). Returns
    /// whether the bucket changed; a count with nothing for this bucket makes no round trip,
    /// and one the bucket already meets writes nothing.
    pub async fn sync(&self, count: SupplierCount) -> Result<bool, Error> {
        let shared = &self.shared;
        let Some((remaining, reset)) = shared.unit.pick(&count, shared.cost) else {
            return Ok(false);
        };
        let capacity = shared.quota.capacity();
        if remaining >= capacity {
            return Ok(false); // the bucket never holds more than its capacity: nothing to lower
        }
        let args = SyncArgs {
            quota: *shared.quota.bucket(),
            remaining: remaining.min(MAX_CAPACITY),
            reset_ms: u64::try_from(reset.as_millis())
                .unwrap_or(MAX_WAIT_MS)
                .min(MAX_WAIT_MS),
        };
        let value = self.send(Command::Sync, args.words()).await?;
        let reply = reply::sync(&value).map_err(|reply| Error::UnexpectedReply { reply })?;
        shared.metrics.synced(reply.lowered);
        Ok(reply.lowered)
    }

    /// Brings a grant to the call's actual cost, in one round trip: takes the extra now (into
    /// debt if need be: `THROTTLE.DEBIT`; taking more is always safe), or gives back the part
    /// not used by [`Limiter::give_back`]'s rule.
    pub async fn settle(&self, grant: Grant, actual: u64) -> Result<Settled, Error> {
        match actual.cmp(&grant.tokens) {
            Ordering::Equal => Ok(Settled::default()),
            Ordering::Greater => {
                let extra = actual - grant.tokens;
                let args = DebitArgs {
                    quota: *self.shared.quota.bucket(),
                    tokens: extra,
                };
                let value = self.send(Command::Debit, args.words()).await?;
                reply::debit(&value).map_err(|reply| Error::UnexpectedReply { reply })?;
                self.shared.metrics.debited(extra);
                Ok(Settled {
                    debited: extra,
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

    /// How long the bucket is paused for now, asked by a reserved call after its sleep, in one
    /// round trip (`None`: the limiter does not check).
    pub(super) fn pause_check(
        &self,
    ) -> Option<impl std::future::Future<Output = Result<(Duration, u32), Error>> + '_> {
        self.shared
            .check_pause
            .then_some(async { Ok((self.peek().await?.paused_for, 1)) })
    }
}
