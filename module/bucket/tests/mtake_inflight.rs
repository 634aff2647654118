//! THROTTLE.MTAKE ... INFLIGHT n LEASE ms: a slot for the call in flight in the first key's
//! bucket, taken with every bucket's tokens or not at all; and with LINE place_ms [WAITER id]
//! a place in that bucket's line for the slot alone, beside one-key callers, every key's tokens
//! taken at the look that finds the slot handed. As tables of explicit instants, and a
//! property over random schedules.

use proptest::prelude::*;
use throttle_bucket::{
    ArgError, Command, Effects, MOutcome, MTakeArgs, Refusal, ReleaseArgs, State, TakeArgs,
    ThrottleCommand, Word,
};

/// 2026-12-01T00:00:00Z.
const T0: i64 = 1_796_083_200 * 1_000_000_000;

mod instants;
use instants::{check_line_in_order, words, MS};

fn args(text: &str) -> MTakeArgs {
    MTakeArgs::parse(&words(text)).expect("valid test arguments")
}

/// Two buckets and the server's clock, calls made one after another.
struct Pair {
    stored: Vec<Option<State>>,
    now: i64,
}

impl Pair {
    fn new() -> Pair {
        Pair {
            stored: vec![None, None],
            now: T0,
        }
    }

    fn at(&mut self, ms: i64) -> &mut Pair {
        self.now = T0 + ms * MS;
        self
    }

    /// The call, its state written back, and its reply's integers.
    fn mtake(&mut self, text: &str) -> (MOutcome, Vec<i64>) {
        let args = args(text);
        let out = args.apply(&self.stored, self.now).unwrap();
        for (key, state) in self.stored.iter_mut().enumerate() {
            if let Some(write) = out.write(key) {
                *state = write.stored();
            }
        }
        let reply = args.reply(&out).as_ref().to_vec();
        (out, reply)
    }

    fn held(&self, key: usize) -> usize {
        self.stored[key]
            .as_ref()
            .map_or(0, |s| s.slots.live(i128::from(self.now)).count())
    }
    /// A one-bucket take from the first key.
    fn take(&mut self, options: &str) -> Vec<i64> {
        let args = TakeArgs::parse(&words(&format!("100 100 {options}"))).expect("valid");
        let out = args.apply(&self.stored[..1], self.now).expect("no error");
        if let Some(write) = out.write(0) {
            self.stored[0] = write.stored();
        }
        args.reply(&out).as_ref().to_vec()
    }

    /// The second bucket emptied by another caller's take of its 10 tokens (MAXWAIT: into debt).
    fn empty_second(&mut self) {
        let args = TakeArgs::parse(&words("10 10 TOKENS 10 MAXWAIT 5000")).expect("valid");
        let out = args.apply(&self.stored[1..], self.now).expect("no error");
        assert!(out.granted);
        if let Some(write) = out.write(0) {
            self.stored[1] = write.stored();
        }
    }

    /// A release of `slot` in the first bucket: whether it was held, and what it announced.
    fn release(&mut self, slot: i64) -> (bool, Option<String>) {
        let args = ReleaseArgs::parse(&words(&format!("100 100 {slot} INFLIGHT 1")))
            .expect("valid test arguments");
        let out = args.apply(&self.stored[..1], self.now).expect("no error");
        if let Some(write) = out.write(0) {
            self.stored[0] = write.stored();
        }
        (out.held, out.announce().map(|m| m.text()))
    }

    /// The tokens left in bucket `key` (from its stored instant: 0 ms past `now` is full).
    fn tat(&self, key: usize) -> Option<i64> {
        self.stored[key].as_ref().map(|s| s.tat)
    }
}

const CALL: &str = "2 a b 100 100 1 10 10 1 INFLIGHT 2 LEASE 1000";

#[test]
fn granted_with_a_slot_in_the_first_key_only() {
    let mut p = Pair::new();
    let (out, reply) = p.mtake(CALL);
    let id = out.slot.expect("a slot");
    assert_eq!(id, 1_796_083_200_000_000, "the first id is the clock in µs");
    assert_eq!(reply, [1, 0, 99, 10, 9, 100, id as i64]);
    assert_eq!(
        (p.held(0), p.held(1)),
        (1, 0),
        "the slot is the first key's"
    );
    let a = p.stored[0].clone().unwrap();
    assert_eq!(
        a.tat,
        T0 + 10 * MS,
        "the first bucket's tokens are taken too"
    );
    assert_eq!(a.slots.held[0].lease_end, T0 + 1000 * MS);
    assert_eq!(p.stored[1].as_ref().map(|s| s.tat), Some(T0 + 100 * MS));
    // The reply reads back only as a call with INFLIGHT.
    let back = args(CALL).decode(&reply).unwrap();
    assert_eq!((back.granted, back.slot), (true, Some(id)));
    assert_eq!(back.buckets, [(99, 10), (9, 100)]);
    let without = "2 a b 100 100 1 10 10 1";
    assert_eq!(args(without).decode(&reply), None);
    assert_eq!(args(&format!("{without} TICKET")).decode(&reply), None);
}

