//! THROTTLE.TAKE's reply shape and values, in RESP2 and RESP3, on every server: a fresh key,
//! the seed scenario in one MULTI/EXEC, denials and inspections that write nothing, options
//! and the limits accepted at their edges.

use std::time::Instant;

use throttle_e2e::{
    assert_server_instant, ceil_ms, check_seed_scenario, exists, per_server, pexpiretime, query,
    server_time_ns, slack_ms, state, take, Connection, Flavor, Server, Value, SEED_INTERVAL_NS,
};

per_server!(replies_resp2_and_resp3);

fn replies_resp2_and_resp3(flavor: Flavor) {
    let server = Server::start(flavor);
    check_replies(&server, "resp2", false);
    check_replies(&server, "resp3", true);
}

/// The same over a unix socket instead of TCP.
#[test]
fn replies_over_a_unix_socket() {
    let server = throttle_e2e::unix_socket_server(Flavor::Valkey91);
    check_replies(&server, "resp2", false);
    check_replies(&server, "resp3", true);
}

/// Reply shape and values on one connection, using keys under `prefix`. With `resp3`, the
/// connection first switches to RESP3 with `HELLO 3`.
fn check_replies(server: &Server, prefix: &str, resp3: bool) {
    let flavor = server.flavor();
    let mut con = server.conn();
    if resp3 {
        let hello: Value = query(&mut con, redis::cmd("HELLO").arg(3));
        let Value::Map(fields) = &hello else {
            panic!("HELLO 3 did not answer with a RESP3 map: {hello:?}");
        };
        let proto = fields
            .iter()
            .find(|(k, _)| *k == Value::BulkString(b"proto".to_vec()))
            .map(|(_, v)| v.clone());
        assert_eq!(proto, Some(Value::Int(3)), "{hello:?}");
    }
    let key = |name: &str| format!("{prefix}:{name}");

    // A missing key is a full bucket: 8 - 1 left, 111.111112 ms until full again.
    assert_eq!(take(&mut con, key("fresh"), "8 9"), [1, 7, 0, 112]);

    let before = server_time_ns(&mut con);
    check_seed_scenario(&mut con, flavor, &key("seed"));
    let after = server_time_ns(&mut con);
    // After 40 reservations the state is 40 intervals after the instant of the first.
    let seeded = state(&mut con, key("seed"));
    assert_server_instant(
        flavor,
        seeded - 40 * SEED_INTERVAL_NS,
        before,
        after,
        "the state 40 intervals back (the first call's instant)",
    );
    assert_eq!(
        pexpiretime(&mut con, key("seed")),
        ceil_ms(seeded),
        "the key expires when the bucket is full"
    );

    check_denials_write_nothing(server, &mut con, &key("deny"));

    // TOKENS 0 on a missing key: a full bucket, and still no key.
    assert_eq!(take(&mut con, key("none"), "5 1 TOKENS 0"), [1, 5, 0, 0]);
    assert!(!exists(&mut con, key("none")), "TOKENS 0 created the key");

    // Option names are case-insensitive, in any order.
    let start = Instant::now();
    assert_eq!(
        take(&mut con, key("opts"), "10 0.001 maxwait 0 Tokens 3"),
        [1, 7, 0, 3_000_000]
    );
    let reply = take(&mut con, key("opts"), "10 0.001 TOKENS 7 MAXWAIT 5");
    let slack = slack_ms(start);
    assert_eq!(reply[..3], [1, 0, 0], "the rest of the bucket: {reply:?}");
    assert!(
        (10_000_000 - slack..=10_000_000).contains(&reply[3]),
        "{reply:?}"
    );

    // Limits, accepted at their edges (exact: one call on a fresh key sees no clock move).
    let max_cap = throttle_bucket::MAX_CAPACITY;
    assert_eq!(
        take(&mut con, key("edge1"), &format!("{max_cap} 1000000000")),
        [1, max_cap as i64 - 1, 0, 1],
        "largest capacity at the largest rate"
    );
    assert_eq!(
        take(&mut con, key("edge2"), "315360000 1"),
        [1, 315_359_999, 0, 1000],
        "a bucket that takes exactly 10 years to fill"
    );
    assert_eq!(
        take(&mut con, key("edge3"), "1 0.000001"),
        [1, 0, 0, 1_000_000_000],
        "the smallest rate: one token every 10^6 s"
    );
    assert_eq!(
        take(&mut con, key("edge4"), "1 35791394.1"),
        [1, 0, 0, 1],
        "a fractional rate (2 GiB per minute in bytes)"
    );
    let max_wait = throttle_bucket::MAX_WAIT_MS;
    let reply = take(
        &mut con,
        key("edge3"),
        &format!("1 0.000001 MAXWAIT {max_wait}"),
    );
    assert_eq!(
        reply[..2],
        [1, 0],
        "the longest MAXWAIT reserves: {reply:?}"
    );
    assert!(
        reply[2] <= 1_000_000_000 && reply[3] <= 2_000_000_000,
        "{reply:?}"
    );
}

