//! Properties of the arithmetic over arbitrary call sequences and clock readings.

use proptest::prelude::*;
use throttle_bucket::{take, TakeArgs, NS_PER_MS, NS_PER_S};

/// Rates as (text, mantissa, decimal scale): rate = mantissa / 10^scale exactly, so the bound
/// below is checked against the rate the caller asked for, not the rounded interval.
const RATES: [(&str, i128, u32); 6] = [
    ("9", 9, 0),
    ("0.5", 5, 1),
    ("10", 10, 0),
    ("3.3", 33, 1),
    ("1000", 1000, 0),
    ("35791394.1", 357_913_941, 1),
];

const T0: i64 = 1_764_547_200_000_000_000;

#[derive(Clone, Debug)]
struct Call {
    /// Clock step before the call, ns; negative steps model a clock that reads earlier.
    step_ns: i64,
    tokens: u64,
    max_wait_ms: u64,
}

fn calls(capacity: u64) -> impl Strategy<Value = Vec<Call>> {
    let call = (
        prop_oneof![
            4 => -50 * NS_PER_MS..2_000 * NS_PER_MS,
            1 => Just(0i64),
            1 => -3_600 * NS_PER_S..-NS_PER_S,
        ],
        0..=capacity,
        prop_oneof![Just(0u64), 0..5_000u64],
    )
        .prop_map(|(step_ns, tokens, max_wait_ms)| Call {
            step_ns,
            tokens,
            max_wait_ms,
        });
    prop::collection::vec(call, 1..80)
}

fn scenario() -> impl Strategy<Value = (u64, usize, Vec<Call>)> {
    (1u64..=20, 0..RATES.len())
        .prop_flat_map(|(capacity, rate)| (Just(capacity), Just(rate), calls(capacity)))
}

fn args(capacity: u64, rate: &str, tokens: u64, max_wait_ms: u64) -> TakeArgs {
    let text = format!("{capacity} {rate} TOKENS {tokens} MAXWAIT {max_wait_ms}");
    let words: Vec<&[u8]> = text.split_whitespace().map(str::as_bytes).collect();
    TakeArgs::parse(&words).expect("generated arguments are valid")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Tokens that become usable in any interval [t0, t1] never exceed
    /// capacity + rate * (t1 - t0), whatever the clock does. A grant is usable at
    /// `now + wait` (a reservation) or at `now` (tokens already there).
    #[test]
    fn grants_never_exceed_the_bucket((capacity, rate, calls) in scenario()) {
        let (rate_text, mantissa, scale) = RATES[rate];
        let unit = 10i128.pow(scale) * i128::from(NS_PER_S);
        let mut now = T0;
        let mut state: Option<i64> = None;
        let mut usable: Vec<(i64, u64)> = Vec::new();
        for call in &calls {
            now += call.step_ns;
            let out = take(&args(capacity, rate_text, call.tokens, call.max_wait_ms), state, now);
            if let Some(write) = out.write {
                // Time never runs backwards for a bucket.
                prop_assert!(state.is_none_or(|s| write.tat_ns >= s));
                prop_assert!(write.expire_at_ms * NS_PER_MS >= write.tat_ns);
                state = Some(write.tat_ns);
            }
            if out.granted && call.tokens > 0 {
                prop_assert!(out.write.is_some());
                usable.push((now + out.wait_ns, call.tokens));
            } else {
                prop_assert!(out.write.is_none());
            }
        }
        usable.sort_unstable();
        for (i, &(t0, _)) in usable.iter().enumerate() {
            let mut tokens = 0i128;
            for &(t1, n) in &usable[i..] {
                tokens += i128::from(n);
                // tokens <= capacity + rate * (t1 - t0), multiplied through by 10^scale * 1e9.
                let bound = i128::from(capacity) * unit + i128::from(t1 - t0) * mantissa;
                prop_assert!(
                    tokens * unit <= bound,
                    "{tokens} tokens usable in [{t0}, {t1}] at capacity {capacity}, rate {rate_text}"
                );
            }
        }
    }

    /// The reply's wait is never early: retrying after exactly `wait_ms` is granted, and
    /// a reservation's wait is the same figure a denial would have given.
    #[test]
    fn waiting_the_reply_is_never_early((capacity, rate, calls) in scenario()) {
        let rate_text = RATES[rate].0;
        let mut now = T0;
        let mut state: Option<i64> = None;
        for call in &calls {
            now += call.step_ns;
            let out = take(&args(capacity, rate_text, call.tokens, call.max_wait_ms), state, now);
            let [granted, remaining, wait_ms, reset_ms] = out.reply();
            prop_assert!(remaining >= 0 && remaining <= capacity as i64);
            prop_assert!(wait_ms >= 0 && reset_ms >= 0);
            let denied = take(&args(capacity, rate_text, call.tokens, 0), state, now);
            prop_assert_eq!(denied.wait_ns, out.wait_ns);
            let later = take(&args(capacity, rate_text, call.tokens, 0), state, now + wait_ms * NS_PER_MS);
            prop_assert!(later.granted, "waiting {} ms was not enough", wait_ms);
            if granted == 1 {
                if let Some(write) = out.write { state = Some(write.tat_ns); }
            }
        }
    }
}

