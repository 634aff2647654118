//! Random-input soak: a bounded run of random THROTTLE.TAKE argument vectors from a seeded
//! PRNG, on every server. Binary bytes, huge and tiny numbers, decimals with many digits,
//! signs, exponents, nan/inf, options in the wrong order, repeated, unknown or without their
//! value, extra arguments, 0 to 12 arguments; and the keys it names are turned into lists,
//! hashes, sets, sorted sets, streams and junk strings now and then, and back.
//!
//! ```sh
//! cargo test -p throttle-e2e --test fuzz_soak -- --nocapture                # 20 000 calls (at most 10 s) per server
//! THROTTLE_LONG=1 cargo test -p throttle-e2e --test fuzz_soak -- --nocapture  # 100 000 calls (at most 5 min)
//! THROTTLE_FUZZ_SEED=1234 cargo test -p throttle-e2e --test fuzz_soak      # replay a seed
//! THROTTLE_FUZZ_COMMANDS=20000 ...                                          # another count
//! ```
//!
//! Every reply is checked, not just its shape. The expected outcome of each call comes from
//! what the fuzzer knows: the argument check of `throttle-bucket` (the module's own parser, so
//! this checks that the glue hands it the bytes unchanged and passes its message through),
//! and the type of value the fuzzer last put under the key. So:
//! - arguments the parser refuses get exactly its `ERR ...` message (or, on a key holding
//!   another type or a junk string, the key's error: the order of the two checks is not part
//!   of the contract);
//! - a key holding another type gets `WRONGTYPE ...`, a junk string `ERR ... not a THROTTLE
//!   bucket ...`;
//! - everything else gets four integers `[granted, remaining, wait, reset]` that obey the
//!   contract for those arguments: granted is 0 or 1, nothing negative, remaining at most the
//!   capacity (at most capacity - n after taking n), a grant waits no longer than `MAXWAIT`
//!   (so not at all without it), a denial waits longer than `MAXWAIT` and leaves fewer than n
//!   tokens, a wait leaves the bucket in debt, `TOKENS 0` is always granted at once, and the
//!   bucket is never full before the tokens are there (reset >= wait).
//!
//! Around that: PING every 100 calls; every 1 000 calls and at the end the server is the same
//! process (`INFO server` `process_id`), its log has no panic, "internal error" or crash
//! report, and the canary keys (a string, a hash, an integer string and a bucket, none ever
//! named by the fuzzer) have the same DUMP and expiry. A key of another type or a junk
//! string is checked unchanged (DUMP) before the fuzzer replaces it.

mod common;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{assert_no_crash, error_text, per_server, process_id, query, Connection, Rng, Value};
use throttle_bucket::{parse_state, ArgError, TakeArgs, MAX_CAPACITY, MAX_WAIT_MS};
use throttle_testkit::{Flavor, Server};

const SHORT_COMMANDS: u64 = 20_000;
const LONG_COMMANDS: u64 = 100_000;
const SHORT_TIME: Duration = Duration::from_secs(10);
const LONG_TIME: Duration = Duration::from_secs(300);
const PING_EVERY: u64 = 100;
const CHECK_EVERY: u64 = 1_000;
/// How often some of the named keys change type.
const CHURN_EVERY: u64 = 50;

/// The keys the fuzzer names and changes the type of. Random keys it makes up start with
/// `fz`, so they can never be one of these or a canary.
const POOL: &[&[u8]] = &[
    b"fuzz:a",
    b"fuzz:b",
    b"fuzz:c",
    b"fuzz:{slot}d",
    b"fuzz:\xff\x00\xfe",
    b"",
];

/// Keys the fuzzer never names. `canary:bucket` is a bucket in debt that nothing refills
/// while the test runs; `canary:number` an integer string (a valid-looking state).
const CANARIES: &[&str] = &[
    "canary:string",
    "canary:hash",
    "canary:number",
    "canary:bucket",
];

// --- Random arguments, from the seeded generator (common::Rng) ------------------------

/// What the fuzzer draws, on the tests' seeded generator.
trait Draw {
    fn range(&mut self, low: u64, high: u64) -> u64;
    fn one_in(&mut self, d: u64) -> bool;
    fn choose<'a, T: ?Sized>(&mut self, items: &[&'a T]) -> &'a T;
    fn bytes(&mut self, len: usize) -> Vec<u8>;
    fn some_digits(&mut self, low: u64, high: u64) -> String;
    fn digits(&mut self, len: usize) -> String;
}

