//! THROTTLE.PEEK on every server: the reply of THROTTLE.TAKE ... TOKENS 0 (in RESP2 and
//! RESP3), nothing written (no key, same expiry and encoding, no dirty count, no WATCH
//! tripped), and, being a read-only command, answered where a write is refused: on a read-only
//! replica (with the primary's state), in EVAL_RO, in a `no-writes` function under FCALL_RO,
//! during CLIENT PAUSE WRITE (while a take waits for the pause to end), and under OOM. Every
//! malformed call gets its exact error and changes nothing.

use std::time::{Duration, Instant};

use throttle_e2e::{
    assert_reply, bad, bad_keys, bad_quotas, check_battery, digest, error_text, errors, exec,
    exists, get, info, info_field, ints, line, peek, per_server, pexpiretime, query, send,
    slack_ms, take_any, BadCall, Connection, Flavor, Pair, Server, Value,
};

per_server!(
    the_reply_of_tokens_0,
    writes_nothing,
    a_read_only_replica_answers_with_the_primarys_state,
    in_eval_ro_and_a_no_writes_function,
    during_client_pause_write,
    under_oom,
    bad_input_battery,
);

/// Capacity 10, one token every 100 s.
const SLOW: &str = "10 0.01";

/// Sets up `partial` (4 of 10 used) and `debt` (3 of 3 used and one more reserved).
fn set_up(con: &mut Connection) {
    let _ = take_any(con, "partial", &format!("{SLOW} TOKENS 4"));
    let _ = take_any(con, "debt", "3 0.01 TOKENS 3");
    let _ = take_any(con, "debt", "3 0.01 MAXWAIT 100000");
}

/// Each key [`set_up`] (or the same calls in a MULTI) leaves, with its quota, and the first
/// four integers PEEK answers for it (granted, remaining, wait ms, reset ms): the partly used
/// bucket, the one in debt past full, and a missing key (a full bucket).
const SET_UP_PEEKS: [(&str, &str, [i64; 4]); 3] = [
    ("partial", SLOW, [1, 6, 0, 400_000]),
    ("debt", "3 0.01", [1, 0, 0, 400_000]),
    ("missing", SLOW, [1, 10, 0, 0]),
];

/// In one MULTI, for a partly used bucket, one in debt past full and a missing key: PEEK,
/// TAKE ... TOKENS 0 and PEEK again answer the same; over RESP3 too.
fn the_reply_of_tokens_0(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    for (key, quota, want) in SET_UP_PEEKS {
        let (replies, slack) = exec(
            &mut con,
            flavor,
            &[
                line("DEL partial debt missing"),
                line(&format!("THROTTLE.TAKE partial {SLOW} TOKENS 4")),
                line("THROTTLE.TAKE debt 3 0.01 TOKENS 3"),
                line("THROTTLE.TAKE debt 3 0.01 MAXWAIT 100000"),
                line(&format!("THROTTLE.PEEK {key} {quota}")),
                line(&format!("THROTTLE.TAKE {key} {quota} TOKENS 0")),
                line(&format!("throttle.peek {key} {quota}")),
            ],
        );
        // PEEK: what TOKENS 0 replies, then the pause (none) and the rate's factor (full).
        let first = ints(&replies[4]);
        assert_eq!(first.len(), 6, "PEEK {key}: {first:?}");
        assert_reply(&first[..4], &want, &[3], slack, &format!("PEEK {key}"));
        assert_eq!(
            first[4..],
            [0, 10_000],
            "PEEK {key}: neither paused nor cut"
        );
        assert_reply(
            &ints(&replies[5]),
            &first[..4],
            &[3],
            slack,
            &format!("TAKE ... TOKENS 0 {key}"),
        );
        assert_reply(
            &ints(&replies[6]),
            &first,
            &[3],
            slack,
            &format!("PEEK again {key}"),
        );
    }

    // RESP3: the same array of integers.
    let mut resp3 = throttle_e2e::resp3(&server);
    let before = Instant::now();
    let over_resp3 = peek(&mut resp3, "partial", SLOW);
    let over_resp2 = peek(&mut con, "partial", SLOW);
    assert_reply(
        &over_resp2,
        &over_resp3,
        &[3],
        slack_ms(before),
        "RESP2 a little after RESP3",
    );
    assert_eq!(peek(&mut resp3, "missing", SLOW), [1, 10, 0, 0]);
}