/// A denial, `TOKENS 0` and a MAXWAIT that is too short write nothing: the same value, the
/// same expiry, and a WATCH on the key is not touched. A reservation that fits writes.
fn check_denials_write_nothing(server: &Server, con: &mut Connection, key: &str) {
    // Capacity 2, one token per 1000 s: nothing refills while the test runs.
    let start = Instant::now();
    assert_eq!(take(con, key, "2 0.001 TOKENS 2"), [1, 0, 0, 2_000_000]);
    let value = state(con, key);
    let expiry = pexpiretime(con, key);
    assert_eq!(expiry, ceil_ms(value));

    let mut watcher = server.conn();
    let _: () = query(&mut watcher, redis::cmd("WATCH").arg(key));

    let denied = take(con, key, "2 0.001");
    let maxwait_short = take(con, key, "2 0.001 MAXWAIT 500000");
    let inspect = take(con, key, "2 0.001 TOKENS 0");
    let slack = slack_ms(start);
    for (what, reply, granted) in [
        ("a denial", denied, 0),
        ("MAXWAIT too short", maxwait_short, 0),
        ("TOKENS 0", inspect, 1),
    ] {
        assert_eq!(reply[..2], [granted, 0], "{what}: {reply:?}");
        // One token is 10^6 ms away, full in 2 * 10^6 ms, less what has passed since.
        let wait = if granted == 1 { 0 } else { 1_000_000 };
        assert!(
            (wait - slack..=wait).contains(&reply[2]),
            "{what}: wait {reply:?}"
        );
        assert!(
            (2_000_000 - slack..=2_000_000).contains(&reply[3]),
            "{what}: reset {reply:?}"
        );
        assert_eq!(state(con, key), value, "{what} changed the stored state");
        assert_eq!(pexpiretime(con, key), expiry, "{what} changed the expiry");
    }
    // The watcher's transaction still runs: nothing touched the key.
    let _: () = query(&mut watcher, &redis::cmd("MULTI"));
    let _: () = query(&mut watcher, &redis::cmd("PING"));
    let exec: Value = query(&mut watcher, &redis::cmd("EXEC"));
    assert!(
        matches!(&exec, Value::Array(items) if items.len() == 1),
        "a denial or TOKENS 0 touched a WATCHed key: EXEC gave {exec:?}"
    );

    // A reservation that fits is written, 10^6 ms of debt later, and does touch a WATCH.
    let _: () = query(&mut watcher, redis::cmd("WATCH").arg(key));
    let reserved = take(con, key, "2 0.001 MAXWAIT 1000000");
    assert_eq!(reserved[..2], [1, 0], "{reserved:?}");
    assert!(
        reserved[2] <= 1_000_000 && reserved[3] <= 3_000_000,
        "{reserved:?}"
    );
    assert_eq!(state(con, key), value + 1_000 * 1_000_000_000);
    assert_eq!(
        pexpiretime(con, key),
        ceil_ms(value + 1_000 * 1_000_000_000)
    );
    let _: () = query(&mut watcher, &redis::cmd("MULTI"));
    let _: () = query(&mut watcher, &redis::cmd("PING"));
    let exec: Value = query(&mut watcher, &redis::cmd("EXEC"));
    assert_eq!(exec, Value::Nil, "a write did not touch the WATCHed key");
}
