//! What held a refused take back (the reply's last integer on a denial), as tables of explicit
//! instants: the tokens, the floor, the slots, a pause, and several at once.

use throttle_bucket::{MTakeArgs, PauseArgs, Refusal, State, TakeArgs, ThrottleCommand, Write};

/// 2026-12-01T00:00:00Z.
const T0: i64 = 1_796_083_200 * 1_000_000_000;

mod instants;
use instants::{words, MS};

/// THROTTLE.TAKE `text` on `stored` at `now`: the outcome's refusal and the reply.
fn take(text: &str, stored: &Option<State>, now: i64) -> (Refusal, Vec<i64>, Option<State>) {
    let args = TakeArgs::parse(&words(text)).expect("valid test arguments");
    let out = args.apply(std::slice::from_ref(stored), now).unwrap();
    let reply = args.reply(&out).as_slice().to_vec();
    // The reply reads back with the same reason.
    let back = args.decode(&reply).expect("the reply reads back");
    assert_eq!(
        back.refusal,
        (!out.granted).then_some(out.refusal),
        "{text}"
    );
    let after = out
        .write
        .and_then(|w| w.stored())
        .or_else(|| stored.clone());
    (out.refusal, reply, after)
}

/// THROTTLE.PAUSE `text` on `stored` at `now`: the state after.
fn pause(text: &str, stored: &Option<State>, now: i64) -> Option<State> {
    let args = PauseArgs::parse(&words(text)).expect("valid test arguments");
    let out = args.apply(std::slice::from_ref(stored), now).unwrap();
    out.write.and_then(|w: Write| w.stored())
}

#[test]
fn a_grant_says_nothing_and_replies_as_before() {
    let (refusal, reply, _) = take("10 10", &None, T0);
    assert_eq!((refusal, reply), (Refusal::NONE, vec![1, 9, 0, 100]));
    let (_, reply, _) = take("10 10 TICKET INFLIGHT 1 LEASE 1000", &None, T0);
    assert_eq!(reply.len(), 6, "the ticket and the slot, nothing after");
}

#[test]
fn the_tokens_the_floor_and_the_slots() {
    // Capacity 2 at 10/s: two takes empty it.
    let (_, _, state) = take("2 10 TOKENS 2", &None, T0);
    let (refusal, reply, _) = take("2 10", &state, T0);
    assert_eq!((refusal, reply), (Refusal::TOKENS, vec![0, 0, 100, 200, 1]));
    // Beyond MAXWAIT: the tokens; within it, reserved.
    let (refusal, _, _) = take("2 10 MAXWAIT 99", &state, T0);
    assert_eq!(refusal, Refusal::TOKENS);
    assert_eq!(take("2 10 MAXWAIT 100", &state, T0).0, Refusal::NONE);

    // 10 at 10/s holding 7: 3 more with a floor of 5 are there, the floor behind them not.
    let (_, _, state) = take("10 10 TOKENS 3", &None, T0);
    let (refusal, reply, _) = take("10 10 TOKENS 3 FLOOR 5", &state, T0);
    assert_eq!((refusal, reply), (Refusal::FLOOR, vec![0, 7, 100, 300, 2]));
    // 8 are not there at all: the tokens, whatever the floor.
    let (refusal, _, _) = take("10 10 TOKENS 8 FLOOR 2", &state, T0);
    assert_eq!(refusal, Refusal::TOKENS);

    // One slot, held for 1 s; the tokens plenty: the slot, until the lease ends.
    let one = "100 100 INFLIGHT 1 LEASE 1000";
    let (_, _, state) = take(one, &None, T0);
    let (refusal, reply, _) = take(one, &state, T0 + 400 * MS);
    // (The token taken 400 ms ago is back: 100 left.)
    assert_eq!(
        (refusal, reply),
        (Refusal::SLOT, vec![0, 100, 600, 0, 0, 4])
    );
    // The slot and the tokens both: both said, the longer wait.
    let tight = "1 1 INFLIGHT 1 LEASE 100";
    let (_, _, state) = take(tight, &None, T0);
    let (refusal, reply, _) = take(tight, &state, T0 + 10 * MS);
    assert_eq!(refusal, Refusal::TOKENS | Refusal::SLOT);
    assert_eq!(reply, [0, 0, 990, 990, 0, 5]);
    // The lease ran out, the token not back: only the tokens.
    assert_eq!(take(tight, &state, T0 + 200 * MS).0, Refusal::TOKENS);
}

