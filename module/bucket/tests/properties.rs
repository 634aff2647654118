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