impl Draw for Rng {
    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }

    /// True with probability 1 in `d`.
    fn one_in(&mut self, d: u64) -> bool {
        self.below(d) == 0
    }

    fn choose<'a, T: ?Sized>(&mut self, items: &[&'a T]) -> &'a T {
        items[self.below(items.len() as u64) as usize]
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }

    /// `low..=high` random digits.
    fn some_digits(&mut self, low: u64, high: u64) -> String {
        let len = self.range(low, high) as usize;
        self.digits(len)
    }

    fn digits(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(b'0' + self.below(10) as u8))
            .collect()
    }
}

/// The seed: `THROTTLE_FUZZ_SEED`, or one from the clock, the same for the four servers.
fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(pick_seed)
}

fn pick_seed() -> u64 {
    match std::env::var("THROTTLE_FUZZ_SEED") {
        Ok(text) if !text.trim().is_empty() => {
            let text = text.trim();
            let parsed = match text.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => text.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("THROTTLE_FUZZ_SEED={text} is not a u64"))
        }
        _ => {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("after 1970")
                .as_nanos() as u64;
            nanos ^ u64::from(std::process::id()).rotate_left(32)
        }
    }
}

fn long_mode() -> bool {
    std::env::var("THROTTLE_LONG").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn budget() -> (u64, Duration) {
    let (commands, time) = if long_mode() {
        (LONG_COMMANDS, LONG_TIME)
    } else {
        (SHORT_COMMANDS, SHORT_TIME)
    };
    let commands = match std::env::var("THROTTLE_FUZZ_COMMANDS") {
        Ok(text) if !text.is_empty() => text
            .parse()
            .unwrap_or_else(|_| panic!("THROTTLE_FUZZ_COMMANDS={text} is not a count")),
        _ => commands,
    };
    (commands, time)
}

// --- Random arguments --------------------------------------------------------------------

/// Something that looks more or less like a number.
fn junk_number(rng: &mut Rng) -> Vec<u8> {
    const FIXED: &[&str] = &[
        "0",
        "-0",
        "+0",
        "00",
        "0000000000000000000000000000001",
        "-1",
        "+1",
        "1000000000000000",
        "1000000000000001",
        "315360000000",
        "315360000001",
        "315360000",
        "315360001",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "340282366920938463463374607431768211456",
        "0.000001",
        "0.0000009",
        "0.0000010",
        "1000000000",
        "1000000000.0",
        "1000000000.000000000000000001",
        "35791394.1",
        "0.",
        ".5",
        ".",
        "-.5",
        "1..2",
        "1.2.3",
        "1,5",
        "1_000",
        "0x10",
        "0b101",
        "1e3",
        "1E3",
        "1e-3",
        "2.5e+2",
        "1e400",
        "1e-400",
        "nan",
        "NaN",
        "-nan",
        "inf",
        "-inf",
        "+inf",
        "Infinity",
        "infinity",
        " 8",
        "8 ",
        "\t8",
        "8\n",
        "8\r\n",
        "8\x009",
        "\u{663}",   // ARABIC-INDIC DIGIT THREE
        "\u{ff18}",  // FULLWIDTH DIGIT EIGHT
        "\u{2212}5", // MINUS SIGN
        "\u{be}",    // VULGAR FRACTION THREE QUARTERS
        "",
    ];
    match rng.below(8) {
        0 => rng.choose(FIXED).as_bytes().to_vec(),
        1 => {
            let len = rng.range(1, 45) as usize;
            rng.digits(len).into_bytes()
        }
        2 => {
            let (whole, fraction) = (rng.below(25) as usize, rng.range(0, 60) as usize);
            format!("{}.{}", rng.digits(whole), rng.digits(fraction)).into_bytes()
        }
        3 => {
            let sign = rng.choose(&["-", "+", "--", "+-"]);
            let rest = junk_number(rng);
            [sign.as_bytes(), &rest].concat()
        }
        4 => {
            let (mantissa, exponent) = (rng.some_digits(1, 5), rng.below(400));
            let sign = rng.choose(&["", "-", "+"]);
            let e = rng.choose(&["e", "E"]);
            format!("{mantissa}{e}{sign}{exponent}").into_bytes()
        }
        5 => {
            let len = rng.below(17) as usize;
            rng.bytes(len)
        }
        6 => {
            // A good number with one byte changed.
            let mut text = good_number(rng).into_bytes();
            if !text.is_empty() {
                let at = rng.below(text.len() as u64) as usize;
                text[at] = rng.next_u64() as u8;
            }
            text
        }
        _ => good_number(rng).into_bytes(),
    }
}

/// A number in some argument's range.
fn good_number(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => rng.below(21).to_string(),
        1 => rng.range(1, 1_000_000).to_string(),
        2 => MAX_CAPACITY.to_string(),
        3 => MAX_WAIT_MS.to_string(),
        4 => rng
            .choose(&["0.5", "0.001", "9", "200", "0.000001", "1000000000"])
            .to_owned(),
        _ => format!("{}.{}", rng.below(1000), rng.some_digits(1, 6)),
    }
}

