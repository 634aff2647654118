//! Bucket state survives every way Redis moves data, on every server: RDB (SAVE and restart),
//! AOF (kill -9 and restart; after BGREWRITEAOF with and without the RDB preamble; restart),
//! DEBUG RELOAD, DUMP/RESTORE and COPY. The AOF holds the resulting state, never the command,
//! and a denial or an inspection adds nothing to it.

use std::time::{Duration, Instant};

use throttle_e2e::{
    aof_server, aof_size, assert_aof_holds_effects, ceil_ms, digest, info, info_field, per_server,
    pexpiretime, pttl, query, server_time_ns, slack_ms, state, take, within, Connection, Flavor,
    Server, NS_PER_MS,
};

per_server!(
    in_memory_round_trips,
    rdb_save_and_restart,
    aof_kill_rewrite_and_restart
);

fn in_memory_round_trips(flavor: Flavor) {
    let server = Server::start(flavor);
    check_in_memory_round_trips(&server);
}

fn rdb_save_and_restart(flavor: Flavor) {
    let mut server = Server::start(flavor);
    check_rdb_restart(&mut server);
}

/// The in-memory round trips and the RDB restart once more, over a unix socket instead of TCP.
#[test]
fn round_trips_and_rdb_over_a_unix_socket() {
    let mut server = throttle_e2e::unix_socket_server(Flavor::Valkey91);
    check_in_memory_round_trips(&server);
    // Each check compares whole-dataset digests; keys the first left with a short TTL
    // would expire under the second.
    let _: () = query(&mut server.conn(), &redis::cmd("FLUSHALL"));
    check_rdb_restart(&mut server);
}

fn aof_kill_rewrite_and_restart(flavor: Flavor) {
    let mut server = aof_server(flavor);
    let mut con = server.conn();
    wait_no_rewrite(&mut con);
    let mut buckets = make_buckets(&mut con, "aof");
    let _: () = query(&mut con, redis::cmd("SET").arg("aof:plain").arg("x"));

    // The AOF holds SET ... PXAT, never THROTTLE.TAKE.
    assert_aof_holds_effects(server.dir(), "pxat", "after the takes");

    // A denial and TOKENS 0 write nothing to it (appendfsync always: a write is in the file
    // before its reply is sent).
    let size = aof_size(server.dir());
    let debt = &buckets[1];
    assert_eq!(take(&mut con, debt.key.as_slice(), debt.quota)[0], 0);
    assert_eq!(
        take(
            &mut con,
            debt.key.as_slice(),
            &format!("{} MAXWAIT 1", debt.quota)
        )[0],
        0
    );
    assert_eq!(take(&mut con, "aof:missing", "5 1 TOKENS 0"), [1, 5, 0, 0]);
    let partial = &buckets[0];
    assert_eq!(
        take(
            &mut con,
            partial.key.as_slice(),
            &format!("{} TOKENS 0", partial.quota)
        )[0],
        1
    );
    assert_eq!(
        aof_size(server.dir()),
        size,
        "a denial or TOKENS 0 wrote to the AOF"
    );
    let _: () = query(&mut con, redis::cmd("SET").arg("aof:size-probe").arg("1"));
    assert!(
        aof_size(server.dir()) > size,
        "the AOF size does not show writes"
    );

    let mut con = restart_keeps_buckets(
        &mut server,
        con,
        &buckets,
        Stop::Kill,
        "kill -9 and AOF replay",
    );

    // BGREWRITEAOF (default: an RDB preamble), then a take that lands in the new
    // incremental file, then a restart.
    rewrite(&mut con);
    take_one_more(&mut con, &mut buckets[0], "after BGREWRITEAOF");
    let mut con = restart_keeps_buckets(
        &mut server,
        con,
        &buckets,
        Stop::Clean,
        "BGREWRITEAOF and restart",
    );

    // A rewrite without the preamble writes commands: SET and PEXPIREAT, still no command.
    let _: () = query(
        &mut con,
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("aof-use-rdb-preamble")
            .arg("no"),
    );
    rewrite(&mut con);
    assert_aof_holds_effects(server.dir(), "pexpireat", "rewritten without the preamble");
    take_one_more(
        &mut con,
        &mut buckets[2],
        "after a rewrite without preamble",
    );
    let mut con = restart_keeps_buckets(
        &mut server,
        con,
        &buckets,
        Stop::Kill,
        "a plain rewrite and kill -9",
    );
    for bucket in &buckets {
        assert_take_continues(
            &mut con,
            &bucket.key,
            bucket,
            "after a plain rewrite and kill -9",
        );
    }
}

