//! The bad-input battery of the THROTTLE commands: malformed calls, each with the exact error
//! it must get, sent to a fresh server that must answer each one and change nothing.

use redis::{Connection, Value};
use throttle_testkit::Server;

use crate::command::{error_text, line, query, send, shown};
use crate::errors;
use crate::keyspace::digest;
use crate::server::{assert_no_crash, process_id};

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

/// `args` (the words after the key) on each key of [`OTHER_TYPES`], refused with WRONGTYPE,
/// then on each of [`NOT_BUCKETS`], refused as no bucket.
pub fn bad_keys(args: &[&[u8]]) -> Vec<BadCall> {
    let on = |key: &str, error: &str| {
        let mut words = vec![key.as_bytes()];
        words.extend_from_slice(args);
        bad(&words, error)
    };
    let other_types = OTHER_TYPES.iter().map(|key| on(key, errors::WRONGTYPE));
    let not_buckets = NOT_BUCKETS.iter().map(|key| on(key, errors::NOT_BUCKET));
    other_types.chain(not_buckets).collect()
}

/// Every malformed quota on the key `k`, followed by `rest` (the command's valid arguments
/// after the quota): capacities and rates that are no number in range, and pairs that fill
/// the bucket over ten years, each with its exact error. Every command reads its quota alike,
/// so each battery checks all of them; the union of what the batteries checked one by one.
pub fn bad_quotas(rest: &[&[u8]]) -> Vec<BadCall> {
    let megabyte = vec![b'9'; 1 << 20];
    let on = |capacity: &[u8], rate: &[u8], error: &str| {
        let mut words = vec![b"k".as_slice(), capacity, rate];
        words.extend_from_slice(rest);
        bad(&words, error)
    };
    let capacities: [&[u8]; 7] = [b"0", b"-1", b"1.5", b"", b"x", b"\xff", &megabyte];
    let rates: [&[u8]; 11] = [
        b"0",
        b"-9",
        b"nan",
        b"inf",
        b"1e3",
        b"",
        b"x",
        b"0.0000009",
        b"1000000000.1",
        b"9\x80",
        &megabyte,
    ];
    let fills: [(&[u8], &[u8]); 3] = [
        (b"315360001", b"1"),
        (b"316", b"0.000001"),
        (b"1000000000000000", b"0.000001"),
    ];
    let capacity = capacities.iter().map(|c| on(c, b"9", errors::CAPACITY));
    let rate = rates.iter().map(|r| on(b"8", r, errors::RATE));
    let fill = fills.iter().map(|(c, r)| on(c, r, errors::FILL));
    let over = on(b"1000000000000001", b"1000000000", errors::CAPACITY);
    capacity.chain([over]).chain(rate).chain(fill).collect()
}

/// An argument that must be a whole number given what is none (a negative, a fraction, an
/// empty string, a word, 20 digits, a megabyte of digits, a digit and a byte that is not
/// UTF-8) between the valid arguments `before` (the key first) and `after`: each refused with
/// `error`. A battery adds the values out of its own argument's range beside.
pub fn bad_wholes(before: &[&[u8]], after: &[&[u8]], error: &str) -> Vec<BadCall> {
    let megabyte = vec![b'9'; 1 << 20];
    let wholes: [&[u8]; 7] = [
        b"-1",
        b"1.5",
        b"",
        b"x",
        b"99999999999999999999",
        &megabyte,
        b"1\xff",
    ];
    wholes
        .iter()
        .map(|whole| bad(&[before, &[*whole], after].concat(), error))
        .collect()
}

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
        &line("THROTTLE.TAKE canary:bucket 5 0.001 TOKENS 2"),
    );
    let bucket: Vec<u8> = query(&mut con, redis::cmd("GET").arg("canary:bucket"));
    set_up_bad_keys(&mut con);

    for call in calls {
        let args: Vec<&[u8]> = call.args.iter().map(Vec::as_slice).collect();
        let mut request = line(command);
        request.arg(&args[..]);
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