#[test]
fn denied_for_slots_writes_nothing_and_waits_for_the_first_lease() {
    let mut p = Pair::new();
    let first = p.mtake(CALL).0.slot.unwrap();
    let second = p.at(100).mtake(CALL).0.slot.unwrap();
    assert_eq!(second, first + 100_000);
    let before = p.stored.clone();
    let (out, reply) = p.at(300).mtake(CALL);
    assert!(!out.granted && out.held_by_slots && out.slot.is_none());
    assert!(out.buckets().iter().all(|b| b.write.is_none()));
    assert_eq!(p.stored, before, "nothing written");
    // The wait until the first lease ends (700 ms), the buckets as they stand, slot 0, and
    // what held it back: the slot (4).
    assert_eq!(reply, [0, 700, 100, 0, 10, 0, 0, 4]);
    assert_eq!(out.refusal, Refusal::SLOT);
    // The first lease runs out at 1000 ms: a slot again, with a new id.
    let (out, _) = p.at(1000).mtake(CALL);
    assert_eq!(out.slot, Some(first + 1_000_000));
    assert_eq!(p.held(0), 2);
}

#[test]
fn a_token_denial_takes_no_slot_and_the_longer_wait_wins() {
    let mut p = Pair::new();
    // The second bucket holds one token a second.
    let text = "2 a b 100 100 1 1 1 1 INFLIGHT 1 LEASE 100";
    assert!(p.mtake(text).0.granted);
    let before = p.stored.clone();
    // Both the token (1 s) and the slot (100 ms) are short: the longer wait.
    let (out, reply) = p.at(10).mtake(text);
    assert!(!out.granted && !out.held_by_slots && out.slot.is_none());
    assert_eq!(reply[..2], [0, 990]);
    // Slot 0, then both held it back: the tokens (1) and the slot (4).
    assert_eq!(reply[reply.len() - 2..], [0, 5]);
    assert_eq!(out.refusal, Refusal::TOKENS | Refusal::SLOT);
    assert_eq!(p.stored, before);
    // The lease ran out but the token is not there: denied, no slot taken, only the tokens.
    let (out, reply) = p.at(200).mtake(text);
    assert!(!out.granted && out.slot.is_none());
    assert_eq!(reply.last(), Some(&1));
    assert_eq!(p.stored, before);
    assert_eq!(p.held(0), 0);
}

#[test]
fn a_first_key_of_0_tokens_holds_the_slot_with_no_ticket() {
    let mut p = Pair::new();
    let text = "2 a b 100 100 0 10 10 1 TICKET INFLIGHT 1 LEASE 1000";
    let (out, reply) = p.mtake(text);
    let id = out.slot.unwrap();
    let ticket_b = (T0 + 100 * MS) / 1000;
    assert_eq!(reply, [1, 0, 100, 0, 9, 100, 0, ticket_b, id as i64]);
    let a = p.stored[0].clone().unwrap();
    assert_eq!(a.tat, T0, "a full bucket, holding the slot");
    assert_eq!(p.held(0), 1);
    let back = args(text).decode(&reply).unwrap();
    assert_eq!(back.tickets, Some(vec![0, ticket_b as u64]));
    assert_eq!(back.slot, Some(id));
    // Every token asked is 0: still a slot, granted or denied like any take.
    let (out, reply) = p.mtake("2 a b 100 100 0 10 10 0 INFLIGHT 1 LEASE 1000");
    assert!(!out.granted && out.held_by_slots);
    assert_eq!(reply[..2], [0, 1000]);
    assert_eq!(reply.last(), Some(&4));
}