fn capacity(rng: &mut Rng) -> Vec<u8> {
    let text = match rng.below(8) {
        0 => MAX_CAPACITY.to_string(),
        1 => "315360000".to_owned(),
        2 => rng.range(1, 1_000_000_000).to_string(),
        _ => rng.range(1, 30).to_string(),
    };
    text.into_bytes()
}

fn rate(rng: &mut Rng) -> Vec<u8> {
    let text = match rng.below(8) {
        0 => rng
            .choose(&[
                "0.000001",
                "1000000000",
                "35791394.1",
                "0.999999",
                "1000000",
            ])
            .to_owned(),
        1 => format!("0.{}", rng.some_digits(1, 6)),
        2 => format!("{}.{}", rng.range(1, 1000), rng.some_digits(1, 6)),
        _ => rng.range(1, 1000).to_string(),
    };
    text.into_bytes()
}

fn tokens(rng: &mut Rng, capacity: &[u8]) -> Vec<u8> {
    let cap: u64 = std::str::from_utf8(capacity)
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(8);
    let n = match rng.below(6) {
        0 => 0,
        1 => cap,
        2 => cap.saturating_sub(1),
        3 => cap.saturating_add(1),
        _ => rng.below(cap.min(5) + 1),
    };
    n.to_string().into_bytes()
}

fn max_wait(rng: &mut Rng) -> Vec<u8> {
    let ms = match rng.below(6) {
        0 => 0,
        1 => MAX_WAIT_MS,
        2 => MAX_WAIT_MS + 1,
        3 => rng.below(100),
        _ => rng.below(10_000_000),
    };
    ms.to_string().into_bytes()
}

fn option_name(rng: &mut Rng) -> Vec<u8> {
    const NAMES: &[&str] = &[
        "TOKENS",
        "tokens",
        "Tokens",
        "MAXWAIT",
        "maxwait",
        "MaxWait",
        "TOKEN",
        "TOKENSS",
        "MAXWAITS",
        "WAIT",
        "NX",
        "PX",
        "KEEPTTL",
        "",
        " TOKENS",
        "TOKENS ",
        "TOKENS\x00",
        "tokens\u{130}",
        "MAX WAIT",
        "-TOKENS",
    ];
    match rng.below(10) {
        0 => {
            let len = rng.range(1, 10) as usize;
            rng.bytes(len)
        }
        1 => [b"\xff".as_slice(), b"MAXWAIT"].concat(),
        _ => rng.choose(NAMES).as_bytes().to_vec(),
    }
}

/// Any argument at all.
fn atom(rng: &mut Rng) -> Vec<u8> {
    match rng.below(10) {
        0..=3 => junk_number(rng),
        4..=5 => option_name(rng),
        6 => {
            let len = rng.below(40) as usize;
            rng.bytes(len)
        }
        7 if rng.one_in(50) => {
            // Now and then a big one: 64 KiB to 512 KiB of digits or bytes.
            let len = rng.range(64 << 10, 512 << 10) as usize;
            if rng.one_in(2) {
                rng.digits(len).into_bytes()
            } else {
                rng.bytes(len)
            }
        }
        _ => good_number(rng).into_bytes(),
    }
}

/// A key the fuzzer names: from the pool (its index), or made up (always starts with `fz`).
fn key(rng: &mut Rng) -> (Vec<u8>, Option<usize>) {
    if rng.below(4) != 0 {
        let index = rng.below(POOL.len() as u64) as usize;
        return (POOL[index].to_vec(), Some(index));
    }
    let tail = match rng.below(4) {
        0 => rng.below(1000).to_string().into_bytes(),
        1 => {
            let len = rng.below(24) as usize;
            rng.bytes(len)
        }
        2 => {
            let len = rng.range(1, 4096) as usize;
            rng.bytes(len)
        }
        _ => Vec::new(),
    };
    ([b"fz".as_slice(), &tail].concat(), None)
}

