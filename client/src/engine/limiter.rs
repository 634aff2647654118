//! The limiter of one bucket (key + quota): its builder and accessors. What it does is the
//! [`Throttle`](crate::Throttle) trait's, carried out by [`crate::engine::buckets`] with one bucket.

use std::fmt;

use crate::engine::buckets::{
    option_setters, throttle_through_buckets, Bucket, Buckets, Cost, Options,
};
use crate::{Backend, Error, Quota, Strategy, SupplierUnit};

/// A shared token bucket in Redis: a key and a [`Quota`], over a redis-rs async connection.
///
/// Every call first takes tokens from the bucket with one `THROTTLE.TAKE` (or its Lua twin,
/// see [`Backend`]); a call that finds none waits (see [`Strategy`]) instead of failing. All limiters on the same key and
/// server share the bucket, whichever process they are in, so a fleet as a whole never goes
/// above the quota.
///
/// `C` is any redis-rs async connection that is cheap to clone: a
/// [`ConnectionManager`](https://docs.rs/redis/1/redis/aio/struct.ConnectionManager.html) (reconnects by itself), a
/// [`MultiplexedConnection`](redis::aio::MultiplexedConnection), or a cluster connection
/// (`redis::cluster_async::ClusterConnection`, with the `cluster` feature). Each call
/// clones it; its timeouts (connection and response) are the limiter's. Cloning the limiter
/// is cheap too, and the clones share their counters.
///
/// # Cancellation
///
/// Dropping a call's future is safe at any point, and never blocks. What the bucket keeps
/// depends on when:
/// - before the reply came back: the server may or may not have taken the tokens;
/// - with [`Strategy::Reserve`], during the sleep after a reservation: the tokens are
///   **given back** (`THROTTLE.GIVE`, sent from a task spawned on the current tokio runtime,
///   best effort) if no other caller reserved after them; with others queued behind, they
///   stay taken and every reservation keeps its time (as with Go's `x/time/rate`
///   `Reservation.Cancel`);
/// - with [`Strategy::Poll`], during a sleep: nothing is held.
///
/// A call that got its tokens and then did not use them (the request failed before it
/// reached the supplier) gives them back with [`Throttle::give_back`](crate::Throttle::give_back).
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use redis_throttle::prelude::*;
/// use redis_throttle::{redis, Limiter, Quota, Rate, Strategy};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379")?;
/// let conn = redis::aio::ConnectionManager::new(client).await?;
///
/// // 10 status queries per second across the fleet, in bursts of at most 10.
/// let quota = Quota::new(10, Rate::per_second(10))?;
/// let limiter = Limiter::new(conn.clone(), "quota:payments:status", quota.clone());
///
/// let grant = limiter.acquire().await?; // waits as long as the bucket needs
/// println!("waited {:?}, {} left", grant.waited, grant.remaining);
///
/// // Do not wait more than 200 ms: fails at once, taking nothing, if that is not enough.
/// match limiter.acquire_with(Demand::call().within(Duration::from_millis(200))).await {
///     Ok(_) => { /* call the supplier */ }
///     Err(redis_throttle::Error::DeadlineExceeded { needed, .. }) => {
///         println!("busy: the tokens would take {needed:?}");
///     }
///     Err(other) => return Err(other.into()),
/// }
///
/// // A bucket of bytes, several tokens per call, polling instead of reserving.
/// let bytes = Limiter::builder("quota:upload-bytes", Quota::new(1 << 30, Rate::per_second(1 << 27))?)
///     .strategy(Strategy::poll())
///     .build(conn)?;
/// bytes.acquire_with(Demand::tokens(64 * 1024)).await?;
/// # Ok(())
/// # }
/// ```
pub struct Limiter<C> {
    buckets: Buckets<C>,
}

impl<C: Clone> Clone for Limiter<C> {
    fn clone(&self) -> Self {
        Limiter {
            buckets: self.buckets.clone(),
        }
    }
}

impl<C> fmt::Debug for Limiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("name", &self.buckets.name())
            .field("key", &self.key())
            .field("quota", self.quota())
            .field("cost", &self.cost())
            .field("strategy", &self.strategy())
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

