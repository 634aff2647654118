//! THROTTLE.PAUSE as tables of explicit instants.

use throttle_bucket::{
    Announcement, Message, PauseArgs, PeekArgs, Pushback, State, TakeArgs, ThrottleCommand, Write,
};

mod instants;
use instants::{on, words, MS, T0};

fn pause_args(text: &str) -> PauseArgs {
    PauseArgs::parse(&words(text)).expect("valid test arguments")
}

fn take_args(text: &str) -> TakeArgs {
    TakeArgs::parse(&words(text)).expect("valid test arguments")
}

fn stored(write: Option<Write>) -> Option<State> {
    write.and_then(|w| w.stored())
}

#[test]
fn the_first_token_is_there_exactly_after_the_pause_then_no_burst() {
    // Capacity 10 at 10/s (100 ms a token), a full bucket, paused for 1.5 s.
    let out = on(&pause_args("10 10 1500"), None, T0);
    assert_eq!(out.reply, 1500);
    let state = stored(out.write.clone()).expect("a pause of a full bucket writes");
    let tat = state.tat;
    assert_eq!(tat, T0 + 1500 * MS + 9 * 100 * MS);
    // The fleet hears it: the pause, the state after it as a ticket, the factor.
    assert_eq!(
        out.announce,
        Some(Message::Pause(Announcement {
            pause_ns: 1500 * MS,
            ticket_us: tat / 1000,
            factor_bp: 10_000,
        }))
    );
    assert_eq!(
        state.pushback,
        Some(Pushback {
            paused_until: T0 + 1500 * MS,
            cut: None
        }),
        "marked paused until then"
    );
    assert_eq!(
        out.write.clone().and_then(|w| w.expire_at_ms()),
        Some(tat / MS)
    );

    let at = |now: i64, text: &str| on(&take_args(text), Some(&state), now);
    // Nothing until the pause is over, and the reply says exactly when.
    assert_eq!(at(T0, "10 10").reply(), [0, 0, 1500, 2400]);
    assert_eq!(at(T0 + 1499 * MS, "10 10").reply(), [0, 0, 1, 901]);
    // Then one token, not a burst: the second waits one interval.
    let first = at(T0 + 1500 * MS, "10 10");
    assert_eq!(first.reply(), [1, 0, 0, 1000]);
    // The pause is over: the take writes the 8-byte state again.
    let after = stored(first.write.clone()).unwrap();
    assert_eq!(after.pushback, None);
    let second = on(&take_args("10 10"), Some(&after), T0 + 1500 * MS);
    assert_eq!(second.reply(), [0, 0, 100, 1000]);
}

#[test]
fn a_pause_never_shortens_a_longer_pause_or_a_debt() {
    let long = stored(on(&pause_args("10 10 60000"), None, T0).write);
    // A shorter pause later changes nothing and says how long the longer one still runs.
    let short = on(&pause_args("10 10 1000"), long.as_ref(), T0 + 10_000 * MS);
    assert_eq!((short.write.clone(), short.announce), (None, None));
    assert_eq!(short.reply, 50_000);
    // The same pause again (a second replica saw the same 429): a no-op.
    let again = on(&pause_args("10 10 60000"), long.as_ref(), T0);
    assert_eq!((again.write.clone(), again.reply), (None, 60_000));
    // A debt of 30 reservations (3 s past full) outlasts a 1 s pause: the state stays, but the
    // bucket is marked paused, so that no reserved call inside the pause is sent.
    let debt = Some(State::plain(T0 + 3_000 * MS + 1_000 * MS));
    let out = on(&pause_args("10 10 1000"), debt.as_ref(), T0);
    assert_eq!(out.reply, 3_100);
    let marked = stored(out.write.clone()).unwrap();
    assert_eq!(marked.tat, T0 + 4_000 * MS, "the debt is kept");
    assert_eq!(
        marked.pushback.map(|p| p.paused_until),
        Some(T0 + 1_000 * MS)
    );
    assert_eq!(
        on(
            &PeekArgs {
                quota: pause_args("10 10 1").quota
            },
            Some(&marked),
            T0
        )
        .reply
        .paused_ms,
        1_000
    );
    // The same pause again changes nothing now.
    assert_eq!(on(&pause_args("10 10 1000"), Some(&marked), T0).write, None);
    // A longer pause extends it.
    let out = on(&pause_args("10 10 5000"), debt.as_ref(), T0);
    assert_eq!(
        out.write.clone().and_then(|w| w.tat()),
        Some(T0 + 5_900 * MS)
    );
    assert_eq!(out.reply, 5_000);
}

#[test]
fn a_pause_on_a_clock_that_reads_earlier_still_only_moves_forward() {
    let state = State::plain(T0 + 500 * MS);
    // The clock reads an hour back: the pause counts from that reading, below the state.
    let out = on(&pause_args("1 1 1000"), Some(&state), T0 - 3_600_000 * MS);
    // The state stays; the mark is written from that reading (and over by the true clock).
    assert_eq!(out.write.clone().and_then(|w| w.tat()), Some(T0 + 500 * MS));
    // Capacity 1: the next token is at the state itself, 1 h 0.5 s after that reading.
    assert_eq!(out.reply, 3_600_500);
}

#[test]
fn the_longest_pause_on_the_slowest_bucket_fits() {
    let out = on(
        &pause_args("315360000 1 315360000000"),
        Some(&State::plain(i64::MAX - 1)),
        T0,
    );
    assert_eq!(
        out.write.clone().and_then(|w| w.tat()),
        Some(i64::MAX - 1),
        "a forged state past everything is debt; only the mark is written"
    );
    let out = on(&pause_args("315360000 1 315360000000"), None, T0);
    assert_eq!(out.reply, 315_360_000_000);
    assert!(out.write.clone().and_then(|w| w.tat()).unwrap() > T0);
}
