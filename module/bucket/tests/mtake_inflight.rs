//! THROTTLE.MTAKE ... INFLIGHT n LEASE ms: a slot for the call in flight in the first key's
//! bucket, taken with every bucket's tokens or not at all, as tables of explicit instants.

use throttle_bucket::{
    ArgError, Command, MOutcome, MTakeArgs, Refusal, State, ThrottleCommand, Word, NS_PER_MS,
};

/// 2026-12-01T00:00:00Z.
const T0: i64 = 1_796_083_200 * 1_000_000_000;
const MS: i64 = NS_PER_MS;

fn words(text: &str) -> Vec<&[u8]> {
    text.split_whitespace().map(str::as_bytes).collect()
}

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
            if let Some(write) = MTakeArgs::write(&out, key) {
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
