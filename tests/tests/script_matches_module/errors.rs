//! Every bad call gets the module's error message from the library and the script too, and
//! writes nothing; and the script's own rules (which command, how many keys).

use throttle_testkit::{Flavor, Server};

use super::script::{command, load, outcome, server_now_ns, Runner, AHEAD, LUA, S};

/// Bad calls of the one-key commands: the command, then the words after the key, one space
/// between words (a call with a word that is empty, holds a space or is not ASCII is in
/// `ONE_KEY_BAD_BYTES`).
const ONE_KEY_BAD: &[(&str, &str)] = &[
    // THROTTLE.TAKE
    ("take", ""),
    ("take", "8"),
    ("take", "0 9"),
    ("take", "-1 9"),
    ("take", "1.5 9"),
    ("take", "1000000000000001 9"),
    ("take", "9999999999999999 9"),
    ("take", "18446744073709551616 9"),
    ("take", "abc 9"),
    ("take", "8 0"),
    ("take", "8 0.0"),
    ("take", "8 -9"),
    ("take", "8 +9"),
    ("take", "8 nan"),
    ("take", "8 inf"),
    ("take", "8 1e400"),
    ("take", "8 1e3"),
    ("take", "8 ."),
    ("take", "8 1.2.3"),
    ("take", "8 1,5"),
    ("take", "8 0.0000009"),
    ("take", "8 0.0000000000000000001"),
    ("take", "8 0.000000999999999999999999999999999999"),
    ("take", "8 0.000000000000000000000000001"),
    ("take", "8 1000000000.1"),
    ("take", "8 1000000000.000000000000000000000000001"),
    ("take", "8 1000000001"),
    ("take", "8 99999999999"),
    ("take", "8 0x10"),
    ("take", "1000000000000000 0.000001"),
    ("take", "315360001 1"),
    ("take", "315360000 0.99999999999999999"),
    ("take", "315360000 0.999999999999999999999999999999"),
    ("take", "8 9 TOKENS 9"),
    ("take", "0008 9 TOKENS 9"),
    ("take", "8 9 TOKENS -1"),
    ("take", "8 9 TOKENS x"),
    (
        "take",
        "1000000000000000 1000000000 TOKENS 1000000000000001",
    ),
    ("take", "8 9 MAXWAIT 315360000001"),
    ("take", "8 9 MAXWAIT -5"),
    ("take", "8 9 MAXWAIT 1.5"),
    ("take", "8 9 WAIT 1"),
    ("take", "8 9 TOKENS"),
    ("take", "8 9 MAXWAIT 1 MAXWAIT"),
    ("take", "8 9 TOKENS 1 tokens 2"),
    ("take", "8 9 MAXWAIT 1 TOKENS 9 TOKENS"),
    ("take", "8 9 TOKENS x FOO"),
    ("take", "8 9 TICKET ticket"),
    ("take", "8 9 TICKET TOKENS"),
    ("take", "8 9 TICKET 1"),
    ("take", "8 9 TICKETS"),
    ("take", "8 9 TOKENS 9 TICKET TICKET"),
    // THROTTLE.PEEK
    ("peek", ""),
    ("peek", "8"),
    ("peek", "8 9 TOKENS 0"),
    ("peek", "8 9 1"),
    ("peek", "0 9"),
    ("peek", "8 x"),
    ("peek", "8 0.0000009"),
    ("peek", "1000000000000000 0.000001"),
    // THROTTLE.PAUSE
    ("pause", "8 9"),
    ("pause", "8 9 1 2"),
    ("pause", "0 9 1"),
    ("pause", "x 9 0"),
    ("pause", "8 x 1"),
    ("pause", "8 x 0"),
    ("pause", "315360001 1 1"),
    ("pause", "8 9 0"),
    ("pause", "8 9 000"),
    ("pause", "8 9 315360000001"),
    ("pause", "8 9 1.5"),
    ("pause", "8 9 -1"),
    ("pause", "8 9 x"),
    ("pause", "8 9 99999999999999999999"),
    // THROTTLE.GIVE
    ("give", "8 9 3"),
    ("give", "8 9 1 2 3"),
    ("give", "0 9 1 1"),
    ("give", "8 0 1 1"),
    ("give", "8 9 9 1"),
    ("give", "8 9 x 1"),
    ("give", "8 9 -1 1"),
    ("give", "8 9 9 x"),
    ("give", "8 9 1 -1"),
    ("give", "8 9 1 9223372036854776"),
    ("give", "8 9 1 00009223372036854776"),
    ("give", "8 9 1 9300000000000000"),
    ("give", "8 9 1 99999999999999999999"),
    ("give", "8 9 1 1.5"),
    ("give", "8 9 1 1e6"),
    ("give", "1000000000000000 1000000000 1000000000000001 1"),
];

