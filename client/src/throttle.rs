//! One vocabulary for every limiter: what a backlog worker, the HTTP layers and your own code
//! can ask of any of them.

use std::future::Future;
use std::time::Duration;

use crate::{BucketState, Demand, Error, Grant, MetricsSnapshot, TryAcquire};

/// What every limiter answers, with the same names and types: take tokens (waiting, within a
/// deadline, or not at all), pass on the supplier's pushback, give back, look, count.
///
/// [`Limiter`](crate::Limiter) (one shared bucket), [`MultiLimiter`](crate::MultiLimiter)
/// (several limits at once) and [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter)
/// (leased partitions spent in process) implement it, and have the same calls as inherent
/// methods; so each goes wherever another does: a [`backlog::Worker`](crate::backlog::Worker),
/// the HTTP layers (`http`, features `tower` and `reqwest`), [`Backlog::stats`](crate::backlog::Backlog::stats).
///
/// ```
/// use redis_throttle::{Error, Throttle};
///
/// /// Sends one request through any limiter.
/// async fn send_one<T: Throttle>(limiter: &T) -> Result<(), Error> {
///     let grant = limiter.acquire().await?;
///     println!("{}: waited {:?}", limiter.name(), grant.waited);
///     Ok(())
/// }
/// # let _ = send_one::<redis_throttle::Limiter<redis::aio::MultiplexedConnection>>;
/// # let _ = send_one::<redis_throttle::MultiLimiter<redis::aio::MultiplexedConnection>>;
/// # let _ = send_one::<redis_throttle::partitioned::PartitionedLimiter<redis::aio::MultiplexedConnection>>;
/// ```
pub trait Throttle: Send + Sync {
    /// A name for logs, metrics and errors (a limiter's key unless named).
    fn name(&self) -> &str;

    /// Takes the demand's tokens, waiting as long as it allows: as long as needed, or failing
    /// at once with [`Error::DeadlineExceeded`], taking nothing, when the wait would pass its
    /// deadline.
    fn acquire_with(&self, demand: Demand) -> impl Future<Output = Result<Grant, Error>> + Send;

    /// Takes the demand's tokens if they are there now; never waits (the demand's deadline
    /// does not apply).
    fn try_acquire_with(
        &self,
        demand: Demand,
    ) -> impl Future<Output = Result<TryAcquire, Error>> + Send;

    /// The supplier pushed back (HTTP 429 or 503 with `Retry-After`): stops the whole fleet
    /// for `retry_after`, not just this caller. Returns how long until the next token.
    fn pause(&self, retry_after: Duration) -> impl Future<Output = Result<Duration, Error>> + Send;

    /// Gives back the tokens of a grant that were not used (the request failed before it
    /// reached the supplier), if no later call took tokens after it. Returns the tokens given
    /// back (0 to the grant's).
    fn give_back(&self, grant: Grant) -> impl Future<Output = Result<u64, Error>> + Send;

    /// The bucket as it stands: tokens left, its pause, its rate.
    fn peek(&self) -> impl Future<Output = Result<BucketState, Error>> + Send;

    /// The counters since the limiter was built.
    fn metrics(&self) -> MetricsSnapshot;

    /// How long `calls` calls taking `tokens` tokens in all take from now, as the bucket
    /// stands (its debt, its pause, its rate now): what a backlog's drain time is. By
    /// default the bucket's [`BucketState::time_to_take`] of the tokens; a limiter with
    /// several limits counts each in its own unit.
    fn time_to_serve(
        &self,
        calls: u64,
        tokens: u64,
    ) -> impl Future<Output = Result<Duration, Error>> + Send {
        let _ = calls;
        async move { Ok(self.peek().await?.time_to_take(tokens)) }
    }

    /// One call's cost, waiting as long as needed.
    fn acquire(&self) -> impl Future<Output = Result<Grant, Error>> + Send {
        self.acquire_with(Demand::call())
    }

    /// `tokens` tokens, waiting as long as needed.
    fn acquire_n(&self, tokens: u64) -> impl Future<Output = Result<Grant, Error>> + Send {
        self.acquire_with(Demand::tokens(tokens))
    }

    /// One call's cost, or [`Error::DeadlineExceeded`] at once, taking nothing.
    fn acquire_within(
        &self,
        deadline: Duration,
    ) -> impl Future<Output = Result<Grant, Error>> + Send {
        self.acquire_with(Demand::call().within(deadline))
    }

    /// `tokens` tokens, or [`Error::DeadlineExceeded`] at once, taking nothing.
    fn acquire_n_within(
        &self,
        tokens: u64,
        deadline: Duration,
    ) -> impl Future<Output = Result<Grant, Error>> + Send {
        self.acquire_with(Demand::tokens(tokens).within(deadline))
    }

    /// One call's cost if it is there now.
    fn try_acquire(&self) -> impl Future<Output = Result<TryAcquire, Error>> + Send {
        self.try_acquire_with(Demand::call())
    }

    /// `tokens` tokens if they are there now.
    fn try_acquire_n(&self, tokens: u64) -> impl Future<Output = Result<TryAcquire, Error>> + Send {
        self.try_acquire_with(Demand::tokens(tokens))
    }
}
