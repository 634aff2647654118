//! THROTTLE.PAUSE on every server: the first token is there exactly `ms` from now, then one
//! per interval with no burst on resume; a shorter pause is a no-op that replies the longer
//! remaining time, and no pause shortens a debt. Replicas and the AOF get the resulting state
//! (SET ... PXAT), and a no-op pause propagates nothing. The paused state survives AOF and RDB
//! restarts, the key expires when the bucket is full again, and every malformed call gets its
//! exact error and leaves the server and its keys alone.

use std::time::{Duration, Instant};

use throttle_e2e::{
    aof_server, aof_size, assert_aof_holds_effects, assert_duration, assert_reply,
    assert_server_instant, bad, bad_keys, bad_quotas, bad_wholes, ceil_ms, check_battery, digest,
    errors, exec, int, ints, line, num, pause, peek, per_server, pexpiretime, pttl, query,
    server_time_ns, slack_ms, state, take_any, within, BadCall, Connection, Flavor, Pair, Server,
    Value, NS_PER_MS,
};

per_server!(
    first_token_exactly_ms_from_now_then_one_per_interval,
    no_burst_on_resume_in_real_time,
    a_shorter_pause_is_a_no_op_and_no_pause_shortens_a_debt,
    replicas_get_the_paused_state_and_a_no_op_nothing,
    the_paused_state_survives_aof_and_rdb_restarts,
    the_key_expires_when_the_bucket_is_full_again,
    bad_input_battery,
);

const MS: i64 = NS_PER_MS;

/// Capacity 10 at 10/s (100 ms a token), paused for 1.5 s, in one MULTI: the pause replies
/// 1500; the state is that instant plus the pause plus nine intervals (a full bucket less one
/// token); a take is denied for exactly 1500 ms; reservations come 1500 ms, then 1600, 1700:
/// one token when the pause ends, then one per interval.
fn first_token_exactly_ms_from_now_then_one_per_interval(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let before = server_time_ns(&mut con);
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.PAUSE p 10 10 1500"),
            line("GET p"),
            line("THROTTLE.TAKE p 10 10"),
            line("THROTTLE.TAKE p 10 10 TOKENS 2 MAXWAIT 1000"),
            line("THROTTLE.PEEK p 10 10"),
            line("THROTTLE.TAKE p 10 10 MAXWAIT 60000"),
            line("THROTTLE.TAKE p 10 10 MAXWAIT 60000"),
            line("THROTTLE.TAKE p 10 10 MAXWAIT 60000"),
            line("THROTTLE.TAKE p 10 10 TOKENS 0"),
        ],
    );
    let after = server_time_ns(&mut con);
    // The reply does not depend on the clock: the pause writes, so it is exactly its ms.
    assert_eq!(int(&replies[0]), 1500, "PAUSE 1500 on a full bucket");
    let paused = num(&replies[1]);
    assert_server_instant(
        flavor,
        paused - 1500 * MS - 900 * MS,
        before,
        after,
        "the state less the pause and nine intervals",
    );
    let durations = &[2, 3];
    assert_reply(
        &ints(&replies[2]),
        // Denied for the tokens during the pause: 1 + 8.
        &[0, 0, 1500, 2400, 9],
        durations,
        slack,
        "a take at once",
    );
    assert_reply(
        &ints(&replies[3]),
        // The tokens, during the pause: 1 + 8.
        &[0, 0, 1600, 2400, 9],
        durations,
        slack,
        "2 tokens within 1 s",
    );
    // PEEK: the bucket as TOKENS 0 sees it, then how long it is paused, at the full rate.
    assert_reply(
        &ints(&replies[4]),
        &[1, 0, 0, 2400, 1500, 10_000],
        &[3, 4],
        slack,
        "PEEK",
    );
    for (k, reply) in (0..).zip(&replies[5..8]) {
        assert_reply(
            &ints(reply),
            &[1, 0, 1500 + 100 * k, 2500 + 100 * k],
            durations,
            slack,
            &format!("reservation {} after the pause", k + 1),
        );
    }
    assert_reply(
        &ints(&replies[8]),
        &[1, 0, 0, 2700],
        &[3],
        slack,
        "TOKENS 0",
    );
    assert_eq!(
        state(&mut con, "p"),
        paused + 300 * MS,
        "three reservations move the state three intervals"
    );

    // RESP3: the same integer.
    let mut resp3 = throttle_e2e::resp3(&server);
    assert_eq!(
        pause(&mut resp3, "p:resp3", "10 10 1500"),
        1500,
        "over RESP3"
    );
}

