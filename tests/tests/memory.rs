//! What a bucket costs the server, on every server: `MEMORY USAGE` of a bucket back to 8
//! bytes after a pause or a cut (its state 32 bytes meanwhile) is exactly that of a bucket
//! never paused or cut, with a key of the same length and a TTL too. The module writes the
//! state in place; when the write shrinks it back to 8 bytes, the server gives the string up
//! its larger allocation, and this holds it to that.

use std::time::{Duration, Instant};

use throttle_e2e::{
    cut, pause, peek_full, per_server, pttl, query, take, Connection, Flavor, Server,
};

per_server!(
    back_from_a_pause_a_bucket_costs_what_one_never_paused_costs,
    back_from_a_cut_a_bucket_costs_what_one_never_cut_costs,
);

/// Every bucket here: burst 10 at one token per 1000 s, so no key expires during a test.
const QUOTA: &str = "10 0.001";

/// `MEMORY USAGE key`, as the server counts it.
#[track_caller]
fn memory(con: &mut Connection, key: &str) -> i64 {
    query(con, redis::cmd("MEMORY").arg("USAGE").arg(key))
}

#[track_caller]
fn strlen(con: &mut Connection, key: &str) -> i64 {
    query(con, redis::cmd("STRLEN").arg(key))
}

/// Asserts that `key` and the reference `plain` (keys of the same length, both with a TTL)
/// hold states of `len` bytes and cost the server exactly the same; returns the two numbers.
#[track_caller]
fn assert_costs_the_same(
    flavor: Flavor,
    con: &mut Connection,
    key: &str,
    plain: &str,
    len: i64,
    what: &str,
) -> (i64, i64) {
    assert_eq!(key.len(), plain.len(), "keys of the same length");
    for k in [key, plain] {
        assert_eq!(strlen(con, k), len, "{flavor}: {what}: STRLEN {k}");
        assert!(pttl(con, k) > 0, "{flavor}: {what}: {k} has a TTL");
    }
    let (used, reference) = (memory(con, key), memory(con, plain));
    println!("{flavor}: {what}: MEMORY USAGE {key} {used}, {plain} {reference}");
    assert_eq!(
        used, reference,
        "{flavor}: {what}: MEMORY USAGE {key} (left) and {plain} (right)"
    );
    (used, reference)
}

/// Waits, bounded in polls and in time, until PEEK shows `key` neither paused nor cut (no
/// pause left, the full rate).
#[track_caller]
fn until_pushback_is_over(flavor: Flavor, con: &mut Connection, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    for _ in 0..500 {
        let reply = peek_full(con, key, QUOTA);
        if reply[4] == 0 && reply[5] == 10_000 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{flavor}: {key} still paused or cut after 5 s: PEEK {reply:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("{flavor}: {key} still paused or cut after 500 polls");
}

/// A bucket taken from (8 bytes), paused for 5 ms (32 bytes), then taken from once the pause
/// is over (8 bytes again), against one only ever taken from. Also from a missing key paused
/// straight away.
fn back_from_a_pause_a_bucket_costs_what_one_never_paused_costs(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    assert_eq!(take(&mut con, "mem:plain", QUOTA)[0], 1);

    assert_eq!(take(&mut con, "mem:pause", QUOTA)[0], 1);
    assert_eq!(strlen(&mut con, "mem:pause"), 8);
    assert_eq!(pause(&mut con, "mem:pause", "10 0.001 5"), 5);
    assert_eq!(strlen(&mut con, "mem:pause"), 32, "{flavor}: paused");
    until_pushback_is_over(flavor, &mut con, "mem:pause");
    assert_eq!(take(&mut con, "mem:pause", QUOTA)[0], 1);
    assert_costs_the_same(
        flavor,
        &mut con,
        "mem:pause",
        "mem:plain",
        8,
        "taken, paused 5 ms, taken",
    );

    assert_eq!(pause(&mut con, "mem:fresh", "10 0.001 5"), 5);
    assert_eq!(strlen(&mut con, "mem:fresh"), 32, "{flavor}: paused");
    until_pushback_is_over(flavor, &mut con, "mem:fresh");
    assert_eq!(take(&mut con, "mem:fresh", QUOTA)[0], 1);
    assert_costs_the_same(
        flavor,
        &mut con,
        "mem:fresh",
        "mem:plain",
        8,
        "paused 5 ms from full, taken",
    );
}

/// The same with THROTTLE.CUT: paused 5 ms, the rate halved and back in full 5 ms later.
fn back_from_a_cut_a_bucket_costs_what_one_never_cut_costs(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    assert_eq!(take(&mut con, "mem:plain", QUOTA)[0], 1);

    assert_eq!(take(&mut con, "mem:cut:1", QUOTA)[0], 1);
    assert_eq!(cut(&mut con, "mem:cut:1", "10 0.001 5 0.5 5")[0], 1);
    assert_eq!(strlen(&mut con, "mem:cut:1"), 32, "{flavor}: cut");
    until_pushback_is_over(flavor, &mut con, "mem:cut:1");
    assert_eq!(take(&mut con, "mem:cut:1", QUOTA)[0], 1);
    assert_costs_the_same(
        flavor,
        &mut con,
        "mem:cut:1",
        "mem:plain",
        8,
        "taken, cut, taken",
    );
}
