//! THROTTLE.MTAKE on every server: two and three limits taken all or nothing (a denial writes
//! to no key, the wait is the longest, zero tokens only inspect), a key of another type
//! refused before anything is written, 16 keys accepted and 17 refused, duplicate keys
//! refused; with TICKET one ticket per key (its state in µs) that THROTTLE.GIVE takes as after
//! THROTTLE.TAKE ... TICKET, 0 for a denial and for a key asked for 0; replicas get the
//! resulting states and a denial propagates nothing; every malformed call gets its exact error;
//! and in a real 3-master Redis Cluster, keys with one hash tag work, keys in different slots
//! get the server's own CROSSSLOT, COMMAND GETKEYS lists them.

use throttle_e2e::{
    assert_reply, bad, check_battery, cluster_client, command_stat_of, errors, exec, exists, give,
    ints, keyslot, line, mtake, num, ok, per_server, query, send, state, strings, BadCall,
    Connection, Flavor, Pair, Server, Value, NS_PER_MS,
};
use throttle_testkit::ReplicatedCluster;

per_server!(
    two_limits_of_a_supplier,
    three_keys_all_or_nothing_and_the_longest_wait,
    zero_tokens_only_inspect,
    a_bucket_asked_for_0_does_not_delay_the_others,
    a_key_of_another_type_writes_nothing,
    tickets_give_each_key_back_until_a_later_take,
    a_denial_and_a_key_asked_for_0_get_ticket_0,
    a_reserved_mtake_gives_back_to_the_instant_it_took_as_of,
    sixteen_keys_accepted_seventeen_refused_duplicates_refused,
    replicas_get_the_states_and_a_denial_nothing,
    bad_input_battery,
    in_a_cluster_one_hash_tag_works_and_two_slots_are_crossslot,
);

const MS: i64 = NS_PER_MS;

/// `{s}:a` holds 3 at one per 100 s, `{s}:b` 5 at one per 1000 s, in one MULTI: three calls
/// granted, the fourth denied by `a` alone (writing nothing), the fifth with MAXWAIT reserves
/// from both as of `a`'s time; COMMAND GETKEYS names the two keys.
fn two_limits_of_a_supplier(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let call = "2 {s}:a {s}:b 3 0.01 1 5 0.001 1";
    let mut cmds: Vec<redis::Cmd> = (0..3)
        .map(|_| line(&format!("THROTTLE.MTAKE {call}")))
        .collect();
    cmds.extend([
        line("GET {s}:a"),
        line("GET {s}:b"),
        line(&format!("THROTTLE.MTAKE {call}")),
        line("GET {s}:a"),
        line("GET {s}:b"),
        line(&format!("THROTTLE.MTAKE {call} MAXWAIT 100000")),
        line("GET {s}:a"),
        line("GET {s}:b"),
    ]);
    let (replies, slack) = exec(&mut con, flavor, &cmds);
    let d = &[1, 3, 5];
    for (k, reply) in (1..).zip(&replies[..3]) {
        assert_reply(
            &ints(reply),
            &[1, 0, 3 - k, k * 100_000, 5 - k, k * 1_000_000],
            d,
            slack,
            &format!("call {k}"),
        );
    }
    let (a, b) = (num(&replies[3]), num(&replies[4]));
    assert_reply(
        &ints(&replies[5]),
        // Denied for the tokens (1), the last integer.
        &[0, 100_000, 0, 300_000, 2, 3_000_000, 1],
        d,
        slack,
        "the 4th, denied by a",
    );
    assert_eq!(
        (num(&replies[6]), num(&replies[7])),
        (a, b),
        "a denial wrote"
    );
    // Granted 100 s from now: `a` takes its token then, and `b` as of then too.
    assert_reply(
        &ints(&replies[8]),
        &[1, 100_000, 0, 400_000, 1, 4_000_000],
        d,
        slack,
        "with MAXWAIT 100000",
    );
    assert_eq!(num(&replies[9]), a + 100_000 * MS, "a: one more token");
    let b_moved = num(&replies[10]) - b;
    assert!(
        (1_000_000 * MS..=(1_000_000 + slack) * MS).contains(&b_moved),
        "b: one more token, {b_moved} ns"
    );

    assert_eq!(
        keys_of(&mut con, call),
        ["{s}:a", "{s}:b"],
        "COMMAND GETKEYS"
    );

    // RESP3: the same array of integers.
    let mut resp3 = throttle_e2e::resp3(&server);
    let reply = mtake(&mut resp3, "2 {r3}:a {r3}:b 3 0.01 1 5 0.001 2");
    assert_eq!(reply, [1, 0, 2, 100_000, 3, 2_000_000], "over RESP3");
}

