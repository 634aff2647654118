//! A seeded random run of every command on three pairs of keys, the module on one, the library
//! and the script on the others, compared reply by reply and state by state.

use std::collections::HashSet;

use redis::Value;
use throttle_e2e::Rng;
use throttle_testkit::{Flavor, Server};

use super::script::{command, load, server_now_ns, Runner, LUA, S};

/// Every runner, the module first (the one the others are held to).
const RUNNERS: [Runner; 3] = [Runner::Module, Runner::Library, Runner::Script];

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
    match rng.below(27) {
        26 => {
            // An operator ends a pause or a cut (or finds none: nothing written).
            let (capacity, rate) = quota(rng, key);
            Call {
                name: "resume",
                keys: vec![key],
                args: vec![capacity.to_string(), rate],
            }
        }
        20..=21 => {
            // A low-priority take: a floor, and a reservation of what is there now.
            let (capacity, rate) = quota(rng, key);
            let floor = rng.below(capacity);
            let n = 1 + rng.below((capacity - floor).max(1));
            let mut args = vec![
                capacity.to_string(),
                rate,
                "TOKENS".into(),
                n.min(capacity - floor).to_string(),
                "FLOOR".into(),
                floor.to_string(),
            ];
            if let Some(ms) = max_wait(rng) {
                args.extend(["MAXWAIT".into(), ms]);
            }
            Call {
                name: "take",
                keys: vec![key],
                args,
            }
        }
        22 => {
            let (capacity, rate) = quota(rng, key);
            let factor = rng.pick(&["0.7", "0.5", "0.01", "1", "0.3333"]).to_string();
            Call {
                name: "cut",
                keys: vec![key],
                args: vec![
                    capacity.to_string(),
                    rate,
                    (1 + rng.below(3000)).to_string(),
                    factor,
                    (1 + rng.below(20_000)).to_string(),
                ],
            }
        }
        23 => {
            let (capacity, rate) = quota(rng, key);
            Call {
                name: "sync",
                keys: vec![key],
                args: vec![
                    capacity.to_string(),
                    rate,
                    rng.below(capacity + 2).to_string(),
                    rng.below(3000).to_string(),
                ],
            }
        }
        24 => {
            let (capacity, rate) = quota(rng, key);
            Call {
                name: "debit",
                keys: vec![key],
                args: vec![
                    capacity.to_string(),
                    rate,
                    rng.below(3 * capacity).to_string(),
                ],
            }
        }
        25 => {
            // A multi-take with a floor per key.
            let keys = if rng.chance(50) {
                vec![0, 1]
            } else {
                vec![key]
            };
            let mut args = Vec::new();
            let mut floors = Vec::new();
            for &k in &keys {
                let (capacity, rate) = quota(rng, k);
                let floor = rng.below(capacity);
                args.extend([capacity.to_string(), rate, "1".into()]);
                floors.push(floor.min(capacity - 1).to_string());
            }
            args.push("FLOOR".into());
            args.extend(floors);
            if let Some(ms) = max_wait(rng) {
                args.extend(["MAXWAIT".into(), ms]);
            }
            if rng.chance(40) {
                args.push("TICKET".into());
            }
            Call {
                name: "mtake",
                keys,
                args,
            }
        }
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
            let mut options: Vec<Vec<String>> = Vec::new();
            if let Some(ms) = max_wait(rng) {
                options.push(vec!["MAXWAIT".into(), ms]);
            }
            if rng.chance(50) {
                let word = *rng.pick(&["TICKET", "ticket", "Ticket"]);
                options.push(vec![word.into()]);
            }
            if options.len() > 1 && rng.chance(50) {
                options.swap(0, 1);
            }
            // A slot in the first key: few, so that some calls find them all held.
            if rng.chance(30) {
                options.push(vec![
                    "INFLIGHT".into(),
                    (1 + rng.below(2)).to_string(),
                    "LEASE".into(),
                    (1 + rng.below(2000)).to_string(),
                ]);
            }
            args.extend(options.into_iter().flatten());
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
/// pair, the library and the script on the others, one MULTI per step (so one instant per
/// step): every reply and every stored value and expiry must be equal. Between steps the clock moves on, keys are
/// now and then deleted or set to a state near the clock.
pub fn random_cross_check(flavor: Flavor) {
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
    // The tickets multi-takes replied, to count the give-backs made with them.
    let mut mtake_tickets: HashSet<i64> = HashSet::new();
    // (granted takes, denied takes, tokens given back, granted multi-takes, denied ones,
    // multi-take tickets, tokens given back with them, multi-takes with INFLIGHT granted a
    // slot, denied one)
    let mut seen = [0u64; 9];

    for step in 0..STEPS {
        match rng.below(25) {
            0 => {
                for runner in RUNNERS {
                    let _: () = redis::cmd("DEL")
                        .arg(&[key(runner, 0), key(runner, 1)][..])
                        .query(&mut con)
                        .unwrap();
                }
            }
            1 => {
                let k = rng.below(2) as usize;
                let offset = rng.below(6 * S as u64) as i128 - S;
                let state = (server_now_ns(&mut con) + offset).to_string();
                for runner in RUNNERS {
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
        for runner in RUNNERS {
            for call in &calls {
                let keys: Vec<String> = call.keys.iter().map(|&k| key(runner, k)).collect();
                pipe.add_command(command(runner, &sha, call.name, &keys, &call.args));
            }
        }
        for runner in RUNNERS {
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
        let (replies, states) = results.split_at(RUNNERS.len() * calls.len());
        let mut per_runner = replies.chunks(calls.len());
        let module = per_runner.next().expect("the module's replies");
        for (lua, replies) in LUA.iter().zip(per_runner) {
            for n in 0..calls.len() {
                assert_eq!(
                    replies[n],
                    module[n],
                    "{}: {lua:?} (left) vs module (right)",
                    what(n)
                );
            }
        }
        for (n, call) in calls.iter().enumerate() {
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
                    // (A denial's fifth integer may be what held it back, never a ticket.)
                    if ints[0] == 1 && ints.len() == 5 && ints[4] != 0 {
                        tickets.push((call.keys[0], ints[4]));
                    }
                }
                "take" if ints.len() == 5 && ints[4] != 0 => tickets.push((call.keys[0], ints[4])),
                "give" => {
                    seen[2] += ints[0] as u64;
                    let ticket: i64 = call.args[3].parse().expect("a ticket");
                    if mtake_tickets.contains(&ticket) {
                        seen[6] += ints[0] as u64;
                    }
                }
                "mtake" => {
                    seen[if ints[0] == 1 { 3 } else { 4 }] += 1;
                    // With TICKET, one ticket per key after the pairs, in the call's key order
                    // (then the slot, with INFLIGHT: the length alone cannot tell).
                    let keys = call.keys.len();
                    let ticket = call.args.iter().any(|a| a.eq_ignore_ascii_case("TICKET"));
                    if call.args.iter().any(|a| a == "INFLIGHT") {
                        // The slot is last on a grant; a denial's last is what held it back.
                        seen[if ints[0] == 1 && ints.last() > Some(&0) {
                            7
                        } else {
                            8
                        }] += 1;
                    }
                    if ticket {
                        for (&k, &ticket) in call.keys.iter().zip(&ints[2 + 2 * keys..]) {
                            if ticket != 0 {
                                tickets.push((k, ticket));
                                mtake_tickets.insert(ticket);
                                seen[5] += 1;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        for (lua, lua_states) in LUA.iter().zip(states[4..].chunks(4)) {
            assert_eq!(
                lua_states,
                &states[..4],
                "{flavor} seed {seed} step {step}: GET and PEXPIRETIME of a and b, {lua:?} \
                 (left) vs module (right) after {:?}",
                calls
                    .iter()
                    .map(|c| format!("{} {:?} {}", c.name, c.keys, c.args.join(" ")))
                    .collect::<Vec<_>>()
            );
        }
    }
    // The run reached every outcome it is meant to compare.
    assert!(seen.iter().all(|&n| n > 0), "{flavor} seed {seed}: (granted takes, denied, given back, granted multi-takes, denied, multi-take tickets, given back with them, slots taken by multi-takes, denied) = {seen:?}");
}
