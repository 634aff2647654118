//! The supplier's pushback meeting the other commands, as tables of explicit instants: a cut
//! too deep for the bucket to hold a call's tokens, a give-back inside a pause, a reservation
//! that would write a state past 20 years, and a cut after a cut.

use throttle_bucket::{
    parse_state, Announcement, CutArgs, GiveArgs, MTakeArgs, Message, PauseArgs, PeekArgs, State,
    TakeArgs, ThrottleCommand, Write, MAX_DEBT_NS,
};

mod instants;
use instants::{after, on, words, MS, T0};

fn stored(write: Option<Write>) -> Option<State> {
    write.and_then(|w| w.stored())
}

fn cut_at(text: &str, state: Option<State>, now: i64) -> Option<State> {
    let args = CutArgs::parse(&words(text)).expect("valid test arguments");
    let out = on(&args, state.as_ref(), now);
    after(&out.write, state)
}

fn take_at(text: &str, state: Option<State>, now: i64) -> throttle_bucket::Outcome {
    on(
        &TakeArgs::parse(&words(text)).expect("valid"),
        state.as_ref(),
        now,
    )
}

#[test]
fn a_cut_too_deep_to_hold_the_tokens_waits_for_the_recovery() {
    // Capacity 1 at 10/s cut to half, recovering over 30 s: one token costs 200 ms of a
    // 100 ms fill, so the bucket holds half a token until the rate is full again.
    let state = cut_at("1 10 1 0.5 30000", None, T0);
    let denied = take_at("1 10", state.clone(), T0 + 2 * MS);
    assert_eq!(
        denied.reply(),
        [0, 0, 29_998, 0],
        "until the recovery, not 100 ms"
    );
    assert_eq!(
        take_at("1 10", state.clone(), T0 + 29_999 * MS).reply(),
        [0, 0, 1, 0]
    );
    assert_eq!(
        take_at("1 10", state.clone(), T0 + 30_000 * MS).reply(),
        [1, 0, 0, 100]
    );
    // A reservation that covers it is granted for then, and taken as of then: the next one
    // is a cut token's time after it, not granted for the same instant.
    let reserved = take_at("1 10 MAXWAIT 30000", state, T0 + 2 * MS);
    assert_eq!(reserved.reply(), [1, 0, 29_998, 30_198]);
    let next = take_at(
        "1 10 MAXWAIT 60000",
        stored(reserved.write.clone()),
        T0 + 2 * MS,
    );
    assert_eq!(next.reply(), [1, 0, 30_198, 30_398]);

    // Capacity 10, a take of 6: 1.2 s of a 1 s fill at half the rate; held from 60 % of the
    // rate on, 6 s into the 30 s recovery. One token above a floor of 5 needs a little more
    // (each cost rounded up): 60.01 %, 6.006 s in.
    let state = cut_at("10 10 1 0.5 30000", None, T0);
    for (text, ms) in [("10 10 TOKENS 6", 6000), ("10 10 FLOOR 5", 6006)] {
        assert_eq!(
            take_at(text, state.clone(), T0 + 2 * MS).reply(),
            [0, 1, ms - 2, 799],
            "{text}"
        );
        let [granted, _, wait, _] = take_at(text, state.clone(), T0 + (ms - 1) * MS).reply();
        assert_eq!((granted, wait), (0, 1), "{text} a ms before");
        assert_eq!(
            take_at(text, state.clone(), T0 + ms * MS).reply()[0],
            1,
            "{text} then"
        );
    }
    // What the bucket holds at the cut rate waits as before: for its debt (the pause left
    // the first token at T0 + 1 ms, 799 ms of debt), not for the recovery.
    assert_eq!(
        take_at("10 10 TOKENS 4", state.clone(), T0 + 2 * MS).reply(),
        [0, 1, 599, 799]
    );
    // A floored take may reserve what is there now: the one token is (200 ms of the 201 ms
    // left at the cut rate), but the floor only 6.004 s from now, when the recovering rate
    // holds it; taken as of then, as every reservation under a deep cut is, its slot would
    // lie past the bucket's fill, a debt the callers without a floor would find. So it is
    // denied, whatever the MAXWAIT, told when tokens and floor are there (then taken at once).
    for max_wait in [6004, 6003, 60_000] {
        let text = format!("10 10 FLOOR 5 MAXWAIT {max_wait}");
        let floored = take_at(&text, state.clone(), T0 + 2 * MS);
        assert_eq!(floored.reply(), [0, 1, 6004, 799], "{text}");
        assert_eq!(floored.write, None, "{text}");
    }
    assert_eq!(
        take_at("10 10 FLOOR 5", state.clone(), T0 + 6006 * MS).reply()[0],
        1,
        "then"
    );
    // 5 above a floor of 5 are not there now at the cut rate (1 s of them): denied whatever
    // the MAXWAIT, told when the recovering rate holds 10.
    let short = take_at(
        "10 10 TOKENS 5 FLOOR 5 MAXWAIT 60000",
        state.clone(),
        T0 + 2 * MS,
    );
    assert_eq!(short.reply(), [0, 1, 29_998, 799]);
    assert_eq!(short.write, None);
    // THROTTLE.MTAKE alike.
    let args = MTakeArgs::parse(&words("1 a 10 10 1 MAXWAIT 6004 FLOOR 5")).expect("valid");
    let out = args
        .apply(std::slice::from_ref(&state), T0 + 2 * MS)
        .unwrap();
    // The token is there now, its floor is not: held back by the floor (2).
    assert_eq!(args.reply(&out).as_slice(), [0, 6004, 1, 799, 2]);
    let args = MTakeArgs::parse(&words("1 a 10 10 5 MAXWAIT 60000 FLOOR 5")).expect("valid");
    let out = args.apply(&[state], T0 + 2 * MS).unwrap();
    // The 5 tokens are not there now: by the tokens (1).
    assert_eq!(args.reply(&out).as_slice(), [0, 29_998, 1, 799, 1]);

    // Several limits: the wait is the slowest bucket's, recovery included.
    let args = MTakeArgs::parse(&words("2 a b 1 10 1 10 10 1")).expect("valid");
    let out = args.apply(&[state_cap1(), None], T0 + 2 * MS).unwrap();
    assert!(!out.granted);
    assert_eq!(args.reply(&out).as_slice()[..2], [0, 29_998]);
}

