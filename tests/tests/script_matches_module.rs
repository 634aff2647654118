//! The Lua script (`redis_throttle::script::SOURCE`, `client/lua/throttle.lua`) must do exactly
//! what the module's commands do: the same replies, the same stored state, the same expiry, the
//! same error messages, for THROTTLE.TAKE, MTAKE, PAUSE, GIVE and PEEK alike, and a key written
//! by one must be usable by the other.
//!
//! The clock is taken out of the comparison by running both inside one MULTI: on servers with
//! the cached command time (Redis 7.2+, Valkey) the module and the script's `TIME` read the same
//! instant for the whole transaction, so every field must match exactly. Redis 7.0 has no cached
//! time: its module clock and `TIME` move on between the calls of one EXEC (and the module's is
//! anchored to the wall clock only to the millisecond), so there only the checks that depend on
//! no clock run: the errors, and replication with quotas slow enough that a millisecond changes
//! nothing.

use redis::{Connection, Value};
use redis_throttle::script::SOURCE;
use throttle_e2e::{state_of, Rng};
use throttle_testkit::{info_field, Flavor, Server};

const S: i128 = 1_000_000_000;
const DAY: i128 = 86_400 * S;
/// The furthest after the clock a stored state is a bucket.
const AHEAD: i128 = throttle_bucket::LATEST_STATE_AHEAD_NS as i128;
/// The earliest instant a bucket holds (2020-01-01), as digits.
const EARLIEST: &str = "1577836800000000000";

