//! The stored state and the key's TTL on every server: the state is the instant the bucket is
//! full again, stored as an integer Redis keeps int-encoded; the key expires then, and a full
//! bucket is a missing key.

mod common;

use std::time::{Duration, Instant};

use common::{
    assert_server_instant, ceil_ms, exists, per_server, pexpiretime, pttl, query, server_time_ns,
    slack_ms, state, take, wait_until, Connection, Flavor, Server, SEED_INTERVAL_NS,
};

per_server!(ttl_is_the_reset, state_stays_int_encoded);

fn ttl_is_the_reset(flavor: Flavor) {
    check_ttl(&Server::start(flavor));
}

/// The same over a unix socket instead of TCP.
#[test]
fn ttl_over_a_unix_socket() {
    check_ttl(&common::unix_socket_server(Flavor::Valkey91));
}

/// The state, its TTL and its expiry on one server.
fn check_ttl(server: &Server) {
    let flavor = server.flavor();
    let mut con = server.conn();

    // The state is the instant the bucket is full again, in ns since the epoch, stored as an
    // integer; the key expires at that instant (rounded up to ms).
    let before = server_time_ns(&mut con);
    let start = Instant::now();
    assert_eq!(take(&mut con, "ttl:a", "8 9"), [1, 7, 0, 112]);
    let ttl = pttl(&mut con, "ttl:a");
    let slack = slack_ms(start);
    let after = server_time_ns(&mut con);
    let value = state(&mut con, "ttl:a");
    assert_server_instant(
        flavor,
        value - SEED_INTERVAL_NS,
        before,
        after,
        "the state one interval back (the take's instant)",
    );
    assert_eq!(pexpiretime(&mut con, "ttl:a"), ceil_ms(value));
    assert!(
        (112 - slack..=113).contains(&ttl),
        "PTTL {ttl} after a take that said reset 112 ms"
    );
    let encoding: String = query(&mut con, redis::cmd("OBJECT").arg("ENCODING").arg("ttl:a"));
    assert_eq!(encoding, "int", "the state is stored as an integer");

    // A reservation puts the bucket into debt: the TTL covers the debt too.
    let start = Instant::now();
    assert_eq!(take(&mut con, "ttl:b", "2 1 TOKENS 2"), [1, 0, 0, 2000]);
    let reply = take(&mut con, "ttl:b", "2 1 MAXWAIT 5000");
    let ttl = pttl(&mut con, "ttl:b");
    let slack = slack_ms(start);
    assert_eq!(reply[..2], [1, 0], "{reply:?}");
    assert!((1000 - slack..=1000).contains(&reply[2]), "{reply:?}");
    assert!((3000 - slack..=3000).contains(&reply[3]), "{reply:?}");
    assert!(
        (reply[3] - slack..=reply[3] + 1).contains(&ttl),
        "PTTL {ttl} after reset {}",
        reply[3]
    );
    let value = state(&mut con, "ttl:b");
    assert_eq!(pexpiretime(&mut con, "ttl:b"), ceil_ms(value));

    // A bucket that is full again is a missing key: 5 tokens at 1000/s refill in 5 ms.
    let sent = Instant::now();
    assert_eq!(take(&mut con, "ttl:c", "5 1000 TOKENS 5"), [1, 0, 0, 5]);
    wait_until(
        "the full bucket's key to expire",
        Duration::from_secs(2),
        || !exists(&mut con, "ttl:c"),
    );
    assert!(
        sent.elapsed() >= Duration::from_millis(5),
        "the key expired before the bucket was full"
    );
    assert_eq!(take(&mut con, "ttl:c", "5 1000 TOKENS 0"), [1, 5, 0, 0]);
    assert!(!exists(&mut con, "ttl:c"));
}

/// Every write stores the state as an integer that Redis keeps int-encoded, as small as
/// `SET key <int>` (module/bucket/src/state.rs says so), and nothing else changes it: a
/// denial and `TOKENS 0` read the bucket with `GET` through `RedisModule_Call`, which leaves
/// the value as it is (the key API's StringDMA would replace it with a raw copy).
fn state_stays_int_encoded(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let encoding = |con: &mut Connection| -> String {
        query(con, redis::cmd("OBJECT").arg("ENCODING").arg("enc"))
    };
    assert_eq!(
        take(&mut con, "enc", "2 0.001 TOKENS 2"),
        [1, 0, 0, 2_000_000]
    );
    assert_eq!(encoding(&mut con), "int", "after a take");
    let value = state(&mut con, "enc");
    assert_eq!(take(&mut con, "enc", "2 0.001")[..2], [0, 0], "a denial");
    assert_eq!(encoding(&mut con), "int", "after a denial");
    assert_eq!(
        take(&mut con, "enc", "2 0.001 TOKENS 0")[..2],
        [1, 0],
        "TOKENS 0"
    );
    assert_eq!(encoding(&mut con), "int", "after TOKENS 0");
    assert_eq!(state(&mut con, "enc"), value, "a denial or TOKENS 0 wrote");
    assert_eq!(take(&mut con, "enc", "2 0.001 MAXWAIT 100000000")[0], 1);
    assert_eq!(encoding(&mut con), "int", "after a reservation");
}
