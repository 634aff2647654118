//! The server's clock, and bounds on how far it can have moved while the client watched (ns
//! as the module replies them, `i64`; the wall clock that worker processes share is
//! [`crate::wall`]).

use std::time::Instant;

use redis::Connection;
use throttle_testkit::Flavor;

use crate::command::query;

/// Nanoseconds in a millisecond, for the module's states and replies.
pub const NS_PER_MS: i64 = 1_000_000;

/// The server's clock (`TIME`), in ns.
#[track_caller]
pub fn server_time_ns(con: &mut Connection) -> i64 {
    let (secs, micros): (i64, i64) = query(con, &redis::cmd("TIME"));
    secs * 1_000_000_000 + micros * 1000
}

/// Whole ms, rounded up.
pub fn ceil_ms(ns: i64) -> i64 {
    ns.div_euclid(NS_PER_MS) + i64::from(ns.rem_euclid(NS_PER_MS) > 0)
}

/// How long the client has seen pass since `start`, in ms, rounded up plus one: an upper
/// bound on how far a server clock read during that span can have moved.
pub fn slack_ms(start: Instant) -> i64 {
    i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX / 2) + 1
}

/// Checks that `instant`, an instant the module read from its clock (in ns), lies between
/// `TIME` read `before` and `after` the call.
///
/// Where the module reads the cached command time (Redis 7.2+, Valkey) it is the clock `TIME`
/// reads, so the bounds are exact. Redis 7.0's module clock is its own (whole ms, or µs
/// anchored once to the wall clock), so there it is checked to the ms.
#[track_caller]
pub fn assert_server_instant(flavor: Flavor, instant: i64, before: i64, after: i64, what: &str) {
    let inside = if flavor.has_cached_micros() {
        (before..=after).contains(&instant)
    } else {
        (before.div_euclid(NS_PER_MS)..=ceil_ms(after)).contains(&instant.div_euclid(NS_PER_MS))
    };
    assert!(
        inside,
        "{what}: the module's clock read {instant} ns, outside the server's TIME \
         {before}..={after} ({flavor})"
    );
}
