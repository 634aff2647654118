//! How a reserved call of these buckets learns of a pause set while it sleeps: heard on the
//! process's subscription where the limiter listens and the subscription can be counted on,
//! otherwise asked, one `THROTTLE.PEEK` per bucket after the sleep.

use redis::aio::ConnectionLike;
use tokio::time::Instant;

use super::slots::Slotted;
use super::Buckets;
use crate::listen::Trust;
use crate::metrics::Event;
use crate::waiting::{Covered, PauseWatch, Resume};
use crate::Error;

/// One call's watch over its buckets' pauses.
pub(super) struct Watch<'a, C> {
    buckets: &'a Buckets<C>,
    /// What the call could count on hearing when its last take was sent.
    trust: Option<Trust>,
}

impl<'a, C> Watch<'a, C> {
    pub(super) fn new(buckets: &'a Buckets<C>) -> Watch<'a, C> {
        Watch {
            buckets,
            trust: None,
        }
    }
}

impl<C> PauseWatch<Slotted> for Watch<'_, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn arm(&mut self) {
        self.trust = self
            .buckets
            .shared
            .ears
            .as_ref()
            .and_then(|ears| ears.trust());
    }

    async fn sleep(&mut self, reply: &Slotted, wake: Instant) -> Option<Covered> {
        let ears = match (&self.buckets.shared.ears, self.trust) {
            (Some(ears), Some(_)) => ears,
            _ => {
                tokio::time::sleep_until(wake).await;
                return None;
            }
        };
        tokio::select! {
            biased;
            (end, moved) = ears.covered(&reply.taken.tickets, wake) => Some(Covered {
                resume: Resume {
                    rest: end.saturating_duration_since(Instant::now()),
                    factor_bp: ears.factor_bp(),
                },
                moved,
            }),
            () = tokio::time::sleep_until(wake) => None,
        }
    }

    async fn check(&mut self) -> Result<Option<(Resume, u32)>, Error> {
        let shared = &self.buckets.shared;
        if !shared.options.check_pause {
            return Ok(None);
        }
        let heard_all = match (&shared.ears, self.trust) {
            (Some(ears), Some(trust)) => ears.kept(trust),
            _ => false,
        };
        if heard_all {
            return Ok(None);
        }
        let buckets = u32::try_from(shared.buckets.len()).unwrap_or(u32::MAX);
        for _ in 0..buckets {
            shared.metrics.event(Event::PauseCheck);
        }
        let state = self.buckets.peek().await?;
        let resume = Resume {
            rest: state.paused_for,
            factor_bp: state.factor_bp,
        };
        Ok(Some((resume, buckets)))
    }
}