/// What a bucket's key holds before a case's first call.
#[derive(Clone, Copy, Debug)]
enum Before {
    Missing,
    /// A state this many ns after the server's clock (read just before; negative: before it).
    FromNow(i128),
    /// This exact value.
    Raw(&'static str),
}

use Before::{FromNow, Missing, Raw};

/// One case: what each bucket holds first (bucket `a`, `b`, ... in order), then steps, each run
/// as one MULTI. A call is `command keys args...`: the keys as letters (`a`, or `a,b` for
/// THROTTLE.MTAKE), and `$k` in the arguments stands for the ticket replied by the case's call
/// number `k` (counting from 0 over every step).
struct Case {
    before: &'static [Before],
    steps: &'static [&'static [&'static str]],
}

/// A case of one step.
macro_rules! case {
    ($before:expr, $calls:expr $(,)?) => {
        Case {
            before: $before,
            steps: &[$calls],
        }
    };
}

// `case!` keeps every table row on one line where it fits; `Case { steps }` is for the
// cases that need a ticket from an earlier step.
const CASES: &[Case] = &[
    // ---- THROTTLE.TAKE: burst, then denial; reservation chains.
    case!(&[Missing], &["take a 8 9"; 10]),
    case!(&[Missing], &["take a 8 9 MAXWAIT 5000"; 11]),
    case!(
        &[Missing],
        &[
            "take a 10 0.3 TOKENS 10",
            "take a 10 0.3 TOKENS 0",
            "take a 10 0.3 TOKENS 1 MAXWAIT 100000",
            "take a 10 0.3 TOKENS 10 MAXWAIT 100000",
            "take a 10 0.3 TOKENS 10 MAXWAIT 1000000",
            "take a 10 0.3 tokens 0 maxwait 5",
        ],
    ),
    // An old state is a full bucket.
    case!(&[FromNow(-DAY)], &["take a 5 1", "take a 5 1 TOKENS 4", "take a 5 1 TOKENS 1"]),
    // Half empty, empty, deep in debt; MAXWAIT at, below and above the wait.
    case!(
        &[FromNow(5 * S)],
        &["take a 100 10 TOKENS 50", "take a 100 10 TOKENS 1", "take a 100 10 TOKENS 0"],
    ),
    case!(
        &[FromNow(10 * S)],
        &[
            "take a 100 10",
            "take a 100 10 MAXWAIT 99",
            "take a 100 10 MAXWAIT 100",
            "take a 100 10 MAXWAIT 101",
            "take a 100 10 TOKENS 0",
        ],
    ),
    case!(&[FromNow(10 * S - 1)], &["take a 100 10 TOKENS 1", "take a 100 10 TOKENS 0"]),
    case!(
        &[FromNow(365 * DAY)],
        &[
            "take a 1 0.000001",
            "take a 1 0.000001 MAXWAIT 315360000000",
            "take a 1 0.000001 TOKENS 0",
        ],
    ),
    // Stored states at the edges: the furthest ahead of the clock that is a bucket (a take
    // would put it further: refused), and the earliest instant one can hold.
    case!(
        &[FromNow(AHEAD)],
        &["take a 8 9 MAXWAIT 315360000000", "take a 8 9", "take a 8 9 TOKENS 0"],
    ),
    case!(
        &[FromNow(AHEAD - S)],
        &[
            "take a 1 1000000000 MAXWAIT 315360000000 TOKENS 1",
            "take a 1 1000000000 MAXWAIT 315360000000",
            "take a 1 1000000000 TOKENS 0",
        ],
    ),
    case!(&[Raw(EARLIEST)], &["take a 8 9", "take a 8 9 TOKENS 0"]),
    // Limits of capacity, rate, fill and MAXWAIT.
    case!(
        &[Missing],
        &[
            "take a 1000000000000000 1000000000 TOKENS 999999999999999",
            "take a 1000000000000000 1000000000 TOKENS 1000000000000000 MAXWAIT 315360000000",
            "take a 1000000000000000 1000000000 TOKENS 1000000000000000 MAXWAIT 315360000000",
            "take a 1000000000000000 1000000000 TOKENS 0",
        ],
    ),
    case!(
        &[Missing],
        &[
            "take a 315360000 1 TOKENS 315360000",
            "take a 315360000 1 TOKENS 315360000 MAXWAIT 315360000000",
            "take a 315360000 1 TOKENS 0",
        ],
    ),
    case!(&[Missing], &["take a 31536000 0.1 TOKENS 31535999", "take a 31536000 0.1 TOKENS 0"]),
    // Rates: exact decimal parsing, the interval rounded up, digits past the 24th dropped.
    case!(&[Missing], &["take a 1000 35791394.1 TOKENS 999", "take a 1000 35791394.1 TOKENS 0"]),
    case!(&[Missing], &["take a 7 999999999.9 TOKENS 7", "take a 7 999999999.9 TOKENS 0"]),
    case!(
        &[Missing],
        &[
            "take a 3 0.0000015 TOKENS 2",
            "take a 3 0.0000015 MAXWAIT 315360000000",
            "take a 3 0.0000015 TOKENS 3 MAXWAIT 315360000000",
        ],
    ),
    case!(
        &[Missing],
        &[
            "take a 50 123456789.123456789123456789 TOKENS 17",
            "take a 50 123456789.123456789123456789 TOKENS 0",
        ],
    ),
    case!(
        &[Missing],
        &[
            "take a 2 999999999.999999999999999999 TOKENS 1",
            "take a 2 999999999.999999999999999999 TOKENS 0",
        ],
    ),
    case!(
        &[Missing],
        &["take a 12 3.000000000000000001 TOKENS 5", "take a 12 3.000000000000000001 TOKENS 0"],
    ),
    case!(
        &[Missing],
        &["take a 50 0.000001000000000000 TOKENS 3", "take a 50 0.000001000000000000 TOKENS 0"],
    ),
    case!(
        &[Missing],
        &[
            "take a 9 007.250 TOKENS 4",
            "take a 9 .5 TOKENS 2",
            "take a 9 5. TOKENS 0",
            "take a 9 0.7 MAXWAIT 1",
        ],
    ),
    case!(&[Missing], &["take a 0008 9 TOKENS 0003", "take a 8 9 TOKENS 08 MAXWAIT 0000"]),
    // Long decimals whose double estimate of the interval is one too high, or one too low.
    case!(
        &[Missing],
        &["take a 10 66666666.6666666667 TOKENS 3", "take a 10 66666666.6666666667 TOKENS 0"],
    ),
    case!(
        &[Missing],
        &["take a 10 8333333.3333333334 TOKENS 3", "take a 10 8333333.3333333334 TOKENS 0"],
    ),
    case!(
        &[Missing],
        &["take a 10 999999999.9999999 TOKENS 3", "take a 10 999999999.9999999 TOKENS 0"],
    ),
    case!(&[Missing], &["take a 10 1782531.1942959 TOKENS 3", "take a 10 1782531.1942959 TOKENS 0"]),
    case!(
        &[FromNow(DAY)],
        &["take a 1 0.0000011 TOKENS 1 MAXWAIT 315360000000", "take a 1 0.0000011 TOKENS 0"],
    ),
    // More than 18 and more than 24 fraction digits: 1/3600 as Python, JavaScript and Rust print
    // it, its 32-digit expansion (the 25th digit on is dropped), and the smallest rate written
    // long.
    case!(
        &[Missing],
        &[
            "take a 5 0.0002777777777777778 TOKENS 2",
            "take a 5 0.00027777777777777777777777777777 TOKENS 2",
            "take a 5 0.0002777777777777778 TOKENS 0",
        ],
    ),
    case!(
        &[Missing],
        &[
            "take a 3 0.000001000000000000000000000000000000",
            "take a 3 999999999.999999999999999999999999999 TOKENS 0",
            "take a 3 1000000000.000000000000000000000000000 TOKENS 0",
        ],
    ),
    // `remaining` = (fill - debt) / interval with fill - debt above 2^53 ns, one ns short of a
    // whole token (the clocks are in whole µs, the interval is 1 µs): a double rounds that up,
    // so this checks the script's exact correction. Nine takes move through every residue.
    case!(&[FromNow(S + 1)], &["take a 300000000000000 1000000"; 9]),
    // 1e9 / 2^33 has exactly 24 fraction digits: its interval is 2^33 ns; cut to 23 digits it
    // would be one more. A 25th digit is dropped, whichever it is: 1e9 / 2^34 has 25, and its
    // interval is 2^34 + 1 ns.
    case!(
        &[Missing],
        &[
            "take a 3 0.116415321826934814453125",
            "take a 3 0.1164153218269348144531251 TOKENS 0",
        ],
    ),
    case!(
        &[Missing],
        &[
            "take a 3 0.1164153218269348144531249",
            "take a 3 0.116415321826934814453125 TOKENS 0",
        ],
    ),
    case!(&[Missing], &["take a 3 0.0582076609134674072265625"]),
    // ---- TICKET: the state after the take in µs, rounded down; 0 when nothing was taken.
    case!(
        &[Missing],
        &[
            "take a 8 9 TICKET",
            "take a 8 9 TOKENS 7 ticket",
            "take a 8 9 TICKET",
            "take a 8 9 TICKET MAXWAIT 200",
            "take a 8 9 TOKENS 0 TICKET",
            "take a 8 9 MAXWAIT 112 TICKET TOKENS 1",
        ],
    ),
    case!(&[FromNow(999)], &["take a 1000000 1000000000 TOKENS 3 TICKET"]),
    // ---- THROTTLE.PEEK: what TOKENS 0 answers, and it writes nothing.
    case!(&[Missing], &["peek a 8 9", "take a 8 9 TOKENS 3", "peek a 8 9", "peek a 8 0.5"]),
    case!(&[FromNow(10 * S)], &["peek a 100 10", "peek a 10 10", "peek a 100 10.000001"]),
    case!(&[FromNow(-S)], &["peek a 1000000000000000 1000000000"]),
    case!(&[FromNow(AHEAD)], &["peek a 1 0.000001", "peek a 315360000 1"]),
    case!(&[FromNow(S + 1)], &["peek a 300000000000000 1000000"]),
    case!(&[FromNow(123_456_789)], &["peek a 7 0.00027777777777777777777777777777"]),
    // ---- THROTTLE.PAUSE: the first token exactly ms from now, then no burst.
    case!(
        &[Missing],
        &[
            "pause a 10 10 1500",
            "take a 10 10",
            "take a 10 10 MAXWAIT 1500",
            "take a 10 10 MAXWAIT 1599",
            "take a 10 10 MAXWAIT 1600",
            "peek a 10 10",
        ],
    ),
    // A shorter pause (or the same one again) is a no-op that says how long the longer runs.
    case!(
        &[Missing],
        &["pause a 10 10 60000", "pause a 10 10 1000", "pause a 10 10 60000", "pause a 10 10 60001"],
    ),
    // A debt outlasts a short pause; a longer pause extends it.
    case!(&[FromNow(4 * S)], &["pause a 10 10 1000", "pause a 10 10 5000", "take a 10 10 TOKENS 0"]),
    case!(&[FromNow(-DAY)], &["pause a 1 1 1", "take a 1 1", "pause a 1 1 1"]),
    case!(&[Missing], &["pause a 315360000 1 315360000000", "peek a 315360000 1"]),
    case!(&[Missing], &["pause a 1000000000000000 1000000000 1", "peek a 1000000000000000 1000000000"]),
    case!(&[FromNow(AHEAD - 1)], &["pause a 315360000 1 315360000000"]),
    case!(&[Raw(EARLIEST)], &["pause a 3 0.0000015 7", "pause a 3 7.0000015 3"]),
    case!(&[Missing], &["pause a 4 123456789.123456789123456789123 1", "pause a 4 9 000002"]),
    // ---- THROTTLE.GIVE: the x/time/rate Reservation.Cancel rule.
    // Nothing taken after the ticket: everything comes back, and the bucket is full again.
    Case {
        before: &[Missing],
        steps: &[
            &["take a 10 10 TOKENS 4 TICKET"],
            &["give a 10 10 4 $0", "take a 10 10 TOKENS 10", "take a 10 10 TOKENS 0"],
        ],
    },
    // Tokens taken after the ticket stay taken; the reservations behind it stay valid.
    Case {
        before: &[Missing],
        steps: &[
            &[
                "take a 3 1 TOKENS 3",
                "take a 3 1 TOKENS 3 MAXWAIT 10000 TICKET",
                "take a 3 1 TOKENS 2 MAXWAIT 10000",
            ],
            &["give a 3 1 3 $1", "take a 3 1 MAXWAIT 10000", "give a 3 1 3 $1"],
        ],
    },
    // Never past full, once only; stale, foreign, zero and forged tickets give nothing.
    Case {
        before: &[Missing],
        steps: &[
            &["take a 10 0.001 TOKENS 5 TICKET", "take a 10 0.001 TOKENS 2 TICKET"],
            &[
                "give a 10 0.001 0 $1",
                "give a 10 0.001 1 $0",
                "give a 10 0.001 2 $1",
                "give a 10 0.001 5 $0",
                "give a 10 0.001 5 $0",
                "give a 10 0.001 2 $1",
                "give a 10 0.001 1 0",
                "give a 10 0.001 1 9223372036854775",
                "give a 10 0.001 1 0009223372036854775",
                "peek a 10 0.001",
            ],
        ],
    },
    Case {
        before: &[Missing],
        steps: &[
            &["take a 10 0.001 TOKENS 5 TICKET"],
            &["give a 10 0.001 10 $0", "peek a 10 0.001", "give a 10 0.001 10 $0"],
        ],
    },
    Case {
        before: &[Missing],
        steps: &[
            &["take a 10 10 TOKENS 2 TICKET"; 1],
            &["take a 10 10 MAXWAIT 10000"; 10],
            &["give a 10 10 2 $0", "take a 10 10 MAXWAIT 10000 TICKET"],
            &["give a 10 10 1 $12", "give a 10 10 1 $12"],
        ],
    },
    // The state is 1 ns past the ticket's µs: a whole token (1 s) counts as taken after it.
    Case {
        before: &[FromNow(2 * S + 1)],
        steps: &[
            &["take a 10 1 TOKENS 1 TICKET"],
            &["give a 10 1 1 $0", "give a 10 1 2 $0", "peek a 10 1"],
        ],
    },
    // A missing key is a full bucket: nothing to give back to. An old state too.
    case!(&[Missing], &["give a 8 9 3 1", "give a 8 9 0 0"]),
    case!(&[FromNow(-S)], &["give a 8 9 3 1"]),
    // The µs ticket is up to 999 ns below the state: at 1e9/s that reads as up to 999 tokens
    // taken after it (giving back less, never more).
    Case {
        before: &[FromNow(999)],
        steps: &[
            &["take a 1000000 1000000000 TOKENS 3 TICKET"],
            &["give a 1000000 1000000000 3 $0", "peek a 1000000 1000000000"],
        ],
    },
    Case {
        before: &[FromNow(DAY)],
        steps: &[
            &["take a 3000000 0.01 TOKENS 3 TICKET MAXWAIT 315360000000"],
            &["give a 3000000 0.01 3 $0", "give a 3 1 3 $0"],
        ],
    },
    // Forged tickets: far before the state, and the largest (far after it).
    case!(&[FromNow(AHEAD)], &["give a 8 9 8 1", "give a 1 1000000000 1 9223372036854775"]),
    case!(&[FromNow(AHEAD)], &["give a 1000000000000000 1000000000 1000000000000000 9223372036854775"]),
    // ---- THROTTLE.MTAKE: 10 per second and 25 per 5 seconds.
    case!(&[Missing, Missing], &["mtake a,b 10 10 1 25 5 1"; 12]),
    // All or nothing when one bucket is short.
    case!(&[Missing, FromNow(3 * S)], &["mtake a,b 5 1 1 1 1 1", "peek a 5 1", "mtake b,a 1 1 1 5 1 5"]),
    // The wait is the longest, and every bucket takes as of then.
    case!(
        &[Missing, FromNow(2 * S)],
        &["mtake a,b 5 1 1 1 1 1 MAXWAIT 5000", "take a 5 1 TOKENS 0", "peek b 1 1", "mtake a,b 5 1 1 1 1 1 MAXWAIT 1000"],
    ),
    // Zero tokens inspect, and a bucket asked for nothing is left alone: however deep its
    // debt, it delays no one.
    case!(
        &[FromNow(S / 2), Missing],
        &["mtake a,b 10 10 0 10 10 0", "mtake a,b 10 10 0 10 10 3", "mtake b,a 10 10 0 10 10 1"],
    ),
    case!(&[FromNow(3 * S), Missing], &["mtake a,b 10 10 0 10 10 1", "mtake a,b 10 10 0 10 10 1 MAXWAIT 2000"]),
    // One key is THROTTLE.TAKE in another order.
    case!(&[Missing], &["mtake a 8 9 2 MAXWAIT 300"; 6]),
    // One bucket that cannot give within MAXWAIT refuses the whole call.
    case!(&[Missing, FromNow(AHEAD)], &["mtake a,b 8 9 1 8 9 1 MAXWAIT 315360000000", "peek a 8 9"]),
    // Sixteen keys, long rates, limits.
    case!(
        &[Missing, FromNow(S), FromNow(-S), Missing, Missing, FromNow(7), Missing, Missing,
          Missing, Missing, FromNow(DAY), Missing, Missing, Missing, Raw(EARLIEST), Missing],
        &[
            "mtake a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p 1 1 1 2 2 2 3 3 3 4 4 4 5 5 5 6 6 6 7 7 7 8 8 8 9 9 9 10 10 10 11 11 11 12 12 12 13 13 13 14 14 14 15 15 15 16 16 16 MAXWAIT 315360000000",
            "mtake a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p 1 1 0 2 2 0 3 3 0 4 4 0 5 5 0 6 6 0 7 7 0 8 8 0 9 9 0 10 10 0 11 11 0 12 12 0 13 13 0 14 14 0 15 15 0 16 16 0",
        ],
    ),
    case!(
        &[Missing, Missing, Missing],
        &[
            "mtake a,b,c 1000000000000000 1000000000 999999999999999 315360000 1 315360000 50 123456789.123456789123456789 17",
            "mtake c,b,a 50 123456789.123456789123456789 1 315360000 1 1 1000000000000000 1000000000 1000000000000000 MAXWAIT 315360000000",
            "mtake a,c 1000000000000000 1000000000 0 3 0.0002777777777777778 1",
        ],
    ),
    // Mixing commands on one bucket.
    Case {
        before: &[Missing, Missing],
        steps: &[
            &["mtake a,b 4 2 2 6 3 3", "take a 4 2 TICKET TOKENS 2", "pause b 6 3 700"],
            &["give a 4 2 2 $1", "mtake b,a 6 3 1 4 2 1 MAXWAIT 2000", "peek b 6 3", "peek a 4 2"],
        ],
    },
];

fn server_now_ns(con: &mut Connection) -> i128 {
    let (s, us): (i128, i128) = redis::cmd("TIME").query(con).expect("TIME");
    s * S + us * 1000
}

/// The server's clock as the commands read it: clamped to the year 2200.
fn clamped_now_ns(con: &mut Connection) -> i128 {
    server_now_ns(con).min(i128::from(throttle_bucket::MAX_NOW_NS))
}

fn load(con: &mut Connection) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SOURCE)
        .query(con)
        .expect("SCRIPT LOAD")
}

