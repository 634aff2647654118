//! Async client for the redis-throttle Redis module (`THROTTLE.*` commands): a fleet-wide
//! outbound rate limiter that **delays** calls instead of dropping them.
//!
//! A fleet of replicas that calls a third party with a quota (say 10 requests per second
//! per integrator) keeps one token bucket per quota in Redis. Every outbound call first
//! takes a token through a [`Limiter`]; a call that finds none waits exactly as long as the
//! bucket needs, then goes. The fleet as a whole never sends more than the bucket allows,
//! and the wait time ([`Limiter::metrics`]) tells when demand has outgrown the contract.
//!
//! The commands run in the redis-throttle module where the server has it loaded
//! (`--loadmodule /path/to/libredis_throttle_module.so`), and as a Lua script where it cannot
//! load modules (managed Redis): see [`Backend`]. A limiter told to use the module on a server
//! without it fails with [`Error::ModuleNotLoaded`], which says how to load it.
//!
//! ```no_run
//! use redis_throttle::{Limiter, Quota, Rate};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let conn = redis::aio::ConnectionManager::new(redis::Client::open("redis://127.0.0.1:6379")?).await?;
//! let limiter = Limiter::new(conn, "quota:payments", Quota::new(10, Rate::per_second(10))?);
//! limiter.acquire().await?; // waits until the fleet may make one more call
//! // ... call the supplier ...
//! # Ok(())
//! # }
//! ```
//!
//! # Choices
//!
//! - [`Strategy::Reserve`] (the default) reserves with one round trip (`MAXWAIT`) and
//!   sleeps exactly the time the server asks for; [`Strategy::Poll`] retries instead.
//! - [`Limiter::try_acquire`] never waits; [`Limiter::acquire_within`] fails at once,
//!   taking nothing, when the wait would exceed a deadline.
//! - A limiter is generic over redis-rs's async connections: a reconnecting
//!   [`ConnectionManager`](https://docs.rs/redis/1/redis/aio/struct.ConnectionManager.html), a multiplexed connection, or a
//!   cluster connection (feature `cluster`). Timeouts are the connection's.
//! - Quotas are validated when they are built ([`Quota::new`]), by the server's own rules.
//! - [`Limiter::pause`] stops the whole fleet when the supplier answers 429 with
//!   `Retry-After`; [`Limiter::give_back`] returns the tokens of a call that never reached
//!   the supplier, and a waiting call that is dropped gives its reservation back.
//! - [`MultiLimiter`] takes several limits (per second and per minute, requests and bytes) in
//!   one round trip, all or nothing.
//! - [`partitioned`]: one quota over a Redis Cluster as leased partitions, spent in process
//!   with no round trip per call (the Rate Limiting pattern's partitions).
//! - [`backlog`]: a durable queue on Redis Streams, drained by workers at the quota's rate.
//! - `http` (features `tower`, `reqwest`): middleware that acquires per request and obeys a
//!   supplier's 429.
//! - [`Throttle`] is the one vocabulary every limiter answers (acquire, try, deadline,
//!   pause, give back, peek, metrics): [`Limiter`], [`MultiLimiter`] and
//!   [`PartitionedLimiter`](partitioned::PartitionedLimiter) implement it, so each goes
//!   wherever another does (a backlog worker, the HTTP layers).
//! - [`Demand`] and [`Priority`]: a bulk load takes only above a floor it leaves for the
//!   interactive calls.
//!
//! # Features
//!
//! - `connection-manager` (default): redis-rs's `ConnectionManager`.
//! - `cluster`: redis-rs's `cluster_async::ClusterConnection`.
//! - `metrics`: the [`MetricsSnapshot`] counters also go to the
//!   [`metrics`](https://docs.rs/metrics) facade: `throttle_calls_total{limiter, outcome}`,
//!   `throttle_round_trips_total{limiter, backend}` and the histogram
//!   `throttle_wait_seconds{limiter}`.
//! - `tower`, `reqwest`: the HTTP layers in `http`.
//!
//! Each call runs in a `tracing` span named `throttle` (debug level) with the limiter, the
//! key, the tokens, the backend, and at the end the wait, the round trips and the outcome.

#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]

mod backend;
pub mod backlog;
mod bucket_state;
mod demand;
mod error;
mod grant;
#[cfg(any(feature = "tower", feature = "reqwest"))]
pub mod http;
mod limiter;
mod metrics;
mod multi;
pub mod partitioned;
mod policy;
mod quota;
mod reply;
pub mod script;
mod throttle;
mod waiting;

pub use backend::Backend;
pub use bucket_state::BucketState;
pub use demand::{Demand, Priority};
pub use error::Error;
pub use grant::{Grant, TryAcquire};
pub use limiter::{Limiter, LimiterBuilder};
pub use metrics::{LeaseMetrics, MetricsSnapshot, WaitHistogram};
pub use multi::{MultiLimiter, MultiLimiterBuilder};
pub use policy::Strategy;
pub use quota::{Quota, QuotaError, Rate};
pub use throttle::Throttle;

/// The redis-rs crate this client is built on, for its connection types.
pub use redis;
