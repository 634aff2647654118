//! Calls in flight on every server: `THROTTLE.TAKE ... INFLIGHT n LEASE ms`, `THROTTLE.RENEW`,
//! `THROTTLE.RELEASE` and `THROTTLE.SLOTS`. The cap holds, a lease runs out, a renewal keeps a
//! slot and a late one learns it lost it, a release frees at once (and a last one deletes a full
//! bucket), bad calls are refused writing nothing, replicas get the resulting state and nothing
//! for a denial, and the memory a bucket takes stays bounded by its cap however many calls
//! come and go.

use std::thread::sleep;
use std::time::Duration;

use throttle_e2e::{
    exists, get, int, ints, line, per_server, pttl, query, run, send, take_any, Connection, Flavor,
    Pair, Server,
};

per_server!(
    the_cap_holds,
    mtake_takes_its_slot_in_the_first_key,
    a_lease_runs_out,
    renew_and_release,
    bad_calls_write_nothing,
    replicas_get_the_resulting_state,
    memory_is_bounded_by_the_cap,
    the_documented_acl_lines_reach_the_slots,
);

/// Burst 100 at 10 per second: tokens are never short here, only slots.
const QUOTA: &str = "100 10";

fn slots(con: &mut Connection, key: &str) -> Vec<i64> {
    ints(&run(con, &format!("THROTTLE.SLOTS {key} {QUOTA}")).expect("THROTTLE.SLOTS"))
}

fn renew(con: &mut Connection, key: &str, slot: i64, ms: u64) -> i64 {
    int(&run(con, &format!("THROTTLE.RENEW {key} {QUOTA} {slot} {ms}")).expect("RENEW"))
}

fn release(con: &mut Connection, key: &str, slot: i64) -> i64 {
    int(&run(con, &format!("THROTTLE.RELEASE {key} {QUOTA} {slot}")).expect("RELEASE"))
}

#[track_caller]
fn memory(con: &mut Connection, key: &str) -> i64 {
    query(con, redis::cmd("MEMORY").arg("USAGE").arg(key))
}

fn the_cap_holds(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let args = format!("{QUOTA} INFLIGHT 2 LEASE 60000");
    let a = take_any(&mut con, "s", &args);
    let b = take_any(&mut con, "s", &args);
    assert_eq!((a.len(), a[0], b[0]), (5, 1, 1), "{flavor}: {a:?} {b:?}");
    assert!(a[4] > 0 && b[4] > a[4], "{flavor}: ids grow: {a:?} {b:?}");
    let before = get(&mut con, "s");
    assert_eq!(before.as_ref().map(Vec::len), Some(40 + 2 * 16), "{flavor}");
    let denied = take_any(&mut con, "s", &args);
    assert_eq!((denied[0], denied[4]), (0, 0), "{flavor}: {denied:?}");
    assert!(
        (59_000..=60_000).contains(&denied[2]),
        "{flavor}: the wait is until the first lease ends: {denied:?}"
    );
    assert_eq!(
        get(&mut con, "s"),
        before,
        "{flavor}: a denial writes nothing"
    );
    let seen = slots(&mut con, "s");
    assert_eq!(seen[0], 2, "{flavor}: {seen:?}");
    assert!((59_000..=60_000).contains(&seen[1]), "{flavor}: {seen:?}");
    // With TICKET the slot comes after the ticket.
    let other = take_any(
        &mut con,
        "t",
        &format!("{QUOTA} TICKET INFLIGHT 1 LEASE 1000"),
    );
    assert_eq!(other.len(), 6, "{flavor}: {other:?}");
    assert!(other[4] > 0 && other[5] > 0, "{flavor}: {other:?}");
    // The key lives until the last lease ends.
    assert!(pttl(&mut con, "s") > 59_000, "{flavor}");
}

