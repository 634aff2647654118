//! The line for a slot: THROTTLE.TAKE ... INFLIGHT n LEASE ms LINE place_ms [WAITER id] and
//! THROTTLE.RELEASE's hand-off, as tables of explicit instants, the stored layout, and a
//! property over random interleavings (never more than the cap held, served in join order).

use proptest::prelude::*;
use throttle_bucket::{
    encode_state, parse_state, ArgError, Effects, Outcome, Refusal, ReleaseArgs, State, TakeArgs,
    ThrottleCommand, LINE_STATE_HEAD, MAX_LINE, SLOT_LEN, WAITER_LEN,
};

/// 2026-12-01T00:00:00Z.
const T0: i64 = 1_796_083_200 * 1_000_000_000;

mod instants;
use instants::{after, check_line_in_order, words, MS};

/// A bucket and the server's clock, calls made one after another.
struct Bucket {
    state: Option<State>,
    now: i64,
    quota: &'static str,
}

impl Bucket {
    fn new(quota: &'static str) -> Bucket {
        Bucket {
            state: None,
            now: T0,
            quota,
        }
    }

    fn at(&mut self, ms: i64) -> &mut Bucket {
        self.now = T0 + ms * MS;
        self
    }

    /// A take with `options` after the quota: its reply's integers and outcome.
    fn take(&mut self, options: &str) -> Result<(Vec<i64>, Outcome), ArgError> {
        let text = format!("{} {options}", self.quota);
        let args = TakeArgs::parse(&words(&text)).expect("valid test arguments");
        let out = args.apply(std::slice::from_ref(&self.state), self.now)?;
        self.state = after(&out.write, self.state.clone());
        Ok((args.reply(&out).as_ref().to_vec(), out))
    }

    fn reply(&mut self, options: &str) -> Vec<i64> {
        self.take(options).expect("no error").0
    }

    /// A release: whether the slot was held, and what it announced.
    fn release(&mut self, slot: i64) -> (bool, Option<String>) {
        let args = ReleaseArgs::parse(&words(&format!("{} {slot} INFLIGHT 1", self.quota)))
            .expect("valid test arguments");
        let out = args
            .apply(std::slice::from_ref(&self.state), self.now)
            .expect("no error");
        self.state = after(&out.write, self.state.clone());
        let heard = out.announce().map(|m| m.text());
        (out.held, heard)
    }
}

/// Cap 1, a 5 s lease, a place kept 1 s.
const LINE: &str = "INFLIGHT 1 LEASE 5000 LINE 1000";
const IN_LINE: i64 = 4 | 16;
/// With [`IN_LINE`]: the wait is the turn the line's pace says.
const TURN: i64 = 32;

#[test]
fn the_line_is_served_in_order_at_each_release() {
    // Ten tokens, one a second: a token taken shows for a while.
    let mut b = Bucket::new("10 1");
    let holder = b.at(0).reply(LINE);
    assert_eq!(holder, [1, 9, 0, 1000, T0 / 1000, 0]);
    let a = holder[4];
    // Every slot held: in line, with a ticket and a place; look again within half the place
    // lease (the holder's lease ends later). Nothing is taken yet.
    let first = b.at(10).reply(LINE);
    let ticket = first[4];
    assert_eq!(first, [0, 9, 500, 990, ticket, 1, IN_LINE]);
    assert!(ticket > a);
    let second = b.at(20).reply(LINE);
    let next = second[4];
    assert_eq!(second, [0, 9, 500, 980, (T0 + 20 * MS) / 1000, 2, IN_LINE]);
    // A call without LINE does not overtake the line.
    let plain = b.at(30).reply("INFLIGHT 1 LEASE 5000");
    assert_eq!(plain, [0, 9, 4970, 970, 0, 4]);
    // The release hands the slot to the head at once, and says so.
    assert_eq!(
        b.at(100).release(a),
        (true, Some(format!("handed {ticket} 0")))
    );
    // The head finds it held: granted, its token taken at the hand-off.
    let handed = b.at(110).reply(&format!("{LINE} WAITER {ticket}"));
    assert_eq!(handed, [1, 8, 0, 1890, ticket, 0]);
    // The second is now first, its place renewed. The line has seen `a` free its slot with
    // 4900 ms of its lease left, so the slot its holder found at 110 should free at 210: look
    // then.
    let looked = b.at(120).reply(&format!("{LINE} WAITER {next}"));
    assert_eq!(looked, [0, 8, 90, 1880, next, 1, IN_LINE | TURN]);
    // A release of a slot not held (again) hands nothing.
    assert_eq!(b.at(130).release(a), (false, None));
}

