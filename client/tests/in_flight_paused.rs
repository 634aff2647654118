//! A cap on calls in flight on paused tokio time, against the in-memory server that runs the
//! module's own arithmetic: the slot taken with the tokens, held while the grant lives,
//! renewed every third of its lease, released when the grant goes, and a call that finds
//! every slot held woken at the instant one is released in its process.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis_throttle::{Backend, Error, Limiter, Quota, QuotaError, TryAcquire};
use throttle_e2e::fake::FakeServer;
use tokio::time::Instant;

const KEY: &str = "bucket";
const LEASE: Duration = Duration::from_secs(3);

fn limiter(fake: &FakeServer, cap: u64) -> Limiter<FakeServer> {
    Limiter::builder(KEY, Quota::new(100, 100u64).unwrap())
        .backend(Backend::Module)
        .pause_check(false)
        .max_in_flight(cap)
        .slot_lease(LEASE)
        .build(fake.clone())
        .unwrap()
}

/// `THROTTLE.SLOTS` as the server sees it: slots held, ms until the first lease ends.
async fn slots(fake: &FakeServer) -> (u64, u64) {
    let mut conn = fake.clone();
    redis::cmd("THROTTLE.SLOTS")
        .arg(KEY)
        .arg(100)
        .arg(100)
        .query_async::<(u64, u64)>(&mut conn)
        .await
        .unwrap()
}

/// Lets the limiter's background tasks (renewals, releases) run on paused time.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_grant_holds_its_slot_until_dropped_and_renews_it_meanwhile() {
    let fake = FakeServer::new();
    let limiter = limiter(&fake, 2);
    let grant = limiter.acquire().await.unwrap();
    assert!(grant.slot().is_some(), "a capped grant holds a slot");
    assert_eq!(grant.round_trips, 1, "the slot comes with the token");
    assert_eq!(slots(&fake).await, (1, 3_000));
    assert_eq!(limiter.metrics().in_flight.held, 1);

    // Ten seconds in flight: renewed every second (a third of the lease), so it never ends.
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    settle().await;
    assert_eq!(
        slots(&fake).await,
        (1, 2_500),
        "still held after three leases, renewed at 10 s"
    );
    // 1 take and a renewal at 1, 2, ... 10 s.
    assert_eq!(limiter.metrics().round_trips, 11);

    drop(grant);
    settle().await;
    assert_eq!(slots(&fake).await, (0, 0), "released when the grant goes");
    let metrics = limiter.metrics();
    assert_eq!(metrics.round_trips, 12, "one RELEASE");
    assert_eq!(metrics.in_flight.held, 0);
    assert_eq!(metrics.in_flight.leases_lost, 0);
    assert_eq!(metrics.in_flight.released, 1, "its RELEASE answered");
}

#[tokio::test(start_paused = true)]
async fn a_call_that_finds_every_slot_held_goes_the_instant_one_is_released_here() {
    let fake = FakeServer::new();
    let limiter = limiter(&fake, 2);
    let first = limiter.acquire().await.unwrap();
    let second = limiter.acquire().await.unwrap();
    let start = Instant::now();
    let third = {
        let limiter = limiter.clone();
        tokio::spawn(async move { (limiter.acquire().await, Instant::now()) })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!third.is_finished(), "both slots are held");
    drop(first);
    let (granted, at) = third.await.unwrap();
    let granted = granted.unwrap();
    assert_eq!(
        at - start,
        Duration::from_millis(700),
        "woken by the release, not by a look"
    );
    assert_ne!(granted.slot(), second.slot());
    assert_eq!(limiter.metrics().in_flight.waits, 1);
    assert_eq!(slots(&fake).await.0, 2);
}

#[tokio::test(start_paused = true)]
async fn a_slot_released_elsewhere_is_found_by_looking_again() {
    let fake = FakeServer::new();
    let here = limiter(&fake, 1);
    let elsewhere = limiter(&fake, 1);
    let held = elsewhere.acquire().await.unwrap();
    let start = Instant::now();
    let waiting = tokio::spawn(async move { (here.acquire().await, Instant::now(), here) });
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    drop(held);
    let (granted, at, here) = waiting.await.unwrap();
    let granted = granted.unwrap();
    assert!(granted.slot().is_some());
    // Refused at 0 (the line free: no second look at once), then looks at 2, 6, 14, 30, 62
    // ms, and every 50 ms from there: 112, ..., 962, 1012 ms.
    assert_eq!(at - start, Duration::from_millis(1_012));
    let trips = here.metrics().round_trips;
    assert_eq!(trips, 1 + 5 + 19, "{trips} round trips");
    assert_eq!(here.metrics().in_flight.waits, 1);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_call_gives_up_at_its_deadline_and_a_cancelled_one_holds_nothing() {
    let fake = FakeServer::new();
    let limiter = limiter(&fake, 1);
    let held = limiter.acquire().await.unwrap();
    let start = Instant::now();
    let err = limiter
        .acquire_with(Demand::call().within(Duration::from_millis(400)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::DeadlineExceeded { .. }),
        "gave up: {err}"
    );
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(399) && waited <= Duration::from_millis(401),
        "at its deadline: {waited:?}"
    );

    // Cancelled while waiting in line: nothing taken, nothing left behind.
    let cancelled = {
        let limiter = limiter.clone();
        tokio::spawn(async move { limiter.acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    drop(held);
    settle().await;
    assert_eq!(slots(&fake).await, (0, 0));
    let TryAcquire::Granted(grant) = limiter.try_acquire().await.unwrap() else {
        panic!("the slot is free again");
    };
    assert!(grant.slot().is_some(), "try_acquire takes a slot too");
    let TryAcquire::Denied { .. } = limiter.try_acquire().await.unwrap() else {
        panic!("and holds it");
    };
}

#[test]
fn caps_and_leases_out_of_range_are_refused_at_build() {
    let build = |cap: u64, lease: Duration| {
        Limiter::builder(KEY, Quota::new(100, 100u64).unwrap())
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
    let err = build(4, short).unwrap();
    assert!(matches!(
        err,
        Error::InvalidQuota(QuotaError::Lease { lease }) if lease == short
    ));
    assert!(err.to_string().contains("from 300 ms"), "{err}");
}