/// One random call: the arguments after the command name, and the pool key it names.
fn argv(rng: &mut Rng) -> (Vec<Vec<u8>>, Option<usize>) {
    let (key, pool) = key(rng);
    let mut args = match rng.below(10) {
        // Anything, 0 to 12 arguments; the first is a key.
        0 | 1 => {
            let n = rng.below(13) as usize;
            let mut args: Vec<Vec<u8>> = (0..n).map(|_| atom(rng)).collect();
            if let Some(first) = args.first_mut() {
                *first = key.clone();
            }
            return (args, pool.filter(|_| n > 0));
        }
        // Numbers that may be anything, in the right places.
        2 | 3 => {
            let mut args = vec![key, junk_number(rng), junk_number(rng)];
            for _ in 0..rng.below(3) {
                args.push(option_name(rng));
                args.push(junk_number(rng));
            }
            args
        }
        // A well-formed call: most are valid.
        _ => {
            let cap = capacity(rng);
            let mut args = vec![key, cap.clone(), rate(rng)];
            let mut options = Vec::new();
            if rng.one_in(2) {
                options.push(vec![option_name_of(rng, "TOKENS"), tokens(rng, &cap)]);
            }
            if rng.one_in(2) {
                options.push(vec![option_name_of(rng, "MAXWAIT"), max_wait(rng)]);
            }
            if rng.one_in(2) {
                options.reverse();
            }
            args.extend(options.into_iter().flatten());
            args
        }
    };
    // Now and then, break it.
    if rng.one_in(4) {
        mutate(rng, &mut args);
    }
    args.truncate(12);
    (args, pool)
}

/// `name` as written, or in another case.
fn option_name_of(rng: &mut Rng, name: &str) -> Vec<u8> {
    match rng.below(3) {
        0 => name.to_ascii_lowercase().into_bytes(),
        1 => name
            .bytes()
            .enumerate()
            .map(|(i, b)| {
                if i % 2 == 0 {
                    b
                } else {
                    b.to_ascii_lowercase()
                }
            })
            .collect(),
        _ => name.as_bytes().to_vec(),
    }
}

/// Wrong orders, repeats, missing values, extra and unknown arguments.
fn mutate(rng: &mut Rng, args: &mut Vec<Vec<u8>>) {
    let n = args.len();
    match rng.below(8) {
        0 if n > 2 => {
            // Shuffle everything after the key.
            for i in (2..n).rev() {
                let j = 1 + rng.below(i as u64) as usize;
                args.swap(i, j);
            }
        }
        1 if n > 2 => {
            let (i, j) = (1 + rng.below(n as u64 - 1), 1 + rng.below(n as u64 - 1));
            args.swap(i as usize, j as usize);
        }
        2 if n > 1 => {
            args.remove(1 + rng.below(n as u64 - 1) as usize);
        }
        3 => {
            // Repeat an option, maybe in another case.
            let name = rng.choose(&["TOKENS", "MAXWAIT"]);
            args.push(option_name_of(rng, name));
            args.push(rng.below(5).to_string().into_bytes());
        }
        4 => {
            // An option without its value.
            let name = rng.choose(&["TOKENS", "MAXWAIT"]);
            args.push(option_name_of(rng, name));
        }
        5 => {
            for _ in 0..rng.range(1, 4) {
                args.push(atom(rng));
            }
        }
        6 => {
            let at = 1 + rng.below(n as u64) as usize;
            args.insert(at.min(n), atom(rng));
        }
        _ => {
            let keep = rng.below(n as u64 + 1) as usize;
            args.truncate(keep.max(1));
        }
    }
}

// --- What is under the pool's keys -------------------------------------------------------