#[test]
fn a_waiter_that_hears_nothing_is_told_when_its_turn_comes() {
    // Cap 2, a 1 s lease, a place kept 2 s (kept by a look every second at the latest).
    let line = "INFLIGHT 2 LEASE 1000 LINE 2000";
    let mut b = Bucket::new("100 100");
    let a = b.at(0).reply(line)[4];
    let c = b.at(0).reply(line)[4];
    // No release seen yet: look when the first lease ends (here also the place's renewal).
    let mut w = Vec::new();
    for place in 1..=4 {
        let joined = b.at(0).reply(line);
        assert_eq!((joined[2], joined[5], joined[6]), (1000, place, IN_LINE));
        w.push(joined[4]);
    }
    let look = |b: &mut Bucket, at: i64, id: i64| {
        let r = b.at(at).reply(&format!("{line} WAITER {id}"));
        (r[2], r[5], r[6])
    };
    // `a` used 200 ms of its 1000: the line's slack is 800 ms; its slot goes to `w[0]`.
    let handed = format!("handed {} 0", w[0]);
    assert_eq!(b.at(200).release(a), (true, Some(handed)));
    // `c`, granted at 0, was due at 200: 10 ms late, it is expected an eighth of a hold
    // later (25 ms), then as late again as it is late. Place 2 gets `w[0]`'s slot, handed at
    // 200, due at 400. Place 3, a round later, `c`'s slot after its next holder's 200 ms.
    assert_eq!(look(&mut b, 210, w[1]), (25, 1, IN_LINE | TURN));
    assert_eq!(look(&mut b, 210, w[2]), (190, 2, IN_LINE | TURN));
    assert_eq!(look(&mut b, 210, w[3]), (225, 3, IN_LINE | TURN));
    assert_eq!(look(&mut b, 250, w[1]), (50, 1, IN_LINE | TURN));
    // `c` used 300 ms: the slack weighs it a quarter, (3 * 800 + 700) / 4 = 775.
    let handed = format!("handed {} 0", w[1]);
    assert_eq!(b.at(300).release(c), (true, Some(handed)));
    assert_eq!(b.state.as_ref().map(|s| s.slots.slack_ms), Some(775));
    // `w[0]`'s lease ends at 1200, `w[1]`'s at 1300: due 775 ms before each.
    assert_eq!(look(&mut b, 310, w[2]), (115, 1, IN_LINE | TURN));
    assert_eq!(look(&mut b, 310, w[3]), (215, 2, IN_LINE | TURN));
    // The line gone, its pace goes with it: a new line learns its own.
    b.at(400).release(w[0]);
    b.at(400).release(w[1]);
    for id in &w[2..] {
        assert_eq!(b.at(410).reply(&format!("{line} WAITER {id}"))[0], 1);
    }
    assert_eq!(b.state.as_ref().map(|s| s.slots.slack_ms), Some(0));
}

#[test]
fn a_dead_holders_waiters_look_ever_less_often() {
    let line = "INFLIGHT 2 LEASE 1000 LINE 2000";
    let mut b = Bucket::new("100 100");
    let quick = b.at(0).reply(line)[4];
    b.at(0).reply(line); // dies holding its slot
    b.at(0).reply(line); // handed `quick`'s slot, dies holding it too
    let head = b.at(0).reply(line)[4];
    // `quick` used 200 ms of its 1000: the line's slack is 800 ms.
    b.at(200).release(quick);
    // The head looks when it is told, until the first dead lease runs out at 1000 ms.
    let mut at = 210;
    let mut told = Vec::new();
    let granted = loop {
        let reply = b.at(at).reply(&format!("{line} WAITER {head}"));
        if reply[0] == 1 || told.len() == 20 {
            break reply[0] == 1;
        }
        told.push(reply[2]);
        at += reply[2];
    };
    assert!(granted, "{told:?}");
    // The first dead holder was due at 200, the second (handed a slot at 200) at 400: each
    // late one expected as late again, never sooner than 25 ms, never past its lease's end.
    assert_eq!(told, [25, 35, 70, 60, 25, 25, 50, 100, 200, 200]);
    assert_eq!(
        at, 1000,
        "handed the first dead holder's slot when its lease ended"
    );
}

