//! The stored state and the key's TTL on every server: the state is the instant the bucket is
//! full again, stored as 8 bytes written in place; the key expires then, and a full bucket is
//! a missing key.

use std::time::{Duration, Instant};

use throttle_e2e::{
    assert_server_instant, ceil_ms, exists, per_server, pexpiretime, pttl, query, server_time_ns,
    slack_ms, state, take, within, Connection, Flavor, Server, SEED_INTERVAL_NS,
};

per_server!(
    ttl_is_the_reset,
    state_is_written_in_place,
    earlier_releases_digits_still_read
);

fn ttl_is_the_reset(flavor: Flavor) {
    check_ttl(&Server::start(flavor));
}

/// The same over a unix socket instead of TCP.
#[test]
fn ttl_over_a_unix_socket() {
    check_ttl(&throttle_e2e::unix_socket_server(Flavor::Valkey91));
}

/// The state, its TTL and its expiry on one server.
fn check_ttl(server: &Server) {
    let flavor = server.flavor();
    let mut con = server.conn();

    // The state is the instant the bucket is full again, in ns since the epoch, stored as 8
    // bytes; the key expires at that instant (rounded up to ms).
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
    assert_eq!(encoding, "raw", "the state is written in place");

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
    within(
        "the full bucket's key to expire",
        Duration::from_secs(2),
        || (!exists(&mut con, "ttl:c")).then_some(()),
    );
    assert!(
        sent.elapsed() >= Duration::from_millis(5),
        "the key expired before the bucket was full"
    );
    assert_eq!(take(&mut con, "ttl:c", "5 1000 TOKENS 0"), [1, 5, 0, 0]);
    assert!(!exists(&mut con, "ttl:c"));
}

/// Every write stores the state in place, 8 bytes in a raw string, and nothing else changes
/// it: a denial and `TOKENS 0` read the bucket and leave the key exactly as it was.
fn state_is_written_in_place(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let encoding = |con: &mut Connection| -> String {
        query(con, redis::cmd("OBJECT").arg("ENCODING").arg("enc"))
    };
    let strlen = |con: &mut Connection| -> i64 { query(con, redis::cmd("STRLEN").arg("enc")) };
    assert_eq!(
        take(&mut con, "enc", "2 0.001 TOKENS 2"),
        [1, 0, 0, 2_000_000]
    );
    assert_eq!(
        (encoding(&mut con), strlen(&mut con)),
        ("raw".to_owned(), 8),
        "after a take"
    );
    let value = state(&mut con, "enc");
    assert_eq!(take(&mut con, "enc", "2 0.001")[..2], [0, 0], "a denial");
    assert_eq!(
        take(&mut con, "enc", "2 0.001 TOKENS 0")[..2],
        [1, 0],
        "TOKENS 0"
    );
    assert_eq!(encoding(&mut con), "raw", "after a denial and TOKENS 0");
    assert_eq!(state(&mut con, "enc"), value, "a denial or TOKENS 0 wrote");
    assert_eq!(take(&mut con, "enc", "2 0.001 MAXWAIT 100000000")[0], 1);
    assert_eq!(
        (encoding(&mut con), strlen(&mut con)),
        ("raw".to_owned(), 8),
        "after a reservation"
    );
    assert_eq!(
        state(&mut con, "enc"),
        value + 1_000 * 1_000_000_000,
        "one interval (1000 s) later"
    );
}

/// Earlier releases stored the state as decimal digits: such a bucket reads as before (a
/// denial leaves its digits as they are), and its next write stores the 8 bytes.
fn earlier_releases_digits_still_read(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let now = server_time_ns(&mut con);
    // Full again 999 s from now: one token at 0.001/s is in use (999 s rather than 1000, as
    // Redis 7.0's module clock may lag TIME by up to a millisecond).
    let digits = (now + 999 * 1_000_000_000).to_string();
    let _: () = query(
        &mut con,
        redis::cmd("SET")
            .arg("old")
            .arg(&digits)
            .arg("PX")
            .arg(1_000_000),
    );
    let reply = take(&mut con, "old", "2 0.001");
    assert_eq!(reply[..2], [1, 0], "the one token left is taken: {reply:?}");
    let written = state(&mut con, "old");
    assert_eq!(
        written,
        now + 1_999 * 1_000_000_000,
        "the digits' instant plus one interval"
    );

    let _: () = query(
        &mut con,
        redis::cmd("SET")
            .arg("old:denied")
            .arg(&digits)
            .arg("PX")
            .arg(1_000_000),
    );
    assert_eq!(
        take(&mut con, "old:denied", "1 0.001")[..2],
        [0, 0],
        "a denial"
    );
    let kept: (String, String) = (
        query(&mut con, redis::cmd("GET").arg("old:denied")),
        query(
            &mut con,
            redis::cmd("OBJECT").arg("ENCODING").arg("old:denied"),
        ),
    );
    assert_eq!(kept, (digits, "int".to_owned()), "a denial changed the key");
}
