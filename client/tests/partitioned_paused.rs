//! The partitioned limiter on paused tokio time, against an in-memory lease server: exact
//! instants, no real sleeps. What the real-server tests can only bound, this pins down:
//! - grants come one token interval apart from an empty start, across renewals, with no gap;
//! - when the server stops answering (a partition, a frozen link), grants stop at the lease's
//!   usable end, `sent + lease x (1 - 1 %) - 10 ms`, and not one grant after it;
//! - a deadline gives up at the deadline and takes nothing.

use redis_throttle::prelude::*;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redis_throttle::partitioned::{PartitionedLimiter, PartitionedQuota};
use redis_throttle::Error;
use redis_throttle::Quota;
use throttle_e2e::fake_leases::FakeLeases;
use tokio::time::Instant;

/// One partition of 2 tokens at 10/s (a token per 100 ms), leases of 1 s.
fn quota() -> PartitionedQuota {
    PartitionedQuota::builder("paused", Quota::new(2, 10u64).unwrap())
        .partitions(1)
        .lease(Duration::from_secs(1))
        .build()
        .unwrap()
}

/// A limiter of [`quota`] on `fake`.
fn limiter(fake: &FakeLeases) -> PartitionedLimiter<FakeLeases> {
    PartitionedLimiter::builder(quota())
        .build(fake.clone())
        .unwrap()
}

const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn grants_come_one_interval_apart_across_renewals() {
    let fake = FakeLeases::default();
    let limiter = limiter(&fake);
    let start = Instant::now();
    for k in 1..=30u32 {
        let grant = limiter.acquire().await.unwrap();
        // Empty at the lease's start, then one token per 100 ms, renewals or not.
        assert_eq!(grant.at - start, 100 * k * MS, "grant {k}");
    }
    let m = limiter.metrics();
    assert_eq!(
        (m.granted, m.leases.acquired, m.leases.lapsed),
        (30, 1, 0),
        "{m:?}"
    );
    assert!(m.leases.renewed >= 8, "{m:?}");
}

#[tokio::test(start_paused = true)]
async fn unanswered_renewals_stop_the_grants_at_the_leases_usable_end() {
    let fake = FakeLeases::default();
    let limiter = limiter(&fake);
    let start = Instant::now();
    let first = limiter.acquire().await.unwrap();
    assert_eq!(first.at - start, 100 * MS);
    // From now on the server answers nothing: the lease, sent at 0, is usable until
    // 1000 ms x 0.99 - 10 ms = 980 ms. Tokens at 200, ..., 900 ms; none at 1000 ms.
    fake.silent.store(true, Ordering::SeqCst);
    let mut grants = vec![first.at - start];
    loop {
        match limiter
            .acquire_with(Demand::call().within(Duration::from_secs(3)))
            .await
        {
            Ok(grant) => grants.push(grant.at - start),
            Err(Error::DeadlineExceeded { .. }) => break,
            Err(other) => panic!("{other}"),
        }
        assert!(grants.len() < 20, "{grants:?}");
    }
    let expected: Vec<Duration> = (1..=9).map(|k| 100 * k * MS).collect();
    assert_eq!(grants, expected);
    let m = limiter.metrics();
    assert_eq!((m.leases.lapsed, m.leases.held), (1, 0), "{m:?}");
}

#[tokio::test(start_paused = true)]
async fn a_deadline_gives_up_on_time_and_takes_nothing() {
    let fake = FakeLeases::default();
    let limiter = limiter(&fake);
    let start = Instant::now();
    let refused = limiter.acquire_with(Demand::call().within(50 * MS)).await;
    assert!(
        matches!(refused, Err(Error::DeadlineExceeded { .. })),
        "{refused:?}"
    );
    assert_eq!(start.elapsed(), 50 * MS);
    // The token due at 100 ms is still there for the next caller.
    let grant = limiter.acquire().await.unwrap();
    assert_eq!(grant.at - start, 100 * MS);
    assert_eq!(limiter.metrics().gave_up, 1);
}
