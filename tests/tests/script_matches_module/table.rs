//! The table of cases: what each bucket holds first, then the calls, step by step, that the
//! module, the script and the two alternating must answer alike.

use super::script::{AHEAD, S};

const DAY: i128 = 86_400 * S;
/// The earliest instant a bucket holds (2020-01-01), as digits.
const EARLIEST: &str = "1577836800000000000";

/// What a bucket's key holds before a case's first call.
#[derive(Clone, Copy, Debug)]
pub enum Before {
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
/// number `k` (counting from 0 over every step), `$k.j` for the ticket of key `j` (from 0, in
/// the call's key order) replied by an MTAKE ... TICKET, `@k` for the slot id replied by the
/// call number `k` (a granted TAKE ... INFLIGHT: its last integer), and `#k` for the id in a
/// TAKE ... LINE reply (the slot's id when granted, the waiter's ticket in line: the integer
/// before the place). A step that is only `sleep ms` waits that long (a lease or a place runs
/// out; on a clock clamped to the year 2200 nothing runs out).
pub struct Case {
    pub before: &'static [Before],
    pub steps: &'static [&'static [&'static str]],
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
pub const CASES: &[Case] = &[
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
    // ---- THROTTLE.MTAKE ... TICKET: one ticket per key after the pairs, each key's state in
    // µs, rounded down (b is 999 ns past a µs, at 1e9/s); 0 for a denial, for a key asked for
    // 0, for an inspection; in any case, before or after MAXWAIT.
    case!(
        &[Missing, FromNow(999)],
        &[
            "mtake a,b 10 10 1 1000000 1000000000 3 TICKET",
            "mtake a,b 10 10 0 1000000 1000000000 1 ticket",
            "mtake b,a 1000000 1000000000 1 10 10 1 MAXWAIT 5 Ticket",
            "mtake a 10 10 1 TICKET MAXWAIT 0",
            "mtake a,b 10 10 10 1000000 1000000000 1 TICKET",
            "mtake a,b 10 10 0 1000000 1000000000 0 TICKET",
        ],
    ),
    // The wait is the longest: each ticket is its key's state after taking as of then; denied
    // within a shorter MAXWAIT, every ticket 0. With FLOOR too.
    case!(
        &[Missing, FromNow(2 * S + 1)],
        &[
            "mtake a,b 5 1 1 1 1 1 MAXWAIT 5000 TICKET",
            "mtake a,b 5 1 1 1 1 1 TICKET MAXWAIT 1000",
            "mtake a 5 1 1 FLOOR 2 TICKET",
            "mtake a,b 5 1 1 1 1 0 TICKET FLOOR 3 0",
        ],
    ),
    // GIVE with MTAKE tickets: each key's tokens back while nothing was taken after it; a take
    // on b keeps b's ticket from giving back, a's still gives.
    Case {
        before: &[Missing, Missing],
        steps: &[
            &["mtake a,b 10 10 4 6 3 2 TICKET"],
            &["give a 10 10 4 $0.0", "take b 6 3", "give b 6 3 2 $0.1", "peek a 10 10", "peek b 6 3"],
        ],
    },
    // Two reservations behind an empty b: the first's tickets give nothing (the second took
    // after it on both keys), the second's give back once, on each key in its own key order.
    Case {
        before: &[Missing, FromNow(5 * S)],
        steps: &[
            &["mtake a,b 10 1 2 5 1 1 MAXWAIT 10000 TICKET", "mtake b,a 5 1 1 10 1 1 MAXWAIT 10000 TICKET"],
            &[
                "give a 10 1 2 $0.0",
                "give b 5 1 1 $0.1",
                "give a 10 1 1 $1.1",
                "give b 5 1 1 $1.0",
                "give b 5 1 1 $1.0",
                "peek a 10 1",
                "peek b 5 1",
            ],
        ],
    },
    // ---- THROTTLE.TAKE's fast path in the Lua (a missing key or an 8-byte state of a bucket
    // that fills within 2^51 ns), branch by branch: inspect, burst, MAXWAIT below, at and
    // above the wait, TICKET, FLOOR; a state behind the clock, one in debt; and where it hands
    // over to the general path: a debt past 2^51 ns, a fill past it. (States that are not a
    // bucket, which the fast path hands over too, are in `errors.rs`.)
    case!(
        &[Missing],
        &[
            "take a 10 10 TOKENS 0",
            "take a 10 10 TOKENS 9 TICKET",
            "take a 10 10 TOKENS 2 FLOOR 3",
            "take a 10 10 FLOOR 0 TOKENS 1",
            "take a 10 10 MAXWAIT 99",
            "take a 10 10 MAXWAIT 100 TICKET",
            "take a 10 10 TOKENS 3 MAXWAIT 315360000000",
        ],
    ),
    case!(&[FromNow(-S)], &["take a 10 10 TOKENS 3", "take a 10 10 TOKENS 0 TICKET"]),
    case!(&[FromNow(2 * S + 7)], &["take a 10 10", "take a 10 10 MAXWAIT 1100", "take a 10 10 MAXWAIT 2000 TICKET"]),
    case!(&[FromNow(27 * DAY)], &["take a 10 10 MAXWAIT 315360000000", "take a 10 10 TOKENS 0"]),
    case!(&[Missing], &["take a 1000000 0.1 TOKENS 5 TICKET", "take a 1000000 0.1 MAXWAIT 20"]),
    // ---- The supplier's pushback meeting the other commands (the hostile tester's cases).
    // A cut too deep for the bucket to hold the tokens: the wait is until the recovering rate
    // holds them, and a reservation is taken as of then (the next one a cut token later).
    case!(
        &[Missing],
        &["cut a 1 10 1 0.5 30000", "take a 1 10", "take a 1 10 MAXWAIT 30000", "take a 1 10 MAXWAIT 60000", "peek a 1 10"],
    ),
    case!(
        &[Missing],
        &[
            "cut a 10 10 1 0.5 30000",
            "take a 10 10 TOKENS 6",
            "take a 10 10 FLOOR 5",
            "take a 10 10 TOKENS 4",
            "mtake a 10 10 6",
            "mtake a 10 10 1 FLOOR 5",
            "take a 10 10 TOKENS 6 MAXWAIT 10000 TICKET",
        ],
    ),
    // No reservation leaves a state more than 20 years ahead: 5 tokens at 1 % are refused, 4
    // are granted within it.
    case!(
        &[Missing],
        &[
            "cut a 300 0.000001 1 0.01 315360000000",
            "take a 300 0.000001 TOKENS 5 MAXWAIT 315360000000",
            "mtake a 300 0.000001 5 MAXWAIT 315360000000",
            "mtake a 300 0.000001 4 MAXWAIT 315360000000 TICKET",
            "peek a 300 0.000001",
            "take a 300 0.000001 TOKENS 0",
        ],
    ),
    // A give-back never ends a pause: a reservation, a pause by another replica, the reserved
    // call gives back inside the pause and only what lies after the pause's state comes back.
    Case {
        before: &[Missing],
        steps: &[
            &["take a 10 10 TOKENS 10", "take a 10 10 TOKENS 10 MAXWAIT 1000 TICKET", "pause a 10 10 1000"],
            &["give a 10 10 10 $1", "take a 10 10", "peek a 10 10"],
        ],
    },
    // A cut after a cut: the stricter factor and the later recovery stay (a cut inside the
    // first one's pause changes nothing).
    Case {
        before: &[Missing],
        steps: &[&["cut a 10 10 1 0.01 600000"], &["cut a 10 10 1 1 1", "peek a 10 10"]],
    },
    // A floored take reserves only tokens that are there now: within MAXWAIT and with the
    // tokens there now, granted for when the floor is there too; a ms short of the wait,
    // denied; with too few tokens now, denied whatever the MAXWAIT. The fast path (a bucket
    // that fills within 2^51 ns), then the general path (one that does not), then MTAKE, key
    // by key, and a cut bucket whose first token is a pause away.
    case!(
        &[Missing],
        &[
            "take a 10 10 TOKENS 5",
            "take a 10 10 TOKENS 2 FLOOR 5 MAXWAIT 199",
            "take a 10 10 TOKENS 2 FLOOR 5 MAXWAIT 200 TICKET",
            "take a 10 10 TOKENS 2 FLOOR 5 MAXWAIT 1000",
            "take a 10 10 TOKENS 2 FLOOR 1 MAXWAIT 60000",
            "take a 10 10 TOKENS 1",
        ],
    ),
    case!(
        &[Missing],
        &[
            "take a 10 0.000001 TOKENS 5",
            "take a 10 0.000001 TOKENS 2 FLOOR 5 MAXWAIT 1999999999",
            "take a 10 0.000001 TOKENS 2 FLOOR 5 MAXWAIT 2000000000 TICKET",
            "take a 10 0.000001 TOKENS 2 FLOOR 5 MAXWAIT 315360000000",
            "take a 10 0.000001 TOKENS 2 FLOOR 1 MAXWAIT 315360000000",
            "mtake a 10 0.000001 1 MAXWAIT 315360000000 FLOOR 8",
            "take a 10 0.000001 TOKENS 1",
        ],
    ),
    case!(
        &[Missing, FromNow(S)],
        &[
            "take a 10 10 TOKENS 5",
            "mtake a,b 10 10 2 10 10 1 MAXWAIT 1000 FLOOR 5 0 TICKET",
            "mtake a,b 10 10 2 10 10 1 MAXWAIT 1000 FLOOR 0 5",
            "mtake a,b 10 10 2 10 10 1 MAXWAIT 100 FLOOR 5 0",
            "mtake b,a 10 10 1 10 10 2 FLOOR 0 1 MAXWAIT 5000 TICKET",
            "peek b 10 10",
        ],
    ),
    // A floored bucket of an MTAKE is never left in debt: a long wait on another bucket
    // would take its tokens as of then, past its fill: denied, and granted without the floor.
    case!(
        &[Missing, Missing],
        &[
            "take a 10 1 TOKENS 10",
            "mtake a,b 10 1 1 10 10 2 MAXWAIT 5000 FLOOR 0 5 TICKET",
            "mtake a,b 10 1 1 10 10 2 MAXWAIT 5000 FLOOR 0 0 TICKET",
            "peek b 10 10",
        ],
    ),
    case!(
        &[Missing],
        &[
            "cut a 10 10 1 0.5 30000",
            "take a 10 10 FLOOR 5 MAXWAIT 60000",
            "mtake a 10 10 1 MAXWAIT 60000 FLOOR 5",
            "take a 10 10 TOKENS 0",
        ],
    ),
    // FLOOR 0 is no floor: it may reserve, alone and in MTAKE.
    case!(
        &[Missing, Missing],
        &[
            "take a 2 1 TOKENS 2",
            "take a 2 1 FLOOR 0 MAXWAIT 1000",
            "mtake a,b 2 1 1 2 1 1 MAXWAIT 2000 FLOOR 0 0",
            "mtake a,b 2 1 1 2 1 1 FLOOR 0 0 MAXWAIT 0",
        ],
    ),
    // ---- Calls in flight: TAKE ... INFLIGHT n LEASE ms, RENEW, RELEASE, SLOTS.
    case!(
        &[Missing],
        &[
            "take a 100 10 INFLIGHT 2 LEASE 1000",
            "take a 100 10 INFLIGHT 2 LEASE 2000",
            "take a 100 10 INFLIGHT 2 LEASE 1000",
            "slots a 100 10",
            "take a 100 10 TOKENS 3 TICKET MAXWAIT 100 inflight 3 lease 500",
            "take a 100 10 TOKENS 0 TICKET INFLIGHT 3 LEASE 500",
            "slots a 100 10",
        ],
    ),
    // A slot with no tokens on a full bucket; the tokens short (denied, no slot); a reservation
    // with a slot; a floor holding a take back.
    case!(&[Missing], &["take a 10 10 TOKENS 0 INFLIGHT 1 LEASE 700", "take a 10 10 TOKENS 0"]),
    case!(
        &[FromNow(10 * S)],
        &[
            "take a 100 10 INFLIGHT 1 LEASE 1000",
            "take a 100 10 MAXWAIT 200 INFLIGHT 1 LEASE 1000",
            "take a 100 10 MAXWAIT 200 INFLIGHT 1 LEASE 1000",
            "take a 100 10 FLOOR 5 INFLIGHT 2 LEASE 1000",
            "slots a 100 10",
        ],
    ),
    // ---- MTAKE ... INFLIGHT n LEASE ms: the slot in the first key, with every bucket's tokens
    // or nothing; denied for slots (the wait until the first lease ends); a first key of 0
    // tokens holding the slot (its ticket 0); all tokens 0.
    case!(
        &[Missing, Missing],
        &[
            "mtake a,b 100 10 1 10 10 1 INFLIGHT 2 LEASE 1000",
            "mtake a,b 100 10 1 10 10 1 TICKET INFLIGHT 2 LEASE 2000",
            "mtake a,b 100 10 1 10 10 1 INFLIGHT 2 LEASE 1000",
            "slots a 100 10",
            "slots b 10 10",
            "mtake b,a 10 10 0 100 10 1 ticket inflight 1 lease 500",
            "mtake b,a 10 10 0 100 10 0 TICKET INFLIGHT 1 LEASE 500",
            "mtake a,b 100 10 0 10 10 0 INFLIGHT 3 LEASE 700",
            "slots a 100 10",
            "slots b 10 10",
        ],
    ),
    // The tokens short (denied, no slot); a reservation with a slot; a floor holding it back;
    // one key (its reply as long as one with a ticket).
    case!(
        &[FromNow(10 * S), Missing],
        &[
            "mtake a,b 100 10 1 10 10 1 INFLIGHT 1 LEASE 1000",
            "mtake a,b 100 10 1 10 10 1 MAXWAIT 200 INFLIGHT 1 LEASE 1000",
            "mtake a,b 100 10 1 10 10 1 MAXWAIT 200 INFLIGHT 1 LEASE 1000",
            "mtake b,a 10 10 5 100 10 1 FLOOR 5 0 INFLIGHT 2 LEASE 1000",
            "mtake b 10 10 1 INFLIGHT 2 LEASE 1000",
            "mtake b 10 10 1 TICKET INFLIGHT 2 LEASE 1000",
            "slots a 100 10",
            "slots b 10 10",
        ],
    ),
    // RENEW and RELEASE on the first key by the id an MTAKE replied; not on the second.
    Case {
        before: &[Missing, Missing],
        steps: &[
            &["mtake a,b 10 10 1 10 10 1 INFLIGHT 1 LEASE 1000"],
            &[
                "renew a 10 10 @0 5000",
                "release b 10 10 @0",
                "slots a 10 10",
                "mtake a,b 10 10 1 10 10 1 INFLIGHT 1 LEASE 1000",
                "release a 10 10 @0",
                "mtake a,b 10 10 1 10 10 1 INFLIGHT 1 LEASE 1000",
                "slots a 10 10",
            ],
        ],
    },
    // Renew and release by the ids replied; a late release and renewal; the last release of a
    // full bucket deletes it, of one in debt leaves its 8 bytes.
    Case {
        before: &[Missing, Missing],
        steps: &[
            &[
                "take a 10 10 TOKENS 0 INFLIGHT 2 LEASE 1000",
                "take a 10 10 TOKENS 0 INFLIGHT 2 LEASE 1000",
                "take b 10 10 TOKENS 4 INFLIGHT 1 LEASE 60000",
            ],
            &[
                "renew a 10 10 @0 5000",
                "release a 10 10 @1",
                "release a 10 10 @1",
                "renew a 10 10 @1 5000",
                "renew a 10 10 0 5000",
                "slots a 10 10",
                "release b 10 10 @2",
            ],
            &["release a 10 10 @0", "slots a 10 10", "slots b 10 10"],
        ],
    },
    // RELEASE ... INFLIGHT n: the same reply and state as without (what it announces is
    // announcements.rs's); a slot not held, at its cap or not.
    Case {
        before: &[Missing, Missing],
        steps: &[
            &[
                "take a 10 10 TOKENS 2 INFLIGHT 2 LEASE 1000",
                "take a 10 10 TOKENS 0 INFLIGHT 2 LEASE 1000",
            ],
            &[
                "release a 10 10 @0 INFLIGHT 2",
                "release a 10 10 @0 INFLIGHT 2",
                "release a 10 10 @1 inflight 1",
                "slots a 10 10",
            ],
        ],
    },
    // Every other command keeps the slots (and the key alive while a lease runs); a pause
    // stored with them.
    Case {
        before: &[Missing, Missing],
        steps: &[
            &["take a 10 10 TICKET INFLIGHT 4 LEASE 60000", "pause b 10 10 500"],
            &[
                "take a 10 10 TOKENS 2",
                "give a 10 10 1 $0",
                "pause a 10 10 300",
                "take a 10 10 TOKENS 0 INFLIGHT 4 LEASE 30000",
                "cut a 10 10 200 0.5 1000",
                "sync a 10 10 3 0",
                "debit a 10 10 2",
                "mtake a,b 10 10 1 10 10 0",
                "take b 10 10 TOKENS 0 INFLIGHT 1 LEASE 1000",
                "peek a 10 10",
                "slots a 10 10",
                "slots b 10 10",
            ],
        ],
    },
    // ---- THROTTLE.RESUME: ends a pause and a cut, keeping the state and the slots held;
    // nothing to end (a missing key, a plain bucket, a second resume) writes nothing.
    case!(&[Missing], &["resume a 10 10", "peek a 10 10"]),
    case!(&[FromNow(3 * S)], &["resume a 10 10", "peek a 10 10"]),
    case!(
        &[Missing],
        &[
            "take a 10 10 TOKENS 3",
            "pause a 10 10 5000",
            "peek a 10 10",
            "resume a 10 10",
            "peek a 10 10",
            "resume a 10 10",
            "take a 10 10 MAXWAIT 10000",
        ],
    ),
    case!(
        &[FromNow(2 * S)],
        &["cut a 10 10 1000 0.5 30000", "resume a 10 10", "peek a 10 10", "take a 10 10 MAXWAIT 5000"],
    ),
    // A cut whose pause is over: the cut alone is ended.
    Case {
        before: &[Missing],
        steps: &[&["cut a 10 10 1 0.3333 600000"], &["peek a 10 10", "resume a 10 10", "peek a 10 10"]],
    },
    // Slots held across a pause and a resume; a full bucket with slots keeps them.
    Case {
        before: &[Missing],
        steps: &[
            &[
                "take a 10 10 INFLIGHT 3 LEASE 60000",
                "take a 10 10 TOKENS 0 INFLIGHT 3 LEASE 30000",
                "pause a 10 10 2000",
                "slots a 10 10",
                "resume a 10 10",
                "slots a 10 10",
                "peek a 10 10",
            ],
            &["release a 10 10 @0", "slots a 10 10", "resume a 10 10"],
        ],
    },
    case!(
        &[Missing],
        &["take a 10 10 TOKENS 0 INFLIGHT 1 LEASE 60000", "cut a 10 10 1 0.5 1000", "resume a 10 10", "slots a 10 10"],
    ),
    // ---- THROTTLE.QUOTA: a quota kept at the server is what every command computes with,
    // whatever its caller sends; the same again writes nothing; CLEAR gives the key back.
    case!(&[Missing], &["quota a 20 20", "peek a 10 10", "take a 10 10 TOKENS 10", "take a 10 10 TOKENS 6", "take a 1 1", "quota a 20 20", "quota a 20 020.0"]),
    case!(
        &[FromNow(S / 2)],
        &["quota a 4 2", "peek a 10 10", "take a 10 10 MAXWAIT 5000", "quota a 10 10 CLEAR", "peek a 10 10"],
    ),
    case!(&[Missing], &["quota a 10 10 clear", "quota a 8 0.0002777777777777778", "peek a 8 9", "quota a 8 9 CLEAR", "peek a 8 9"]),
    // Kept through a pause, a cut, slots and a full bucket (no TTL, not deleted).
    Case {
        before: &[Missing],
        steps: &[
            &["quota a 5 1000", "take a 10 10 INFLIGHT 2 LEASE 60000 TICKET"],
            &[
                "pause a 10 10 2000",
                "cut a 10 10 1 0.5 1000",
                "give a 10 10 1 $1",
                "sync a 10 10 2 1000",
                "debit a 10 10 1",
                "slots a 10 10",
                "release a 10 10 @1 INFLIGHT 2",
                "renew a 10 10 @1 1000",
                "resume a 10 10",
                "mtake a,b 10 10 1 10 10 1 MAXWAIT 5000",
                "peek a 10 10",
                "peek b 10 10",
            ],
            &["quota a 5 1000 CLEAR", "peek a 10 10"],
        ],
    },
    // ---- The line for a slot: TAKE ... INFLIGHT n LEASE ms LINE place_ms [WAITER id], and
    // RELEASE's hand-off. Cap 1: a holder, three waiters (with TICKET, with 2 tokens, a shorter
    // place); a plain take and MTAKE do not overtake them; a look renews a place; releases hand
    // the slot in order; other commands carry the line over.
    Case {
        before: &[Missing],
        steps: &[
            &["take a 10 1 INFLIGHT 1 LEASE 60000 LINE 5000"],
            &[
                "take a 10 1 INFLIGHT 1 LEASE 60000 LINE 5000",
                "take a 10 1 TICKET INFLIGHT 1 LEASE 60000 LINE 5000",
                "take a 10 1 TOKENS 2 INFLIGHT 1 LEASE 60000 LINE 4000",
            ],
            &[
                "take a 10 1 INFLIGHT 1 LEASE 60000",
                "mtake a 10 1 1 INFLIGHT 1 LEASE 60000",
                "mtake a 10 1 1 INFLIGHT 2 LEASE 60000",
                "take a 10 1 INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #2",
                "slots a 10 1",
            ],
            &[
                "release a 10 1 #0 INFLIGHT 1",
                "take a 10 1 INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #1",
                "take a 10 1 TICKET INFLIGHT 1 LEASE 60000 line 5000 waiter #2",
            ],
            &[
                "release a 10 1 #1",
                "take a 10 1 TICKET INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #2",
                "take a 10 1 TOKENS 2 INFLIGHT 1 LEASE 60000 LINE 4000 WAITER #3",
            ],
            &[
                "pause a 10 1 100",
                "renew a 10 1 #2 30000",
                "debit a 10 1 1",
                "take a 10 1 INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #3",
                "release a 10 1 #2 INFLIGHT 1",
                "take a 10 1 TOKENS 2 TICKET INFLIGHT 1 LEASE 60000 LINE 4000 WAITER #3",
            ],
        ],
    },
    // The line's pace: cap 2, five waiters. Before any release a look is told the first
    // lease's end; each release teaches the line how much lease its holders left unused, and
    // from then each look is told its turn (reason 52): the held slots in the order they
    // should free, a round of them per two places.
    Case {
        before: &[Missing],
        steps: &[
            &["take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000", "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000"],
            &["take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000", "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000", "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000", "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000", "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000"],
            &["sleep 20"],
            &[
                "release a 100 100 #0 INFLIGHT 2",
                "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000 WAITER #3",
                "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000 WAITER #4",
                "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000 WAITER #5",
                "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000 WAITER #6",
            ],
            &["sleep 10"],
            &[
                "release a 100 100 #1 INFLIGHT 2",
                "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000 WAITER #4",
                "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000 WAITER #5",
                "take a 100 100 INFLIGHT 2 LEASE 1000 LINE 4000 WAITER #6",
                "release a 100 100 #6",
                "slots a 100 100",
            ],
        ],
    },
    // A waiter whose tokens must wait (one a second, reserved with MAXWAIT): handed the slot at
    // the release, its tokens taken then; its lease runs from when they are there. Without
    // MAXWAIT a caller is held back by its tokens, not in line. TOKENS 0 waits for a slot alone.
    Case {
        before: &[Missing],
        steps: &[
            &["take a 1 1 MAXWAIT 5000 INFLIGHT 1 LEASE 60000 LINE 5000"],
            &[
                "take a 1 1 INFLIGHT 1 LEASE 60000 LINE 5000",
                "take a 1 1 TICKET MAXWAIT 5000 INFLIGHT 1 LEASE 60000 LINE 5000",
                "take a 1 1 TOKENS 0 MAXWAIT 5000 INFLIGHT 1 LEASE 60000 LINE 5000",
            ],
            &[
                "release a 1 1 #0 INFLIGHT 1",
                "take a 1 1 TICKET MAXWAIT 5000 INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #2",
                "slots a 1 1",
                "take a 1 1 TOKENS 0 MAXWAIT 5000 INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #3",
            ],
            &[
                "release a 1 1 #2 INFLIGHT 1",
                "take a 1 1 TOKENS 0 MAXWAIT 5000 INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #3",
            ],
        ],
    },
    // A waiter whose place ran out (LINE 1) is not in line when it looks: it joins again. The
    // holder's lease ran out: the next look hands the slot to the head (with TICKET: the state
    // after its take), and a plain take still waits behind the rest of the line.
    Case {
        before: &[Missing],
        steps: &[
            &["take a 10 10 INFLIGHT 1 LEASE 30 LINE 5000"],
            &[
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 1",
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000 TICKET",
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000",
            ],
            &["sleep 60"],
            &[
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #1",
                "take a 10 10 TICKET INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #2",
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #3",
                "take a 10 10 INFLIGHT 1 LEASE 60000",
                "release a 10 10 #2",
            ],
        ],
    },
    // Cap 2: leases and places run out together; then plain takes are granted (and stored:
    // the second waits behind the first).
    Case {
        before: &[Missing],
        steps: &[
            &[
                "take a 2 1 MAXWAIT 5000 INFLIGHT 2 LEASE 20 LINE 10",
                "take a 2 1 MAXWAIT 5000 INFLIGHT 2 LEASE 20 LINE 10",
                "take a 2 1 MAXWAIT 5000 INFLIGHT 2 LEASE 20 LINE 10",
            ],
            &["sleep 60"],
            &[
                "take a 2 1 MAXWAIT 5000 INFLIGHT 2 LEASE 60000",
                "take a 2 1 MAXWAIT 5000 INFLIGHT 2 LEASE 60000",
                "take a 2 1 MAXWAIT 5000 INFLIGHT 2 LEASE 60000",
            ],
        ],
    },
    // MTAKE ... LINE: a call of two keys waits in the first key's line for the slot alone,
    // beside one-key waiters (a call whose tokens are short does not join; a look renews its
    // place; a call without LINE does not overtake); handed the slot, its look takes both keys'
    // tokens (with TICKET, its own tickets). A handed look whose tokens are not there passes
    // the slot on to the next waiter at once.
    Case {
        before: &[Missing, Missing],
        steps: &[
            &["mtake a,b 10 1 1 10 1 1 INFLIGHT 1 LEASE 60000 LINE 5000"],
            &[
                "mtake a,b 10 1 1 10 1 1 INFLIGHT 1 LEASE 60000 LINE 5000",
                "take a 10 1 INFLIGHT 1 LEASE 60000 LINE 5000",
                "mtake a,b 10 1 1 10 1 10 INFLIGHT 1 LEASE 60000 LINE 5000",
            ],
            &[
                "mtake a,b 10 1 1 10 1 1 INFLIGHT 1 LEASE 60000 LINE 4000 WAITER #1",
                "mtake a,b 10 1 1 10 1 1 INFLIGHT 1 LEASE 60000",
            ],
            &[
                "release a 10 1 #0 INFLIGHT 1",
                "mtake a,b 10 1 1 10 1 1 TICKET INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #1",
                "mtake a,b 10 1 1 10 1 1 INFLIGHT 1 LEASE 60000 LINE 5000",
                "take a 10 1 INFLIGHT 1 LEASE 60000 LINE 5000",
            ],
            &[
                "release a 10 1 #1 INFLIGHT 1",
                "take a 10 1 INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #2",
                "debit b 10 1 10",
                "release a 10 1 #2 INFLIGHT 1",
                "mtake a,b 10 1 1 10 1 1 INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #8",
                "take a 10 1 INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #9",
                "slots a 10 1",
                "peek b 10 1",
            ],
        ],
    },
    // Cap 2, both leases run out: a LINE take hands both slots to the waiters, and is itself
    // denied for its tokens (the hand-offs are stored); the waiters find their slots.
    Case {
        before: &[Missing],
        steps: &[
            &[
                "take a 3 1 MAXWAIT 3000 INFLIGHT 2 LEASE 20 LINE 5000",
                "take a 3 1 MAXWAIT 3000 INFLIGHT 2 LEASE 20 LINE 5000",
                "take a 3 1 MAXWAIT 3000 INFLIGHT 2 LEASE 100 LINE 5000",
                "take a 3 1 MAXWAIT 3000 INFLIGHT 2 LEASE 100 LINE 5000",
            ],
            &["sleep 60"],
            &[
                "take a 3 1 TICKET INFLIGHT 2 LEASE 100 LINE 5000",
                "take a 3 1 TICKET MAXWAIT 3000 INFLIGHT 2 LEASE 100 LINE 5000 WAITER #2",
                "take a 3 1 TICKET MAXWAIT 9000 INFLIGHT 2 LEASE 100 LINE 5000 WAITER #3",
            ],
        ],
    },
    // A line with no slot held (the holder's lease ran out, nobody looked): pause, cut, sync,
    // give, resume and a kept quota carry it over; the waiters then find their slots.
    Case {
        before: &[Missing],
        steps: &[
            &["take a 10 10 INFLIGHT 1 LEASE 20 LINE 5000 TICKET"],
            &[
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000",
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000",
            ],
            &["sleep 60"],
            &["pause a 10 10 1000"],
            &["cut a 10 10 1000 0.5 30000", "sync a 10 10 3 1000", "give a 10 10 1 $0"],
            &["resume a 10 10", "quota a 5 1", "slots a 10 10", "peek a 10 10"],
            &[
                "take a 10 10 INFLIGHT 3 LEASE 60000 LINE 5000 WAITER #1",
                "take a 10 10 INFLIGHT 3 LEASE 60000 LINE 5000 WAITER #2",
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000",
            ],
            &["quota a 5 1 CLEAR"],
        ],
    },
    // A waiter handed its slot at a release that looks only later: granted with no ticket (its
    // tokens were taken at the hand-off), and its slot's lease renewed to a whole one from the
    // look (written, so the expiry moves); a second look at the same instant, and one with a
    // shorter LEASE (its lease not started yet, as it reads it), write nothing.
    Case {
        before: &[Missing],
        steps: &[
            &[
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000",
                "take a 10 10 TICKET INFLIGHT 1 LEASE 1000 LINE 5000",
            ],
            &["release a 10 10 #0"],
            &["sleep 20"],
            &[
                "take a 10 10 TICKET INFLIGHT 1 LEASE 1000 LINE 5000 WAITER #1",
                "slots a 10 10",
                "take a 10 10 TICKET INFLIGHT 1 LEASE 1000 LINE 5000 WAITER #1",
            ],
            &[
                "take a 10 10 TICKET INFLIGHT 1 LEASE 10 LINE 5000 WAITER #1",
                "slots a 10 10",
            ],
        ],
    },
    // A waiter that gives up releases its ticket: it leaves the line (1), and a second release
    // of it finds nothing (0); the last waiter's leaving drops the line. With the holder's lease
    // run out, a leaving hands nothing: the next look does.
    Case {
        before: &[Missing],
        steps: &[
            &[
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000",
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000",
                "take a 10 10 TOKENS 2 INFLIGHT 1 LEASE 60000 LINE 4000",
            ],
            &["release a 10 10 #1", "slots a 10 10"],
            &["release a 10 10 #1 INFLIGHT 1", "take a 10 10 INFLIGHT 1 LEASE 60000"],
            &["release a 10 10 #2 INFLIGHT 1", "slots a 10 10"],
            &["release a 10 10 #2", "release a 10 10 #0 INFLIGHT 1"],
        ],
    },
    Case {
        before: &[Missing],
        steps: &[
            &[
                "take a 10 10 INFLIGHT 1 LEASE 20 LINE 5000",
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000",
                "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000",
            ],
            &["sleep 60"],
            &["release a 10 10 #1", "slots a 10 10"],
            &["take a 10 10 TICKET INFLIGHT 1 LEASE 60000 LINE 5000 WAITER #2"],
            &["release a 10 10 #2", "release a 10 10 #2"],
        ],
    },
    // A waiter whose place outlives every slot's lease keeps the key alive until its place
    // ends (the expiry compared after each step); once the holder's lease ran out the key is
    // still there, and the waiter's look finds its slot.
    Case {
        before: &[Missing],
        steps: &[
            &[
                "take a 10 10 INFLIGHT 1 LEASE 50 LINE 10000",
                "take a 10 10 INFLIGHT 1 LEASE 50 LINE 10000",
            ],
            &["sleep 80"],
            &["peek a 10 10", "slots a 10 10"],
            &["take a 10 10 TICKET INFLIGHT 1 LEASE 50 LINE 10000 WAITER #1"],
        ],
    },
    // MTAKE with a line on its first key waits behind it (no hand-off); on a later key the line
    // is not its concern. A LINE take that finds a free slot is granted, its place 0.
    case!(
        &[Missing, Missing],
        &[
            "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000",
            "take a 10 10 INFLIGHT 1 LEASE 60000 LINE 5000",
            "take b 10 10 TOKENS 0 TICKET INFLIGHT 1 LEASE 60000 LINE 5000",
            "mtake a,b 10 10 1 10 10 1 INFLIGHT 2 LEASE 1000",
            "mtake b,a 10 10 1 10 10 1 INFLIGHT 2 LEASE 1000 TICKET",
            "mtake b,a 10 10 1 10 10 1 INFLIGHT 1 LEASE 1000 TICKET",
        ],
    ),
    // ---- What held a denial back, the reply's last integer (1 tokens, 2 floor, 4 every slot
    // held, 8 a pause, summed), after the ticket and the slot; TAKE and MTAKE.
    case!(
        &[Missing, Missing],
        &[
            "take a 2 10 TOKENS 2",
            "take a 2 10",
            "take a 2 10 TICKET",
            "take b 10 10 TOKENS 3",
            "take b 10 10 TOKENS 3 FLOOR 5",
            "take b 10 10 TOKENS 8 FLOOR 2 TICKET",
            "mtake a,b 2 10 1 10 10 1",
            "mtake b,a 10 10 3 2 10 0 FLOOR 5 0 TICKET",
        ],
    ),
    case!(
        &[Missing],
        &[
            "take a 10 10 INFLIGHT 1 LEASE 60000",
            "take a 10 10 INFLIGHT 1 LEASE 60000",
            "take a 10 10 TOKENS 10 TICKET INFLIGHT 1 LEASE 60000",
            "take a 10 10 TOKENS 0 INFLIGHT 1 LEASE 60000",
            "mtake a 10 10 1 INFLIGHT 1 LEASE 60000",
            "mtake a 10 10 10 TICKET INFLIGHT 1 LEASE 60000",
            "pause a 10 10 1500",
            "take a 10 10",
            "take a 10 10 FLOOR 1 TICKET",
            "take a 10 10 INFLIGHT 1 LEASE 60000",
            "take a 10 10 MAXWAIT 5000 INFLIGHT 1 LEASE 60000",
            "mtake a 10 10 1 INFLIGHT 1 LEASE 60000",
            "mtake a 10 10 1 INFLIGHT 2 LEASE 60000",
        ],
    ),
    // A paused bucket asked for nothing holds no one back; asked for a token, it does.
    case!(
        &[Missing, Missing],
        &["pause a 10 10 1500", "take b 2 10 TOKENS 2", "mtake a,b 10 10 0 2 10 1", "mtake a,b 10 10 1 2 10 0"],
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
