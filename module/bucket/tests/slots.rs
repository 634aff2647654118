//! Calls in flight: THROTTLE.TAKE ... INFLIGHT n LEASE ms, RENEW, RELEASE and SLOTS, as tables
//! of explicit instants, the stored state's format, and a property over random interleavings.

use proptest::prelude::*;
use throttle_bucket::{
    encode_state, parse_state, Outcome, Refusal, ReleaseArgs, RenewArgs, Slot, Slots, SlotsArgs,
    State, TakeArgs, ThrottleCommand, Write, SLOTS_STATE_HEAD,
};

/// 2026-12-01T00:00:00Z.
const T0: i64 = 1_796_083_200 * 1_000_000_000;

mod instants;
use instants::{after, on, words, MS};

fn take_args(text: &str) -> TakeArgs {
    TakeArgs::parse(&words(text)).expect("valid test arguments")
}

/// A bucket and the server's clock, calls made one after another.
struct Bucket {
    state: Option<State>,
    now: i64,
}

impl Bucket {
    fn new() -> Bucket {
        Bucket {
            state: None,
            now: T0,
        }
    }

    fn at(&mut self, ms: i64) -> &mut Bucket {
        self.now = T0 + ms * MS;
        self
    }

    fn take(&mut self, text: &str) -> Outcome {
        let out = on(&take_args(text), self.state.as_ref(), self.now);
        self.state = after(&out.write, self.state.clone());
        out
    }

    fn renew(&mut self, slot: u64, ms: u64) -> bool {
        let args = RenewArgs::parse(&words(&format!("100 100 {slot} {ms}"))).unwrap();
        let out = on(&args, self.state.as_ref(), self.now);
        assert_eq!(out.reply, out.write.is_some());
        self.state = after(&out.write, self.state.clone());
        out.reply
    }

    fn release(&mut self, slot: u64) -> bool {
        let args = ReleaseArgs::parse(&words(&format!("100 100 {slot}"))).unwrap();
        let out = on(&args, self.state.as_ref(), self.now);
        assert_eq!(out.held, out.write.is_some());
        self.state = after(&out.write, self.state.clone());
        out.held
    }

    /// THROTTLE.SLOTS's reply: slots held, ms until the first lease ends.
    fn slots(&self) -> (u64, u64) {
        let quota = take_args("100 100").quota;
        let out = on(&SlotsArgs { quota }, self.state.as_ref(), self.now).reply;
        (out.held, out.first_lease_ms)
    }

    fn reply(&self, text: &str, out: &Outcome) -> Vec<i64> {
        take_args(text).reply(out).as_ref().to_vec()
    }
}

const IN2: &str = "100 100 INFLIGHT 2 LEASE 1000";

#[test]
fn acquire_up_to_the_cap_then_wait_for_the_first_lease() {
    let mut b = Bucket::new();
    let first = b.take(IN2);
    let id = first.slot.unwrap();
    assert_eq!(id, 1_796_083_200_000_000, "the first id is the clock in µs");
    assert_eq!(b.reply(IN2, &first), [1, 99, 0, 10, id as i64]);
    let second = b.at(100).take(IN2);
    assert_eq!(
        second.slot,
        Some(id + 100_000),
        "100 ms later: the clock's µs"
    );
    // Both held: denied, the wait until the first lease ends, nothing written.
    let before = b.state.clone();
    let denied = b.at(300).take(IN2);
    assert!(!denied.granted && denied.held_by_slots && denied.write.is_none());
    assert_eq!(
        b.reply(IN2, &denied),
        [0, 100, 700, 0, 0, 4],
        "the bucket is full again; held back by the slots (4)"
    );
    assert_eq!(denied.refusal, Refusal::SLOT);
    assert_eq!(b.state, before);
    assert_eq!(b.slots(), (2, 700));
    // The first lease runs out at 1000 ms: its slot is free again, with a new id.
    let third = b.at(1000).take(IN2);
    assert_eq!(third.slot, Some(T0 as u64 / 1000 + 1_000_000));
    let state = b.state.clone().unwrap();
    assert_eq!(
        state.slots.held.iter().map(|s| s.id).collect::<Vec<_>>(),
        [id + 100_000, id + 1_000_000],
        "the run-out lease is dropped at the write"
    );
}

#[test]
fn a_token_wait_longer_than_the_lease_wins_and_a_token_denial_takes_no_slot() {
    let mut b = Bucket::new();
    let text = "1 1 INFLIGHT 1 LEASE 100";
    assert!(b.take(text).granted);
    // Both the token (1 s) and the slot (100 ms) are short: the longer wait.
    let out = b.at(10).take(text);
    assert!(!out.granted && !out.held_by_slots);
    // Held back by both: the tokens (1) and the slot (4).
    assert_eq!(b.reply(text, &out), [0, 0, 990, 990, 0, 5]);
    // The lease ran out but the token is not there: denied, no slot, only the tokens.
    let out = b.at(200).take(text);
    assert_eq!(
        (out.granted, out.slot, out.write.is_none(), out.refusal),
        (false, None, true, Refusal::TOKENS)
    );
    assert_eq!(b.slots(), (0, 0));
}

