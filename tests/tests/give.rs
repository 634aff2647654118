//! THROTTLE.TAKE ... TICKET and THROTTLE.GIVE on every server: the ticket is the bucket's
//! state after the take in µs (GET / 1000); a give-back returns its n tokens only while
//! nothing was taken after the take (once another call took, it returns nothing), never fills
//! past full, and a ticket gives back once; a missing key gives nothing. Replicas get the
//! resulting state, a give-back of 0 propagates nothing, and every malformed call gets its
//! exact error and changes nothing.

use std::time::{Duration, Instant};

use throttle_e2e::{
    assert_reply, bad, bad_keys, bad_quotas, bad_wholes, check_battery, errors, exec, exists, give,
    ints, line, num, peek, per_server, query, slack_ms, state, take_any, BadCall, Connection,
    Flavor, Pair, Server, NS_PER_MS,
};

per_server!(
    the_ticket_is_the_state_in_microseconds,
    a_give_back_right_away_returns_everything,
    tokens_taken_after_the_ticket_keep_it_from_giving_back,
    the_newest_reservation_gives_back_then_the_one_before,
    never_past_full_and_a_ticket_gives_back_once,
    a_missing_key_or_a_foreign_ticket_gives_nothing,
    replicas_get_the_given_back_state_and_a_give_of_0_nothing,
    bad_input_battery,
);

const MS: i64 = NS_PER_MS;
/// Capacity 10, one token every 100 s: nothing refills while a test runs.
const SLOW: &str = "10 0.01";
const INTERVAL: i64 = 100_000 * MS;

/// In one MULTI: the fifth element of every granted TAKE ... TICKET is the state GET reads
/// right after it, divided by 1000 (rounded down); 0 for TOKENS 0 and for a denial; no fifth
/// element without TICKET. The other four are those of a take without TICKET.
fn the_ticket_is_the_state_in_microseconds(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line(&format!("THROTTLE.TAKE t {SLOW} TOKENS 3 TICKET")),
            line("GET t"),
            line(&format!("THROTTLE.TAKE t {SLOW} ticket TOKENS 7")),
            line("GET t"),
            line(&format!("THROTTLE.TAKE t {SLOW} MAXWAIT 200000 Ticket")),
            line("GET t"),
            line(&format!("THROTTLE.TAKE t {SLOW} TOKENS 0 TICKET")),
            line(&format!("THROTTLE.TAKE t {SLOW} TICKET")),
            line(&format!("THROTTLE.TAKE t {SLOW}")),
        ],
    );
    let d = &[2, 3];
    let granted = [
        (0, [1, 7, 0, 300_000]),
        (2, [1, 0, 0, 1_000_000]),
        (4, [1, 0, 100_000, 1_100_000]),
    ];
    for (i, want) in granted {
        let reply = ints(&replies[i]);
        assert_eq!(reply.len(), 5, "TAKE ... TICKET: {reply:?}");
        assert_reply(&reply[..4], &want, d, slack, "TAKE ... TICKET");
        let stored = num(&replies[i + 1]);
        assert_eq!(
            reply[4],
            stored.div_euclid(1000),
            "the ticket of {reply:?}, state {stored}"
        );
    }
    assert_reply(
        &ints(&replies[6]),
        &[1, 0, 0, 1_100_000, 0],
        &[3],
        slack,
        "TOKENS 0 TICKET",
    );
    assert_reply(
        &ints(&replies[7]),
        // The ticket 0, then what held it back: the tokens (1).
        &[0, 0, 200_000, 1_100_000, 0, 1],
        d,
        slack,
        "a denied TAKE ... TICKET",
    );
    assert_reply(
        &ints(&replies[8]),
        &[0, 0, 200_000, 1_100_000, 1],
        d,
        slack,
        "no TICKET",
    );
}

