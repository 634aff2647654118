//! THROTTLE.DEBIT on every server: the tokens a call turned out to cost are taken after it,
//! whatever the bucket holds: into debt if need be (later takes wait it out), no further than
//! 20 years. A debit reaches replicas and the AOF as the resulting state; a debit of 0
//! propagates nothing; every malformed call gets its exact error.

use throttle_e2e::{
    aof_server, assert_aof_holds_effects, assert_reply, bad, bad_keys, bad_quotas, bad_wholes,
    check_battery, debit, errors, exec, get, ints, line, per_server, send, BadCall, Flavor, Pair,
    Server,
};

per_server!(
    a_debit_goes_into_debt_and_takes_wait_it_out,
    no_deeper_than_twenty_years,
    replicas_and_the_aof_get_the_state,
    bad_input_battery,
);

/// Capacity 10 at 10/s (100 ms a token), in one MULTI: 3 debited from a full bucket leaves
/// 7 ([7, 300]); 22 more go 15 tokens into debt ([0, 2500]: full again in 2.5 s); a take
/// waits until the debt is paid and a token refilled (1600 ms); PEEK agrees; a debit of 0
/// changes nothing. More than the capacity at once is accepted: the cost was known only
/// after the call.
fn a_debit_goes_into_debt_and_takes_wait_it_out(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.DEBIT d 10 10 3"),
            line("THROTTLE.DEBIT d 10 10 22"),
            line("THROTTLE.TAKE d 10 10"),
            line("THROTTLE.PEEK d 10 10"),
            line("GET d"),
            line("THROTTLE.DEBIT d 10 10 0"),
            line("GET d"),
            line("THROTTLE.DEBIT big 10 10 1000"),
        ],
    );
    assert_reply(&ints(&replies[0]), &[7, 300], &[1], slack, "3 of 10");
    assert_reply(&ints(&replies[1]), &[0, 2500], &[1], slack, "22 more");
    assert_reply(
        &ints(&replies[2]),
        // Denied for the tokens (1).
        &[0, 0, 1600, 2500, 1],
        &[2, 3],
        slack,
        "a take in debt",
    );
    assert_reply(
        &ints(&replies[3]),
        &[1, 0, 0, 2500, 0, 10_000],
        &[3],
        slack,
        "PEEK in debt",
    );
    assert_reply(&ints(&replies[5]), &[0, 2500], &[1], slack, "a debit of 0");
    assert_eq!(replies[4], replies[6], "a debit of 0 changed the state");
    assert_reply(
        &ints(&replies[7]),
        &[0, 100_000],
        &[1],
        slack,
        "1000 tokens from a bucket of 10",
    );
}

/// Capacity 1 at one token per 10^6 s: 630 tokens (19.98 years) are accepted, one more is
/// refused with the error that says what to do, and the bucket is as it was.
fn no_deeper_than_twenty_years(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let reply = debit(&mut con, "deep", "1 0.000001 630");
    assert_eq!(reply[0], 0, "{reply:?}");
    assert!(
        (629_999_999_000..=630_000_000_000).contains(&reply[1]),
        "630 tokens of 10^6 s: {reply:?}"
    );
    let before = get(&mut con, "deep");
    let error = send(&mut con, &line("THROTTLE.DEBIT deep 1 0.000001 1")).expect_err("too deep");
    assert_eq!(error, errors::TOO_DEEP);
    assert_eq!(get(&mut con, "deep"), before, "a refused debit wrote");
}

/// A debit reaches the replica and the AOF as the resulting state (SET ... PXAT, never the
/// command); a debit of 0 propagates nothing.
fn replicas_and_the_aof_get_the_state(flavor: Flavor) {
    let pair = Pair::start(flavor);
    let mut con = pair.primary.conn();
    assert_eq!(debit(&mut con, "rd", "10 0.01 25")[0], 0);
    pair.assert_replica_same("after a debit");
    assert_eq!(get(&mut pair.replica.conn(), "rd"), get(&mut con, "rd"));
    pair.assert_replicates_nothing("a debit of 0", |con| {
        assert_eq!(debit(con, "rd", "10 0.01 0")[0], 0);
        assert_eq!(debit(con, "missing", "10 0.01 0"), [10, 0]);
    });

    let server = aof_server(flavor);
    let mut con = server.conn();
    assert_eq!(debit(&mut con, "aof:d", "10 0.01 4")[0], 6);
    assert_aof_holds_effects(server.dir(), "pxat", "after a debit");
}

/// Every malformed THROTTLE.DEBIT gets its exact error, and nothing changes.
fn bad_input_battery(flavor: Flavor) {
    let server = Server::start(flavor);
    let arity = errors::arity("throttle.debit");
    let mut calls: Vec<BadCall> = vec![
        bad(&[], &*arity),
        bad(&[b"k", b"8", b"9"], &*arity),
        bad(&[b"k", b"8", b"9", b"1", b"2"], &*arity),
        bad(
            &[b"k", b"8", b"9", b"1000000000000001"],
            errors::DEBIT_TOKENS,
        ),
        bad(&[b"k", b"8", b"9", b"1\x00"], errors::DEBIT_TOKENS),
        bad(&[b"k", b"1", b"0.000001", b"631"], errors::TOO_DEEP),
        bad(&[b"k", b"1", b"1", b"1000000000000000"], errors::TOO_DEEP),
        // The arguments are checked before the key is read.
        bad(&[b"t:list", b"8", b"9", b"-1"], errors::DEBIT_TOKENS),
    ];
    calls.extend(bad_wholes(&[b"k", b"8", b"9"], &[], errors::DEBIT_TOKENS));
    calls.extend(bad_quotas(&[b"1"]));
    calls.extend(bad_keys(&[b"8", b"9", b"1"]));
    let checked = check_battery(&server, "THROTTLE.DEBIT", &calls);
    let mut con = server.conn();
    assert_eq!(debit(&mut con, "after", "8 8 8"), [0, 1000]);
    println!("{flavor}: {checked} malformed THROTTLE.DEBIT calls checked");
}