fn mtake_takes_its_slot_in_the_first_key(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let mtake = |con: &mut Connection, options: &str| {
        ints(
            &run(
                con,
                &format!("THROTTLE.MTAKE 2 {{m}}a {{m}}b {QUOTA} 1 10 1 1 {options}"),
            )
            .expect("THROTTLE.MTAKE"),
        )
    };
    let granted = mtake(&mut con, "TICKET INFLIGHT 1 LEASE 60000");
    // granted, wait, two pairs, two tickets, then the slot.
    assert_eq!((granted.len(), granted[0]), (9, 1), "{flavor}: {granted:?}");
    assert!(granted[8] > 0, "{flavor}: a slot: {granted:?}");
    assert_eq!(slots(&mut con, "{m}a")[0], 1, "{flavor}: in the first key");
    let second = ints(&run(&mut con, "THROTTLE.SLOTS {m}b 10 1").expect("SLOTS"));
    assert_eq!(second, [0, 0], "{flavor}: none in the second");
    let before = (get(&mut con, "{m}a"), get(&mut con, "{m}b"));
    // The slot held: denied, nothing written to either key, the wait until the lease ends.
    let denied = mtake(&mut con, "INFLIGHT 1 LEASE 60000");
    // Slot 0, then what held it back: the slot (4).
    assert_eq!(
        (denied.len(), denied[0], denied[6], denied[7]),
        (8, 0, 0, 4),
        "{flavor}: {denied:?}"
    );
    assert!(
        (59_000..=60_000).contains(&denied[1]),
        "{flavor}: {denied:?}"
    );
    assert_eq!(
        (get(&mut con, "{m}a"), get(&mut con, "{m}b")),
        before,
        "{flavor}"
    );
    // RENEW and RELEASE by the id, on the first key; then a slot again.
    assert_eq!(renew(&mut con, "{m}a", granted[8], 5000), 1, "{flavor}");
    assert_eq!(release(&mut con, "{m}a", granted[8]), 1, "{flavor}");
    let again = mtake(&mut con, "INFLIGHT 1 LEASE 1000");
    assert_eq!(again[0], 1, "{flavor}: {again:?}");
    assert!(again[6] > granted[8], "{flavor}: a new id: {again:?}");
}

fn a_lease_runs_out(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let args = format!("{QUOTA} TOKENS 0 INFLIGHT 1 LEASE 500");
    let first = take_any(&mut con, "l", &args);
    assert_eq!(first[0], 1, "{flavor}: {first:?}");
    assert_eq!(take_any(&mut con, "l", &args)[0], 0, "{flavor}: held");
    sleep(Duration::from_millis(600));
    assert_eq!(slots(&mut con, "l"), [0, 0], "{flavor}: ran out");
    // A slot taken with no tokens left a full bucket: the key expired with its lease.
    assert!(
        !exists(&mut con, "l"),
        "{flavor}: the key outlived its last lease"
    );
    let second = take_any(&mut con, "l", &args);
    assert_eq!(second[0], 1, "{flavor}: {second:?}");
    assert!(
        second[4] > first[4],
        "{flavor}: a new id: {first:?} {second:?}"
    );
    // The late holder learns it lost its slot.
    assert_eq!(renew(&mut con, "l", first[4], 1000), 0, "{flavor}");
    assert_eq!(release(&mut con, "l", first[4]), 0, "{flavor}");
    assert_eq!(
        slots(&mut con, "l")[0],
        1,
        "{flavor}: the newer slot is still held"
    );
}

fn renew_and_release(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let args = format!("{QUOTA} TOKENS 0 INFLIGHT 2 LEASE 1000");
    let a = take_any(&mut con, "r", &args)[4];
    let b = take_any(&mut con, "r", &args)[4];
    sleep(Duration::from_millis(400));
    assert_eq!(renew(&mut con, "r", a, 60_000), 1, "{flavor}");
    sleep(Duration::from_millis(800));
    // `b` ran out, `a` was renewed.
    let seen = slots(&mut con, "r");
    assert_eq!(seen[0], 1, "{flavor}: {seen:?}");
    assert!(seen[1] > 59_000, "{flavor}: {seen:?}");
    assert_eq!(renew(&mut con, "r", b, 60_000), 0, "{flavor}: lost");
    assert_eq!(release(&mut con, "r", a), 1, "{flavor}");
    assert_eq!(release(&mut con, "r", a), 0, "{flavor}: idempotent");
    // The last slot released from a full bucket: the key is gone, as a give-back deletes it.
    assert!(!exists(&mut con, "r"), "{flavor}");
    // With tokens taken, the release leaves the bucket's 8-byte state.
    let c = take_any(
        &mut con,
        "r2",
        &format!("{QUOTA} TOKENS 50 INFLIGHT 1 LEASE 60000"),
    )[4];
    assert_eq!(release(&mut con, "r2", c), 1, "{flavor}");
    assert_eq!(get(&mut con, "r2").map(|v| v.len()), Some(8), "{flavor}");
    let ttl = pttl(&mut con, "r2");
    assert!(
        (0..=5001).contains(&ttl),
        "{flavor}: expires when full again: {ttl}"
    );
}