/// Capacity 10 at 1/s, paused 300 ms, on the clock: no token until the pause is over (seen
/// no sooner than 300 ms after the pause was sent), then exactly one, and the next one a
/// whole interval (1 s) after the pause ended, less only the time that has passed since.
fn no_burst_on_resume_in_real_time(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let sent = Instant::now();
    assert_eq!(pause(&mut con, "r", "10 1 300"), 300);
    let reply = take_any(&mut con, "r", "10 1");
    assert_reply(
        &reply,
        &[0, 0, 300, 9300, 9],
        &[2, 3],
        slack_ms(sent),
        "a take right after the pause",
    );
    // Poll with PEEK (it writes nothing) until the first token is there: bounded.
    let seen = within(
        "the first token after a 300 ms pause",
        Duration::from_secs(3),
        || {
            let reply = peek(&mut con, "r", "10 1");
            assert!(reply[1] <= 1, "a burst after the pause: {reply:?}");
            (reply[1] == 1).then(Instant::now)
        },
    );
    let waited = seen.duration_since(sent);
    assert!(
        waited >= Duration::from_millis(300),
        "a token was there {waited:?} after a 300 ms pause was sent"
    );
    let first = take_any(&mut con, "r", "10 1");
    assert_eq!(
        first[..3],
        [1, 0, 0],
        "the first token after the pause: {first:?}"
    );
    let second = take_any(&mut con, "r", "10 1");
    // The token came at the pause's end, at most `since` ms ago; the next one is due one
    // interval (1000 ms) after it.
    let since = slack_ms(sent) - 300;
    assert!(
        since < 900,
        "the check took {since} ms past the pause: too slow to tell"
    );
    assert_eq!(second[..2], [0, 0], "a second token right away: {second:?}");
    assert_duration(second[2], 1000, since, "the wait for the second token");
}

