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

mod abort_on_drop;
pub mod backlog;
mod bucket_state;
mod buckets;
mod demand;
#[cfg(doctest)]
mod doc_tests;
mod error;
mod failure;
mod grant;
#[cfg(any(feature = "tower", feature = "reqwest"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "tower", feature = "reqwest"))))]
pub mod http;
mod limiter;
mod metrics;
mod multi;
pub mod partitioned;
mod prioritized;
mod pushback;
mod quota;
pub mod report;
mod throttle;
mod waiting;
mod wire;

pub use bucket_state::BucketState;
pub use demand::{Demand, Priority};
pub use error::Error;
pub use failure::{Unreachable, DEFAULT_MAX_WAIT};
pub use grant::{Grant, TryAcquire};
pub use limiter::{Limiter, LimiterBuilder};
pub use metrics::{
    HttpEvent, InFlightMetrics, LeaseMetrics, MetricsSnapshot, PushbackMetrics, WaitHistogram,
};
pub use multi::{MultiLimiter, MultiLimiterBuilder};
pub use prioritized::Prioritized;
pub use pushback::{Cut, CutReport, Remaining, Settled, SupplierCount, SupplierUnit};
pub use quota::{Quota, QuotaError, Rate};
pub use throttle::Throttle;
pub use waiting::in_flight::{DEFAULT_LEASE, MIN_LEASE};
pub use waiting::policy::Strategy;
pub use wire::backend::Backend;
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