/// A bucket set up in a known state, and what it must still be after a round trip.
#[derive(Clone, Debug)]
struct Bucket {
    key: Vec<u8>,
    /// `capacity rate`.
    quota: &'static str,
    interval_ns: i64,
    remaining: i64,
    /// The stored state (GET) and its expiry (PEXPIRETIME) right after setting up.
    state: i64,
    expiry: i64,
}

/// Sets up three buckets under `prefix` that nothing refills while a test runs (one token
/// every 100 s or more): partly used, in debt after a reservation, and one with a binary key.
fn make_buckets(con: &mut Connection, prefix: &str) -> Vec<Bucket> {
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
fn assert_same_bucket(con: &mut Connection, key: &[u8], bucket: &Bucket, when: &str) {
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
fn assert_take_continues(con: &mut Connection, key: &[u8], bucket: &Bucket, when: &str) {
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
fn check_in_memory_round_trips(server: &Server) {
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

/// SAVE, stop, restart (same dir, default `dbfilename`): every bucket is as it was.
fn check_rdb_restart(server: &mut Server) {
    let mut con = server.conn();
    let buckets = make_buckets(&mut con, "rdb");
    let _: () = query(&mut con, redis::cmd("SET").arg("rdb:plain").arg("x"));
    let _: () = query(&mut con, &redis::cmd("SAVE"));
    assert!(
        server.dir().join("dump.rdb").is_file(),
        "SAVE wrote no dump.rdb"
    );
    let mut con = restart_keeps_buckets(server, con, &buckets, Stop::Clean, "SAVE and restart");
    for bucket in &buckets {
        assert_take_continues(&mut con, &bucket.key, bucket, "after SAVE and restart");
    }
}

/// How [`restart_keeps_buckets`] stops the server.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// `SHUTDOWN NOSAVE`.
    Clean,
    /// SIGKILL.
    Kill,
}

/// Reads the whole dataset's digest on `con`, closes it, stops and restarts `server`, then
/// checks that the dataset has that digest and every bucket is as it was; returns a
/// connection to the restarted server.
#[track_caller]
fn restart_keeps_buckets(
    server: &mut Server,
    mut con: Connection,
    buckets: &[Bucket],
    stop: Stop,
    what: &str,
) -> Connection {
    let before = digest(&mut con);
    drop(con);
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

/// Takes one more token from `bucket` and records its new state.
fn take_one_more(con: &mut Connection, bucket: &mut Bucket, when: &str) {
    assert_take_continues(con, &bucket.key, bucket, when);
    bucket.state += bucket.interval_ns;
    bucket.expiry = ceil_ms(bucket.state);
    bucket.remaining = (bucket.remaining - 1).max(0);
}

/// Starts BGREWRITEAOF and waits until it has finished, successfully.
fn rewrite(con: &mut Connection) {
    wait_no_rewrite(con);
    let _: String = query(con, &redis::cmd("BGREWRITEAOF"));
    wait_no_rewrite(con);
    let persistence = info(con, "persistence");
    assert_eq!(
        info_field(&persistence, "aof_last_bgrewrite_status"),
        Some("ok"),
        "{persistence}"
    );
}

fn wait_no_rewrite(con: &mut Connection) {
    within(
        "no AOF rewrite in progress or scheduled",
        Duration::from_secs(10),
        || {
            let persistence = info(con, "persistence");
            (info_field(&persistence, "aof_rewrite_in_progress") == Some("0")
                && info_field(&persistence, "aof_rewrite_scheduled") == Some("0"))
            .then_some(())
        },
    );
}
