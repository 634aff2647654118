//! THROTTLE.GIVE as tables of explicit instants: a take's tokens come back only if nothing was
//! taken after it, and never beyond a full bucket.

use throttle_bucket::{GiveArgs, Outcome, State, TakeArgs, ThrottleCommand, Write};

mod instants;
use instants::{on, words, MS, T0};

/// A bucket threaded through calls: the instant it is full again (`None`: no key).
struct Bucket(Option<i64>);

impl Bucket {
    fn state(&self) -> Option<State> {
        self.0.map(State::plain)
    }
}

impl Bucket {
    fn take(&mut self, text: &str, now: i64) -> Outcome {
        let out = on(
            &TakeArgs::parse(&words(text)).unwrap(),
            self.state().as_ref(),
            now,
        );
        if let Some(w) = &out.write {
            self.0 = w.tat();
        }
        out
    }

    fn give(&mut self, quota: &str, n: u64, ticket: i64, now: i64) -> u64 {
        let text = format!("{quota} {n} {ticket}");
        let out = on(
            &GiveArgs::parse(&words(&text)).unwrap(),
            self.state().as_ref(),
            now,
        );
        match out.write {
            Some(Write::Store { state, .. }) => {
                assert!(
                    state.tat > now,
                    "a give-back that fills the bucket deletes it"
                );
                self.0 = Some(state.tat);
            }
            Some(Write::Delete) => self.0 = None,
            None => {}
        }
        out.reply
    }
}

#[test]
fn the_ticket_is_the_state_after_the_take_in_microseconds() {
    let mut b = Bucket(None);
    let out = b.take("8 9 TICKET", T0);
    // 111 111 112 ns after T0, rounded down to the µs.
    assert_eq!(out.ticket(), T0 / 1000 + 111_111);
    assert_eq!(
        b.take("8 9 TOKENS 0 TICKET", T0).ticket(),
        0,
        "nothing taken"
    );
    let mut empty = Bucket(Some(T0 + 888_888_896));
    assert_eq!(empty.take("8 9 TICKET", T0).ticket(), 0, "denied");
}

#[test]
fn a_give_back_with_nothing_taken_after_returns_everything() {
    let mut b = Bucket(None);
    let ticket = b.take("10 10 TOKENS 4", T0).ticket();
    assert_eq!(b.give("10 10", 4, ticket, T0 + MS), 4);
    // The bucket is as if the take never happened: full.
    assert_eq!(b.take("10 10 TOKENS 10", T0 + MS).reply()[0], 1);
}

#[test]
fn once_others_took_after_the_ticket_nothing_is_given_back() {
    let mut b = Bucket(None);
    // A reserves 3 (the bucket is empty after), C reserves 2 behind A.
    b.take("3 1 TOKENS 3", T0);
    let a = b.take("3 1 TOKENS 3 MAXWAIT 10000 TICKET", T0);
    assert_eq!(a.reply(), [1, 0, 3000, 6000]);
    let c = b.take("3 1 TOKENS 2 MAXWAIT 10000 TICKET", T0);
    assert_eq!(c.reply(), [1, 0, 5000, 8000]);
    // A gives up before its time: the last slot is C's, so A gives back nothing (freeing it
    // would hand C's slot to the next caller too), and the next caller comes after C.
    assert_eq!(b.give("3 1", 3, a.ticket(), T0 + 1000 * MS), 0);
    assert_eq!(b.take("3 1 MAXWAIT 10000", T0 + 1000 * MS).reply()[2], 5000);
    // The newest reservation gives back its whole slot.
    let mut b = Bucket(None);
    b.take("3 1 TOKENS 3", T0);
    b.take("3 1 TOKENS 3 MAXWAIT 10000", T0);
    let c = b.take("3 1 TOKENS 2 MAXWAIT 10000 TICKET", T0);
    assert_eq!(b.give("3 1", 2, c.ticket(), T0 + 1000 * MS), 2);
    assert_eq!(b.take("3 1 MAXWAIT 10000", T0 + 1000 * MS).reply()[2], 3000);
}

#[test]
fn part_of_a_take_can_come_back() {
    // A call that reserved 5 and used 3 gives back 2: the last 2 of its slot.
    let mut b = Bucket(None);
    let t = b.take("10 10 TOKENS 5 TICKET", T0).ticket();
    assert_eq!(b.give("10 10", 2, t, T0), 2);
    assert_eq!(b.0, Some(T0 + 300 * MS));
    // The rest of the same ticket: the state is now before it, so nothing (one give-back a
    // ticket).
    assert_eq!(b.give("10 10", 3, t, T0), 0);
}

