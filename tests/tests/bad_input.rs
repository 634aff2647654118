//! The bad-input battery on every server: every malformed call gets an ERR or WRONGTYPE reply
//! that names the problem, and leaves the server answering and every key as it was.

use throttle_e2e::{
    assert_no_crash, ceil_ms, digest, error_text, exists, line, per_server, pexpiretime,
    process_id, query, send, state, take, Connection, Flavor, Server,
};

per_server!(bad_input_battery);

fn bad_input_battery(flavor: Flavor) {
    check_bad_input_battery(&Server::start(flavor));
}

/// The same over a unix socket instead of TCP.
#[test]
fn bad_input_battery_over_a_unix_socket() {
    check_bad_input_battery(&throttle_e2e::unix_socket_server(Flavor::Valkey91));
}

/// One malformed call: the arguments after THROTTLE.TAKE, the reply's prefix, and words the
/// error must contain (case-insensitive).
struct BadCall {
    args: Vec<Vec<u8>>,
    prefix: &'static str,
    words: &'static [&'static str],
}

fn bad(args: &[&[u8]], prefix: &'static str, words: &'static [&'static str]) -> BadCall {
    BadCall {
        args: args.iter().map(|a| a.to_vec()).collect(),
        prefix,
        words,
    }
}

/// Keys of another type, and strings that are not a bucket state, that the battery needs.
fn set_up_bad_keys(con: &mut Connection) {
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
fn bad_calls() -> Vec<BadCall> {
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
fn check_bad_input_battery(server: &Server) {
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
        let reply = send(&mut con, line("THROTTLE.TAKE").arg(&args[..]));
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

    // Strings of a bucket's shape holding an instant no command writes (the largest integer,
    // 0, 8 bytes of text) are refused and left as they were; the earliest instant a bucket can
    // hold is long past: a full bucket.
    for (key, value) in [
        ("s:max", i64::MAX.to_string().into_bytes()),
        ("s:zero", b"0".to_vec()),
        ("s:text", b"abcdefgh".to_vec()),
        ("s:1970", 12345i64.to_le_bytes().to_vec()),
    ] {
        let _: () = query(&mut con, redis::cmd("SET").arg(key).arg(&value));
        let reply = send(
            &mut con,
            &line(&format!("THROTTLE.TAKE {key} 8 9 MAXWAIT 1000")),
        );
        let err = reply.expect_err(key);
        assert!(
            err.starts_with("ERR ") && err.contains("not a THROTTLE bucket"),
            "{key}: {err}"
        );
        let stored: Vec<u8> = query(&mut con, redis::cmd("GET").arg(key));
        assert_eq!(stored, value, "{key} untouched");
    }
    let _: () = query(
        &mut con,
        redis::cmd("SET")
            .arg("s:2020")
            .arg(1_577_836_800_000_000_000i64),
    );
    assert_eq!(take(&mut con, "s:2020", "8 9"), [1, 7, 0, 112]);

    // After all that the module still works, and the server never restarted or crashed.
    assert_eq!(take(&mut con, "after-battery", "8 9"), [1, 7, 0, 112]);
    let canary: String = query(&mut con, redis::cmd("GET").arg("canary"));
    assert_eq!(canary, "42");
    assert_no_crash(server, &pid);
}
