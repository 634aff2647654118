//! What the end-to-end tests of THROTTLE.PAUSE, GIVE, MTAKE and PEEK share (`pause.rs`,
//! `give.rs`, `mtake.rs`, `peek.rs`): sending those commands, running a group of them in one
//! MULTI with the slack its clock allows, a primary with a replica, and the bad-input battery.
//! Each test file declares `mod common; mod support;` and uses the part it needs.
//!
//! Time: on Redis 7.2+ and Valkey a MULTI freezes the module's clock (the cached command time),
//! so replies inside one are exact. Redis 7.0's clock moves inside a MULTI, by no more than the
//! client saw the EXEC take: there a duration in a reply may be smaller than the exact one by
//! that much (it only shrinks as time passes), never larger.

// Each test binary uses part of this module.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use redis::{Connection, Value};

use crate::common::{
    assert_no_crash, command_stat, digest, error_text, info, info_field, process_id, query, send,
    slack_ms, state_of, Flavor, Server,
};

/// The exact error texts of module/bucket/src/error.rs and module/src/bucket_key.rs.
pub mod errors {
    pub const CAPACITY: &str =
        "ERR capacity must be a whole number of tokens from 1 to 1000000000000000";
    pub const RATE: &str = "ERR rate must be a decimal number of tokens per second from \
                            0.000001 to 1000000000, like 10 or 0.5";
    pub const FILL: &str = "ERR capacity / rate must be at most 315360000 seconds (10 years): \
                            raise the rate or lower the capacity";
    pub const MAXWAIT: &str =
        "ERR MAXWAIT must be a whole number of milliseconds from 0 to 315360000000 (10 years)";
    pub const PAUSE_MS: &str = "ERR ms must be a whole number of milliseconds from 1 to \
                                315360000000 (10 years): the supplier's Retry-After";
    pub const TICKET: &str = "ERR ticket must be the fifth element of a THROTTLE.TAKE ... \
                              TICKET reply (a whole number of microseconds)";
    pub const NUMKEYS: &str = "ERR numkeys must be a whole number from 1 to 16";
    pub const DUPLICATE: &str =
        "ERR the keys of THROTTLE.MTAKE must be distinct: name each bucket once";
    pub const MTAKE_UNKNOWN: &str =
        "ERR unknown option for THROTTLE.MTAKE: the only option is MAXWAIT ms";
    pub const WRONGTYPE: &str = "WRONGTYPE the key holds a value that is not a string, so not \
                                 a THROTTLE bucket: use another key";
    pub const NOT_BUCKET: &str = "ERR the key holds a string that is not a THROTTLE bucket \
                                  (expected the 8-byte state THROTTLE.TAKE writes); use \
                                  another key, or DEL this one to start a full bucket";

    /// The server's (and the module's) arity error; `command` in lower case.
    pub fn arity(command: &str) -> String {
        format!("ERR wrong number of arguments for '{command}' command")
    }

    pub fn tokens(capacity: u64) -> String {
        format!("ERR TOKENS must be a whole number from 0 to the capacity ({capacity})")
    }

    pub fn give_tokens(capacity: u64) -> String {
        format!("ERR n must be a whole number of tokens from 0 to the capacity ({capacity})")
    }

    pub fn triples(keys: usize) -> String {
        format!(
            "ERR THROTTLE.MTAKE needs capacity, rate and tokens for each of its {keys} keys, \
             in key order, then optionally MAXWAIT ms"
        )
    }

    pub fn missing(option: &str) -> String {
        format!("ERR {option} needs a value: {option} n")
    }

    pub fn repeated(option: &str) -> String {
        format!("ERR {option} is given more than once")
    }
}

/// `name key <args>`, the arguments one whitespace-separated string.
pub fn cmd(name: &str, key: impl redis::ToRedisArgs, args: &str) -> redis::Cmd {
    let mut cmd = redis::cmd(name);
    cmd.arg(key);
    for word in args.split_whitespace() {
        cmd.arg(word);
    }
    cmd
}

/// `name <args>`, every argument raw bytes.
pub fn raw(name: &str, args: &[&[u8]]) -> redis::Cmd {
    let mut cmd = redis::cmd(name);
    for arg in args {
        cmd.arg(*arg);
    }
    cmd
}