/// One step of a random interleaving of every command over two buckets.
#[derive(Clone, Debug)]
enum Op {
    Take {
        bucket: usize,
        tokens: u64,
        max_wait_ms: u64,
    },
    /// Gives back part of an earlier grant (picked by index modulo the grants so far); the
    /// grant may be long stale by then.
    Give {
        grant: usize,
        fraction: u8,
    },
    Pause {
        bucket: usize,
        ms: u64,
    },
    MTake {
        tokens: [u64; 2],
        max_wait_ms: u64,
    },
    Peek {
        bucket: usize,
    },
}

fn ops(capacities: [u64; 2]) -> impl Strategy<Value = Vec<(i64, Op)>> {
    let step = prop_oneof![
        6 => -50 * NS_PER_MS..1_500 * NS_PER_MS,
        2 => Just(0i64),
        1 => -3_600 * NS_PER_S..-NS_PER_S,
    ];
    let wait = prop_oneof![Just(0u64), 0..5_000u64];
    let op = prop_oneof![
        4 => (0..2usize, 1..=capacities[0].min(capacities[1]), wait.clone())
            .prop_map(|(bucket, tokens, max_wait_ms)| Op::Take { bucket, tokens, max_wait_ms }),
        3 => (any::<usize>(), 1..=4u8).prop_map(|(grant, fraction)| Op::Give { grant, fraction }),
        1 => (0..2usize, 1..3_000u64).prop_map(|(bucket, ms)| Op::Pause { bucket, ms }),
        3 => (0..=capacities[0], 0..=capacities[1], wait)
            .prop_map(|(a, b, max_wait_ms)| Op::MTake { tokens: [a, b], max_wait_ms }),
        1 => (0..2usize).prop_map(|bucket| Op::Peek { bucket }),
    ];
    prop::collection::vec((step, op), 1..120)
}

/// A grant as the window check counts it: `tokens - given` used at `act`.
struct Grant {
    bucket: usize,
    act: i64,
    tokens: u64,
    given: u64,
    ticket: i64,
}

