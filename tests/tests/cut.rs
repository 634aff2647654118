//! THROTTLE.CUT on every server: the supplier answered 429 or 503, so the bucket pauses and
//! its rate is multiplied by the factor (tokens cost more), once per congestion episode, never
//! below 1 % of the configured rate; the rate climbs back linearly over the recovery time, and
//! the key goes back to the 8-byte state once nothing is in effect. Replicas and the AOF get
//! the resulting state; a cut that changes nothing propagates nothing; every malformed call
//! gets its exact error.

use std::time::{Duration, Instant};

use throttle_e2e::{
    aof_server, assert_aof_holds_effects, assert_reply, bad, bad_keys, bad_quotas, bad_wholes,
    ceil_ms, check_battery, cut, digest, errors, exec, get, ints, line, pause, peek_full,
    per_server, pexpiretime, pushback_of, query, take_any, within, BadCall, Flavor, Pair, Server,
};

per_server!(
    a_cut_pauses_then_every_token_costs_more,
    a_cut_during_a_pause_only_lengthens_it,
    each_episode_cuts_once_and_never_below_a_hundredth,
    the_rate_climbs_back_and_the_key_returns_to_eight_bytes,
    replicas_and_restarts_keep_the_cut,
    bad_input_battery,
);

/// The longest recovery: over a test's few seconds the factor does not climb a basis point.
const FOREVER: &str = "315360000000";

/// Capacity 10 at 10/s (100 ms a token), cut to half for 1000 s with a 1 s pause, in one
/// MULTI. The reply: cut, the next token in 1001 ms (the pause, then the state's first token
/// as the rate now prices it: 0.2 ms past the pause, rounded up), factor 5000, recovered in
/// 1000 s. The key holds 32 bytes: the state, the pause's end and the cut. PEEK: empty, full
/// in 1801 ms (the pause, then nine tokens at 200 ms less what the rate climbs in 1 s),
/// paused 1000 ms, factor 5000. A take is denied for 1001 ms; reservations then come every
/// 200 ms, not 100: half the rate.
fn a_cut_pauses_then_every_token_costs_more(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.CUT k 10 10 1000 0.5 1000000"),
            line("GET k"),
            line("THROTTLE.PEEK k 10 10"),
            line("THROTTLE.TAKE k 10 10"),
            line("THROTTLE.TAKE k 10 10 MAXWAIT 5000"),
            line("THROTTLE.TAKE k 10 10 MAXWAIT 5000"),
            line("THROTTLE.TAKE k 10 10 MAXWAIT 5000"),
        ],
    );
    assert_reply(
        &ints(&replies[0]),
        &[1, 1001, 5000, 1_000_000],
        &[1, 3],
        slack,
        "CUT",
    );
    let raw = match &replies[1] {
        redis::Value::BulkString(bytes) => bytes.clone(),
        other => panic!("GET k: {other:?}"),
    };
    let pushback = pushback_of(&raw).expect("a cut stores the 32-byte state");
    let (cut_at, factor, recovery) = pushback.cut.expect("the state holds the cut");
    assert_eq!((factor, recovery), (5000, 1_000_000), "{pushback:?}");
    assert_eq!(
        pushback.paused_until - cut_at,
        1000 * 1_000_000,
        "the pause ends 1 s after the cut: {pushback:?}"
    );
    assert_reply(
        &ints(&replies[2]),
        &[1, 0, 0, 1801, 1000, 5000],
        &[3, 4],
        slack,
        "PEEK",
    );
    assert_reply(
        &ints(&replies[3]),
        // Denied for the tokens during the pause: 1 + 8.
        &[0, 0, 1001, 1801, 9],
        &[2, 3],
        slack,
        "a take",
    );
    for (k, reply) in (0..).zip(&replies[4..7]) {
        assert_reply(
            &ints(reply),
            &[1, 0, 1001 + 200 * k, 2001 + 200 * k],
            &[2, 3],
            slack,
            &format!("reservation {} after the cut", k + 1),
        );
    }
}

/// A cut while the bucket is paused is the same episode: a plain pause of 60 s, then a cut
/// asking for 1 s, cuts nothing ([0, 60000, 10000, 0]) and changes nothing. A cut, then
/// another with a longer pause: the rate stays cut once (factor 5000, not 2500), the pause
/// is the longer one, and the recovery still counts from the first cut.
///
/// The next token is the pause's end plus what a token costs now (at half the rate, 200 ms)
/// less what it costs when the pause ends (the rate has climbed by then): with a 30 s
/// recovery, a 1 s pause ends at factor 5166 (193.57 ms a token), so 1007 ms; a 5 s pause
/// at 5833 (171.44 ms), so 5029 ms. Never early: the first token is there at the pause's
/// end, and no sooner.
fn a_cut_during_a_pause_only_lengthens_it(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.PAUSE p 10 10 60000"),
            line("GET p"),
            line("THROTTLE.CUT p 10 10 1000 0.5 30000"),
            line("GET p"),
            line("THROTTLE.CUT e 10 10 1000 0.5 30000"),
            line("THROTTLE.CUT e 10 10 5000 0.5 30000"),
            line("THROTTLE.PEEK e 10 10"),
        ],
    );
    assert_eq!(
        replies[1], replies[3],
        "a cut during a pause changed the state"
    );
    assert_reply(
        &ints(&replies[2]),
        &[0, 60_000, 10_000, 0],
        &[1],
        slack,
        "a cut during a pause",
    );
    assert_reply(
        &ints(&replies[4]),
        &[1, 1007, 5000, 30_000],
        &[1, 3],
        slack,
        "the first cut",
    );
    // The recovery counts from the first cut: 30 s from now in a frozen MULTI.
    assert_reply(
        &ints(&replies[5]),
        &[0, 5029, 5000, 30_000],
        &[1, 3],
        slack,
        "the second cut of an episode, with a longer pause",
    );
    let peeked = ints(&replies[6]);
    assert_eq!(peeked[5], 5000, "PEEK's factor: {peeked:?}");
    assert!(
        (5000 - slack..=5000).contains(&peeked[4]),
        "PEEK's pause: {peeked:?}"
    );
}