fn state_cap1() -> Option<State> {
    cut_at("1 10 1 0.5 30000", None, T0)
}

#[test]
fn a_give_back_never_ends_a_pause() {
    // Capacity 10 at 10/s: emptied, then 10 more reserved for 1 s from now (state T0 + 2 s).
    let empty = stored(take_at("10 10 TOKENS 10", None, T0).write);
    let reserved = take_at("10 10 TOKENS 10 MAXWAIT 1000 TICKET", empty, T0);
    assert_eq!(reserved.reply(), [1, 0, 1000, 2000]);
    let ticket = u64::try_from(reserved.ticket()).expect("a ticket");
    // Another replica sees a 429: paused for 1 s. The pause's own state (the first token at
    // T0 + 1 s, T0 + 1.9 s) is before the reservation's, so the state stays on the ticket.
    let pause_args = PauseArgs::parse(&words("10 10 1000")).expect("valid");
    let paused = stored(on(&pause_args, stored(reserved.write.clone()).as_ref(), T0).write);
    assert_eq!(paused.clone().map(|s| s.tat), Some(T0 + 2000 * MS));
    // The reserved call fails and gives back, 250 ms into the pause: only what lies after
    // the pause's own state comes back (one token), and the pause holds.
    let give_args =
        GiveArgs::parse(&words(&format!("10 10 10 {ticket}"))).expect("valid give-back");
    let given = on(&give_args, paused.as_ref(), T0 + 250 * MS);
    assert_eq!(given.reply, 1);
    let after = stored(given.write.clone());
    assert_eq!(after.clone().map(|s| s.tat), Some(T0 + 1900 * MS));
    assert_eq!(
        take_at("10 10", after.clone(), T0 + 250 * MS).reply(),
        [0, 0, 750, 1650],
        "nothing inside the pause"
    );
    let peek_args = PeekArgs::parse(&words("10 10")).expect("valid");
    let peeked = on(
        &PeekArgs {
            quota: peek_args.quota,
        },
        after.as_ref(),
        T0 + 250 * MS,
    )
    .reply;
    assert_eq!(peeked.paused_ms, 750);
    // Once the pause is over, a give-back frees its whole slot as before.
    let late = on(&give_args, paused.as_ref(), T0 + 1000 * MS);
    assert_eq!(late.reply, 10);
    assert_eq!(late.write, Some(Write::Delete), "full again: the key goes");
}