/// Three buckets: `1` full, `2` empty for 100 s, `3` empty for 1000 s. Denied for 1000 s (the
/// longest) with MAXWAIT 0 and 999000 (a second below, so also where the clock moves inside a
/// MULTI), writing nothing (`1` is not even created); granted with MAXWAIT 1000000, every
/// bucket taking its token 1000 s from now.
fn three_keys_all_or_nothing_and_the_longest_wait(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let call = "3 {t}:1 {t}:2 {t}:3 10 1 1 2 0.01 1 1 0.001 1";
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.TAKE {t}:2 2 0.01 TOKENS 2"),
            line("THROTTLE.TAKE {t}:3 1 0.001"),
            line("GET {t}:2"),
            line("GET {t}:3"),
            line(&format!("THROTTLE.MTAKE {call}")),
            line(&format!("THROTTLE.MTAKE {call} MAXWAIT 999000")),
            line("EXISTS {t}:1"),
            line("GET {t}:2"),
            line("GET {t}:3"),
            line(&format!("THROTTLE.MTAKE {call} MAXWAIT 1000000")),
            line("GET {t}:1"),
            line("GET {t}:2"),
            line("GET {t}:3"),
        ],
    );
    let d = &[1, 3, 5, 7];
    // The last integer: what held it back, the tokens (1).
    let denied = [0, 1_000_000, 10, 0, 0, 200_000, 0, 1_000_000, 1];
    assert_reply(&ints(&replies[4]), &denied, d, slack, "MAXWAIT 0");
    assert_reply(&ints(&replies[5]), &denied, d, slack, "MAXWAIT 999000");
    assert_eq!(num(&replies[6]), 0, "a denial created {{t}}:1");
    let (two, three) = (num(&replies[2]), num(&replies[3]));
    assert_eq!(
        (num(&replies[7]), num(&replies[8])),
        (two, three),
        "a denial wrote"
    );
    assert_reply(
        &ints(&replies[9]),
        &[1, 1_000_000, 0, 1_001_000, 0, 1_100_000, 0, 2_000_000],
        d,
        slack,
        "MAXWAIT 1000000",
    );
    // Every bucket takes as of 1000 s from now, when `3` has its token: `3` is then one
    // interval further; `1` and `2` hold their token from then on.
    assert_eq!(num(&replies[12]), three + 1_000_000 * MS, "{{t}}:3");
    let slack_ns = slack * MS;
    let near = |got: i64, want: i64| (want..=want + slack_ns).contains(&got);
    assert!(
        near(num(&replies[10]), three + 1_000 * MS),
        "{{t}}:1 one second past {{t}}:3"
    );
    assert!(
        near(num(&replies[11]), two + 900_000 * MS),
        "{{t}}:2 from 200 s to 1100 s"
    );
}

/// On a fresh server, in one MULTI: `{z}:debt`, capacity 3 at one token per 100 s, emptied,
/// then a reservation 100 s into debt (replies 0 and 1; the setup of the tests of zero
/// tokens); then `cmds`. The replies and their slack.
fn after_z_debt(flavor: Flavor, cmds: Vec<redis::Cmd>) -> (Vec<Value>, i64) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let z_debt = vec![
        line("THROTTLE.TAKE {z}:debt 3 0.01 TOKENS 3"),
        line("THROTTLE.TAKE {z}:debt 3 0.01 MAXWAIT 100000"),
    ];
    exec(&mut con, flavor, &[z_debt, cmds].concat())
}