fn bad_calls_write_nothing(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let _: () = query(&mut con, redis::cmd("RPUSH").arg("list").arg("x"));
    let _: () = query(&mut con, redis::cmd("SET").arg("text").arg("hello"));
    for (words, want) in [
        (
            "THROTTLE.TAKE b 100 10 INFLIGHT 0 LEASE 1",
            "ERR INFLIGHT must be",
        ),
        (
            "THROTTLE.TAKE b 100 10 INFLIGHT 1025 LEASE 1",
            "ERR INFLIGHT must be",
        ),
        (
            "THROTTLE.TAKE b 100 10 INFLIGHT 1 LEASE 0",
            "ERR the lease must be",
        ),
        (
            "THROTTLE.TAKE b 100 10 INFLIGHT 1",
            "ERR INFLIGHT and LEASE go together",
        ),
        (
            "THROTTLE.TAKE b 100 10 LEASE 1",
            "ERR INFLIGHT and LEASE go together",
        ),
        ("THROTTLE.TAKE b 100 10 LINE 100", "ERR LINE needs INFLIGHT"),
        (
            "THROTTLE.TAKE b 100 10 INFLIGHT 1 LEASE 9 WAITER 3",
            "ERR WAITER needs LINE",
        ),
        (
            "THROTTLE.TAKE b 100 10 FLOOR 1 INFLIGHT 1 LEASE 9 LINE 100",
            "ERR LINE does not go with FLOOR",
        ),
        (
            "THROTTLE.TAKE b 100 10 INFLIGHT 1 LEASE 9 LINE 0",
            "ERR LINE's place_ms must be",
        ),
        (
            "THROTTLE.TAKE b 100 10 INFLIGHT 1 LEASE 9 LINE 10 WAITER x",
            "ERR slot must be",
        ),
        ("THROTTLE.RENEW b 100 10 x 1000", "ERR slot must be"),
        ("THROTTLE.RENEW b 100 10 1 0", "ERR the lease must be"),
        ("THROTTLE.RELEASE b 100 10 -1", "ERR slot must be"),
        ("THROTTLE.RELEASE b 0 10 1", "ERR capacity must be"),
        ("THROTTLE.RELEASE list 100 10 1", "WRONGTYPE"),
        (
            "THROTTLE.RENEW text 100 10 1 1000",
            "ERR the key holds a string that is not",
        ),
        (
            "THROTTLE.SLOTS text 100 10",
            "ERR the key holds a string that is not",
        ),
        ("THROTTLE.RENEW b 100 10 1", "ERR wrong number of arguments"),
    ] {
        let error = run(&mut con, words).expect_err(words);
        assert!(error.starts_with(want), "{flavor}: {words}: {error}");
    }
    assert!(!exists(&mut con, "b"), "{flavor}: an error wrote the key");
    assert_eq!(get(&mut con, "text"), Some(b"hello".to_vec()), "{flavor}");
    // A slot id that was never given: 0, nothing written.
    assert_eq!(release(&mut con, "b", 12345), 0, "{flavor}");
    assert_eq!(renew(&mut con, "b", 0, 1000), 0, "{flavor}");
    assert!(!exists(&mut con, "b"), "{flavor}");
}

fn replicas_get_the_resulting_state(flavor: Flavor) {
    let pair = Pair::start(flavor);
    let mut con = pair.primary.conn();
    let args = format!("{QUOTA} TOKENS 3 INFLIGHT 2 LEASE 60000");
    let a = take_any(&mut con, "p", &args)[4];
    let b = take_any(&mut con, "p", &args)[4];
    pair.assert_replica_same("two slots taken");
    pair.assert_replicates_nothing("a denial for the slots", |con| {
        assert_eq!(take_any(con, "p", &args)[0], 0);
    });
    pair.assert_replicates_nothing("a late release, a SLOTS", |con| {
        assert_eq!(release(con, "p", a + b), 0);
        assert_eq!(slots(con, "p")[0], 2);
    });
    assert_eq!(renew(&mut con, "p", a, 120_000), 1);
    assert_eq!(release(&mut con, "p", b), 1);
    pair.assert_replica_same("renewed and released");
    // The line: a join, a hand-off at a release, a look: each replicated as the state.
    let in_line = format!("{QUOTA} INFLIGHT 1 LEASE 60000 LINE 60000");
    let holder = take_any(&mut con, "q", &in_line)[4];
    let waiter = take_any(&mut con, "q", &in_line);
    assert_eq!(
        (waiter[0], waiter[5], waiter[6]),
        (0, 1, 20),
        "{flavor}: in line"
    );
    pair.assert_replica_same("a caller in line");
    assert_eq!(release(&mut con, "q", holder), 1);
    pair.assert_replica_same("the slot handed to the head of the line");
    let looked = take_any(&mut con, "q", &format!("{in_line} WAITER {}", waiter[4]));
    assert_eq!(
        (looked[0], looked[4]),
        (1, waiter[4]),
        "{flavor}: handed over"
    );
    // The read-only command answers on the replica; the writes are refused there.
    let mut rcon = pair.replica.conn();
    assert_eq!(slots(&mut rcon, "p")[0], 1, "{flavor}");
    let error = send(&mut rcon, &line(&format!("THROTTLE.RELEASE p {QUOTA} {a}")))
        .expect_err("RELEASE on a read-only replica");
    assert!(error.starts_with("READONLY"), "{flavor}: {error}");
}