#[test]
fn reservations_floors_and_tickets_keep_their_meaning() {
    let mut b = Bucket::new();
    let text = "2 1 TOKENS 2 INFLIGHT 5 LEASE 60000";
    assert!(b.take(text).granted);
    let reserve = "2 1 MAXWAIT 5000 TICKET INFLIGHT 5 LEASE 60000";
    let out = b.at(0).take(reserve);
    let reply = b.reply(reserve, &out);
    assert_eq!(
        &reply[..4],
        [1, 0, 1000, 3000],
        "reserved, as without INFLIGHT"
    );
    assert_eq!(reply[4], (T0 + 3000 * MS) / 1000, "the ticket");
    assert_eq!(reply[5] as u64, out.slot.unwrap(), "then the slot");
    // The lease runs from now, not from the reserved time.
    let held = b.state.clone().unwrap().slots.held;
    assert_eq!(held.last().map(|s| s.lease_end), Some(T0 + 60_000 * MS));
    // A floored take held back by its floor takes no slot.
    let mut c = Bucket::new();
    let floored = "10 10 TOKENS 4 FLOOR 6 INFLIGHT 5 LEASE 1000";
    let out = c.take(floored);
    assert!(out.granted);
    let out = c.take(floored);
    assert!(!out.granted && out.held_by_floor && out.slot.is_none());
    assert_eq!(
        c.reply(floored, &out).last(),
        Some(&2),
        "held back by the floor"
    );
}

#[test]
fn tokens_0_takes_a_slot_only() {
    let mut b = Bucket::new();
    let text = "10 10 TOKENS 0 TICKET INFLIGHT 1 LEASE 1000";
    let out = b.take(text);
    let id = out.slot.unwrap();
    assert_eq!(b.reply(text, &out), [1, 10, 0, 0, 0, id as i64]);
    let state = b.state.clone().unwrap();
    assert_eq!(state.tat, T0, "a full bucket");
    assert_eq!(
        state.slots.held,
        [Slot {
            id,
            lease_end: T0 + 1000 * MS
        }]
    );
    let out = b.take(text);
    assert!(!out.granted && out.held_by_slots);
    assert_eq!(b.reply(text, &out), [0, 10, 1000, 0, 0, 0, 4]);
}

#[test]
fn renew_extends_and_a_late_holder_learns_it_lost_its_slot() {
    let mut b = Bucket::new();
    let id = b.take(IN2).slot.unwrap();
    assert!(b.at(900).renew(id, 1000));
    assert_eq!(b.slots(), (1, 1000));
    assert!(
        b.at(1500).renew(id, 1000),
        "renewed at 900: held until 1900"
    );
    assert!(!b.at(2600).renew(id, 1000), "ran out at 2500");
    assert!(!b.renew(id + 1, 1000), "never given");
    assert_eq!(b.slots(), (0, 0));
}

#[test]
fn release_frees_at_once_and_a_late_release_frees_nothing_newer() {
    let mut b = Bucket::new();
    let a = b.take(IN2).slot.unwrap();
    let c = b.take(IN2).slot.unwrap();
    assert!(!b.take(IN2).granted);
    assert!(b.release(a));
    assert!(!b.release(a), "idempotent");
    let d = b.take(IN2).slot.unwrap();
    assert!(d > c, "ids are never reused");
    // `c` runs out; a newer slot takes its place; the late release of `c` frees nothing.
    let e = b.at(1000).take(IN2).slot;
    assert!(e.is_some());
    let d_and_e = b.slots();
    assert!(!b.release(c));
    assert_eq!(b.slots(), d_and_e);
}

#[test]
fn a_release_that_leaves_nothing_deletes_the_key() {
    let mut b = Bucket::new();
    let text = "10 10 TOKENS 0 INFLIGHT 1 LEASE 1000";
    let id = b.take(text).slot.unwrap();
    let args = ReleaseArgs::parse(&words(&format!("10 10 {id}"))).unwrap();
    let out = on(&args, b.state.as_ref(), T0 + MS);
    assert_eq!(out.write, Some(Write::Delete));
    // Not while the bucket is in debt: then the 8-byte form, expiring when it is full.
    let mut b = Bucket::new();
    let id = b
        .take("10 10 TOKENS 5 INFLIGHT 1 LEASE 60000")
        .slot
        .unwrap();
    let out = on(
        &ReleaseArgs::parse(&words(&format!("10 10 {id}"))).unwrap(),
        b.state.as_ref(),
        T0,
    );
    let Some(Write::Store {
        state,
        expire_at_ms,
    }) = out.write
    else {
        panic!("a store");
    };
    assert_eq!(encode_state(&state).as_bytes().len(), 8);
    assert_eq!(expire_at_ms, Some((T0 + 500 * MS) / MS));
}

