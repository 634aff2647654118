//! A `Limiter`'s cap on calls in flight on paused tokio time, against the in-memory server
//! that runs the module's own arithmetic: the contract scenarios
//! (`throttle_e2e::contract::in_flight_paused`), the slot taken with the tokens in one round
//! trip, in the limiter's own bucket.

use std::time::Duration;

use redis_throttle::{Backend, Limiter, Quota};
use throttle_e2e::contract::in_flight_paused::{Capped, Decided, SlotTable};
use throttle_e2e::fake::FakeServer;

const KEY: &str = "bucket";

/// A limiter of 100 tokens at 100/s on a new fake, the table of its slots there (its own
/// bucket), and what its code decides.
fn capped() -> Capped<impl Fn(u64, Duration) -> Result<Limiter<FakeServer>, redis_throttle::Error>>
{
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
    let decided = Decided {
        take_trips: 1,
        // 1 take and a renewal at 1, 2, ... 10 s.
        held_trips: 1 + 10,
        cap: 2,
        // Refused at 0, looks at 2, 6, 14, 30, 62 ms and every 50 ms to 662 ms, granted at 700.
        waiter_trips: 1 + 5 + 12 + 1,
        // Denied 300 ms into the slot's 3 s lease: told to look again when it ends.
        retry_after: Duration::from_millis(2_700),
    };
    Capped {
        build,
        table,
        decided,
    }
}

throttle_e2e::in_flight_paused!(capped);
