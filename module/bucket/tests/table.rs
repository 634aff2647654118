//! THROTTLE.TAKE's arithmetic as tables of explicit instants.

use throttle_bucket::{Outcome, State, TakeArgs, ThrottleCommand, Write};

/// The call on one bucket whose stored state is `stored`, at `now`, as the module runs it.
fn on<C: ThrottleCommand>(call: &C, stored: Option<&State>, now: i64) -> C::Outcome {
    call.apply(&[stored.cloned()], now).unwrap()
}

/// An arbitrary instant (2025-12-01T00:00:00Z) in ns, so the tables read as offsets from it.
const T0: i64 = 1_764_547_200_000_000_000;
const MS: i64 = 1_000_000;

fn args(text: &str) -> TakeArgs {
    let words: Vec<&[u8]> = text.split_whitespace().map(str::as_bytes).collect();
    TakeArgs::parse(&words).expect("valid test arguments")
}

/// Runs calls in order against one bucket, threading the written state through.
fn run(calls: &[(&str, i64)]) -> Vec<Outcome> {
    let mut state = None;
    calls
        .iter()
        .map(|&(text, now)| {
            let outcome = on(&args(text), state.as_ref(), now);
            if let Some(write) = outcome.write.clone() {
                state = write.stored();
            }
            outcome
        })
        .collect()
}

#[test]
fn seed_scenario_forty_reservations_at_one_instant() {
    // Capacity 8, 9 tokens per second: the interval is 111 111 112 ns (rounded up), so a full
    // refill takes 888.888896 ms and the k-th reservation waits (k - 8) intervals.
    let calls = vec![("8 9 MAXWAIT 60000", T0); 40];
    let replies: Vec<[i64; 4]> = run(&calls).iter().map(Outcome::reply).collect();
    // [granted, remaining, wait_ms, reset_ms] for calls 1..=40.
    let expected: [[i64; 4]; 40] = [
        [1, 7, 0, 112],
        [1, 6, 0, 223],
        [1, 5, 0, 334],
        [1, 4, 0, 445],
        [1, 3, 0, 556],
        [1, 2, 0, 667],
        [1, 1, 0, 778],
        [1, 0, 0, 889],
        [1, 0, 112, 1001],
        [1, 0, 223, 1112],
        [1, 0, 334, 1223],
        [1, 0, 445, 1334],
        [1, 0, 556, 1445],
        [1, 0, 667, 1556],
        [1, 0, 778, 1667],
        [1, 0, 889, 1778],
        [1, 0, 1001, 1889],
        [1, 0, 1112, 2001],
        [1, 0, 1223, 2112],
        [1, 0, 1334, 2223],
        [1, 0, 1445, 2334],
        [1, 0, 1556, 2445],
        [1, 0, 1667, 2556],
        [1, 0, 1778, 2667],
        [1, 0, 1889, 2778],
        [1, 0, 2001, 2889],
        [1, 0, 2112, 3001],
        [1, 0, 2223, 3112],
        [1, 0, 2334, 3223],
        [1, 0, 2445, 3334],
        [1, 0, 2556, 3445],
        [1, 0, 2667, 3556],
        [1, 0, 2778, 3667],
        [1, 0, 2889, 3778],
        [1, 0, 3001, 3889],
        [1, 0, 3112, 4001],
        [1, 0, 3223, 4112],
        [1, 0, 3334, 4223],
        [1, 0, 3445, 4334],
        [1, 0, 3556, 4445],
    ];
    for (k, (got, want)) in replies.iter().zip(expected.iter()).enumerate() {
        assert_eq!(got, want, "call {}", k + 1);
    }
}

#[test]
fn without_maxwait_the_ninth_call_is_told_when_to_retry() {
    let mut calls = vec![("8 9", T0); 9];
    calls.push(("8 9", T0 + 112 * MS));
    let out = run(&calls);
    assert!(out[..8].iter().all(|o| o.granted));
    // The 9th finds nothing, writes nothing, and is told 112 ms (111.111112 rounded up).
    assert_eq!(out[8].reply(), [0, 0, 112, 889]);
    assert_eq!(out[8].write, None);
    // Retrying after exactly that long succeeds.
    assert_eq!(out[9].reply(), [1, 0, 0, 889]);
}

#[test]
fn a_missing_key_is_a_full_bucket_and_the_write_expires_when_full_again() {
    let out = on(&args("10 10"), None, T0);
    assert_eq!(out.reply(), [1, 9, 0, 100]);
    assert_eq!(
        out.write,
        Some(Write::Store {
            state: State::plain(T0 + 100 * MS),
            expire_at_ms: Some(T0 / MS + 100)
        })
    );
}

