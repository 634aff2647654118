//! Shared by the end-to-end tests: the `per_server!` macro, small helpers around
//! THROTTLE.TAKE, and the checks that more than one test binary runs (the unix-socket test
//! runs the others' bodies again over a socket).
//!
//! Time: the module reads the server's clock, which moves between calls. Exact values are
//! asserted where the arithmetic makes them independent of the clock (large capacities, slow
//! rates, a MULTI that freezes the cached clock); elsewhere a value is compared with bounds
//! taken from the server's own `TIME` or from how long the client saw the call take, so a
//! tolerance can only make a check stricter than the contract, never looser.

// Every test binary uses a different part of this module.
#![allow(dead_code)]

use std::time::{Duration, Instant};

pub use redis::{Connection, Value};
#[allow(unused_imports)]
pub use throttle_testkit::{command_stat, info_field, Flavor, Server};

/// One `#[test]` per server for each case function `fn case(flavor: Flavor)`, in modules
/// named after the server, so a failure reads `redis_7_0::case`.
#[allow(unused_macros)]
macro_rules! per_server {
    ($($case:ident),* $(,)?) => {
        $crate::common::on_servers!(
            [redis_7_0 Redis70, redis_8_2 Redis82, valkey_8_1 Valkey81, valkey_9_1 Valkey91]
            $($case),*
        );
    };
}
#[allow(unused_imports)]
pub(crate) use per_server;

/// `per_server!` on a chosen list of servers: `on_servers!([module Flavor, ...] case, ...)`.
#[allow(unused_macros)]
macro_rules! on_servers {
    ([] $($case:ident),*) => {};
    ([$module:ident $flavor:ident $(, $rest:ident $rest_flavor:ident)*] $($case:ident),*) => {
        mod $module {
            $( #[test] fn $case() { super::$case(::throttle_testkit::Flavor::$flavor) } )*
        }
        $crate::common::on_servers!([$($rest $rest_flavor),*] $($case),*);
    };
}
#[allow(unused_imports)]
pub(crate) use on_servers;

/// `[granted, remaining, wait_ms, reset_ms]`.
pub type Reply = [i64; 4];

pub const NS_PER_MS: i64 = 1_000_000;

/// `THROTTLE.TAKE key <args>`, the arguments given as one whitespace-separated string.
pub fn take_cmd(key: impl redis::ToRedisArgs, args: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("THROTTLE.TAKE");
    cmd.arg(key);
    for word in args.split_whitespace() {
        cmd.arg(word);
    }
    cmd
}

/// `THROTTLE.TAKE` with raw byte arguments (the key first).
pub fn raw_cmd(args: &[&[u8]]) -> redis::Cmd {
    let mut cmd = redis::cmd("THROTTLE.TAKE");
    for arg in args {
        cmd.arg(*arg);
    }
    cmd
}

/// Runs `THROTTLE.TAKE key <args>` and checks the reply is four integers.
#[track_caller]
pub fn take(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> Reply {
    let cmd = take_cmd(key, args);
    match send(con, &cmd) {
        Ok(value) => as_reply(&value),
        Err(e) => panic!("THROTTLE.TAKE {args}: {e}"),
    }
}

/// Sends a command: its reply, or the server's error as the text it sent (`ERR ...`).
pub fn send(con: &mut Connection, cmd: &redis::Cmd) -> Result<Value, String> {
    cmd.query::<Value>(con).map_err(|e| error_text(&e))
}

/// The error line as the server sent it: `CODE detail`.
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        _ => format!("(not a server error) {e}"),
    }
}

/// A THROTTLE.TAKE reply: exactly an array of four integers, in RESP2 and RESP3 alike.
#[track_caller]
pub fn as_reply(value: &Value) -> Reply {
    let Value::Array(items) = value else {
        panic!("expected an array of 4 integers, got {value:?}");
    };
    let ints: Vec<i64> = items
        .iter()
        .map(|item| match item {
            Value::Int(n) => *n,
            other => panic!("expected an integer in the reply, got {other:?} in {value:?}"),
        })
        .collect();
    ints.try_into()
        .unwrap_or_else(|_| panic!("expected 4 integers, got {value:?}"))
}

/// Runs a command that must succeed.
#[track_caller]
pub fn query<T: redis::FromRedisValue>(con: &mut Connection, cmd: &redis::Cmd) -> T {
    cmd.query(con)
        .unwrap_or_else(|e| panic!("{:?}: {}", cmd_name(cmd), error_text(&e)))
}

fn cmd_name(cmd: &redis::Cmd) -> String {
    cmd.args_iter()
        .take(2)
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => "?".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The stored state of a bucket: GET parsed as an integer (ns since the epoch).
#[track_caller]
pub fn state(con: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    let raw: Vec<u8> = query(con, redis::cmd("GET").arg(key));
    let text = String::from_utf8(raw).expect("the state is ASCII");
    text.parse()
        .unwrap_or_else(|_| panic!("the state {text:?} is not an integer"))
}

#[track_caller]
pub fn pexpiretime(con: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    query(con, redis::cmd("PEXPIRETIME").arg(key))
}

#[track_caller]
pub fn pttl(con: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    query(con, redis::cmd("PTTL").arg(key))
}

#[track_caller]
pub fn exists(con: &mut Connection, key: impl redis::ToRedisArgs) -> bool {
    query::<i64>(con, redis::cmd("EXISTS").arg(key)) == 1
}

#[track_caller]
pub fn digest(con: &mut Connection) -> String {
    query(con, redis::cmd("DEBUG").arg("DIGEST"))
}

#[track_caller]
pub fn info(con: &mut Connection, section: &str) -> String {
    query(con, redis::cmd("INFO").arg(section))
}

/// The server's clock (`TIME`), in ns.
#[track_caller]
pub fn server_time_ns(con: &mut Connection) -> i64 {
    let (secs, micros): (i64, i64) = query(con, &redis::cmd("TIME"));
    secs * 1_000_000_000 + micros * 1000
}

/// Whole ms, rounded up.
pub fn ceil_ms(ns: i64) -> i64 {
    ns.div_euclid(NS_PER_MS) + i64::from(ns.rem_euclid(NS_PER_MS) > 0)
}

/// How long the client has seen pass since `start`, in ms, rounded up plus one: an upper
/// bound on how far a server clock read during that span can have moved.
pub fn slack_ms(start: Instant) -> i64 {
    i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX / 2) + 1
}