/// What the fuzzer last put under a pool key.
#[derive(Clone, Debug)]
enum Kind {
    /// Missing, a bucket, or an integer string THROTTLE.TAKE reads as a state.
    Bucket,
    /// Another type: its DUMP right after the fuzzer made it.
    OtherType { what: &'static str, dump: Vec<u8> },
    /// A string that is not a state.
    Junk { dump: Vec<u8> },
}

#[track_caller]
fn dump(con: &mut Connection, key: &[u8]) -> Option<Vec<u8>> {
    query(con, redis::cmd("DUMP").arg(key))
}

/// Checks the key still holds what the fuzzer put there (THROTTLE.TAKE refused to touch it),
/// then puts something else there.
fn churn(con: &mut Connection, rng: &mut Rng, index: usize, kinds: &mut [Kind], context: &str) {
    let key = POOL[index];
    let held = match &kinds[index] {
        Kind::Bucket => None,
        Kind::OtherType { what, dump } => Some((*what, dump)),
        Kind::Junk { dump } => Some(("junk string", dump)),
    };
    if let Some((what, before)) = held {
        let now = dump(con, key);
        assert_eq!(
            now.as_deref(),
            Some(before.as_slice()),
            "{context}: the {what} under {} changed although every THROTTLE.TAKE on it was \
             refused",
            show(key)
        );
    }
    let _: i64 = query(con, redis::cmd("DEL").arg(key));
    let junk = |rng: &mut Rng| {
        let len = rng.below(20) as usize;
        rng.bytes(len)
    };
    // Half the time back to a bucket (a missing key is a full one), so that the named keys
    // also see reservations and denials.
    let made = match rng.below(14) {
        0 => {
            let _: i64 = query(con, redis::cmd("RPUSH").arg(key).arg(junk(rng)).arg("x"));
            Some("list")
        }
        1 => {
            let _: i64 = query(
                con,
                redis::cmd("HSET").arg(key).arg(junk(rng)).arg(junk(rng)),
            );
            Some("hash")
        }
        2 => {
            let _: i64 = query(con, redis::cmd("SADD").arg(key).arg(junk(rng)));
            Some("set")
        }
        3 => {
            let _: i64 = query(
                con,
                redis::cmd("ZADD")
                    .arg(key)
                    .arg(rng.below(100))
                    .arg(junk(rng)),
            );
            Some("zset")
        }
        4 => {
            let _: String = query(
                con,
                redis::cmd("XADD").arg(key).arg("*").arg("f").arg(junk(rng)),
            );
            Some("stream")
        }
        5 | 6 => {
            // A string: junk, something number-like, or a valid state (in the past, now,
            // in the future, the largest), perhaps with a TTL.
            let now_ns = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("after 1970")
                .as_nanos() as i64;
            let value: Vec<u8> = match rng.below(6) {
                0 => junk(rng),
                1 => junk_number(rng),
                2 => (now_ns + rng.below(3_600_000_000_000) as i64)
                    .to_string()
                    .into_bytes(),
                3 => rng
                    .choose(&["0", "1", "9223372036854775807", "007"])
                    .as_bytes()
                    .to_vec(),
                4 => rng.some_digits(1, 25).into_bytes(),
                _ => (now_ns - rng.below(3_600_000_000_000) as i64)
                    .to_string()
                    .into_bytes(),
            };
            let mut set = redis::cmd("SET");
            set.arg(key).arg(&value);
            let is_state = parse_state(&value, now_ns).is_ok();
            // A TTL only on a state: a junk string that expired would be a bucket.
            if is_state && rng.one_in(3) {
                set.arg("PX").arg(rng.range(1, 10_000));
            }
            let _: () = query(con, &set);
            if is_state {
                None
            } else {
                let dump = dump(con, key).expect("the string just set");
                kinds[index] = Kind::Junk { dump };
                return;
            }
        }
        // Back to a bucket (a missing key is a full one).
        _ => None,
    };
    kinds[index] = match made {
        Some(what) => Kind::OtherType {
            what,
            dump: dump(con, key).expect("the key just made"),
        },
        None => Kind::Bucket,
    };
}

// --- Checking a reply ----------------------------------------------------------------------

/// What happened, for the summary.
fn classify(args: &TakeArgs, reply: &[i64; 4]) -> &'static str {
    match (reply[0], args.tokens, reply[2]) {
        (1, 0, _) => "granted: TOKENS 0 (inspect)",
        (1, _, 0) => "granted at once",
        (1, _, _) => "granted: reservation with a wait",
        _ => "denied",
    }
}

/// Checks an integer reply against the contract for these arguments.
fn check_reply(args: &TakeArgs, reply: &[i64; 4]) -> Result<(), String> {
    let [granted, remaining, wait, reset] = *reply;
    let capacity = args.quota.capacity as i64;
    let tokens = args.tokens as i64;
    let max_wait = args.max_wait_ms as i64;
    let rules = [
        (granted == 0 || granted == 1, "granted is 0 or 1"),
        (
            remaining >= 0 && wait >= 0 && reset >= 0,
            "nothing negative",
        ),
        (remaining <= capacity, "remaining <= capacity"),
        (
            reset >= wait,
            "reset >= wait (full no earlier than the tokens are there)",
        ),
        (
            tokens != 0 || (granted == 1 && wait == 0),
            "TOKENS 0 is granted at once",
        ),
        (
            granted == 0 || wait <= max_wait,
            "a grant waits at most MAXWAIT (0 without it)",
        ),
        (
            granted == 0 || tokens == 0 || remaining <= capacity - tokens,
            "a grant of n leaves at most capacity - n",
        ),
        (
            granted == 0 || tokens == 0 || reset >= 1,
            "a bucket just taken from is not full",
        ),
        (
            granted == 0 || wait == 0 || remaining == 0,
            "a reservation that waits leaves the bucket in debt",
        ),
        (
            granted == 1 || wait > max_wait,
            "a denial means the wait is longer than MAXWAIT",
        ),
        (
            granted == 1 || remaining < tokens,
            "a denial means fewer than n tokens are there",
        ),
    ];
    match rules.iter().find(|(ok, _)| !ok) {
        Some((_, rule)) => Err(format!("breaks \"{rule}\"")),
        None => Ok(()),
    }
}