/// A pause of 60 s, then a shorter one: a no-op (same state, same expiry) that replies the
/// longer pause's remaining time; the same pause again: the same; a longer one: extends it.
/// A debt of 11 s (capacity 10 at 1/s, 20 reserved) outlasts a 1 s pause: nothing changes,
/// and the reply is the debt's next token.
fn a_shorter_pause_is_a_no_op_and_no_pause_shortens_a_debt(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let (replies, slack) = exec(
        &mut con,
        flavor,
        &[
            line("THROTTLE.PAUSE long 10 1 60000"),
            line("GET long"),
            line("PEXPIRETIME long"),
            line("THROTTLE.PAUSE long 10 1 1000"),
            line("THROTTLE.PAUSE long 10 1 60000"),
            line("GET long"),
            line("PEXPIRETIME long"),
            line("THROTTLE.PAUSE long 10 1 120000"),
            line("GET long"),
            // The debt: 10 at once, 10 more reserved (20 s past now).
            line("THROTTLE.TAKE debt 10 1 TOKENS 10"),
            line("THROTTLE.TAKE debt 10 1 TOKENS 10 MAXWAIT 20000"),
            line("GET debt"),
            line("THROTTLE.PAUSE debt 10 1 1000"),
            line("GET debt"),
            line("THROTTLE.TAKE debt 10 1"),
            line("THROTTLE.PAUSE debt 10 1 11000"),
            line("THROTTLE.PAUSE debt 10 1 11001"),
            line("GET debt"),
        ],
    );
    let num = |i: usize| num(&replies[i]);
    // Redis 7.0 (slack > 0): its clock may also catch up once on the wall clock's
    // millisecond (module/src/clock.rs: a fresh anchor lags by up to 999 µs).
    let catch_up = if slack == 0 { 0 } else { 1 };
    assert_eq!(num(0), 60_000);
    let (first, expiry) = (num(1), num(2));
    assert_eq!(expiry, ceil_ms(first), "PEXPIRETIME is the state's ms");
    assert_duration(num(3), 60_000, slack, "a 1 s pause during a 60 s one");
    assert_duration(num(4), 60_000, slack, "the same 60 s pause again");
    if slack == 0 {
        assert_eq!(
            (num(5), num(6)),
            (first, expiry),
            "a no-op pause changed the key"
        );
    } else {
        // Redis 7.0's clock moved inside the MULTI: the same pause a little later moves the
        // state by as much (and the catch-up), no more.
        let moved = num(5) - first;
        assert!(
            (0..=(slack + catch_up) * MS).contains(&moved),
            "the same pause again moved the state {moved} ns (the EXEC took < {slack} ms)"
        );
    }
    assert_eq!(num(7), 120_000, "a longer pause");
    let longer = num(8) - first;
    assert!(
        (60_000 * MS..=(60_000 + slack + catch_up) * MS).contains(&longer),
        "a 120 s pause after a 60 s one moved the state {longer} ns"
    );

    assert_reply(
        &ints(&replies[10]),
        &[1, 0, 10_000, 20_000],
        &[2, 3],
        slack,
        "reserve 10",
    );
    let debt = num(11);
    // The next token is at the state less nine intervals: 11 s from now.
    assert_duration(num(12), 11_000, slack, "a 1 s pause on 11 s of debt");
    assert_eq!(num(13), debt, "a pause shortened a debt");
    assert_reply(
        &ints(&replies[14]),
        // The tokens, and the 1 s pause still on: 1 + 8.
        &[0, 0, 11_000, 20_000, 9],
        &[2, 3],
        slack,
        "a take",
    );
    // A pause exactly as long as the debt is a no-op too, on a frozen clock; one ms more
    // extends it by 1 ms.
    if slack == 0 {
        assert_eq!(num(15), 11_000);
        assert_eq!(num(16), 11_001);
        assert_eq!(num(17), debt + MS, "11001 ms after 11000 ms of debt");
    } else {
        assert!(num(17) >= debt, "a pause moved the state back");
    }
}

/// A primary and a replica: after a pause the replica holds the very state (DEBUG DIGEST,
/// GET and PEXPIRETIME equal), applied as a SET, never THROTTLE.PAUSE; a no-op pause (a
/// shorter one) and a take it denies propagate nothing; a longer pause is replicated.
fn replicas_get_the_paused_state_and_a_no_op_nothing(flavor: Flavor) {
    let pair = Pair::start(flavor);
    let mut con = pair.primary.conn();
    assert_eq!(pause(&mut con, "rp", "10 1 600000"), 600_000);
    assert_eq!(
        pause(&mut con, b"rp:\xff\x00bin".as_slice(), "1 0.01 600000"),
        600_000
    );
    pair.assert_replica_same("after a pause");
    let mut rcon = pair.replica.conn();
    assert_eq!(state(&mut rcon, "rp"), state(&mut con, "rp"));
    assert_eq!(pexpiretime(&mut rcon, "rp"), pexpiretime(&mut con, "rp"));

    // (The same pause again is a no-op only at the same instant: later it moves the state
    // by the time between, and that is replicated.)
    pair.assert_replicates_nothing("shorter pauses and denied takes", |con| {
        let reply = pause(con, "rp", "10 1 1000");
        assert!((590_000..=600_000).contains(&reply), "{reply}");
        let reply = pause(con, "rp", "10 1 590000");
        assert!((590_000..=600_000).contains(&reply), "{reply}");
        assert_eq!(take_any(con, "rp", "10 1")[0], 0);
        assert_eq!(take_any(con, "rp", "10 1 MAXWAIT 1000")[0], 0);
    });
    // A longer pause is replicated.
    assert_eq!(pause(&mut con, "rp", "10 1 700000"), 700_000);
    pair.assert_replica_same("after a longer pause");
    assert_eq!(state(&mut rcon, "rp"), state(&mut con, "rp"));
}

