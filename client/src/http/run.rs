//! One request's run through its limiter, shared by the layers: they send, this takes before
//! each send and passes on what the supplier answered (its count, its pushback), by the
//! decisions of [`RetryPolicy`].

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use ::http::{HeaderMap, Method, StatusCode};

use super::pick::{Pick, SettleFrom};
use super::retry::Step;
use super::settle::{Pending, SETTLING};
use super::{read_supplier_count, LimiterError, ResponseHead, RetryPolicy, SettleHandle};
use crate::vocabulary::grant::SlotHold;
use crate::vocabulary::pushback::SyncBounds;
use crate::{Demand, Grant, HttpEvent, Settled, SupplierCount, Throttle};

/// One request's run through the limiter, shared by the adapters: they send, this does the
/// rest.
pub(super) struct Run<L> {
    limiter: L,
    /// What each send takes.
    demand: Demand,
    settle_from: Option<SettleFrom>,
    /// The last send's grant, until it is settled or handed to the response.
    grant: Option<Grant>,
    /// The final send's slot once its grant was settled from the head, for the response.
    slot: Option<SlotHold>,
    /// The tokens the last send took.
    taken: u64,
    policy: RetryPolicy,
    method: Method,
    attempt: u32,
    /// Which of the supplier's counts could lower the buckets as the last take left them,
    /// each unit against its own buckets: a count at or above them costs no round trip.
    bounds: SyncBounds,
}

