//! A limiter handle whose every call runs at one priority: how a backlog's bulk load, or an
//! HTTP layer's per-request picker, puts a workflow below the interactive calls on the same
//! bucket.

use std::future::Future;
use std::time::Duration;

use crate::{
    BucketState, Cut, CutReport, Demand, Error, Grant, HttpEvent, MetricsSnapshot, Priority,
    Settled, SupplierCount, Throttle, TryAcquire,
};

/// A [`Throttle`] whose takes all run at one [`Priority`] (the handle's priority replaces the
/// demand's); from [`Throttle::at_priority`]. Everything else goes to the limiter as it is.
///
/// ```
/// use redis_throttle::{Priority, Throttle};
///
/// /// The bulk load's handle: it takes only while 200 tokens stay for interactive calls.
/// fn bulk<T: Throttle>(limiter: T) -> impl Throttle {
///     limiter.at_priority(Priority::Bulk { floor: 200 })
/// }
/// # let _ = bulk::<redis_throttle::Limiter<redis_throttle::redis::aio::MultiplexedConnection>>;
/// ```
#[derive(Clone, Debug)]
pub struct Prioritized<T> {
    inner: T,
    priority: Priority,
}

impl<T> Prioritized<T> {
    /// `inner`, every take at `priority`.
    pub fn new(inner: T, priority: Priority) -> Prioritized<T> {
        Prioritized { inner, priority }
    }

    /// The limiter underneath.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The priority its takes run at.
    pub fn priority(&self) -> Priority {
        self.priority
    }
}

impl<T: Throttle> Throttle for Prioritized<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn acquire_with(&self, demand: Demand) -> impl Future<Output = Result<Grant, Error>> + Send {
        self.inner.acquire_with(demand.priority(self.priority))
    }

    fn try_acquire_with(
        &self,
        demand: Demand,
    ) -> impl Future<Output = Result<TryAcquire, Error>> + Send {
        self.inner.try_acquire_with(demand.priority(self.priority))
    }

    fn pause(&self, retry_after: Duration) -> impl Future<Output = Result<Duration, Error>> + Send {
        self.inner.pause(retry_after)
    }

    fn cut(&self, cut: Cut) -> impl Future<Output = Result<CutReport, Error>> + Send {
        self.inner.cut(cut)
    }

    fn sync(&self, count: SupplierCount) -> impl Future<Output = Result<bool, Error>> + Send {
        self.inner.sync(count)
    }

    fn give_back(&self, grant: Grant) -> impl Future<Output = Result<u64, Error>> + Send {
        self.inner.give_back(grant)
    }

    fn settle(
        &self,
        grant: Grant,
        actual: u64,
    ) -> impl Future<Output = Result<Settled, Error>> + Send {
        self.inner.settle(grant, actual)
    }

    fn count(&self, event: HttpEvent) {
        self.inner.count(event);
    }

    fn peek(&self) -> impl Future<Output = Result<BucketState, Error>> + Send {
        self.inner.peek()
    }

    fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics()
    }

    fn on_unreachable(&self) -> crate::Unreachable {
        self.inner.on_unreachable()
    }

    fn time_to_serve(
        &self,
        calls: u64,
        tokens: u64,
    ) -> impl Future<Output = Result<Duration, Error>> + Send {
        self.inner.time_to_serve(calls, tokens)
    }
}