/// Zero tokens from every bucket only inspect: the reply is granted, no wait, the buckets as
/// they stand, and nothing is written (missing keys stay missing). A bucket asked for 0 while
/// another gives tokens is left alone.
fn zero_tokens_only_inspect(flavor: Flavor) {
    let (replies, slack) = after_z_debt(
        flavor,
        vec![
            line("THROTTLE.TAKE {z}:half 4 0.01 TOKENS 2"),
            line("GET {z}:debt"),
            line("THROTTLE.MTAKE 3 {z}:debt {z}:half {z}:none 3 0.01 0 4 0.01 0 5 0.001 0"),
            line(
                "THROTTLE.MTAKE 3 {z}:debt {z}:half {z}:none 3 0.01 0 4 0.01 0 5 0.001 0 MAXWAIT 7",
            ),
            line("EXISTS {z}:none"),
            line("GET {z}:debt"),
            // From the half-used bucket only: granted at once, the other untouched.
            line("THROTTLE.MTAKE 2 {z}:half {z}:none 4 0.01 1 5 0.001 0"),
            line("EXISTS {z}:none"),
        ],
    );
    let inspected = [1, 0, 0, 400_000, 2, 200_000, 5, 0];
    let d = &[1, 3, 5, 7];
    assert_reply(
        &ints(&replies[4]),
        &inspected,
        d,
        slack,
        "zero tokens from all",
    );
    assert_reply(
        &ints(&replies[5]),
        &inspected,
        d,
        slack,
        "zero tokens, MAXWAIT 7",
    );
    assert_eq!(num(&replies[6]), 0, "an inspection created a key");
    assert_eq!(num(&replies[7]), num(&replies[3]), "an inspection wrote");
    assert_reply(
        &ints(&replies[8]),
        &[1, 0, 1, 300_000, 5, 0],
        d,
        slack,
        "one from half",
    );
    assert_eq!(num(&replies[9]), 0, "a bucket asked for 0 was written");
}

/// A bucket asked for 0 tokens is only inspected, as THROTTLE.TAKE ... TOKENS 0 is: its debt
/// (here 100 s past empty) delays no one, so 2 tokens from a fresh bucket beside it are
/// granted now, and the bucket asked for nothing is not written.
fn a_bucket_asked_for_0_does_not_delay_the_others(flavor: Flavor) {
    let (replies, slack) = after_z_debt(
        flavor,
        vec![
            line("GET {z}:debt"),
            line("THROTTLE.MTAKE 2 {z}:debt {z}:fresh 3 0.01 0 5 0.001 2"),
            line("GET {z}:debt"),
        ],
    );
    assert_eq!(
        num(&replies[4]),
        num(&replies[2]),
        "a bucket asked for 0 was written"
    );
    assert_reply(
        &ints(&replies[3]),
        &[1, 0, 0, 400_000, 3, 2_000_000],
        &[1, 3, 5],
        slack,
        "2 from a fresh bucket beside one asked for 0 and in debt past full",
    );
}

/// A list among the keys: WRONGTYPE, and no bucket is written, before or after it.
fn a_key_of_another_type_writes_nothing(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let _: i64 = query(
        &mut con,
        redis::cmd("RPUSH").arg("{w}:list").arg("x").arg("y"),
    );
    let _ = throttle_e2e::take_any(&mut con, "{w}:b", "5 0.01");
    let b = state(&mut con, "{w}:b");
    for call in [
        "3 {w}:a {w}:list {w}:b 5 0.01 1 5 0.01 1 5 0.01 1",
        "3 {w}:a {w}:b {w}:list 5 0.01 1 5 0.01 1 5 0.01 0",
        "2 {w}:list {w}:a 5 0.01 0 5 0.01 1",
    ] {
        let error = send(&mut con, &line(&format!("THROTTLE.MTAKE {call}"))).expect_err(call);
        assert_eq!(error, errors::WRONGTYPE, "{call}");
        assert!(!exists(&mut con, "{w}:a"), "{call} wrote {{w}}:a");
        assert_eq!(state(&mut con, "{w}:b"), b, "{call}");
        let list: Vec<String> = query(
            &mut con,
            redis::cmd("LRANGE").arg("{w}:list").arg(0).arg(-1),
        );
        assert_eq!(list, ["x", "y"], "{call}");
    }
}

/// `{g}:a` holds 10 at one per 100 s, `{g}:b` 5 at one per 1000 s: nothing refills while the
/// test runs.
const TICKETED: &str = "2 {g}:a {g}:b 10 0.01 3 5 0.001 2";

/// The tickets after the pairs of an MTAKE ... TICKET reply on two keys, checked to be each
/// key's state (`GET`, the 8-byte ns state) in µs, rounded down.
#[track_caller]
fn tickets_are_the_states(reply: &[i64], states: [i64; 2], what: &str) -> [i64; 2] {
    assert_eq!(reply.len(), 8, "{what}: {reply:?}");
    let want = states.map(|s| s.div_euclid(1000));
    assert_eq!(
        reply[6..],
        want,
        "{what}: the tickets of {reply:?}, states {states:?}"
    );
    want
}