/// Who runs a call: the module's command, or the script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runner {
    Module,
    Script,
}

/// `THROTTLE.<COMMAND> [numkeys] keys args`, or `EVALSHA(_RO) sha numkeys keys command args`.
fn command<A: redis::ToRedisArgs>(
    runner: Runner,
    sha: &str,
    name: &str,
    keys: &[String],
    args: &[A],
) -> redis::Cmd {
    match runner {
        Runner::Module => {
            let mut cmd = redis::cmd(&format!("THROTTLE.{}", name.to_uppercase()));
            if name == "mtake" {
                cmd.arg(keys.len());
            }
            cmd.arg(keys).arg(args);
            cmd
        }
        Runner::Script => {
            // A peek must never write, so it runs as a read-only script.
            let eval = if name == "peek" {
                "EVALSHA_RO"
            } else {
                "EVALSHA"
            };
            let mut cmd = redis::cmd(eval);
            cmd.arg(sha).arg(keys.len()).arg(keys).arg(name).arg(args);
            cmd
        }
    }
}

/// The fifth element of a THROTTLE.TAKE ... TICKET reply.
fn ticket_of(reply: &Value) -> i64 {
    match reply {
        Value::Array(items) if items.len() == 5 => match items[4] {
            Value::Int(ticket) => ticket,
            ref other => panic!("a ticket that is not an integer: {other:?}"),
        },
        other => panic!("not a TICKET reply: {other:?}"),
    }
}

/// The three sets of keys every case runs on: the module's, the script's, and a mixed one
/// where calls alternate between the two (even calls the module, odd ones the script), which
/// must end up exactly where the module alone does.
const SIDES: [&str; 3] = ["module", "script", "mixed"];

fn runner(side: usize, call: usize) -> Runner {
    match (side, call % 2) {
        (0, _) | (2, 0) => Runner::Module,
        _ => Runner::Script,
    }
}

/// Runs every case on a module key set, a script key set and a mixed one, and compares
/// replies, stored values and expiries.
fn same_replies_state_and_expiry(flavor: Flavor) {
    let server = Server::start(flavor);
    run_cases(flavor, &mut server.conn());
}