/// Polls `check` (2 ms, backing off to 50 ms) until it is true; panics after `timeout`.
#[track_caller]
pub fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(2);
    loop {
        if check() {
            return;
        }
        let now = Instant::now();
        assert!(
            now < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Checks the server is alive and well: the same process as at `pid`, and its log holds no
/// panic, internal error or crash report.
#[track_caller]
pub fn assert_no_crash(server: &Server, pid: &str) {
    let mut con = server.conn();
    let pong: String = query(&mut con, &redis::cmd("PING"));
    assert_eq!(pong, "PONG");
    let now = info(&mut con, "server");
    assert_eq!(
        info_field(&now, "process_id"),
        Some(pid),
        "the server restarted"
    );
    let log = server.log();
    for bad in [
        "panicked",
        "internal error",
        "crashed by signal",
        "BUG REPORT",
        "ASSERTION FAILED",
    ] {
        assert!(
            !log.contains(bad),
            "the server log mentions {bad:?}:\n{log}"
        );
    }
}

#[track_caller]
pub fn process_id(con: &mut Connection) -> String {
    info_field(&info(con, "server"), "process_id")
        .expect("INFO server has process_id")
        .to_owned()
}

// ---------------------------------------------------------------------------------------
// The seed scenario: capacity 8, 9 tokens/s, 40 reservations at one instant.

/// The refill time of one token at 9/s, rounded up: 111 111 112 ns.
pub const SEED_INTERVAL_NS: i64 = 111_111_112;

/// The k-th (1-based) reply of the seed scenario when all 40 calls see the same instant.
pub fn seed_expected(k: i64) -> Reply {
    let remaining = (8 - k).max(0);
    let wait = ceil_ms((k - 8).max(0) * SEED_INTERVAL_NS);
    let reset = ceil_ms(k * SEED_INTERVAL_NS);
    [1, remaining, wait, reset]
}

/// Runs the seed scenario in one MULTI/EXEC on `key` and checks every reply.
///
/// Where the server has a cached clock (Redis 7.2+, Valkey) it is frozen for the whole EXEC,
/// so every value is exact. Redis 7.0's millisecond clock may tick inside the EXEC: a reply
/// seen `d` ms later has reset (and, once in debt, wait) exactly `d` ms lower, never higher,
/// with `d` never decreasing and never more than the EXEC took.
#[track_caller]
pub fn check_seed_scenario(con: &mut Connection, flavor: Flavor, key: &str) {
    // The table of module/bucket/tests/table.rs, spot-checked.
    assert_eq!(seed_expected(1), [1, 7, 0, 112]);
    assert_eq!(seed_expected(8), [1, 0, 0, 889]);
    assert_eq!(seed_expected(9), [1, 0, 112, 1001]);
    assert_eq!(seed_expected(40), [1, 0, 3556, 4445]);

    let mut pipe = redis::pipe();
    pipe.atomic();
    for _ in 0..40 {
        pipe.add_command(take_cmd(key, "8 9 MAXWAIT 60000"));
    }
    let start = Instant::now();
    let replies: Vec<Value> = pipe
        .query(con)
        .unwrap_or_else(|e| panic!("MULTI with 40 x THROTTLE.TAKE: {}", error_text(&e)));
    let slack = slack_ms(start);
    assert_eq!(replies.len(), 40, "{replies:?}");

    let mut lag = 0;
    for (k, value) in (1..).zip(&replies) {
        let got = as_reply(value);
        let want = seed_expected(k);
        if flavor.has_cached_micros() {
            assert_eq!(got, want, "call {k} of 40 inside one MULTI ({flavor})");
            continue;
        }
        assert_eq!(got[..2], want[..2], "call {k}: granted, remaining");
        let behind = want[3] - got[3];
        assert!(
            (lag..=slack).contains(&behind),
            "call {k}: reset {} vs {} exact; the clock may only have moved forward by 0..={slack} \
             ms, and no less than for the call before ({lag})",
            got[3],
            want[3]
        );
        if k > 8 {
            assert_eq!(
                want[2] - got[2],
                behind,
                "call {k}: wait {got:?} vs {want:?}"
            );
        } else {
            assert_eq!(got[2], 0, "call {k}: {got:?}");
        }
        lag = behind;
    }
}

// ---------------------------------------------------------------------------------------
// Replies, shared by the reply test and the unix-socket test.

/// Reply shape and values on one connection, using keys under `prefix`. With `resp3`, the
/// connection first switches to RESP3 with `HELLO 3`.
pub fn check_replies(server: &Server, prefix: &str, resp3: bool) {
    let flavor = server.flavor();
    let mut con = server.conn();
    if resp3 {
        let hello: Value = query(&mut con, redis::cmd("HELLO").arg(3));
        let Value::Map(fields) = &hello else {
            panic!("HELLO 3 did not answer with a RESP3 map: {hello:?}");
        };
        let proto = fields
            .iter()
            .find(|(k, _)| *k == Value::BulkString(b"proto".to_vec()))
            .map(|(_, v)| v.clone());
        assert_eq!(proto, Some(Value::Int(3)), "{hello:?}");
    }
    let key = |name: &str| format!("{prefix}:{name}");

    // A missing key is a full bucket: 8 - 1 left, 111.111112 ms until full again.
    assert_eq!(take(&mut con, key("fresh"), "8 9"), [1, 7, 0, 112]);

    let before = server_time_ns(&mut con);
    check_seed_scenario(&mut con, flavor, &key("seed"));
    let after = server_time_ns(&mut con);
    // After 40 reservations the state is 40 intervals after the instant of the first.
    let seeded = state(&mut con, key("seed"));
    let first = seeded - 40 * SEED_INTERVAL_NS;
    assert!(
        before / NS_PER_MS <= first / NS_PER_MS && first <= after,
        "the state {seeded} is not 40 intervals after the server's TIME ({before}..={after})"
    );
    assert_eq!(
        pexpiretime(&mut con, key("seed")),
        ceil_ms(seeded),
        "the key expires when the bucket is full"
    );

    check_denials_write_nothing(server, &mut con, &key("deny"));

    // TOKENS 0 on a missing key: a full bucket, and still no key.
    assert_eq!(take(&mut con, key("none"), "5 1 TOKENS 0"), [1, 5, 0, 0]);
    assert!(!exists(&mut con, key("none")), "TOKENS 0 created the key");

    // Option names are case-insensitive, in any order.
    let start = Instant::now();
    assert_eq!(
        take(&mut con, key("opts"), "10 0.001 maxwait 0 Tokens 3"),
        [1, 7, 0, 3_000_000]
    );
    let reply = take(&mut con, key("opts"), "10 0.001 TOKENS 7 MAXWAIT 5");
    let slack = slack_ms(start);
    assert_eq!(reply[..3], [1, 0, 0], "the rest of the bucket: {reply:?}");
    assert!(
        (10_000_000 - slack..=10_000_000).contains(&reply[3]),
        "{reply:?}"
    );

    // Limits, accepted at their edges (exact: one call on a fresh key sees no clock move).
    let max_cap = throttle_bucket::MAX_CAPACITY;
    assert_eq!(
        take(&mut con, key("edge1"), &format!("{max_cap} 1000000000")),
        [1, max_cap as i64 - 1, 0, 1],
        "largest capacity at the largest rate"
    );
    assert_eq!(
        take(&mut con, key("edge2"), "315360000 1"),
        [1, 315_359_999, 0, 1000],
        "a bucket that takes exactly 10 years to fill"
    );
    assert_eq!(
        take(&mut con, key("edge3"), "1 0.000001"),
        [1, 0, 0, 1_000_000_000],
        "the smallest rate: one token every 10^6 s"
    );
    assert_eq!(
        take(&mut con, key("edge4"), "1 35791394.1"),
        [1, 0, 0, 1],
        "a fractional rate (2 GiB per minute in bytes)"
    );
    let max_wait = throttle_bucket::MAX_WAIT_MS;
    let reply = take(
        &mut con,
        key("edge3"),
        &format!("1 0.000001 MAXWAIT {max_wait}"),
    );
    assert_eq!(
        reply[..2],
        [1, 0],
        "the longest MAXWAIT reserves: {reply:?}"
    );
    assert!(
        reply[2] <= 1_000_000_000 && reply[3] <= 2_000_000_000,
        "{reply:?}"
    );
}

/// A denial, `TOKENS 0` and a MAXWAIT that is too short write nothing: the same value, the
/// same expiry, and a WATCH on the key is not touched. A reservation that fits writes.
fn check_denials_write_nothing(server: &Server, con: &mut Connection, key: &str) {
    // Capacity 2, one token per 1000 s: nothing refills while the test runs.
    let start = Instant::now();
    assert_eq!(take(con, key, "2 0.001 TOKENS 2"), [1, 0, 0, 2_000_000]);
    let value = state(con, key);
    let expiry = pexpiretime(con, key);
    assert_eq!(expiry, ceil_ms(value));

    let mut watcher = server.conn();
    let _: () = query(&mut watcher, redis::cmd("WATCH").arg(key));

    let denied = take(con, key, "2 0.001");
    let maxwait_short = take(con, key, "2 0.001 MAXWAIT 500000");
    let inspect = take(con, key, "2 0.001 TOKENS 0");
    let slack = slack_ms(start);
    for (what, reply, granted) in [
        ("a denial", denied, 0),
        ("MAXWAIT too short", maxwait_short, 0),
        ("TOKENS 0", inspect, 1),
    ] {
        assert_eq!(reply[..2], [granted, 0], "{what}: {reply:?}");
        // One token is 10^6 ms away, full in 2 * 10^6 ms, less what has passed since.
        let wait = if granted == 1 { 0 } else { 1_000_000 };
        assert!(
            (wait - slack..=wait).contains(&reply[2]),
            "{what}: wait {reply:?}"
        );
        assert!(
            (2_000_000 - slack..=2_000_000).contains(&reply[3]),
            "{what}: reset {reply:?}"
        );
        assert_eq!(state(con, key), value, "{what} changed the stored state");
        assert_eq!(pexpiretime(con, key), expiry, "{what} changed the expiry");
    }
    // The watcher's transaction still runs: nothing touched the key.
    let _: () = query(&mut watcher, &redis::cmd("MULTI"));
    let _: () = query(&mut watcher, &redis::cmd("PING"));
    let exec: Value = query(&mut watcher, &redis::cmd("EXEC"));
    assert!(
        matches!(&exec, Value::Array(items) if items.len() == 1),
        "a denial or TOKENS 0 touched a WATCHed key: EXEC gave {exec:?}"
    );

    // A reservation that fits is written, 10^6 ms of debt later, and does touch a WATCH.
    let _: () = query(&mut watcher, redis::cmd("WATCH").arg(key));
    let reserved = take(con, key, "2 0.001 MAXWAIT 1000000");
    assert_eq!(reserved[..2], [1, 0], "{reserved:?}");
    assert!(
        reserved[2] <= 1_000_000 && reserved[3] <= 3_000_000,
        "{reserved:?}"
    );
    assert_eq!(state(con, key), value + 1_000 * 1_000_000_000);
    assert_eq!(
        pexpiretime(con, key),
        ceil_ms(value + 1_000 * 1_000_000_000)
    );
    let _: () = query(&mut watcher, &redis::cmd("MULTI"));
    let _: () = query(&mut watcher, &redis::cmd("PING"));
    let exec: Value = query(&mut watcher, &redis::cmd("EXEC"));
    assert_eq!(exec, Value::Nil, "a write did not touch the WATCHed key");
}

// ---------------------------------------------------------------------------------------
// TTL, shared by the TTL test and the unix-socket test.

pub fn check_ttl(server: &Server) {
    let mut con = server.conn();

    // The state is the instant the bucket is full again, in ns since the epoch, stored as an
    // integer; the key expires at that instant (rounded up to ms).
    let before = server_time_ns(&mut con);
    let start = Instant::now();
    assert_eq!(take(&mut con, "ttl:a", "8 9"), [1, 7, 0, 112]);
    let ttl = pttl(&mut con, "ttl:a");
    let slack = slack_ms(start);
    let after = server_time_ns(&mut con);
    let value = state(&mut con, "ttl:a");
    let taken_at = value - SEED_INTERVAL_NS;
    assert!(
        before / NS_PER_MS <= taken_at / NS_PER_MS && taken_at <= after,
        "the state {value} is not the server's TIME ({before}..={after}) plus one interval"
    );
    assert_eq!(pexpiretime(&mut con, "ttl:a"), ceil_ms(value));
    assert!(
        (112 - slack..=113).contains(&ttl),
        "PTTL {ttl} after a take that said reset 112 ms"
    );
    let encoding: String = query(&mut con, redis::cmd("OBJECT").arg("ENCODING").arg("ttl:a"));
    assert_eq!(encoding, "int", "the state is stored as an integer");

    // A reservation puts the bucket into debt: the TTL covers the debt too.
    let start = Instant::now();
    assert_eq!(take(&mut con, "ttl:b", "2 1 TOKENS 2"), [1, 0, 0, 2000]);
    let reply = take(&mut con, "ttl:b", "2 1 MAXWAIT 5000");
    let ttl = pttl(&mut con, "ttl:b");
    let slack = slack_ms(start);
    assert_eq!(reply[..2], [1, 0], "{reply:?}");
    assert!((1000 - slack..=1000).contains(&reply[2]), "{reply:?}");
    assert!((3000 - slack..=3000).contains(&reply[3]), "{reply:?}");
    assert!(
        (reply[3] - slack..=reply[3] + 1).contains(&ttl),
        "PTTL {ttl} after reset {}",
        reply[3]
    );
    let value = state(&mut con, "ttl:b");
    assert_eq!(pexpiretime(&mut con, "ttl:b"), ceil_ms(value));

    // A bucket that is full again is a missing key: 5 tokens at 1000/s refill in 5 ms.
    let sent = Instant::now();
    assert_eq!(take(&mut con, "ttl:c", "5 1000 TOKENS 5"), [1, 0, 0, 5]);
    wait_until(
        "the full bucket's key to expire",
        Duration::from_secs(2),
        || !exists(&mut con, "ttl:c"),
    );
    assert!(
        sent.elapsed() >= Duration::from_millis(5),
        "the key expired before the bucket was full"
    );
    assert_eq!(take(&mut con, "ttl:c", "5 1000 TOKENS 0"), [1, 5, 0, 0]);
    assert!(!exists(&mut con, "ttl:c"));
}

// ---------------------------------------------------------------------------------------
// Buckets that persistence must carry over unchanged.

/// A bucket set up in a known state, and what it must still be after a round trip.
#[derive(Clone, Debug)]
pub struct Bucket {
    pub key: Vec<u8>,
    /// `capacity rate`.
    pub quota: &'static str,
    pub interval_ns: i64,
    pub remaining: i64,
    /// The stored state (GET) and its expiry (PEXPIRETIME) right after setting up.
    pub state: i64,
    pub expiry: i64,
}

/// Sets up three buckets under `prefix` that nothing refills while a test runs (one token
/// every 100 s or more): partly used, in debt after a reservation, and one with a binary key.
pub fn make_buckets(con: &mut Connection, prefix: &str) -> Vec<Bucket> {
    let mut buckets = Vec::new();
    let mut make = |name: &[u8], quota: &'static str, interval_ns: i64, calls: &[&str]| {
        let key = [prefix.as_bytes(), b":", name].concat();
        let mut reply = [0; 4];
        for call in calls {
            reply = take(con, key.as_slice(), &format!("{quota} {call}"));
            assert_eq!(reply[0], 1, "{call}: {reply:?}");
        }
        let state = state(con, key.as_slice());
        let expiry = pexpiretime(con, key.as_slice());
        assert_eq!(expiry, ceil_ms(state));
        buckets.push(Bucket {
            key,
            quota,
            interval_ns,
            remaining: reply[1],
            state,
            expiry,
        });
    };
    make(b"partial", "100 0.01", 100_000_000_000, &["TOKENS 30"]);
    make(
        b"debt",
        "5 0.01",
        100_000_000_000,
        &["TOKENS 5", "TOKENS 2 MAXWAIT 1000000"],
    );
    make(
        b"\xff\x00bin\xfe",
        "10 0.001",
        1_000_000_000_000,
        &["TOKENS 1"],
    );
    assert_eq!(
        buckets.iter().map(|b| b.remaining).collect::<Vec<_>>(),
        [70, 0, 9]
    );
    buckets
}

/// Checks that `key` holds exactly the bucket `bucket` was set up as: the same state, the
/// same expiry, PTTL consistent with it, and `TOKENS 0` reports the same tokens.
#[track_caller]
pub fn assert_same_bucket(con: &mut Connection, key: &[u8], bucket: &Bucket, when: &str) {
    assert_eq!(
        state(con, key),
        bucket.state,
        "{when}: the state of {:?}",
        String::from_utf8_lossy(key)
    );
    assert_eq!(pexpiretime(con, key), bucket.expiry, "{when}: the expiry");
    let before = server_time_ns(con) / NS_PER_MS;
    let ttl = pttl(con, key);
    let reply = take(con, key, &format!("{} TOKENS 0", bucket.quota));
    let after = ceil_ms(server_time_ns(con));
    assert!(
        (bucket.expiry - after - 1..=bucket.expiry - before + 1).contains(&ttl),
        "{when}: PTTL {ttl}, expiry at {} ms, server time {before}..{after} ms",
        bucket.expiry
    );
    assert_eq!(
        reply[..3],
        [1, bucket.remaining, 0],
        "{when}: TOKENS 0 gave {reply:?}"
    );
    assert!(
        (bucket.expiry - after - 1..=bucket.expiry - before + 1).contains(&reply[3]),
        "{when}: reset {} but expiry at {} ms, server time {before}..{after} ms",
        reply[3],
        bucket.expiry
    );
}

/// A take from `key` continues from the stored state: one more interval of debt.
#[track_caller]
pub fn assert_take_continues(con: &mut Connection, key: &[u8], bucket: &Bucket, when: &str) {
    let reply = take(con, key, &format!("{} MAXWAIT 100000000", bucket.quota));
    assert_eq!(
        reply[..2],
        [1, (bucket.remaining - 1).max(0)],
        "{when}: {reply:?}"
    );
    assert_eq!(
        state(con, key),
        bucket.state + bucket.interval_ns,
        "{when}: the take did not continue from the stored state"
    );
}

/// DEBUG RELOAD, DUMP/RESTORE (ABSTTL and relative) and COPY keep a bucket's state.
pub fn check_in_memory_round_trips(server: &Server) {
    let mut con = server.conn();
    let buckets = make_buckets(&mut con, "mem");
    let _: () = query(&mut con, redis::cmd("SET").arg("mem:plain").arg("x"));

    let before = digest(&mut con);
    let _: () = query(&mut con, redis::cmd("DEBUG").arg("RELOAD"));
    assert_eq!(digest(&mut con), before, "DEBUG RELOAD changed the dataset");
    for bucket in &buckets {
        assert_same_bucket(&mut con, &bucket.key, bucket, "after DEBUG RELOAD");
    }

    for (i, bucket) in buckets.iter().enumerate() {
        let payload: Vec<u8> = query(&mut con, redis::cmd("DUMP").arg(&bucket.key));

        // ABSTTL: the same absolute expiry.
        let abs = format!("mem:restored-abs:{i}");
        let _: () = query(
            &mut con,
            redis::cmd("RESTORE")
                .arg(&abs)
                .arg(bucket.expiry)
                .arg(&payload)
                .arg("ABSTTL"),
        );
        assert_same_bucket(&mut con, abs.as_bytes(), bucket, "after RESTORE ... ABSTTL");

        // A relative TTL read with PTTL: the expiry can only come out later, by the time
        // between the two calls.
        let rel = format!("mem:restored-rel:{i}");
        let start = Instant::now();
        let ttl = pttl(&mut con, &bucket.key);
        let _: () = query(
            &mut con,
            redis::cmd("RESTORE").arg(&rel).arg(ttl).arg(&payload),
        );
        let slack = slack_ms(start);
        assert_eq!(state(&mut con, &rel), bucket.state, "RESTORE with PTTL");
        let expiry = pexpiretime(&mut con, &rel);
        assert!(
            (bucket.expiry..=bucket.expiry + slack).contains(&expiry),
            "RESTORE with PTTL {ttl}: expiry {expiry}, source {}",
            bucket.expiry
        );

        // COPY keeps value and expiry.
        let copy = format!("mem:copy:{i}");
        let copied: i64 = query(&mut con, redis::cmd("COPY").arg(&bucket.key).arg(&copy));
        assert_eq!(copied, 1);
        assert_same_bucket(&mut con, copy.as_bytes(), bucket, "after COPY");

        // Each copy is a bucket of its own that carries on from the same state; the source
        // is untouched.
        assert_take_continues(&mut con, abs.as_bytes(), bucket, "the RESTOREd key");
        assert_take_continues(&mut con, copy.as_bytes(), bucket, "the COPY");
        assert_same_bucket(
            &mut con,
            &bucket.key,
            bucket,
            "the source after its copies moved",
        );
    }
}

// ---------------------------------------------------------------------------------------
// The bad-input battery, shared by the bad-input test and the unix-socket test.

/// One malformed call: the arguments after THROTTLE.TAKE, the reply's prefix, and words the
/// error must contain (case-insensitive).
pub struct BadCall {
    pub args: Vec<Vec<u8>>,
    pub prefix: &'static str,
    pub words: &'static [&'static str],
}