#[test]
fn one_key_replies_read_back_by_their_call() {
    // One key: 2 + 2 + 1 integers (a slot) could be 2 + 3 (a ticket).
    let mut p = Pair::new();
    p.stored.truncate(1);
    let (out, reply) = p.mtake("1 a 10 10 1 INFLIGHT 1 LEASE 50");
    let id = out.slot.unwrap();
    assert_eq!(reply, [1, 0, 9, 100, id as i64]);
    let slot = args("1 a 10 10 1 INFLIGHT 1 LEASE 50")
        .decode(&reply)
        .unwrap();
    assert_eq!((slot.tickets, slot.slot), (None, Some(id)));
    let ticket = args("1 a 10 10 1 TICKET").decode(&reply).unwrap();
    assert_eq!((ticket.tickets, ticket.slot), (Some(vec![id]), None));
    let both = args("1 a 10 10 1 TICKET INFLIGHT 1 LEASE 50");
    assert_eq!(both.decode(&reply), None);
}

#[test]
fn inflight_parses_as_take_s_and_reads_back() {
    use ArgError::*;
    let parsed = args("2 a b 8 9 1 8 9 1 lease 30 TICKET inflight 3");
    assert_eq!(
        parsed.inflight,
        Some(throttle_bucket::Inflight {
            cap: 3,
            lease_ms: 30
        })
    );
    let mut written = vec!["2".to_owned(), "a".into(), "b".into()];
    written.extend(parsed.words().into_iter().map(Word::to_text));
    let back: Vec<&[u8]> = written.iter().map(String::as_bytes).collect();
    assert_eq!(MTakeArgs::parse(&back), Ok(parsed));
    assert!(written.ends_with(&["INFLIGHT".into(), "3".into(), "LEASE".into(), "30".into()]));
    for (text, expected) in [
        ("1 a 8 9 1 INFLIGHT 1", InflightLease),
        ("1 a 8 9 1 LEASE 1", InflightLease),
        ("1 a 8 9 1 INFLIGHT 0 LEASE 1", Inflight),
        ("1 a 8 9 1 INFLIGHT 1025 LEASE 1", Inflight),
        ("1 a 8 9 1 INFLIGHT x LEASE 1", Inflight),
        ("1 a 8 9 1 INFLIGHT 1 LEASE 0", Lease),
        ("1 a 8 9 1 INFLIGHT 1 LEASE 315360000001", Lease),
        ("1 a 8 9 1 INFLIGHT", MissingValue("INFLIGHT")),
        ("1 a 8 9 1 INFLIGHT 1 LEASE", MissingValue("LEASE")),
        (
            "1 a 8 9 1 INFLIGHT 1 inflight 2 LEASE 1",
            Repeated("INFLIGHT"),
        ),
        ("1 a 8 9 1 INFLIGHT 1 LEASE 1 LEASE 2", Repeated("LEASE")),
        (
            "1 a 8 9 1 INFLIGHTS 1 LEASE 1",
            UnknownOption(Command::MTake),
        ),
        // Structure before values, values in order: MAXWAIT, FLOOR, INFLIGHT, LEASE.
        (
            "1 a 8 9 1 INFLIGHT 0 LEASE 0 FOO",
            UnknownOption(Command::MTake),
        ),
        ("1 a 8 9 1 INFLIGHT 0 LEASE 1 MAXWAIT x", MaxWait),
        ("1 a 8 9 1 LEASE 0 INFLIGHT 0", Inflight),
    ] {
        assert_eq!(MTakeArgs::parse(&words(text)), Err(expected), "{text}");
    }
    let unknown = UnknownOption(Command::MTake).to_string();
    assert!(
        unknown.contains("INFLIGHT n, LEASE ms, LINE place_ms and WAITER id"),
        "{unknown}"
    );
}

/// 100/100 and 10/10, one token each: a token of the second bucket shows for 100 ms.
const BOTH: &str = "100 100 1 10 10 1";
/// The two keys' call with `options`.
fn both(options: &str) -> String {
    format!("2 a b {BOTH} {options}")
}

/// Cap 1, a 5 s lease, a place kept 1 s.
const LINE: &str = "INFLIGHT 1 LEASE 5000 LINE 1000";
const IN_LINE: i64 = 4 | 16;