#[test]
fn a_ticket_gives_back_once_and_never_past_full() {
    let mut b = Bucket(None);
    let t = b.take("10 10 TOKENS 5 TICKET", T0).ticket();
    // 300 ms later 3 of the 5 have come back: only 2 more fit under full.
    assert_eq!(b.give("10 10", 5, t, T0 + 300 * MS), 2);
    assert_eq!(b.0, None, "full, no further: the key is deleted");
    // The key is gone: the same ticket gives nothing again.
    assert_eq!(b.give("10 10", 5, t, T0 + 300 * MS), 0);
}

#[test]
fn stale_missing_and_forged_tickets_give_nothing() {
    let mut b = Bucket(None);
    let t = b.take("10 10 TOKENS 2 TICKET", T0).ticket();
    // Missing key: a full bucket, nothing to give back to.
    assert_eq!(Bucket(None).give("10 10", 2, t, T0), 0);
    // A ticket from after the state (another bucket's, or the key was reset since).
    assert_eq!(b.give("10 10", 2, t + 1_000_000, T0), 0);
    // Ten takes later the ticket is stale: 2 - 10 < 0.
    for _ in 0..10 {
        b.take("10 10 MAXWAIT 10000", T0);
    }
    assert_eq!(b.give("10 10", 2, t, T0), 0);
    // n = 0 gives 0.
    let t2 = b.take("10 10 MAXWAIT 10000 TICKET", T0).ticket();
    assert_eq!(b.give("10 10", 0, t2, T0), 0);
    assert_eq!(b.give("10 10", 1, t2, T0), 1);
}

#[test]
fn faster_than_a_token_a_microsecond_the_state_must_sit_on_the_ticket() {
    // At 1e9/s a token is 1 ns and the µs ticket cannot tell 2 ns past it from 2 tokens taken
    // after: nothing comes back (fewer tokens, never more). On a µs boundary it is exact.
    let mut b = Bucket(Some(T0 + 999));
    let t = b.take("1000000 1000000000 TOKENS 3 TICKET", T0).ticket();
    assert_eq!(t, (T0 + 999 + 3) / 1000);
    assert_eq!(b.give("1000000 1000000000", 3, t, T0), 0);

    let mut b = Bucket(Some(T0 + 997));
    let t = b.take("1000000 1000000000 TOKENS 3 TICKET", T0).ticket();
    assert_eq!(b.give("1000000 1000000000", 3, t, T0), 3);
}

#[test]
fn the_ticket_rounding_costs_nothing_at_intervals_of_a_microsecond_or_more() {
    // 9/s: 111 111 112 ns a token, not a whole µs. A state up to 999 ns past the ticket is no
    // token taken after, so everything comes back; one take after is exactly one.
    for rate in ["9", "3", "1000000", "999000"] {
        let quota = format!("8 {rate}");
        let mut b = Bucket(None);
        let t = b
            .take(&format!("{quota} TOKENS 3 TICKET"), T0 + 123)
            .ticket();
        assert_eq!(b.give(&quota, 3, t, T0 + 123), 3, "rate {rate}");

        let mut b = Bucket(None);
        let t = b
            .take(&format!("{quota} TOKENS 3 TICKET"), T0 + 777)
            .ticket();
        b.take(&format!("{quota} TOKENS 1 MAXWAIT 100000"), T0 + 777);
        assert_eq!(b.give(&quota, 3, t, T0 + 777), 0, "rate {rate}");
    }
}

#[test]
fn a_give_back_that_leaves_the_bucket_full_deletes_the_key() {
    // Within the take's own nanosecond, a microsecond later, and after some refill: the bucket
    // is full again each time, so the key goes (no key that expires within the millisecond).
    for later in [0, 1000, 50 * MS] {
        let mut b = Bucket(None);
        let ticket = b.take("10 10 TOKENS 4 TICKET", T0).ticket();
        assert_eq!(b.give("10 10", 4, ticket, T0 + later), 4, "+{later} ns");
        assert_eq!(b.0, None, "+{later} ns: deleted");
    }
    // Not full after: stored.
    let mut b = Bucket(None);
    b.take("10 10 TOKENS 5", T0);
    let ticket = b.take("10 10 TOKENS 4 TICKET", T0).ticket();
    assert_eq!(b.give("10 10", 4, ticket, T0), 4);
    assert_eq!(b.0, Some(T0 + 500 * MS));
}
