//! The table's cases on a module key set, a library key set, a script key set and a mixed one,
//! in one MULTI per step: the same replies, stored values and expiries, also on a clock past
//! the year 2200.

use redis::{Connection, Value};
use throttle_testkit::{FakeClock, Flavor, Server};

use super::script::{
    clamped_now_ns, command, key_ticket_of, line_id_of, load, runner, server_now_ns, slot_of,
    ticket_of, S, SIDES,
};
use super::table::Before::{FromNow, Missing, Raw};
use super::table::CASES;

/// Runs every case on a module key set, a library key set, a script key set and a mixed one,
/// and compares replies, stored values and expiries.
pub fn same_replies_state_and_expiry(flavor: Flavor) {
    let server = Server::start(flavor);
    run_cases(flavor, &mut server.conn());
}

/// The same cases on a server whose clock reads past the year 2200, where both clamp it (the
/// limits that keep every state inside an i64 assume no later clock). Redis 7.0 does not start
/// under libfaketime (tests/tests/clock.rs), and has no cached clock anyway.
pub fn same_replies_on_a_clock_past_2200(flavor: Flavor) {
    const CLAMP_S: i64 = 7_258_118_400; // 2200-01-01, module/bucket/src/limits.rs MAX_NOW_NS
    let real_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs() as i64;
    // A day past the clamp.
    let clock = FakeClock::new(
        &format!("script-2200-{}", flavor.name()),
        CLAMP_S + 86_400 - real_s,
    );
    let server = clock.server(flavor).start();
    let mut con = server.conn();
    let now = server_now_ns(&mut con);
    assert!(
        now > i128::from(CLAMP_S) * S,
        "{flavor}: the server's clock reads {now} ns"
    );
    run_cases(flavor, &mut con);
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
        let mut replies: [Vec<Value>; SIDES.len()] = Default::default();
        let mut number = 0;
        for (step_no, step) in case.steps.iter().enumerate() {
            // `sleep ms`, a step of its own: the clock moves on (a lease or a place runs out).
            if let [call] = step {
                if let Some(ms) = call.strip_prefix("sleep ") {
                    let ms = ms.parse().expect("sleep ms");
                    std::thread::sleep(std::time::Duration::from_millis(ms));
                    continue;
                }
            }
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
                        .map(|w| {
                            if let Some(k) = w.strip_prefix('@') {
                                return slot_of(&side_replies[k.parse::<usize>().unwrap()])
                                    .to_string();
                            }
                            if let Some(k) = w.strip_prefix('#') {
                                return line_id_of(&side_replies[k.parse::<usize>().unwrap()])
                                    .to_string();
                            }
                            w.to_owned()
                        })
                        .map(|w| match w.strip_prefix('$').map(|k| k.split_once('.')) {
                            Some(Some((k, j))) => key_ticket_of(
                                &side_replies[k.parse::<usize>().unwrap()],
                                j.parse().unwrap(),
                            )
                            .to_string(),
                            Some(None) => {
                                ticket_of(&side_replies[w[1..].parse::<usize>().unwrap()])
                                    .to_string()
                            }
                            None => w.clone(),
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
            let sides = SIDES.len();
            assert_eq!(
                results.len(),
                sides * calls + sides * 2 * letters.len(),
                "{what}"
            );
            let states = results.split_off(sides * calls);
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