#[test]
fn the_key_lives_until_the_last_lease_ends() {
    let mut b = Bucket::new();
    let out = b.take("10 10 INFLIGHT 3 LEASE 5000");
    assert_eq!(
        out.write.and_then(|w| w.expire_at_ms()),
        Some((T0 + 5000 * MS) / MS)
    );
    // A write by another command carries the slots over, and the expiry with them.
    let out = b.take("10 10");
    let state = out.write.clone().and_then(|w| w.stored()).unwrap();
    assert_eq!(state.slots.held.len(), 1);
    assert_eq!(
        out.write.and_then(|w| w.expire_at_ms()),
        Some((T0 + 5000 * MS) / MS)
    );
}

#[test]
fn a_clock_stepped_back_keeps_leases_longer_and_ids_growing() {
    let mut b = Bucket::new();
    let a = b.at(10_000).take(IN2).slot.unwrap();
    // The clock reads 0.5 s earlier: the lease (until 11 s) is held longer, never shorter.
    assert_eq!(b.at(9_500).slots(), (1, 1500));
    let c = b.take(IN2).slot.unwrap();
    assert_eq!(c, a + 1, "ids grow from the stored counter, not the clock");
    assert!(!b.take(IN2).granted);
}

#[test]
fn the_state_format() {
    let slots = Slots {
        next_id: 43,
        held: vec![
            Slot {
                id: 40,
                lease_end: T0 + MS,
            },
            Slot {
                id: 42,
                lease_end: T0 + 2 * MS,
            },
        ],
        ..Slots::default()
    };
    let state = State {
        tat: T0,
        pushback: None,
        slots: slots.clone(),
        kept: None,
    };
    let bytes = encode_state(&state).as_bytes().to_vec();
    assert_eq!(bytes.len(), SLOTS_STATE_HEAD + 2 * 16);
    assert_eq!(&bytes[8..32], [0; 24], "no pause or cut: zero");
    assert_eq!(&bytes[32..40], 43u64.to_le_bytes());
    assert_eq!(&bytes[40..48], 40u64.to_le_bytes());
    assert_eq!(&bytes[48..56], (T0 + MS).to_le_bytes());
    assert_eq!(parse_state(&bytes, T0), Ok(state));
    // Expired leases still read (dropped at the next write).
    assert!(parse_state(&bytes, T0 + 10 * MS).is_ok());
    // Without slots: the 8-byte form, as before.
    assert_eq!(encode_state(&State::plain(T0)).as_bytes().len(), 8);
    // Refused: ids not increasing, an id at or past the next id, a lease in 1970, a length
    // between forms, a table past 1024 slots.
    let with = |at: usize, field: [u8; 8]| {
        let mut b = bytes.clone();
        b[at..at + 8].copy_from_slice(&field);
        b
    };
    for bad in [
        with(56, 40u64.to_le_bytes()),
        with(56, 43u64.to_le_bytes()),
        with(40, 0u64.to_le_bytes()),
        with(48, 12345i64.to_le_bytes()),
        with(32, (1u64 << 60).to_le_bytes()),
        bytes[..bytes.len() - 1].to_vec(),
        bytes[..SLOTS_STATE_HEAD].to_vec(),
        vec![0; SLOTS_STATE_HEAD + 1025 * 16],
    ] {
        assert!(parse_state(&bad, T0).is_err(), "{} bytes", bad.len());
    }
}

#[test]
fn commands_parse_and_reply_as_specified() {
    let renew = RenewArgs::parse(&[b"8", b"9", b"5", b"100"]).unwrap();
    let release = ReleaseArgs::parse(&[b"8", b"9", b"5"]).unwrap();
    assert_eq!(renew.decode(&[1]), Some(true));
    assert_eq!(release.decode(&[0]), Some(false));
    assert_eq!(release.decode(&[2]), None);
    assert_eq!(SlotsArgs::spec().syntax(), "key capacity rate");
    for (text, want) in [
        ("8 9 INFLIGHT 0 LEASE 1", "ERR INFLIGHT must"),
        ("8 9 INFLIGHT 1025 LEASE 1", "ERR INFLIGHT must"),
        ("8 9 INFLIGHT 1 LEASE 0", "ERR the lease must"),
        ("8 9 INFLIGHT 1", "ERR INFLIGHT and LEASE go together"),
        ("8 9 LEASE 1", "ERR INFLIGHT and LEASE go together"),
        ("8 9 INFLIGHT", "ERR INFLIGHT needs a value"),
        (
            "8 9 INFLIGHT 1 LEASE 1 inflight 2",
            "ERR INFLIGHT is given more than once",
        ),
    ] {
        let err = TakeArgs::parse(&words(text)).unwrap_err().to_string();
        assert!(err.starts_with(want), "{text}: {err}");
    }
    let args = take_args("8 9 TICKET INFLIGHT 1024 LEASE 315360000000");
    let written: Vec<String> = args.words().into_iter().map(|w| w.to_text()).collect();
    let back: Vec<&[u8]> = written.iter().map(String::as_bytes).collect();
    assert_eq!(TakeArgs::parse(&back), Ok(args));
}

