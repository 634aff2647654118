//! The soak: a bounded run of random calls, every reply checked against what the fuzzer knows,
//! the server checked alive and the canaries unchanged along the way.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use throttle_bucket::{ArgError, TakeArgs, ThrottleCommand};
use throttle_e2e::{assert_no_crash, error_text, long_mode, process_id, query, Rng, Value};
use throttle_testkit::{Flavor, Server};

use super::args::argv;
use super::canaries::{check_canaries, make_canaries};
use super::contract::{check_reply, classify, four_integers};
use super::pool::{churn, Kind, POOL};
use super::report::{error_class, show_args};

const SHORT_COMMANDS: u64 = 20_000;
const LONG_COMMANDS: u64 = 100_000;
const SHORT_TIME: Duration = Duration::from_secs(10);
const LONG_TIME: Duration = Duration::from_secs(300);
const PING_EVERY: u64 = 100;
const CHECK_EVERY: u64 = 1_000;
/// How often some of the named keys change type.
const CHURN_EVERY: u64 = 50;

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

pub fn random_input_soak(flavor: Flavor) {
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
                    panic!("{context}\n  expected an array of 4 integers (5 for a denial), got {value:?}")
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
    let fresh = throttle_e2e::take(&mut con, "after-the-soak", "8 9");
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
