//! What a bucket costs the server, on every server: `MEMORY USAGE` of a bucket whose state
//! changed length (8 bytes to the 32 of a pause or cut and back, or the digits of an earlier
//! release to 8) is exactly that of a bucket written once at that length, with a key of the
//! same length and a TTL too. A string resized in place can keep a larger allocation than one
//! written at its length (grown from 8 bytes to 32, or shrunk from digits kept in the
//! smallest string header, which records no spare room); the module gives the key a fresh
//! value whenever the state's length changes, so no bucket carries one, and the fresh value
//! keeps the key's LFU counter.

use std::time::{Duration, Instant};

use throttle_e2e::{
    cut, pause, peek_full, per_server, pttl, query, take, Connection, Flavor, Server,
};

per_server!(
    back_from_a_pause_a_bucket_costs_what_one_never_paused_costs,
    back_from_a_cut_a_bucket_costs_what_one_never_cut_costs,
    paused_in_place_a_bucket_costs_what_one_paused_from_full_costs,
    an_earlier_releases_digits_rewritten_cost_what_8_bytes_cost,
    a_fresh_value_keeps_the_lfu_counter,
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

/// `key`, paused or cut (its state 32 bytes), taken from once that is over: it costs exactly
/// what `mem:plain`, only ever taken from, costs, both at 8 bytes.
#[track_caller]
fn back_from_the_pushback(flavor: Flavor, con: &mut Connection, key: &str, what: &str) {
    assert_eq!(strlen(con, key), 32, "{flavor}: {what}: paused or cut");
    until_pushback_is_over(flavor, con, key);
    assert_eq!(take(con, key, QUOTA)[0], 1, "{flavor}: {what}");
    assert_costs_the_same(flavor, con, key, "mem:plain", 8, what);
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
    back_from_the_pushback(flavor, &mut con, "mem:pause", "taken, paused 5 ms, taken");

    assert_eq!(pause(&mut con, "mem:fresh", "10 0.001 5"), 5);
    back_from_the_pushback(
        flavor,
        &mut con,
        "mem:fresh",
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
    back_from_the_pushback(flavor, &mut con, "mem:cut:1", "taken, cut, taken");
}

/// While the pause lasts: a bucket taken from (8 bytes) then paused (its state grown to 32)
/// against one paused from full (its first state the 32 bytes).
fn paused_in_place_a_bucket_costs_what_one_paused_from_full_costs(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    // Paused for 1000 s: neither pause is over before the measurement.
    assert_eq!(pause(&mut con, "mem:fresh", "10 0.001 1000000"), 1_000_000);
    assert_eq!(take(&mut con, "mem:grown", QUOTA)[0], 1);
    assert_eq!(strlen(&mut con, "mem:grown"), 8);
    assert_eq!(pause(&mut con, "mem:grown", "10 0.001 1000000"), 1_000_000);
    assert_costs_the_same(
        flavor,
        &mut con,
        "mem:grown",
        "mem:fresh",
        32,
        "taken then paused, against paused from full",
    );
}

/// An earlier release's state, the decimal digits (kept as an integer by SET), once a take
/// rewrites it as 8 bytes, against a bucket only ever written by this one.
fn an_earlier_releases_digits_rewritten_cost_what_8_bytes_cost(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    assert_eq!(take(&mut con, "mem:plain", QUOTA)[0], 1);
    let (seconds, _): (i64, i64) = query(&mut con, &redis::cmd("TIME"));
    // Full again 500 s from now: 19 digits, the bucket partly empty.
    let full_at_ns = (seconds + 500) * 1_000_000_000;
    let _: () = query(
        &mut con,
        redis::cmd("SET")
            .arg("mem:digit")
            .arg(full_at_ns)
            .arg("PX")
            .arg(500_000),
    );
    assert_eq!(strlen(&mut con, "mem:digit"), 19);
    assert_eq!(take(&mut con, "mem:digit", QUOTA)[0], 1);
    assert_costs_the_same(
        flavor,
        &mut con,
        "mem:digit",
        "mem:plain",
        8,
        "digits rewritten by a take",
    );
}

/// Under an LFU policy, the counter survives the fresh value of a pause and of its end. With
/// `lfu-log-factor 0` and `lfu-decay-time 0` the server counts every access that touches the
/// key exactly (OBJECT FREQ does not touch it), so the count is the server's, not a guess.
fn a_fresh_value_keeps_the_lfu_counter(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    for (name, value) in [
        ("maxmemory-policy", "allkeys-lfu"),
        ("lfu-log-factor", "0"),
        ("lfu-decay-time", "0"),
    ] {
        let _: () = query(
            &mut con,
            redis::cmd("CONFIG").arg("SET").arg(name).arg(value),
        );
    }
    let freq = |con: &mut Connection| -> i64 {
        query(con, redis::cmd("OBJECT").arg("FREQ").arg("mem:lfu"))
    };
    // Created by the first take (a new key starts at 5), then touched by ten more.
    assert_eq!(take(&mut con, "mem:lfu", QUOTA)[0], 1);
    for _ in 0..10 {
        assert_eq!(take(&mut con, "mem:lfu", "10 0.001 TOKENS 0")[0], 1);
    }
    let before = freq(&mut con);
    assert_eq!(before, 15, "{flavor}: the counter after eleven takes");
    // The pause touches the key once and writes 32 bytes: a fresh value.
    assert_eq!(pause(&mut con, "mem:lfu", "10 0.001 5"), 5);
    assert_eq!(
        freq(&mut con),
        before + 1,
        "{flavor}: the counter once paused"
    );
    until_pushback_is_over(flavor, &mut con, "mem:lfu");
    let waited = freq(&mut con);
    // The take after the pause writes 8 bytes: a fresh value again.
    assert_eq!(take(&mut con, "mem:lfu", QUOTA)[0], 1);
    assert_eq!(
        freq(&mut con),
        waited + 1,
        "{flavor}: the counter after the pause"
    );
    assert_eq!(strlen(&mut con, "mem:lfu"), 8);
}