/// A granted MTAKE ... TICKET replies, after the pairs, each key's state in µs (in one MULTI,
/// beside the GETs); GIVE with each ticket gives back each key's tokens, leaving both buckets
/// full (deleted). Then a second MTAKE after a first: GIVE with the first's tickets gives 0 on
/// each key, and the states stay where the second left them.
fn tickets_give_each_key_back_until_a_later_take(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let taken = |con: &mut Connection| {
        let (replies, slack) = exec(
            con,
            flavor,
            &[
                line(&format!("THROTTLE.MTAKE {TICKETED} TICKET")),
                line("GET {g}:a"),
                line("GET {g}:b"),
            ],
        );
        let reply = ints(&replies[0]);
        assert_reply(
            &reply[..6],
            &[1, 0, 7, 300_000, 3, 2_000_000],
            &[1, 3, 5],
            slack,
            "MTAKE ... TICKET",
        );
        let states = [num(&replies[1]), num(&replies[2])];
        (
            tickets_are_the_states(&reply, states, "MTAKE ... TICKET"),
            states,
        )
    };

    let ([a, b], _) = taken(&mut con);
    let (replies, _) = exec(
        &mut con,
        flavor,
        &[
            line(&format!("THROTTLE.GIVE {{g}}:a 10 0.01 3 {a}")),
            line(&format!("THROTTLE.GIVE {{g}}:b 5 0.001 2 {b}")),
            line("EXISTS {g}:a"),
            line("EXISTS {g}:b"),
        ],
    );
    let given: Vec<i64> = replies.iter().map(num).collect();
    assert_eq!(given, [3, 2, 0, 0], "given back, then EXISTS: full again");

    let ([a, b], [state_a, state_b]) = taken(&mut con);
    let (replies, _) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.MTAKE 2 {g}:a {g}:b 10 0.01 1 5 0.001 1"),
            line(&format!("THROTTLE.GIVE {{g}}:a 10 0.01 3 {a}")),
            line(&format!("THROTTLE.GIVE {{g}}:b 5 0.001 2 {b}")),
            line("GET {g}:a"),
            line("GET {g}:b"),
        ],
    );
    let second = ints(&replies[0]);
    assert_eq!(
        (second.len(), second[0], second[2], second[4]),
        (6, 1, 6, 2),
        "{second:?}"
    );
    assert_eq!(
        (num(&replies[1]), num(&replies[2])),
        (0, 0),
        "tickets given back after a later take"
    );
    assert_eq!(
        (num(&replies[3]), num(&replies[4])),
        (state_a + 100_000 * MS, state_b + 1_000_000 * MS),
        "the states the second MTAKE left"
    );
}

/// In one MULTI: a denied MTAKE ... TICKET (with MAXWAIT 0 and below the wait) replies tickets
/// all 0 and writes nothing; a key asked for 0 tokens gets ticket 0 beside one that takes, and
/// is not written; an MTAKE of 0 tokens from every key replies every ticket 0.
fn a_denial_and_a_key_asked_for_0_get_ticket_0(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let call = "2 {d}:a {d}:b 5 0.01 1 1 0.001 1";
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.TAKE {d}:b 1 0.001"),
            line("GET {d}:b"),
            line(&format!("THROTTLE.MTAKE {call} TICKET")),
            line(&format!("THROTTLE.MTAKE {call} ticket MAXWAIT 999000")),
            line("EXISTS {d}:a"),
            line("GET {d}:b"),
            line("THROTTLE.MTAKE 2 {d}:a {d}:b 5 0.01 1 1 0.001 0 TICKET"),
            line("GET {d}:a"),
            line("GET {d}:b"),
            line("THROTTLE.MTAKE 2 {d}:c {d}:b 5 0.01 0 1 0.001 0 TICKET"),
            line("EXISTS {d}:c"),
        ],
    );
    let d = &[1, 3, 5];
    // Every ticket 0, then what held it back: the tokens (1).
    let denied = [0, 1_000_000, 5, 0, 0, 1_000_000, 0, 0, 1];
    assert_reply(&ints(&replies[2]), &denied, d, slack, "denied, MAXWAIT 0");
    assert_reply(
        &ints(&replies[3]),
        &denied,
        d,
        slack,
        "denied, MAXWAIT 999000",
    );
    assert_eq!(num(&replies[4]), 0, "a denial created {{d}}:a");
    let b = num(&replies[1]);
    assert_eq!(num(&replies[5]), b, "a denial wrote {{d}}:b");

    let reply = ints(&replies[6]);
    let a = num(&replies[7]);
    assert_reply(
        &reply,
        &[1, 0, 4, 100_000, 0, 1_000_000, a.div_euclid(1000), 0],
        d,
        slack,
        "{d}:b asked for 0",
    );
    assert_eq!(num(&replies[8]), b, "a key asked for 0 was written");
    assert_reply(
        &ints(&replies[9]),
        &[1, 0, 5, 0, 0, 1_000_000, 0, 0],
        d,
        slack,
        "0 from every key",
    );
    assert_eq!(num(&replies[10]), 0, "an inspection created {{d}}:c");
}