/// The same cases on a server whose clock reads past the year 2200, where both clamp it (the
/// limits that keep every state inside an i64 assume no later clock). Redis 7.0 does not start
/// under libfaketime (tests/tests/clock.rs), and has no cached clock anyway.
fn same_replies_on_a_clock_past_2200(flavor: Flavor) {
    const CLAMP_S: i64 = 7_258_118_400; // 2200-01-01, module/bucket/src/limits.rs MAX_NOW_NS
    let dir = std::env::temp_dir().join(format!(
        "throttle-script-2200-{}-{}",
        std::process::id(),
        flavor.name()
    ));
    std::fs::create_dir_all(&dir).expect("create the fake clock's dir");
    let file = dir.join("faketime");
    let real_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs() as i64;
    // A day past the clamp.
    std::fs::write(&file, format!("{:+}s\n", CLAMP_S + 86_400 - real_s)).expect("faketime file");
    let server = Server::builder(flavor)
        .env(
            "LD_PRELOAD",
            &throttle_testkit::libfaketime().display().to_string(),
        )
        .env("FAKETIME_TIMESTAMP_FILE", &file.display().to_string())
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .start();
    let mut con = server.conn();
    let now = server_now_ns(&mut con);
    assert!(
        now > i128::from(CLAMP_S) * S,
        "{flavor}: the server's clock reads {now} ns"
    );
    run_cases(flavor, &mut con);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

fn run_cases(flavor: Flavor, con: &mut Connection) {
    let sha = load(con);
    for (i, case) in CASES.iter().enumerate() {
        let letters: Vec<char> = ('a'..).take(case.before.len()).collect();
        let key = |side: usize, letter: char| format!("{}:{i}:{letter}", SIDES[side]);
        for (&letter, before) in letters.iter().zip(case.before) {
            let value = match before {
                Missing => None,
                // After the clock the module reads: clamped to the year 2200.
                FromNow(offset) => Some((clamped_now_ns(con) + offset).to_string()),
                Raw(value) => Some((*value).to_owned()),
            };
            if let Some(value) = value {
                for side in 0..SIDES.len() {
                    let _: () = redis::cmd("SET")
                        .arg(key(side, letter))
                        .arg(&value)
                        .query(con)
                        .expect("SET");
                }
            }
        }

        // Every reply so far, per side, by the case's call number (for the `$k` tickets).
        let mut replies: [Vec<Value>; 3] = Default::default();
        let mut number = 0;
        for (step_no, step) in case.steps.iter().enumerate() {
            let mut pipe = redis::pipe();
            pipe.atomic();
            for (side, side_replies) in replies.iter().enumerate() {
                for (n, call) in step.iter().enumerate() {
                    let mut words = call.split_whitespace();
                    let name = words.next().expect("a command");
                    let keys: Vec<String> = words
                        .next()
                        .expect("keys")
                        .split(',')
                        .map(|l| key(side, l.chars().next().expect("a letter")))
                        .collect();
                    let args: Vec<String> = words
                        .map(|w| match w.strip_prefix('$') {
                            Some(k) => {
                                ticket_of(&side_replies[k.parse::<usize>().unwrap()]).to_string()
                            }
                            None => w.to_owned(),
                        })
                        .collect();
                    pipe.add_command(command(runner(side, number + n), &sha, name, &keys, &args));
                }
            }
            // The stored values and expiries are read in the same transaction: a bucket that
            // refills within a millisecond may expire between two separate reads, and inside
            // EXEC the server sees one instant.
            for side in 0..SIDES.len() {
                for &letter in &letters {
                    pipe.cmd("GET").arg(key(side, letter));
                    pipe.cmd("PEXPIRETIME").arg(key(side, letter));
                }
            }
            let what = format!("{flavor} case {i}, step {step_no}: {step:?}");
            let mut results: Vec<Value> = pipe.query(con).unwrap_or_else(|e| panic!("{what}: {e}"));
            let calls = step.len();
            assert_eq!(results.len(), 3 * calls + 3 * 2 * letters.len(), "{what}");
            let states = results.split_off(3 * calls);
            let per_side: Vec<Vec<Value>> = results.chunks(calls).map(<[Value]>::to_vec).collect();
            for (n, call) in step.iter().enumerate() {
                let module = &per_side[0][n];
                assert!(
                    matches!(module, Value::Array(_) | Value::Int(_)),
                    "{what}: call {call:?} replied {module:?}"
                );
                for side in 1..SIDES.len() {
                    assert_eq!(
                        &per_side[side][n], module,
                        "{what}: call {n} `{call}`: {} (left) vs module (right)",
                        SIDES[side]
                    );
                }
            }
            // The encoding is not compared: it is a matter of memory, not of semantics.
            let per_key = 2 * letters.len();
            for side in 1..SIDES.len() {
                assert_eq!(
                    states[side * per_key..(side + 1) * per_key],
                    states[..per_key],
                    "{what}: stored value and PEXPIRETIME of {:?}, {} (left) vs module (right)",
                    letters,
                    SIDES[side]
                );
            }
            for (side, side_replies) in replies.iter_mut().enumerate() {
                side_replies.extend_from_slice(&per_side[side]);
            }
            number += calls;
        }
    }
}

/// What a call answers, errors included, as comparable text.
fn outcome(result: redis::RedisResult<Value>) -> String {
    match result {
        Ok(value) => format!("{value:?}"),
        Err(e) => format!("error {:?} {:?}", e.code(), e.detail()),
    }
}

/// Bad calls of the one-key commands: the command, then the words after the key.
const ONE_KEY_BAD: &[(&str, &[&[u8]])] = &[
    // THROTTLE.TAKE
    ("take", &[]),
    ("take", &[b"8"]),
    ("take", &[b"0", b"9"]),
    ("take", &[b"-1", b"9"]),
    ("take", &[b"1.5", b"9"]),
    ("take", &[b"", b"9"]),
    ("take", &[b"1000000000000001", b"9"]),
    ("take", &[b"9999999999999999", b"9"]),
    ("take", &[b"18446744073709551616", b"9"]),
    ("take", &[b"abc", b"9"]),
    ("take", &[b"8", b"0"]),
    ("take", &[b"8", b"0.0"]),
    ("take", &[b"8", b"-9"]),
    ("take", &[b"8", b"+9"]),
    ("take", &[b"8", b"nan"]),
    ("take", &[b"8", b"inf"]),
    ("take", &[b"8", b"1e400"]),
    ("take", &[b"8", b"1e3"]),
    ("take", &[b"8", b""]),
    ("take", &[b"8", b"."]),
    ("take", &[b"8", b" 1"]),
    ("take", &[b"8", b"1 "]),
    ("take", &[b"8", b"1.2.3"]),
    ("take", &[b"8", b"1,5"]),
    ("take", &[b"8", b"0.0000009"]),
    ("take", &[b"8", b"0.0000000000000000001"]),
    ("take", &[b"8", b"0.000000999999999999999999999999999999"]),
    ("take", &[b"8", b"0.000000000000000000000000001"]),
    ("take", &[b"8", b"1000000000.1"]),
    ("take", &[b"8", b"1000000000.000000000000000000000000001"]),
    ("take", &[b"8", b"1000000001"]),
    ("take", &[b"8", b"99999999999"]),
    ("take", &[b"8", b"0x10"]),
    ("take", &[b"1000000000000000", b"0.000001"]),
    ("take", &[b"315360001", b"1"]),
    ("take", &[b"315360000", b"0.99999999999999999"]),
    ("take", &[b"315360000", b"0.999999999999999999999999999999"]),
    ("take", &[b"8", b"9", b"TOKENS", b"9"]),
    ("take", &[b"0008", b"9", b"TOKENS", b"9"]),
    ("take", &[b"8", b"9", b"TOKENS", b"-1"]),
    ("take", &[b"8", b"9", b"TOKENS", b"x"]),
    ("take", &[b"8", b"9", b"TOKENS", b""]),
    (
        "take",
        &[
            b"1000000000000000",
            b"1000000000",
            b"TOKENS",
            b"1000000000000001",
        ],
    ),
    ("take", &[b"8", b"9", b"MAXWAIT", b"315360000001"]),
    ("take", &[b"8", b"9", b"MAXWAIT", b"-5"]),
    ("take", &[b"8", b"9", b"MAXWAIT", b"1.5"]),
    ("take", &[b"8", b"9", b"WAIT", b"1"]),
    ("take", &[b"8", b"9", b"TOKENS"]),
    ("take", &[b"8", b"9", b"MAXWAIT", b"1", b"MAXWAIT"]),
    ("take", &[b"8", b"9", b"TOKENS", b"1", b"tokens", b"2"]),
    (
        "take",
        &[b"8", b"9", b"MAXWAIT", b"1", b"TOKENS", b"9", b"TOKENS"],
    ),
    ("take", &[b"8", b"9", b"TOKENS", b"x", b"FOO"]),
    ("take", &[b"8", b"9", b"TICKET", b"ticket"]),
    ("take", &[b"8", b"9", b"TICKET", b"TOKENS"]),
    ("take", &[b"8", b"9", b"TICKET", b"1"]),
    ("take", &[b"8", b"9", b"TICKETS"]),
    ("take", &[b"8", b"9", b"TOKENS", b"9", b"TICKET", b"TICKET"]),
    ("take", &[b"\xff", b"9"]),
    ("take", &[b"8", b"\xff\xfe"]),
    ("take", &[b"8", b"9", b"TOK\xffENS", b"1"]),
    // THROTTLE.PEEK
    ("peek", &[]),
    ("peek", &[b"8"]),
    ("peek", &[b"8", b"9", b"TOKENS", b"0"]),
    ("peek", &[b"8", b"9", b"1"]),
    ("peek", &[b"0", b"9"]),
    ("peek", &[b"8", b"x"]),
    ("peek", &[b"8", b"0.0000009"]),
    ("peek", &[b"1000000000000000", b"0.000001"]),
    ("peek", &[b"\xff", b"9"]),
    // THROTTLE.PAUSE
    ("pause", &[b"8", b"9"]),
    ("pause", &[b"8", b"9", b"1", b"2"]),
    ("pause", &[b"0", b"9", b"1"]),
    ("pause", &[b"x", b"9", b"0"]),
    ("pause", &[b"8", b"x", b"1"]),
    ("pause", &[b"8", b"x", b"0"]),
    ("pause", &[b"315360001", b"1", b"1"]),
    ("pause", &[b"8", b"9", b"0"]),
    ("pause", &[b"8", b"9", b"000"]),
    ("pause", &[b"8", b"9", b"315360000001"]),
    ("pause", &[b"8", b"9", b"1.5"]),
    ("pause", &[b"8", b"9", b"-1"]),
    ("pause", &[b"8", b"9", b""]),
    ("pause", &[b"8", b"9", b"x"]),
    ("pause", &[b"8", b"9", b"99999999999999999999"]),
    // THROTTLE.GIVE
    ("give", &[b"8", b"9", b"3"]),
    ("give", &[b"8", b"9", b"1", b"2", b"3"]),
    ("give", &[b"0", b"9", b"1", b"1"]),
    ("give", &[b"8", b"0", b"1", b"1"]),
    ("give", &[b"8", b"9", b"9", b"1"]),
    ("give", &[b"8", b"9", b"x", b"1"]),
    ("give", &[b"8", b"9", b"-1", b"1"]),
    ("give", &[b"8", b"9", b"9", b"x"]),
    ("give", &[b"8", b"9", b"1", b"-1"]),
    ("give", &[b"8", b"9", b"1", b"9223372036854776"]),
    ("give", &[b"8", b"9", b"1", b"00009223372036854776"]),
    ("give", &[b"8", b"9", b"1", b"9300000000000000"]),
    ("give", &[b"8", b"9", b"1", b"99999999999999999999"]),
    ("give", &[b"8", b"9", b"1", b"1.5"]),
    ("give", &[b"8", b"9", b"1", b""]),
    ("give", &[b"8", b"9", b"1", b"1e6"]),
    (
        "give",
        &[
            b"1000000000000000",
            b"1000000000",
            b"1000000000000001",
            b"1",
        ],
    ),
];

/// Bad calls of THROTTLE.MTAKE: the keys (numkeys is their count), then the words after them.
const MTAKE_BAD: &[(&[&str], &[&[u8]])] = &[
    (&[], &[b"8", b"9", b"1"]),
    (&[], &[b"8", b"9", b"1", b"x"]),
    (&[], &[b"8", b"9", b"1", b"MAXWAIT", b"1"]),
    (
        &[
            "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11", "k12", "k13",
            "k14", "k15", "k16",
        ],
        &[b"8", b"9", b"1"],
    ),
    (&["a"], &[]),
    (&["a"], &[b"8", b"9"]),
    (&["a", "b"], &[b"8", b"9"]),
    (&["a", "b"], &[b"8", b"9", b"1"]),
    (&["a", "b"], &[b"8", b"9", b"1", b"8", b"9"]),
    (&["a", "a"], &[b"8", b"9"]),
    (&["a", "a"], &[b"8", b"9", b"1", b"8", b"9", b"1"]),
    (
        &["a", "b", "a"],
        &[b"8", b"9", b"1", b"8", b"9", b"1", b"0", b"9", b"1"],
    ),
    (&["a", "b"], &[b"8", b"9", b"1", b"0", b"9", b"1"]),
    (&["a", "b"], &[b"8", b"9", b"9", b"8", b"9", b"1"]),
    (&["a", "b"], &[b"8", b"9", b"1", b"8", b"x", b"1"]),
    (&["a", "b"], &[b"8", b"9", b"1", b"8", b"9", b"-1"]),
    (&["a"], &[b"315360001", b"1", b"1"]),
    (&["a"], &[b"8", b"9", b"1", b"TOKENS", b"1"]),
    (&["a"], &[b"8", b"9", b"1", b"TICKET"]),
    (&["a"], &[b"8", b"9", b"1", b"MAXWAIT"]),
    (&["a"], &[b"8", b"9", b"1", b"MAXWAIT", b"1", b"MAXWAIT"]),
    (
        &["a"],
        &[b"8", b"9", b"1", b"MAXWAIT", b"1", b"maxwait", b"2"],
    ),
    (&["a"], &[b"8", b"9", b"1", b"MAXWAIT", b"-1"]),
    (&["a"], &[b"8", b"9", b"1", b"MAXWAIT", b"315360000001"]),
    (&["a"], &[b"8", b"9", b"1", b"MAXWAIT", b"x", b"FOO"]),
    (&["a", "b"], &[b"8", b"9", b"1", b"8", b"9", b"1", b"x"]),
    (&["a", "b"], &[b"8", b"9", b"1", b"\xff", b"9", b"1"]),
];

/// Every bad call gets the module's error message from the script too, and writes nothing.
fn same_errors(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let sha = load(&mut con);
    let mut run = |runner: Runner, name: &str, keys: &[String], args: &[&[u8]]| {
        outcome(command(runner, &sha, name, keys, args).query(&mut con))
    };

    let mut checked = 0;
    for (i, (name, args)) in ONE_KEY_BAD.iter().enumerate() {
        let keys = [format!("bad:{i}")];
        let module = run(Runner::Module, name, &keys, args);
        let script = run(Runner::Script, name, &keys, args);
        assert!(
            module.starts_with("error"),
            "{flavor} {name} {args:?}: {module}"
        );
        assert_eq!(
            script, module,
            "{flavor} {name} {args:?}: script (left) vs module (right)"
        );
        checked += 1;
    }
    for (i, (keys, args)) in MTAKE_BAD.iter().enumerate() {
        let keys: Vec<String> = keys.iter().map(|k| format!("bad:m{i}:{k}")).collect();
        let module = run(Runner::Module, "mtake", &keys, args);
        let script = run(Runner::Script, "mtake", &keys, args);
        assert!(
            module.starts_with("error"),
            "{flavor} mtake {keys:?} {args:?}: {module}"
        );
        assert_eq!(
            script, module,
            "{flavor} mtake {keys:?} {args:?}: script (left) vs module (right)"
        );
        checked += 1;
    }
    assert_eq!(checked, ONE_KEY_BAD.len() + MTAKE_BAD.len());

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
        &(server_now_ns(&mut con) + AHEAD + 60 * S).to_string(),
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
        ("peek", "8 9"),
        ("pause", "8 9 1000"),
        ("give", "8 9 1 1"),
        ("mtake", "8 9 1 8 9 1"),
        ("mtake", "8 9 0 8 9 0"),
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
            let script =
                outcome(command(Runner::Script, &sha, name, &keys, &words).query(&mut con));
            assert!(
                module.starts_with("error"),
                "{flavor} {name} {holder}: {module}"
            );
            assert_eq!(
                script, module,
                "{flavor} {name} {keys:?} {args}: script (left) vs module (right)"
            );
        }
    }

    // No bad call wrote anything: the only keys are the ones set above.
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    keys.sort();
    let mut expected = holders.clone();
    expected.sort();
    assert_eq!(keys, expected, "{flavor}: a bad call wrote a key");

    // The script's own rules: which command (case-insensitive), and one key for the one-key
    // commands.
    let unknown = "error Some(\"ERR\") Some(\"unknown THROTTLE script command: the first argument \
                   must be take, mtake, pause, give or peek\")";
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

