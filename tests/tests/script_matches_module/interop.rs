//! A key written by one backend used by the others on a clock that moves between calls.

use redis::{Connection, Value};
use throttle_e2e::state_of;
use throttle_testkit::{Flavor, Server};

use super::script::{command, load, runner, server_now_ns, Runner, S};

/// A key written by one is used by the other on a clock that moves between calls, as Redis
/// 7.0's does even inside MULTI (and there the module's clock follows the wall clock only to the
/// millisecond): every call of a sequence on a pair of keys goes round the module, the library
/// and the script, and must answer what the module alone answers on another pair, to the
/// millisecond. The buckets start half a token into a debt and the tokens are 1000 s and 500 s,
/// so a millisecond either way changes no count and no decision: counts, grants and tokens
/// given back are compared exactly, durations and states to 2 ms (20 on Redis 7.0, below).
pub fn interop_on_a_moving_clock(flavor: Flavor) {
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
    // Every command comes at places the module, the library and the script take in turn.
    let calls: &[(&str, &[usize])] = &[
        ("take a 3 0.001 TICKET", &[2, 3, 4]),
        ("peek a 3 0.001", &[3, 4]),
        ("take a 3 0.001 TOKENS 2 MAXWAIT 2000000 TICKET", &[2, 3, 4]),
        ("take a 3 0.001 MAXWAIT 1000", &[2, 3]),
        ("pause a 3 0.001 10000", &[0]),
        ("give a 3 0.001 2 $2", &[]),
        ("mtake a,b 3 0.001 1 4 0.002 1 MAXWAIT 5000000", &[1, 3, 5]),
        ("pause b 4 0.002 4000000", &[]),
        ("take b 4 0.002 TOKENS 0", &[3]),
        ("mtake b,a 4 0.002 1 3 0.001 1", &[1, 3, 5]),
        ("give a 3 0.001 1 $0", &[]),
        ("peek b 4 0.002", &[3, 4]),
        ("peek a 3 0.001", &[3, 4]),
        // A give-back that only room below full limits, then a granted multi-take by the script.
        ("peek c 4 0.002", &[3, 4]),
        ("take c 4 0.002 TOKENS 2 TICKET", &[2, 3, 4]),
        ("give c 4 0.002 4 $14", &[]),
        ("mtake c,a 4 0.002 1 3 0.001 1 MAXWAIT 5000000", &[1, 3, 5]),
        ("mtake a,c 3 0.001 0 4 0.002 1", &[1, 3, 5]),
    ];
    // Redis 7.0 reads the live clock at each call, so the two sides are as far apart as the
    // MULTI runs: a server descheduled between them (4 ms seen on a busy two-core machine)
    // moves them apart. A cached clock keeps them one instant but for the ms rounding.
    let slack_ms = if flavor == Flavor::Redis70 { 20 } else { 2 };
    let mut replies: [Vec<Vec<i64>>; 2] = Default::default();
    for (n, (call, durations)) in calls.iter().enumerate() {
        let mut words = call.split_whitespace();
        let name = words.next().unwrap();
        let letters = words.next().unwrap();
        let rest: Vec<&str> = words.collect();
        // Both calls in one MULTI, so that they are microseconds apart even on a loaded machine.
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (side, runner) in [(0, Runner::Module), (1, runner(3, n))] {
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
                    (_, true) => slack_ms * 1000,
                    (true, false) => slack_ms,
                    (false, false) => 0,
                };
                (a - m).abs() <= slack
            });
        assert!(
            close,
            "{flavor} call {n} `{call}` by the {:?}: mixed {mixed:?}, module alone {alone:?}",
            runner(3, n)
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
    // The give-back of call 5 comes inside call 4's pause: it frees only what lies after the
    // pause's own state, so a's reservations stay later, and so does the state the multi-take
    // of call 16 leaves c at, which has no token for call 17.
    assert_eq!(
        first,
        [1, 1, 1, 0, 0, 2, 1, 4_000_000, 1, 0, 0, 1, 1, 1, 1, 3, 1, 0],
        "{flavor}: first elements of the module's replies, of {:?}",
        replies[0]
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