fn bad(args: &[&[u8]], prefix: &'static str, words: &'static [&'static str]) -> BadCall {
    BadCall {
        args: args.iter().map(|a| a.to_vec()).collect(),
        prefix,
        words,
    }
}

/// Keys of another type, and strings that are not a bucket state, that the battery needs.
pub fn set_up_bad_keys(con: &mut Connection) {
    let mut pipe = redis::pipe();
    pipe.cmd("RPUSH").arg("t:list").arg("a").arg("b").ignore();
    pipe.cmd("HSET").arg("t:hash").arg("f").arg("v").ignore();
    pipe.cmd("SADD").arg("t:set").arg("a").ignore();
    pipe.cmd("ZADD").arg("t:zset").arg(1).arg("a").ignore();
    pipe.cmd("XADD")
        .arg("t:stream")
        .arg("*")
        .arg("f")
        .arg("v")
        .ignore();
    for (key, value) in [
        ("s:hello", "hello"),
        ("s:negative", "-5"),
        ("s:float", "1.5"),
        ("s:huge", "99999999999999999999"),
        ("s:empty", ""),
        ("s:spaces", " 12"),
        ("s:plus", "+12"),
    ] {
        pipe.cmd("SET").arg(key).arg(value).ignore();
    }
    let _: () = pipe
        .query(con)
        .unwrap_or_else(|e| panic!("set up keys: {}", error_text(&e)));
}

/// Every malformed call the battery sends.
pub fn bad_calls() -> Vec<BadCall> {
    const ARITY: &[&str] = &["wrong number of arguments"];
    const CAPACITY: &[&str] = &["capacity"];
    const RATE: &[&str] = &["rate"];
    const TOKENS: &[&str] = &["TOKENS"];
    const MAXWAIT: &[&str] = &["MAXWAIT"];
    const UNKNOWN: &[&str] = &["unknown option"];
    const TEN_YEARS: &[&str] = &["capacity", "rate", "10 years"];
    const NOT_BUCKET: &[&str] = &["not a THROTTLE bucket"];
    let max_capacity_plus_one = (throttle_bucket::MAX_CAPACITY + 1).to_string();
    let max_wait_plus_one = (throttle_bucket::MAX_WAIT_MS + 1).to_string();
    let megabyte_digits = vec![b'9'; 1 << 20];
    let megabyte_fraction = [b"0.".as_slice(), &vec![b'0'; 1 << 20], b"1"].concat();
    let megabyte_option = vec![b'X'; 1 << 20];

    let mut calls = vec![
        // Arity: 0, 1 and 2 arguments after the command.
        bad(&[], "ERR", ARITY),
        bad(&[b"k"], "ERR", ARITY),
        bad(&[b"k", b"8"], "ERR", ARITY),
        // Capacity: not a whole number from 1 to MAX_CAPACITY.
        bad(&[b"k", b"abc", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"0", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"-1", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"-0", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"+8", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b" 8", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"8 ", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"nan", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"inf", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"1.5", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"8.0", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"1e3", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"0x10", b"9"], "ERR", CAPACITY),
        bad(
            &[b"k", max_capacity_plus_one.as_bytes(), b"1000000000"],
            "ERR",
            CAPACITY,
        ),
        bad(&[b"k", b"18446744073709551616", b"9"], "ERR", CAPACITY),
        bad(
            &[b"k", b"99999999999999999999999999999999", b"9"],
            "ERR",
            CAPACITY,
        ),
        bad(&[b"k", &megabyte_digits, b"9"], "ERR", CAPACITY),
        // Rate: not a plain decimal from 0.000001 to 1000000000.
        bad(&[b"k", b"8", b"abc"], "ERR", RATE),
        bad(&[b"k", b"8", b"0"], "ERR", RATE),
        bad(&[b"k", b"8", b"0.0"], "ERR", RATE),
        bad(&[b"k", b"8", b"-9"], "ERR", RATE),
        bad(&[b"k", b"8", b"+9"], "ERR", RATE),
        bad(&[b"k", b"8", b"nan"], "ERR", RATE),
        bad(&[b"k", b"8", b"NaN"], "ERR", RATE),
        bad(&[b"k", b"8", b"inf"], "ERR", RATE),
        bad(&[b"k", b"8", b"-inf"], "ERR", RATE),
        bad(&[b"k", b"8", b"1e3"], "ERR", RATE),
        bad(&[b"k", b"8", b"1e400"], "ERR", RATE),
        bad(&[b"k", b"8", b"1000000000.1"], "ERR", RATE),
        bad(&[b"k", b"8", b"99999999999999999999"], "ERR", RATE),
        bad(&[b"k", b"8", b"0.0000009"], "ERR", RATE),
        bad(&[b"k", b"8", b"0.000000000000000000001"], "ERR", RATE),
        bad(&[b"k", b"8", b""], "ERR", RATE),
        bad(&[b"k", b"8", b"."], "ERR", RATE),
        bad(&[b"k", b"8", b"1.2.3"], "ERR", RATE),
        bad(&[b"k", b"8", b"1,5"], "ERR", RATE),
        bad(&[b"k", b"8", &megabyte_fraction], "ERR", RATE),
        // capacity / rate over 10 years.
        bad(&[b"k", b"315360001", b"1"], "ERR", TEN_YEARS),
        bad(&[b"k", b"316", b"0.000001"], "ERR", TEN_YEARS),
        bad(&[b"k", b"1000000000000000", b"0.000001"], "ERR", TEN_YEARS),
        // TOKENS: not a whole number from 0 to capacity.
        bad(&[b"k", b"8", b"9", b"TOKENS", b"9"], "ERR", TOKENS),
        bad(&[b"k", b"8", b"9", b"TOKENS", b"-1"], "ERR", TOKENS),
        bad(&[b"k", b"8", b"9", b"TOKENS", b"1.5"], "ERR", TOKENS),
        bad(&[b"k", b"8", b"9", b"TOKENS", b"abc"], "ERR", TOKENS),
        bad(&[b"k", b"8", b"9", b"TOKENS", b""], "ERR", TOKENS),
        bad(
            &[b"k", b"8", b"9", b"TOKENS", b"99999999999999999999"],
            "ERR",
            TOKENS,
        ),
        bad(&[b"k", b"8", b"9", b"TOKENS", b"nan"], "ERR", TOKENS),
        // MAXWAIT: not a whole number of ms from 0 to 10 years.
        bad(&[b"k", b"8", b"9", b"MAXWAIT", b"-5"], "ERR", MAXWAIT),
        bad(&[b"k", b"8", b"9", b"MAXWAIT", b"1.5"], "ERR", MAXWAIT),
        bad(
            &[b"k", b"8", b"9", b"MAXWAIT", max_wait_plus_one.as_bytes()],
            "ERR",
            MAXWAIT,
        ),
        bad(
            &[b"k", b"8", b"9", b"MAXWAIT", b"99999999999999999999"],
            "ERR",
            MAXWAIT,
        ),
        bad(&[b"k", b"8", b"9", b"MAXWAIT", b"inf"], "ERR", MAXWAIT),
        bad(&[b"k", b"8", b"9", b"MAXWAIT", b""], "ERR", MAXWAIT),
        // Options: unknown, without a value, repeated (in any case).
        bad(&[b"k", b"8", b"9", b"WAIT", b"1"], "ERR", UNKNOWN),
        bad(&[b"k", b"8", b"9", b"", b"1"], "ERR", UNKNOWN),
        bad(&[b"k", b"8", b"9", b"1"], "ERR", UNKNOWN),
        bad(&[b"k", b"8", b"9", &megabyte_option, b"1"], "ERR", UNKNOWN),
        bad(&[b"k", b"8", b"9", b"TOKENS"], "ERR", TOKENS),
        bad(&[b"k", b"8", b"9", b"MAXWAIT"], "ERR", MAXWAIT),
        bad(
            &[b"k", b"8", b"9", b"TOKENS", b"1", b"MAXWAIT"],
            "ERR",
            MAXWAIT,
        ),
        bad(
            &[b"k", b"8", b"9", b"TOKENS", b"1", b"tokens", b"2"],
            "ERR",
            &["TOKENS", "more than once"],
        ),
        bad(
            &[b"k", b"8", b"9", b"MaxWait", b"1", b"MAXWAIT", b"1"],
            "ERR",
            &["MAXWAIT", "more than once"],
        ),
        bad(
            &[
                b"k", b"8", b"9", b"TOKENS", b"1", b"TOKENS", b"1", b"TOKENS", b"1",
            ],
            "ERR",
            &["TOKENS", "more than once"],
        ),
        // Non-UTF-8 bytes in every numeric and option argument.
        bad(&[b"k", b"\xff", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"8\xc3", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"8\x009", b"9"], "ERR", CAPACITY),
        bad(&[b"k", b"8", b"\xfe\xff"], "ERR", RATE),
        bad(&[b"k", b"8", b"9\x80"], "ERR", RATE),
        bad(&[b"k", b"8", b"9", b"TOKENS", b"\xff"], "ERR", TOKENS),
        bad(&[b"k", b"8", b"9", b"MAXWAIT", b"1\xff"], "ERR", MAXWAIT),
        bad(&[b"k", b"8", b"9", b"TOK\xffENS", b"1"], "ERR", UNKNOWN),
        bad(&[b"k", b"8", b"9", b"\xffMAXWAIT", b"1"], "ERR", UNKNOWN),
        bad(&[b"k", b"8", b"9", b"TOKENS\x00", b"1"], "ERR", UNKNOWN),
    ];
    // Keys of another type, whatever the arguments.
    for key in ["t:list", "t:hash", "t:set", "t:zset", "t:stream"] {
        calls.push(bad(&[key.as_bytes(), b"8", b"9"], "WRONGTYPE", NOT_BUCKET));
        calls.push(bad(
            &[key.as_bytes(), b"8", b"9", b"TOKENS", b"0"],
            "WRONGTYPE",
            NOT_BUCKET,
        ));
    }
    // Strings THROTTLE.TAKE did not write.
    for key in [
        "s:hello",
        "s:negative",
        "s:float",
        "s:huge",
        "s:empty",
        "s:spaces",
        "s:plus",
    ] {
        calls.push(bad(&[key.as_bytes(), b"8", b"9"], "ERR", NOT_BUCKET));
        calls.push(bad(
            &[key.as_bytes(), b"8", b"9", b"TOKENS", b"0"],
            "ERR",
            NOT_BUCKET,
        ));
    }
    calls
}

/// Sends every bad call; after each, the server answers PING, the canaries are unchanged and
/// the whole dataset's digest is what it was. Then the module still works and nothing crashed.
pub fn check_bad_input_battery(server: &Server) {
    let mut con = server.conn();
    let pid = process_id(&mut con);
    let _: () = query(&mut con, redis::cmd("SET").arg("canary").arg(42));
    let _: () = query(
        &mut con,
        redis::cmd("HSET")
            .arg("canary:h")
            .arg("f")
            .arg("v")
            .arg("g")
            .arg("w"),
    );
    set_up_bad_keys(&mut con);

    for call in bad_calls() {
        let shown: Vec<String> = call
            .args
            .iter()
            .map(|a| {
                let text = String::from_utf8_lossy(a);
                if text.len() > 40 {
                    format!("<{} bytes>", a.len())
                } else {
                    format!("{text:?}")
                }
            })
            .collect();
        let shown = format!("THROTTLE.TAKE {}", shown.join(" "));
        let before = digest(&mut con);
        let args: Vec<&[u8]> = call.args.iter().map(Vec::as_slice).collect();
        let reply = send(&mut con, &raw_cmd(&args));
        let error = match reply {
            Err(error) => error,
            Ok(value) => panic!("{shown}: expected an error, got {value:?}"),
        };
        assert!(
            error.starts_with(&format!("{} ", call.prefix)),
            "{shown}: expected an error starting with {}, got {error:?}",
            call.prefix
        );
        for word in call.words {
            assert!(
                error.to_lowercase().contains(&word.to_lowercase()),
                "{shown}: the error {error:?} does not mention {word:?}"
            );
        }
        let pong: String = query(&mut con, &redis::cmd("PING"));
        assert_eq!(pong, "PONG", "{shown}");
        let canary: String = query(&mut con, redis::cmd("GET").arg("canary"));
        assert_eq!(canary, "42", "{shown} changed another key");
        let hash: Vec<(String, String)> = query(&mut con, redis::cmd("HGETALL").arg("canary:h"));
        let mut hash = hash;
        hash.sort();
        assert_eq!(
            hash,
            [("f".into(), "v".into()), ("g".into(), "w".into())],
            "{shown} changed another key"
        );
        assert_eq!(digest(&mut con), before, "{shown} changed the dataset");
    }

    // Keys are binary-safe: a non-UTF-8 key, an empty key and a 1 MB key are buckets.
    let binary_key: &[u8] = b"\xff\xfe\x00\x80key\xc3";
    assert_eq!(take(&mut con, binary_key, "5 0.001"), [1, 4, 0, 1_000_000]);
    assert_eq!(take(&mut con, binary_key, "5 0.001 TOKENS 0")[..2], [1, 4]);
    assert_eq!(
        ceil_ms(state(&mut con, binary_key)),
        pexpiretime(&mut con, binary_key)
    );
    assert_eq!(take(&mut con, "", "5 0.001"), [1, 4, 0, 1_000_000]);
    assert!(exists(&mut con, ""));
    let megabyte_key = vec![b'k'; 1 << 20];
    assert_eq!(
        take(&mut con, megabyte_key.as_slice(), "5 0.001"),
        [1, 4, 0, 1_000_000]
    );
    let _: i64 = query(&mut con, redis::cmd("DEL").arg(megabyte_key.as_slice()));

    // A valid but hostile state (the largest integer a state can be) gives a denial with
    // huge waits, no crash, and is left as it was.
    let _: () = query(&mut con, redis::cmd("SET").arg("s:max").arg(i64::MAX));
    let reply = take(
        &mut con,
        "s:max",
        &format!("8 9 MAXWAIT {}", throttle_bucket::MAX_WAIT_MS),
    );
    assert_eq!(reply[..2], [0, 0], "{reply:?}");
    assert!(
        reply[2] > 100 * 365 * 24 * 3600 * 1000 && reply[3] >= reply[2],
        "{reply:?}"
    );
    assert_eq!(state(&mut con, "s:max"), i64::MAX);
    // The smallest state is an instant long past: a full bucket.
    let _: () = query(&mut con, redis::cmd("SET").arg("s:zero").arg(0));
    assert_eq!(take(&mut con, "s:zero", "8 9"), [1, 7, 0, 112]);

    // After all that the module still works, and the server never restarted or crashed.
    assert_eq!(take(&mut con, "after-battery", "8 9"), [1, 7, 0, 112]);
    let canary: String = query(&mut con, redis::cmd("GET").arg("canary"));
    assert_eq!(canary, "42");
    assert_no_crash(server, &pid);
}

// ---------------------------------------------------------------------------------------
// RDB, shared by the persistence test and the unix-socket test.

/// SAVE, stop, restart (same dir, default `dbfilename`): every bucket is as it was.
pub fn check_rdb_restart(server: &mut Server) {
    let mut con = server.conn();
    let buckets = make_buckets(&mut con, "rdb");
    let _: () = query(&mut con, redis::cmd("SET").arg("rdb:plain").arg("x"));
    let before = digest(&mut con);
    let _: () = query(&mut con, &redis::cmd("SAVE"));
    assert!(
        server.dir().join("dump.rdb").is_file(),
        "SAVE wrote no dump.rdb"
    );
    drop(con);

    let mut con = restart_keeps_buckets(server, &before, &buckets, Stop::Clean, "SAVE and restart");
    for bucket in &buckets {
        assert_take_continues(&mut con, &bucket.key, bucket, "after SAVE and restart");
    }
}

/// How [`restart_keeps_buckets`] stops the server.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// `SHUTDOWN NOSAVE`.
    Clean,
    /// SIGKILL.
    Kill,
}