#[test]
fn a_waiter_that_stops_looking_leaves_at_the_end_of_its_place() {
    let mut b = Bucket::new("100 100");
    let a = b.at(0).reply(LINE)[4];
    let gone = b.at(0).reply(LINE)[4];
    let next = b.at(500).reply(LINE)[4];
    // `gone`'s place ends at 1000 ms, `next`'s at 1500: the release at 1200 hands to `next`.
    assert_eq!(
        b.at(1200).release(a),
        (true, Some(format!("handed {next} 0")))
    );
    // A waiter that gives up leaves the line with a release of its ticket.
    let quits = b.at(1200).reply(LINE)[4];
    assert_eq!(b.at(1210).release(quits), (true, None));
    assert_eq!(b.at(1220).release(quits), (false, None));
    let state = b.state.clone().unwrap();
    assert!(state.slots.waiters.iter().all(|w| w.id != quits as u64));
    // `gone` looks too late: not in line any more, and the slot is held: it joins again.
    let again = b.at(1300).reply(&format!("{LINE} WAITER {gone}"));
    assert_eq!(again[5], 1);
    assert!(again[4] > next);
}

#[test]
fn a_holders_lease_running_out_hands_its_slot_at_the_next_look() {
    let mut b = Bucket::new("100 100");
    b.at(0).reply(LINE);
    let waiter = b.at(0).reply(LINE)[4];
    // It keeps its place by looking every half second; the holder's lease ends at 5000 ms.
    for ms in (400..5000).step_by(400) {
        let looked = b.at(ms).reply(&format!("{LINE} WAITER {waiter}"));
        assert_eq!(looked[5], 1, "at {ms} ms");
        assert!((1..=500).contains(&looked[2]), "{looked:?}");
    }
    let (ints, out) = b.at(5200).take(&format!("{LINE} WAITER {waiter}")).unwrap();
    assert_eq!(ints, [1, 99, 0, 10, waiter, 0]);
    assert_eq!(out.line.handed, 1);
}

#[test]
fn the_tokens_are_taken_at_the_hand_off_and_the_lease_runs_from_when_they_are_there() {
    // One token a second: the holder takes it, the waiter's is there 1 s later.
    let mut b = Bucket::new("1 1");
    let a = b.at(0).reply(LINE)[4];
    // Tokens not there within MAXWAIT: not in line, waits for the tokens.
    assert_eq!(b.at(0).reply(LINE), [0, 0, 5000, 1000, 0, 0, 4 | 1]);
    let line = "MAXWAIT 2000 INFLIGHT 1 LEASE 5000 LINE 1000";
    let ticket = b.at(0).reply(line)[4];
    assert_eq!(
        b.at(100).release(a),
        (true, Some(format!("handed {ticket} 900")))
    );
    // Looking again: granted, to wait for its tokens as any reservation does.
    let looked = b.at(300).reply(&format!("{line} WAITER {ticket}"));
    assert_eq!(looked, [1, 0, 700, 1700, ticket, 0]);
    // The lease runs from when the tokens are there: 1000 + 5000 ms.
    let state = b.state.clone().unwrap();
    assert_eq!(state.slots.held[0].lease_end, T0 + 6000 * MS);
}

#[test]
fn a_clock_stepped_back_keeps_places_and_gives_later_tickets() {
    let mut b = Bucket::new("100 100");
    let a = b.at(1000).reply(LINE)[4];
    let waiter = b.at(1000).reply(LINE)[4];
    // A clock that reads earlier: nobody leaves, a new ticket still follows the ones given.
    let later = b.at(500).reply(LINE);
    assert_eq!(later[5], 2, "{later:?}");
    assert!(later[4] > waiter && waiter > a);
    assert_eq!(b.at(500).reply(&format!("{LINE} WAITER {waiter}"))[5], 1);
}