/// A give-back with nothing taken after it returns all n: from a full bucket it is full
/// again; from a bucket in debt the state is back where it was before the take.
fn a_give_back_right_away_returns_everything(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let reply = take_any(&mut con, "full", &format!("{SLOW} TOKENS 4 TICKET"));
    assert_eq!(reply[..2], [1, 6]);
    assert_eq!(give(&mut con, "full", &format!("{SLOW} 4 {}", reply[4])), 4);
    assert_eq!(peek(&mut con, "full", SLOW), [1, 10, 0, 0], "full again");
    assert!(
        !exists(&mut con, "full"),
        "a bucket given back to full is deleted"
    );

    // RESP3: the same five integers, the same integer back.
    let mut resp3 = throttle_e2e::resp3(&server);
    let reply = take_any(&mut resp3, "resp3", &format!("{SLOW} TOKENS 2 TICKET"));
    assert_eq!(reply[..4], [1, 8, 0, 200_000], "over RESP3");
    assert_eq!(
        reply[4],
        state(&mut con, "resp3") / 1000,
        "the ticket over RESP3"
    );
    assert_eq!(
        give(&mut resp3, "resp3", &format!("{SLOW} 2 {}", reply[4])),
        2
    );

    let _ = take_any(&mut con, "debt", &format!("{SLOW} TOKENS 10"));
    let before = state(&mut con, "debt");
    let reply = take_any(
        &mut con,
        "debt",
        &format!("{SLOW} TOKENS 3 MAXWAIT 1000000 TICKET"),
    );
    assert_eq!(reply[..2], [1, 0]);
    assert_eq!(state(&mut con, "debt"), before + 3 * INTERVAL);
    assert_eq!(give(&mut con, "debt", &format!("{SLOW} 3 {}", reply[4])), 3);
    assert_eq!(state(&mut con, "debt"), before, "the state before the take");
}

/// A reserves 3 behind an empty bucket, B 2 behind A; A gives 3 back and gets nothing: the
/// last slot is B's, and freeing it would hand it to the next caller as well. The state does
/// not move, and the next reservation comes after B's.
fn tokens_taken_after_the_ticket_keep_it_from_giving_back(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (a, b) = a_then_b(&mut con, "x");
    let after_b = state(&mut con, "x");
    assert_eq!(give(&mut con, "x", &format!("{SLOW} 3 {}", a[4])), 0);
    assert_eq!(state(&mut con, "x"), after_b);
    let next = take_any(&mut con, "x", &format!("{SLOW} MAXWAIT 1000000"));
    assert_eq!(next[..2], [1, 0]);
    assert!(next[2] >= b[2] + 99_000, "{next:?}, B waits {}", b[2]);
}

/// Bucket `key` emptied (10 tokens at one per 100 s), then A reserves 3 and B 2, each with
/// a ticket: their replies.
fn a_then_b(con: &mut Connection, key: &str) -> (Vec<i64>, Vec<i64>) {
    let start = Instant::now();
    let _ = take_any(con, key, &format!("{SLOW} TOKENS 10"));
    let a = take_any(con, key, &format!("{SLOW} TOKENS 3 MAXWAIT 1000000 TICKET"));
    let b = take_any(con, key, &format!("{SLOW} TOKENS 2 MAXWAIT 1000000 TICKET"));
    let slack = slack_ms(start);
    assert_reply(&a[..3], &[1, 0, 300_000], &[2], slack, "A");
    assert_reply(&b[..3], &[1, 0, 500_000], &[2], slack, "B");
    (a, b)
}

/// The newest reservation gives back its whole slot, then the one before it, whose slot is
/// now the last: a stack, each give-back freeing only its own tokens.
fn the_newest_reservation_gives_back_then_the_one_before(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (a, b) = a_then_b(&mut con, "x");
    let after_b = state(&mut con, "x");
    assert_eq!(give(&mut con, "x", &format!("{SLOW} 2 {}", b[4])), 2);
    assert_eq!(state(&mut con, "x"), after_b - 2 * INTERVAL);
    assert_eq!(give(&mut con, "x", &format!("{SLOW} 3 {}", a[4])), 3);
    assert_eq!(state(&mut con, "x"), after_b - 5 * INTERVAL);
}

