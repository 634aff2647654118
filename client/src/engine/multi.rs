//! Several limits taken together: one `THROTTLE.MTAKE` round trip per call, from every
//! bucket or from none. Its builder and accessors; what it does is the [`Throttle`](crate::Throttle) trait's,
//! carried out by [`crate::engine::buckets`].

use std::fmt;

use throttle_bucket::MAX_KEYS;

use crate::engine::buckets::{
    option_setters, throttle_through_buckets, Bucket, Buckets, Cost, Options,
};
use crate::{Backend, Error, Quota, QuotaError, SupplierUnit};

/// Several limits at once, all or nothing: suppliers publish more than one (10 per second
/// and 500 per minute; a per-workflow share and the supplier's global quota; requests and
/// tokens). A call is granted only when every bucket can give its cost, waits for the slowest
/// one, and takes from each bucket as of the moment it will be used, so no bucket's tokens
/// are wasted on a call another bucket refuses. One `THROTTLE.MTAKE` round trip per call.
///
/// A limit takes a fixed cost per call ([`MultiLimiterBuilder::limit`]: requests per
/// minute), or the call's tokens ([`MultiLimiterBuilder::per_token`]: an LLM's tokens per
/// minute, whatever `acquire_with(Demand::tokens(n))` asks for).
///
/// In Redis Cluster every key must be in one hash slot: give them one hash tag, like
/// `{supplier}:per-second` and `{supplier}:per-minute` (the server refuses others with
/// `CROSSSLOT`). Through redis-rs's cluster connection a module call costs a `MOVED`
/// redirection on top: redis-rs routes a command it does not know by its first argument, here
/// `numkeys`. The library and the script have no such cost (`FCALL` and `EVALSHA` are routed
/// by their first key).
///
/// ```no_run
/// use std::time::Duration;
/// use redis_throttle::prelude::*;
/// use redis_throttle::{MultiLimiter, Quota, Rate};
///
/// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), redis_throttle::Error> {
/// let limiter = MultiLimiter::builder()
///     .limit("{pix}:second", Quota::new(10, 10u64)?, 1)
///     .limit("{pix}:minute", Quota::new(500, Rate::per(500, Duration::from_secs(60)))?, 1)
///     .build(conn)?;
/// limiter.acquire().await?; // both limits allow one more call now
/// # Ok(())
/// # }
/// ```
///
/// Dropping a call's future while it sleeps after a reservation gives its tokens back to every
/// bucket that nothing was taken from since (`THROTTLE.GIVE` with `THROTTLE.MTAKE ... TICKET`'s
/// tickets, from a task of its own, best effort), as a [`Limiter`](crate::Limiter) does.
pub struct MultiLimiter<C> {
    buckets: Buckets<C>,
    keys: Vec<String>,
}

impl<C: Clone> Clone for MultiLimiter<C> {
    fn clone(&self) -> Self {
        MultiLimiter {
            buckets: self.buckets.clone(),
            keys: self.keys.clone(),
        }
    }
}

impl<C> fmt::Debug for MultiLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLimiter")
            .field("name", &self.buckets.name())
            .field("keys", &self.keys)
            .field("strategy", &self.buckets.options().strategy)
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

/// Configures a [`MultiLimiter`]; from [`MultiLimiter::builder`].
///
/// ```
/// use std::time::Duration;
/// use redis_throttle::{Error, MultiLimiter, Quota, Rate};
///
/// // An LLM API: 500 requests and 90 000 tokens per minute; a call estimates 1 000 tokens.
/// let minute = Duration::from_secs(60);
/// let builder = MultiLimiter::builder()
///     .limit("{llm}:rpm", Quota::new(500, Rate::per(500, minute))?, 1)
///     .per_token("{llm}:tpm", Quota::new(90_000, Rate::per(90_000, minute))?)
///     .cost(1_000);
/// # let _ = builder;
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MultiLimiterBuilder {
    limits: Vec<(String, Quota, Cost)>,
    options: Options,
}

impl MultiLimiterBuilder {
    option_setters!();

    /// One more limit: the bucket at `key` with `quota`, `cost` tokens per call.
    pub fn limit(mut self, key: impl Into<String>, quota: Quota, cost: u64) -> Self {
        self.limits.push((key.into(), quota, Cost::PerCall(cost)));
        self
    }

    /// One more limit that takes the call's tokens: what `acquire_with(Demand::tokens(n))`
    /// asks for, or the [`cost`](MultiLimiterBuilder::cost) for `acquire()`.
    pub fn per_token(mut self, key: impl Into<String>, quota: Quota) -> Self {
        self.limits.push((key.into(), quota, Cost::PerToken));
        self
    }

    /// Builds the limiter over `conn`: 1 to 16 limits on distinct keys, each cost from 1 to
    /// its capacity, a cap on calls in flight and its lease in range, or
    /// [`Error::InvalidQuota`]. Makes no round trip.
    pub fn build<C: 'static>(self, conn: C) -> Result<MultiLimiter<C>, Error> {
        let in_flight = self.options.in_flight()?;
        let problem = |problem: &str| QuotaError::Limits {
            problem: problem.to_owned(),
        };
        if self.limits.is_empty() || self.limits.len() > MAX_KEYS {
            return Err(problem(&format!("{} given", self.limits.len())).into());
        }
        for (i, (key, quota, cost)) in self.limits.iter().enumerate() {
            quota.check_cost(cost.tokens(self.options.cost))?;
            if self
                .limits
                .iter()
                .skip(i + 1)
                .any(|(other, ..)| other == key)
            {
                return Err(problem(&format!("the key {key:?} is given twice")).into());
            }
        }
        let keys: Vec<String> = self.limits.iter().map(|(key, ..)| key.clone()).collect();
        let name = self.options.name.clone().unwrap_or_else(|| keys.join("+"));
        // A per-call limit counts the supplier's requests at its cost, a per-token one tokens.
        let buckets = self
            .limits
            .into_iter()
            .map(|(key, quota, cost)| {
                let (unit, per_unit) = match cost {
                    Cost::PerCall(cost) => (SupplierUnit::Calls, cost),
                    Cost::PerToken => (SupplierUnit::Tokens, 1),
                };
                Bucket {
                    key,
                    quota,
                    cost,
                    unit,
                    per_unit,
                }
            })
            .collect();
        Ok(MultiLimiter {
            buckets: Buckets::new(conn, name, buckets, self.options, in_flight, true),
            keys,
        })
    }
}

impl MultiLimiter<()> {
    /// A builder: add limits with [`MultiLimiterBuilder::limit`] and
    /// [`MultiLimiterBuilder::per_token`], then build over a connection.
    pub fn builder() -> MultiLimiterBuilder {
        MultiLimiterBuilder {
            limits: Vec::new(),
            options: Options::default(),
        }
    }
}

impl<C> MultiLimiter<C> {
    /// The keys, in the order they were given.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The call's tokens for `acquire()`.
    pub fn cost(&self) -> u64 {
        self.buckets.options().cost
    }

    /// What serves the calls ([`Backend::Auto`] until the first call has answered).
    pub fn backend(&self) -> Backend {
        self.buckets.backend()
    }
}

throttle_through_buckets!(MultiLimiter);