/// `{r}:b` is empty for 1000 s; with MAXWAIT both keys take as of then, so the full `{r}:a`
/// sets its token aside from that instant. GIVE with each ticket gives each token back: `{r}:b`
/// is back where it was, and `{r}:a` at the instant it took as of (its state keeps no trace of
/// the full bucket before, and giving back past it would free time before this take's slot).
fn a_reserved_mtake_gives_back_to_the_instant_it_took_as_of(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.TAKE {r}:b 1 0.001"),
            line("GET {r}:b"),
            line("THROTTLE.MTAKE 2 {r}:a {r}:b 5 0.01 1 1 0.001 1 MAXWAIT 1000000 TICKET"),
            line("GET {r}:a"),
            line("GET {r}:b"),
        ],
    );
    let before = num(&replies[1]);
    let reply = ints(&replies[2]);
    assert_reply(
        &reply[..6],
        &[1, 1_000_000, 0, 1_100_000, 0, 2_000_000],
        &[1, 3, 5],
        slack,
        "a reservation of 1000 s",
    );
    let states = [num(&replies[3]), num(&replies[4])];
    assert_eq!(
        states,
        [before + 100_000 * MS, before + 1_000_000 * MS],
        "both take as of {{r}}:b's token"
    );
    let [a, b] = tickets_are_the_states(&reply, states, "a reservation");
    assert_eq!(give(&mut con, "{r}:a", &format!("5 0.01 1 {a}")), 1);
    assert_eq!(give(&mut con, "{r}:b", &format!("1 0.001 1 {b}")), 1);
    assert_eq!(
        state(&mut con, "{r}:a"),
        before,
        "{{r}}:a at the instant it took as of"
    );
    assert_eq!(state(&mut con, "{r}:b"), before, "{{r}}:b where it was");
}

/// 16 keys (the most) are taken from at once; 17 are refused with the numkeys error and
/// nothing written; a key named twice is refused, nothing written; keys that differ only in
/// case are distinct.
fn sixteen_keys_accepted_seventeen_refused_duplicates_refused(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let call = |prefix: &str, n: usize| {
        let keys: Vec<String> = (0..n).map(|i| format!("{{{prefix}}}:{i}")).collect();
        format!("{n} {} {}", keys.join(" "), "5 0.01 1 ".repeat(n))
    };
    let reply = mtake(&mut con, &call("m16", 16));
    assert_eq!(reply.len(), 2 + 2 * 16, "{reply:?}");
    assert_eq!(reply[..2], [1, 0]);
    for pair in reply[2..].chunks(2) {
        assert_eq!(pair, [4, 100_000], "{reply:?}");
    }
    for i in 0..16 {
        assert!(exists(&mut con, format!("{{m16}}:{i}")));
    }
    let keys = dbsize(&mut con);
    assert_eq!(
        send(
            &mut con,
            &line(&format!("THROTTLE.MTAKE {}", call("m17", 17)))
        ),
        Err(errors::NUMKEYS.to_owned())
    );
    for dup in [
        "2 {d}:a {d}:a 5 0.01 1 5 0.01 1",
        "3 {d}:a {d}:b {d}:a 5 0.01 1 5 0.01 1 5 0.01 1",
        "3 {m16}:0 {d}:b {m16}:0 5 0.01 1 5 0.01 1 5 0.01 1",
    ] {
        assert_eq!(
            send(&mut con, &line(&format!("THROTTLE.MTAKE {dup}"))),
            Err(errors::DUPLICATE.to_owned()),
            "{dup}"
        );
    }
    assert_eq!(dbsize(&mut con), keys, "a refused call wrote");
    assert_eq!(state(&mut con, "{m16}:0"), state(&mut con, "{m16}:1"));
    let reply = mtake(&mut con, "2 {d}:a {d}:A 5 0.01 1 5 0.01 1");
    assert_eq!(
        reply,
        [1, 0, 4, 100_000, 4, 100_000],
        "keys differing in case"
    );
}