/// Bad calls of the options and commands of the supplier's pushback, priority and settling,
/// written as in `ONE_KEY_BAD`.
const PUSHBACK_BAD: &[(&str, &str)] = &[
    // TAKE ... FLOOR
    ("take", "8 9 FLOOR"),
    ("take", "8 9 FLOOR 8"),
    ("take", "8 9 TOKENS 3 FLOOR 6"),
    ("take", "8 9 FLOOR -1"),
    ("take", "8 9 FLOOR x"),
    ("take", "8 9 FLOOR 1 floor 1"),
    ("take", "8 9 FLOOR 9 TOKENS 9"),
    ("take", "8 9 FLOOR 1 FOO"),
    // CUT
    ("cut", "8 9 1000 0.7"),
    ("cut", "8 9 1000 0.7 1 1"),
    ("cut", "0 9 1000 0.7 1"),
    ("cut", "8 9 0 0.7 1"),
    ("cut", "8 9 1000 0 1"),
    ("cut", "8 9 1000 0.0099 1"),
    ("cut", "8 9 1000 1.0001 1"),
    ("cut", "8 9 1000 2 1"),
    ("cut", "8 9 1000 . 1"),
    ("cut", "8 9 1000 -0.5 1"),
    ("cut", "8 9 1000 0.5e1 1"),
    ("cut", "8 9 1000 0.7 0"),
    ("cut", "8 9 1000 0.7 315360000001"),
    ("cut", "8 9 1000 0.7 x"),
    // SYNC
    ("sync", "8 9 3"),
    ("sync", "8 9 3 1 1"),
    ("sync", "8 x 3 1"),
    ("sync", "8 9 -1 0"),
    ("sync", "8 9 1000000000000001 0"),
    ("sync", "8 9 3 315360000001"),
    ("sync", "8 9 3 1.5"),
    // DEBIT
    ("debit", "8 9"),
    ("debit", "8 9 1 2"),
    ("debit", "8 9 -1"),
    ("debit", "8 9 1000000000000001"),
    ("debit", "8 9 x"),
    // Past 20 years of debt: 315360000 tokens of 1 s is 10 years, twice and one more is too
    // deep.
    ("debit", "315360000 1 1000000000000000"),
    // TAKE ... INFLIGHT n LEASE ms
    ("take", "8 9 INFLIGHT 0 LEASE 1"),
    ("take", "8 9 INFLIGHT 1025 LEASE 1"),
    ("take", "8 9 INFLIGHT x LEASE 1"),
    ("take", "8 9 INFLIGHT 1 LEASE 0"),
    ("take", "8 9 INFLIGHT 1 LEASE 315360000001"),
    ("take", "8 9 INFLIGHT 1 LEASE 1.5"),
    ("take", "8 9 INFLIGHT 1"),
    ("take", "8 9 LEASE 1"),
    ("take", "8 9 INFLIGHT"),
    ("take", "8 9 inflight 1 lease 1 INFLIGHT 2"),
    ("take", "8 9 INFLIGHT 1 LEASE 1 LEASE 2"),
    // Values in order: TOKENS before INFLIGHT, INFLIGHT before LEASE; pairing before values.
    ("take", "8 9 INFLIGHT 0 LEASE 0 TOKENS 9"),
    ("take", "8 9 INFLIGHT 0 LEASE 0"),
    ("take", "8 9 INFLIGHT 0 TOKENS 9"),
    ("take", "8 9 INFLIGHT 1 LEASE 1 FOO"),
    // TAKE ... LINE place_ms [WAITER id]: with INFLIGHT, without FLOOR, WAITER with LINE; the
    // pairings after the structure, before the values; place_ms after the other values, then
    // the waiter's id.
    ("take", "8 9 LINE 100"),
    ("take", "8 9 LEASE 9 LINE 100"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 WAITER 3"),
    ("take", "8 9 LINE 0 WAITER x"),
    ("take", "8 9 FLOOR 1 INFLIGHT 1 LEASE 9 LINE 100"),
    ("take", "8 9 FLOOR 9 INFLIGHT 1 LEASE 9 LINE 0"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 LINE 0"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 LINE x"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 LINE 1.5"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 LINE 315360000001"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 LINE"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 line 5 LINE 5"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 LINE 5 WAITER"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 LINE 5 WAITER x"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 LINE 5 WAITER -1"),
    (
        "take",
        "8 9 INFLIGHT 1 LEASE 9 LINE 5 WAITER 9007199254740993",
    ),
    ("take", "8 9 INFLIGHT 1 LEASE 9 LINE 5 waiter 1 WAITER 1"),
    ("take", "8 9 INFLIGHT 0 LEASE 9 LINE 0 WAITER x"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 LINE 0 WAITER x"),
    ("take", "8 9 TOKENS 9 INFLIGHT 1 LEASE 9 LINE 0"),
    ("take", "8 9 INFLIGHT 1 LEASE 9 LINE 5 QUEUE 1"),
    // RENEW, RELEASE, SLOTS
    ("renew", "8 9 1"),
    ("renew", "8 9 1 1 1"),
    ("renew", "0 9 1 1"),
    ("renew", "8 9 x 1"),
    ("renew", "8 9 -1 1"),
    ("renew", "8 9 9007199254740993 1"),
    ("renew", "8 9 00009007199254740993 1"),
    ("renew", "8 9 18446744073709551616 1"),
    ("renew", "8 9 1 0"),
    ("renew", "8 9 1 315360000001"),
    ("renew", "8 9 x 0"),
    ("release", "8 9"),
    ("release", "8 9 1 2"),
    ("release", "8 x 1"),
    ("release", "8 9 1.5"),
    ("release", "8 9 1 INFLIGHT"),
    ("release", "8 9 1 inflight 0"),
    ("release", "8 9 1 INFLIGHT 1025"),
    ("release", "8 9 1 INFLIGHT x"),
    ("release", "8 9 1 INFLIGHT 2 INFLIGHT 2"),
    ("release", "8 9 1 LEASE 2"),
    ("release", "8 9 x INFLIGHT 0"),
    ("release", "0 9 1 FOO"),
    ("slots", "8"),
    ("slots", "8 9 1"),
    ("slots", "0 9"),
    ("resume", "8"),
    ("resume", "8 9 1000"),
    ("resume", "0 9"),
    ("resume", "8 x"),
    ("resume", "315360001 1"),
    ("quota", "8"),
    ("quota", "8 9 CLEAR CLEAR"),
    ("quota", "8 9 KEEP"),
    ("quota", "0 9"),
    ("quota", "8 x CLEAR"),
    ("quota", "315360001 1"),
];

/// Bad calls of THROTTLE.MTAKE: the keys (numkeys is their count), then the words after them,
/// one space between words (the calls with words not ASCII are in `MTAKE_BAD_BYTES`).
const MTAKE_BAD: &[(&str, &str)] = &[
    // INFLIGHT n LEASE ms: together, each once with its value, structure before values, values
    // in order (MAXWAIT, FLOOR, INFLIGHT, LEASE).
    ("a", "8 9 1 INFLIGHT 1"),
    ("a", "8 9 1 LEASE 1"),
    ("a", "8 9 1 INFLIGHT"),
    ("a", "8 9 1 INFLIGHT 1 LEASE"),
    ("a", "8 9 1 INFLIGHT 0 LEASE 1"),
    ("a", "8 9 1 inflight 1025 lease 1"),
    ("a", "8 9 1 INFLIGHT 1 LEASE 0"),
    ("a", "8 9 1 LEASE 0 INFLIGHT 0"),
    ("a", "8 9 1 INFLIGHT 1 LEASE 315360000001"),
    ("a", "8 9 1 INFLIGHT 1 INFLIGHT 2 LEASE 1"),
    ("a", "8 9 1 INFLIGHT 1 LEASE 1 lease 2"),
    ("a", "8 9 1 INFLIGHT 0 LEASE 0 FOO"),
    ("a", "8 9 1 INFLIGHT 0 LEASE 1 MAXWAIT x"),
    ("a b", "8 9 1 8 9 1 INFLIGHT 0 LEASE 1 FLOOR 8 0"),
    ("", "8 9 1"),
    ("", "8 9 1 x"),
    ("", "8 9 1 MAXWAIT 1"),
    (
        "k0 k1 k2 k3 k4 k5 k6 k7 k8 k9 k10 k11 k12 k13 k14 k15 k16",
        "8 9 1",
    ),
    ("a", ""),
    ("a", "8 9"),
    ("a b", "8 9"),
    ("a b", "8 9 1"),
    ("a b", "8 9 1 8 9"),
    ("a a", "8 9"),
    ("a a", "8 9 1 8 9 1"),
    ("a b a", "8 9 1 8 9 1 0 9 1"),
    ("a b", "8 9 1 0 9 1"),
    ("a b", "8 9 9 8 9 1"),
    ("a b", "8 9 1 8 x 1"),
    ("a b", "8 9 1 8 9 -1"),
    ("a", "315360001 1 1"),
    ("a", "8 9 1 TOKENS 1"),
    // TICKET: once, no value, among the other options.
    ("a", "8 9 1 TICKET TICKET"),
    ("a", "8 9 1 ticket MAXWAIT 5 Ticket"),
    ("a", "8 9 1 TICKET 1"),
    ("a", "8 9 1 TICKETS"),
    ("a", "8 9 1 TICKET MAXWAIT"),
    ("a", "8 9 1 TICKET MAXWAIT -1"),
    ("a", "8 9 1 MAXWAIT x TICKET TICKET"),
    ("a b", "8 9 1 TICKET"),
    ("a b", "8 9 9 8 9 1 TICKET"),
    ("a b", "8 9 1 8 9 1 TICKET FLOOR 1"),
    ("a", "8 9 1 FLOOR 8 TICKET MAXWAIT 5"),
    ("a", "8 9 1 FLOOR TICKET"),
    ("a", "8 9 1 MAXWAIT"),
    ("a", "8 9 1 MAXWAIT 1 MAXWAIT"),
    ("a", "8 9 1 MAXWAIT 1 maxwait 2"),
    ("a", "8 9 1 MAXWAIT -1"),
    ("a", "8 9 1 MAXWAIT 315360000001"),
    ("a", "8 9 1 MAXWAIT x FOO"),
    ("a b", "8 9 1 8 9 1 x"),
    // FLOOR: one per key, each below its capacity with room for the tokens.
    ("a b", "8 9 1 8 9 1 FLOOR 2"),
    ("a b", "8 9 1 8 9 1 FLOOR"),
    ("a", "8 9 1 FLOOR 2 FLOOR 2"),
    ("a", "8 9 1 FLOOR 8"),
    ("a b", "8 9 1 4 9 1 FLOOR 2 4"),
    ("a", "8 9 1 FLOOR x"),
    // LINE place_ms [WAITER id]: with INFLIGHT, without FLOOR, WAITER with LINE; the
    // structure before the values, the values after INFLIGHT's and LEASE's.
    ("a", "8 9 1 LINE 100"),
    ("a", "8 9 1 INFLIGHT 1 LEASE 9 WAITER 3"),
    ("a", "8 9 1 FLOOR 1 INFLIGHT 1 LEASE 9 LINE 1"),
    ("a", "8 9 1 INFLIGHT 1 LEASE 9 LINE 0"),
    ("a", "8 9 1 INFLIGHT 0 LEASE 9 LINE x"),
    ("a", "8 9 1 INFLIGHT 1 LEASE 9 LINE 5 LINE 5"),
    ("a", "8 9 1 INFLIGHT 1 LEASE 9 LINE"),
    ("a", "8 9 1 INFLIGHT 1 LEASE 9 LINE 5 WAITER x"),
    ("a b", "8 9 1 8 9 1 INFLIGHT 1 LEASE 9 LINE 5 WAITER -1"),
];

/// Bad calls of the one-key commands (as `ONE_KEY_BAD` and `PUSHBACK_BAD`) with a word
/// those tables cannot write: empty, holding a space, or not ASCII.
const ONE_KEY_BAD_BYTES: &[(&str, &[&[u8]])] = &[
    // THROTTLE.TAKE
    ("take", &[b"", b"9"]),
    ("take", &[b"8", b""]),
    ("take", &[b"8", b" 1"]),
    ("take", &[b"8", b"1 "]),
    ("take", &[b"8", b"9", b"TOKENS", b""]),
    ("take", &[b"\xff", b"9"]),
    ("take", &[b"8", b"\xff\xfe"]),
    ("take", &[b"8", b"9", b"TOK\xffENS", b"1"]),
    // THROTTLE.PEEK
    ("peek", &[b"\xff", b"9"]),
    // THROTTLE.PAUSE
    ("pause", &[b"8", b"9", b""]),
    // THROTTLE.GIVE
    ("give", &[b"8", b"9", b"1", b""]),
    // RENEW, RELEASE, SLOTS
    ("release", &[b"8", b"9", b""]),
];

/// Bad calls of THROTTLE.MTAKE (as `MTAKE_BAD`) with a word that is not ASCII.
const MTAKE_BAD_BYTES: &[(&[&str], &[&[u8]])] = &[
    // TICKET: once, no value, among the other options.
    (&["a"], &[b"8", b"9", b"1", b"TICK\xffET"]),
    (&["a", "b"], &[b"8", b"9", b"1", b"\xff", b"9", b"1"]),
];

/// A table row's words, split at the spaces.
fn words(row: &str) -> Vec<&[u8]> {
    row.split_whitespace().map(str::as_bytes).collect()
}

/// Every bad call gets the module's error message from the script too, and writes nothing.
pub fn same_errors(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let sha = load(&mut con);
    let mut run = |runner: Runner, name: &str, keys: &[String], args: &[&[u8]]| {
        outcome(command(runner, &sha, name, keys, args).query(&mut con))
    };

    // The tables written as text, split into their words, then those written as bytes.
    let one_key = ONE_KEY_BAD
        .iter()
        .chain(PUSHBACK_BAD)
        .map(|&(name, args)| (name, words(args)))
        .chain(
            ONE_KEY_BAD_BYTES
                .iter()
                .map(|&(name, args)| (name, args.to_vec())),
        );
    let mtake = MTAKE_BAD
        .iter()
        .map(|&(keys, args)| (keys.split_whitespace().collect(), words(args)))
        .chain(
            MTAKE_BAD_BYTES
                .iter()
                .map(|&(keys, args)| (keys.to_vec(), args.to_vec())),
        );
    let mut checked = 0;
    for (i, (name, args)) in one_key.enumerate() {
        let keys = [format!("bad:{i}")];
        let module = run(Runner::Module, name, &keys, &args);
        assert!(
            module.starts_with("error"),
            "{flavor} {name} {args:?}: {module}"
        );
        for lua in LUA {
            let other = run(lua, name, &keys, &args);
            assert_eq!(
                other, module,
                "{flavor} {name} {args:?}: {lua:?} (left) vs module (right)"
            );
        }
        checked += 1;
    }
    for (i, (keys, args)) in mtake.enumerate() {
        let keys: Vec<String> = keys.iter().map(|k| format!("bad:m{i}:{k}")).collect();
        let module = run(Runner::Module, "mtake", &keys, &args);
        assert!(
            module.starts_with("error"),
            "{flavor} mtake {keys:?} {args:?}: {module}"
        );
        for lua in LUA {
            let other = run(lua, "mtake", &keys, &args);
            assert_eq!(
                other, module,
                "{flavor} mtake {keys:?} {args:?}: {lua:?} (left) vs module (right)"
            );
        }
        checked += 1;
    }
    assert_eq!(
        checked,
        ONE_KEY_BAD.len()
            + PUSHBACK_BAD.len()
            + ONE_KEY_BAD_BYTES.len()
            + MTAKE_BAD.len()
            + MTAKE_BAD_BYTES.len()
    );

    // Keys that hold something else: another type, or a string that is not a bucket. For
    // THROTTLE.MTAKE the bad key comes second, after a good one that must stay untouched.
    let _: () = redis::cmd("RPUSH")
        .arg("list")
        .arg("x")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("hash")
        .arg("f")
        .arg("1")
        .query(&mut con)
        .unwrap();
    let mut holders = vec!["list".to_owned(), "hash".to_owned()];
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
        "1\u{0}",
        // Strings of a bucket's shape holding an instant no command writes: before 2020 (as
        // digits and as 8 bytes), or further after the clock than any command writes.
        "0",
        "1",
        "999999999",
        "0000000000000000001",
        "9007199254740993000",
        "9223372036854775807",
        "abcdefgh",
        "12345678",
        "90\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}",
        // 8 bytes whose top bit is set (a negative i64): the take's fast path hands it over.
        "aaaaaa\u{ff}",
        &(server_now_ns(&mut con) + AHEAD + 60 * S).to_string(),
        // 32 bytes that are no paused or cut bucket: text, and a valid instant with a cut
        // whose factor is below the floor.
        "abcdefghabcdefghabcdefghabcdefgh",
        &cut_below_the_floor(server_now_ns(&mut con)),
        // Of a slot table's length (40 + 16 k): text, ids not increasing, an id at the next
        // id, a lease in 1970.
        &"a".repeat(56),
        &"a".repeat(40 + 16 * 3),
        &bad_slot_table(server_now_ns(&mut con), [5, 5], 100, false),
        &bad_slot_table(server_now_ns(&mut con), [5, 100], 100, false),
        &bad_slot_table(server_now_ns(&mut con), [5, 6], 100, true),
        // Of a line's length (48 + 16 k + 32 w): text, and lines no command writes.
        &"a".repeat(48 + 16 + 32),
        &bad_line(server_now_ns(&mut con), |b| b[40] = 2),
        &bad_line(server_now_ns(&mut con), |b| b[44] = 0),
        &bad_line(server_now_ns(&mut con), |b| b[64 + 16..64 + 24].fill(0)),
        &bad_line(server_now_ns(&mut con), |b| b[64 + 24..64 + 32].fill(0x7f)),
        &bad_line(server_now_ns(&mut con), |b| {
            b[64..72].copy_from_slice(&5u64.to_le_bytes())
        }),
        &bad_line(server_now_ns(&mut con), |b| {
            b[64..72].copy_from_slice(&100u64.to_le_bytes())
        }),
        &bad_line(server_now_ns(&mut con), |b| {
            b[64 + 8..64 + 16].copy_from_slice(&12345u64.to_le_bytes())
        }),
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
        holders.push(key);
    }
    let calls: &[(&str, &str)] = &[
        ("take", "8 9"),
        ("take", "8 9 TOKENS 0"),
        ("take", "8 9 MAXWAIT 1000 TICKET"),
        ("take", "8 9 FLOOR 2"),
        ("peek", "8 9"),
        ("pause", "8 9 1000"),
        ("give", "8 9 1 1"),
        ("cut", "8 9 1000 0.7 30000"),
        ("sync", "8 9 0 1000"),
        ("debit", "8 9 3"),
        ("take", "8 9 INFLIGHT 1 LEASE 1000"),
        ("renew", "8 9 1 1000"),
        ("release", "8 9 1"),
        ("slots", "8 9"),
        ("resume", "8 9"),
        ("quota", "8 9"),
        ("quota", "8 9 CLEAR"),
        ("mtake", "8 9 1 8 9 1"),
        ("mtake", "8 9 0 8 9 0"),
        ("mtake", "8 9 1 8 9 1 TICKET"),
        // Bad arguments on such a key: the quota, then the command's own, are told before the
        // key is read.
        ("take", "0 9"),
        ("take", "8 9 TOKENS x"),
        ("peek", "8 x"),
        ("pause", "8 9 0"),
        ("give", "8 9 x 1"),
        ("cut", "8 9 1000 2 30000"),
        ("sync", "8 9 x 1000"),
        ("debit", "8 9 x"),
        ("renew", "8 9 1 0"),
        ("release", "8 9 1 INFLIGHT 0"),
        ("slots", "0 9"),
        ("resume", "8 x"),
        ("quota", "8 9 KEEP"),
        ("mtake", "8 9 1 8 9 x"),
    ];
    for holder in &holders {
        for (name, args) in calls {
            let keys = if *name == "mtake" {
                vec!["untouched".to_owned(), holder.clone()]
            } else {
                vec![holder.clone()]
            };
            let words: Vec<&str> = args.split_whitespace().collect();
            let module =
                outcome(command(Runner::Module, &sha, name, &keys, &words).query(&mut con));
            assert!(
                module.starts_with("error"),
                "{flavor} {name} {holder}: {module}"
            );
            for lua in LUA {
                let other = outcome(command(lua, &sha, name, &keys, &words).query(&mut con));
                assert_eq!(
                    other, module,
                    "{flavor} {name} {keys:?} {args}: {lua:?} (left) vs module (right)"
                );
            }
        }
    }

    // No bad call wrote anything: the only keys are the ones set above.
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    keys.sort();
    let mut expected = holders.clone();
    expected.sort();
    assert_eq!(keys, expected, "{flavor}: a bad call wrote a key");

    // The line holds 1024 waiters: the next join is refused with the same error from every
    // runner, and writes nothing.
    let join = "100000 100000 INFLIGHT 1 LEASE 60000 LINE 60000";
    let words: Vec<&str> = join.split_whitespace().collect();
    let mut refused = None;
    for runner in [Runner::Module, Runner::Library, Runner::Script] {
        let key = vec![format!("full:{runner:?}")];
        let mut pipe = redis::pipe();
        for _ in 0..throttle_bucket::MAX_LINE {
            pipe.add_command(command(runner, &sha, "take", &key, &words));
            pipe.ignore();
        }
        pipe.add_command(command(runner, &sha, "take", &key, &words));
        let (last,): (Vec<i64>,) = pipe
            .query(&mut con)
            .unwrap_or_else(|e| panic!("{flavor} {runner:?}: {e}"));
        assert_eq!(last[5..], [1024, 4 | 16], "{flavor} {runner:?}: {last:?}");
        let before: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
        let reply = outcome(command(runner, &sha, "take", &key, &words).query(&mut con));
        let after: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
        assert_eq!(after, before, "{flavor} {runner:?}: a refused join wrote");
        assert_eq!(
            before.len(),
            throttle_bucket::LINE_STATE_HEAD
                + throttle_bucket::SLOT_LEN
                + throttle_bucket::WAITER_LEN * 1024
        );
        let module = refused.get_or_insert_with(|| reply.clone());
        assert!(module.starts_with("error"), "{flavor}: {module}");
        assert_eq!(
            &reply, module,
            "{flavor} {runner:?} (left) vs module (right)"
        );
        // A multi-take joins the same line, and is refused the same way.
        let keys = vec![key[0].clone(), format!("full:{runner:?}:second")];
        let several: Vec<&str> = "100000 100000 1 10 10 1 INFLIGHT 1 LEASE 60000 LINE 60000"
            .split_whitespace()
            .collect();
        let reply = outcome(command(runner, &sha, "mtake", &keys, &several).query(&mut con));
        assert_eq!(&reply, module, "{flavor} {runner:?}: MTAKE");
        let after: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
        assert_eq!(
            after, before,
            "{flavor} {runner:?}: a refused MTAKE join wrote"
        );
        let _: () = redis::cmd("DEL").arg(&key).query(&mut con).unwrap();
    }

    // The script's own rules: which command (case-insensitive), and one key for the one-key
    // commands.
    let unknown = "error Some(\"ERR\") Some(\"unknown THROTTLE script command: the first argument \
                   must be take, mtake, pause, give, peek, cut, sync, debit, renew, release, \
                   slots, resume or quota\")";
    for argv in [
        &[][..],
        &["tak"][..],
        &["throttle.take", "8", "9"][..],
        &["takes", "8", "9"][..],
    ] {
        let reply = outcome(
            redis::cmd("EVALSHA")
                .arg(&sha)
                .arg(1)
                .arg("k")
                .arg(argv)
                .query(&mut con),
        );
        assert_eq!(reply, unknown, "{flavor} {argv:?}");
    }
    for (numkeys, name, args) in [
        (0, "take", "8 9"),
        (2, "TAKE", "8 9"),
        (0, "peek", "8 9"),
        (2, "Pause", "8 9 1"),
        (3, "give", "8 9 1 1"),
    ] {
        let keys: Vec<String> = (0..numkeys).map(|k| format!("k{k}")).collect();
        let reply = outcome(
            redis::cmd("EVALSHA")
                .arg(&sha)
                .arg(numkeys)
                .arg(&keys)
                .arg(name)
                .arg(args.split_whitespace().collect::<Vec<_>>())
                .query(&mut con),
        );
        let lower = name.to_lowercase();
        assert!(
            reply.starts_with(&format!(
                "error Some(\"ERR\") Some(\"the THROTTLE script's {lower} takes exactly one key: \
                 EVALSHA sha 1 key {lower} capacity rate"
            )),
            "{flavor} {numkeys} {name}: {reply}"
        );
    }
    // The command word is case-insensitive.
    let _: () = redis::cmd("DEL").arg("k").query(&mut con).unwrap();
    for (name, left) in [("TAKE", 2), ("Take", 1), ("tAkE", 0)] {
        let reply: Vec<i64> = redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(1)
            .arg("k")
            .arg(name)
            .arg(&["3", "0.001"][..])
            .query(&mut con)
            .unwrap_or_else(|e| panic!("{flavor} {name}: {e}"));
        assert_eq!(reply[..2], [1, left], "{flavor} {name}");
    }
}

/// The 8 little-endian bytes of the instant `at` (ns), each with its top bit cleared: a forged
/// state is then ASCII, which the test's SET can send as text (the instant it holds may be
/// earlier than `at`).
fn ascii_instant(at: i128) -> [u8; 8] {
    let mut bytes = (at as i64).to_le_bytes();
    for b in &mut bytes {
        *b &= 0x7f;
    }
    bytes
}

/// A 32-byte state (the format of a paused or cut bucket) holding a valid instant and pause
/// but a cut to 0.5 % of the rate, below the 1 % any cut leaves: a string no command writes,
/// as text the test's SET can send (every byte below 0x80, so it is valid UTF-8).
fn cut_below_the_floor(now_ns: i128) -> String {
    let now = ascii_instant(now_ns + 60 * S);
    let packed = ((50u64 << 48) | 100).to_le_bytes(); // 50 bp, 100 ms
    let bytes = [now, now, now, packed].concat();
    String::from_utf8(bytes).expect("ASCII")
}

/// A state with a line (48 + 16 k + 32 w bytes: one slot, id 5, and one waiter, ticket 6,
/// under cap 1, next id 100, both ending a minute from now; its lease 100 ms, 1 token) that
/// `forge` makes one no command writes, as text the test's SET can send (every byte below
/// 0x80).
fn bad_line(now_ns: i128, forge: impl Fn(&mut Vec<u8>)) -> String {
    let later = ascii_instant(now_ns + 60 * S);
    let mut bytes = [
        &later[..],
        &[0; 24],
        &100u64.to_le_bytes(),
        &[1, 0, 1, 0, 1, 0, 0, 0],
        &5u64.to_le_bytes(),
        &later,
        &6u64.to_le_bytes(),
        &later,
        &100u64.to_le_bytes(),
        &1u64.to_le_bytes(),
    ]
    .concat();
    forge(&mut bytes);
    String::from_utf8(bytes).expect("ASCII")
}

/// A slot table (the state of a bucket with calls in flight, 40 + 16 bytes a slot) no command
/// writes: slots with the ids `ids` under the next id `next`, the lease of the first in 1970 if
/// `old_lease`, as text the test's SET can send (every byte below 0x80).
fn bad_slot_table(now_ns: i128, ids: [u64; 2], next: u64, old_lease: bool) -> String {
    let later = ascii_instant(now_ns + 60 * S);
    let first_end = if old_lease {
        12345u64.to_le_bytes()
    } else {
        later
    };
    let bytes = [
        &later[..],
        &[0; 24],
        &next.to_le_bytes(),
        &ids[0].to_le_bytes(),
        &first_end,
        &ids[1].to_le_bytes(),
        &later,
    ]
    .concat();
    String::from_utf8(bytes).expect("ASCII")
}