/// Capacity 10 at 10/s: a take of 5, then 250 ms later a give-back of 5 returns only what
/// fits under full (3, or fewer if the machine was slow) and leaves the bucket exactly full;
/// the same ticket then gives 0.
fn never_past_full_and_a_ticket_gives_back_once(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let start = Instant::now();
    let reply = take_any(&mut con, "f", "10 10 TOKENS 5 TICKET");
    assert_eq!(reply[..3], [1, 5, 0]);
    std::thread::sleep(Duration::from_millis(250));
    let given = give(&mut con, "f", &format!("10 10 5 {}", reply[4]));
    // The server saw between 250 ms and `elapsed` pass between the take and the give: 500 ms
    // of debt less that, in whole tokens rounded up, is what fits.
    let elapsed = i64::try_from(start.elapsed().as_millis()).unwrap() + 1;
    let least = ((500 - elapsed).max(0) + 99) / 100;
    assert!(
        (least..=3).contains(&given),
        "gave back {given} of 5, 250..{elapsed} ms after taking them: {least}..=3 fit"
    );
    assert_eq!(
        peek(&mut con, "f", "10 10"),
        [1, 10, 0, 0],
        "exactly full, no more"
    );
    assert!(!exists(&mut con, "f"), "full: deleted, not kept to expire");
    assert_eq!(
        give(&mut con, "f", &format!("10 10 5 {}", reply[4])),
        0,
        "the same ticket"
    );
    assert_eq!(
        give(&mut con, "f", &format!("10 10 1 {}", reply[4])),
        0,
        "the same ticket"
    );
}

/// Nothing to give back to: a missing key (no key is created), a ticket from after the state,
/// a ticket of 0 (everything since the epoch was taken after it), n = 0.
fn a_missing_key_or_a_foreign_ticket_gives_nothing(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let reply = take_any(&mut con, "k", &format!("{SLOW} TOKENS 2 TICKET"));
    let ticket = reply[4];
    assert_eq!(give(&mut con, "missing", &format!("{SLOW} 2 {ticket}")), 0);
    assert!(!exists(&mut con, "missing"), "a give-back created a key");
    let kept = state(&mut con, "k");
    for (n, t) in [
        (2, ticket + 1_000_000),
        (2, 0),
        (0, ticket),
        (2, ticket + 1),
    ] {
        assert_eq!(
            give(&mut con, "k", &format!("{SLOW} {n} {t}")),
            0,
            "n {n} ticket {t}"
        );
        assert_eq!(
            state(&mut con, "k"),
            kept,
            "n {n} ticket {t} changed the bucket"
        );
    }
    let _: i64 = query(&mut con, redis::cmd("DEL").arg("k"));
    assert_eq!(
        give(&mut con, "k", &format!("{SLOW} 2 {ticket}")),
        0,
        "after DEL"
    );
    assert!(!exists(&mut con, "k"));
}

/// A primary and a replica: a give-back reaches the replica as the resulting state (equal
/// DEBUG DIGEST, applied as SET); a give-back of 0 (the ticket again, a missing key, n = 0, a
/// stale ticket) propagates nothing.
fn replicas_get_the_given_back_state_and_a_give_of_0_nothing(flavor: Flavor) {
    let pair = Pair::start(flavor);
    let mut con = pair.primary.conn();
    let _ = take_any(&mut con, "rg", &format!("{SLOW} TOKENS 5"));
    let reply = take_any(&mut con, "rg", &format!("{SLOW} TOKENS 4 TICKET"));
    let stale = take_any(&mut con, "rg2", &format!("{SLOW} TOKENS 1 TICKET"))[4];
    for _ in 0..3 {
        let _ = take_any(&mut con, "rg2", SLOW);
    }
    pair.assert_replica_same("after the takes");
    assert_eq!(give(&mut con, "rg", &format!("{SLOW} 4 {}", reply[4])), 4);
    pair.assert_replica_same("after a give-back");
    let mut rcon = pair.replica.conn();
    assert_eq!(state(&mut rcon, "rg"), state(&mut con, "rg"));

    pair.assert_replicates_nothing("give-backs of 0", |con| {
        assert_eq!(give(con, "rg", &format!("{SLOW} 4 {}", reply[4])), 0);
        assert_eq!(give(con, "absent", &format!("{SLOW} 4 {}", reply[4])), 0);
        assert_eq!(give(con, "rg2", &format!("{SLOW} 0 {stale}")), 0);
        assert_eq!(give(con, "rg2", &format!("{SLOW} 1 {stale}")), 0);
    });
    pair.assert_replica_same("after the give-backs of 0");
}