/// Stops and restarts `server`, then checks that the whole dataset has the digest `before`
/// and every bucket is as it was; returns a connection to the restarted server.
#[track_caller]
pub fn restart_keeps_buckets(
    server: &mut Server,
    before: &str,
    buckets: &[Bucket],
    stop: Stop,
    what: &str,
) -> Connection {
    match stop {
        Stop::Clean => server.stop(),
        Stop::Kill => server.kill(),
    }
    server.restart();
    let mut con = server.conn();
    assert_eq!(
        digest(&mut con),
        before,
        "the dataset changed across {what}"
    );
    for bucket in buckets {
        assert_same_bucket(&mut con, &bucket.key, bucket, &format!("after {what}"));
    }
    con
}

// ---------------------------------------------------------------------------------------
// Command flags and ACL, shared by the ACL test and the unix-socket test.

/// The strings in an array or set reply (flags, categories, keys).
#[track_caller]
pub fn strings(value: &Value) -> Vec<String> {
    let items = match value {
        Value::Array(items) | Value::Set(items) => items,
        other => panic!("expected an array of strings, got {other:?}"),
    };
    items
        .iter()
        .map(|item| match item {
            Value::SimpleString(s) => s.clone(),
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::Okay => "OK".to_owned(),
            other => panic!("expected a string, got {other:?} in {value:?}"),
        })
        .collect()
}