/// `INFO replication`'s `master_repl_offset`: how much the primary has sent its replicas.
fn repl_offset(con: &mut Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("replication").query(con).unwrap();
    info_field(&info, "master_repl_offset")
        .and_then(|v| v.parse().ok())
        .expect("master_repl_offset")
}

/// Replicas and the AOF get the script's effects (`SET key <state> PXAT <ms>`), like the
/// module's, never the script: a denial, an inspection, a peek, a pause that a longer one
/// covers and a give-back of nothing propagate nothing. The peek runs as EVALSHA_RO on the
/// read-only replica and during CLIENT PAUSE WRITE, and answers what THROTTLE.PEEK does.
///
/// Quotas of a token per 1000 s, so that the moving clock of Redis 7.0 cannot change a reply.
fn replicates_effects_not_the_script(flavor: Flavor) {
    let primary = Server::start(flavor);
    let replica = Server::builder(flavor).replica_of(&primary).start();
    let mut con = primary.conn();
    let sha = load(&mut con);
    // The primary pings its replicas every 10 s by default, which moves the offset.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-ping-replica-period")
        .arg("3600")
        .query(&mut con)
        .unwrap();
    replica.wait_replica_synced(&primary);

    let call = |con: &mut Connection, keys: &[&str], name: &str, args: &str| -> Value {
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        let words: Vec<&str> = args.split_whitespace().collect();
        command(Runner::Script, &sha, name, &keys, &words)
            .query(con)
            .unwrap_or_else(|e| panic!("{flavor} {name} {args}: {e}"))
    };
    // A call that must propagate nothing.
    let silent = |con: &mut Connection, keys: &[&str], name: &str, args: &str| -> Value {
        let before = repl_offset(con);
        let reply = call(con, keys, name, args);
        assert_eq!(
            repl_offset(con),
            before,
            "{flavor} {name} {args} propagated something"
        );
        reply
    };
    let ints = |value: Value| -> Vec<i64> { redis::from_redis_value(value).unwrap() };
    let int = |value: Value| -> i64 { redis::from_redis_value(value).unwrap() };

    let first = ints(call(&mut con, &["r"], "take", "2 0.001 TICKET"));
    assert_eq!(first[..2], [1, 1], "{flavor}");
    let reserved = call(&mut con, &["r"], "take", "2 0.001 MAXWAIT 5000000");
    assert_eq!(ints(reserved)[..2], [1, 0], "{flavor}");
    assert_eq!(
        ints(silent(&mut con, &["r"], "take", "2 0.001"))[..2],
        [0, 0]
    );
    assert_eq!(
        ints(silent(&mut con, &["r"], "take", "2 0.001 TOKENS 0"))[..2],
        [1, 0]
    );
    assert_eq!(
        ints(silent(&mut con, &["r"], "peek", "2 0.001"))[..2],
        [1, 0]
    );
    // The bucket is 2000 s in debt: a pause whose first token comes after 1999 s (and the
    // second 1000 s later) changes nothing, and says the next token is 1000 s away.
    let covered = int(silent(&mut con, &["r"], "pause", "2 0.001 999000"));
    assert!(
        (999_000..=1_000_000).contains(&covered),
        "{flavor}: {covered}"
    );
    // A forged ticket, and the first take's, whose token is behind the reservation: none
    // comes back.
    assert_eq!(
        silent(&mut con, &["r"], "give", "2 0.001 1 1"),
        Value::Int(0)
    );
    let stale = format!("2 0.001 1 {}", first[4]);
    assert_eq!(silent(&mut con, &["r"], "give", &stale), Value::Int(0));

    let taken = ints(call(&mut con, &["g"], "take", "3 0.001 TOKENS 3 TICKET"));
    let back = format!("3 0.001 2 {}", taken[4]);
    assert_eq!(
        call(&mut con, &["g"], "give", &back),
        Value::Int(2),
        "{flavor}"
    );
    assert_eq!(int(call(&mut con, &["p"], "pause", "3 0.001 5000")), 5000);
    let multi = ints(call(
        &mut con,
        &["{m}a", "{m}b"],
        "mtake",
        "3 0.001 1 5 0.001 2",
    ));
    assert_eq!(multi[..2], [1, 0], "{flavor}");
    let short = ints(silent(
        &mut con,
        &["{m}a", "{m}b"],
        "mtake",
        "3 0.001 3 5 0.001 2",
    ));
    assert_eq!(short[0], 0, "{flavor}");
    replica.wait_replica_synced(&primary);

    let mut replica_con = replica.conn();
    let read = |con: &mut Connection, key: &str| -> (Option<Vec<u8>>, i64) {
        let value: Option<Vec<u8>> = redis::cmd("GET").arg(key).query(con).unwrap();
        let expiry: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
        (value, expiry)
    };
    for key in ["r", "g", "p", "{m}a", "{m}b"] {
        let on_primary = read(&mut con, key);
        assert!(on_primary.0.is_some(), "{flavor} {key}: {on_primary:?}");
        assert_eq!(
            read(&mut replica_con, key),
            on_primary,
            "{flavor} {key}: replica vs primary"
        );
    }
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut replica_con)
        .unwrap();
    assert!(
        !info.contains("cmdstat_evalsha"),
        "{flavor}: the replica ran the script:\n{info}"
    );
    assert!(
        info.contains("cmdstat_set"),
        "{flavor}: the replica got no SET:\n{info}"
    );

    // The peek on the read-only replica, as EVALSHA_RO, answers what THROTTLE.PEEK does there.
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SOURCE)
        .query(&mut replica_con)
        .unwrap();
    for key in ["r", "p", "missing"] {
        let keys = [key.to_owned()];
        let (module, script): (Vec<i64>, Vec<i64>) = redis::pipe()
            .atomic()
            .add_command(command(
                Runner::Module,
                &sha,
                "peek",
                &keys,
                &["2", "0.001"],
            ))
            .add_command(command(
                Runner::Script,
                &sha,
                "peek",
                &keys,
                &["2", "0.001"],
            ))
            .query(&mut replica_con)
            .unwrap_or_else(|e| panic!("{flavor} peek {key} on the replica: {e}"));
        assert_same_peek(flavor, &module, &script);
    }
    let write = outcome(
        command(
            Runner::Script,
            &sha,
            "take",
            &["not-there".to_owned()],
            &["2", "0.001"],
        )
        .query(&mut replica_con),
    );
    assert!(
        write.contains("READONLY") || write.contains("read only"),
        "{flavor}: {write}"
    );

    // During CLIENT PAUSE WRITE a peek answers at once; a take would wait for the pause.
    let mut other = primary.conn();
    other
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(10_000)
        .arg("WRITE")
        .query(&mut con)
        .unwrap();
    let peeked: Result<Vec<i64>, _> = command(
        Runner::Script,
        &sha,
        "peek",
        &["r".to_owned()],
        &["2", "0.001"],
    )
    .query(&mut other);
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut con).unwrap();
    assert_eq!(
        peeked.map(|p| p[..2].to_vec()).ok(),
        Some(vec![1, 0]),
        "{flavor}: peek during CLIENT PAUSE WRITE"
    );
}