/// The reply as four integers, if it is exactly that.
fn four_integers(value: &Value) -> Option<[i64; 4]> {
    let Value::Array(items) = value else {
        return None;
    };
    let ints: Vec<i64> = items
        .iter()
        .map(|item| match item {
            Value::Int(n) => Some(*n),
            _ => None,
        })
        .collect::<Option<_>>()?;
    ints.try_into().ok()
}

/// Bytes for a message: printable ASCII as is, the rest escaped, long ones cut.
fn show(bytes: &[u8]) -> String {
    let escaped: String = bytes
        .iter()
        .take(60)
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    if bytes.len() > 60 {
        format!("\"{escaped}\"...({} bytes)", bytes.len())
    } else {
        format!("\"{escaped}\"")
    }
}

fn show_args(args: &[Vec<u8>]) -> String {
    args.iter().map(|a| show(a)).collect::<Vec<_>>().join(" ")
}

/// An error line for the summary: digits folded, cut after the problem's name.
fn error_class(text: &str) -> String {
    let folded: String = text
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect();
    let cut: String = folded
        .chars()
        .take_while(|c| !matches!(c, ':' | '(' | ','))
        .take(60)
        .collect();
    cut.trim_end().to_owned()
}

// --- The soak ------------------------------------------------------------------------------

struct Canary {
    key: &'static str,
    dump: Vec<u8>,
    expiry: i64,
}

fn make_canaries(con: &mut Connection) -> Vec<Canary> {
    let _: () = query(
        con,
        redis::cmd("SET")
            .arg("canary:string")
            .arg("do not touch")
            .arg("PX")
            .arg(3_600_000),
    );
    let _: i64 = query(
        con,
        redis::cmd("HSET")
            .arg("canary:hash")
            .arg("f")
            .arg("v")
            .arg("g")
            .arg("w"),
    );
    let _: () = query(con, redis::cmd("SET").arg("canary:number").arg(12345));
    // 10 tokens, one per 1000 s, 3 taken and 20 reserved: in debt for hours.
    let _: Value = query(
        con,
        &common::take_cmd("canary:bucket", "10 0.001 TOKENS 10"),
    );
    let _: Value = query(
        con,
        &common::take_cmd("canary:bucket", "10 0.001 TOKENS 3 MAXWAIT 100000000"),
    );
    snapshot(con)
}

fn snapshot(con: &mut Connection) -> Vec<Canary> {
    CANARIES
        .iter()
        .map(|&key| Canary {
            key,
            dump: dump(con, key.as_bytes()).unwrap_or_else(|| panic!("{key} is gone")),
            expiry: query(con, redis::cmd("PEXPIRETIME").arg(key)),
        })
        .collect()
}

#[track_caller]
fn check_canaries(con: &mut Connection, canaries: &[Canary], context: &str) {
    for (was, now) in canaries.iter().zip(snapshot(con)) {
        assert!(
            was.dump == now.dump && was.expiry == now.expiry,
            "{context}: the canary {} changed: DUMP {:?} -> {:?}, expiry {} -> {}",
            was.key,
            show(&was.dump),
            show(&now.dump),
            was.expiry,
            now.expiry
        );
    }
}

