//! THROTTLE.TAKE and THROTTLE.MTAKE with FLOOR on every server: a bulk caller takes only while
//! the bucket keeps its floor for interactive calls, and reserves only tokens that are there
//! now (never a debt); a call without FLOOR may take the floor. A denial writes nothing and says when to try again; INFO counts the
//! takes only the floor held back. Every malformed FLOOR gets its exact error.

use throttle_e2e::{
    assert_reply, bad, check_battery, errors, exec, info_field, ints, line, ok, per_server, query,
    BadCall, Flavor, Server, Value,
};

per_server!(
    the_floor_stays_for_calls_without_one,
    mtake_keeps_each_buckets_floor,
    a_floored_take_reserves_only_tokens_there_now,
    a_floored_mtake_reserves_only_tokens_there_now,
    held_by_floor_is_counted,
    bad_input_battery,
);

/// Capacity 10 at 10/s (100 ms a token), in one MULTI: 5 tokens with FLOOR 5 are granted
/// ([1, 5, 0, 500]); then 1 with FLOOR 5 is denied until a token refills ([0, 5, 100, 500]),
/// also with MAXWAIT 0; 1 without FLOOR takes from the floor ([1, 4, 0, 600]); 3 with FLOOR 2
/// wait for one more token; FLOOR 0 is a plain take. The denials change nothing.
fn the_floor_stays_for_calls_without_one(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.TAKE f 10 10 TOKENS 5 FLOOR 5"),
            line("GET f"),
            line("THROTTLE.TAKE f 10 10 TOKENS 1 FLOOR 5"),
            line("THROTTLE.TAKE f 10 10 FLOOR 5 TOKENS 1 MAXWAIT 0"),
            line("GET f"),
            line("THROTTLE.TAKE f 10 10 TOKENS 1"),
            line("THROTTLE.TAKE f 10 10 TOKENS 3 FLOOR 2"),
            line("THROTTLE.TAKE f 10 10 floor 0"),
        ],
    );
    let durations = &[2, 3];
    for (i, want, what) in [
        // A denial ends with what held it back: here the floor (2), the tokens being there.
        (0, &[1, 5, 0, 500][..], "5 with FLOOR 5"),
        (2, &[0, 5, 100, 500, 2], "1 with FLOOR 5"),
        (3, &[0, 5, 100, 500, 2], "the same with MAXWAIT 0"),
        (5, &[1, 4, 0, 600], "1 without FLOOR"),
        (6, &[0, 4, 100, 600, 2], "3 with FLOOR 2 out of 4"),
        (7, &[1, 3, 0, 700], "FLOOR 0"),
    ] {
        assert_reply(&ints(&replies[i]), want, durations, slack, what);
    }
    assert_eq!(replies[1], replies[4], "a denial by the floor wrote");
}

/// Two buckets, FLOOR 5 on the first and 0 on the second: 5 and 1 are granted; again, the
/// first would drop below its floor, so nothing is taken from either, and the wait is the
/// first bucket's 500 ms.
fn mtake_keeps_each_buckets_floor(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let call = "THROTTLE.MTAKE 2 {f}a {f}b 10 10 5 10 10 1 FLOOR 5 0";
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line(call),
            line("MGET {f}a {f}b"),
            line(call),
            line("MGET {f}a {f}b"),
        ],
    );
    assert_reply(
        &ints(&replies[0]),
        &[1, 0, 5, 500, 9, 100],
        &[1, 3, 5],
        slack,
        "granted",
    );
    assert_reply(
        &ints(&replies[2]),
        &[0, 500, 5, 500, 9, 100, 2],
        &[1, 3, 5],
        slack,
        "the first bucket's floor",
    );
    assert_eq!(replies[1], replies[3], "a denial by a floor wrote");
}