/// A peek writes nothing: no key for a missing bucket; the same value, expiry and encoding for
/// an existing one; the dirty counter does not move; a WATCH on the key is not tripped (a
/// TAKE TOKENS 0 is no write either; a granted take trips it).
fn writes_nothing(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    set_up(&mut con);
    let dirty = |con: &mut Connection| {
        info_field(&info(con, "persistence"), "rdb_changes_since_last_save")
            .and_then(|v| v.parse::<i64>().ok())
            .expect("rdb_changes_since_last_save")
    };
    let encoding = |con: &mut Connection, key: &str| -> String {
        query(con, redis::cmd("OBJECT").arg("ENCODING").arg(key))
    };
    let before = (dirty(&mut con), digest(&mut con));
    for key in ["partial", "debt"] {
        let kept = (
            get(&mut con, key),
            pexpiretime(&mut con, key),
            encoding(&mut con, key),
        );
        assert_eq!(kept.2, "raw", "{key}: a state is written in place");
        for _ in 0..3 {
            let _ = peek(&mut con, key, SLOW);
        }
        let now = (
            get(&mut con, key),
            pexpiretime(&mut con, key),
            encoding(&mut con, key),
        );
        assert_eq!(now, kept, "{key}: a peek changed the key");
    }
    assert_eq!(peek(&mut con, "missing", SLOW), [1, 10, 0, 0]);
    assert!(!exists(&mut con, "missing"), "a peek created a key");
    assert_eq!((dirty(&mut con), digest(&mut con)), before, "a peek wrote");

    // WATCH: a peek (and TOKENS 0) from another client leaves the transaction alone.
    let mut other = server.conn();
    for (act, trips) in [
        (line(&format!("THROTTLE.PEEK partial {SLOW}")), false),
        (
            line(&format!("THROTTLE.TAKE partial {SLOW} TOKENS 0")),
            false,
        ),
        (line(&format!("THROTTLE.TAKE partial {SLOW}")), true),
    ] {
        let _: () = query(&mut con, redis::cmd("WATCH").arg("partial"));
        let _: Value = query(&mut other, &act);
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("SET").arg("watched").arg(1);
        let result: Value = pipe
            .query(&mut con)
            .unwrap_or_else(|e| panic!("EXEC: {}", error_text(&e)));
        let aborted = matches!(result, Value::Nil);
        assert_eq!(
            aborted,
            trips,
            "{}: EXEC gave {result:?}",
            throttle_e2e::shown(&act)
        );
    }
}

/// A primary with a bucket in debt and one partly used, and its read-only replica: the
/// replica answers PEEK with the primary's state (and a missing key as full) while it refuses
/// every command that writes, TOKENS 0 included.
fn a_read_only_replica_answers_with_the_primarys_state(flavor: Flavor) {
    let pair = Pair::start(flavor);
    let mut con = pair.primary.conn();
    let set_up_at = Instant::now();
    set_up(&mut con);
    pair.assert_replica_same("after the takes");
    pair.assert_replicates_nothing("peeks on the primary", |con| {
        for (key, quota) in [("partial", SLOW), ("debt", "3 0.01"), ("missing", SLOW)] {
            assert_eq!(peek(con, key, quota)[0], 1);
        }
    });
    let mut rcon = pair.replica.conn();
    let readonly: Vec<String> = query(
        &mut rcon,
        redis::cmd("CONFIG").arg("GET").arg("replica-read-only"),
    );
    assert_eq!(readonly, ["replica-read-only", "yes"]);
    for (key, quota, want) in SET_UP_PEEKS {
        let start = Instant::now();
        let on_replica = peek(&mut rcon, key, quota);
        let on_primary = peek(&mut con, key, quota);
        // The same bucket, read on the primary a little later: its reset can only be shorter,
        // by no more than the time between. Redis 7.0's module clock is anchored to each
        // server's wall clock ms on its own (module/src/clock.rs: up to 999 µs behind), so
        // there the primary's may read up to 1 ms earlier than the replica's did.
        let slack = slack_ms(start);
        assert_reply(
            &on_primary,
            &want,
            &[3],
            slack_ms(set_up_at),
            &format!("{key} on the primary"),
        );
        let mut later = on_replica.clone();
        if !flavor.has_cached_micros() && later[3] > 0 {
            later[3] += 1;
        }
        let slack = slack + (later[3] - on_replica[3]);
        assert_reply(
            &on_primary,
            &later,
            &[3],
            slack,
            &format!("{key}: the replica"),
        );
    }
    for refused in [
        line("THROTTLE.TAKE debt 3 0.01"),
        line("THROTTLE.TAKE debt 3 0.01 TOKENS 0"),
        line("THROTTLE.PAUSE debt 3 0.01 1000"),
        line("THROTTLE.GIVE debt 3 0.01 1 1"),
        line("THROTTLE.MTAKE 1 debt 3 0.01 0"),
    ] {
        let error = send(&mut rcon, &refused).expect_err("a write on a read-only replica");
        assert!(
            error.starts_with("READONLY "),
            "{}: {error}",
            throttle_e2e::shown(&refused)
        );
    }
    assert_eq!(digest(&mut rcon), digest(&mut con));
}