#[derive(Clone, Debug)]
enum Op {
    Take { tokens: u64 },
    Renew { pick: usize, ms: u64 },
    Release { pick: usize },
}

fn ops() -> impl Strategy<Value = Vec<(i64, Op)>> {
    let op = prop_oneof![
        4 => (0u64..3).prop_map(|tokens| Op::Take { tokens }),
        1 => (0usize..8, 1u64..400).prop_map(|(pick, ms)| Op::Renew { pick, ms }),
        2 => (0usize..8).prop_map(|pick| Op::Release { pick }),
    ];
    let step = prop_oneof![8 => 0i64..150 * MS, 1 => -100 * MS..0];
    prop::collection::vec((step, op), 1..120)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the interleaving (and a clock that steps back), no more than `n` slots are
    /// ever held, a slot comes only with its tokens and the tokens only with a slot, ids are
    /// never given twice, and every state written reads back as itself.
    #[test]
    fn never_more_than_the_cap(cap in 1u64..5, lease in 1u64..300, seq in ops()) {
        let text = |tokens: u64| format!("3 20 TOKENS {tokens} INFLIGHT {cap} LEASE {lease}");
        let mut state: Option<State> = None;
        let mut now = T0;
        let mut given: Vec<u64> = Vec::new();
        for (step, op) in seq {
            now += step;
            let held_before = state.as_ref().map_or(0, |s| s.slots.held_at(i128::from(now)));
            let write = match op {
                Op::Take { tokens } => {
                    let args = take_args(&text(tokens));
                    let plain = TakeArgs { inflight: None, ..args };
                    let tokens_alone = on(&plain, state.as_ref(), now);
                    let out = on(&args, state.as_ref(), now);
                    prop_assert_eq!(out.granted, out.slot.is_some());
                    prop_assert_eq!(out.granted, out.write.is_some());
                    if out.granted {
                        prop_assert!(tokens_alone.granted, "a slot without its tokens");
                        prop_assert!(held_before < cap);
                        let tat = |w: &Option<Write>| w.as_ref().and_then(Write::tat);
                        if tokens > 0 {
                            prop_assert_eq!(tat(&out.write), tat(&tokens_alone.write));
                        }
                        let id = out.slot.unwrap_or(0);
                        prop_assert!(!given.contains(&id), "id {} given twice", id);
                        given.push(id);
                    } else {
                        prop_assert!(!tokens_alone.granted || held_before >= cap,
                            "the tokens alone were granted and a slot was free");
                    }
                    out.write
                }
                Op::Renew { pick, ms } => {
                    let id = given.get(pick % given.len().max(1)).copied().unwrap_or(0);
                    let args = RenewArgs::parse(&words(&format!("3 20 {id} {ms}"))).unwrap();
                    on(&args, state.as_ref(), now).write
                }
                Op::Release { pick } => {
                    let id = given.get(pick % given.len().max(1)).copied().unwrap_or(0);
                    let args = ReleaseArgs::parse(&words(&format!("3 20 {id}"))).unwrap();
                    on(&args, state.as_ref(), now).write
                }
            };
            if let Some(write) = write {
                let stored = write.stored();
                if let Some(s) = &stored {
                    prop_assert!(s.slots.held.len() as u64 <= cap);
                    prop_assert!(s.slots.held.iter().all(|slot| i128::from(slot.lease_end) > i128::from(now)));
                    let bytes = encode_state(s);
                    prop_assert_eq!(parse_state(bytes.as_bytes(), now), Ok(s.clone()));
                    if let (Some(end), Some(expire)) = (s.slots.latest_end(), write.expire_at_ms()) {
                        prop_assert!(expire * MS >= end);
                    }
                }
                state = stored;
            }
            let held = state.as_ref().map_or(0, |s| s.slots.held_at(i128::from(now)));
            prop_assert!(held <= cap, "{} held, cap {}", held, cap);
        }
    }
}
