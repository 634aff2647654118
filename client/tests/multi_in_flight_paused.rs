//! A cap on calls in flight for a `MultiLimiter` on paused tokio time, against the in-memory
//! server that runs the module's own arithmetic: the slot taken in the first limit's bucket in
//! the same THROTTLE.MTAKE as every limit's tokens, renewed and released there, and shared
//! with a `Limiter` capped on that key.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis_throttle::{Backend, Error, Limiter, MultiLimiter, Quota, QuotaError};
use throttle_e2e::fake::FakeServer;
use tokio::time::Instant;

const FIRST: &str = "{pix}:second";
const SECOND: &str = "{pix}:minute";
const LEASE: Duration = Duration::from_secs(3);

fn multi(fake: &FakeServer, cap: u64) -> MultiLimiter<FakeServer> {
    MultiLimiter::builder()
        .limit(FIRST, Quota::new(100, 100u64).unwrap(), 1)
        .limit(SECOND, Quota::new(1000, 10u64).unwrap(), 1)
        .backend(Backend::Module)
        .pause_check(false)
        .max_in_flight(cap)
        .slot_lease(LEASE)
        .build(fake.clone())
        .unwrap()
}

/// `THROTTLE.SLOTS` on `key` as the server sees it: slots held, ms until the first lease ends.
async fn slots(fake: &FakeServer, key: &str, capacity: u64, rate: u64) -> (u64, u64) {
    let mut conn = fake.clone();
    redis::cmd("THROTTLE.SLOTS")
        .arg(key)
        .arg(capacity)
        .arg(rate)
        .query_async::<(u64, u64)>(&mut conn)
        .await
        .unwrap()
}

/// `THROTTLE.PEEK`'s remaining tokens in `key`.
async fn remaining(fake: &FakeServer, key: &str, capacity: u64, rate: u64) -> u64 {
    let mut conn = fake.clone();
    let reply: Vec<u64> = redis::cmd("THROTTLE.PEEK")
        .arg(key)
        .arg(capacity)
        .arg(rate)
        .query_async(&mut conn)
        .await
        .unwrap();
    reply[1]
}

/// Lets the limiter's background tasks (renewals, releases) run on paused time.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_slot_is_the_first_keys_held_renewed_and_released_there() {
    let fake = FakeServer::new();
    let limiter = multi(&fake, 2);
    let grant = limiter.acquire().await.unwrap();
    assert!(grant.slot().is_some(), "a capped grant holds a slot");
    assert_eq!(
        grant.round_trips, 1,
        "the slot comes with every limit's tokens"
    );
    assert_eq!(slots(&fake, FIRST, 100, 100).await, (1, 3_000));
    assert_eq!(
        slots(&fake, SECOND, 1000, 10).await,
        (0, 0),
        "none in the second key"
    );
    assert_eq!(remaining(&fake, FIRST, 100, 100).await, 99);
    assert_eq!(remaining(&fake, SECOND, 1000, 10).await, 999);
    assert_eq!(limiter.metrics().in_flight.held, 1);

    // Five seconds in flight: renewed every second (a third of the lease), in the first key.
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    settle().await;
    assert_eq!(slots(&fake, FIRST, 100, 100).await, (1, 2_500));
    assert_eq!(limiter.metrics().round_trips, 6, "1 take and 5 renewals");

    drop(grant);
    settle().await;
    assert_eq!(
        slots(&fake, FIRST, 100, 100).await,
        (0, 0),
        "released when the grant goes"
    );
    let metrics = limiter.metrics();
    assert_eq!(metrics.round_trips, 7, "one RELEASE");
    assert_eq!(metrics.in_flight.held, 0);
    assert_eq!(metrics.in_flight.leases_lost, 0);
}

#[tokio::test(start_paused = true)]
async fn a_call_that_finds_every_slot_held_takes_no_tokens_and_goes_when_one_is_released() {
    let fake = FakeServer::new();
    let limiter = multi(&fake, 1);
    let first = limiter.acquire().await.unwrap();
    let start = Instant::now();
    let second = {
        let limiter = limiter.clone();
        tokio::spawn(async move { (limiter.acquire().await, Instant::now()) })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!second.is_finished(), "the one slot is held");
    // Refused for the slot: no bucket gave a token (the second refills 10 a second).
    assert_eq!(remaining(&fake, SECOND, 1000, 10).await, 1000);
    drop(first);
    let (granted, at) = second.await.unwrap();
    let granted = granted.unwrap();
    assert_eq!(
        at - start,
        Duration::from_millis(700),
        "woken by the release, not by a look"
    );
    assert!(granted.slot().is_some());
    assert_eq!(limiter.metrics().in_flight.waits, 1);
    assert_eq!(slots(&fake, FIRST, 100, 100).await.0, 1);
}

#[tokio::test(start_paused = true)]
async fn a_limiter_capped_on_the_first_key_shares_the_cap() {
    let fake = FakeServer::new();
    let multi = multi(&fake, 1);
    let single = Limiter::builder(FIRST, Quota::new(100, 100u64).unwrap())
        .backend(Backend::Module)
        .pause_check(false)
        .max_in_flight(1)
        .slot_lease(LEASE)
        .build(fake.clone())
        .unwrap();
    let held = single.acquire().await.unwrap();
    let err = multi
        .acquire_with(Demand::call().within(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::DeadlineExceeded { .. }), "{err}");
    drop(held);
    settle().await;
    let grant = multi.acquire().await.unwrap();
    assert!(grant.slot().is_some());
    assert_eq!(slots(&fake, FIRST, 100, 100).await.0, 1);
}

#[test]
fn caps_and_leases_out_of_range_are_refused_at_build() {
    let build = |cap: u64, lease: Duration| {
        MultiLimiter::builder()
            .limit(FIRST, Quota::new(100, 100u64).unwrap(), 1)
            .limit(SECOND, Quota::new(1000, 10u64).unwrap(), 1)
            .max_in_flight(cap)
            .slot_lease(lease)
            .build(FakeServer::new())
            .err()
    };
    assert!(build(1, LEASE).is_none());
    assert!(build(1024, LEASE).is_none());
    assert!(matches!(
        build(0, LEASE),
        Some(Error::InvalidQuota(QuotaError::InFlight { cap: 0 }))
    ));
    assert!(matches!(
        build(1025, LEASE),
        Some(Error::InvalidQuota(QuotaError::InFlight { cap: 1025 }))
    ));
    let short = Duration::from_millis(100);
    assert!(matches!(
        build(4, short),
        Some(Error::InvalidQuota(QuotaError::Lease { lease })) if lease == short
    ));
}