/// Capacity 10 at 10/s, 5 taken, in one MULTI: 2 above a floor of 5 are there now, the floor
/// 200 ms from now: denied with MAXWAIT 150 ([0, 5, 200, 500], nothing written), granted with
/// MAXWAIT 200 for 200 ms from now, the state moved by 2 tokens ([1, 3, 200, 700]); another 2
/// for 400 ms ([1, 1, 400, 900]); then only 1 is there now, so 2 above a floor of 1 are denied
/// whatever the MAXWAIT ([0, 1, 200, 900], nothing written); a call without a floor takes the
/// last token now, never a debt.
fn a_floored_take_reserves_only_tokens_there_now(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.TAKE r 10 10 TOKENS 5"),
            line("GET r"),
            line("THROTTLE.TAKE r 10 10 TOKENS 2 FLOOR 5 MAXWAIT 150"),
            line("GET r"),
            line("THROTTLE.TAKE r 10 10 TOKENS 2 FLOOR 5 MAXWAIT 200"),
            line("THROTTLE.TAKE r 10 10 MAXWAIT 1000 FLOOR 5 TOKENS 2"),
            line("GET r"),
            line("THROTTLE.TAKE r 10 10 TOKENS 2 FLOOR 1 MAXWAIT 60000"),
            line("GET r"),
            line("THROTTLE.TAKE r 10 10 TOKENS 1"),
        ],
    );
    let durations = &[2, 3];
    for (i, want, what) in [
        (0, &[1, 5, 0, 500][..], "5 taken"),
        // The 2 are there now, the floor not within MAXWAIT: the floor (2).
        (2, &[0, 5, 200, 500, 2], "beyond MAXWAIT"),
        (4, &[1, 3, 200, 700], "reserved above the floor"),
        (5, &[1, 1, 400, 900], "reserved again"),
        // The 2 are not there now: the tokens (1).
        (7, &[0, 1, 200, 900, 1], "2 are not there now"),
        (9, &[1, 0, 0, 1000], "the last token, without a floor"),
    ] {
        assert_reply(&ints(&replies[i]), want, durations, slack, what);
    }
    assert_eq!(replies[1], replies[3], "a denial beyond MAXWAIT wrote");
    assert_eq!(
        replies[6], replies[8],
        "a denial for too few tokens now wrote"
    );
}

/// THROTTLE.MTAKE alike, key by key: a holds 5 of 10 (FLOOR 5), b none of 10 (its token in
/// 100 ms). 2 from a and 1 from b within 1 s: a's 2 are there now, so granted, the wait the
/// longest (a's floor, 200 ms). Then FLOOR 5 on b, whose token is not there now: denied with
/// every wait within MAXWAIT, nothing written. A MAXWAIT below the wait: denied.
fn a_floored_mtake_reserves_only_tokens_there_now(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let call = "THROTTLE.MTAKE 2 {m}a {m}b 10 10 2 10 10 1";
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.TAKE {m}a 10 10 TOKENS 5"),
            line("THROTTLE.TAKE {m}b 10 10 TOKENS 10"),
            line(&format!("{call} MAXWAIT 1000 FLOOR 5 0")),
            line("MGET {m}a {m}b"),
            line(&format!("{call} MAXWAIT 1000 FLOOR 0 5")),
            line(&format!("{call} FLOOR 5 0 MAXWAIT 100")),
            line("MGET {m}a {m}b"),
        ],
    );
    let durations = &[1, 3, 5];
    for (i, want, what) in [
        (
            2,
            &[1, 200, 3, 700, 0, 1100][..],
            "reserved, a above its floor",
        ),
        // b's token is not there now: the tokens (1), in both.
        (
            4,
            &[0, 700, 3, 700, 0, 1100, 1],
            "b's token is not there now",
        ),
        (5, &[0, 400, 3, 700, 0, 1100, 1], "beyond MAXWAIT"),
    ] {
        assert_reply(&ints(&replies[i]), want, durations, slack, what);
    }
    assert_eq!(replies[3], replies[6], "a denied MTAKE wrote");
}

