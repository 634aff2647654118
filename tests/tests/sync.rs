//! THROTTLE.SYNC on every server: the supplier said how much of its quota is left. The bucket
//! is lowered to hold at most that, never raised (a count above the bucket's, or the same,
//! writes nothing), and with nothing left and a reset it is paused until then. A lowering
//! reaches replicas as the resulting state; a sync that changes nothing propagates nothing;
//! every malformed call gets its exact error.

use throttle_e2e::{
    assert_reply, bad, bad_keys, bad_quotas, bad_wholes, check_battery, errors, exec, exists, get,
    int, ints, line, per_server, sync, BadCall, Flavor, Pair, Server,
};

per_server!(
    lowered_never_raised_and_paused_at_zero,
    replicas_get_a_lowering_and_a_no_op_nothing,
    bad_input_battery,
);

/// Capacity 10 at 10/s (100 ms a token), in one MULTI:
/// - 3 left: lowered ([1, 3, 700]: three tokens, full in 700 ms); then 5 and 3 again change
///   nothing ([0, 3, 700]);
/// - 0 left, reset in 2 s: paused until then, and full nine tokens later ([1, 0, 2900]);
///   PEEK says paused 2000 ms; a shorter reset changes nothing;
/// - 0 left, no reset: emptied, not paused ([1, 0, 1000]), the 8-byte state;
/// - a missing key and a count at or above the capacity: nothing, and no key.
fn lowered_never_raised_and_paused_at_zero(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.SYNC s 10 10 3 0"),
            line("THROTTLE.SYNC s 10 10 5 0"),
            line("THROTTLE.SYNC s 10 10 3 60000"),
            line("STRLEN s"),
            line("THROTTLE.SYNC s 10 10 0 2000"),
            line("THROTTLE.PEEK s 10 10"),
            line("THROTTLE.SYNC s 10 10 0 1000"),
            line("STRLEN s"),
            line("THROTTLE.SYNC z 10 10 0 0"),
            line("STRLEN z"),
            line("THROTTLE.SYNC m 10 10 10 0"),
            line("THROTTLE.SYNC m 10 10 99 5000"),
            line("EXISTS m"),
        ],
    );
    let durations = &[2];
    for (i, want, what) in [
        (0, [1, 3, 700], "3 left"),
        (1, [0, 3, 700], "5 left: never raised"),
        (
            2,
            [0, 3, 700],
            "3 left again, with a reset: no pause while some remain",
        ),
        (4, [1, 0, 2900], "0 left, reset in 2 s"),
        (6, [0, 0, 2900], "0 left, a shorter reset"),
        (8, [1, 0, 1000], "0 left, no reset"),
        (10, [0, 10, 0], "a full bucket, 10 left"),
        (11, [0, 10, 0], "a full bucket, 99 left"),
    ] {
        assert_reply(&ints(&replies[i]), &want, durations, slack, what);
    }
    assert_eq!(int(&replies[3]), 8, "a lowered bucket, not paused");
    assert_reply(
        &ints(&replies[5]),
        &[1, 0, 0, 2900, 2000, 10_000],
        &[3, 4],
        slack,
        "PEEK after the reset",
    );
    assert_eq!(int(&replies[7]), 32, "a paused bucket");
    assert_eq!(int(&replies[9]), 8, "an emptied bucket, not paused");
    assert_eq!(int(&replies[12]), 0, "a sync created a full bucket's key");
}

/// A primary and a replica: a lowering and a pause reach the replica as the very state;
/// syncs that change nothing (the same count, a larger one, a missing key at capacity)
/// propagate nothing.
fn replicas_get_a_lowering_and_a_no_op_nothing(flavor: Flavor) {
    let pair = Pair::start(flavor);
    let mut con = pair.primary.conn();
    assert_eq!(sync(&mut con, "rs", "10 0.01 4 0")[..2], [1, 4]);
    pair.assert_replica_same("after a lowering");
    assert_eq!(sync(&mut con, "rz", "10 0.01 0 600000")[..2], [1, 0]);
    pair.assert_replica_same("after a pause");
    let mut rcon = pair.replica.conn();
    assert_eq!(get(&mut rcon, "rz"), get(&mut con, "rz"));
    pair.assert_replicates_nothing("syncs that change nothing", |con| {
        assert_eq!(sync(con, "rs", "10 0.01 4 0")[..2], [0, 4]);
        assert_eq!(sync(con, "rs", "10 0.01 9 0")[..2], [0, 4]);
        assert_eq!(sync(con, "rz", "10 0.01 0 1000")[..2], [0, 0]);
        assert_eq!(sync(con, "missing", "10 0.01 10 0"), [0, 10, 0]);
        assert!(!exists(con, "missing"));
    });
}

/// Every malformed THROTTLE.SYNC gets its exact error, and nothing changes.
fn bad_input_battery(flavor: Flavor) {
    let server = Server::start(flavor);
    let arity = errors::arity("throttle.sync");
    let mut calls: Vec<BadCall> = vec![
        bad(&[], &*arity),
        bad(&[b"k", b"8", b"9", b"3"], &*arity),
        bad(&[b"k", b"8", b"9", b"3", b"0", b"0"], &*arity),
        bad(
            &[b"k", b"8", b"9", b"1000000000000001", b"0"],
            errors::REMAINING,
        ),
        bad(&[b"k", b"8", b"9", b"3\xff", b"0"], errors::REMAINING),
        bad(&[b"k", b"8", b"9", b"3", b"1e3"], errors::RESET_MS),
        bad(&[b"k", b"8", b"9", b"3", b"315360000001"], errors::RESET_MS),
        // The arguments are checked before the key is read.
        bad(&[b"t:list", b"8", b"9", b"-1", b"0"], errors::REMAINING),
    ];
    calls.extend(bad_wholes(&[b"k", b"8", b"9"], &[b"0"], errors::REMAINING));
    calls.extend(bad_wholes(&[b"k", b"8", b"9", b"3"], &[], errors::RESET_MS));
    calls.extend(bad_quotas(&[b"3", b"0"]));
    calls.extend(bad_keys(&[b"8", b"9", b"3", b"0"]));
    let checked = check_battery(&server, "THROTTLE.SYNC", &calls);
    // The extremes are accepted, and the module still works after all that.
    let mut con = server.conn();
    assert_eq!(
        sync(&mut con, "after", "8 9 1000000000000000 315360000000"),
        [0, 8, 0]
    );
    assert_eq!(
        sync(&mut con, "after", "8 9 0 315360000000")[..2],
        [1, 0],
        "the longest reset"
    );
    println!("{flavor}: {checked} malformed THROTTLE.SYNC calls checked");
}