/// Cuts with a 1 ms pause, each after the last one's pause is over: each cuts again
/// (10 000 × 0.1 = 1000, then 100), and the third stays at 100, the floor of 1 %. Each cut
/// starts the recovery anew.
fn each_episode_cuts_once_and_never_below_a_hundredth(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let args = format!("10 10 1 0.1 {FOREVER}");
    let recovery = FOREVER.parse::<i64>().expect("a number");
    for (round, factor) in [1000, 100, 100].into_iter().enumerate() {
        let reply = cut(&mut con, "c", &args);
        assert_eq!(
            (reply[0], reply[2], reply[3]),
            (1, factor, recovery),
            "cut {}: {reply:?}",
            round + 1
        );
        // The next episode starts once the pause is over (PEEK writes nothing).
        within("the 1 ms pause to end", Duration::from_secs(3), || {
            (peek_full(&mut con, "c", "10 10")[4] == 0).then_some(())
        });
    }
    assert_eq!(peek_full(&mut con, "c", "10 10")[5], 100, "the floor");
}

/// Capacity 10 at 10/s, cut to half with a 1 ms pause and a 300 ms recovery, on the clock:
/// PEEK's factor never falls and never passes 10 000, and reaches 10 000 no sooner than
/// 300 ms after the cut was sent. The key still holds the cut until a write finds it
/// recovered: the next take stores the 8-byte state again, and the key expires when the
/// bucket is full.
fn the_rate_climbs_back_and_the_key_returns_to_eight_bytes(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let sent = Instant::now();
    let reply = cut(&mut con, "r", "10 10 1 0.5 300");
    assert_eq!((reply[0], reply[2]), (1, 5000), "{reply:?}");
    let mut factors = vec![];
    let recovered = within(
        "the factor to climb back to 10000",
        Duration::from_secs(5),
        || {
            let factor = peek_full(&mut con, "r", "10 10")[5];
            factors.push(factor);
            std::thread::sleep(Duration::from_millis(10));
            (factor == 10_000).then(Instant::now)
        },
    );
    assert!(
        factors.windows(2).all(|w| w[0] <= w[1]) && factors[0] >= 5000,
        "the factor fell while recovering: {factors:?}"
    );
    let took = recovered.duration_since(sent);
    assert!(
        took >= Duration::from_millis(300),
        "the rate was back {took:?} after a cut with a 300 ms recovery: {factors:?}"
    );
    assert_eq!(get(&mut con, "r").map(|v| v.len()), Some(32));
    let taken = take_any(&mut con, "r", "10 10");
    assert_eq!(taken[0], 1, "{taken:?}");
    let raw = get(&mut con, "r").expect("the bucket after a take");
    assert_eq!(
        raw.len(),
        8,
        "the state once the cut has recovered: {raw:?}"
    );
    let state = i64::from_le_bytes(raw.try_into().expect("8 bytes"));
    assert_eq!(pexpiretime(&mut con, "r"), ceil_ms(state), "the expiry");
}