/// On servers with the cached clock the two peeks in one MULTI are equal; on Redis 7.0 they are
/// read a few µs apart (and the module's clock only to the ms), so the reset, over 1000 s away
/// here, may differ by a ms.
fn assert_same_peek(flavor: Flavor, module: &[i64], script: &[i64]) {
    if flavor.has_cached_micros() {
        assert_eq!(
            script, module,
            "{flavor}: peek, script (left) vs module (right)"
        );
    } else {
        assert_eq!(
            script[..3],
            module[..3],
            "{flavor}: peek, script (left) vs module (right)"
        );
        assert!(
            (script[3] - module[3]).abs() <= 1,
            "{flavor}: peek {script:?} vs {module:?}"
        );
    }
}

/// A key written by one is used by the other on a clock that moves between calls, as Redis
/// 7.0's does even inside MULTI (and there the module's clock follows the wall clock only to the
/// millisecond): every call of a sequence on a pair of keys alternates between the module and
/// the script, and must answer what the module alone answers on another pair, to the
/// millisecond. The buckets start half a token into a debt and the tokens are 1000 s and 500 s,
/// so a millisecond either way changes no count and no decision: counts, grants and tokens
/// given back are compared exactly, durations and states to 2 ms.
fn interop_on_a_moving_clock(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let sha = load(&mut con);
    let now = server_now_ns(&mut con);
    for side in ["alone", "mixed"] {
        for (bucket, offset) in [("a", 500 * S), ("b", 250 * S), ("c", 250 * S)] {
            let _: () = redis::cmd("SET")
                .arg(format!("{side}:{bucket}"))
                .arg((now + offset).to_string())
                .query(&mut con)
                .unwrap();
        }
    }
    // (call, the indexes of its reply that are durations in ms; the rest are compared exactly).
    // Every command comes at an even place (the module) and at an odd one (the script).
    let calls: &[(&str, &[usize])] = &[
        ("take a 3 0.001 TICKET", &[2, 3, 4]),
        ("peek a 3 0.001", &[3]),
        ("take a 3 0.001 TOKENS 2 MAXWAIT 2000000 TICKET", &[2, 3, 4]),
        ("take a 3 0.001 MAXWAIT 1000", &[2, 3]),
        ("pause a 3 0.001 10000", &[0]),
        ("give a 3 0.001 2 $2", &[]),
        ("mtake a,b 3 0.001 1 4 0.002 1 MAXWAIT 5000000", &[1, 3, 5]),
        ("pause b 4 0.002 4000000", &[]),
        ("take b 4 0.002 TOKENS 0", &[3]),
        ("mtake b,a 4 0.002 1 3 0.001 1", &[1, 3, 5]),
        ("give a 3 0.001 1 $0", &[]),
        ("peek b 4 0.002", &[3]),
        ("peek a 3 0.001", &[3]),
        // A give-back that only room below full limits, then a granted multi-take by the script.
        ("peek c 4 0.002", &[3]),
        ("take c 4 0.002 TOKENS 2 TICKET", &[2, 3, 4]),
        ("give c 4 0.002 4 $14", &[]),
        ("mtake c,a 4 0.002 1 3 0.001 1 MAXWAIT 5000000", &[1, 3, 5]),
        ("mtake a,c 3 0.001 0 4 0.002 1", &[1, 3, 5]),
    ];
    let mut replies: [Vec<Vec<i64>>; 2] = Default::default();
    for (n, (call, durations)) in calls.iter().enumerate() {
        let mut words = call.split_whitespace();
        let name = words.next().unwrap();
        let letters = words.next().unwrap();
        let rest: Vec<&str> = words.collect();
        // Both calls in one MULTI, so that they are microseconds apart even on a loaded machine.
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (side, runner) in [(0, Runner::Module), (1, runner(2, n))] {
            let keys: Vec<String> = letters
                .split(',')
                .map(|l| format!("{}:{l}", ["alone", "mixed"][side]))
                .collect();
            let args: Vec<String> = rest
                .iter()
                .map(|w| match w.strip_prefix('$') {
                    // The ticket is the fifth element; in µs, so compared to 2000.
                    Some(k) => replies[side][k.parse::<usize>().unwrap()][4].to_string(),
                    None => (*w).to_owned(),
                })
                .collect();
            pipe.add_command(command(runner, &sha, name, &keys, &args));
        }
        let pair: Vec<Value> = pipe
            .query(&mut con)
            .unwrap_or_else(|e| panic!("{flavor} {call}: {e}"));
        for (side, reply) in pair.into_iter().enumerate() {
            let ints = match reply {
                Value::Int(v) => vec![v],
                other => redis::from_redis_value(other).unwrap(),
            };
            replies[side].push(ints);
        }
        let (alone, mixed) = (&replies[0][n], &replies[1][n]);
        let close = alone.len() == mixed.len()
            && alone.iter().zip(mixed).enumerate().all(|(i, (a, m))| {
                let slack = match (durations.contains(&i), name == "take" && i == 4) {
                    (_, true) => 2000,
                    (true, false) => 2,
                    (false, false) => 0,
                };
                (a - m).abs() <= slack
            });
        assert!(
            close,
            "{flavor} call {n} `{call}` by the {:?}: mixed {mixed:?}, module alone {alone:?}",
            runner(2, n)
        );
    }
    // The replies the table was built from, so a run where every call failed alike cannot pass.
    let mut first: Vec<i64> = replies[0].iter().map(|r| r[0]).collect();
    // The pause that a longer debt covers: 1500 s to the next token, less the time since.
    assert!(
        (1_499_000..=1_500_000).contains(&first[4]),
        "{flavor}: {first:?}"
    );
    first[4] = 0;
    assert_eq!(
        first,
        [1, 1, 1, 0, 0, 2, 1, 4_000_000, 1, 0, 0, 1, 1, 1, 1, 3, 1, 1],
        "{flavor}: first elements of the module's replies"
    );
    for bucket in ["a", "b", "c"] {
        let read = |con: &mut Connection, side: &str| -> (i128, i64) {
            let key = format!("{side}:{bucket}");
            let state: Vec<u8> = redis::cmd("GET").arg(&key).query(con).unwrap();
            let expiry: i64 = redis::cmd("PEXPIRETIME").arg(&key).query(con).unwrap();
            (state_of(&state).into(), expiry)
        };
        let (alone, mixed) = (read(&mut con, "alone"), read(&mut con, "mixed"));
        assert!(
            (alone.0 - mixed.0).abs() <= 2_000_000 && (alone.1 - mixed.1).abs() <= 2,
            "{flavor} {bucket}: state and expiry, mixed {mixed:?} vs module alone {alone:?}"
        );
    }
}

