//! The supplier's pushback meeting the other commands, on every server (the hostile tester's
//! cases; the Lua twin is held to the same by `script_matches_module`'s table):
//! - a cut too deep for the bucket to hold a call's tokens: the denial's wait is until the
//!   recovering rate holds them, and a reservation is granted for then;
//! - a give-back inside a pause frees nothing the pause holds back;
//! - no reservation leaves a state more than 20 years ahead (which would read as no bucket);
//! - a later cut never loosens an earlier one.

use std::time::{Duration, Instant};

use redis::Value;
use throttle_e2e::{
    assert_reply, cut, exec, ints, line, peek_full, per_server, query, Flavor, Server,
};

per_server!(
    a_cut_too_deep_waits_for_the_recovery,
    a_give_back_never_ends_a_pause,
    no_reservation_writes_past_20_years,
    a_later_cut_never_loosens_an_earlier_one,
);

/// Capacity 1 at 10/s cut to half, recovering over 30 s: one token costs 200 ms of a 100 ms
/// fill, so the bucket holds half a token until the rate is full again, 30 s after the cut.
fn a_cut_too_deep_waits_for_the_recovery(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.CUT a 1 10 1 0.5 30000"),
            line("THROTTLE.TAKE a 1 10"),
            line("THROTTLE.TAKE a 1 10 MAXWAIT 30000"),
            line("THROTTLE.TAKE a 1 10 MAXWAIT 60000"),
        ],
    );
    let want: [[i64; 4]; 3] = [
        [0, 0, 30_000, 0],
        [1, 0, 30_000, 30_200],
        [1, 0, 30_200, 30_400],
    ];
    // The denial ends with what held it back: the tokens, and the cut's 1 ms pause where the
    // clock is frozen for the MULTI (Redis 7.0's moves on: the pause may be over).
    let denied = ints(&replies[1]);
    let reasons: &[i64] = if slack == 0 { &[9] } else { &[1, 9] };
    assert!(
        denied.len() == 5 && reasons.contains(&denied[4]),
        "{flavor}: {denied:?}"
    );
    for (reply, want) in replies[1..].iter().zip(want) {
        assert_reply(
            &ints(reply)[..4],
            &want,
            &[2, 3],
            slack,
            "a take of the cut bucket",
        );
    }
}

/// Capacity 10 at 10/s: emptied, 10 more reserved for 1 s from now, then paused for 1 s by
/// another replica (the pause's own state, T0 + 1.9 s, is before the reservation's, T0 + 2 s).
/// The reserved call gives back inside the pause: one token comes back (what lies after the
/// pause's state), and a take still waits for the pause.
fn a_give_back_never_ends_a_pause(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (replies, _) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.TAKE b 10 10 TOKENS 10"),
            line("THROTTLE.TAKE b 10 10 TOKENS 10 MAXWAIT 1000 TICKET"),
            line("THROTTLE.PAUSE b 10 10 1000"),
        ],
    );
    let ticket = ints(&replies[1])[4];
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line(&format!("THROTTLE.GIVE b 10 10 10 {ticket}")),
            line("THROTTLE.TAKE b 10 10"),
            line("THROTTLE.PEEK b 10 10"),
        ],
    );
    assert_eq!(
        replies[0],
        Value::Int(1),
        "only the token after the pause's state"
    );
    let take = ints(&replies[1]);
    let paused_ms = ints(&replies[2])[4];
    assert!(paused_ms > 0, "still paused: {replies:?}");
    assert_eq!(take[0], 0, "a take inside the pause was granted: {take:?}");
    assert!(
        take[2] >= paused_ms - slack,
        "the take waits {} ms of a pause of {paused_ms} ms",
        take[2]
    );
}

/// Capacity 300 at one token per 1e6 s, cut to 1 % recovering over 10 years: 5 tokens cost
/// 15.8 years now, and a reservation of them would leave a state 22 years ahead: refused, by
/// TAKE and MTAKE. 4 fit (19 years), and the bucket still reads as one.
fn no_reservation_writes_past_20_years(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let quota = "300 0.000001";
    let max = "MAXWAIT 315360000000";
    let (replies, _) = exec(
        &mut con,
        flavor,
        &[
            line(&format!("THROTTLE.CUT c {quota} 1 0.01 315360000000")),
            line(&format!("THROTTLE.TAKE c {quota} TOKENS 5 {max}")),
            line(&format!("THROTTLE.MTAKE 1 c {quota} 5 {max}")),
            line(&format!("THROTTLE.MTAKE 1 c {quota} 4 {max}")),
            line(&format!("THROTTLE.TAKE c {quota} TOKENS 0")),
            line("PTTL c"),
        ],
    );
    assert_eq!(ints(&replies[1])[0], 0, "TAKE of 5: {replies:?}");
    assert_eq!(ints(&replies[2])[0], 0, "MTAKE of 5: {replies:?}");
    assert_eq!(ints(&replies[3])[0], 1, "MTAKE of 4: {replies:?}");
    assert_eq!(ints(&replies[4])[0], 1, "the bucket reads as one");
    let Value::Int(ttl_ms) = replies[5] else {
        panic!("PTTL: {replies:?}")
    };
    assert!(
        (0..=throttle_bucket::MAX_DEBT_NS / 1_000_000).contains(&ttl_ms),
        "the state expires {ttl_ms} ms ahead"
    );
}

/// A deep cut recovering over 10 minutes, then (once its 1 ms pause is over) a mild one
/// recovering in 1 ms: the rate stays at 1 %, and recovers when the first would have.
fn a_later_cut_never_loosens_an_earlier_one(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let first = Instant::now();
    let deep = cut(&mut con, "d", "10 10 1 0.01 600000");
    assert_eq!((deep[0], deep[2]), (1, 100), "cut to 1 %: {deep:?}");
    let deadline = Instant::now() + Duration::from_secs(2);
    while peek_full(&mut con, "d", "10 10")[4] > 0 {
        assert!(Instant::now() < deadline, "the 1 ms pause never ended");
        std::thread::sleep(Duration::from_millis(1));
    }
    let second = cut(&mut con, "d", "10 10 1 1 1");
    let elapsed_ms = i64::try_from(first.elapsed().as_millis()).unwrap_or(i64::MAX);
    assert_eq!(
        (second[0], second[2]),
        (1, 100),
        "cut again, at 1 %: {second:?}"
    );
    assert!(
        (600_000 - elapsed_ms - 1..=600_000).contains(&second[3]),
        "recovered in {} ms, {elapsed_ms} ms after the first cut",
        second[3]
    );
    std::thread::sleep(Duration::from_millis(5));
    let factor: Vec<i64> = query(&mut con, &line("THROTTLE.PEEK d 10 10"));
    assert_eq!(
        factor[5], 100,
        "still 1 % after the second cut's recovery time"
    );
}
