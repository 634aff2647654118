//! A `Limiter`'s cap on calls in flight on paused tokio time, against the in-memory server
//! that runs the module's own arithmetic: the contract scenarios
//! (`throttle_e2e::contract::in_flight_paused`), the slot taken with the tokens in one round
//! trip, in the limiter's own bucket.

use redis_throttle::{Backend, Limiter, Quota};
use throttle_e2e::contract::in_flight_paused::{Build, Capped, Decided, SlotTable};
use throttle_e2e::fake::FakeServer;

const KEY: &str = "bucket";

/// A limiter of 100 tokens at 100/s on a new fake, the table of its slots there (its own
/// bucket), and what its code decides.
fn capped() -> Capped<impl Build<Limiter<FakeServer>>> {
    let fake = FakeServer::new();
    let table = SlotTable {
        server: fake.clone(),
        key: KEY,
        capacity: 100,
        rate: 100,
    };
    let build = move |cap, lease| {
        Limiter::builder(KEY, Quota::new(100, 100u64).unwrap())
            .backend(Backend::Module)
            .pause_check(false)
            .max_in_flight(cap)
            .slot_lease(lease)
            .build(fake.clone())
    };
    Capped {
        build,
        table,
        decided: Decided::in_the_servers_line(2),
    }
}

throttle_e2e::in_flight_paused!(capped);