/// EVAL_RO and FCALL_RO (a function registered `no-writes`) run THROTTLE.PEEK, answering what
/// PEEK does, and refuse THROTTLE.TAKE as a write.
fn in_eval_ro_and_a_no_writes_function(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    set_up(&mut con);
    let library = "#!lua name=throttle_peek_test\n\
        redis.register_function{function_name='tpeek', callback=function(keys, args) \
            return redis.call('THROTTLE.PEEK', keys[1], args[1], args[2]) end, \
            flags={'no-writes'}}\n\
        redis.register_function{function_name='ttake', callback=function(keys, args) \
            return redis.call('THROTTLE.TAKE', keys[1], args[1], args[2]) end, \
            flags={'no-writes'}}";
    let name: String = query(&mut con, redis::cmd("FUNCTION").arg("LOAD").arg(library));
    assert_eq!(name, "throttle_peek_test");
    let script =
        |command: &str| format!("return redis.call('{command}', KEYS[1], ARGV[1], ARGV[2])");
    let with = |name: &str, first: &str, key: &str| {
        let mut c = redis::cmd(name);
        c.arg(first).arg(1).arg(key).arg(10).arg("0.01");
        c
    };
    for key in ["partial", "missing"] {
        let (replies, slack) = exec(
            &mut con,
            flavor,
            &[
                line(&format!("THROTTLE.PEEK {key} {SLOW}")),
                with("EVAL_RO", &script("THROTTLE.PEEK"), key),
                with("FCALL_RO", "tpeek", key),
                with("FCALL", "tpeek", key),
            ],
        );
        let direct = ints(&replies[0]);
        for (i, how) in [(1, "EVAL_RO"), (2, "FCALL_RO"), (3, "FCALL")] {
            assert_reply(
                &ints(&replies[i]),
                &direct,
                &[3],
                slack,
                &format!("{how} {key}"),
            );
        }
    }
    let kept = digest(&mut con);
    for refused in [
        with("EVAL_RO", &script("THROTTLE.TAKE"), "partial"),
        with("FCALL_RO", "ttake", "partial"),
        with("FCALL", "ttake", "partial"),
    ] {
        let error = send(&mut con, &refused).expect_err("a write from a read-only script");
        assert!(
            error.starts_with("ERR Write commands are not allowed from read-only scripts"),
            "{}: {error}",
            throttle_e2e::shown(&refused)
        );
    }
    assert_eq!(digest(&mut con), kept, "a refused script wrote");
}

/// `CLIENT PAUSE 1500 WRITE`: PEEK answers at once, while a THROTTLE.TAKE sent from another
/// connection at the same time gets its reply only once the pause is over (no sooner than
/// 1500 ms after the pause was sent). Every wait is bounded: connections time out after a few
/// seconds, and the thread is joined.
fn during_client_pause_write(flavor: Flavor) {
    const PAUSE_MS: u64 = 1500;
    let server = Server::start(flavor);
    let mut con = server.conn();
    set_up(&mut con);
    let mut taker = server.conn();
    let mut peeker = server.conn();

    let paused_at = Instant::now();
    let _: () = query(
        &mut con,
        redis::cmd("CLIENT").arg("PAUSE").arg(PAUSE_MS).arg("WRITE"),
    );
    let blocked = std::thread::spawn(move || {
        let reply = take_any(&mut taker, "partial", SLOW);
        (reply, Instant::now())
    });
    // The taker has had time to send its call (it is then held by the pause).
    std::thread::sleep(Duration::from_millis(100));
    let asked = Instant::now();
    let reply = peek(&mut peeker, "partial", SLOW);
    let answered = Instant::now();
    assert_eq!(
        reply[..3],
        [1, 6, 0],
        "PEEK during CLIENT PAUSE WRITE: {reply:?}"
    );
    let pause_left = Duration::from_millis(PAUSE_MS).saturating_sub(paused_at.elapsed());
    assert!(
        answered.duration_since(paused_at) < Duration::from_millis(PAUSE_MS),
        "PEEK answered {:?} after CLIENT PAUSE {PAUSE_MS} WRITE: held by the pause",
        answered.duration_since(paused_at)
    );
    assert!(
        !blocked.is_finished() || pause_left.is_zero(),
        "THROTTLE.TAKE answered during CLIENT PAUSE WRITE"
    );

    let (took, took_at) = blocked.join().expect("the taker thread");
    assert_eq!(took[..2], [1, 5], "the take once the pause ended: {took:?}");
    let held = took_at.duration_since(paused_at);
    // The server's pause ends PAUSE_MS after it began (in whole ms: up to 1 ms sooner), and
    // it began after the client sent it.
    assert!(
        held >= Duration::from_millis(PAUSE_MS - 1),
        "THROTTLE.TAKE answered {held:?} after CLIENT PAUSE {PAUSE_MS} WRITE"
    );
    println!(
        "{flavor}: PEEK answered in {:?} during the pause; TAKE answered {held:?} after it began",
        answered.duration_since(asked)
    );
}