/// A primary and a replica: a granted MTAKE reaches the replica as one SET per bucket
/// (equal DEBUG DIGEST); a denial and an inspection propagate nothing.
fn replicas_get_the_states_and_a_denial_nothing(flavor: Flavor) {
    let pair = Pair::start(flavor);
    let mut con = pair.primary.conn();
    let call = "3 {r}:a {r}:b {r}:c 2 0.01 1 3 0.001 2 1 0.01 1";
    assert_eq!(mtake(&mut con, call)[..2], [1, 0]);
    assert_eq!(mtake(&mut con, &format!("{call} MAXWAIT 3600000"))[0], 1);
    pair.assert_replica_same("after two MTAKEs");
    let mut rcon = pair.replica.conn();
    for key in ["{r}:a", "{r}:b", "{r}:c"] {
        assert_eq!(state(&mut rcon, key), state(&mut con, key), "{key}");
    }
    pair.assert_replicates_nothing("a denial and an inspection", |con| {
        assert_eq!(mtake(con, call)[0], 0);
        assert_eq!(mtake(con, &format!("{call} MAXWAIT 1000"))[0], 0);
        assert_eq!(mtake(con, "2 {r}:a {r}:new 2 0.01 0 5 1 0")[0], 1);
    });
    pair.assert_replica_same("after a denial");
}

