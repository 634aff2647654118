// The crate docs are the README (the client guide, which crates.io shows too). Its Rust
// snippets, and those of the workspace's markdown files, run as doc-tests from `doc_tests`,
// with every feature on (`cargo test -p redis-throttle --all-features --doc`).
#![cfg_attr(not(doctest), doc = include_str!("../README.md"))]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]

// The layers, from the ground up: `vocabulary` (the words), `wire` (Redis), `engine` (how a
// `Limiter`'s and a `MultiLimiter`'s calls go); on them `report`, and the public modules
// `partitioned`, `backlog` and `http`. Each module's docs say what it may import.
pub mod backlog;
#[cfg(doctest)]
mod doc_tests;
mod engine;
#[cfg(any(feature = "tower", feature = "reqwest"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "tower", feature = "reqwest"))))]
pub mod http;
pub mod partitioned;
pub mod report;
mod vocabulary;
mod wire;

pub use engine::limiter::{Limiter, LimiterBuilder};
pub use engine::multi::{MultiLimiter, MultiLimiterBuilder};
pub use engine::waiting::in_flight::{DEFAULT_LEASE, MIN_LEASE};
pub use engine::waiting::policy::Strategy;
pub use vocabulary::backend::Backend;
pub use vocabulary::bucket_state::BucketState;
pub use vocabulary::demand::{Demand, Priority};
pub use vocabulary::error::Error;
pub use vocabulary::failure::{Unreachable, DEFAULT_MAX_WAIT};
pub use vocabulary::grant::{Grant, TryAcquire};
pub use vocabulary::metrics::{
    HttpEvent, InFlightMetrics, LeaseMetrics, MetricsSnapshot, PushbackMetrics, WaitHistogram,
};
pub use vocabulary::prioritized::Prioritized;
pub use vocabulary::pushback::{Cut, CutReport, Remaining, Settled, SupplierCount, SupplierUnit};
pub use vocabulary::quota::{Quota, QuotaError, Rate};
pub use vocabulary::throttle::Throttle;
pub use wire::commands::Commands;
pub use wire::connect::{connect, connection_config, Connection, FAIL_FAST};
pub use wire::listen::Announcements;
pub use wire::script;

/// What every use of a limiter needs: `use redis_throttle::prelude::*;` brings in the
/// [`Throttle`] trait (the limiters' calls) and the [`Demand`] a call can carry.
pub mod prelude {
    pub use crate::{Demand, Priority, Throttle};
}

/// The redis-rs crate this client is built on, for its connection types.
pub use redis;
/// The commands' definitions (their arguments, which are the commands, and their replies), for
/// [`Commands`].
pub use throttle_bucket;