/// Over maxmemory with noeviction: THROTTLE.TAKE (TOKENS 0 too) is refused with OOM, PEEK
/// answers the bucket as it stands; nothing changes; with the limit lifted, takes work again.
fn under_oom(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let set_up_at = Instant::now();
    set_up(&mut con);
    let kept = digest(&mut con);
    let config = |con: &mut Connection, key: &str, value: &str| {
        let _: () = query(con, redis::cmd("CONFIG").arg("SET").arg(key).arg(value));
    };
    config(&mut con, "maxmemory-policy", "noeviction");
    config(&mut con, "maxmemory", "1");
    for refused in [
        line(&format!("THROTTLE.TAKE partial {SLOW}")),
        line(&format!("THROTTLE.TAKE partial {SLOW} TOKENS 0")),
        line(&format!("THROTTLE.TAKE missing {SLOW}")),
        line(&format!("THROTTLE.PAUSE partial {SLOW} 1000")),
        line("THROTTLE.MTAKE 1 partial 10 0.01 1"),
    ] {
        let error = send(&mut con, &refused).expect_err("a write under OOM");
        assert!(
            error.starts_with("OOM command not allowed when used memory > 'maxmemory'"),
            "{}: {error}",
            throttle_e2e::shown(&refused)
        );
    }
    let start = Instant::now();
    let reply = peek(&mut con, "partial", SLOW);
    let slack = slack_ms(set_up_at);
    assert_reply(&reply, &[1, 6, 0, 400_000], &[3], slack, "PEEK under OOM");
    assert_eq!(peek(&mut con, "debt", "3 0.01")[..3], [1, 0, 0]);
    assert_eq!(peek(&mut con, "missing", SLOW), [1, 10, 0, 0]);
    let again = peek(&mut con, "partial", SLOW);
    assert_reply(
        &again,
        &reply,
        &[3],
        slack_ms(start),
        "PEEK under OOM, again",
    );
    assert_eq!(digest(&mut con), kept, "something changed under OOM");
    config(&mut con, "maxmemory", "0");
    assert_eq!(
        take_any(&mut con, "partial", SLOW)[..2],
        [1, 5],
        "after OOM"
    );
}

/// Every malformed THROTTLE.PEEK gets its exact error, and nothing changes.
fn bad_input_battery(flavor: Flavor) {
    let server = Server::start(flavor);
    let arity = errors::arity("throttle.peek");
    let mut calls: Vec<BadCall> = vec![
        bad(&[], &*arity),
        bad(&[b"k"], &*arity),
        bad(&[b"k", b"8"], &*arity),
        bad(&[b"k", b"8", b"9", b"TOKENS", b"0"], &*arity),
        bad(&[b"k", b"8", b"9", b"1"], &*arity),
        bad(&[b"k", b"8", b"9", b"MAXWAIT"], &*arity),
        // The arguments are checked before the key is read.
        bad(&[b"t:list", b"8", b"0"], errors::RATE),
    ];
    calls.extend(bad_quotas(&[]));
    calls.extend(bad_keys(&[b"8", b"9"]));
    let checked = check_battery(&server, "THROTTLE.PEEK", &calls);
    let mut con = server.conn();
    assert_eq!(
        peek(&mut con, b"\xff\x00bin".as_slice(), "8 9"),
        [1, 8, 0, 0]
    );
    println!("{flavor}: {checked} malformed THROTTLE.PEEK calls checked");
}