#[test]
fn the_line_is_bounded() {
    let mut b = Bucket::new("100000 100000");
    b.at(0).reply(LINE);
    for place in 1..=MAX_LINE {
        assert_eq!(b.at(0).reply(LINE)[5], place as i64);
    }
    assert_eq!(b.at(0).take(LINE).map(|_| ()), Err(ArgError::LineFull));
    // The value stays bounded: 48 bytes, one slot and 1024 waiters.
    let bytes = encode_state(b.state.as_ref().unwrap());
    assert_eq!(
        bytes.as_bytes().len(),
        LINE_STATE_HEAD + SLOT_LEN + WAITER_LEN * MAX_LINE as usize
    );
}

#[test]
fn line_options_go_with_inflight_and_without_floor() {
    let bad = |text: &str| TakeArgs::parse(&words(text)).unwrap_err();
    assert_eq!(bad("8 9 LINE 100"), ArgError::LineInflight);
    assert_eq!(bad("8 9 INFLIGHT 1 LEASE 9 WAITER 3"), ArgError::WaiterLine);
    assert_eq!(
        bad("8 9 FLOOR 1 INFLIGHT 1 LEASE 9 LINE 100"),
        ArgError::LineFloor
    );
    assert_eq!(bad("8 9 INFLIGHT 1 LEASE 9 LINE 0"), ArgError::PlaceMs);
    assert_eq!(bad("8 9 INFLIGHT 1 LEASE 9 LINE x"), ArgError::PlaceMs);
    assert_eq!(
        bad("8 9 INFLIGHT 1 LEASE 9 LINE 5 LINE 5"),
        ArgError::Repeated("LINE")
    );
    let args = TakeArgs::parse(&words("8 9 INFLIGHT 1 LEASE 9 LINE 100 WAITER 77")).unwrap();
    let line = args.line.unwrap();
    assert_eq!((line.place_ms, line.waiter), (100, Some(77)));
    let written: Vec<String> = args.words().into_iter().map(|w| w.to_text()).collect();
    assert_eq!(
        written.join(" "),
        "8 9 INFLIGHT 1 LEASE 9 LINE 100 WAITER 77"
    );
    // The reply reads back with its place.
    let reply = args.decode(&[0, 7, 500, 10, 77, 2, 20]).unwrap();
    assert_eq!((reply.slot, reply.place), (Some(77), Some(2)));
    assert_eq!(reply.refusal, Some(Refusal::SLOT | Refusal::LINE));
    assert_eq!(args.decode(&[0, 7, 500, 10, 77, 20]), None);
}

#[test]
fn the_stored_layout_reads_back_and_forged_lines_are_refused() {
    let mut b = Bucket::new("100 100");
    b.at(0).reply(LINE);
    b.at(0).reply(LINE);
    b.at(0).reply(LINE);
    let state = b.state.clone().unwrap();
    let bytes = encode_state(&state).as_bytes().to_vec();
    assert_eq!(bytes.len(), LINE_STATE_HEAD + SLOT_LEN + 2 * WAITER_LEN);
    assert_eq!(bytes.len() % 16, 0);
    assert_eq!(parse_state(&bytes, T0), Ok(state.clone()));
    // The counts: 1 slot, 2 waiters, cap 1.
    assert_eq!(&bytes[40..48], &[1, 0, 2, 0, 1, 0, 0, 0]);
    let forged = |at: usize, value: &[u8]| {
        let mut forged = bytes.clone();
        forged[at..at + value.len()].copy_from_slice(value);
        parse_state(&forged, T0).is_err()
    };
    let first_waiter = LINE_STATE_HEAD + SLOT_LEN;
    assert!(forged(40, &[2, 0]), "a count that is not the length");
    assert!(forged(44, &[0, 0]), "cap 0");
    // The line's slack: none seen yet, and any value reads back.
    assert_eq!(&bytes[46..48], &[0, 0]);
    let mut paced = bytes.clone();
    paced[46..48].copy_from_slice(&[0x10, 0x27]);
    let read = parse_state(&paced, T0).expect("a slack reads");
    assert_eq!(read.slots.slack_ms, 10_000);
    assert_eq!(encode_state(&read).as_bytes(), &paced[..]);
    assert!(forged(first_waiter + 16, &[0; 8]), "lease 0");
    assert!(
        forged(first_waiter + 24, &[0xFF; 8]),
        "tokens past any capacity"
    );
    let held_id = &bytes[48..56];
    assert!(forged(first_waiter, held_id), "a ticket a slot holds");
    let second = &bytes[first_waiter + WAITER_LEN..first_waiter + WAITER_LEN + 8];
    assert!(forged(first_waiter, second), "tickets not increasing");
    // Once the line is gone, the bucket has its slot form again.
    let a = state.slots.held[0].id as i64;
    b.at(600).release(a);
    b.at(1100);
    let (_, out) = b.take("INFLIGHT 1 LEASE 5000").unwrap();
    assert_eq!(out.line.left, 0);
}

