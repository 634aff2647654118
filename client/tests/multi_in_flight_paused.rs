//! A cap on calls in flight for a `MultiLimiter` on paused tokio time, against the in-memory
//! server that runs the module's own arithmetic: the contract scenarios
//! (`throttle_e2e::contract::in_flight_paused`), with the slot taken in the first limit's
//! bucket in the same THROTTLE.MTAKE as every limit's tokens when one is free, else waited for
//! in that bucket's line (`MTAKE ... LINE`), every limit's tokens taken by the look that finds
//! it handed; renewed and released there, and shared with a `Limiter` capped on that key.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis_throttle::{Backend, Error, Grant, Limiter, MultiLimiter, Quota};
use throttle_e2e::contract::in_flight_paused::{settle, Build, Capped, Decided, SlotTable, LEASE};
use throttle_e2e::fake::FakeServer;
use tokio::task::JoinHandle;

const FIRST: &str = "{pix}:second";
const SECOND: &str = "{pix}:minute";

fn build(fake: &FakeServer, cap: u64, lease: Duration) -> Result<MultiLimiter<FakeServer>, Error> {
    build_with_second(fake, Quota::new(1000, 10u64).unwrap(), cap, lease)
}

/// [`build`] with the second limit's quota given.
fn build_with_second(
    fake: &FakeServer,
    second: Quota,
    cap: u64,
    lease: Duration,
) -> Result<MultiLimiter<FakeServer>, Error> {
    MultiLimiter::builder()
        .limit(FIRST, Quota::new(100, 100u64).unwrap(), 1)
        .limit(SECOND, second, 1)
        .backend(Backend::Module)
        .pause_check(false)
        .max_in_flight(cap)
        .slot_lease(lease)
        .build(fake.clone())
}

/// A limiter capped at one call on `fake`, its one slot held by the grant returned, and a
/// second call of its own that has waited 700 ms.
async fn one_held_and_one_waiting(
    fake: &FakeServer,
) -> (
    MultiLimiter<FakeServer>,
    Grant,
    JoinHandle<Result<Grant, Error>>,
) {
    let limiter = build(fake, 1, LEASE).unwrap();
    let held = limiter.acquire().await.unwrap();
    let second = {
        let limiter = limiter.clone();
        tokio::spawn(async move { limiter.acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    (limiter, held, second)
}

/// The table of `key`'s slots on `fake`.
fn table(fake: &FakeServer, key: &'static str, capacity: u64, rate: u64) -> SlotTable {
    SlotTable {
        server: fake.clone(),
        key,
        capacity,
        rate,
    }
}

/// A limiter on a new fake, the table of its slots there (the first key's), and what its code
/// decides.
fn capped() -> Capped<impl Build<MultiLimiter<FakeServer>>> {
    let fake = FakeServer::new();
    let table = table(&fake, FIRST, 100, 100);
    Capped {
        build: move |cap, lease| build(&fake, cap, lease),
        table,
        decided: Decided::in_the_servers_line(1),
    }
}

throttle_e2e::in_flight_paused!(capped);

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

#[tokio::test(start_paused = true)]
async fn the_slot_is_the_first_keys_taken_with_every_limits_tokens() {
    let fake = FakeServer::new();
    let limiter = build(&fake, 2, LEASE).unwrap();
    let grant = limiter.acquire().await.unwrap();
    assert_eq!(
        grant.round_trips, 1,
        "the slot comes with every limit's tokens"
    );
    assert_eq!(table(&fake, FIRST, 100, 100).slots().await, (1, 3_000));
    assert_eq!(
        table(&fake, SECOND, 1000, 10).slots().await,
        (0, 0),
        "none in the second key"
    );
    assert_eq!(remaining(&fake, FIRST, 100, 100).await, 99);
    assert_eq!(remaining(&fake, SECOND, 1000, 10).await, 999);
    // Renewed in the first key, never in the second.
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    settle().await;
    assert_eq!(table(&fake, FIRST, 100, 100).slots().await, (1, 2_500));
    assert_eq!(table(&fake, SECOND, 1000, 10).slots().await, (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_call_that_finds_every_slot_held_takes_no_tokens() {
    let fake = FakeServer::new();
    let (_limiter, _held, second) = one_held_and_one_waiting(&fake).await;
    assert!(!second.is_finished(), "the one slot is held");
    // Refused for the slot: no bucket gave a token (the second refills 10 a second).
    assert_eq!(remaining(&fake, SECOND, 1000, 10).await, 1000);
}

#[tokio::test(start_paused = true)]
async fn a_limiter_capped_on_the_first_key_shares_the_cap() {
    let fake = FakeServer::new();
    let multi = build(&fake, 1, LEASE).unwrap();
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
    assert_eq!(table(&fake, FIRST, 100, 100).slots().await.0, 1);
}

#[tokio::test(start_paused = true)]
async fn a_call_handed_its_slot_takes_every_limits_tokens() {
    let fake = FakeServer::new();
    let (limiter, held, second) = one_held_and_one_waiting(&fake).await;
    let in_flight = limiter.metrics().in_flight;
    assert_eq!(
        (in_flight.joined_line, in_flight.in_line),
        (1, 1),
        "in the first key's line"
    );
    // The second key refilled the first call's token meanwhile (10 a second).
    assert_eq!(
        remaining(&fake, SECOND, 1000, 10).await,
        1000,
        "no token taken in line"
    );
    drop(held);
    let grant = second.await.unwrap().unwrap();
    assert!(grant.slot().is_some());
    assert_eq!(
        remaining(&fake, SECOND, 1000, 10).await,
        999,
        "its token, once handed its slot"
    );
    assert_eq!(table(&fake, FIRST, 100, 100).slots().await.0, 1);
    assert_eq!(limiter.metrics().in_flight.in_line, 0);
}

#[tokio::test(start_paused = true)]
async fn a_call_handed_its_slot_without_the_tokens_in_time_gives_the_slot_back() {
    let fake = FakeServer::new();
    // The second limit holds one token and refills one a second.
    let slow = || Quota::new(1, 1u64).unwrap();
    let limiter = build_with_second(&fake, slow(), 1, LEASE).unwrap();
    let held = limiter.acquire().await.unwrap();
    // Its token comes back at 1 s, within the call's 1.5 s: it waits in line for the slot.
    let second = {
        let limiter = limiter.clone();
        tokio::spawn(async move {
            limiter
                .acquire_with(Demand::call().within(Duration::from_millis(1_500)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(limiter.metrics().in_flight.in_line, 1);
    // Another caller of the second limit reserves that token meanwhile (the next at 2 s).
    let other = Limiter::builder(SECOND, slow())
        .backend(Backend::Module)
        .pause_check(false)
        .build(fake.clone())
        .unwrap();
    let reserved = tokio::spawn(async move { other.acquire().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Handed the slot at 100 ms, the call finds its token past its deadline: the server
    // passes the slot on (nobody else waits), and the cap is free again.
    drop(held);
    let err = second.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::DeadlineExceeded { .. }), "{err}");
    settle().await;
    assert_eq!(table(&fake, FIRST, 100, 100).slots().await, (0, 0));
    let in_flight = limiter.metrics().in_flight;
    assert_eq!((in_flight.in_line, in_flight.held), (0, 0));
    reserved.await.unwrap().unwrap();
}
