//! The seed scenario (capacity 8, 9 tokens/s, 40 reservations at one instant), the reference
//! case of module/bucket/tests/table.rs, run on a real server in one MULTI/EXEC.

use std::time::Instant;

use redis::{Connection, Value};
use throttle_testkit::Flavor;

use crate::command::{error_text, line, query};
use crate::reply::{as_reply, Reply};
use crate::time::{ceil_ms, NS_PER_MS};

/// The refill time of one token at 9/s, rounded up: 111 111 112 ns.
pub const SEED_INTERVAL_NS: i64 = 111_111_112;

/// Runs on Redis 7.0 whose EXEC the client saw take a whole interval or more cannot be
/// checked to the ms (see [`check_seed_scenario`]), so they are run again, this many times.
const TRIES: usize = 5;

/// The k-th (1-based) reply of the seed scenario when all 40 calls see the same instant.
pub fn seed_expected(k: i64) -> Reply {
    let remaining = (8 - k).max(0);
    let wait = ceil_ms((k - 8).max(0) * SEED_INTERVAL_NS);
    let reset = ceil_ms(k * SEED_INTERVAL_NS);
    [1, remaining, wait, reset]
}

/// Runs the seed scenario in one MULTI/EXEC on `key` (which must not exist) and checks
/// every reply; the key then holds the state after the 40 reservations.
///
/// Where the server has a cached clock (Redis 7.2+, Valkey) it is frozen for the whole EXEC,
/// so every value is exact. Redis 7.0's module clock (whole ms, or µs) may move forward
/// inside the EXEC: call k then sees the first call's instant plus some `d_k`, with
/// `0 <= d_1 <= d_2 <= ... <= d_40 <=` how long the client saw the EXEC take (plus the 1 ms its
/// anchored clock may catch up). While that is
/// under one interval the state moves exactly one interval per call whatever the clock did,
/// so each reply is the bucket's arithmetic at `d_k`: the check is that one forward-moving
/// sequence of `d_k` within the measured bound gives all 40 replies.
#[track_caller]
pub fn check_seed_scenario(con: &mut Connection, flavor: Flavor, key: &str) {
    // The table of module/bucket/tests/table.rs, spot-checked.
    assert_eq!(seed_expected(1), [1, 7, 0, 112]);
    assert_eq!(seed_expected(8), [1, 0, 0, 889]);
    assert_eq!(seed_expected(9), [1, 0, 112, 1001]);
    assert_eq!(seed_expected(40), [1, 0, 3556, 4445]);

    for attempt in 1..=TRIES {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for _ in 0..40 {
            pipe.add_command(line(&format!("THROTTLE.TAKE {key} 8 9 MAXWAIT 60000")));
        }
        let start = Instant::now();
        let replies: Vec<Value> = pipe
            .query(con)
            .unwrap_or_else(|e| panic!("MULTI with 40 x THROTTLE.TAKE: {}", error_text(&e)));
        let bound_ns = start.elapsed().as_nanos().try_into().unwrap_or(i64::MAX);
        assert_eq!(replies.len(), 40, "{replies:?}");
        let replies: Vec<Reply> = replies.iter().map(as_reply).collect();

        if flavor.has_cached_micros() {
            for (k, got) in (1..).zip(&replies) {
                let want = seed_expected(k);
                assert_eq!(*got, want, "call {k} of 40 inside one MULTI ({flavor})");
            }
            return;
        }
        // Redis 7.0's µs clock is the monotonic counter anchored to the wall clock's ms: a
        // fresh anchor may lag by up to 999 µs, which a call early in a later ms takes back
        // (module/src/clock.rs), so inside the EXEC it may move up to 1 ms more than it took.
        let bound_ns = bound_ns.saturating_add(NS_PER_MS);
        if bound_ns < SEED_INTERVAL_NS {
            check_moving_clock(&replies, bound_ns);
            return;
        }
        eprintln!(
            "the seed scenario's EXEC took {bound_ns} ns on the client's clock, an interval or \
             more: run {attempt} of {TRIES} cannot be checked to the ms; running it again"
        );
        let _: i64 = query(con, redis::cmd("DEL").arg(key));
    }
    panic!("the seed scenario's EXEC took an interval or more {TRIES} times in a row");
}

/// The check of [`check_seed_scenario`] for a clock that moved forward by at most `bound_ns`
/// (less than one interval) during the EXEC.
#[track_caller]
fn check_moving_clock(replies: &[Reply], bound_ns: i64) {
    const MS: i64 = NS_PER_MS;
    let interval = SEED_INTERVAL_NS;
    // The smallest d_k the replies so far allow: the clock never goes back.
    let mut least = 0;
    for (k, got) in (1..).zip(replies) {
        let ideal = seed_expected(k);
        // With d_k under one interval no token refills: granted and remaining are exact.
        assert_eq!(
            got[..2],
            ideal[..2],
            "call {k}: granted, remaining: {got:?}"
        );
        // reset = ceil_ms(k * interval - d_k), so d_k in [k * interval - reset ms, ... + 1 ms).
        let (mut low, mut high) = (least, bound_ns);
        let reset_from = k * interval - got[3] * MS;
        low = low.max(reset_from);
        high = high.min(reset_from + MS - 1);
        // The wait, once in debt: ceil_ms((k - 8) * interval - d_k), or 0 if that is <= 0.
        if k > 8 {
            let owed = (k - 8) * interval;
            if got[2] > 0 {
                low = low.max(owed - got[2] * MS);
                high = high.min(owed - got[2] * MS + MS - 1);
            } else {
                low = low.max(owed);
            }
        } else {
            assert_eq!(
                got[2], 0,
                "call {k}: a token was there, so no wait: {got:?}"
            );
        }
        assert!(
            low <= high,
            "call {k}: {got:?} (exact: {ideal:?}) needs the clock to have moved by {low}..={high} \
             ns since the first call, but it only moves forward, by no less than for the call \
             before ({least} ns) and no more than the EXEC took ({bound_ns} ns)"
        );
        least = low;
    }
}
