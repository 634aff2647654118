//! One vocabulary for every limiter: what a backlog worker, the HTTP layers and your own code
//! can ask of any of them.

use std::future::Future;
use std::time::Duration;

use crate::{
    BucketState, Cut, CutReport, Demand, Error, Grant, HttpEvent, MetricsSnapshot, Prioritized,
    Priority, Settled, SupplierCount, TryAcquire,
};

/// What every limiter answers, with the same names and types: take tokens (waiting, within a
/// deadline, or not at all), pass on the supplier's pushback, give back, look, count.
///
/// [`Limiter`](crate::Limiter) (one shared bucket), [`MultiLimiter`](crate::MultiLimiter)
/// (several limits at once) and [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter)
/// (leased partitions spent in process) implement it, and have the same calls as inherent
/// methods (but [`Throttle::count`]); so each goes wherever another does: a [`backlog::Worker`](crate::backlog::Worker),
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

    /// The supplier is congested (a 429 or 503): pauses the fleet for the cut's pause and cuts
    /// its rate for a while, once per episode however many replicas saw it (see [`Cut`]).
    fn cut(&self, cut: Cut) -> impl Future<Output = Result<CutReport, Error>> + Send;

    /// The supplier said how much of its quota is left (its response headers, read by
    /// `http::read_supplier_count`): lowers the bucket to hold at most that, never raises it,
    /// and pauses until the supplier's reset when nothing is left. Returns whether anything
    /// changed.
    fn sync(&self, count: SupplierCount) -> impl Future<Output = Result<bool, Error>> + Send;

    /// Brings a grant to the call's actual cost (an LLM call's tokens, a response's bytes),
    /// known only after the call: takes the extra, into debt if need be, or gives back what
    /// was not used by [`Throttle::give_back`]'s rule. One round trip at most.
    fn settle(
        &self,
        grant: Grant,
        actual: u64,
    ) -> impl Future<Output = Result<Settled, Error>> + Send;

    /// Counts what an HTTP layer saw (a 429, a retry, ...) in this limiter's
    /// [`PushbackMetrics`](crate::PushbackMetrics). The HTTP layers call it; so may your own.
    fn count(&self, event: HttpEvent);

    /// The bucket as it stands: tokens left, its pause, its rate.
    fn peek(&self) -> impl Future<Output = Result<BucketState, Error>> + Send;

    /// The counters since the limiter was built.
    fn metrics(&self) -> MetricsSnapshot;

    /// What the limiter does with a call while Redis cannot be reached (the builders'
    /// `on_unreachable`); the HTTP layers follow it for what they do after a response.
    fn on_unreachable(&self) -> crate::Unreachable {
        crate::Unreachable::FailClosed
    }

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

    /// This limiter with every take at `priority` (a bulk load's handle, or the one an HTTP
    /// layer's picker returns for a bulk request).
    fn at_priority(self, priority: Priority) -> Prioritized<Self>
    where
        Self: Sized,
    {
        Prioritized::new(self, priority)
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