fn random_input_soak(flavor: Flavor) {
    let seed = seed();
    let (commands, time) = budget();
    eprintln!(
        "random-input soak on {flavor}: seed {seed} (replay: THROTTLE_FUZZ_SEED={seed}), \
         up to {commands} calls or {time:?}"
    );
    let server = Server::start(flavor);
    let mut con = server.conn();
    let pid = process_id(&mut con);
    let canaries = make_canaries(&mut con);
    let mut kinds = vec![Kind::Bucket; POOL.len()];
    let mut rng = Rng(seed);
    let mut mix: BTreeMap<String, u64> = BTreeMap::new();
    let started = Instant::now();
    let mut sent = 0;

    while sent < commands && started.elapsed() < time {
        sent += 1;
        let (args, pool) = argv(&mut rng);
        let context = format!(
            "{flavor}, seed {seed}, call {sent}: THROTTLE.TAKE {}",
            show_args(&args)
        );
        let mut cmd = redis::cmd("THROTTLE.TAKE");
        for arg in &args {
            cmd.arg(arg.as_slice());
        }
        let got = cmd.query::<Value>(&mut con);

        // What the fuzzer expects: the argument check first, then the key.
        let words: Vec<&[u8]> = args.iter().skip(1).map(Vec::as_slice).collect();
        let parsed = if args.is_empty() {
            Err(ArgError::Arity(throttle_bucket::Command::Take))
        } else {
            TakeArgs::parse(&words)
        };
        let kind = pool.map_or(Kind::Bucket, |i| kinds[i].clone());
        let key_error = match &kind {
            Kind::Bucket => None,
            Kind::OtherType { .. } => Some("WRONGTYPE "),
            Kind::Junk { .. } => Some("ERR the key holds a string that is not a THROTTLE bucket"),
        };

        match (parsed, got) {
            (Err(arg_error), Err(e)) => {
                let text = error_text(&e);
                let expected = arg_error.to_string();
                assert!(
                    text == expected || key_error.is_some_and(|k| text.starts_with(k)),
                    "{context}\n  expected the argument error {expected:?}\n  got {text:?}"
                );
                *mix.entry(error_class(&text)).or_default() += 1;
            }
            (Ok(_), Err(e)) if key_error.is_some() => {
                let text = error_text(&e);
                assert!(
                    text.starts_with(key_error.unwrap()),
                    "{context}\n  the key holds {kind:?}: expected {:?}\n  got {text:?}",
                    key_error.unwrap()
                );
                *mix.entry(error_class(&text)).or_default() += 1;
            }
            (Ok(take), Ok(value)) if key_error.is_none() => {
                let reply = four_integers(&value).unwrap_or_else(|| {
                    panic!("{context}\n  expected an array of 4 integers, got {value:?}")
                });
                if let Err(why) = check_reply(&take, &reply) {
                    panic!("{context}\n  reply {reply:?} {why} ({take:?})");
                }
                *mix.entry(classify(&take, &reply).to_owned()).or_default() += 1;
            }
            (parsed, got) => panic!(
                "{context}\n  the key holds {kind:?}; the arguments parse as {parsed:?}\n  got {}",
                match got {
                    Ok(value) => format!("{value:?}"),
                    Err(e) => error_text(&e),
                }
            ),
        }

        if sent % PING_EVERY == 0 {
            let pong: String = query(&mut con, &redis::cmd("PING"));
            assert_eq!(pong, "PONG", "{context}");
        }
        if sent % CHURN_EVERY == 0 {
            for _ in 0..rng.range(1, 2) {
                let index = rng.below(POOL.len() as u64) as usize;
                churn(&mut con, &mut rng, index, &mut kinds, &context);
            }
        }
        if sent % CHECK_EVERY == 0 {
            assert_no_crash(&server, &pid);
            check_canaries(&mut con, &canaries, &context);
        }
    }

    let context = format!("{flavor}, seed {seed}, after {sent} calls");
    assert_no_crash(&server, &pid);
    check_canaries(&mut con, &canaries, &context);
    for index in 0..POOL.len() {
        churn(&mut con, &mut rng, index, &mut kinds, &context);
    }
    // The module still works as on the first day.
    let fresh = common::take(&mut con, "after-the-soak", "8 9");
    assert_eq!(fresh, [1, 7, 0, 112], "{context}");

    let elapsed = started.elapsed();
    let mut summary = format!(
        "random-input soak on {flavor}: seed {seed}, {sent} calls in {:.2} s, server up \
         (same pid), log clean, canaries unchanged; replies:",
        elapsed.as_secs_f64()
    );
    let total = |prefix: &str| -> u64 {
        mix.iter()
            .filter(|(class, _)| class.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    };
    let replies = total("granted") + total("denied");
    summary.push_str(&format!(
        "\n  {replies} valid replies ({:.1} %), {} ERR, {} WRONGTYPE",
        100.0 * replies as f64 / sent as f64,
        total("ERR"),
        total("WRONGTYPE")
    ));
    let mut lines: Vec<_> = mix.into_iter().collect();
    lines.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (class, count) in lines {
        summary.push_str(&format!("\n  {count:>6}  {class}"));
    }
    eprintln!("{summary}");
    assert!(
        sent >= commands.min(1_000),
        "{context}: only {sent} calls in {time:?}"
    );
}

/// A call that writes nothing (a denial, `TOKENS 0`, a string that is not a bucket, a denial
/// on a bucket of an earlier release) leaves the key exactly as it was, also in memory: its
/// value and its encoding.
///
/// Reading through the key API (`RedisModule_StringDMA`, even in READ mode) turns an
/// int-encoded string into a raw copy, from 48 to 80 bytes on Redis 7.0; this caught it, and
/// the module reads any value that is not an 8-byte state with GET.
fn refusals_keep_the_encoding(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let look = |con: &mut Connection, key: &str| -> (Vec<u8>, String) {
        (
            query(con, redis::cmd("GET").arg(key)),
            query(con, redis::cmd("OBJECT").arg("ENCODING").arg(key)),
        )
    };
    // A bucket in debt for 1000 s, written by THROTTLE.TAKE: 8 bytes, raw.
    common::take(&mut con, "enc:bucket", "2 0.001 TOKENS 2");
    // An integer string that is not a bucket state (negative): int-encoded.
    let _: () = query(&mut con, redis::cmd("SET").arg("enc:negative").arg(-5));
    // An earlier release's bucket, its digits full again in 1000 s: int-encoded.
    let digits = common::server_time_ns(&mut con) + 1_000_000_000_000;
    let _: () = query(&mut con, redis::cmd("SET").arg("enc:digits").arg(digits));
    let keys = ["enc:bucket", "enc:negative", "enc:digits"];
    let before: Vec<_> = keys.iter().map(|key| look(&mut con, key)).collect();
    assert_eq!(before[0].1, "raw", "enc:bucket");
    assert_eq!((before[1].1.as_str(), before[2].1.as_str()), ("int", "int"));

    let denied = common::take(&mut con, "enc:bucket", "2 0.001");
    assert_eq!(denied[0], 0, "{denied:?}");
    let peeked = common::take(&mut con, "enc:bucket", "2 0.001 TOKENS 0");
    assert_eq!(peeked[..2], [1, 0], "{peeked:?}");
    let refused = common::send(&mut con, &common::take_cmd("enc:negative", "8 9"));
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("not a THROTTLE bucket")),
        "{refused:?}"
    );
    let old_denied = common::take(&mut con, "enc:digits", "1 0.001");
    assert_eq!(old_denied[0], 0, "{old_denied:?}");

    let after: Vec<_> = keys.iter().map(|key| look(&mut con, key)).collect();
    assert_eq!(
        after, before,
        "{flavor}: calls that write nothing changed a key (value, encoding) of {keys:?}"
    );
}

