//! THROTTLE.MTAKE as tables of explicit instants.

use throttle_bucket::{
    GiveArgs, MOutcome, MTakeArgs, Refusal, State, TakeArgs, ThrottleCommand, Write,
};

mod instants;
use instants::{on, words, MS, T0};

fn run(text: &str, stored: &[Option<i64>], now: i64) -> (MOutcome, Vec<i64>) {
    let stored: Vec<Option<State>> = stored.iter().map(|s| s.map(State::plain)).collect();
    let args = MTakeArgs::parse(&words(text)).unwrap();
    let out = args.apply(&stored, now).unwrap();
    let reply = args.reply(&out).as_slice().to_vec();
    (out, reply)
}

fn states(out: &MOutcome, before: &[Option<i64>]) -> Vec<Option<i64>> {
    out.buckets()
        .iter()
        .zip(before)
        .map(|(b, s)| b.write.as_ref().and_then(|w| w.tat()).or(*s))
        .collect()
}

#[test]
fn ten_per_second_and_twenty_five_per_five_seconds() {
    let q = "2 s m 10 10 1 25 5 1";
    let mut stored = vec![None, None];
    // 10 at once: the per-second bucket empties, the other has 15 left.
    for k in 1..=10 {
        let (out, reply) = run(q, &stored, T0);
        assert_eq!(reply[..2], [1, 0], "call {k}");
        assert_eq!(reply[2], 10 - k, "call {k}");
        stored = states(&out, &stored);
    }
    // The 11th is denied by the first bucket alone and nothing is written to either; the
    // last integer says the tokens held it back.
    let (out, reply) = run(q, &stored, T0);
    assert_eq!(reply, [0, 100, 0, 1000, 15, 2000, 1]);
    assert_eq!(out.refusal, Refusal::TOKENS);
    assert!(out.buckets().iter().all(|b| b.write.is_none()));
}

#[test]
fn all_or_nothing_when_one_bucket_is_short() {
    // The second bucket is empty for 2 s more: the first is left untouched.
    let stored = [None, Some(T0 + 2000 * MS + 1000 * MS)];
    let (out, reply) = run("2 a b 5 1 1 1 1 1", &stored, T0);
    assert_eq!(reply, [0, 3000, 5, 0, 0, 3000, 1]);
    assert!(out.buckets().iter().all(|b| b.write.is_none()));
}

#[test]
fn the_wait_is_the_longest_and_every_bucket_takes_as_of_then() {
    // a: full (5 at 1/s); b: its one token comes in 2 s (capacity 1 at 1/s, 2 s in debt).
    let stored = [None, Some(T0 + 2000 * MS)];
    let (out, reply) = run("2 a b 5 1 1 1 1 1 MAXWAIT 5000", &stored, T0);
    // Seen from now, a holds 2: its token is set aside at T0 + 2 s, which is also when a
    // would be full again without it.
    assert_eq!(reply, [1, 2000, 2, 3000, 0, 3000]);
    let after = states(&out, &stored);
    // a's token is used 2 s from now, so a takes it as a take at that instant would: a full
    // bucket at T0 + 2 s less one token. A single take on a at T0 + 2 s then sees 4 left.
    assert_eq!(after[0], Some(T0 + 2000 * MS + 1000 * MS));
    let single = on(
        &TakeArgs::parse(&words("5 1 TOKENS 0")).unwrap(),
        after[0].map(State::plain).as_ref(),
        T0 + 2000 * MS,
    );
    assert_eq!(single.reply(), [1, 4, 0, 1000]);
    assert_eq!(after[1], Some(T0 + 3000 * MS));
}

#[test]
fn zero_tokens_inspect_and_a_bucket_with_zero_is_left_alone() {
    let stored = [Some(T0 + 500 * MS), None];
    let (out, reply) = run("2 a b 10 10 0 10 10 0", &stored, T0);
    assert_eq!(reply, [1, 0, 5, 500, 10, 0]);
    assert!(out.buckets().iter().all(|b| b.write.is_none()));
    // Taking from b only: a is not written, and its debt does not delay b, even a debt past
    // empty (a asked for nothing is only inspected, as TOKENS 0 is).
    let deep = [Some(T0 + 5000 * MS), None];
    let (out, reply) = run("2 a b 10 10 0 10 10 3", &deep, T0);
    assert_eq!(reply, [1, 0, 0, 5000, 7, 300]);
    assert_eq!(out.buckets()[0].write, None);
    let (out, reply) = run("2 a b 10 10 0 10 10 3", &stored, T0);
    assert_eq!(reply, [1, 0, 5, 500, 7, 300]);
    assert_eq!(out.buckets()[0].write, None);
}