#[test]
fn no_reservation_writes_a_state_past_20_years() {
    // Capacity 300 at one token per 1e6 s (a 9.5-year fill), cut to 1 %, recovering over
    // 10 years: 5 tokens cost 15.8 years now. The pause's state is 6.3 years ahead.
    let state = cut_at("300 0.000001 1 0.01 315360000000", None, T0);
    let now = T0 + MS;
    let far = "300 0.000001 TOKENS 5 MAXWAIT 315360000000";
    let refused = take_at(far, state.clone(), now);
    assert_eq!(refused.reply()[0], 0, "refused, not granted 22 years ahead");
    assert_eq!(refused.write, None);
    let args = MTakeArgs::parse(&words("1 b 300 0.000001 5 MAXWAIT 315360000000")).expect("ok");
    let out = args.apply(std::slice::from_ref(&state), now).unwrap();
    assert!(!out.granted);
    assert_eq!(out.buckets()[0].write, None);
    // Four tokens fit within the 20 years (granted for when the recovering rate holds them),
    // and the state they leave still reads as a bucket.
    let args = MTakeArgs::parse(&words("1 b 300 0.000001 4 MAXWAIT 315360000000")).expect("ok");
    let four = args.apply(std::slice::from_ref(&state), now).unwrap();
    assert!(four.granted);
    let write = four.buckets()[0].write.clone();
    let tat = write.clone().and_then(|w| w.tat()).expect("written");
    assert!(tat - now <= MAX_DEBT_NS, "{} ns ahead", tat - now);
    let bytes = throttle_bucket::encode_state(&stored(write.clone()).expect("stored"));
    assert!(parse_state(bytes.as_bytes(), now).is_ok());
    let single = take_at("300 0.000001 TOKENS 4 MAXWAIT 315360000000", state, now);
    assert_eq!(single.write, write, "THROTTLE.TAKE takes the same");
}

#[test]
fn a_later_cut_never_loosens_an_earlier_one() {
    // A deep cut recovering over 10 minutes, then 5 ms later a mild one recovering in 1 ms.
    let deep = cut_at("10 10 1 0.01 600000", None, T0);
    let both = cut_at("10 10 1 1 1", deep.clone(), T0 + 5 * MS);
    let peek_args = PeekArgs::parse(&words("10 10")).expect("valid");
    let at = |ms: i64| {
        on(
            &PeekArgs {
                quota: peek_args.quota,
            },
            both.as_ref(),
            T0 + ms * MS,
        )
        .reply
        .factor_bp
    };
    let deep_at = |ms: i64| {
        on(
            &PeekArgs {
                quota: peek_args.quota,
            },
            deep.as_ref(),
            T0 + ms * MS,
        )
        .reply
        .factor_bp
    };
    for ms in [7, 1000, 300_000, 599_999] {
        assert!(
            at(ms) <= deep_at(ms),
            "at {ms} ms: {} > {}",
            at(ms),
            deep_at(ms)
        );
    }
    assert_eq!(at(7), 100, "still 1 %");
    assert_eq!(
        at(600_005),
        10_000,
        "recovered once the earlier cut would have"
    );
    let cut_state = both
        .and_then(|s| s.pushback)
        .and_then(|p| p.cut)
        .expect("cut");
    assert_eq!((cut_state.factor_bp, cut_state.recovery_ms), (100, 599_995));
}

#[test]
fn a_cut_announces_its_pause_the_state_and_the_cut_factor() {
    // Capacity 10 at 10/s, full; cut to half for 2 s, recovering over 30 s.
    let args = CutArgs::parse(&words("10 10 2000 0.5 30000")).expect("valid");
    let out = on(&args, None, T0);
    let tat = stored(out.write.clone()).expect("a cut writes").tat;
    let Some(Message::Pause(heard)) = out.announce else {
        panic!("a cut that pauses is announced: {:?}", out.announce);
    };
    assert_eq!(heard.pause_ns, 2000 * MS);
    assert_eq!(heard.ticket_us, tat / 1000);
    assert_eq!(heard.factor_bp, 5000, "the factor right after the cut");
    assert_eq!(heard.message(), format!("2000 {} 5000", tat / 1000));
    // The same 429 seen by another replica at the same instant: no cut, no longer pause, no
    // message; a millisecond later the pause ends a millisecond later, and that is announced.
    assert_eq!(
        on(&args, stored(out.write.clone()).as_ref(), T0).announce,
        None
    );
    let later = on(&args, stored(out.write.clone()).as_ref(), T0 + MS).announce;
    assert_eq!(
        later,
        Some(Message::Pause(Announcement {
            pause_ns: 2000 * MS,
            ticket_us: heard.ticket_us + 1000,
            factor_bp: 5000,
        }))
    );
}
