//! One quota over a Redis Cluster as leased capacity partitions (the cloud Rate Limiting
//! pattern's partitions, on Redis).
//!
//! One hot key serves one quota from one master, a round trip per call. For a fleet sharing
//! a large quota (thousands of workers, 20 000 request units per second), the quota is split
//! into fixed partitions ([`PartitionedQuota`]: 500/s as 20 partitions of 25/s), whose keys
//! spread over the cluster's slots. Each process holds exclusive, expiring leases on some of
//! them and spends the leased share **in process**, with no round trip per call
//! ([`PartitionedLimiter`]); it leases more when its calls wait and gives back what idles.
//! It is a [`Throttle`](crate::Throttle), so a backlog worker or an HTTP layer takes it where
//! it takes a [`Limiter`](crate::Limiter).
//!
//! # Leases
//!
//! - Acquire: `SET {name:i:t} <owner> NX PX <lease>`; renew: `PEXPIRE` and release: `DEL`,
//!   each in a one-key script that acts only while the key holds our owner token (random,
//!   with the pid). Renewals run every third of the lease.
//! - Each acquire or renew is one pipeline to the key's master: the write, `ROLE`, and `WAIT
//!   <acks> <timeout>` ([`ReplicaAcks`]: by default one replica where the master has any).
//!   A lease is spent only once its write is acknowledged, so a failover to that replica
//!   keeps it.
//!
//! # The bound
//!
//! A lease confirmed by a write **sent** at local instant `t0` is spent only until
//! `t0 + lease x (1 - clock_rate_margin) - fixed_margin`: the server set the expiry at least
//! `lease` after it ran the write, which it did after `t0`. Every grant compares the clock
//! **at that grant** with this instant, so a process that wakes from a freeze (SIGSTOP, a
//! long GC-like pause) after its lease ran out spends nothing from it. A newly leased
//! partition starts **empty** (no burst) from the moment the lease reply came back, which is
//! after the previous holder's lease expired on the server. So within any window `w`, the
//! successive holders of one partition spend at most `burst/P + rate/P x w`, and the fleet at
//! most `burst + rate x w`.
//!
//! What remains: a grant is a decision at an instant ([`Grant::at`](crate::Grant::at)). A caller that
//! was handed its tokens before the lease ran out and is then frozen before it acts still
//! acts when it wakes. So the fleet's calls in a window are within `burst + rate x w` plus,
//! for every process frozen across the window's start, **at most the grants it had handed
//! out and not yet used** (its in-flight calls: at most its concurrency).
//!
//! Residual risks, which the margins cannot close:
//! - `WAIT` counts acknowledgements, it does not choose the replica that is promoted: with
//!   several replicas per master, wait for all of them (`ReplicaAcks::Exactly(n)`);
//! - with `ReplicaAcks::Auto`, a master whose replica is disconnected at that moment reports
//!   none in `ROLE`, and its lease writes are trusted unacknowledged until the replica is back;
//! - a replica promoted by force (`CLUSTER FAILOVER TAKEOVER`, or after its link was down
//!   longer than the validity factor allows) may lack acknowledged writes it never received;
//! - clocks: a local clock slower than the servers' by more than `clock_rate_margin`, or
//!   servers whose clocks differ by more than `fixed_margin` (a lease's expiry is absolute
//!   on the replica that takes over).
//!
//! The write, `ROLE` and `WAIT` go in one pipeline, so the acknowledgement is for the write
//! on the same connection; a retried pipeline is sent whole again.
//!
//! # Demand
//!
//! The reserved partitions ([`PartitionedQuotaBuilder::reserved`]) are leased at start and
//! kept. While a call waits longer than `grow_after`, the process leases half as many again
//! (at least one). A partition unused for `idle_after` while nothing waits is given back.
//! When every free partition is taken, a waiting process leaves a request (`{name}:want`,
//! with how many it holds) and a process holding at least two more gives one up.
//!
//! ```no_run
//! use std::time::Duration;
//! use redis_throttle::prelude::*;
//! use redis_throttle::partitioned::{PartitionedLimiter, PartitionedQuota};
//! use redis_throttle::Quota;
//!
//! # async fn run(conn: redis::aio::MultiplexedConnection) -> Result<(), Box<dyn std::error::Error>> {
//! // 20 000 RU/s for the fleet, bursts of 2 000, in 40 partitions.
//! let quota = PartitionedQuota::builder("quota:db", Quota::new(2_000, 20_000u64)?)
//!     .partitions(40)
//!     .lease(Duration::from_secs(2))
//!     .build()?;
//! let limiter = PartitionedLimiter::builder(quota).build(conn)?;
//! let grant = limiter.acquire_with(Demand::tokens(10)).await?;   // no round trip once a partition is leased
//! println!("partition {:?} after {:?}", grant.partition, grant.waited);
//! limiter.shutdown().await?;                   // gives the leases back
//! # Ok(())
//! # }
//! ```

mod core;
mod keeper;
mod lease;
mod limiter;
mod metrics;
mod plan;
mod quota;
mod share;
mod wire;

pub use core::{LeaseEvent, LeaseEventKind};
pub use lease::ReplicaAcks;
pub use limiter::{PartitionedLimiter, PartitionedLimiterBuilder};
pub use quota::{PartitionedQuota, PartitionedQuotaBuilder, MAX_LEASE, MAX_PARTITIONS, MIN_LEASE};