/// One step of a random schedule: a caller acts, the clock moves.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Caller k takes with LINE (or looks again, if it is in line).
    Take(usize),
    /// Caller k releases the slot it holds, if it holds one.
    Release(usize),
    /// The clock moves by this many ms.
    Wait(i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..6usize).prop_map(Step::Take),
        (0..6usize).prop_map(Step::Release),
        (1..400i64).prop_map(Step::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever the callers do: never more than the cap held, slots handed in the order the
    /// waiters joined, and every waiter served or gone once places and leases run out.
    #[test]
    fn never_past_the_cap_and_served_in_order(steps in prop::collection::vec(step(), 1..120)) {
        let cap = 2;
        let line = format!("INFLIGHT {cap} LEASE 700 LINE 300");
        let mut b = Bucket::new("1000 1000");
        let mut ms = 0;
        // Per caller: its ticket while in line, its slot while it holds one.
        let mut ticket: [Option<i64>; 6] = [None; 6];
        let mut slot: [Option<i64>; 6] = [None; 6];
        for step in steps {
            let mut released = false;
            match step {
                Step::Wait(by) => ms += by,
                Step::Take(k) if slot[k].is_none() => {
                    let options = match ticket[k] {
                        Some(id) => format!("{line} WAITER {id}"),
                        None => line.clone(),
                    };
                    let ints = b.at(ms).reply(&options);
                    if ints[0] == 1 {
                        slot[k] = Some(ints[4]);
                        ticket[k] = None;
                    } else {
                        prop_assert_eq!(ints[6] & !TURN, IN_LINE);
                        // Never later than the place's renewal, never a spin.
                        prop_assert!((1..=150).contains(&ints[2]), "{:?}", ints);
                        ticket[k] = Some(ints[4]);
                    }
                }
                Step::Release(k) => {
                    if let Some(id) = slot[k].take() {
                        released = b.at(ms).release(id).0;
                    }
                }
                Step::Take(_) => {}
            }
            let now = i128::from(T0 + ms * MS);
            if let Some(state) = &b.state {
                check_line_in_order(&state.slots, now, cap)?;
                // A free slot under the cap with callers waiting lasts only until the next
                // slot command: the release that freed it handed it.
                let waiting = state.slots.waiting(now).count();
                if waiting > 0 && released {
                    prop_assert_eq!(state.slots.held_at(now), cap);
                }
            }
        }
        // Every waiter served or gone: once every place and every lease has run out, a take
        // is granted and leaves no line behind.
        ms += 2_000;
        let ints = b.at(ms).reply(&format!("INFLIGHT {cap} LEASE 700"));
        prop_assert_eq!(ints[0], 1);
        let state = b.state.as_ref().expect("a grant is stored");
        prop_assert!(state.slots.waiters.is_empty(), "{:?}", state.slots);
        prop_assert_eq!(state.slots.held.len(), 1);
    }
}

#[test]
fn a_grant_past_a_stale_line_is_stored() {
    // Two slots held and a waiter whose place runs out before their leases end.
    let mut b = Bucket::new("2 1");
    let line = "MAXWAIT 5000 INFLIGHT 2 LEASE 100 LINE 50";
    b.at(0).reply(line);
    b.at(0).reply(line);
    assert_eq!(b.at(0).reply(line)[6], IN_LINE);
    // Everything ran out but the bucket's debt: a plain take is granted, and stored.
    let plain = "MAXWAIT 5000 INFLIGHT 2 LEASE 100";
    let (first, out) = b.at(150).take(plain).unwrap();
    assert_eq!(first[0], 1, "{first:?}");
    assert!(
        out.write.is_some(),
        "a grant writes its tokens and its slot"
    );
    let second = b.at(151).reply(plain);
    assert_eq!(second[0], 1);
    assert!(
        second[2] > first[2],
        "the second waits behind the first: {second:?}"
    );
}