/// `THROTTLE.MTAKE <args>` (numkeys first).
pub fn mtake_cmd(args: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("THROTTLE.MTAKE");
    for word in args.split_whitespace() {
        cmd.arg(word);
    }
    cmd
}

/// An integer reply.
#[track_caller]
pub fn int(value: &Value) -> i64 {
    match value {
        Value::Int(n) => *n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// A number: an integer reply, or a bucket's state (a GET's 8 bytes).
#[track_caller]
pub fn num(value: &Value) -> i64 {
    match value {
        Value::Int(n) => *n,
        Value::BulkString(bytes) => state_of(bytes),
        other => panic!("expected an integer or a state, got {other:?}"),
    }
}

/// An array of integers, and nothing else.
#[track_caller]
pub fn ints(value: &Value) -> Vec<i64> {
    let Value::Array(items) = value else {
        panic!("expected an array of integers, got {value:?}");
    };
    items
        .iter()
        .map(|item| match item {
            Value::Int(n) => *n,
            other => panic!("expected an integer in the reply, got {other:?} in {value:?}"),
        })
        .collect()
}

/// Runs a command that must succeed and answer an integer.
#[track_caller]
pub fn run_int(con: &mut Connection, cmd: &redis::Cmd) -> i64 {
    match send(con, cmd) {
        Ok(value) => int(&value),
        Err(e) => panic!("{}: {e}", shown(cmd)),
    }
}

/// Runs a command that must succeed and answer an array of integers.
#[track_caller]
pub fn run_ints(con: &mut Connection, cmd: &redis::Cmd) -> Vec<i64> {
    match send(con, cmd) {
        Ok(value) => ints(&value),
        Err(e) => panic!("{}: {e}", shown(cmd)),
    }
}

/// `THROTTLE.PAUSE key <args>`: ms until the next token.
#[track_caller]
pub fn pause(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> i64 {
    run_int(con, &cmd("THROTTLE.PAUSE", key, args))
}

/// `THROTTLE.GIVE key <args>`: tokens given back.
#[track_caller]
pub fn give(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> i64 {
    run_int(con, &cmd("THROTTLE.GIVE", key, args))
}

/// `THROTTLE.PEEK key <args>`.
#[track_caller]
pub fn peek(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> Vec<i64> {
    run_ints(con, &cmd("THROTTLE.PEEK", key, args))
}

/// `THROTTLE.TAKE key <args>`, any length of reply (five integers with TICKET).
#[track_caller]
pub fn take_any(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> Vec<i64> {
    run_ints(con, &cmd("THROTTLE.TAKE", key, args))
}

/// `THROTTLE.MTAKE <args>`.
#[track_caller]
pub fn mtake(con: &mut Connection, args: &str) -> Vec<i64> {
    run_ints(con, &mtake_cmd(args))
}

/// The GET of a key, `None` if it is missing.
#[track_caller]
pub fn get(con: &mut Connection, key: impl redis::ToRedisArgs) -> Option<Vec<u8>> {
    query(con, redis::cmd("GET").arg(key))
}

/// A connection that speaks RESP3 (HELLO 3 answered with a map), for checking that replies
/// are the same as in RESP2.
pub fn resp3(server: &Server) -> Connection {
    let client =
        redis::Client::open(format!("{}?protocol=resp3", server.url())).expect("a RESP3 client");
    let mut con = client.get_connection().expect("a RESP3 connection");
    let hello: Value = query(&mut con, redis::cmd("HELLO").arg(3));
    assert!(matches!(hello, Value::Map(_)), "not RESP3: {hello:?}");
    con
}

/// A command for failure messages: its words, each cut to 40 bytes.
pub fn shown(cmd: &redis::Cmd) -> String {
    cmd.args_iter()
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) if bytes.len() > 40 => format!("<{} bytes>", bytes.len()),
            redis::Arg::Simple(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
            _ => "?".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The replies of `cmds` run in one MULTI/EXEC, and the slack their clock allows: 0 where a
/// MULTI freezes the clock (Redis 7.2+, Valkey), else how long the client saw the EXEC take
/// (ms, rounded up, plus one).
#[track_caller]
pub fn exec(con: &mut Connection, flavor: Flavor, cmds: &[redis::Cmd]) -> (Vec<Value>, i64) {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for cmd in cmds {
        pipe.add_command(cmd.clone());
    }
    let start = Instant::now();
    let replies: Vec<Value> = pipe
        .query(con)
        .unwrap_or_else(|e| panic!("MULTI ... EXEC: {}", error_text(&e)));
    let slack = if flavor.has_cached_micros() {
        0
    } else {
        slack_ms(start)
    };
    assert_eq!(replies.len(), cmds.len(), "EXEC replies: {replies:?}");
    (replies, slack)
}

/// Checks a reply against the exact one: every field equal, except the durations at
/// `durations`, which may be up to `slack` ms smaller (the clock moved) and never larger.
#[track_caller]
pub fn assert_reply(got: &[i64], want: &[i64], durations: &[usize], slack: i64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?}, expected {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if durations.contains(&i) {
            (w - slack..=*w).contains(g)
        } else {
            g == w
        };
        assert!(
            ok,
            "{what}: element {i} of {got:?} (expected {want:?}, durations {durations:?} \
             within {slack} ms below)"
        );
    }
}

/// Checks a duration reply against the exact one, up to `slack` ms smaller.
#[track_caller]
pub fn assert_duration(got: i64, want: i64, slack: i64, what: &str) {
    assert!(
        (want - slack..=want).contains(&got),
        "{what}: {got} ms, expected {want} (or up to {slack} ms less)"
    );
}

/// `master_repl_offset`: moves with every write the server propagates.
#[track_caller]
pub fn repl_offset(con: &mut Connection) -> i64 {
    info_field(&info(con, "replication"), "master_repl_offset")
        .and_then(|v| v.parse().ok())
        .expect("INFO replication has master_repl_offset")
}

/// A command's `calls` in `INFO commandstats` (0 if it has not run).
#[track_caller]
pub fn calls(con: &mut Connection, command: &str) -> u64 {
    command_stat(&info(con, "commandstats"), command, "calls").unwrap_or(0)
}

/// One stat of a command in `INFO commandstats` (0 if it has not run).
#[track_caller]
pub fn command_stat_of(con: &mut Connection, command: &str, stat: &str) -> u64 {
    command_stat(&info(con, "commandstats"), command, stat).unwrap_or(0)
}

/// A primary (no replication PINGs, so its offset moves only with writes) and a replica with
/// the module, in sync.
pub struct Pair {
    pub primary: Server,
    pub replica: Server,
}

impl Pair {
    pub fn start(flavor: Flavor) -> Pair {
        let primary = Server::builder(flavor)
            .arg("repl-ping-replica-period", "3600")
            .start();
        let replica = Server::builder(flavor).replica_of(&primary).start();
        replica.wait_replica_synced(&primary);
        Pair { primary, replica }
    }

    /// Waits until the replica has everything, then checks it holds exactly the primary's
    /// data (DEBUG DIGEST covers values and expiry times) and has applied only what the
    /// module wrote as SET: none of the module's commands ever ran on it.
    #[track_caller]
    pub fn assert_replica_same(&self, what: &str) {
        let mut con = self.primary.conn();
        let acked: i64 = query(&mut con, redis::cmd("WAIT").arg(1).arg(5000));
        assert_eq!(acked, 1, "{what}: WAIT 1 5000");
        self.replica.wait_replica_synced(&self.primary);
        let mut rcon = self.replica.conn();
        assert_eq!(
            digest(&mut rcon),
            digest(&mut con),
            "{what}: the replica's DEBUG DIGEST differs from the primary's"
        );
        let stats = info(&mut rcon, "commandstats");
        assert!(
            stats.contains("cmdstat_set:"),
            "{what}: the replica applied no SET:\n{stats}"
        );
        assert!(
            !stats.to_lowercase().contains("throttle"),
            "{what}: a THROTTLE command ran on the replica itself:\n{stats}"
        );
    }

    /// Runs `act` on the primary and checks it propagated nothing: the primary's replication
    /// offset and the replica's count of applied SETs do not move.
    #[track_caller]
    pub fn assert_replicates_nothing(&self, what: &str, act: impl FnOnce(&mut Connection)) {
        let mut con = self.primary.conn();
        let mut rcon = self.replica.conn();
        self.replica.wait_replica_synced(&self.primary);
        let offset = repl_offset(&mut con);
        let sets = calls(&mut rcon, "set");
        act(&mut con);
        assert_eq!(
            repl_offset(&mut con),
            offset,
            "{what} moved the replication offset: it propagated something"
        );
        // A PING from the primary would move the offset: it is there to check against.
        let _: () = query(&mut con, redis::cmd("SET").arg("sync:probe").arg(1));
        self.replica.wait_replica_synced(&self.primary);
        assert_eq!(
            calls(&mut rcon, "set"),
            sets + 1,
            "{what}: the replica applied a SET other than the probe"
        );
    }
}

/// One malformed call and the exact error it must get.
pub struct BadCall {
    pub args: Vec<Vec<u8>>,
    pub error: String,
}

/// A malformed call: its arguments (after the command name) and its exact error.
pub fn bad(args: &[&[u8]], error: impl Into<String>) -> BadCall {
    BadCall {
        args: args.iter().map(|a| a.to_vec()).collect(),
        error: error.into(),
    }
}

/// A list key, a hash key and strings that are not a bucket state, for the battery's type
/// errors: `t:list`, `t:hash`, `s:hello`, `s:negative`, `s:float`, `s:empty`, `s:huge`.
pub fn set_up_bad_keys(con: &mut Connection) {
    let mut pipe = redis::pipe();
    pipe.cmd("RPUSH").arg("t:list").arg("a").ignore();
    pipe.cmd("HSET").arg("t:hash").arg("f").arg("v").ignore();
    for (key, value) in [
        ("s:hello", "hello"),
        ("s:negative", "-5"),
        ("s:float", "1.5"),
        ("s:empty", ""),
        ("s:huge", "99999999999999999999"),
    ] {
        pipe.cmd("SET").arg(key).arg(value).ignore();
    }
    let _: () = pipe
        .query(con)
        .unwrap_or_else(|e| panic!("set up keys: {}", error_text(&e)));
}

/// The keys of [`set_up_bad_keys`] that hold another type, and the strings that are not a
/// bucket.
pub const OTHER_TYPES: [&str; 2] = ["t:list", "t:hash"];
pub const NOT_BUCKETS: [&str; 5] = ["s:hello", "s:negative", "s:float", "s:empty", "s:huge"];

/// Sends `command` with every bad call's arguments on a fresh server with the module: each
/// gets exactly its error; after each the server answers PING, a canary string and a canary
/// bucket are unchanged and the whole dataset's digest is what it was. Then nothing crashed
/// and the server is the same process. Returns how many calls were checked.
pub fn check_battery(server: &Server, command: &str, calls: &[BadCall]) -> usize {
    let mut con = server.conn();
    let pid = process_id(&mut con);
    let _: () = query(&mut con, redis::cmd("SET").arg("canary").arg(42));
    let _: Value = query(
        &mut con,
        &cmd("THROTTLE.TAKE", "canary:bucket", "5 0.001 TOKENS 2"),
    );
    let bucket: Vec<u8> = query(&mut con, redis::cmd("GET").arg("canary:bucket"));
    set_up_bad_keys(&mut con);

    for call in calls {
        let args: Vec<&[u8]> = call.args.iter().map(Vec::as_slice).collect();
        let request = raw(command, &args);
        let what = shown(&request);
        let before = digest(&mut con);
        let error = match send(&mut con, &request) {
            Err(error) => error,
            Ok(value) => panic!("{what}: expected an error, got {value:?}"),
        };
        assert_eq!(error, call.error, "{what}: the error reply");
        let pong: String = query(&mut con, &redis::cmd("PING"));
        assert_eq!(pong, "PONG", "{what}");
        let canary: String = query(&mut con, redis::cmd("GET").arg("canary"));
        assert_eq!(canary, "42", "{what} changed another key");
        let now: Vec<u8> = query(&mut con, redis::cmd("GET").arg("canary:bucket"));
        assert_eq!(now, bucket, "{what} changed a bucket it does not name");
        assert_eq!(digest(&mut con), before, "{what} changed the dataset");
    }
    assert_no_crash(server, &pid);
    calls.len()
}

/// Polls `check` (bounded by `timeout`) until it gives `Some`; panics with `what` after.
#[track_caller]
pub fn within<T>(what: &str, timeout: Duration, check: impl FnMut() -> Option<T>) -> T {
    crate::common::poll(timeout, check)
        .unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}