/// Quotas for the random run: bursts and rates that refill between steps (a step is a round
/// trip, well under a millisecond) and ones that do not, long decimals, the fastest rate.
const QUOTAS: &[(u64, &str)] = &[
    (3, "1000"),
    (5, "9"),
    (10, "10000"),
    (2, "0.5"),
    (8, "35791394.1"),
    (4, "123.456789123456789123456789"),
    (1, "1000000000"),
    (6, "0.0002777777777777778"),
    (1000, "100000"),
];

/// One random call: the command, its keys (0 or 1 for `a` or `b`) and its arguments.
struct Call {
    name: &'static str,
    keys: Vec<usize>,
    args: Vec<String>,
}

fn random_call(rng: &mut Rng, home: &[usize; 2], tickets: &[(usize, i64)]) -> Call {
    let quota = |rng: &mut Rng, key: usize| -> (u64, String) {
        let (capacity, rate) = if rng.chance(85) {
            QUOTAS[home[key]]
        } else {
            *rng.pick(QUOTAS)
        };
        (capacity, rate.to_owned())
    };
    let tokens = |rng: &mut Rng, capacity: u64| -> u64 {
        match rng.below(4) {
            0 => 0,
            1 => capacity,
            _ => 1 + rng.below(capacity),
        }
    };
    let max_wait = |rng: &mut Rng| -> Option<String> {
        match rng.below(5) {
            0 => None,
            1 => Some("0".to_owned()),
            2 => Some("315360000000".to_owned()),
            _ => Some(rng.below(3000).to_string()),
        }
    };
    let key = rng.below(2) as usize;
    match rng.below(20) {
        0..=7 => {
            let (capacity, rate) = quota(rng, key);
            let mut args = vec![capacity.to_string(), rate];
            let mut options: Vec<Vec<String>> = Vec::new();
            if rng.chance(80) {
                options.push(vec!["TOKENS".into(), tokens(rng, capacity).to_string()]);
            }
            if let Some(ms) = max_wait(rng) {
                options.push(vec!["maxwait".into(), ms]);
            }
            if rng.chance(50) {
                options.push(vec!["TICKET".into()]);
            }
            if options.len() > 1 && rng.chance(50) {
                options.swap(0, 1);
            }
            args.extend(options.into_iter().flatten());
            Call {
                name: "take",
                keys: vec![key],
                args,
            }
        }
        8..=11 => {
            let keys = match rng.below(4) {
                0 => vec![0],
                1 => vec![1],
                2 => vec![0, 1],
                _ => vec![1, 0],
            };
            let mut args = Vec::new();
            for &k in &keys {
                let (capacity, rate) = quota(rng, k);
                let n = tokens(rng, capacity);
                args.extend([capacity.to_string(), rate, n.to_string()]);
            }
            if let Some(ms) = max_wait(rng) {
                args.extend(["MAXWAIT".to_owned(), ms]);
            }
            Call {
                name: "mtake",
                keys,
                args,
            }
        }
        12..=13 => {
            let (capacity, rate) = quota(rng, key);
            let ms = if rng.chance(30) {
                1
            } else {
                1 + rng.below(3000)
            };
            Call {
                name: "pause",
                keys: vec![key],
                args: vec![capacity.to_string(), rate, ms.to_string()],
            }
        }
        14..=16 => {
            let (key, ticket) = match tickets.len() {
                n if n > 0 && rng.chance(80) => {
                    tickets[n - 1 - rng.below(n.min(4) as u64) as usize]
                }
                _ => (key, *rng.pick(&[0, 1, 9_223_372_036_854_775])),
            };
            let (capacity, rate) = quota(rng, key);
            let n = tokens(rng, capacity);
            Call {
                name: "give",
                keys: vec![key],
                args: vec![
                    capacity.to_string(),
                    rate,
                    n.to_string(),
                    ticket.to_string(),
                ],
            }
        }
        _ => {
            let (capacity, rate) = quota(rng, key);
            Call {
                name: "peek",
                keys: vec![key],
                args: vec![capacity.to_string(), rate],
            }
        }
    }
}