#[test]
fn refill_is_continuous_and_capped_at_capacity() {
    let out = run(&[
        ("10 10 TOKENS 10", T0),                 // empty
        ("10 10 TOKENS 0", T0 + 250 * MS),       // 2.5 tokens back: 2 whole
        ("10 10 TOKENS 3", T0 + 250 * MS),       // not yet: 50 ms short
        ("10 10 TOKENS 3", T0 + 300 * MS),       // exactly 3
        ("10 10 TOKENS 0", T0 + 3_600_000 * MS), // an hour later: full, not more
    ]);
    let replies: Vec<[i64; 4]> = out.iter().map(Outcome::reply).collect();
    assert_eq!(
        replies,
        [
            [1, 0, 0, 1000],
            [1, 2, 0, 750],
            [0, 2, 50, 750],
            [1, 0, 0, 1000],
            [1, 10, 0, 0],
        ]
    );
}

#[test]
fn tokens_zero_inspects_and_writes_nothing_even_in_debt() {
    let out = run(&[
        ("2 1 TOKENS 2", T0),
        ("2 1 MAXWAIT 5000", T0), // reserved: one second of debt
        ("2 1 TOKENS 0", T0),
    ]);
    assert_eq!(out[1].reply(), [1, 0, 1000, 3000]);
    assert_eq!(out[2].reply(), [1, 0, 0, 3000]);
    assert_eq!(out[2].write, None);
}

#[test]
fn maxwait_reserves_only_within_its_bound() {
    let out = run(&[
        ("4 2 TOKENS 4", T0),
        ("4 2 TOKENS 2 MAXWAIT 999", T0), // needs 1000 ms: refused, nothing taken
        ("4 2 TOKENS 2 MAXWAIT 1000", T0), // exactly: taken, wait 1000
        ("4 2 TOKENS 0", T0),
    ]);
    let replies: Vec<[i64; 4]> = out.iter().map(Outcome::reply).collect();
    assert_eq!(
        replies,
        [
            [1, 0, 0, 2000],
            [0, 0, 1000, 2000],
            [1, 0, 1000, 3000],
            [1, 0, 0, 3000]
        ]
    );
    assert_eq!(out[1].write, None);
}

#[test]
fn a_clock_that_reads_earlier_adds_no_tokens_and_never_moves_the_state_back() {
    let out = run(&[
        ("5 1 TOKENS 5", T0),                  // empty until T0 + 5 s
        ("5 1 TOKENS 0", T0 - 3_600_000 * MS), // clock stepped back an hour
        ("5 1", T0 - 3_600_000 * MS),
        ("5 1 MAXWAIT 2000", T0 - 3_600_000 * MS), // reserves from the stored instant
        ("5 1", T0 + 6_000 * MS),                  // caught up: full again, as if never stepped
    ]);
    // Seen from the earlier clock the bucket is an hour and 5 s from full, never fuller.
    assert_eq!(out[1].reply(), [1, 0, 0, 3_605_000]);
    assert_eq!(out[2].reply(), [0, 0, 3_601_000, 3_605_000]);
    assert!(!out[3].granted);
    assert_eq!(out[4].reply(), [1, 4, 0, 1000]);
    assert_eq!(
        out[4].write.clone().and_then(|w| w.tat()),
        Some(T0 + 7_000 * MS)
    );
}

#[test]
fn a_state_far_ahead_of_the_clock_is_debt_not_an_overflow() {
    let args = args("8 9 MAXWAIT 315360000000");
    let out = on(&args, Some(&State::plain(i64::MAX)), T0);
    assert!(!out.granted);
    assert_eq!(out.write, None);
    assert!(out.reply()[2] > 0 && out.reply()[3] > 0);
    // A clock beyond the supported range is clamped rather than overflowing.
    let out = on(&args, Some(&State::plain(0)), i64::MAX);
    assert!(out.granted);
}

#[test]
fn fractional_and_high_rates() {
    // 0.5/s: one token every 2 s.
    let out = run(&[
        ("1 0.5", T0),
        ("1 0.5", T0 + 1_999 * MS),
        ("1 0.5", T0 + 2_000 * MS),
    ]);
    let replies: Vec<[i64; 4]> = out.iter().map(Outcome::reply).collect();
    assert_eq!(replies, [[1, 0, 0, 2000], [0, 0, 1, 1], [1, 0, 0, 2000]]);

    // 2 GiB per minute in bytes, 64 KiB per call: interval 28 ns, so 1 835 008 ns per call.
    let out = on(&args("2147483648 35791394.1 TOKENS 65536"), None, T0);
    assert_eq!(out.reply(), [1, 2147418112, 0, 2]);
    assert_eq!(
        out.write.clone().and_then(|w| w.tat()),
        Some(T0 + 65536 * 28)
    );
}