/// Configures a [`Limiter`]; from [`Limiter::builder`].
///
/// ```
/// use redis_throttle::{Limiter, Quota, QuotaError, Error, Strategy};
///
/// let quota = Quota::new(100, 50u64)?;
/// let builder = Limiter::builder("quota:search", quota)
///     .cost(5)
///     .strategy(Strategy::Reserve)
///     .name("search-api");
/// # let _ = builder;
///
/// // The cost is checked when the limiter is built, before any call.
/// let conn = (); // stands for a redis connection here
/// let err = Limiter::builder("quota:search", Quota::new(2, 1u64)?).cost(3).build(conn);
/// assert!(matches!(err, Err(Error::InvalidQuota(QuotaError::Tokens { tokens: 3, capacity: 2 }))));
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct LimiterBuilder {
    key: String,
    quota: Quota,
    unit: SupplierUnit,
    options: Options,
}

impl LimiterBuilder {
    option_setters!();

    /// Which of the supplier's counts the bucket is in, for [`Throttle::sync`](crate::Throttle::sync) (default
    /// [`SupplierUnit::Calls`]).
    pub fn supplier_unit(mut self, unit: SupplierUnit) -> Self {
        self.unit = unit;
        self
    }

    /// Builds the limiter over `conn`. Fails with [`Error::InvalidQuota`] if a cap on calls in
    /// flight or its lease is out of range, or if the cost is 0 or
    /// above the capacity. Makes no round trip: a missing server or module shows up at the
    /// first call.
    pub fn build<C: 'static>(self, conn: C) -> Result<Limiter<C>, Error> {
        self.quota.check_cost(self.options.cost)?;
        let in_flight = self.options.in_flight()?;
        let name = self
            .options
            .name
            .clone()
            .unwrap_or_else(|| self.key.clone());
        // The bucket takes the call's tokens; a supplier's requests count is `cost` of them.
        let bucket = Bucket {
            key: self.key,
            quota: self.quota,
            cost: Cost::PerToken,
            unit: self.unit,
            per_unit: self.options.cost,
        };
        Ok(Limiter {
            buckets: Buckets::new(conn, name, vec![bucket], self.options, in_flight, false),
        })
    }
}

impl Limiter<()> {
    /// A builder for a limiter on `key` with `quota`, to set the cost per call, the
    /// strategy or the name. The connection comes last, in [`LimiterBuilder::build`].
    pub fn builder(key: impl Into<String>, quota: Quota) -> LimiterBuilder {
        LimiterBuilder {
            key: key.into(),
            quota,
            unit: SupplierUnit::default(),
            options: Options::default(),
        }
    }
}

impl<C: 'static> Limiter<C> {
    /// A limiter on `key` with `quota`, one token per call, the [`Strategy::Reserve`]
    /// strategy. Makes no round trip.
    pub fn new(conn: C, key: impl Into<String>, quota: Quota) -> Limiter<C> {
        Limiter::builder(key, quota)
            .build(conn)
            .expect("a cost of 1 fits every valid quota")
    }
}

impl<C> Limiter<C> {
    /// Its counters, shared with the limiter.
    pub(crate) fn reported(&self) -> std::sync::Arc<dyn crate::report::Reported> {
        self.buckets.reported()
    }

    /// The one bucket (the builder gives it one).
    fn bucket(&self) -> &Bucket {
        match self.buckets.buckets() {
            [bucket, ..] => bucket,
            [] => unreachable!("a Limiter is built with one bucket"),
        }
    }

    /// The bucket's key.
    pub fn key(&self) -> &str {
        &self.bucket().key
    }

    /// The bucket's quota.
    pub fn quota(&self) -> &Quota {
        &self.bucket().quota
    }

    /// Tokens per call for [`Throttle::acquire`](crate::Throttle::acquire) and [`Throttle::try_acquire`](crate::Throttle::try_acquire).
    pub fn cost(&self) -> u64 {
        self.buckets.options().cost
    }

    /// How calls wait.
    pub fn strategy(&self) -> Strategy {
        self.buckets.options().strategy
    }

    /// What serves the calls: [`Backend::Module`], [`Backend::Library`] or
    /// [`Backend::Script`], or [`Backend::Auto`] until the first call has answered.
    pub fn backend(&self) -> Backend {
        self.buckets.backend()
    }

    /// The connection the limiter uses.
    pub fn connection(&self) -> &C {
        self.buckets.connection()
    }
}

throttle_through_buckets!(Limiter);