/// A seeded random sequence of calls to every command on a pair of keys, the module on one
/// pair and the script on the other, one MULTI per step (so one instant per step): every reply
/// and every stored value and expiry must be equal. Between steps the clock moves on, keys are
/// now and then deleted or set to a state near the clock.
fn random_cross_check(flavor: Flavor) {
    const STEPS: usize = 400;
    let seed = std::env::var("THROTTLE_SCRIPT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7468_726f_7474_6c65 ^ flavor.name().len() as u64);
    let mut rng = Rng(seed);
    let server = Server::start(flavor);
    let mut con = server.conn();
    let sha = load(&mut con);
    let key = |runner: Runner, k: usize| format!("{runner:?}:{}", ["a", "b"][k]);
    let home = [
        rng.below(QUOTAS.len() as u64) as usize,
        rng.below(QUOTAS.len() as u64) as usize,
    ];
    let mut tickets: Vec<(usize, i64)> = Vec::new();
    // (granted takes, denied takes, tokens given back, granted multi-takes, denied ones)
    let mut seen = [0u64; 5];

    for step in 0..STEPS {
        match rng.below(25) {
            0 => {
                let _: () = redis::cmd("DEL")
                    .arg(&[key(Runner::Module, 0), key(Runner::Module, 1)][..])
                    .arg(&[key(Runner::Script, 0), key(Runner::Script, 1)][..])
                    .query(&mut con)
                    .unwrap();
            }
            1 => {
                let k = rng.below(2) as usize;
                let offset = rng.below(6 * S as u64) as i128 - S;
                let state = (server_now_ns(&mut con) + offset).to_string();
                for runner in [Runner::Module, Runner::Script] {
                    let _: () = redis::cmd("SET")
                        .arg(key(runner, k))
                        .arg(&state)
                        .query(&mut con)
                        .unwrap();
                }
            }
            _ => {}
        }
        let calls: Vec<Call> = (0..1 + rng.below(4))
            .map(|_| random_call(&mut rng, &home, &tickets))
            .collect();
        let mut pipe = redis::pipe();
        pipe.atomic();
        for runner in [Runner::Module, Runner::Script] {
            for call in &calls {
                let keys: Vec<String> = call.keys.iter().map(|&k| key(runner, k)).collect();
                pipe.add_command(command(runner, &sha, call.name, &keys, &call.args));
            }
        }
        for runner in [Runner::Module, Runner::Script] {
            for k in 0..2 {
                pipe.cmd("GET").arg(key(runner, k));
                pipe.cmd("PEXPIRETIME").arg(key(runner, k));
            }
        }
        let what = |n: usize| {
            let call = &calls[n];
            format!(
                "{flavor} seed {seed} step {step} call {n}: {} {:?} {}",
                call.name,
                call.keys,
                call.args.join(" ")
            )
        };
        let results: Vec<Value> = pipe
            .query(&mut con)
            .unwrap_or_else(|e| panic!("{}: {e}", what(0)));
        let (module, rest) = results.split_at(calls.len());
        let (script, states) = rest.split_at(calls.len());
        for (n, call) in calls.iter().enumerate() {
            assert_eq!(
                script[n],
                module[n],
                "{}: script (left) vs module (right)",
                what(n)
            );
            let ints: Vec<i64> = match &module[n] {
                Value::Int(v) => vec![*v],
                other => redis::from_redis_value(other.clone())
                    .unwrap_or_else(|e| panic!("{}: {e}", what(n))),
            };
            match call.name {
                "take"
                    if call.args.iter().any(|a| a == "TOKENS" || a == "maxwait")
                        || ints[0] == 0 =>
                {
                    seen[if ints[0] == 1 { 0 } else { 1 }] += 1;
                    if ints.len() == 5 && ints[4] != 0 {
                        tickets.push((call.keys[0], ints[4]));
                    }
                }
                "take" if ints.len() == 5 && ints[4] != 0 => tickets.push((call.keys[0], ints[4])),
                "give" => seen[2] += ints[0] as u64,
                "mtake" => seen[if ints[0] == 1 { 3 } else { 4 }] += 1,
                _ => {}
            }
        }
        assert_eq!(
            states[4..],
            states[..4],
            "{flavor} seed {seed} step {step}: GET and PEXPIRETIME of a and b, script (left) vs \
             module (right) after {:?}",
            calls
                .iter()
                .map(|c| format!("{} {:?} {}", c.name, c.keys, c.args.join(" ")))
                .collect::<Vec<_>>()
        );
    }
    // The run reached every outcome it is meant to compare.
    assert!(seen.iter().all(|&n| n > 0), "{flavor} seed {seed}: (granted takes, denied, given back, granted multi-takes, denied) = {seen:?}");
}

macro_rules! per_server {
    ($($case:ident: [$($flavor:ident),*]),* $(,)?) => {
        $( mod $case { $( #[test] #[allow(non_snake_case)] fn $flavor() {
            super::$case(::throttle_testkit::Flavor::$flavor)
        } )* } )*
    };
}

// Redis 7.0 has no cached clock: only the checks that depend on no clock run there.
per_server! {
    same_replies_state_and_expiry: [Redis82, Valkey81, Valkey91],
    same_replies_on_a_clock_past_2200: [Redis82, Valkey81, Valkey91],
    random_cross_check: [Redis82, Valkey81, Valkey91],
    interop_on_a_moving_clock: [Redis70, Redis82, Valkey81, Valkey91],
    same_errors: [Redis70, Redis82, Valkey81, Valkey91],
    replicates_effects_not_the_script: [Redis70, Redis82, Valkey81, Valkey91],
}