impl<L: Throttle + 'static> Run<L> {
    pub(super) fn new(pick: Pick<L>, policy: RetryPolicy, method: Method) -> Self {
        Run {
            limiter: pick.limiter,
            demand: pick.demand,
            settle_from: pick.settle_from,
            grant: None,
            slot: None,
            taken: 0,
            policy,
            method,
            attempt: 1,
            bounds: SyncBounds::UNKNOWN,
        }
    }

    pub(super) fn span(&self) -> tracing::Span {
        tracing::debug_span!("throttle_http", method = %self.method, key = %self.limiter.name())
    }

    /// Whether to keep a copy of the request before this send.
    pub(super) fn may_retry(&self) -> bool {
        self.policy.may_retry(&self.method, self.attempt)
    }

    /// Takes the demand before a send.
    pub(super) async fn acquire(&mut self) -> Result<(), LimiterError> {
        let grant = self
            .limiter
            .acquire_with(self.demand)
            .await
            .map_err(|source| self.error("take a token before sending", source))?;
        self.bounds = grant
            .sync_bounds
            .unwrap_or_else(|| SyncBounds::single(grant.remaining));
        // The previous send's grant, if any, is dropped as it is: that send was counted by
        // the supplier (see the module's "Retries").
        self.taken = grant.tokens;
        self.grant = Some(grant);
        Ok(())
    }

    /// After a response: passes on what the supplier said (its count, its pushback) to the
    /// fleet's bucket. `Ok(true)`: send the copy again.
    pub(super) async fn after(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
        has_copy: bool,
    ) -> Result<bool, LimiterError> {
        // Read whether or not they sync the bucket: they also say whether a 403 is a rate
        // limit and whether the supplier's window is spent.
        let now = SystemTime::now();
        let count = read_supplier_count(headers, now);
        let step = self.policy.after_response(
            status,
            headers,
            &count,
            self.attempt,
            has_copy,
            now,
            fastrand::f64(),
        );
        let Step::Pause { pause, retry, cut } = step else {
            self.settle_from_head(status, headers).await?;
            self.sync(&count).await?;
            return Ok(false);
        };
        self.limiter.count(match status {
            StatusCode::TOO_MANY_REQUESTS => HttpEvent::Response429,
            StatusCode::SERVICE_UNAVAILABLE => HttpEvent::Response503,
            _ => HttpEvent::ResponseOther,
        });
        let paused = match cut {
            Some(cut) => self.limiter.cut(cut).await.map(|report| report.next),
            // A spent window, or a policy that never cuts.
            None => self.limiter.pause(pause).await,
        };
        let next_token = self.tolerate("pause after the supplier's pushback", paused)?;
        if next_token.is_none() && retry {
            // The fleet could not be told: this process at least waits out what the supplier
            // asked for before it sends again.
            tokio::time::sleep(pause).await;
        }
        if !retry {
            self.settle_from_head(status, headers).await?;
        }
        // After the cut, not before: a count of 0 on a 429 would pause the bucket first, and
        // the cut would then find the episode already paused and not cut.
        self.sync(&count).await?;
        tracing::debug!(
            status = status.as_u16(),
            retry_after = ?headers.get(::http::header::RETRY_AFTER),
            ?pause,
            cut = cut.is_some(),
            ?next_token,
            attempt = self.attempt,
            retry,
            "supplier pushed back; bucket paused"
        );
        if retry {
            self.attempt += 1;
            self.limiter.count(HttpEvent::Retry);
            tracing::debug!(attempt = self.attempt, "sending again");
        } else if self.attempt >= self.policy.attempts() {
            self.limiter.count(HttpEvent::AttemptsRanOut);
        } else {
            // Attempts were left: not an exhaustion, a request that is not to be resent.
            self.limiter.count(HttpEvent::NotResent);
        }
        Ok(retry)
    }

    /// Settles the final send's grant to the cost the picker's closure reads from the
    /// response head, before the supplier's count is read: that count already holds the
    /// call's actual cost, so settling after it would count the difference twice.
    async fn settle_from_head(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
    ) -> Result<(), LimiterError> {
        let Some(actual) = self
            .settle_from
            .as_ref()
            .and_then(|actual| actual(&ResponseHead { status, headers }))
        else {
            return Ok(());
        };
        let Some(mut grant) = self.grant.take() else {
            return Ok(());
        };
        // The call in flight is not over before its body is read: its slot goes with the
        // response.
        self.slot = grant.slot.take();
        let settled = self.limiter.settle(grant, actual).await;
        let Some(settled) = self.tolerate(SETTLING, settled)? else {
            return Ok(());
        };
        if settled != Settled::default() {
            // The buckets moved since the take: read the supplier's count against them as
            // they are now.
            self.bounds = SyncBounds::UNKNOWN;
        }
        tracing::debug!(actual, ?settled, "settled from the response head");
        Ok(())
    }

    /// The handle to the final send's grant, for the response's extensions; already settled
    /// if the head said the cost.
    pub(super) fn into_handle(self) -> SettleHandle {
        SettleHandle {
            key: Arc::from(self.limiter.name()),
            tokens: self.taken,
            pending: Arc::new(Pending {
                limiter: self.limiter,
                grant: Mutex::new(self.grant),
                _slot: self.slot,
            }),
        }
    }

    /// Lowers the buckets to the supplier's counts that say less is left than a bucket of
    /// their unit held after this call's take, or nothing with a reset; the other counts are
    /// left out, so they sync nothing. Nothing at all unless the policy syncs with the supplier.
    async fn sync(&mut self, count: &SupplierCount) -> Result<(), LimiterError> {
        if !self.policy.syncs_with_supplier() {
            return Ok(());
        }
        let count = self.bounds.filter(count);
        if count.requests.is_none() && count.tokens.is_none() {
            return Ok(());
        }
        let changed = self.limiter.sync(count).await;
        let Some(changed) = self.tolerate("lower the bucket to the supplier's count", changed)?
        else {
            return Ok(());
        };
        tracing::debug!(?count, changed, "the supplier's count");
        // Once per run: a retry's count is read against the bucket as it is now.
        self.bounds = SyncBounds::UNKNOWN;
        Ok(())
    }

    /// A limiter call after a response: its error fails the request, unless Redis is
    /// unreachable and the limiter fails open ([`Unreachable::FailOpen`](crate::Unreachable)):
    /// then the response goes on as if the call had been made (`Ok(None)`), with a warning.
    fn tolerate<T>(
        &self,
        during: &'static str,
        result: Result<T, crate::Error>,
    ) -> Result<Option<T>, LimiterError> {
        match result {
            Ok(value) => Ok(Some(value)),
            Err(source)
                if source.is_unreachable()
                    && self.limiter.on_unreachable() == crate::Unreachable::FailOpen =>
            {
                tracing::warn!(during, error = %source, "Redis is unreachable; going on (fail open)");
                Ok(None)
            }
            Err(source) => Err(self.error(during, source)),
        }
    }

    fn error(&self, during: &'static str, source: crate::Error) -> LimiterError {
        LimiterError::new(self.limiter.name(), during, source)
    }
}