/// `INFO throttle`: a take denied only by its floor counts in `held_by_floor` (and `denied`);
/// one a plain take would also have been denied does not.
fn held_by_floor_is_counted(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    for call in [
        "THROTTLE.TAKE h 2 0.001 FLOOR 1",
        "THROTTLE.TAKE h 2 0.001 FLOOR 1",
        "THROTTLE.TAKE h 2 0.001",
        "THROTTLE.TAKE h 2 0.001 FLOOR 1",
        "THROTTLE.MTAKE 1 {h}m 2 0.001 1 FLOOR 0",
        "THROTTLE.MTAKE 1 {h}m 2 0.001 1 FLOOR 1",
    ] {
        let _: Value = ok(&mut con, call);
    }
    let info: String = query(&mut con, &line("INFO throttle"));
    let counter = |name: &str| {
        info_field(&info, &format!("throttle_{name}"))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{info}"))
    };
    // Denied: the second take (floor), the fourth (empty anyway), the last MTAKE (floor).
    assert_eq!(
        (counter("denied"), counter("held_by_floor")),
        (3, 2),
        "{info}"
    );
}

/// Every malformed FLOOR gets its exact error, and nothing changes.
fn bad_input_battery(flavor: Flavor) {
    let server = Server::start(flavor);
    fn take<'a>(options: &[&'a [u8]]) -> Vec<&'a [u8]> {
        let mut args: Vec<&[u8]> = vec![b"k", b"8", b"9"];
        args.extend_from_slice(options);
        args
    }
    let megabyte = vec![b'2'; 1 << 20];
    let calls: Vec<BadCall> = vec![
        bad(&take(&[b"FLOOR"]), errors::missing("FLOOR")),
        bad(
            &take(&[b"FLOOR", b"1", b"FLOOR", b"1"]),
            errors::repeated("FLOOR"),
        ),
        bad(&take(&[b"FLOOR", b"-1"]), errors::floor(8)),
        bad(&take(&[b"FLOOR", b"1.5"]), errors::floor(8)),
        bad(&take(&[b"FLOOR", b""]), errors::floor(8)),
        bad(&take(&[b"FLOOR", b"8"]), errors::floor(8)),
        bad(&take(&[b"FLOOR", &megabyte]), errors::floor(8)),
        bad(&take(&[b"TOKENS", b"3", b"FLOOR", b"6"]), errors::floor(8)),
        bad(&take(&[b"TOKENS", b"0", b"FLOOR", b"8"]), errors::floor(8)),
        bad(&take(&[b"FLOR", b"1"]), errors::TAKE_UNKNOWN),
    ];
    let mut checked = check_battery(&server, "THROTTLE.TAKE", &calls);
    let mtake = |tail: &[&'static [u8]]| {
        let mut args: Vec<&[u8]> = vec![b"2", b"{m}a", b"{m}b", b"8", b"9", b"1", b"8", b"9", b"1"];
        args.extend_from_slice(tail);
        args
    };
    let calls: Vec<BadCall> = vec![
        bad(&mtake(&[b"FLOOR"]), errors::floors(2)),
        bad(&mtake(&[b"FLOOR", b"1"]), errors::floors(2)),
        bad(&mtake(&[b"FLOOR", b"1", b"1", b"1"]), errors::MTAKE_UNKNOWN),
        bad(&mtake(&[b"FLOOR", b"1", b"8"]), errors::floor(8)),
        bad(&mtake(&[b"FLOOR", b"x", b"1"]), errors::floor(8)),
        bad(
            &mtake(&[b"FLOOR", b"1", b"1", b"FLOOR", b"1", b"1"]),
            errors::repeated("FLOOR"),
        ),
    ];
    checked += check_battery(&server, "THROTTLE.MTAKE", &calls);
    let mut con = server.conn();
    let reply: Value = query(&mut con, &line("THROTTLE.TAKE after 8 9 TOKENS 1 FLOOR 7"));
    assert_eq!(ints(&reply)[..2], [1, 7]);
    // FLOOR 0 is no floor, so it may reserve: TAKE, and MTAKE with every floor 0.
    for call in [
        "THROTTLE.TAKE zero 1 0.001 FLOOR 0 MAXWAIT 100",
        "THROTTLE.MTAKE 2 {z}a {z}b 1 0.001 1 1 0.001 1 MAXWAIT 100 FLOOR 0 0",
    ] {
        let reply: Value = query(&mut con, &line(call));
        assert_eq!(ints(&reply)[0], 1, "{call}");
    }
    println!("{flavor}: {checked} malformed FLOOR calls checked");
}