fn words(text: &str) -> Vec<&[u8]> {
    text.split_whitespace().map(str::as_bytes).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    /// Any interleaving of take, reserve, give back (fresh and stale tickets, each used once),
    /// pause, multi-take and peek, with clock readings that also go backwards, keeps the tokens
    /// used in every window, counting every grant less what it gave back, within
    /// capacity + rate * window, for each bucket.
    #[test]
    fn every_command_keeps_every_window_within_the_bucket(
        (buckets, ops) in (1u64..=12, 0..RATES.len(), 1u64..=12, 0..RATES.len())
            .prop_flat_map(|(ca, ra, cb, rb)| (Just([(ca, ra), (cb, rb)]), ops([ca, cb])))
    ) {
        use throttle_bucket::{give, mtake, pause, peek, GiveArgs, MTakeArgs, PauseArgs, Quota};
        let quota = |b: usize| format!("{} {}", buckets[b].0, RATES[buckets[b].1].0);
        let mut now = T0;
        let mut state: [Option<i64>; 2] = [None, None];
        let mut grants: Vec<Grant> = Vec::new();
        let set = |state: &mut [Option<i64>; 2], b: usize, tat: i64, may_go_back: bool| {
            if !may_go_back {
                prop_assert!(state[b].is_none_or(|s| tat >= s), "a state moved back");
            }
            state[b] = Some(tat);
            Ok(())
        };
        for (step, op) in &ops {
            now += step;
            match op {
                Op::Take { bucket, tokens, max_wait_ms } => {
                    let text = format!("{} TOKENS {tokens} MAXWAIT {max_wait_ms} TICKET", quota(*bucket));
                    let out = take(&TakeArgs::parse(&words(&text)).unwrap(), state[*bucket], now);
                    if let Some(w) = out.write {
                        set(&mut state, *bucket, w.tat_ns, false)?;
                        grants.push(Grant { bucket: *bucket, act: now + out.wait_ns, tokens: *tokens, given: 0, ticket: out.ticket() });
                    }
                    prop_assert_eq!(out.granted, out.write.is_some());
                }
                Op::Give { grant, fraction } => {
                    let open: Vec<usize> = (0..grants.len()).filter(|&i| grants[i].given == 0 && grants[i].ticket > 0).collect();
                    if open.is_empty() { continue; }
                    let g = &mut grants[open[grant % open.len()]];
                    let n = g.tokens * u64::from(*fraction) / 4;
                    let text = format!("{} {n} {}", quota(g.bucket), g.ticket);
                    let out = give(&GiveArgs::parse(&words(&text)).unwrap(), state[g.bucket], now);
                    prop_assert!(out.given <= n);
                    if let Some(w) = out.write {
                        prop_assert!(w.tat_ns > now.clamp(0, throttle_bucket::MAX_NOW_NS));
                        state[g.bucket] = Some(w.tat_ns);
                    }
                    if out.delete {
                        state[g.bucket] = None;
                    }
                    // Used once: a later give of this grant would be a second one.
                    g.given = out.given;
                    g.ticket = 0;
                }
                Op::Pause { bucket, ms } => {
                    let text = format!("{} {ms}", quota(*bucket));
                    let out = pause(&PauseArgs::parse(&words(&text)).unwrap(), state[*bucket], now);
                    prop_assert!(out.reply() >= *ms as i64);
                    if let Some(w) = out.write {
                        set(&mut state, *bucket, w.tat_ns, false)?;
                    }
                }
                Op::MTake { tokens, max_wait_ms } => {
                    let text = format!(
                        "2 a b {} {} {} {} MAXWAIT {max_wait_ms}",
                        quota(0), tokens[0], quota(1), tokens[1]
                    );
                    let out = mtake(&MTakeArgs::parse(&words(&text)).unwrap(), &state, now);
                    let wrote = out.buckets().iter().filter(|b| b.write.is_some()).count();
                    let taking = tokens.iter().filter(|&&t| t > 0).count();
                    prop_assert!(wrote == 0 || wrote == taking, "all or nothing");
                    for (b, after) in out.buckets().iter().enumerate() {
                        if let Some(w) = after.write {
                            set(&mut state, b, w.tat_ns, false)?;
                            grants.push(Grant { bucket: b, act: now + out.wait_ns, tokens: tokens[b], given: 0, ticket: 0 });
                        }
                    }
                }
                Op::Peek { bucket } => {
                    let parsed = Quota::parse(quota(*bucket).split(' ').next().unwrap().as_bytes(), RATES[buckets[*bucket].1].0.as_bytes()).unwrap();
                    let out = peek(&parsed, state[*bucket], now);
                    prop_assert!(out.write.is_none() && out.granted);
                }
            }
        }
        for (b, &(capacity, rate)) in buckets.iter().enumerate() {
            let (rate_text, mantissa, scale) = RATES[rate];
            let unit = 10i128.pow(scale) * i128::from(NS_PER_S);
            let mut used: Vec<(i64, u64)> = grants
                .iter()
                .filter(|g| g.bucket == b && g.tokens > g.given)
                .map(|g| (g.act, g.tokens - g.given))
                .collect();
            used.sort_unstable();
            for (i, &(t0, _)) in used.iter().enumerate() {
                let mut tokens = 0i128;
                for &(t1, n) in &used[i..] {
                    tokens += i128::from(n);
                    let bound = i128::from(capacity) * unit + i128::from(t1 - t0) * mantissa;
                    prop_assert!(
                        tokens * unit <= bound,
                        "bucket {b}: {tokens} tokens used in [{t0}, {t1}] at capacity {capacity}, rate {rate_text}"
                    );
                }
            }
        }
    }
}