/// A primary and a replica: a cut reaches the replica as its 32-byte state with the same
/// expiry; a cut of the same episode that changes nothing propagates nothing. The state
/// survives kill -9 and an AOF replay, and SAVE and a restart: the take after it is denied.
fn replicas_and_restarts_keep_the_cut(flavor: Flavor) {
    let pair = Pair::start(flavor);
    let mut con = pair.primary.conn();
    let args = |ms: u64| format!("10 1 {ms} 0.5 {FOREVER}");
    assert_eq!(cut(&mut con, "rc", &args(600_000))[0], 1);
    pair.assert_replica_same("after a cut");
    let mut rcon = pair.replica.conn();
    assert_eq!(get(&mut rcon, "rc"), get(&mut con, "rc"));
    assert_eq!(pexpiretime(&mut rcon, "rc"), pexpiretime(&mut con, "rc"));
    pair.assert_replicates_nothing("a cut of the same episode, shorter", |con| {
        let reply = cut(con, "rc", &args(1000));
        assert_eq!((reply[0], reply[2]), (0, 5000), "{reply:?}");
        assert!(reply[1] > 590_000, "{reply:?}");
    });

    let mut server = aof_server(flavor);
    let mut con = server.conn();
    assert_eq!(cut(&mut con, "aof:c", &args(600_000))[0], 1);
    assert_aof_holds_effects(server.dir(), "pxat", "after a cut");
    let (before, expiry, dataset) = (
        get(&mut con, "aof:c"),
        pexpiretime(&mut con, "aof:c"),
        digest(&mut con),
    );
    drop(con);
    server.kill();
    server.restart();
    let mut con = server.conn();
    assert_eq!(get(&mut con, "aof:c"), before, "after an AOF replay");
    assert_eq!(pexpiretime(&mut con, "aof:c"), expiry);
    assert_eq!(digest(&mut con), dataset);
    let _: () = query(&mut con, &redis::cmd("SAVE"));
    drop(con);
    server.stop();
    server.restart();
    let mut con = server.conn();
    assert_eq!(get(&mut con, "aof:c"), before, "after SAVE and a restart");
    let denied = take_any(&mut con, "aof:c", "10 1");
    assert_eq!(
        denied[..2],
        [0, 0],
        "a take during the cut's pause: {denied:?}"
    );
    // Still the same episode after the restart.
    assert_eq!(cut(&mut con, "aof:c", &args(1000))[0], 0);
    assert!(pause(&mut con, "aof:c", "10 1 1000") > 590_000);
    let reply = ints(&query(&mut con, &line("THROTTLE.PEEK aof:c 10 1")));
    assert_eq!(reply[5], 5000, "{reply:?}");
}

/// Every malformed THROTTLE.CUT gets its exact error, and nothing changes.
fn bad_input_battery(flavor: Flavor) {
    let server = Server::start(flavor);
    let arity = errors::arity("throttle.cut");
    let megabyte = vec![b'7'; 1 << 20];
    let ok = |ms: &'static [u8], factor: &'static [u8], recovery: &'static [u8]| {
        [b"k".as_slice(), b"8", b"9", ms, factor, recovery]
    };
    let mut calls: Vec<BadCall> = vec![
        bad(&[], &*arity),
        bad(&[b"k", b"8", b"9", b"100", b"0.5"], &*arity),
        bad(&[b"k", b"8", b"9", b"100", b"0.5", b"1", b"2"], &*arity),
        bad(&ok(b"0", b"0.5", b"1"), errors::PAUSE_MS),
        bad(&ok(b"315360000001", b"0.5", b"1"), errors::PAUSE_MS),
        bad(&ok(b"100", b"0", b"1"), errors::FACTOR),
        bad(&ok(b"100", b"0.0099", b"1"), errors::FACTOR),
        bad(&ok(b"100", b"1.0001", b"1"), errors::FACTOR),
        bad(&ok(b"100", b"2", b"1"), errors::FACTOR),
        bad(&ok(b"100", b"-0.5", b"1"), errors::FACTOR),
        bad(&ok(b"100", b"0.5e0", b"1"), errors::FACTOR),
        bad(&ok(b"100", b".", b"1"), errors::FACTOR),
        bad(&ok(b"100", b"", b"1"), errors::FACTOR),
        bad(&ok(b"100", b"nan", b"1"), errors::FACTOR),
        bad(&ok(b"100", b"0.5\xff", b"1"), errors::FACTOR),
        bad(&ok(b"100", b"0.5", b"0"), errors::RECOVERY),
        bad(&ok(b"100", b"0.5", b"315360000001"), errors::RECOVERY),
        bad(&[b"k", b"8", b"9", b"100", &megabyte, b"1"], errors::FACTOR),
        // The arguments are checked before the key is read.
        bad(&[b"t:list", b"8", b"9", b"100", b"0", b"1"], errors::FACTOR),
    ];
    calls.extend(bad_wholes(
        &[b"k", b"8", b"9"],
        &[b"0.5", b"1"],
        errors::PAUSE_MS,
    ));
    calls.extend(bad_wholes(
        &[b"k", b"8", b"9", b"100", b"0.5"],
        &[],
        errors::RECOVERY,
    ));
    calls.extend(bad_quotas(&[b"100", b"0.5", b"1"]));
    calls.extend(bad_keys(&[b"8", b"9", b"100", b"0.5", b"1"]));
    let checked = check_battery(&server, "THROTTLE.CUT", &calls);
    // The extremes are accepted, and the module still works after all that.
    let mut con = server.conn();
    let reply = cut(&mut con, "after", "8 9 315360000000 0.01 315360000000");
    assert_eq!(
        (reply[0], reply[2], reply[3]),
        (1, 100, 315_360_000_000),
        "the longest cut: {reply:?}"
    );
    assert!(reply[1] >= 315_360_000_000, "{reply:?}");
    let reply = cut(&mut con, "after2", "8 9 1 1 1");
    assert_eq!(
        (reply[0], reply[2]),
        (1, 10_000),
        "a factor of 1: {reply:?}"
    );
    println!("{flavor}: {checked} malformed THROTTLE.CUT calls checked");
}