/// `calls` calls of THROTTLE.TAKE `take` and of THROTTLE.MTAKE `mtake` on one key, `step_ms` ms
/// and `step_ns` ns apart, reply alike and write the same state.
fn one_key_is_throttle_take(take: &str, mtake: &str, calls: i64, step_ms: i64, step_ns: i64) {
    let mut stored = None;
    for k in 0..calls {
        let now = T0 + k * step_ms * MS + k * step_ns;
        let single = on(
            &TakeArgs::parse(&words(take)).unwrap(),
            stored.map(State::plain).as_ref(),
            now,
        );
        let (multi, reply) = run(mtake, &[stored], now);
        let [granted, remaining, wait, reset] = single.reply();
        let mut expected = vec![granted, wait, remaining, reset, single.ticket()];
        if granted == 0 {
            expected.push(single.refusal.bits() as i64);
        }
        assert_eq!(reply, expected, "{mtake}: call {k}");
        assert_eq!(multi.refusal, single.refusal, "{mtake}: call {k}");
        assert_eq!(multi.buckets()[0].write, single.write, "{mtake}: call {k}");
        assert_eq!(
            multi.held_by_floor, single.held_by_floor,
            "{mtake}: call {k}"
        );
        stored = single.write.clone().and_then(|w| w.tat()).or(stored);
    }
}

#[test]
fn one_key_is_the_same_as_throttle_take() {
    one_key_is_throttle_take(
        "8 9 TOKENS 2 MAXWAIT 300 TICKET",
        "1 a 8 9 2 MAXWAIT 300 TICKET",
        12,
        37,
        333,
    );
}

fn give_back(
    quota: &str,
    n: u64,
    ticket: i64,
    stored: Option<i64>,
    now: i64,
) -> (u64, Option<Write>) {
    let args = GiveArgs::parse(&words(&format!("{quota} {n} {ticket}"))).unwrap();
    let out = on(&args, stored.map(State::plain).as_ref(), now);
    (out.reply, out.write)
}

#[test]
fn tickets_follow_the_pairs_and_give_each_bucket_back() {
    // Not on a whole µs: the tickets are the states rounded down.
    let now = T0 + 1_234;
    let (out, reply) = run("2 a b 10 10 3 25 5 2 TICKET", &[None, None], now);
    let after = states(&out, &[None, None]);
    assert_eq!(after, [Some(now + 300 * MS), Some(now + 400 * MS)]);
    let tickets = [(now + 300 * MS) / 1000, (now + 400 * MS) / 1000];
    assert_eq!(reply, [1, 0, 7, 300, 23, 400, tickets[0], tickets[1]]);
    // Without TICKET: the same reply, without the tickets.
    let (_, plain) = run("2 a b 10 10 3 25 5 2", &[None, None], now);
    assert_eq!(plain[..], reply[..6]);

    // Each bucket gives its tokens back, and is full again: its key is deleted.
    let later = now + 50 * MS;
    assert_eq!(
        give_back("10 10", 3, tickets[0], after[0], later),
        (3, Some(Write::Delete))
    );
    assert_eq!(
        give_back("25 5", 2, tickets[1], after[1], later),
        (2, Some(Write::Delete))
    );

    // A second take after the first: its tickets give nothing back, on either bucket.
    let (second, _) = run("2 a b 10 10 1 25 5 1", &after, later);
    let moved = states(&second, &after);
    assert_eq!(
        give_back("10 10", 3, tickets[0], moved[0], later),
        (0, None)
    );
    assert_eq!(give_back("25 5", 2, tickets[1], moved[1], later), (0, None));
}

#[test]
fn a_denial_and_a_bucket_asked_for_0_get_ticket_0() {
    // b is empty for 2 s more: denied, nothing written, every ticket 0.
    let stored = [None, Some(T0 + 3000 * MS)];
    let (out, reply) = run("2 a b 5 1 1 1 1 1 TICKET", &stored, T0);
    assert_eq!(reply, [0, 3000, 5, 0, 0, 3000, 0, 0, 1]);
    assert!(out.buckets().iter().all(|b| b.write.is_none()));
    // a asked for nothing: not written, ticket 0; b's is its state.
    let (out, reply) = run("2 a b 5 1 0 10 10 1 TICKET", &[None, None], T0);
    assert_eq!(reply, [1, 0, 5, 0, 9, 100, 0, (T0 + 100 * MS) / 1000]);
    assert_eq!(out.buckets()[0].write, None);
    assert_eq!(out.tickets().collect::<Vec<_>>(), reply[6..]);
}

