//! A partitioned limiter's cap on calls in flight on paused tokio time: the leases on an
//! in-memory lease server, the slots on the in-memory server that runs the module's own
//! arithmetic. A capped call takes its slot (one round trip) and then its tokens in process,
//! holds the slot while the grant lives, waits for one while every slot is held (woken at the
//! instant one is released in its process), and gives up at its deadline holding nothing.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis_throttle::partitioned::{PartitionedLimiter, PartitionedQuota};
use redis_throttle::{Backend, Error, Quota, QuotaError, TryAcquire};
use throttle_e2e::fake::FakeServer;
use throttle_e2e::fake_leases::FakeLeases;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

/// One partition of 2 tokens at 10/s (a token per 100 ms, the first 100 ms after the lease).
fn quota() -> PartitionedQuota {
    PartitionedQuota::builder("capped", Quota::new(2, 10u64).unwrap())
        .partitions(1)
        .lease(Duration::from_secs(1))
        .build()
        .unwrap()
}

fn limiter(fake: &FakeLeases, cap: u64) -> PartitionedLimiter<FakeLeases> {
    PartitionedLimiter::builder(quota())
        .backend(Backend::Module)
        .max_in_flight(cap)
        .slot_lease(Duration::from_secs(3))
        .build(fake.clone())
        .unwrap()
}

/// `THROTTLE.SLOTS` of the quota's slot bucket as the server sees it: slots held.
async fn held(slots: &FakeServer) -> u64 {
    let mut conn = slots.clone();
    let (held, _): (u64, u64) = redis::cmd("THROTTLE.SLOTS")
        .arg("{capped}:inflight")
        .arg(2)
        .arg(10)
        .query_async(&mut conn)
        .await
        .unwrap();
    held
}

/// Lets the limiter's background tasks (releases) run on paused time.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_capped_call_holds_its_slot_and_the_next_waits_for_it() {
    let slots = FakeServer::new();
    let fake = FakeLeases::with_throttle(slots.clone());
    let limiter = limiter(&fake, 1);
    let start = Instant::now();
    let first = limiter.acquire().await.unwrap();
    assert!(first.slot().is_some(), "a capped grant holds a slot");
    assert_eq!(
        first.round_trips, 1,
        "the slot's take; the tokens are in process"
    );
    assert_eq!(first.at - start, 100 * MS, "the first token of the lease");
    assert_eq!(held(&slots).await, 1);

    let waiting = {
        let limiter = limiter.clone();
        tokio::spawn(async move { limiter.acquire().await })
    };
    tokio::time::sleep(400 * MS).await;
    assert!(!waiting.is_finished(), "the one slot is held");
    // Released at 500 ms: the waiter takes it at once, and the tokens that came meanwhile.
    drop(first);
    let second = waiting.await.unwrap().unwrap();
    assert_eq!(second.at - start, 500 * MS);
    assert!(second.slot().is_some());
    // Not listening: refused at 100 ms, it looked again 2, 4, 8, 16, 32 and then every 50 ms
    // after (11 looks up to 462 ms), and the release woke it at 500 ms.
    assert_eq!(second.round_trips, 13, "refused, 11 looks, then granted");
    let metrics = limiter.metrics();
    assert_eq!(
        (
            metrics.granted,
            metrics.in_flight.waits,
            metrics.in_flight.held
        ),
        (2, 1, 1),
        "{metrics:?}"
    );
    drop(second);
    settle().await;
    assert_eq!(held(&slots).await, 0, "released when the grant went");
    let in_flight = limiter.metrics().in_flight;
    assert_eq!((in_flight.held, in_flight.released), (0, 2));
}

#[tokio::test(start_paused = true)]
async fn a_call_that_finds_no_slot_gives_up_at_its_deadline_holding_nothing() {
    let slots = FakeServer::new();
    let fake = FakeLeases::with_throttle(slots.clone());
    let limiter = limiter(&fake, 1);
    let held_call = limiter.acquire().await.unwrap();
    let start = Instant::now();
    let refused = limiter.acquire_with(Demand::call().within(200 * MS)).await;
    assert!(
        matches!(refused, Err(Error::DeadlineExceeded { .. })),
        "{refused:?}"
    );
    assert_eq!(start.elapsed(), 200 * MS);
    assert_eq!(limiter.metrics().gave_up, 1);
    // No token was taken for it: both are there for the next call.
    drop(held_call);
    settle().await;
    assert_eq!(held(&slots).await, 0);
    let next = limiter.acquire().await.unwrap();
    assert_eq!(
        next.remaining, 1,
        "the partition's two tokens, less this call's"
    );
}

#[tokio::test(start_paused = true)]
async fn try_acquire_needs_a_slot_free_now_and_a_cancelled_wait_holds_none() {
    let slots = FakeServer::new();
    let fake = FakeLeases::with_throttle(slots.clone());
    let limiter = limiter(&fake, 1);
    let held_call = limiter.acquire().await.unwrap();
    tokio::time::sleep(300 * MS).await;
    match limiter.try_acquire().await.unwrap() {
        TryAcquire::Denied { retry_after } => assert_eq!(retry_after, 10 * MS),
        TryAcquire::Granted(grant) => panic!("granted past the cap: {grant:?}"),
    }
    // A waiting call cancelled (its future dropped) holds nothing afterwards.
    let cancelled = tokio::time::timeout(50 * MS, limiter.acquire()).await;
    assert!(cancelled.is_err(), "still waiting for the slot");
    drop(held_call);
    settle().await;
    assert_eq!(held(&slots).await, 0);
    match limiter.try_acquire().await.unwrap() {
        TryAcquire::Granted(grant) => assert!(grant.slot().is_some()),
        TryAcquire::Denied { retry_after } => panic!("denied for {retry_after:?}"),
    }
    settle().await;
    assert_eq!(held(&slots).await, 0, "the try's grant dropped at once");
}

#[tokio::test(start_paused = true)]
async fn a_cap_out_of_range_is_refused_at_build() {
    let fake = FakeLeases::default();
    for (cap, lease) in [(0, Duration::from_secs(3)), (1025, Duration::from_secs(3))] {
        let built = PartitionedLimiter::builder(quota())
            .max_in_flight(cap)
            .slot_lease(lease)
            .build(fake.clone());
        assert!(
            matches!(
                built,
                Err(Error::InvalidQuota(QuotaError::InFlight { cap: c })) if c == cap
            ),
            "{cap}: {built:?}"
        );
    }
    let built = PartitionedLimiter::builder(quota())
        .max_in_flight(4)
        .slot_lease(10 * MS)
        .build(fake);
    assert!(
        matches!(built, Err(Error::InvalidQuota(QuotaError::Lease { .. }))),
        "{built:?}"
    );
}
