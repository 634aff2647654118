//! A `Limiter`'s cap on calls in flight on paused tokio time, against the in-memory server
//! that runs the module's own arithmetic: the contract scenarios
//! (`throttle_e2e::contract::in_flight_paused`), the slot taken with the tokens in one round
//! trip, in the limiter's own bucket.

use std::time::Duration;

use redis_throttle::{Backend, Error, Limiter, Quota};
use throttle_e2e::contract::in_flight_paused::{self as contract, SlotTable, LEASE};
use throttle_e2e::fake::FakeServer;

const KEY: &str = "bucket";

fn build(fake: &FakeServer, cap: u64, lease: Duration) -> Result<Limiter<FakeServer>, Error> {
    Limiter::builder(KEY, Quota::new(100, 100u64).unwrap())
        .backend(Backend::Module)
        .pause_check(false)
        .max_in_flight(cap)
        .slot_lease(lease)
        .build(fake.clone())
}

/// A limiter of a cap on a new fake, and the table of its slots there.
fn capped() -> (impl Fn(u64) -> Limiter<FakeServer>, SlotTable) {
    let fake = FakeServer::new();
    let table = SlotTable {
        server: fake.clone(),
        key: KEY,
        capacity: 100,
        rate: 100,
    };
    (move |cap| build(&fake, cap, LEASE).unwrap(), table)
}

#[tokio::test(start_paused = true)]
async fn a_grant_holds_its_slot_until_dropped_and_renews_it_meanwhile() {
    let (make, table) = capped();
    // 1 take and a renewal at 1, 2, ... 10 s.
    contract::a_grant_holds_its_slot_until_dropped_and_renews_it_meanwhile(make, &table, 1, 11)
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_call_that_finds_every_slot_held_goes_the_instant_one_is_released_here() {
    let (make, table) = capped();
    // Refused at 0, looks at 2, 6, 14, 30, 62 ms and every 50 ms to 662 ms, granted at 700.
    contract::a_call_that_finds_every_slot_held_goes_the_instant_one_is_released_here(
        make,
        &table,
        2,
        1 + 5 + 12 + 1,
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_slot_released_elsewhere_is_found_by_looking_again() {
    let (make, table) = capped();
    contract::a_slot_released_elsewhere_is_found_by_looking_again(make, &table, 1).await;
}

#[tokio::test(start_paused = true)]
async fn a_waiting_call_gives_up_at_its_deadline_and_a_cancelled_one_holds_nothing() {
    let (make, table) = capped();
    contract::a_waiting_call_gives_up_at_its_deadline_and_a_cancelled_one_holds_nothing(
        make, &table,
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn try_acquire_needs_a_slot_free_now_and_a_dropped_wait_holds_none() {
    let (make, table) = capped();
    // Denied 300 ms into the slot's 3 s lease: told to look again when it ends.
    contract::try_acquire_needs_a_slot_free_now_and_a_dropped_wait_holds_none(
        make,
        &table,
        Duration::from_millis(2_700),
    )
    .await;
}

#[test]
fn caps_and_leases_out_of_range_are_refused_at_build() {
    let fake = FakeServer::new();
    contract::caps_and_leases_out_of_range_are_refused_at_build(|cap, lease| {
        build(&fake, cap, lease)
    });
}
