//! THROTTLE.PAUSE as tables of explicit instants.

use throttle_bucket::{pause, take, PauseArgs, TakeArgs};

const T0: i64 = 1_764_547_200_000_000_000;
const MS: i64 = 1_000_000;

fn words(text: &str) -> Vec<&[u8]> {
    text.split_whitespace().map(str::as_bytes).collect()
}

fn pause_args(text: &str) -> PauseArgs {
    PauseArgs::parse(&words(text)).expect("valid test arguments")
}

fn take_args(text: &str) -> TakeArgs {
    TakeArgs::parse(&words(text)).expect("valid test arguments")
}

#[test]
fn the_first_token_is_there_exactly_after_the_pause_then_no_burst() {
    // Capacity 10 at 10/s (100 ms a token), a full bucket, paused for 1.5 s.
    let out = pause(&pause_args("10 10 1500"), None, T0);
    assert_eq!(out.reply(), 1500);
    let tat = out.write.expect("a pause of a full bucket writes").tat_ns;
    assert_eq!(tat, T0 + 1500 * MS + 9 * 100 * MS);
    assert_eq!(out.write.unwrap().expire_at_ms, tat / MS);

    let state = Some(tat);
    let at = |now: i64, text: &str| take(&take_args(text), state, now);
    // Nothing until the pause is over, and the reply says exactly when.
    assert_eq!(at(T0, "10 10").reply(), [0, 0, 1500, 2400]);
    assert_eq!(at(T0 + 1499 * MS, "10 10").reply(), [0, 0, 1, 901]);
    // Then one token, not a burst: the second waits one interval.
    let first = at(T0 + 1500 * MS, "10 10");
    assert_eq!(first.reply(), [1, 0, 0, 1000]);
    let second = take(
        &take_args("10 10"),
        Some(first.write.unwrap().tat_ns),
        T0 + 1500 * MS,
    );
    assert_eq!(second.reply(), [0, 0, 100, 1000]);
}

#[test]
fn a_pause_never_shortens_a_longer_pause_or_a_debt() {
    let long = pause(&pause_args("10 10 60000"), None, T0).write.unwrap();
    // A shorter pause later changes nothing and says how long the longer one still runs.
    let short = pause(
        &pause_args("10 10 1000"),
        Some(long.tat_ns),
        T0 + 10_000 * MS,
    );
    assert_eq!(short.write, None);
    assert_eq!(short.reply(), 50_000);
    // The same pause again (a second replica saw the same 429): a no-op.
    let again = pause(&pause_args("10 10 60000"), Some(long.tat_ns), T0);
    assert_eq!((again.write, again.reply()), (None, 60_000));
    // A debt of 30 reservations (3 s past full) outlasts a 1 s pause.
    let debt = T0 + 3_000 * MS + 1_000 * MS;
    let out = pause(&pause_args("10 10 1000"), Some(debt), T0);
    assert_eq!((out.write, out.reply()), (None, 3_100));
    // A longer pause extends it.
    let out = pause(&pause_args("10 10 5000"), Some(debt), T0);
    assert_eq!(out.write.unwrap().tat_ns, T0 + 5_900 * MS);
    assert_eq!(out.reply(), 5_000);
}

#[test]
fn a_pause_on_a_clock_that_reads_earlier_still_only_moves_forward() {
    let state = T0 + 500 * MS;
    // The clock reads an hour back: the pause counts from that reading, below the state.
    let out = pause(&pause_args("1 1 1000"), Some(state), T0 - 3_600_000 * MS);
    assert_eq!(out.write, None);
    // Capacity 1: the next token is at the state itself, 1 h 0.5 s after that reading.
    assert_eq!(out.reply(), 3_600_500);
}

#[test]
fn the_longest_pause_on_the_slowest_bucket_fits() {
    let out = pause(
        &pause_args("315360000 1 315360000000"),
        Some(i64::MAX - 1),
        T0,
    );
    assert_eq!(out.write, None, "a forged state past everything is debt");
    let out = pause(&pause_args("315360000 1 315360000000"), None, T0);
    let write = out.write.unwrap();
    assert_eq!(out.reply(), 315_360_000_000);
    assert!(write.tat_ns > T0);
}