/// Every malformed THROTTLE.MTAKE gets its exact error, and nothing changes.
fn bad_input_battery(flavor: Flavor) {
    let server = Server::start(flavor);
    let arity = errors::arity("throttle.mtake");
    let w = |text: &str| -> Vec<Vec<u8>> {
        text.split_whitespace()
            .map(|s| s.as_bytes().to_vec())
            .collect()
    };
    let case = |text: &str, error: &str| {
        let words = w(text);
        let args: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        bad(&args, error)
    };
    let mut calls: Vec<BadCall> = vec![
        bad(&[], &*arity),
        case("1", &arity),
        case("1 a 8 9", &arity),
        case("0 a 8 9 1", errors::NUMKEYS),
        case("17 a 8 9 1", errors::NUMKEYS),
        case("-1 a 8 9 1", errors::NUMKEYS),
        case("1.5 a 8 9 1", errors::NUMKEYS),
        case("x a 8 9 1", errors::NUMKEYS),
        case("99999999999999999999 a 8 9 1", errors::NUMKEYS),
        bad(&[b"", b"a", b"8", b"9", b"1"], errors::NUMKEYS),
        bad(&[b"\xff", b"a", b"8", b"9", b"1"], errors::NUMKEYS),
        case("2 a b 8 9 1", &errors::triples(2)),
        case("2 a b 8 9 1 8 9", &errors::triples(2)),
        case("3 a b c 8 9 1 8 9 1", &errors::triples(3)),
        case("16 a b c d e", &errors::triples(16)),
        case("2 a a 8 9 1 8 9 1", errors::DUPLICATE),
        case("2 a a 0 9 1 8 9 1", errors::DUPLICATE),
        case("2 a b 8 9 1 0 9 1", errors::CAPACITY),
        case("2 a b 8 9 1 x 9 1", errors::CAPACITY),
        case("2 a b 8 9 1 8 0 1", errors::RATE),
        case("2 a b 8 9 1 8 nan 1", errors::RATE),
        case("2 a b 8 9 1 8 1e3 1", errors::RATE),
        case("2 a b 8 9 1 315360001 1 1", errors::FILL),
        case("2 a b 8 9 9 8 9 1", &errors::tokens(8)),
        case("2 a b 8 9 1 3 9 4", &errors::tokens(3)),
        case("2 a b 8 9 1 8 9 -1", &errors::tokens(8)),
        case("2 a b 8 9 1 8 9 x", &errors::tokens(8)),
        case("1 a 8 9 1 TOKENS 1", errors::MTAKE_UNKNOWN),
        // TICKET: once, no value (what follows it is an option's name), among the others.
        case("1 a 8 9 1 TICKET TICKET", &errors::repeated("TICKET")),
        case(
            "1 a 8 9 1 ticket MAXWAIT 5 Ticket",
            &errors::repeated("TICKET"),
        ),
        case("1 a 8 9 1 TICKET 1", errors::MTAKE_UNKNOWN),
        case("1 a 8 9 1 TICKET 1 TICKET", errors::MTAKE_UNKNOWN),
        case("1 a 8 9 1 TICKETS", errors::MTAKE_UNKNOWN),
        case("1 a 8 9 1 TICKET MAXWAIT", &errors::missing("MAXWAIT")),
        case("1 a 8 9 1 TICKET MAXWAIT -1", errors::MAXWAIT),
        case(
            "1 a 8 9 1 MAXWAIT x TICKET TICKET",
            &errors::repeated("TICKET"),
        ),
        case("2 a b 8 9 1 8 9 1 TICKET FLOOR 1", &errors::floors(2)),
        case("1 a 8 9 1 FLOOR 8 TICKET MAXWAIT 5", &errors::floor(8)),
        case("2 a b 8 9 1 TICKET", &errors::triples(2)),
        case("2 a b 8 9 9 8 9 1 TICKET", &errors::tokens(8)),
        case("1 a 8 9 1 8 9 1", errors::MTAKE_UNKNOWN),
        case("1 a 8 9 1 MAXWAIT", &errors::missing("MAXWAIT")),
        case("1 a 8 9 1 MAXWAIT 1 MAXWAIT", &errors::missing("MAXWAIT")),
        case(
            "1 a 8 9 1 MAXWAIT 1 maxwait 2",
            &errors::repeated("MAXWAIT"),
        ),
        case("1 a 8 9 1 MAXWAIT -1", errors::MAXWAIT),
        case("1 a 8 9 1 MAXWAIT 1.5", errors::MAXWAIT),
        case("1 a 8 9 1 MAXWAIT 315360000001", errors::MAXWAIT),
        bad(
            &[b"1", b"a", b"8", b"9", b"1", b"MAX\xffWAIT", b"1"],
            errors::MTAKE_UNKNOWN,
        ),
        bad(&[b"1", b"a", b"8", b"9\xff", b"1"], errors::RATE),
        // Keys of another type or strings that are not a bucket, wherever they stand.
        case("2 k t:list 8 9 1 8 9 1", errors::WRONGTYPE),
        case("2 t:hash k 8 9 0 8 9 1", errors::WRONGTYPE),
        case("2 k s:hello 8 9 1 8 9 1", errors::NOT_BUCKET),
        case("2 s:negative k 8 9 1 8 9 0", errors::NOT_BUCKET),
        case("1 s:float 8 9 0", errors::NOT_BUCKET),
        case("2 k s:hello 8 9 1 8 9 1 TICKET", errors::NOT_BUCKET),
        case("2 t:list k 8 9 1 8 9 1 TICKET", errors::WRONGTYPE),
        case("3 k s:empty t:list 8 9 1 8 9 1 8 9 1", errors::NOT_BUCKET),
        // The arguments are checked before any key is read.
        case("2 k t:list 0 9 1 8 9 1", errors::CAPACITY),
    ];
    let sixteen: String = (0..16).map(|i| format!("k{i} ")).collect();
    calls.push(case(
        &format!("16 {sixteen} {}", "8 9 1 ".repeat(17)),
        errors::MTAKE_UNKNOWN,
    ));
    let checked = check_battery(&server, "THROTTLE.MTAKE", &calls);
    let mut con = server.conn();
    assert_eq!(mtake(&mut con, "1 after 8 9 1"), [1, 0, 7, 112]);
    let reply = mtake(&mut con, "1 after:ticket 8 9 1 TICKET");
    assert_eq!(reply[..4], [1, 0, 7, 112]);
    assert_eq!(
        reply[4],
        state(&mut con, "after:ticket") / 1000,
        "{reply:?}"
    );
    println!("{flavor}: {checked} malformed THROTTLE.MTAKE calls checked");
}