/// A connection logged in as `user` (created with `nopass`).
pub fn conn_as(server: &Server, user: &str) -> Connection {
    let mut con = server.conn();
    let _: () = query(&mut con, redis::cmd("AUTH").arg(user).arg("any password"));
    con
}

/// `COMMAND INFO`: flags write/denyoom/fast, key 1..1 step 1 (and the `@write @fast`
/// categories where the server can give module commands categories); `COMMAND GETKEYS`
/// finds the key; ACL rules by command name deny it everywhere, by category where the
/// server has categories for module commands.
pub fn check_flags_and_acl(server: &Server) {
    let flavor = server.flavor();
    let mut con = server.conn();

    let reply: Value = query(
        &mut con,
        redis::cmd("COMMAND").arg("INFO").arg("throttle.take"),
    );
    let Value::Array(commands) = &reply else {
        panic!("COMMAND INFO: {reply:?}");
    };
    let [Value::Array(info)] = commands.as_slice() else {
        panic!("COMMAND INFO throttle.take: {reply:?}");
    };
    assert!(info.len() >= 7, "COMMAND INFO throttle.take: {reply:?}");
    assert_eq!(
        info[0],
        Value::BulkString(b"throttle.take".to_vec()),
        "the command name"
    );
    let flags = strings(&info[2]);
    for flag in ["write", "denyoom", "fast"] {
        assert!(
            flags.iter().any(|f| f == flag),
            "flags {flags:?} lack {flag}"
        );
    }
    for flag in ["readonly", "noscript", "loading", "stale"] {
        assert!(
            !flags.iter().any(|f| f == flag),
            "flags {flags:?} include {flag}"
        );
    }
    assert_eq!(
        info[3..6],
        [Value::Int(1), Value::Int(1), Value::Int(1)],
        "first key, last key, step: {reply:?}"
    );
    let categories = strings(&info[6]);
    if flavor.has_acl_categories() {
        for category in ["@write", "@fast"] {
            assert!(
                categories.iter().any(|c| c == category),
                "ACL categories {categories:?} lack {category}"
            );
        }
    }

    let keys: Value = query(
        &mut con,
        redis::cmd("COMMAND")
            .arg("GETKEYS")
            .arg("THROTTLE.TAKE")
            .arg("acl:key")
            .arg(8)
            .arg(9)
            .arg("TOKENS")
            .arg(2),
    );
    assert_eq!(strings(&keys), ["acl:key"]);

    for rules in [
        ["nowrite", "on", "nopass", "~*", "+@all", "-@write"],
        ["notake", "on", "nopass", "~*", "+@all", "-throttle.take"],
    ] {
        let _: () = query(&mut con, redis::cmd("ACL").arg("SETUSER").arg(&rules[..]));
    }

    // `-@write`: SET is refused; THROTTLE.TAKE too where the module could declare @write.
    let mut nowrite = conn_as(server, "nowrite");
    let got: Option<String> = query(&mut nowrite, redis::cmd("GET").arg("acl:key"));
    assert_eq!(got, None);
    let set = send(&mut nowrite, redis::cmd("SET").arg("acl:key").arg(1));
    assert!(
        set.as_ref().is_err_and(|e| e.starts_with("NOPERM")),
        "{set:?}"
    );
    let taken = send(&mut nowrite, &take_cmd("acl:key", "8 9"));
    if flavor.has_acl_categories() {
        let error = taken.expect_err("-@write must deny THROTTLE.TAKE");
        assert!(error.starts_with("NOPERM "), "{error}");
        assert!(error.to_lowercase().contains("throttle.take"), "{error}");
        assert!(!exists(&mut con, "acl:key"), "a refused call wrote");
    } else {
        // Redis 7.0 has no API to give a module command a category: `-@write` does not
        // cover it there (documented in the README).
        let reply = as_reply(&taken.expect("Redis 7.0: -@write does not name THROTTLE.TAKE"));
        assert_eq!(reply, [1, 7, 0, 112]);
        let _: i64 = query(&mut con, redis::cmd("DEL").arg("acl:key"));
    }

    // `-throttle.take`: refused by name on every server; other writes still allowed.
    let mut notake = conn_as(server, "notake");
    let error = send(&mut notake, &take_cmd("acl:key", "8 9")).expect_err("-throttle.take");
    assert!(error.starts_with("NOPERM "), "{error}");
    assert!(error.to_lowercase().contains("throttle.take"), "{error}");
    assert!(!exists(&mut con, "acl:key"), "a refused call wrote");
    let _: () = query(&mut notake, redis::cmd("SET").arg("acl:other").arg(1));

    let _: i64 = query(
        &mut con,
        redis::cmd("ACL")
            .arg("DELUSER")
            .arg("nowrite")
            .arg("notake"),
    );
}