#[test]
fn a_pause_says_so_while_it_lasts() {
    // A full 10 at 10/s paused for 1.5 s: its first token is there at T0 + 1.5 s.
    let state = pause("10 10 1500", &None, T0);
    let (refusal, reply, _) = take("10 10", &state, T0 + 500 * MS);
    assert_eq!(refusal, Refusal::TOKENS | Refusal::PAUSE);
    assert_eq!(reply, [0, 0, 1000, 1900, 9]);
    // With a floor: the tokens are not there, so the tokens and the pause.
    let (refusal, _, _) = take("10 10 FLOOR 1", &state, T0 + 500 * MS);
    assert_eq!(refusal, Refusal::TOKENS | Refusal::PAUSE);
    // A reservation that covers the pause is granted; one with every slot held is held back
    // by the slot alone: its tokens were not what stopped it.
    assert_eq!(
        take("10 10 MAXWAIT 1000", &state, T0 + 500 * MS).0,
        Refusal::NONE
    );
    let held = "10 10 MAXWAIT 2000 INFLIGHT 1 LEASE 5000";
    let (_, _, state) = take(held, &state, T0 + 500 * MS);
    let (refusal, _, _) = take(held, &state, T0 + 600 * MS);
    assert_eq!(refusal, Refusal::SLOT);
    // Once the pause is over (the bucket still in debt), only the tokens.
    let paused = pause("10 10 1500", &None, T0);
    let (_, _, later) = take("10 10 TOKENS 1", &paused, T0 + 1500 * MS);
    let (refusal, _, _) = take("10 10", &later, T0 + 1500 * MS);
    assert_eq!(refusal, Refusal::TOKENS);
}

#[test]
fn a_multi_take_says_it_over_every_bucket() {
    let mtake = |text: &str, stored: &[Option<State>], now: i64| {
        let args = MTakeArgs::parse(&words(text)).expect("valid test arguments");
        let out = args.apply(stored, now).unwrap();
        let reply = args.reply(&out).as_slice().to_vec();
        assert_eq!(
            args.decode(&reply).expect("reads back").refusal,
            (!out.granted).then_some(out.refusal)
        );
        (out.refusal, reply)
    };
    let paused = pause("10 10 1500", &None, T0);
    // b is paused and asked for a token: the tokens and the pause.
    let (refusal, reply) = mtake("2 a b 10 10 1 10 10 1", &[None, paused.clone()], T0);
    assert_eq!(refusal, Refusal::TOKENS | Refusal::PAUSE);
    assert_eq!(reply, [0, 1500, 10, 0, 0, 2400, 9]);
    // b paused but asked for nothing (only inspected), a short: the tokens alone.
    let (_, _, empty) = take("1 1", &None, T0);
    let (refusal, _) = mtake("2 a b 1 1 1 10 10 0", &[empty, paused], T0);
    assert_eq!(refusal, Refusal::TOKENS);
    // A floor: a holds 7, 3 more with a floor of 5 are there, the floor not.
    let (_, _, seven) = take("10 10 TOKENS 3", &None, T0);
    let (refusal, _) = mtake("2 a b 10 10 3 10 10 1 FLOOR 5 0", &[seven, None], T0);
    assert_eq!(refusal, Refusal::FLOOR);
    // Granted: nothing after the pairs.
    let (refusal, reply) = mtake("2 a b 10 10 1 10 10 1", &[None, None], T0);
    assert_eq!((refusal, reply.len()), (Refusal::NONE, 6));
}
