//! The Lua script (`benches/lua/throttle_take.lua`) must do exactly what THROTTLE.TAKE does: the
//! same reply, the same stored state, the same expiry, the same error messages.
//!
//! The clock is taken out of the comparison by running both inside one MULTI: on servers with
//! the cached command time (Redis 7.2+, Valkey) the module and the script's `TIME` read the same
//! instant for the whole transaction, so every field must match exactly. Each case sets the
//! module's key and the script's key to the same state first, then runs its calls on both,
//! alternating, in one MULTI. Error replies depend on no clock, and are compared on every server.

use redis::{Connection, Value};
use throttle_benches::load_lua_take;
use throttle_testkit::{Flavor, Server};

/// What a bucket's key holds before a case's calls.
#[derive(Clone, Copy, Debug)]
enum Before {
    Missing,
    /// A state this many ns after the server's clock (read just before; negative: before it).
    FromNow(i128),
    /// This exact value.
    Raw(&'static str),
}

const S: i128 = 1_000_000_000;
const DAY: i128 = 86_400 * S;

/// (state before, calls: the arguments after the key, in order).
const CASES: &[(Before, &[&str])] = &[
    // Burst, then denial; reservation chains.
    (Before::Missing, &["8 9"; 10]),
    (Before::Missing, &["8 9 MAXWAIT 5000"; 11]),
    (
        Before::Missing,
        &[
            "10 0.3 TOKENS 10",
            "10 0.3 TOKENS 0",
            "10 0.3 TOKENS 1 MAXWAIT 100000",
            "10 0.3 TOKENS 10 MAXWAIT 100000",
            "10 0.3 TOKENS 10 MAXWAIT 1000000",
            "10 0.3 tokens 0 maxwait 5",
        ],
    ),
    // An old state is a full bucket.
    (
        Before::FromNow(-DAY),
        &["5 1", "5 1 TOKENS 4", "5 1 TOKENS 1"],
    ),
    // Half empty, empty, deep in debt.
    (
        Before::FromNow(5 * S),
        &["100 10 TOKENS 50", "100 10 TOKENS 1", "100 10 TOKENS 0"],
    ),
    (
        Before::FromNow(10 * S),
        &[
            "100 10",
            "100 10 MAXWAIT 99",
            "100 10 MAXWAIT 100",
            "100 10 MAXWAIT 101",
            "100 10 TOKENS 0",
        ],
    ),
    (
        Before::FromNow(10 * S - 1),
        &["100 10 TOKENS 1", "100 10 TOKENS 0"],
    ),
    (
        Before::FromNow(365 * DAY),
        &[
            "1 0.000001",
            "1 0.000001 MAXWAIT 315360000000",
            "1 0.000001 TOKENS 0",
        ],
    ),
    // Stored states at the edges: a take that would pass i64::MAX is refused, not wrapped.
    (
        Before::Raw("9223372036854775807"),
        &["8 9 MAXWAIT 315360000000", "8 9", "8 9 TOKENS 0"],
    ),
    (
        Before::Raw("9223372036854775000"),
        &[
            "1 1000000000 MAXWAIT 315360000000 TOKENS 1",
            "1 1000000000 MAXWAIT 315360000000",
            "1 1000000000 TOKENS 0",
        ],
    ),
    (Before::Raw("0"), &["8 9", "8 9 TOKENS 0"]),
    (Before::Raw("0000000000000000001"), &["8 9"]),
    (Before::Raw("999999999"), &["8 9"]),
    // Limits of capacity, rate, fill and MAXWAIT.
    (
        Before::Missing,
        &[
            "1000000000000000 1000000000 TOKENS 999999999999999",
            "1000000000000000 1000000000 TOKENS 1000000000000000 MAXWAIT 315360000000",
            "1000000000000000 1000000000 TOKENS 1000000000000000 MAXWAIT 315360000000",
            "1000000000000000 1000000000 TOKENS 0",
        ],
    ),
    (
        Before::Missing,
        &[
            "315360000 1 TOKENS 315360000",
            "315360000 1 TOKENS 315360000 MAXWAIT 315360000000",
            "315360000 1 TOKENS 0",
        ],
    ),
    (
        Before::Missing,
        &["31536000 0.1 TOKENS 31535999", "31536000 0.1 TOKENS 0"],
    ),
    // Rates: exact decimal parsing, interval rounded up.
    (
        Before::Missing,
        &["1000 35791394.1 TOKENS 999", "1000 35791394.1 TOKENS 0"],
    ),
    (
        Before::Missing,
        &["7 999999999.9 TOKENS 7", "7 999999999.9 TOKENS 0"],
    ),
    (
        Before::Missing,
        &[
            "3 0.0000015 TOKENS 2",
            "3 0.0000015 MAXWAIT 315360000000",
            "3 0.0000015 TOKENS 3 MAXWAIT 315360000000",
        ],
    ),
    (
        Before::Missing,
        &[
            "50 123456789.123456789123456789 TOKENS 17",
            "50 123456789.123456789123456789 TOKENS 0",
        ],
    ),
    (
        Before::Missing,
        &[
            "2 999999999.999999999999999999 TOKENS 1",
            "2 999999999.999999999999999999 TOKENS 0",
        ],
    ),
    (
        Before::Missing,
        &[
            "12 3.000000000000000001 TOKENS 5",
            "12 3.000000000000000001 TOKENS 0",
        ],
    ),
    (
        Before::Missing,
        &[
            "50 0.000001000000000000 TOKENS 3",
            "50 0.000001000000000000 TOKENS 0",
        ],
    ),
    (
        Before::Missing,
        &[
            "9 007.250 TOKENS 4",
            "9 .5 TOKENS 2",
            "9 5. TOKENS 0",
            "9 0.7 MAXWAIT 1",
        ],
    ),
    (
        Before::Missing,
        &["0008 9 TOKENS 0003", "8 9 TOKENS 08 MAXWAIT 0000"],
    ),
    // Long decimals whose double estimate of the interval is one too high, or one too low.
    (
        Before::Missing,
        &[
            "10 66666666.6666666667 TOKENS 3",
            "10 66666666.6666666667 TOKENS 0",
        ],
    ),
    (
        Before::Missing,
        &[
            "10 8333333.3333333334 TOKENS 3",
            "10 8333333.3333333334 TOKENS 0",
        ],
    ),
    (
        Before::Missing,
        &[
            "10 999999999.9999999 TOKENS 3",
            "10 999999999.9999999 TOKENS 0",
        ],
    ),
    (
        Before::Missing,
        &["10 1782531.1942959 TOKENS 3", "10 1782531.1942959 TOKENS 0"],
    ),
    (
        Before::FromNow(DAY),
        &[
            "1 0.0000011 TOKENS 1 MAXWAIT 315360000000",
            "1 0.0000011 TOKENS 0",
        ],
    ),
    // `remaining` = (fill - debt) / interval with fill - debt above 2^53 ns, one ns short of a
    // whole token (the clocks are in whole us, the interval is 1 us): a double rounds that up,
    // so this checks the script's exact correction. Nine takes move through every residue.
    (Before::FromNow(S + 1), &["300000000000000 1000000"; 9]),
];

fn server_now_ns(con: &mut Connection) -> i128 {
    let (s, us): (i128, i128) = redis::cmd("TIME").query(con).expect("TIME");
    s * S + us * 1000
}

fn words(args: &str) -> Vec<&str> {
    args.split_whitespace().collect()
}

/// Runs every case on a module key and a script key and compares replies, state and expiry.
fn same_replies_state_and_expiry(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let sha = load_lua_take(&mut con).expect("SCRIPT LOAD");

    for (i, (before, calls)) in CASES.iter().enumerate() {
        let (module_key, lua_key) = (format!("m:{i}"), format!("l:{i}"));
        let value = match before {
            Before::Missing => None,
            Before::FromNow(offset) => Some((server_now_ns(&mut con) + offset).to_string()),
            Before::Raw(value) => Some((*value).to_owned()),
        };
        if let Some(value) = &value {
            for key in [&module_key, &lua_key] {
                let _: () = redis::cmd("SET")
                    .arg(key)
                    .arg(value)
                    .query(&mut con)
                    .expect("SET");
            }
        }

        let mut pipe = redis::pipe();
        pipe.atomic();
        for args in calls.iter() {
            pipe.cmd("THROTTLE.TAKE").arg(&module_key).arg(words(args));
            pipe.cmd("EVALSHA")
                .arg(&sha)
                .arg(1)
                .arg(&lua_key)
                .arg(words(args));
        }
        // The stored values and expiries are read in the same transaction: a bucket that
        // refills within a millisecond may expire between two separate reads, and inside EXEC
        // the server sees one instant.
        for key in [&module_key, &lua_key] {
            pipe.cmd("GET").arg(key);
            pipe.cmd("PEXPIRETIME").arg(key);
        }
        let mut replies: Vec<Value> = pipe
            .query(&mut con)
            .unwrap_or_else(|e| panic!("{flavor} case {i} {before:?} {calls:?}: {e}"));
        assert_eq!(replies.len(), 2 * calls.len() + 4);
        let states = replies.split_off(2 * calls.len());
        for (n, pair) in replies.chunks(2).enumerate() {
            assert_eq!(
                pair[1], pair[0],
                "{flavor} case {i} ({before:?}), call {n} `{}`: script (left) vs module (right)",
                calls[n]
            );
            assert!(
                matches!(&pair[0], Value::Array(items) if items.len() == 4),
                "{flavor} case {i}: {:?}",
                pair[0]
            );
        }

        // The encoding is not compared: it is a matter of memory, not of semantics.
        assert_eq!(
            states[2..],
            states[..2],
            "{flavor} case {i} ({before:?}) {calls:?}: stored value and PEXPIRETIME, \
             script (left) vs module (right)"
        );
    }
}

/// What a call answers, errors included, as comparable text.
fn outcome(result: redis::RedisResult<Value>) -> String {
    match result {
        Ok(value) => format!("{value:?}"),
        Err(e) => format!("error {:?} {:?}", e.code(), e.detail()),
    }
}

/// Every bad call gets the module's error message from the script too, and writes nothing.
fn same_errors(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let sha = load_lua_take(&mut con).expect("SCRIPT LOAD");

    let bad: &[&[&[u8]]] = &[
        &[],
        &[b"8"],
        &[b"0", b"9"],
        &[b"-1", b"9"],
        &[b"1.5", b"9"],
        &[b"", b"9"],
        &[b"1000000000000001", b"9"],
        &[b"9999999999999999", b"9"],
        &[b"18446744073709551616", b"9"],
        &[b"abc", b"9"],
        &[b"8", b"0"],
        &[b"8", b"0.0"],
        &[b"8", b"-9"],
        &[b"8", b"+9"],
        &[b"8", b"nan"],
        &[b"8", b"inf"],
        &[b"8", b"1e400"],
        &[b"8", b"1e3"],
        &[b"8", b""],
        &[b"8", b"."],
        &[b"8", b" 1"],
        &[b"8", b"1.2.3"],
        &[b"8", b"0.0000009"],
        &[b"8", b"0.0000000000000000001"],
        &[b"8", b"1000000000.1"],
        &[b"8", b"1000000001"],
        &[b"8", b"99999999999"],
        &[b"8", b"0x10"],
        &[b"1000000000000000", b"0.000001"],
        &[b"315360001", b"1"],
        &[b"315360000", b"0.99999999999999999"],
        &[b"8", b"9", b"TOKENS", b"9"],
        &[b"0008", b"9", b"TOKENS", b"9"],
        &[b"8", b"9", b"TOKENS", b"-1"],
        &[b"8", b"9", b"TOKENS", b"x"],
        &[b"8", b"9", b"TOKENS", b""],
        &[
            b"1000000000000000",
            b"1000000000",
            b"TOKENS",
            b"1000000000000001",
        ],
        &[b"8", b"9", b"MAXWAIT", b"315360000001"],
        &[b"8", b"9", b"MAXWAIT", b"-5"],
        &[b"8", b"9", b"MAXWAIT", b"1.5"],
        &[b"8", b"9", b"WAIT", b"1"],
        &[b"8", b"9", b"TOKENS"],
        &[b"8", b"9", b"MAXWAIT", b"1", b"MAXWAIT"],
        &[b"8", b"9", b"TOKENS", b"1", b"tokens", b"2"],
        &[b"8", b"9", b"MAXWAIT", b"1", b"TOKENS", b"9", b"TOKENS"],
        &[b"\xff", b"9"],
        &[b"8", b"\xff\xfe"],
        &[b"8", b"9", b"TOK\xffENS", b"1"],
    ];
    for (i, args) in bad.iter().enumerate() {
        let key = format!("bad:{i}");
        let module = outcome(
            redis::cmd("THROTTLE.TAKE")
                .arg(&key)
                .arg(*args)
                .query(&mut con),
        );
        let lua = outcome(
            redis::cmd("EVALSHA")
                .arg(&sha)
                .arg(1)
                .arg(&key)
                .arg(*args)
                .query(&mut con),
        );
        assert!(module.starts_with("error"), "{flavor} {args:?}: {module}");
        assert_eq!(
            lua, module,
            "{flavor} {args:?}: script (left) vs module (right)"
        );
        let exists: i64 = redis::cmd("EXISTS").arg(&key).query(&mut con).unwrap();
        assert_eq!(exists, 0, "{flavor} {args:?} wrote the key");
    }

    // Keys that hold something else: another type, or a string that is not a bucket.
    let _: () = redis::cmd("RPUSH")
        .arg("list")
        .arg("x")
        .query(&mut con)
        .unwrap();
    let mut keys = vec!["list".to_owned()];
    for (i, value) in [
        "abc",
        "-1",
        "+1",
        "1.5",
        " 1",
        "9223372036854775808",
        "99999999999999999999",
        "00000000000000000001",
        "",
    ]
    .iter()
    .enumerate()
    {
        let key = format!("string:{i}");
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(*value)
            .query(&mut con)
            .unwrap();
        keys.push(key);
    }
    for key in keys {
        for args in ["8 9", "8 9 TOKENS 0", "8 9 MAXWAIT 1000"] {
            let module = outcome(
                redis::cmd("THROTTLE.TAKE")
                    .arg(&key)
                    .arg(words(args))
                    .query(&mut con),
            );
            let lua = outcome(
                redis::cmd("EVALSHA")
                    .arg(&sha)
                    .arg(1)
                    .arg(&key)
                    .arg(words(args))
                    .query(&mut con),
            );
            assert!(module.starts_with("error"), "{flavor} {key}: {module}");
            assert_eq!(
                lua, module,
                "{flavor} {key} {args}: script (left) vs module (right)"
            );
        }
    }

    // The script's own rule: exactly one key.
    let two_keys = outcome(
        redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(2)
            .arg("a")
            .arg("b")
            .arg(8)
            .arg(9)
            .query(&mut con),
    );
    assert!(two_keys.contains("exactly one key"), "{two_keys}");
}

/// Replicas and the AOF get the script's effect (`SET key <state> PXAT <ms>`), like the
/// module's: a denial or an inspection propagates nothing.
fn replicates_effects_not_the_script(flavor: Flavor) {
    let primary = Server::start(flavor);
    let replica = Server::builder(flavor).replica_of(&primary).start();
    let mut con = primary.conn();
    let sha = load_lua_take(&mut con).expect("SCRIPT LOAD");
    let take = |con: &mut Connection, args: &str| -> Vec<i64> {
        redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(1)
            .arg("r")
            .arg(words(args))
            .query(con)
            .expect("EVALSHA")
    };
    assert_eq!(take(&mut con, "2 0.001")[..2], [1, 1]);
    assert_eq!(take(&mut con, "2 0.001 TOKENS 2")[0], 0);
    assert_eq!(take(&mut con, "2 0.001 TOKENS 0")[..2], [1, 1]);
    replica.wait_replica_synced(&primary);

    let mut replica_con = replica.conn();
    let read = |con: &mut Connection| -> (String, i64) {
        let value: String = redis::cmd("GET").arg("r").query(con).unwrap();
        let expiry: i64 = redis::cmd("PEXPIRETIME").arg("r").query(con).unwrap();
        (value, expiry)
    };
    assert_eq!(read(&mut replica_con), read(&mut con));
}

macro_rules! per_server {
    ($($case:ident: [$($flavor:ident),*]),* $(,)?) => {
        $( mod $case { $( #[test] #[allow(non_snake_case)] fn $flavor() {
            super::$case(::throttle_testkit::Flavor::$flavor)
        } )* } )*
    };
}

// Redis 7.0's module clock is the ms clock, read per call, while TIME is in µs: only the
// clock-free checks apply there.
per_server! {
    same_replies_state_and_expiry: [Redis82, Valkey81, Valkey91],
    same_errors: [Redis70, Redis82, Valkey81, Valkey91],
    replicates_effects_not_the_script: [Redis70, Redis82],
}