/// The paused state survives a restart: AOF (appendfsync always, kill -9, replay) and RDB
/// (SAVE, stop, restart). The AOF holds SET ... PXAT, never the command; a no-op pause adds
/// nothing to it. After each restart the state, the expiry and the digest are what they were,
/// and a take is denied until the pause's end.
fn the_paused_state_survives_aof_and_rdb_restarts(flavor: Flavor) {
    // AOF.
    let mut server = aof_server(flavor);
    let mut con = server.conn();
    assert_eq!(pause(&mut con, "aof:p", "10 1 600000"), 600_000);
    assert_aof_holds_effects(server.dir(), "pxat", "after a pause");
    let size = aof_size(server.dir());
    assert!(pause(&mut con, "aof:p", "10 1 1000") > 598_000);
    assert_eq!(
        aof_size(server.dir()),
        size,
        "a no-op pause wrote to the AOF"
    );
    let kept = Kept::read(&mut con, "aof:p");
    drop(con);
    server.kill();
    server.restart();
    kept.check(&mut server.conn(), "after kill -9 and AOF replay");

    // RDB.
    let mut server = Server::start(flavor);
    let mut con = server.conn();
    assert_eq!(pause(&mut con, "rdb:p", "1 0.5 600000"), 600_000);
    let kept = Kept::read(&mut con, "rdb:p");
    let _: () = query(&mut con, &redis::cmd("SAVE"));
    drop(con);
    server.stop();
    server.restart();
    kept.check(&mut server.conn(), "after SAVE and a restart");
}

/// A paused bucket as read before a restart (capacity 10 at 1/s, or 1 at 0.5/s).
struct Kept {
    key: &'static str,
    quota: &'static str,
    /// Capacity less one, times the interval: the state less the pause's end.
    short_of_full_ns: i64,
    state: i64,
    expiry: i64,
    digest: String,
}

impl Kept {
    fn read(con: &mut Connection, key: &'static str) -> Kept {
        let (quota, short_of_full_ns) = match key {
            "aof:p" => ("10 1", 9_000 * MS),
            _ => ("1 0.5", 0),
        };
        Kept {
            key,
            quota,
            short_of_full_ns,
            state: state(con, key),
            expiry: pexpiretime(con, key),
            digest: digest(con),
        }
    }

    #[track_caller]
    fn check(&self, con: &mut Connection, when: &str) {
        assert_eq!(digest(con), self.digest, "{when}: the dataset");
        assert_eq!(state(con, self.key), self.state, "{when}: the state");
        assert_eq!(
            pexpiretime(con, self.key),
            self.expiry,
            "{when}: the expiry"
        );
        assert_eq!(self.expiry, ceil_ms(self.state));
        let end = self.state - self.short_of_full_ns;
        let before = server_time_ns(con);
        let reply = take_any(con, self.key, self.quota);
        let after = server_time_ns(con);
        assert_eq!(
            reply[..2],
            [0, 0],
            "{when}: a take during the pause: {reply:?}"
        );
        // One ms either way for Redis 7.0's module clock, within a ms of TIME.
        let (low, high) = (ceil_ms(end - after) - 1, ceil_ms(end - before) + 1);
        assert!(
            (low..=high).contains(&reply[2]),
            "{when}: wait {} ms, the pause ends {low}..={high} ms from now",
            reply[2]
        );
    }
}

