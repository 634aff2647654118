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
/// (several limits at once), [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter)
/// (leased partitions spent in process) and [`Prioritized`] (any of them at a priority)
/// implement it; it is their only home for these calls (the limiters themselves have their
/// constructors and accessors), so bring it in with `use redis_throttle::prelude::*`. Each goes
/// wherever another does: a [`backlog::Worker`](crate::backlog::Worker), the HTTP layers
/// (`http`, features `tower` and `reqwest`), [`Backlog::stats`](crate::backlog::Backlog::stats).
///
/// Four ways to take: [`acquire`](Throttle::acquire) and [`try_acquire`](Throttle::try_acquire)
/// take one call's cost; [`acquire_with`](Throttle::acquire_with) and
/// [`try_acquire_with`](Throttle::try_acquire_with) take what a [`Demand`] says (its tokens, a
/// deadline, a priority).
///
/// ```
/// use redis_throttle::prelude::*;
/// use redis_throttle::Error;
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

    /// Takes the demand's tokens (the limiter's cost unless it says; at most the capacity, 0
    /// takes nothing), waiting as long as it allows: up to its deadline (the limiter's
    /// `max_wait` unless it says), failing at once with [`Error::DeadlineExceeded`], taking
    /// nothing, when the wait would pass it. With [`Strategy::Reserve`](crate::Strategy::Reserve)
    /// the server decides (`MAXWAIT`), so a wait beyond the deadline touches no bucket; the
    /// round trip comes on top of it.
    ///
    /// A [`Priority::Bulk`] call takes only tokens that leave its floor in every bucket by the
    /// time it goes (`FLOOR`): it reserves only tokens that are in the bucket now, so callers
    /// without a floor never find a debt it made; refused, it sleeps the exact time the server
    /// names and asks again. The bulk calls of a limiter and its clones take turns (one
    /// reservation outstanding per limiter), so that they do not wake together to the same
    /// tokens.
    fn acquire_with(&self, demand: Demand) -> impl Future<Output = Result<Grant, Error>> + Send;

    /// Takes the demand's tokens if they are there now; never waits (the demand's deadline
    /// does not apply).
    fn try_acquire_with(
        &self,
        demand: Demand,
    ) -> impl Future<Output = Result<TryAcquire, Error>> + Send;

    /// The supplier pushed back (HTTP 429 or 503 with `Retry-After`): stops the whole fleet
    /// on the limiter's buckets for `retry_after`, not just this caller. After the call each
    /// bucket's next token is there `retry_after` from now (rounded up to whole ms, at least 1
    /// ms), and refill resumes from that one token, with no burst. A pause never shortens a
    /// longer pause or a bucket's debt, so every replica that saw the 429 may call it.
    /// Reservations granted before the pause keep their times, but a reserved call looks
    /// before it is sent (the builders' `pause_check`) and waits out a pause that covers it.
    /// Returns how long until the next token (at least `retry_after`).
    fn pause(&self, retry_after: Duration) -> impl Future<Output = Result<Duration, Error>> + Send;

    /// Gives back the tokens of a grant that were not used (the request failed before it
    /// reached the supplier), to each bucket nothing was taken from after it: later
    /// reservations stay valid. Returns the tokens given back: 0 when a later call took
    /// tokens, fewer than the grant's when a bucket refilled meanwhile (never beyond full).
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

    /// One call's cost (the limiter's), waiting as long as needed, up to the limiter's
    /// `max_wait`. With [`Strategy::Reserve`](crate::Strategy::Reserve) this is one round trip
    /// and one sleep of exactly the time the server asks for.
    fn acquire(&self) -> impl Future<Output = Result<Grant, Error>> + Send {
        self.acquire_with(Demand::call())
    }

    /// One call's cost if it is there now; never waits (one round trip, no reservation).
    fn try_acquire(&self) -> impl Future<Output = Result<TryAcquire, Error>> + Send {
        self.try_acquire_with(Demand::call())
    }
}
