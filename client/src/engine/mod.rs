//! The engine: how a [`Limiter`](crate::Limiter)'s and a [`MultiLimiter`](crate::MultiLimiter)'s
//! calls go. Their builders (`limiter`, `multi`) hand one bucket or several to `buckets`, which
//! sends each call over the wire and runs it through `waiting`'s loop (the wait, the policy that
//! decides it, and the cap on calls in flight), counting in `metrics`' live counters.
//!
//! It may import the vocabulary (`crate::vocabulary`, mostly through the crate root's names),
//! the wire (`crate::wire`) and the fleet report (`crate::report`); nothing of the layers built
//! on it: `partitioned` (which runs `waiting`'s loop, counts in `metrics` and takes its slots
//! with a `Limiter`), `backlog` and `http` (which speak the [`Throttle`](crate::Throttle) trait).

pub(crate) mod buckets;
pub(crate) mod limiter;
pub(crate) mod metrics;
pub(crate) mod multi;
pub(crate) mod waiting;