#[test]
fn a_call_of_several_buckets_waits_in_the_first_ones_line_and_takes_its_tokens_at_the_look() {
    let mut p = Pair::new();
    // A slot free: taken with every bucket's tokens, as without LINE.
    let (_, holder) = p.at(0).mtake(&both(LINE));
    let a = holder[6];
    assert_eq!(holder, [1, 0, 99, 10, 9, 100, a, 0]);
    // Every slot held: in line for the slot alone, nothing taken from any bucket; look again
    // within half the place lease.
    let (out, first) = p.at(10).mtake(&both(LINE));
    let ticket = first[6];
    assert_eq!(first, [0, 500, 100, 0, 9, 90, ticket, 1, IN_LINE]);
    assert!(out.line.joined);
    assert_eq!(
        p.tat(1),
        Some(T0 + 100 * MS),
        "the second bucket is untouched"
    );
    // A one-bucket take with LINE on the first key stands behind it: one line for both.
    let single = p.at(20).take(LINE);
    assert_eq!(single[5], 2, "{single:?}");
    // The release hands the slot to the head, with no tokens (it takes them at its look).
    assert_eq!(
        p.at(100).release(a),
        (true, Some(format!("handed {ticket} 0")))
    );
    // Its look: every bucket's tokens now, the slot its ticket, leased from now.
    let (out, looked) = p.at(150).mtake(&both(&format!("{LINE} WAITER {ticket}")));
    assert_eq!(looked, [1, 0, 99, 10, 9, 100, ticket, 0]);
    assert_eq!(out.slot, Some(ticket as u64));
    let slots = &p.stored[0].as_ref().unwrap().slots;
    assert_eq!(slots.held[0].lease_end, T0 + 5150 * MS);
    assert_eq!(p.tat(1), Some(T0 + 250 * MS));
}

#[test]
fn a_handed_look_that_cannot_have_its_tokens_passes_the_slot_on() {
    let mut p = Pair::new();
    let a = p.at(0).mtake(&both(LINE)).1[6];
    let ticket = p.at(0).mtake(&both(LINE)).1[6];
    let next = p.at(0).take(LINE)[4];
    assert!(p.at(10).release(a).0);
    // The second bucket emptied meanwhile, into debt until 1100 ms.
    p.at(15).empty_second();
    // Its look finds the slot handed but not its tokens within MAXWAIT 0: denied for the
    // tokens, and the slot goes on to the next in line at once, announced (with the first
    // bucket's token of that one-bucket waiter taken at the hand-off).
    let (out, reply) = p.at(20).mtake(&both(&format!("{LINE} WAITER {ticket}")));
    assert_eq!(reply, [0, 180, 99, 10, 0, 1080, 0, 0, 1]);
    assert_eq!(out.refusal, Refusal::TOKENS);
    assert_eq!(
        out.announce().map(|m| m.text()),
        Some(format!("handed {next} 0"))
    );
    let slots = &p.stored[0].as_ref().unwrap().slots;
    assert_eq!(
        slots.held.iter().map(|s| s.id as i64).collect::<Vec<_>>(),
        [next]
    );
    assert!(slots.waiters.is_empty());
}

#[test]
fn a_waiter_looking_again_keeps_its_place_and_a_look_too_late_joins_again() {
    let mut p = Pair::new();
    p.at(0).mtake(&both(LINE));
    let ticket = p.at(0).mtake(&both(LINE)).1[6];
    // Within its place lease: its place renewed, nothing taken.
    let (_, looked) = p.at(900).mtake(&both(&format!("{LINE} WAITER {ticket}")));
    assert_eq!(looked, [0, 500, 100, 0, 10, 0, ticket, 1, IN_LINE]);
    // Past it (1900 + 1000 < 3000): gone from the line, and it joins again with a new ticket.
    let (_, late) = p.at(3000).mtake(&both(&format!("{LINE} WAITER {ticket}")));
    assert_eq!(late[7], 1);
    assert!(late[6] > ticket);
}

#[test]
fn held_back_by_its_tokens_too_it_does_not_join() {
    let mut p = Pair::new();
    p.at(0).mtake(&both(LINE));
    p.at(0).empty_second();
    let (out, reply) = p.at(0).mtake(&both(LINE));
    assert_eq!(reply, [0, 5000, 99, 10, 0, 1100, 0, 0, 1 | 4]);
    assert!(!out.line.joined);
    assert!(p.stored[0].as_ref().unwrap().slots.waiters.is_empty());
}

