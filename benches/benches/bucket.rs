//! ns per call of the bucket arithmetic (`throttle-bucket`), the part of THROTTLE.TAKE that is
//! ours rather than Redis's: argument parsing, and one take when tokens are there (granted),
//! when they are not (denied), and when they will be within MAXWAIT (reserved).
//!
//! `cargo bench -p throttle-benches --bench bucket`; `cargo test` runs each once (test mode).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use throttle_bucket::{State, TakeArgs, ThrottleCommand};

/// A fixed server clock reading, ns since the Unix epoch (the take is pure: time is an input).
const NOW: i64 = 1_796_024_257_214_135_340;

fn args(words: &[&str]) -> TakeArgs {
    let bytes: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    TakeArgs::parse(&bytes).expect("valid arguments")
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");
    let cases: [(&str, &[&[u8]]); 3] = [
        ("capacity_rate", &[b"8", b"9"]),
        (
            "tokens_maxwait",
            &[b"8", b"9", b"TOKENS", b"3", b"MAXWAIT", b"5000"],
        ),
        ("fractional_rate", &[b"1000000", b"35791394.1"]),
    ];
    for (name, words) in cases {
        group.bench_function(name, |b| b.iter(|| TakeArgs::parse(black_box(words))));
    }
    group.finish();
}

fn takes(c: &mut Criterion) {
    let mut group = c.benchmark_group("take");
    let plain = args(&["8", "9"]);
    let reserve = args(&["8", "9", "MAXWAIT", "5000"]);
    let fill = 8 * plain.quota.interval.ns();
    // State `NOW`: a full bucket (the stored instant has passed). State `NOW + fill`: empty.
    let cases = [
        ("granted", plain, Some(State::plain(NOW - 1_000_000))),
        ("granted_missing_key", plain, None),
        ("denied", plain, Some(State::plain(NOW + fill))),
        ("reserved", reserve, Some(State::plain(NOW + fill))),
    ];
    for (name, args, stored) in cases {
        // As the module's handler hands it over: the one key's state, borrowed.
        let stored = std::slice::from_ref(&stored);
        let outcome = args.apply(stored, NOW).expect("TAKE never refuses");
        assert_eq!(
            (outcome.granted, outcome.write.is_some()),
            (name != "denied", name != "denied"),
            "{name}: {outcome:?}"
        );
        group.bench_function(name, |b| {
            b.iter(|| black_box(&args).apply(black_box(stored), black_box(NOW)))
        });
    }
    group.finish();
}

/// Everything the module does in Rust for one call, Redis's own work aside: parse, take, reply.
fn whole_call(c: &mut Criterion) {
    let words: [&[u8]; 4] = [b"8", b"9", b"MAXWAIT", b"5000"];
    let stored = [Some(State::plain(NOW))];
    c.bench_function("parse_take_reply", |b| {
        b.iter(|| {
            let args = TakeArgs::parse(black_box(&words)).expect("valid");
            let outcome = args
                .apply(black_box(&stored), black_box(NOW))
                .expect("TAKE never refuses");
            args.reply(&outcome)
        })
    });
}

criterion_group!(benches, parse, takes, whole_call);
criterion_main!(benches);