/// Three masters: keys with one hash tag are taken together on the node serving their slot
/// (directly, and through redis-rs's cluster client, which follows the MOVED its first guess
/// gets); another master answers MOVED for them; keys in two slots get the server's own
/// CROSSSLOT and nothing is written anywhere; COMMAND GETKEYS lists the keys.
fn in_a_cluster_one_hash_tag_works_and_two_slots_are_crossslot(flavor: Flavor) {
    let nodes = ReplicatedCluster::start(flavor, 3, 0).into_masters();
    let mut cons: Vec<Connection> = nodes.iter().map(|n| n.server.conn()).collect();
    let slot = keyslot(&mut cons[0], "{supplier}:s");
    assert_eq!(keyslot(&mut cons[0], "{supplier}:m"), slot);
    let owner = nodes
        .iter()
        .position(|n| n.node.owns(slot))
        .expect("an owner");
    let call = "2 {supplier}:s {supplier}:m 10 10 1 500 0.1 1";

    let reply = mtake(&mut cons[owner], call);
    assert_eq!(reply[..3], [1, 0, 9], "{reply:?}");
    assert!(exists(&mut cons[owner], "{supplier}:s") && exists(&mut cons[owner], "{supplier}:m"));
    for (i, con) in cons.iter_mut().enumerate().filter(|(i, _)| *i != owner) {
        let moved = send(con, &line(&format!("THROTTLE.MTAKE {call}")))
            .expect_err("MTAKE on a node without the slot");
        let want = format!("MOVED {slot} 127.0.0.1:{}", nodes[owner].server.port());
        assert_eq!(moved, want, "node {i}");
    }

    // Through the cluster client: the command is routed (or redirected) to the owner.
    let mut cluster = cluster_client(nodes.iter().map(|n| n.server.url()))
        .get_connection()
        .expect("a cluster connection");
    let reply: Vec<i64> = line(&format!("THROTTLE.MTAKE {call}"))
        .query(&mut cluster)
        .unwrap_or_else(|e| panic!("MTAKE through the cluster client: {e}"));
    assert_eq!(reply[..3], [1, 0, 8], "{reply:?}");
    assert_eq!(reply[4], 498, "{reply:?}");
    // redis-rs routes a command it does not know by its first argument, here numkeys ("2"),
    // and follows the MOVED it gets when that slot is on another node than the keys': a hash
    // tag served by another node than slot("2") takes that path.
    let numkeys_node = {
        let s = keyslot(&mut cons[0], "2");
        nodes.iter().position(|n| n.node.owns(s)).unwrap()
    };
    let tag = (0..100)
        .map(|i| format!("{{sup{i}}}"))
        .find(|tag| {
            let s = keyslot(&mut cons[0], tag);
            nodes.iter().position(|n| n.node.owns(s)) != Some(numkeys_node)
        })
        .expect("a hash tag on another node among 100");
    let moved_before = rejected(&mut cons);
    let reply: Vec<i64> = line(&format!(
        "THROTTLE.MTAKE 2 {tag}:s {tag}:m 10 10 1 500 0.1 1"
    ))
    .query(&mut cluster)
    .unwrap_or_else(|e| panic!("MTAKE {tag} through the cluster client: {e}"));
    assert_eq!(reply[..3], [1, 0, 9], "{tag}: {reply:?}");
    println!(
        "{flavor}: MTAKE on {tag} through redis-rs's cluster client was answered MOVED {} \
         time(s) first",
        rejected(&mut cons) - moved_before
    );

    // Keys in different slots: CROSSSLOT from whichever node, nothing written.
    let (a, b) = ("cross:a", "cross:b");
    assert_ne!(keyslot(&mut cons[0], a), keyslot(&mut cons[0], b));
    let crossslot = "CROSSSLOT Keys in request don't hash to the same slot";
    let sizes: Vec<i64> = cons.iter_mut().map(dbsize).collect();
    for (i, con) in cons.iter_mut().enumerate() {
        let error = send(
            con,
            &line(&format!("THROTTLE.MTAKE 2 {a} {b} 10 10 1 10 10 1")),
        )
        .expect_err("MTAKE across slots");
        assert_eq!(error, crossslot, "node {i}");
    }
    let error = line(&format!("THROTTLE.MTAKE 2 {a} {b} 10 10 1 10 10 1"))
        .query::<redis::Value>(&mut cluster)
        .expect_err("MTAKE across slots through the cluster client");
    assert_eq!(
        throttle_e2e::error_text(&error),
        crossslot,
        "through the cluster client"
    );
    let after: Vec<i64> = cons.iter_mut().map(dbsize).collect();
    assert_eq!(after, sizes, "a CROSSSLOT call wrote");

    assert_eq!(
        keys_of(&mut cons[owner], call),
        ["{supplier}:s", "{supplier}:m"]
    );
}

/// The keys COMMAND GETKEYS finds in `THROTTLE.MTAKE call`.
fn keys_of(con: &mut Connection, call: &str) -> Vec<String> {
    strings(&ok(con, &format!("COMMAND GETKEYS THROTTLE.MTAKE {call}")))
}

/// How many keys the server holds: a refused call must leave it as it was.
fn dbsize(con: &mut Connection) -> i64 {
    query(con, &redis::cmd("DBSIZE"))
}

/// MTAKE calls refused (MOVED, CROSSSLOT) on every node so far.
fn rejected(cons: &mut [Connection]) -> u64 {
    cons.iter_mut()
        .map(|c| command_stat_of(c, "throttle.mtake", "rejected_calls"))
        .sum()
}