#[test]
fn a_reserved_multi_take_gives_back_to_the_instant_it_took_as_of() {
    // As in the_wait_is_the_longest_...: a (full) takes as of b's token, 2 s from now.
    let stored = [None, Some(T0 + 2000 * MS)];
    let (out, reply) = run("2 a b 5 1 1 1 1 1 MAXWAIT 5000 TICKET", &stored, T0);
    let after = states(&out, &stored);
    assert_eq!(after, [Some(T0 + 3000 * MS), Some(T0 + 3000 * MS)]);
    assert_eq!(reply[6..], [(T0 + 3000 * MS) / 1000; 2]);
    // Both give their token back; b is back where it was. a is left at the instant it took
    // as of, not full: the state keeps no trace of what it was before, and giving back more
    // would free time before this take's own slot.
    let (given, write) = give_back("5 1", 1, reply[6], after[0], T0);
    assert_eq!(
        (given, write.and_then(|w| w.tat())),
        (1, Some(T0 + 2000 * MS))
    );
    let (given, write) = give_back("1 1", 1, reply[7], after[1], T0);
    assert_eq!(
        (given, write.and_then(|w| w.tat())),
        (1, Some(T0 + 2000 * MS))
    );
}

#[test]
fn a_forged_state_past_i64_refuses_the_whole_call() {
    let stored = [None, Some(i64::MAX)];
    let (out, reply) = run("2 a b 8 9 1 8 9 1 MAXWAIT 315360000000 TICKET", &stored, T0);
    assert_eq!((reply[0], &reply[6..]), (0, &[0, 0, 1][..]));
    assert!(out.buckets().iter().all(|b| b.write.is_none()));
}

#[test]
fn a_floored_key_reserves_only_its_tokens_there_now() {
    // a: capacity 10 at 10/s, 5 left (full at T0 + 500 ms), FLOOR 5; b: capacity 1 at 1/s,
    // its token 300 ms from now, no floor.
    let stored = [Some(T0 + 500 * MS), Some(T0 + 300 * MS)];
    let call = "2 a b 10 10 2 1 1 1 MAXWAIT 1000 FLOOR 5 0 TICKET";
    let (out, reply) = run(call, &stored, T0);
    // a's 2 are there now and its floor 200 ms from now; b's token 300 ms from now: granted,
    // the wait the longest, each bucket taking as of then (a by its 2 intervals from its own
    // state, which is later).
    let after = states(&out, &stored);
    assert_eq!(after, [Some(T0 + 700 * MS), Some(T0 + 1300 * MS)]);
    assert_eq!(
        reply,
        [
            1,
            300,
            3,
            700,
            0,
            1300,
            (T0 + 700 * MS) / 1000,
            (T0 + 1300 * MS) / 1000
        ]
    );
    // Beyond MAXWAIT: denied, nothing written, the same wait.
    let (out, reply) = run("2 a b 10 10 2 1 1 1 MAXWAIT 299 FLOOR 5 0", &stored, T0);
    assert_eq!(reply, [0, 300, 5, 500, 0, 300, 1]);
    assert!(out.buckets().iter().all(|b| b.write.is_none()));

    // a with 1 left (full at T0 + 900 ms) and FLOOR 1: its 2 are not there now, so the call is
    // denied although every wait is within MAXWAIT, and neither bucket is written. With FLOOR
    // 0 on a the same call reserves.
    let short = [Some(T0 + 900 * MS), Some(T0 + 300 * MS)];
    let (out, reply) = run("2 a b 10 10 2 1 1 1 MAXWAIT 1000 FLOOR 1 0", &short, T0);
    assert_eq!(reply, [0, 300, 1, 900, 0, 300, 1]);
    assert!(out.buckets().iter().all(|b| b.write.is_none()));
    assert!(!out.held_by_floor);
    let (out, reply) = run("2 a b 10 10 2 1 1 1 MAXWAIT 1000 FLOOR 0 0", &short, T0);
    assert_eq!(reply, [1, 300, 0, 1100, 0, 1300]);
    assert!(out.granted);

    // a full (10 at 10/s, FLOOR 5) but b's token 950 ms away: a would take its 2 as of then,
    // its state 1.15 s ahead, past its 1 s fill: a debt its callers without a floor would
    // find. Denied, nothing written; without the floor the same call reserves.
    let later = [None, Some(T0 + 950 * MS)];
    let (out, reply) = run("2 a b 10 10 2 1 1 1 MAXWAIT 1000 FLOOR 5 0", &later, T0);
    assert_eq!(reply, [0, 950, 10, 0, 0, 950, 1]);
    assert!(out.buckets().iter().all(|b| b.write.is_none()));
    let (out, reply) = run("2 a b 10 10 2 1 1 1 MAXWAIT 1000 FLOOR 0 0", &later, T0);
    assert_eq!(reply, [1, 950, 0, 1150, 0, 1950]);
    assert!(out.granted);
}

#[test]
fn a_one_key_floored_multi_take_is_throttle_take() {
    one_key_is_throttle_take(
        "8 9 TOKENS 2 FLOOR 3 MAXWAIT 300 TICKET",
        "1 a 8 9 2 MAXWAIT 300 FLOOR 3 TICKET",
        16,
        23,
        777,
    );
}
