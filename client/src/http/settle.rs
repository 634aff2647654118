//! Settling the final send's grant to the call's actual cost, after the response: the
//! handle the layers put in the response's extensions.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use super::LimiterError;
use crate::vocabulary::grant::SlotHold;
use crate::{Grant, Settled, Throttle};

/// The final send's grant, in the response's extensions (tower: `http::Response::extensions`;
/// reqwest: `reqwest::Response::extensions`), for a cost only the body says (an LLM's
/// `usage.total_tokens`): read the body, then `handle.settle(actual).await`.
///
/// Settles at most once: a second call (or a call after [`Pick::settle_from`](super::Pick::settle_from) settled) does
/// nothing and returns `Ok(None)`. Never settled, the grant's tokens (the estimate) stand.
/// Clones settle the same grant.
#[derive(Clone)]
pub struct SettleHandle {
    pub(super) pending: Arc<dyn PendingGrant>,
    pub(super) tokens: u64,
    pub(super) key: Arc<str>,
}

impl SettleHandle {
    /// Brings the final send's grant to `actual` with [`Throttle::settle`]: the extra is
    /// debited (into debt if need be), the unused part given back under `THROTTLE.GIVE`'s
    /// rule (only while nothing was taken after it). `Ok(None)`: already settled, nothing
    /// done. An error leaves the grant settled as far as it went; it is not retried.
    pub async fn settle(&self, actual: u64) -> Result<Option<Settled>, LimiterError> {
        let settled = self.pending.settle(actual).await;
        if let Ok(None) = settled {
            tracing::debug!(key = %self.key, actual, "already settled; nothing done");
        }
        settled
    }

    /// The tokens the final send took (its estimate).
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Whether the grant is settled (or being settled).
    pub fn is_settled(&self) -> bool {
        self.pending.is_settled()
    }
}

impl fmt::Debug for SettleHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SettleHandle")
            .field("key", &self.key)
            .field("tokens", &self.tokens)
            .field("settled", &self.is_settled())
            .finish()
    }
}

type SettleFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Settled>, LimiterError>> + Send + 'a>>;

/// A grant waiting to be settled, whatever its limiter's type.
pub(super) trait PendingGrant: Send + Sync {
    fn settle(&self, actual: u64) -> SettleFuture<'_>;
    fn is_settled(&self) -> bool;
}

pub(super) struct Pending<L> {
    pub(super) limiter: L,
    pub(super) grant: Mutex<Option<Grant>>,
    /// The call's slot under a cap on calls in flight, once its grant was settled from the
    /// head: held until the response (its body included) is dropped.
    pub(super) _slot: Option<SlotHold>,
}

impl<L: Throttle> PendingGrant for Pending<L> {
    fn settle(&self, actual: u64) -> SettleFuture<'_> {
        // Taken under the lock, settled after it: a clone settling at the same time finds
        // nothing.
        let grant = self.grant.lock().unwrap_or_else(|e| e.into_inner()).take();
        Box::pin(async move {
            let Some(grant) = grant else {
                return Ok(None);
            };
            self.limiter
                .settle(grant, actual)
                .await
                .map(Some)
                .map_err(|source| LimiterError::new(self.limiter.name(), SETTLING, source))
        })
    }

    fn is_settled(&self) -> bool {
        self.grant
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }
}

pub(super) const SETTLING: &str = "settle the grant to the response's cost";