#[test]
fn a_denial_that_writes_has_no_ticket() {
    let mut b = Bucket::new("10 1");
    let line = "INFLIGHT 1 LEASE 5000 LINE 1000 TICKET";
    let holder = b.at(0).reply(line);
    assert_eq!(holder[0], 1);
    assert!(holder[4] > 0, "a grant's ticket");
    // Joining writes the line, but takes nothing: no ticket THROTTLE.GIVE could honour.
    let joined = b.at(10).reply(line);
    assert_eq!(joined[..5], [0, 9, 500, 990, 0]);
    assert_eq!(joined[6..], [1, IN_LINE]);
    let looked = b.at(20).reply(&format!("{line} WAITER {}", joined[5]));
    assert_eq!(looked[4], 0);
}

#[test]
fn a_denial_after_a_hand_off_stores_the_hand_off() {
    // Cap 2: two holders whose leases run out, one waiter with time left on its place.
    let mut b = Bucket::new("3 1");
    let line = "MAXWAIT 3000 INFLIGHT 2 LEASE 100 LINE 5000";
    b.at(0).reply(line);
    b.at(0).reply(line);
    let waiter = b.at(0).reply(line);
    assert_eq!(waiter[6], IN_LINE);
    // At 200 ms a LINE take with no MAXWAIT: the settling hands the waiter a slot, which
    // leaves one free, but this call's token is not there. Denied, and the hand-off is kept.
    let (ints, out) = b.at(200).take("INFLIGHT 2 LEASE 100 LINE 5000").unwrap();
    assert_eq!(ints[0], 0, "{ints:?}");
    assert_eq!(out.line.handed, 1);
    assert!(out.write.is_some(), "the hand-off is written");
    let state = b.state.clone().unwrap();
    assert_eq!(state.slots.held.len(), 1);
    assert_eq!(state.slots.held[0].id as i64, waiter[4]);
}

#[test]
fn a_late_look_renews_the_handed_slot_and_replies_no_ticket() {
    let mut b = Bucket::new("10 1");
    let a = b.at(0).reply(LINE)[4];
    let ticket = b.at(0).reply(LINE)[4];
    // Handed at 100 ms: its lease ends at 5100 ms. The waiter looks only at 3000 ms: the slot
    // is its for a whole lease from then, and a ticket would give back tokens it did not take
    // in this call.
    b.at(100).release(a);
    let looked = b.at(3000).reply(&format!("TICKET {LINE} WAITER {ticket}"));
    assert_eq!(looked, [1, 10, 0, 0, 0, ticket, 0]);
    let state = b.state.clone().unwrap();
    assert_eq!(state.slots.held[0].lease_end, T0 + 8000 * MS);
}

#[test]
fn a_take_that_hands_a_run_out_slot_announces_it() {
    let mut b = Bucket::new("100 100");
    let long = "INFLIGHT 1 LEASE 5000 LINE 10000";
    b.at(0).reply(long);
    let waiter = b.at(0).reply(long)[4];
    // The holder's lease ends at 5000 ms; another caller's take at 5100 settles the line.
    let text = format!("100 100 {long}");
    let args = TakeArgs::parse(&words(&text)).unwrap();
    let out = args
        .apply(std::slice::from_ref(&b.state), T0 + 5100 * MS)
        .unwrap();
    let heard = out.announce().map(|m| m.text());
    assert_eq!(heard, Some(format!("handed {waiter} 0")));
    assert_eq!(
        args.reply(&out).as_ref()[5],
        1,
        "the caller is now first in line"
    );
}

#[test]
fn the_key_lives_while_a_waiter_keeps_its_place() {
    let mut b = Bucket::new("100 100");
    // A holder with a short lease, a waiter whose place lasts longer.
    let a = b.at(0).reply("INFLIGHT 1 LEASE 100 LINE 1000")[4];
    let (_, out) = b.at(0).take("INFLIGHT 1 LEASE 100 LINE 1000").unwrap();
    assert_eq!(out.write.unwrap().expire_at_ms(), Some(T0 / MS + 1000));
    assert!(a > 0);
}
