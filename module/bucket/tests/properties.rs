//! Properties of the arithmetic over arbitrary call sequences and clock readings.

use proptest::prelude::*;
use throttle_bucket::{
    PeekArgs, Refusal, State, TakeArgs, ThrottleCommand, Write, NS_PER_MS, NS_PER_S,
};

/// The call on one bucket whose stored state is `stored`, at `now`, as the module runs it.
fn on<C: ThrottleCommand>(call: &C, stored: Option<&State>, now: i64) -> C::Outcome {
    call.apply(&[stored.cloned()], now).unwrap()
}

/// How long `stored`'s pause lasts after `now`, to the ns (THROTTLE.PEEK says it in ms).
fn paused_for(stored: Option<&State>, now: i64) -> i64 {
    stored
        .and_then(|s| s.pushback)
        .map_or(0, |p| p.paused_until.saturating_sub(now).max(0))
}

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

/// `default` cases, or `PROPTEST_CASES` for a longer run (a config given in the test would
/// otherwise win over the variable).
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig::with_cases(cases)
}

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
    #![proptest_config(config(2000))]

    /// Tokens that become usable in any interval [t0, t1] never exceed
    /// capacity + rate * (t1 - t0), whatever the clock does. A grant is usable at
    /// `now + wait` (a reservation) or at `now` (tokens already there).
    #[test]
    fn grants_never_exceed_the_bucket((capacity, rate, calls) in scenario()) {
        let (rate_text, mantissa, scale) = RATES[rate];
        let unit = 10i128.pow(scale) * i128::from(NS_PER_S);
        let mut now = T0;
        let mut state: Option<State> = None;
        let mut usable: Vec<(i64, u64)> = Vec::new();
        for call in &calls {
            now += call.step_ns;
            let out = on(&args(capacity, rate_text, call.tokens, call.max_wait_ms), state.as_ref(), now);
            if let Some(Write::Store { state: written, expire_at_ms }) = out.write.clone() {
                // Time never runs backwards for a bucket.
                prop_assert!(state.is_none_or(|s| written.tat >= s.tat));
                // No kept quota here: every stored bucket expires, once full.
                prop_assert!(expire_at_ms.is_some_and(|ms| ms * NS_PER_MS >= written.tat));
                state = Some(written);
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
        let mut state: Option<State> = None;
        for call in &calls {
            now += call.step_ns;
            let out = on(&args(capacity, rate_text, call.tokens, call.max_wait_ms), state.as_ref(), now);
            let [granted, remaining, wait_ms, reset_ms] = out.reply();
            prop_assert!(remaining >= 0 && remaining <= capacity as i64);
            prop_assert!(wait_ms >= 0 && reset_ms >= 0);
            let denied = on(&args(capacity, rate_text, call.tokens, 0), state.as_ref(), now);
            prop_assert_eq!(denied.wait_ns, out.wait_ns);
            let later = on(&args(capacity, rate_text, call.tokens, 0), state.as_ref(), now + wait_ms * NS_PER_MS);
            prop_assert!(later.granted, "waiting {} ms was not enough", wait_ms);
            if granted == 1 {
                if let Some(write) = out.write { state = write.stored(); }
            }
        }
    }

    /// A one-key THROTTLE.MTAKE ... TICKET is THROTTLE.TAKE ... TICKET: the same write, the
    /// same reply in MTAKE's order, and the same ticket, whatever the clock does.
    #[test]
    fn a_one_key_multi_take_tickets_as_throttle_take((capacity, rate, calls) in scenario()) {
        use throttle_bucket::MTakeArgs;
        let rate_text = RATES[rate].0;
        let mut now = T0;
        let mut state: Option<State> = None;
        for call in &calls {
            now += call.step_ns;
            let single = on(
                &TakeArgs { ticket: true, ..args(capacity, rate_text, call.tokens, call.max_wait_ms) },
                state.as_ref(),
                now,
            );
            let text = format!("1 a {capacity} {rate_text} {} MAXWAIT {} TICKET", call.tokens, call.max_wait_ms);
            let multi_args = MTakeArgs::parse(&words(&text)).unwrap();
            let multi = multi_args.apply(&[state.clone()], now).unwrap();
            let [granted, remaining, wait_ms, reset_ms] = single.reply();
            let reply = multi_args.reply(&multi);
            let mut expected = vec![granted, wait_ms, remaining, reset_ms, single.ticket()];
            if granted == 0 {
                expected.push(single.refusal.bits() as i64);
            }
            prop_assert_eq!(reply.as_slice(), &expected[..]);
            prop_assert_eq!(multi.buckets()[0].write.clone(), single.write.clone());
            if let Some(write) = single.write { state = write.stored(); }
        }
    }
}

/// One step of a random interleaving of every command over two buckets.
#[derive(Clone, Debug)]
enum Op {
    /// A take, or a reservation; with a floor, a low-priority take (a reservation only of
    /// tokens that are there now).
    Take {
        bucket: usize,
        tokens: u64,
        max_wait_ms: u64,
        floor: Option<u64>,
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
    /// A congestion signal: pause, and cut the rate (once per episode).
    Cut {
        bucket: usize,
        ms: u64,
        factor: &'static str,
        recovery_ms: u64,
    },
    /// The supplier's count.
    Sync {
        bucket: usize,
        remaining: u64,
        reset_ms: u64,
    },
    /// A cost settled after the call: taken now, whatever the bucket holds.
    Debit {
        bucket: usize,
        tokens: u64,
    },
    /// A multi-take; with `ticket`, its grants can be given back like a take's.
    MTake {
        tokens: [u64; 2],
        max_wait_ms: u64,
        floors: Option<[u64; 2]>,
        ticket: bool,
    },
    Peek {
        bucket: usize,
    },
    /// An operator ends the pause and the cut: the state instant kept, never earlier.
    Resume {
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
    let least = capacities[0].min(capacities[1]);
    let op = prop_oneof![
        4 => (0..2usize, 1..=least, wait.clone())
            .prop_map(|(bucket, tokens, max_wait_ms)| Op::Take { bucket, tokens, max_wait_ms, floor: None }),
        2 => (0..2usize, 1..=least, 0..least, wait.clone())
            .prop_map(move |(bucket, tokens, floor, max_wait_ms)| Op::Take {
                bucket,
                tokens: tokens.min(least - floor).max(1),
                max_wait_ms,
                floor: Some(floor.min(least - 1)),
            }),
        3 => (any::<usize>(), 1..=4u8).prop_map(|(grant, fraction)| Op::Give { grant, fraction }),
        1 => (0..2usize, 1..3_000u64).prop_map(|(bucket, ms)| Op::Pause { bucket, ms }),
        2 => (0..2usize, 1..3_000u64, prop::sample::select(vec!["0.7", "0.5", "0.01", "0.9999", "1"]), 1..20_000u64)
            .prop_map(|(bucket, ms, factor, recovery_ms)| Op::Cut { bucket, ms, factor, recovery_ms }),
        1 => (0..2usize, 0..=least + 2, 0..3_000u64)
            .prop_map(|(bucket, remaining, reset_ms)| Op::Sync { bucket, remaining, reset_ms }),
        1 => (0..2usize, 0..=3 * least)
            .prop_map(|(bucket, tokens)| Op::Debit { bucket, tokens }),
        3 => (0..=capacities[0], 0..=capacities[1], wait.clone(), any::<bool>())
            .prop_map(|(a, b, max_wait_ms, ticket)| Op::MTake { tokens: [a, b], max_wait_ms, floors: None, ticket }),
        1 => (0..capacities[0], 0..capacities[1], wait, any::<bool>())
            .prop_map(move |(fa, fb, max_wait_ms, ticket)| Op::MTake {
                tokens: [(capacities[0] - fa).min(1), (capacities[1] - fb).min(1)],
                max_wait_ms,
                floors: Some([fa, fb]),
                ticket,
            }),
        1 => (0..2usize).prop_map(|bucket| Op::Peek { bucket }),
        1 => (0..2usize).prop_map(|bucket| Op::Resume { bucket }),
    ];
    prop::collection::vec((step, op), 1..120)
}

/// A grant as the window checks count it: `tokens - given` used at `act`, taken when the
/// rate's factor was `factor_bp`.
struct Grant {
    bucket: usize,
    act: i64,
    tokens: u64,
    given: u64,
    ticket: i64,
    factor_bp: u16,
}

fn words(text: &str) -> Vec<&[u8]> {
    text.split_whitespace().map(str::as_bytes).collect()
}

/// The windows over `used` (`(act, tokens, factor_bp)`, sorted by `act`) that break the bound
/// `capacity + rate * factor * window`, where the factor is the largest among the grants in
/// the window (the full rate's 10 000 for any window with a grant made while not cut).
fn over_the_bound(used: &[(i64, u64, u16)], capacity: u64, rate: usize) -> Option<String> {
    let (rate_text, mantissa, scale) = RATES[rate];
    let unit = 10i128.pow(scale) * i128::from(NS_PER_S) * 10_000;
    for (i, &(t0, _, _)) in used.iter().enumerate() {
        let mut tokens = 0i128;
        let mut factor = 0i128;
        for &(t1, n, f) in &used[i..] {
            tokens += i128::from(n);
            factor = factor.max(i128::from(f));
            // tokens <= capacity + rate * factor * (t1 - t0), multiplied through by
            // 10^scale * 1e9 * 10^4.
            let bound = i128::from(capacity) * unit + i128::from(t1 - t0) * mantissa * factor;
            if tokens * unit > bound {
                return Some(format!(
                    "{tokens} tokens used in [{t0}, {t1}] at capacity {capacity}, rate \
                     {rate_text}, factor {factor} bp"
                ));
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(config(1500))]

    /// Any interleaving of take, reserve, floored take, give back (fresh and stale tickets of
    /// takes and multi-takes, each used once), pause, cut, sync, debit, multi-take (with and
    /// without floors and tickets) and peek,
    /// with clock readings that also go backwards, keeps the tokens granted in every window,
    /// counting every grant less what it gave back, within capacity + rate * window for each
    /// bucket; and the grants made while the rate was cut within capacity + (the largest cut
    /// rate among them) * window. Debits and syncs only ever make the bucket stricter, and no
    /// state but a give-back's moves back.
    #[test]
    fn every_command_keeps_every_window_within_the_bucket(
        (buckets, ops) in (1u64..=12, 0..RATES.len(), 1u64..=12, 0..RATES.len())
            .prop_flat_map(|(ca, ra, cb, rb)| (Just([(ca, ra), (cb, rb)]), ops([ca, cb])))
    ) {
        use throttle_bucket::{
            CutArgs, DebitArgs, GiveArgs, MTakeArgs, PauseArgs, Quota, SyncArgs, FULL_FACTOR_BP,
        };
        let quota = |b: usize| format!("{} {}", buckets[b].0, RATES[buckets[b].1].0);
        let bucket_quota = |b: usize| {
            Quota::parse(buckets[b].0.to_string().as_bytes(), RATES[buckets[b].1].0.as_bytes()).unwrap()
        };
        let mut now = T0;
        let mut state: [Option<State>; 2] = [None, None];
        let mut grants: Vec<Grant> = Vec::new();
        // Applies a write that must not move the state back.
        let set = |state: &mut [Option<State>; 2], b: usize, write: Write| {
            let after = write.stored();
            let tat = |s: Option<State>| s.map(|s| s.tat);
            prop_assert!(
                after.is_some() && tat(state[b].clone()).is_none_or(|s| tat(after.clone()).is_some_and(|a| a >= s)),
                "a state moved back: {:?} -> {:?}", state[b], after
            );
            state[b] = after;
            Ok(())
        };
        let factor = |state: &[Option<State>; 2], b: usize, now: i64| {
            on(&PeekArgs { quota: bucket_quota(b) }, state[b].as_ref(), now).reply.factor_bp
        };
        let mut latest = now;
        for (step, op) in &ops {
            now += step;
            latest = latest.max(now);
            match op {
                Op::Take { bucket, tokens, max_wait_ms, floor } => {
                    let floor_words = floor.map_or(String::new(), |f| format!(" FLOOR {f}"));
                    let text = format!("{} TOKENS {tokens} MAXWAIT {max_wait_ms} TICKET{floor_words}", quota(*bucket));
                    let f = factor(&state, *bucket, now);
                    // Whether the tokens are there now: a plain take of them, without waiting.
                    let plain = format!("{} TOKENS {tokens}", quota(*bucket));
                    let there_now = on(&TakeArgs::parse(&words(&plain)).unwrap(), state[*bucket].as_ref(), now).granted;
                    let out = on(&TakeArgs::parse(&words(&text)).unwrap(), state[*bucket].as_ref(), now);
                    prop_assert_eq!(out.granted, out.write.is_some());
                    // A denial says what held it back: the floor only when the tokens are
                    // there now, else the tokens; and the pause while one is in effect.
                    if out.granted {
                        prop_assert_eq!(out.refusal, Refusal::NONE);
                    } else {
                        let paused = on(&PeekArgs { quota: bucket_quota(*bucket) }, state[*bucket].as_ref(), now).reply.paused_ms > 0;
                        let held = if out.held_by_floor { Refusal::FLOOR } else { Refusal::TOKENS };
                        prop_assert_eq!(out.refusal, if paused { held | Refusal::PAUSE } else { held });
                        prop_assert!(!out.held_by_floor || (floor.is_some() && there_now));
                    }
                    if let Some(w) = out.write.clone() {
                        set(&mut state, *bucket, w)?;
                        grants.push(Grant { bucket: *bucket, act: now + out.wait_ns, tokens: *tokens, given: 0, ticket: out.ticket(), factor_bp: f });
                    }
                    if let (Some(floor), true) = (floor, out.granted) {
                        // A floor above 0 reserves only tokens that are there now, and never
                        // leaves the bucket in debt (a deep cut's slot past the fill).
                        prop_assert!(*floor == 0 || there_now, "a floored take reserved into debt");
                        let quota = TakeArgs::parse(&words(&text)).unwrap().quota;
                        let fill = i128::from(quota.capacity) * i128::from(quota.interval.ns());
                        prop_assert!(
                            *floor == 0 || i128::from(out.reset_ns) <= fill,
                            "a floored take left the bucket {} ns in debt past its fill {}", out.reset_ns, fill
                        );
                        // Without a wait, the floor is there after the take, at the rate now.
                        if out.wait_ns == 0 {
                            prop_assert!(out.remaining >= *floor, "{} left below the floor {}", out.remaining, floor);
                        }
                    }
                }
                Op::Give { grant, fraction } => {
                    let open: Vec<usize> = (0..grants.len()).filter(|&i| grants[i].given == 0 && grants[i].ticket > 0).collect();
                    if open.is_empty() { continue; }
                    let g = &mut grants[open[grant % open.len()]];
                    let n = g.tokens * u64::from(*fraction) / 4;
                    let text = format!("{} {n} {}", quota(g.bucket), g.ticket);
                    let paused_ns = paused_for(state[g.bucket].as_ref(), now);
                    let out = on(&GiveArgs::parse(&words(&text)).unwrap(), state[g.bucket].as_ref(), now);
                    prop_assert!(out.reply <= n);
                    if let Some(w) = out.write {
                        if let Some(tat) = w.tat() {
                            prop_assert!(tat >= now.clamp(0, throttle_bucket::MAX_NOW_NS));
                        }
                        state[g.bucket] = w.stored();
                    }
                    // A give-back never hands out a token inside a pause (seen by the latest
                    // clock: one that reads earlier may see as on a pause a later one saw end).
                    if paused_ns > 0 && now >= latest {
                        let one = format!("{} TOKENS 1", quota(g.bucket));
                        let after = on(&TakeArgs::parse(&words(&one)).unwrap(), state[g.bucket].as_ref(), now);
                        prop_assert!(!after.granted && after.wait_ns >= paused_ns, "{:?} inside a pause of {} ns", after, paused_ns);
                    }
                    // Used once: a later give of this grant would be a second one.
                    g.given = out.reply;
                    g.ticket = 0;
                }
                Op::Pause { bucket, ms } => {
                    let text = format!("{} {ms}", quota(*bucket));
                    let out = on(&PauseArgs::parse(&words(&text)).unwrap(), state[*bucket].as_ref(), now);
                    prop_assert!(out.reply >= *ms);
                    if let Some(w) = out.write {
                        set(&mut state, *bucket, w)?;
                    }
                    let seen = on(&PeekArgs { quota: bucket_quota(*bucket) }, state[*bucket].as_ref(), now);
                    let paused_ns = paused_for(state[*bucket].as_ref(), now);
                    prop_assert!(paused_ns >= *ms as i64 * NS_PER_MS, "paused for {} ns", paused_ns);
                    prop_assert!(seen.reply.paused_ms >= *ms, "PEEK says paused for {} ms", seen.reply.paused_ms);
                }
                Op::Cut { bucket, ms, factor: f, recovery_ms } => {
                    let text = format!("{} {ms} {f} {recovery_ms}", quota(*bucket));
                    let before = factor(&state, *bucket, now);
                    let out = on(&CutArgs::parse(&words(&text)).unwrap(), state[*bucket].as_ref(), now);
                    prop_assert!(out.reply.next_ms >= *ms);
                    if let Some(w) = out.write {
                        set(&mut state, *bucket, w)?;
                    }
                    let after = factor(&state, *bucket, now);
                    prop_assert!(after <= before.max(FULL_FACTOR_BP), "a cut raised the rate");
                    prop_assert!(after >= throttle_bucket::MIN_FACTOR_BP);
                    prop_assert_eq!(out.reply.factor_bp, after);
                    if out.reply.cut {
                        prop_assert!(after <= before);
                    }
                }
                Op::Sync { bucket, remaining, reset_ms } => {
                    let text = format!("{} {remaining} {reset_ms}", quota(*bucket));
                    let out = on(&SyncArgs::parse(&words(&text)).unwrap(), state[*bucket].as_ref(), now);
                    if let Some(w) = out.write {
                        set(&mut state, *bucket, w)?;
                    }
                    let seen = on(&PeekArgs { quota: bucket_quota(*bucket) }, state[*bucket].as_ref(), now);
                    prop_assert!(seen.reply.remaining <= *remaining, "{} left after a sync to {}", seen.reply.remaining, remaining);
                    prop_assert_eq!(out.reply.remaining, seen.reply.remaining);
                }
                Op::Debit { bucket, tokens } => {
                    let text = format!("{} {tokens}", quota(*bucket));
                    let before = on(&PeekArgs { quota: bucket_quota(*bucket) }, state[*bucket].as_ref(), now);
                    let out = DebitArgs::parse(&words(&text)).unwrap().apply(&[state[*bucket].as_ref().cloned()], now)
                        .expect("a debit of a few tokens is never too deep here");
                    if let Some(w) = out.write {
                        set(&mut state, *bucket, w)?;
                    }
                    prop_assert!(out.reply.remaining <= before.reply.remaining);
                    prop_assert!(out.reply.reset_ms >= before.reply.reset_ms);
                }
                Op::MTake { tokens, max_wait_ms, floors, ticket } => {
                    let floor_words = floors.map_or(String::new(), |[a, b]| format!(" FLOOR {a} {b}"));
                    let ticket_word = if *ticket { " TICKET" } else { "" };
                    let text = format!(
                        "2 a b {} {} {} {} MAXWAIT {max_wait_ms}{floor_words}{ticket_word}",
                        quota(0), tokens[0], quota(1), tokens[1]
                    );
                    let factors = [factor(&state, 0, now), factor(&state, 1, now)];
                    let there_now = [0, 1].map(|b| {
                        let plain = format!("{} TOKENS {}", quota(b), tokens[b]);
                        on(&TakeArgs::parse(&words(&plain)).unwrap(), state[b].as_ref(), now).granted
                    });
                    let call = MTakeArgs::parse(&words(&text)).unwrap();
                    let out = call.apply(&state, now).unwrap();
                    let wrote = out.buckets().iter().filter(|b| b.write.is_some()).count();
                    let taking = tokens.iter().filter(|&&t| t > 0).count();
                    prop_assert!(wrote == 0 || wrote == taking, "all or nothing");
                    // The reply's tickets, after the pairs: each bucket's write in µs, 0 for
                    // one not written.
                    let reply = call.reply(&out);
                    let tickets = reply.as_slice().get(6..).unwrap_or(&[]);
                    // A denial ends with what held it back, never empty.
                    let tickets = if out.granted {
                        prop_assert!(out.refusal.is_empty());
                        tickets
                    } else {
                        prop_assert_eq!(tickets.last().copied(), Some(out.refusal.bits() as i64));
                        prop_assert!(!out.refusal.is_empty());
                        tickets.get(..tickets.len() - 1).unwrap_or(&[])
                    };
                    prop_assert_eq!(tickets.len(), if *ticket { 2 } else { 0 });
                    for (b, after) in out.buckets().iter().enumerate() {
                        let want = after.write.clone().map_or(0, |w| w.ticket_us());
                        if let Some(&t) = tickets.get(b) {
                            prop_assert_eq!(t, want, "bucket {}'s ticket", b);
                        }
                        if let Some(w) = after.write.clone() {
                            set(&mut state, b, w)?;
                            let ticket = tickets.get(b).copied().unwrap_or(0);
                            grants.push(Grant { bucket: b, act: now + out.wait_ns, tokens: tokens[b], given: 0, ticket, factor_bp: factors[b] });
                            if let Some(floors) = floors {
                                // A floor above 0 reserves only tokens that are there now;
                                // without a wait, the floor is there after the take.
                                prop_assert!(floors[b] == 0 || there_now[b], "bucket {} reserved into debt", b);
                                if out.wait_ns == 0 {
                                    prop_assert!(after.remaining >= floors[b]);
                                }
                            }
                        }
                    }
                }
                Op::Peek { bucket } => {
                    let out = on(&PeekArgs { quota: bucket_quota(*bucket) }, state[*bucket].as_ref(), now);
                    prop_assert!(out.reply.factor_bp <= FULL_FACTOR_BP);
                }
                Op::Resume { bucket } => {
                    let quota = bucket_quota(*bucket);
                    let out = on(&throttle_bucket::ResumeArgs { quota }, state[*bucket].as_ref(), now);
                    prop_assert_eq!(out.reply, out.write.is_some());
                    if let Some(w) = out.write {
                        if w == Write::Delete {
                            // Only a bucket full now, holding no slot, is deleted.
                            let before = state[*bucket].as_ref().map(|s| (s.tat, s.slots.held_at(i128::from(now))));
                            prop_assert!(before.is_some_and(|(tat, held)| tat <= now && held == 0), "{:?}", before);
                            state[*bucket] = None;
                        } else {
                            // `set` checks that the state never moves back.
                            set(&mut state, *bucket, w)?;
                        }
                        let seen = on(&PeekArgs { quota }, state[*bucket].as_ref(), now);
                        prop_assert_eq!(seen.reply.paused_ms, 0);
                        prop_assert_eq!(seen.reply.factor_bp, FULL_FACTOR_BP);
                    }
                }
            }
        }
        for (b, &(capacity, rate)) in buckets.iter().enumerate() {
            let mut used: Vec<(i64, u64, u16)> = grants
                .iter()
                .filter(|g| g.bucket == b && g.tokens > g.given)
                .map(|g| (g.act, g.tokens - g.given, g.factor_bp))
                .collect();
            used.sort_unstable();
            // Every grant: the configured rate (a factor of 10 000 for all).
            let all: Vec<(i64, u64, u16)> = used.iter().map(|&(t, n, _)| (t, n, FULL_FACTOR_BP)).collect();
            if let Some(broken) = over_the_bound(&all, capacity, rate) {
                prop_assert!(false, "bucket {}: {}", b, broken);
            }
            // The grants made while cut: the largest cut rate among them.
            let cut: Vec<(i64, u64, u16)> = used.into_iter().filter(|g| g.2 < FULL_FACTOR_BP).collect();
            if let Some(broken) = over_the_bound(&cut, capacity, rate) {
                prop_assert!(false, "bucket {} while cut: {}", b, broken);
            }
        }
    }
}