/// Every malformed THROTTLE.GIVE, and every misuse of TICKET on THROTTLE.TAKE, gets its exact
/// error, and nothing changes.
fn bad_input_battery(flavor: Flavor) {
    let server = Server::start(flavor);
    let arity = errors::arity("throttle.give");
    let t = b"1796140000000000".as_slice();
    let mut calls: Vec<BadCall> = vec![
        bad(&[], &*arity),
        bad(&[b"k"], &*arity),
        bad(&[b"k", b"8", b"9"], &*arity),
        bad(&[b"k", b"8", b"9", b"1"], &*arity),
        bad(&[b"k", b"8", b"9", b"1", t, b"x"], &*arity),
        bad(&[b"k", b"8", b"9", b"1", t, b"TOKENS", b"1"], &*arity),
        bad(&[b"k", b"8", b"9", b"9", t], errors::give_tokens(8)),
        bad(&[b"k", b"8", b"9", b"1", b"+5"], errors::TICKET),
        bad(
            &[b"k", b"8", b"9", b"1", b"9223372036854776"],
            errors::TICKET,
        ),
        // The arguments are checked before the key is read.
        bad(&[b"t:list", b"8", b"9", b"9", t], errors::give_tokens(8)),
    ];
    calls.extend(bad_wholes(
        &[b"k", b"8", b"9"],
        &[t],
        &errors::give_tokens(8),
    ));
    calls.extend(bad_wholes(&[b"k", b"8", b"9", b"1"], &[], errors::TICKET));
    calls.extend(bad_quotas(&[b"1", t]));
    calls.extend(bad_keys(&[b"8", b"9", b"1", t]));
    let given = check_battery(&server, "THROTTLE.GIVE", &calls);

    let take_unknown = errors::TAKE_UNKNOWN;
    let ticket_calls = vec![
        bad(
            &[b"k", b"8", b"9", b"TICKET", b"ticket"],
            errors::repeated("TICKET"),
        ),
        bad(
            &[b"k", b"8", b"9", b"TICKET", b"TOKENS", b"1", b"TICKET"],
            errors::repeated("TICKET"),
        ),
        bad(&[b"k", b"8", b"9", b"TICKET", b"5"], take_unknown),
        bad(&[b"k", b"8", b"9", b"TICKETS"], take_unknown),
        bad(&[b"k", b"8", b"9", b"TICK\xffET"], take_unknown),
        bad(
            &[b"k", b"8", b"9", b"TICKET", b"TOKENS", b"9"],
            errors::tokens(8),
        ),
        bad(
            &[b"k", b"8", b"9", b"TICKET", b"MAXWAIT"],
            errors::missing("MAXWAIT"),
        ),
        bad(&[b"t:list", b"8", b"9", b"TICKET"], errors::WRONGTYPE),
        bad(&[b"s:hello", b"8", b"9", b"TICKET"], errors::NOT_BUCKET),
    ];
    let taken = check_battery(&server, "THROTTLE.TAKE", &ticket_calls);

    // The largest ticket is accepted (and gives nothing back to a missing key).
    let mut con = server.conn();
    assert_eq!(give(&mut con, "after", "8 9 8 9223372036854775"), 0);
    assert_eq!(take_any(&mut con, "after", "8 9 TICKET").len(), 5);
    println!("{flavor}: {given} malformed THROTTLE.GIVE and {taken} TAKE ... TICKET checked");
}
