//! What the backlog workers and the HTTP layers need from a limiter, whichever kind it is:
//! take tokens (waiting as long as it takes) and pass on the supplier's pushback.

use std::future::Future;
use std::time::Duration;

use redis::aio::ConnectionLike;

use crate::partitioned::PartitionedLimiter;
use crate::{Error, Limiter};

/// Takes tokens before a call, and obeys the supplier's pushback: what a
/// [`backlog::Worker`](crate::backlog::Worker) and the HTTP layers (`http`, features `tower`
/// and `reqwest`) need from a limiter.
///
/// [`Limiter`] (one shared bucket, a round trip per call) and [`PartitionedLimiter`] (leased
/// partitions, spent in process) both implement it; so can a limiter of your own.
pub trait Acquire: Send + Sync {
    /// What one call costs (a [`Limiter`]'s [`cost`](crate::LimiterBuilder::cost); one token
    /// of a [`PartitionedLimiter`]), waiting as long as needed; returns how long it waited.
    fn acquire_call(&self) -> impl Future<Output = Result<Duration, Error>> + Send;

    /// Takes `tokens`, waiting as long as needed; returns how long the call waited.
    fn acquire_tokens(&self, tokens: u64) -> impl Future<Output = Result<Duration, Error>> + Send;

    /// The supplier answered 429 with `Retry-After`: stop taking for `retry_after` (for the
    /// whole fleet: see each limiter's `pause`). Returns how long until the next token.
    fn push_back(
        &self,
        retry_after: Duration,
    ) -> impl Future<Output = Result<Duration, Error>> + Send;

    /// A name for logs and errors (a limiter's key, a partitioned quota's name).
    fn label(&self) -> &str;
}

impl<C> Acquire for Limiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn acquire_call(&self) -> Result<Duration, Error> {
        self.acquire().await.map(|grant| grant.waited)
    }

    async fn acquire_tokens(&self, tokens: u64) -> Result<Duration, Error> {
        self.acquire_n(tokens).await.map(|grant| grant.waited)
    }

    fn push_back(
        &self,
        retry_after: Duration,
    ) -> impl Future<Output = Result<Duration, Error>> + Send {
        self.pause(retry_after)
    }

    fn label(&self) -> &str {
        self.key()
    }
}

/// Its [`PartitionError`](crate::partitioned::PartitionError)s become the crate's [`Error`]
/// by their `From` conversion.
impl<C> Acquire for PartitionedLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn acquire_call(&self) -> impl Future<Output = Result<Duration, Error>> + Send {
        self.acquire_tokens(1)
    }

    async fn acquire_tokens(&self, tokens: u64) -> Result<Duration, Error> {
        self.acquire_n(tokens)
            .await
            .map(|grant| grant.waited)
            .map_err(Error::from)
    }

    async fn push_back(&self, retry_after: Duration) -> Result<Duration, Error> {
        self.pause(retry_after).await.map_err(Error::from)
    }

    fn label(&self) -> &str {
        self.quota().name()
    }
}
