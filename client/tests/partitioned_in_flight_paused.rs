//! A partitioned limiter's cap on calls in flight on paused tokio time: the leases on an
//! in-memory lease server, the slots on the in-memory server that runs the module's own
//! arithmetic. The contract scenarios (`throttle_e2e::contract::in_flight_paused`), with a
//! capped call taking its slot (one round trip) and then its tokens in process, in the
//! quota's own slot bucket `{name}:inflight`.

use std::time::Duration;

use redis_throttle::partitioned::{PartitionedLimiter, PartitionedQuota};
use redis_throttle::prelude::*;
use redis_throttle::{Backend, Error, Quota};
use throttle_e2e::contract::in_flight_paused::{settle, Build, Capped, Decided, SlotTable, LEASE};
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

fn build(
    fake: &FakeLeases,
    cap: u64,
    lease: Duration,
) -> Result<PartitionedLimiter<FakeLeases>, Error> {
    PartitionedLimiter::builder(quota())
        .backend(Backend::Module)
        .max_in_flight(cap)
        .slot_lease(lease)
        .build(fake.clone())
}

/// A limiter on new fakes (leases, and slots), the table of its slots there (the quota's
/// slot bucket), and what its code decides.
fn capped() -> Capped<impl Build<PartitionedLimiter<FakeLeases>>> {
    let slots = FakeServer::new();
    let fake = FakeLeases::with_throttle(slots.clone());
    let table = SlotTable {
        server: slots,
        key: "{capped}:inflight",
        capacity: 2,
        rate: 10,
    };
    let decided = Decided {
        // The slot's take; the tokens are in process.
        take_trips: 1,
        // The slot's take and its renewals at 1, 2, ... 10 s; and the partition keeper's 9
        // round trips in the 10.5 s (its lease taken and renewed, the fleet's signals read).
        held_trips: 1 + 10 + 9,
        cap: 1,
        // Its slot's wait in the server's line (`Decided::in_the_servers_line`).
        waiter_trips: Decided::in_the_servers_line(1).waiter_trips,
        found_elsewhere: Decided::in_the_servers_line(1).found_elsewhere,
        // Denied for want of a slot: its fixed pause (`NO_SLOT_PAUSE`), not the lease left.
        retry_after: 10 * MS,
    };
    Capped {
        build: move |cap, lease| build(&fake, cap, lease),
        table,
        decided,
    }
}

// Not the scenario of a slot released by another limiter: with the quota's one partition,
// the second limiter waits for the partition's lease as well as for the slot.
throttle_e2e::in_flight_paused!(
    capped;
    a_grant_holds_its_slot_until_dropped_and_renews_it_meanwhile,
    a_call_that_finds_every_slot_held_goes_the_instant_one_is_released_here,
    a_waiting_call_gives_up_at_its_deadline_and_a_cancelled_one_holds_nothing,
    try_acquire_needs_a_slot_free_now_and_a_dropped_wait_holds_none,
    caps_and_leases_out_of_range_are_refused_at_build,
);

#[tokio::test(start_paused = true)]
async fn the_slot_is_taken_first_and_the_tokens_in_process() {
    let Capped { build, table, .. } = capped();
    let limiter = build(1, LEASE).unwrap();
    let start = Instant::now();
    let first = limiter.acquire().await.unwrap();
    assert_eq!(
        first.round_trips, 1,
        "the slot's take; the tokens are in process"
    );
    assert_eq!(first.at - start, 100 * MS, "the first token of the lease");
    assert_eq!(table.slots().await.0, 1);
}

#[tokio::test(start_paused = true)]
async fn a_call_that_gives_up_takes_no_tokens() {
    let Capped { build, table, .. } = capped();
    let limiter = build(1, LEASE).unwrap();
    let held = limiter.acquire().await.unwrap();
    let refused = limiter.acquire_with(Demand::call().within(200 * MS)).await;
    assert!(
        matches!(refused, Err(Error::DeadlineExceeded { .. })),
        "{refused:?}"
    );
    drop(held);
    settle().await;
    assert_eq!(table.slots().await.0, 0);
    let next = limiter.acquire().await.unwrap();
    assert_eq!(
        next.remaining, 1,
        "the partition's two tokens, less this call's"
    );
}
