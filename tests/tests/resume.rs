//! THROTTLE.RESUME on every server: an operator ends a bucket's pause (and its cut) within one
//! round trip, keeping the state instant (no refill) and every slot held, where DEL refilled the
//! bucket and dropped the slot table. A bucket with nothing to end is not written; replicas get
//! the resulting state; every malformed call gets its exact error.

use throttle_e2e::{
    bad, bad_keys, bad_quotas, check_battery, errors, int, ints, ok, per_server, pexpiretime,
    query, BadCall, Connection, Flavor, Pair, Server,
};

per_server!(
    a_paused_bucket_resumes_keeping_its_tokens_and_slots,
    a_cut_is_ended_and_nothing_to_end_writes_nothing,
    replicas_get_the_resumed_state,
    bad_input_battery,
);

fn raw(con: &mut Connection, key: &str) -> Vec<u8> {
    query(con, redis::cmd("GET").arg(key))
}

/// Capacity 10 at 10/s: 3 tokens and a slot taken, a second slot, then a 30 s pause (the
/// supplier's Retry-After). One RESUME later: no pause, the same tokens (the state instant's 8
/// bytes are the same, and PEEK sees as many), the same two slots (the slot table's bytes are
/// the same, and SLOTS sees them).
fn a_paused_bucket_resumes_keeping_its_tokens_and_slots(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    ok(
        &mut con,
        "THROTTLE.TAKE r 10 10 TOKENS 3 INFLIGHT 10 LEASE 600000",
    );
    ok(
        &mut con,
        "THROTTLE.TAKE r 10 10 TOKENS 0 INFLIGHT 10 LEASE 600000",
    );
    assert_eq!(int(&ok(&mut con, "THROTTLE.PAUSE r 10 10 30000")), 30_000);
    let peek_before = ints(&ok(&mut con, "THROTTLE.PEEK r 10 10"));
    let slots_before = ints(&ok(&mut con, "THROTTLE.SLOTS r 10 10"));
    let before = raw(&mut con, "r");
    assert!(peek_before[4] > 29_000, "paused: {peek_before:?}");
    assert_eq!(slots_before[0], 2, "{slots_before:?}");
    assert_eq!(
        before.len(),
        32 + 8 + 2 * 16,
        "a paused state with two slots"
    );

    assert_eq!(
        int(&ok(&mut con, "THROTTLE.RESUME r 10 10")),
        1,
        "one round trip"
    );

    let peek_after = ints(&ok(&mut con, "THROTTLE.PEEK r 10 10"));
    let slots_after = ints(&ok(&mut con, "THROTTLE.SLOTS r 10 10"));
    let after = raw(&mut con, "r");
    assert_eq!(peek_after[4], 0, "no pause: {peek_after:?}");
    assert_eq!(peek_after[5], 10_000, "the full rate: {peek_after:?}");
    assert_eq!(peek_after[1], peek_before[1], "the same tokens");
    assert_eq!(slots_after[0], slots_before[0], "the same slots held");
    assert_eq!(after.len(), before.len());
    assert_eq!(
        after[..8],
        before[..8],
        "the state instant as it was: no refill"
    );
    assert_eq!(after[8..32], [0; 24], "no pause, no cut stored");
    assert_eq!(after[32..], before[32..], "the slot table as it was");
    // The slots still release by their ids.
    assert_eq!(int(&ok(&mut con, "THROTTLE.RESUME r 10 10")), 0);
    assert_eq!(raw(&mut con, "r"), after, "a second resume wrote nothing");
}

/// A cut whose pause is over is ended (the rate is the configured one at once); a missing key,
/// a plain bucket and a resumed one have nothing to end: 0, and the key is not touched (not
/// even its expiry).
fn a_cut_is_ended_and_nothing_to_end_writes_nothing(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    ok(&mut con, "THROTTLE.TAKE c 10 10 TOKENS 10");
    ok(&mut con, "THROTTLE.CUT c 10 10 1 0.5 600000");
    std::thread::sleep(std::time::Duration::from_millis(5));
    let peek = ints(&ok(&mut con, "THROTTLE.PEEK c 10 10"));
    assert_eq!(peek[4], 0, "the pause is over: {peek:?}");
    assert!(peek[5] < 10_000, "still cut: {peek:?}");
    let before = raw(&mut con, "c");
    assert_eq!(int(&ok(&mut con, "THROTTLE.RESUME c 10 10")), 1);
    let peek = ints(&ok(&mut con, "THROTTLE.PEEK c 10 10"));
    assert_eq!(peek[5], 10_000, "the full rate: {peek:?}");
    let after = raw(&mut con, "c");
    assert_eq!(after.len(), 8, "back to a plain state");
    assert_eq!(after[..], before[..8], "the same instant");

    ok(&mut con, "THROTTLE.TAKE plain 10 10 TOKENS 4");
    let plain = raw(&mut con, "plain");
    let expiry = pexpiretime(&mut con, "plain");
    for key in ["plain", "missing", "c"] {
        let value = raw(&mut con, key);
        assert_eq!(
            int(&ok(&mut con, &format!("THROTTLE.RESUME {key} 10 10"))),
            0
        );
        assert_eq!(raw(&mut con, key), value, "{key}");
    }
    assert_eq!(raw(&mut con, "plain"), plain);
    assert_eq!(pexpiretime(&mut con, "plain"), expiry);
    let exists: i64 = query(&mut con, redis::cmd("EXISTS").arg("missing"));
    assert_eq!(exists, 0, "a resume of nothing creates no key");
}

/// The replica gets the resumed state (SET ... PXAT), and a resume with nothing to end sends
/// it nothing.
fn replicas_get_the_resumed_state(flavor: Flavor) {
    let pair = Pair::start(flavor);
    let mut con = pair.primary.conn();
    ok(
        &mut con,
        "THROTTLE.TAKE rr 10 1 TOKENS 2 INFLIGHT 4 LEASE 600000",
    );
    ok(&mut con, "THROTTLE.PAUSE rr 10 1 600000");
    pair.assert_replica_same("after a pause");
    assert_eq!(int(&ok(&mut con, "THROTTLE.RESUME rr 10 1")), 1);
    pair.assert_replica_same("after a resume");
    let mut rcon = pair.replica.conn();
    assert_eq!(raw(&mut rcon, "rr"), raw(&mut con, "rr"));
    assert_eq!(pexpiretime(&mut rcon, "rr"), pexpiretime(&mut con, "rr"));
    pair.assert_replicates_nothing("resumes with nothing to end", |con| {
        assert_eq!(int(&ok(con, "THROTTLE.RESUME rr 10 1")), 0);
        assert_eq!(int(&ok(con, "THROTTLE.RESUME none 10 1")), 0);
    });
}

fn bad_input_battery(flavor: Flavor) {
    let server = Server::start(flavor);
    let arity = errors::arity("throttle.resume");
    let mut calls: Vec<BadCall> = vec![
        bad(&[], &*arity),
        bad(&[b"k"], &*arity),
        bad(&[b"k", b"8"], &*arity),
        bad(&[b"k", b"8", b"9", b"0"], &*arity),
        bad(&[b"k", b"8", b"9", b"1000"], &*arity),
        // The arguments are checked before the key is read.
        bad(&[b"t:list", b"8", b"0"], errors::RATE),
    ];
    calls.extend(bad_quotas(&[]));
    calls.extend(bad_keys(&[b"8", b"9"]));
    let checked = check_battery(&server, "THROTTLE.RESUME", &calls);
    println!("{flavor}: {checked} malformed THROTTLE.RESUME calls checked");
}
