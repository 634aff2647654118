//! The buckets' side of the supplier's real capacity, each bucket in its own unit: a cut on
//! every bucket (`THROTTLE.CUT`), the supplier's own count (`THROTTLE.SYNC`), a cost settled
//! after the call (`THROTTLE.DEBIT` or `THROTTLE.GIVE`).

use std::cmp::Ordering;
use std::time::Duration;

use redis::aio::ConnectionLike;
use throttle_bucket::{CutArgs, DebitArgs, SyncArgs, MAX_CAPACITY, MAX_WAIT_MS};

use super::{pause_ms, Buckets, Cost};
use crate::vocabulary::grant::{Grant, Receipt};
use crate::vocabulary::pushback::SyncBounds;
use crate::{Cut, CutReport, Error, Settled, SupplierCount};

impl<C> Buckets<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Cuts every bucket (one `THROTTLE.CUT` each). The report is the strictest bucket's: cut
    /// if any was, the longest wait, the lowest factor, the longest recovery.
    pub(crate) async fn cut(&self, cut: Cut) -> Result<CutReport, Error> {
        let shared = &self.shared;
        let mut report = CutReport {
            factor_bp: throttle_bucket::FULL_FACTOR_BP,
            ..CutReport::default()
        };
        for bucket in &shared.buckets {
            let args = CutArgs {
                quota: *bucket.quota.bucket(),
                pause_ms: pause_ms(cut.pause()),
                factor_bp: cut.factor_bp(),
                recovery_ms: pause_ms(cut.recovery()),
            };
            let reply = self.call(&bucket.key, &args).await?;
            report.cut |= reply.cut;
            report.next = report.next.max(Duration::from_millis(reply.next_ms));
            report.factor_bp = report.factor_bp.min(reply.factor_bp);
            report.recovers_in = report
                .recovers_in
                .max(Duration::from_millis(reply.recovered_ms));
        }
        shared.metrics.paused();
        shared.metrics.cut(report.cut);
        tracing::debug!(limiter = %shared.name, cut = report.cut, factor_bp = report.factor_bp,
            "the supplier is congested: the fleet paused and slowed down");
        Ok(report)
    }

    /// Lowers each bucket the count says something about, in its own unit, to what the
    /// supplier has left, never raising it (one `THROTTLE.SYNC` per bucket that could hold
    /// more: a count with nothing for a bucket, or not below its capacity, costs no round
    /// trip). Returns whether any bucket changed.
    pub(crate) async fn sync(&self, count: SupplierCount) -> Result<bool, Error> {
        let shared = &self.shared;
        let mut changed = false;
        for bucket in &shared.buckets {
            let pick = bucket.unit.pick(&count, bucket.per_unit);
            let capacity = bucket.quota.capacity();
            let Some((remaining, reset)) = pick.filter(|(left, _)| *left < capacity) else {
                continue;
            };
            let args = SyncArgs {
                quota: *bucket.quota.bucket(),
                remaining: remaining.min(MAX_CAPACITY),
                reset_ms: u64::try_from(reset.as_millis())
                    .unwrap_or(MAX_WAIT_MS)
                    .min(MAX_WAIT_MS),
            };
            let reply = self.call(&bucket.key, &args).await?;
            shared.metrics.synced(reply.lowered);
            changed |= reply.lowered;
        }
        Ok(changed)
    }

    /// Which of the supplier's counts could lower the buckets, each holding `left` (in key
    /// order, from the take's reply): each bucket in its own unit.
    pub(super) fn sync_bounds(&self, left: &[u64]) -> SyncBounds {
        left.iter()
            .zip(&self.shared.buckets)
            .fold(SyncBounds::NONE, |bounds, (left, bucket)| {
                bounds.with(bucket.unit, *left, bucket.per_unit)
            })
    }

    /// Brings a grant to the call's actual tokens: the per-token buckets take the extra
    /// (`THROTTLE.DEBIT`, into debt if need be: taking more is always safe) or give back what
    /// was not used (`THROTTLE.GIVE`, with the grant's tickets, by its rule); a per-call
    /// bucket took a call's cost, which stays right. The tokens given back are the fewest any
    /// per-token bucket took back.
    pub(crate) async fn settle(&self, grant: Grant, actual: u64) -> Result<Settled, Error> {
        let shared = &self.shared;
        let Receipt::Tickets(tickets) = &grant.receipt else {
            return Ok(Settled::default());
        };
        let per_token = shared
            .buckets
            .iter()
            .zip(tickets)
            .filter(|(bucket, _)| bucket.cost == Cost::PerToken);
        let mut settled = Settled::default();
        match actual.cmp(&grant.tokens) {
            Ordering::Equal => {}
            Ordering::Greater => {
                let extra = actual - grant.tokens;
                for (bucket, _) in per_token {
                    let args = DebitArgs {
                        quota: *bucket.quota.bucket(),
                        tokens: extra,
                    };
                    self.call(&bucket.key, &args).await?;
                    settled.debited = extra;
                }
                shared.metrics.debited(settled.debited);
            }
            Ordering::Less => {
                let unused = grant.tokens - actual;
                let mut fewest: Option<u64> = None;
                for (bucket, ticket) in per_token {
                    let given = if *ticket == 0 {
                        0
                    } else {
                        let args = throttle_bucket::GiveArgs {
                            quota: *bucket.quota.bucket(),
                            tokens: unused,
                            ticket_us: *ticket,
                        };
                        self.call(&bucket.key, &args).await?
                    };
                    fewest = Some(fewest.map_or(given, |f| f.min(given)));
                }
                settled.given_back = fewest.unwrap_or(0);
                shared.metrics.gave_back(settled.given_back);
            }
        }
        Ok(settled)
    }
}