per_server!(random_input_soak, refusals_keep_the_encoding);

// --- The checker on made-up replies ----------------------------------------------------------

#[test]
fn the_reply_check_knows_the_contract() {
    let args = |text: &str| {
        let words: Vec<&[u8]> = text.split(' ').map(str::as_bytes).collect();
        TakeArgs::parse(&words).unwrap()
    };
    let plain = args("8 9");
    let reserve = args("8 9 MAXWAIT 200");
    let inspect = args("8 9 TOKENS 0");
    for (args, reply) in [
        (&plain, [1, 7, 0, 112]),
        (&plain, [0, 0, 112, 1001]),
        (&reserve, [1, 0, 112, 1001]),
        (&reserve, [0, 0, 223, 1112]),
        (&inspect, [1, 8, 0, 0]),
    ] {
        assert_eq!(check_reply(args, &reply), Ok(()), "{args:?} {reply:?}");
    }
    for (args, reply, rule) in [
        (&plain, [2, 7, 0, 112], "granted is 0 or 1"),
        (&plain, [1, -1, 0, 112], "nothing negative"),
        (&plain, [1, 9, 0, 112], "remaining <= capacity"),
        (&plain, [1, 8, 0, 112], "capacity - n"),
        (&plain, [1, 0, 5, 112], "at most MAXWAIT"),
        (&reserve, [1, 0, 201, 1001], "at most MAXWAIT"),
        (&reserve, [1, 3, 100, 1001], "in debt"),
        (&reserve, [0, 0, 200, 1001], "longer than MAXWAIT"),
        (&plain, [0, 1, 112, 1001], "fewer than n"),
        (&plain, [1, 7, 0, 0], "not full"),
        (&plain, [0, 0, 112, 100], "reset >= wait"),
        (&inspect, [0, 0, 5, 100], "TOKENS 0"),
    ] {
        let why = check_reply(args, &reply).expect_err(rule);
        assert!(why.contains(rule), "{args:?} {reply:?}: {why}");
    }
}
