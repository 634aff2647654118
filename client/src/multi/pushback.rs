//! A [`MultiLimiter`]'s side of the supplier's real capacity, each limit in its own unit: a
//! cut on every bucket, the supplier's requests count for the per-call limits and its tokens
//! count for the per-token ones, a cost settled on the per-token limits, and the look a
//! reserved call takes before it is sent.

use std::cmp::Ordering;
use std::time::Duration;

use redis::aio::ConnectionLike;
use throttle_bucket::{Command, CutArgs, DebitArgs, GiveArgs, SyncArgs, MAX_CAPACITY, MAX_WAIT_MS};

use super::{Cost, MultiLimiter};
use crate::grant::{Grant, Receipt};
use crate::limiter::pause_ms;
use crate::pushback::SyncBounds;
use crate::reply;
use crate::{Cut, CutReport, Error, Settled, SupplierCount};

impl<C> MultiLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The supplier is congested: cuts every bucket (one `THROTTLE.CUT` each, see
    /// [`Limiter::cut`](crate::Limiter::cut)). The report is the strictest bucket's: cut if
    /// any was, the longest wait, the lowest factor, the longest recovery.
    pub async fn cut(&self, cut: Cut) -> Result<CutReport, Error> {
        let shared = &self.shared;
        let mut report = CutReport {
            factor_bp: throttle_bucket::FULL_FACTOR_BP,
            ..CutReport::default()
        };
        for (key, (quota, _)) in shared.keys.iter().zip(&shared.limits) {
            let args = CutArgs {
                quota: *quota.bucket(),
                pause_ms: pause_ms(cut.pause()),
                factor_bp: cut.factor_bp(),
                recovery_ms: pause_ms(cut.recovery()),
            };
            let value = self.send(key, Command::Cut, args.words()).await?;
            let reply = reply::cut(&value).map_err(|reply| Error::UnexpectedReply { reply })?;
            report.cut |= reply.cut;
            report.next = report.next.max(Duration::from_millis(reply.next_ms));
            report.factor_bp = report.factor_bp.min(reply.factor_bp);
            report.recovers_in = report
                .recovers_in
                .max(Duration::from_millis(reply.recovered_ms));
        }
        shared.metrics.paused();
        shared.metrics.cut(report.cut);
        Ok(report)
    }

    /// The supplier said how much is left: each per-call limit is lowered to the requests
    /// left (times its cost), each per-token limit to the tokens left, never raised (one
    /// `THROTTLE.SYNC` per bucket the count says something about and that could hold more;
    /// a count in one unit leaves the limits of the other alone). Each `THROTTLE.SYNC` is
    /// counted as a [`Limiter`](crate::Limiter)'s is: in
    /// [`PushbackMetrics::syncs`](crate::PushbackMetrics::syncs) if it lowered or paused its
    /// bucket, else in `syncs_unchanged`. Returns whether any bucket changed.
    pub async fn sync(&self, count: SupplierCount) -> Result<bool, Error> {
        let shared = &self.shared;
        let mut changed = false;
        for (key, (quota, cost)) in shared.keys.iter().zip(&shared.limits) {
            let (unit, per_unit) = cost.unit();
            let pick = unit.pick(&count, per_unit);
            let Some((remaining, reset)) = pick.filter(|(left, _)| *left < quota.capacity()) else {
                continue;
            };
            let args = SyncArgs {
                quota: *quota.bucket(),
                remaining: remaining.min(MAX_CAPACITY),
                reset_ms: u64::try_from(reset.as_millis())
                    .unwrap_or(MAX_WAIT_MS)
                    .min(MAX_WAIT_MS),
            };
            let value = self.send(key, Command::Sync, args.words()).await?;
            let reply = reply::sync(&value).map_err(|reply| Error::UnexpectedReply { reply })?;
            shared.metrics.synced(reply.lowered);
            changed |= reply.lowered;
        }
        Ok(changed)
    }

    /// Which of the supplier's counts could lower the buckets, each holding `left` (in key
    /// order, from the take's reply): each limit in its own unit.
    pub(super) fn sync_bounds(&self, left: &[u64]) -> SyncBounds {
        left.iter()
            .zip(&self.shared.limits)
            .fold(SyncBounds::NONE, |bounds, (left, (_, cost))| {
                let (unit, per_unit) = cost.unit();
                bounds.with(unit, *left, per_unit)
            })
    }

    /// Brings a grant to the call's actual tokens: the per-token limits take the extra
    /// (`THROTTLE.DEBIT`) or give back what was not used (`THROTTLE.GIVE`, with the grant's
    /// tickets, by its rule); the per-call limits took a call's cost, which stays right. The
    /// tokens given back are the fewest any per-token limit took back.
    pub async fn settle(&self, grant: Grant, actual: u64) -> Result<Settled, Error> {
        let shared = &self.shared;
        let Receipt::Tickets(tickets) = &grant.receipt else {
            return Ok(Settled::default());
        };
        let per_token = shared
            .keys
            .iter()
            .zip(&shared.limits)
            .zip(tickets)
            .filter(|((_, (_, cost)), _)| *cost == Cost::PerToken);
        let mut settled = Settled::default();
        match actual.cmp(&grant.tokens) {
            Ordering::Equal => {}
            Ordering::Greater => {
                let extra = actual - grant.tokens;
                for ((key, (quota, _)), _) in per_token {
                    let args = DebitArgs {
                        quota: *quota.bucket(),
                        tokens: extra,
                    };
                    let value = self.send(key, Command::Debit, args.words()).await?;
                    reply::debit(&value).map_err(|reply| Error::UnexpectedReply { reply })?;
                    settled.debited = extra;
                }
                shared.metrics.debited(settled.debited);
            }
            Ordering::Less => {
                let unused = grant.tokens - actual;
                let mut fewest: Option<u64> = None;
                for ((key, (quota, _)), ticket) in per_token {
                    let given = if *ticket == 0 {
                        0
                    } else {
                        let args = GiveArgs {
                            quota: *quota.bucket(),
                            tokens: unused,
                            ticket_us: *ticket,
                        };
                        let value = self.send(key, Command::Give, args.words()).await?;
                        reply::integer(&value, Command::Give)
                            .map_err(|reply| Error::UnexpectedReply { reply })?
                    };
                    fewest = Some(fewest.map_or(given, |f| f.min(given)));
                }
                settled.given_back = fewest.unwrap_or(0);
                shared.metrics.gave_back(settled.given_back);
            }
        }
        Ok(settled)
    }

    /// How long the strictest bucket is paused for now, asked by a reserved call after its
    /// sleep, in one round trip per bucket (`None`: the limiter does not check).
    pub(super) fn pause_check(
        &self,
    ) -> Option<impl std::future::Future<Output = Result<(Duration, u32), Error>> + '_> {
        let buckets = u32::try_from(self.shared.keys.len()).unwrap_or(u32::MAX);
        self.shared
            .check_pause
            .then_some(async move { Ok((self.peek().await?.paused_for, buckets)) })
    }
}