/// The key's expiry is the state rounded up to the ms, the instant the bucket is full again,
/// after a pause of a missing key, of a bucket partly used, and after a longer pause; the TTL
/// counts down to it. With capacity 1 that is the pause's end: the key is gone soon after.
fn the_key_expires_when_the_bucket_is_full_again(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let _ = take_any(&mut con, "partial", "5 0.01 TOKENS 2");
    // Every one of these pauses moves the state (the first, and one longer than the debt or
    // pause before it), so each replies its ms.
    for (key, quota, ms) in [
        ("missing", "10 1", 60_000),
        ("partial", "5 0.01", 1_000),
        ("missing", "10 1", 90_000),
        ("one", "1 0.001", 200),
    ] {
        let what = format!("PAUSE {key} {quota} {ms}");
        let before = server_time_ns(&mut con) / MS;
        assert_eq!(pause(&mut con, key, &format!("{quota} {ms}")), ms, "{what}");
        let value = state(&mut con, key);
        let expiry = pexpiretime(&mut con, key);
        let ttl = pttl(&mut con, key);
        let after = ceil_ms(server_time_ns(&mut con));
        assert_eq!(
            expiry,
            ceil_ms(value),
            "{what}: PEXPIRETIME is the state's ms"
        );
        assert!(
            (expiry - after - 1..=expiry - before + 1).contains(&ttl),
            "{what}: PTTL {ttl}, expiry {expiry}, server time {before}..{after} ms"
        );
    }
    // Capacity 1: the state is the pause's end; the key is gone once it is over.
    within(
        "the capacity-1 key to expire",
        Duration::from_secs(3),
        || (query::<i64>(&mut con, redis::cmd("EXISTS").arg("one")) == 0).then_some(()),
    );
    assert_eq!(
        peek(&mut con, "one", "1 0.001"),
        [1, 1, 0, 0],
        "a full bucket again"
    );
}

/// Every malformed THROTTLE.PAUSE gets its exact error, and nothing changes.
fn bad_input_battery(flavor: Flavor) {
    let server = Server::start(flavor);
    let arity = errors::arity("throttle.pause");
    let mut calls: Vec<BadCall> = vec![
        bad(&[], &*arity),
        bad(&[b"k"], &*arity),
        bad(&[b"k", b"8"], &*arity),
        bad(&[b"k", b"8", b"9"], &*arity),
        bad(&[b"k", b"8", b"9", b"100", b"5"], &*arity),
        bad(&[b"k", b"8", b"9", b"100", b"MAXWAIT", b"5"], &*arity),
        bad(&[b"k", b"8", b"9", b"0"], errors::PAUSE_MS),
        bad(&[b"k", b"8", b"9", b"+100"], errors::PAUSE_MS),
        bad(&[b"k", b"8", b"9", b"315360000001"], errors::PAUSE_MS),
        // The arguments are checked before the key is read.
        bad(&[b"t:list", b"0", b"9", b"100"], errors::CAPACITY),
    ];
    calls.extend(bad_wholes(&[b"k", b"8", b"9"], &[], errors::PAUSE_MS));
    calls.extend(bad_quotas(&[b"100"]));
    calls.extend(bad_keys(&[b"8", b"9", b"100"]));
    let checked = check_battery(&server, "THROTTLE.PAUSE", &calls);
    // The largest pause is accepted, and the module still works after all that.
    let mut con = server.conn();
    assert_eq!(
        pause(&mut con, "after", "8 9 315360000000"),
        315_360_000_000
    );
    let value: Value = query(&mut con, &line("THROTTLE.PAUSE after2 8 9 1"));
    assert_eq!(int(&value), 1);
    println!("{flavor}: {checked} malformed THROTTLE.PAUSE calls checked");
}