#[test]
fn line_options_of_mtake_go_with_inflight_and_without_floor() {
    let bad = |text: &str| MTakeArgs::parse(&words(text)).unwrap_err();
    assert_eq!(bad("1 a 8 9 1 LINE 100"), ArgError::LineInflight);
    assert_eq!(
        bad("1 a 8 9 1 INFLIGHT 1 LEASE 9 WAITER 3"),
        ArgError::WaiterLine
    );
    assert_eq!(
        bad("1 a 8 9 1 FLOOR 1 INFLIGHT 1 LEASE 9 LINE 100"),
        ArgError::LineFloor
    );
    assert_eq!(
        bad("1 a 8 9 1 INFLIGHT 1 LEASE 9 LINE 0"),
        ArgError::PlaceMs
    );
    assert_eq!(
        bad("1 a 8 9 1 INFLIGHT 1 LEASE 9 LINE 5 LINE 5"),
        ArgError::Repeated("LINE")
    );
    assert_eq!(
        bad("1 a 8 9 1 INFLIGHT 1 LEASE 9 LINE"),
        ArgError::MissingValue("LINE")
    );
    let args = MTakeArgs::parse(&words("1 a 8 9 1 INFLIGHT 1 LEASE 9 LINE 100 WAITER 77")).unwrap();
    let line = args.line.unwrap();
    assert_eq!((line.place_ms, line.waiter), (100, Some(77)));
    let written: Vec<String> = args.words().into_iter().map(|w| w.to_text()).collect();
    assert_eq!(
        written.join(" "),
        "8 9 1 INFLIGHT 1 LEASE 9 LINE 100 WAITER 77"
    );
}

/// One step of a random schedule of one-key and two-key callers on one line.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Caller k takes with LINE (or looks again, if it is in line): callers 0 to 2 with
    /// THROTTLE.TAKE on the first key, 3 to 5 with THROTTLE.MTAKE on both.
    Take(usize),
    /// Caller k releases the slot it holds, if it holds one.
    Release(usize),
    /// Another caller takes the second key's 10 tokens, if it can within 5 s.
    Drain,
    /// The clock moves by this many ms.
    Wait(i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..6usize).prop_map(Step::Take),
        3 => (0..6usize).prop_map(Step::Release),
        1 => Just(Step::Drain),
        3 => (1..400i64).prop_map(Step::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever one-key and two-key callers do on one line, and however short the second
    /// key's tokens run: never more than the cap held, slots handed in the order the waiters
    /// joined (a two-key look refused for its tokens leaves the line), and every waiter
    /// served or gone once places and leases run out.
    #[test]
    fn one_line_for_one_and_several_keys(steps in prop::collection::vec(step(), 1..120)) {
        let cap = 2;
        let line = format!("INFLIGHT {cap} LEASE 700 LINE 300");
        let mut p = Pair::new();
        let mut ms = 0;
        // Per caller: its ticket while in line, its slot while it holds one.
        let mut ticket: [Option<i64>; 6] = [None; 6];
        let mut slot: [Option<i64>; 6] = [None; 6];
        for step in steps {
            match step {
                Step::Wait(by) => ms += by,
                Step::Drain => {
                    let args = TakeArgs::parse(&words("10 10 TOKENS 10 MAXWAIT 5000")).unwrap();
                    let out = args.apply(&p.stored[1..], T0 + ms * MS).unwrap();
                    if let Some(write) = out.write(0) {
                        p.stored[1] = write.stored();
                    }
                }
                Step::Take(k) if slot[k].is_none() => {
                    let options = match ticket[k] {
                        Some(id) => format!("{line} WAITER {id}"),
                        None => line.clone(),
                    };
                    // The slot (or ticket), and the reason on a denial.
                    let (granted, id, reason) = if k < 3 {
                        let ints = p.at(ms).take(&options);
                        (ints[0] == 1, ints[4], ints.get(6).copied())
                    } else {
                        let ints = p.at(ms).mtake(&both(&options)).1;
                        (ints[0] == 1, ints[6], ints.get(8).copied())
                    };
                    ticket[k] = None;
                    if granted {
                        slot[k] = Some(id);
                    } else if reason == Some(IN_LINE) {
                        ticket[k] = Some(id);
                    }
                }
                Step::Release(k) => {
                    if let Some(id) = slot[k].take() {
                        p.at(ms).release(id);
                    }
                }
                Step::Take(_) => {}
            }
            let now = i128::from(T0 + ms * MS);
            if let Some(state) = &p.stored[0] {
                check_line_in_order(&state.slots, now, cap)?;
            }
        }
        ms += 7_000;
        let (out, _) = p.at(ms).mtake(&both(&format!("INFLIGHT {cap} LEASE 700")));
        prop_assert!(out.granted);
        let state = p.stored[0].as_ref().expect("a grant is stored");
        prop_assert!(state.slots.waiters.is_empty(), "{:?}", state.slots);
        prop_assert_eq!(state.slots.held.len(), 1);
    }
}