#[test]
fn a_floored_take_reserves_only_tokens_that_are_there_now() {
    // Capacity 10 at 10/s: 100 ms a token. 5 taken: 5 left, full at T0 + 500 ms.
    let five = on(&args("10 10 TOKENS 5"), None, T0);
    let half = five.write.clone().and_then(|w| w.stored());
    assert_eq!(half.clone().map(|s| s.tat), Some(T0 + 500 * MS));

    // 2 above a floor of 5: the 2 are there now, the floor 200 ms from now. Within MAXWAIT:
    // granted with that wait, and the state moves by 2 intervals, as any reservation's.
    let out = on(
        &args("10 10 TOKENS 2 FLOOR 5 MAXWAIT 200 TICKET"),
        half.as_ref(),
        T0,
    );
    assert_eq!(out.reply(), [1, 3, 200, 700]);
    assert_eq!(out.write.clone().and_then(|w| w.tat()), Some(T0 + 700 * MS));
    assert_eq!(out.ticket(), (T0 + 700 * MS) / 1000);
    assert!(!out.held_by_floor);
    // A ms short of the wait: denied as before, the wait until the tokens and the floor are
    // both there, nothing written, held by the floor alone.
    let short = on(
        &args("10 10 TOKENS 2 FLOOR 5 MAXWAIT 199"),
        half.as_ref(),
        T0,
    );
    assert_eq!(short.reply(), [0, 5, 200, 500]);
    assert_eq!(short.write, None);
    assert!(short.held_by_floor);
    // Without MAXWAIT nothing changes: denied, the same wait.
    let now_only = on(&args("10 10 TOKENS 2 FLOOR 5"), half.as_ref(), T0);
    assert_eq!(now_only.reply(), [0, 5, 200, 500]);

    // After the reservation, a call without a floor finds the 3 left, never a debt; a second
    // floored reservation takes 2 of them for 400 ms from now; a third, with only 1 there now,
    // is denied whatever its MAXWAIT, and told when the tokens and the floor are both there.
    let calls = run(&[
        ("10 10 TOKENS 5", T0),
        ("10 10 TOKENS 2 FLOOR 5 MAXWAIT 1000", T0),
        ("10 10 TOKENS 2 FLOOR 5 MAXWAIT 1000", T0),
        ("10 10 TOKENS 2 FLOOR 5 MAXWAIT 60000", T0),
        ("10 10 TOKENS 1", T0),
        ("10 10 TOKENS 1", T0),
    ]);
    let replies: Vec<[i64; 4]> = calls.iter().map(Outcome::reply).collect();
    assert_eq!(
        replies,
        [
            [1, 5, 0, 500],
            [1, 3, 200, 700],
            [1, 1, 400, 900],
            [0, 1, 600, 900],
            [1, 0, 0, 1000],
            [0, 0, 100, 1000],
        ]
    );
    assert_eq!(calls[3].write, None);
    assert!(
        !calls[3].held_by_floor,
        "a plain take of 2 would be denied too"
    );
}

#[test]
fn a_floored_reservation_never_puts_the_bucket_into_debt() {
    // 9 of 10 taken: 1 left. 2 above a floor of 1 are there 200 ms from now, well within
    // MAXWAIT, but only 1 is there now: denied, nothing written. A take without a floor
    // reserves the same 2 into debt.
    let one_left = on(&args("10 10 TOKENS 9"), None, T0)
        .write
        .and_then(|w| w.stored());
    let floored = on(
        &args("10 10 TOKENS 2 FLOOR 1 MAXWAIT 5000"),
        one_left.as_ref(),
        T0,
    );
    assert_eq!(floored.reply(), [0, 1, 200, 900]);
    assert_eq!(floored.write, None);
    assert!(!floored.held_by_floor);
    let plain = on(&args("10 10 TOKENS 2 MAXWAIT 5000"), one_left.as_ref(), T0);
    assert_eq!(plain.reply(), [1, 0, 100, 1100]);
    // FLOOR 0 is no floor: it reserves into debt like the plain take.
    let zero = on(
        &args("10 10 TOKENS 2 FLOOR 0 MAXWAIT 5000"),
        one_left.as_ref(),
        T0,
    );
    assert_eq!((zero.reply(), zero.write), (plain.reply(), plain.write));
    // 100 ms later the 2 are there: the floored take reserves them for when the floor is too.
    let later = on(
        &args("10 10 TOKENS 2 FLOOR 1 MAXWAIT 5000"),
        one_left.as_ref(),
        T0 + 100 * MS,
    );
    assert_eq!(later.reply(), [1, 0, 100, 1000]);
    assert_eq!(
        later.write.clone().and_then(|w| w.tat()),
        Some(T0 + 1100 * MS)
    );
}