fn memory_is_bounded_by_the_cap(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    // One token per 1000 s, burst 10 000: the key never expires during the test.
    let args = "10000 0.001 INFLIGHT 8 LEASE 600000";
    let mut held: Vec<i64> = (0..8).map(|_| take_any(&mut con, "m", args)[4]).collect();
    assert_eq!(
        take_any(&mut con, "m", args)[0],
        0,
        "{flavor}: the cap is full"
    );
    let full = memory(&mut con, "m");
    let len = get(&mut con, "m").map(|v| v.len());
    for i in 0..300 {
        let slot = held.remove(i % held.len());
        let freed = int(
            &run(&mut con, &format!("THROTTLE.RELEASE m 10000 0.001 {slot}")).expect("RELEASE"),
        );
        assert_eq!(freed, 1, "{flavor}");
        let taken = take_any(&mut con, "m", args);
        assert_eq!(taken[0], 1, "{flavor}: {taken:?}");
        held.push(taken[4]);
    }
    assert_eq!(get(&mut con, "m").map(|v| v.len()), len, "{flavor}");
    assert_eq!(
        memory(&mut con, "m"),
        full,
        "{flavor}: MEMORY USAGE after 300 cycles"
    );
}

/// The documented ACL lines (docs/trust-model.md, the module's users) reach calls in flight:
/// the fleet's user takes, renews and releases a slot; the read-only user reads the slots and
/// is refused a renewal.
fn the_documented_acl_lines_reach_the_slots(flavor: Flavor) {
    const TRUST_MODEL: &str = include_str!("../../docs/trust-model.md");
    let documented = |user: &str, with: &str| -> Vec<String> {
        let line = TRUST_MODEL
            .lines()
            .find(|l| l.starts_with(&format!("ACL SETUSER {user} ")) && l.contains(with))
            .unwrap_or_else(|| panic!("no {user} line with {with} in docs/trust-model.md"));
        line.split(' ').skip(2).map(str::to_owned).collect()
    };
    let server = Server::start(flavor);
    let mut admin = server.conn();
    for (user, with) in [
        ("throttle-rw", "+throttle.take"),
        ("throttle-ro", "+throttle.peek"),
    ] {
        let _: () = query(
            &mut admin,
            redis::cmd("ACL").arg("SETUSER").arg(documented(user, with)),
        );
    }
    let as_user = |user: &str| -> Connection {
        let mut con = server.conn();
        let _: () = query(&mut con, redis::cmd("AUTH").arg(user).arg("secret"));
        con
    };
    let mut fleet = as_user("throttle-rw");
    let taken = take_any(
        &mut fleet,
        "quota:acl",
        &format!("{QUOTA} INFLIGHT 1 LEASE 60000"),
    );
    assert_eq!(taken[0], 1, "{flavor}: {taken:?}");
    assert_eq!(
        renew(&mut fleet, "quota:acl", taken[4], 60_000),
        1,
        "{flavor}"
    );
    let mut dashboard = as_user("throttle-ro");
    assert_eq!(slots(&mut dashboard, "quota:acl")[0], 1, "{flavor}");
    let refused = run(
        &mut dashboard,
        &format!("THROTTLE.RENEW quota:acl {QUOTA} {} 60000", taken[4]),
    )
    .expect_err("the read-only user renews nothing");
    assert!(refused.starts_with("NOPERM"), "{flavor}: {refused}");
    assert_eq!(release(&mut fleet, "quota:acl", taken[4]), 1, "{flavor}");
}
