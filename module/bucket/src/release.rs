//! `THROTTLE.RELEASE key capacity rate slot [INFLIGHT n]`: a call in flight ended; its slot is
//! freed at once, and announced where callers may be waiting for one. Its arguments,
//! arithmetic, reply and docs.

use crate::channel::Message;
use crate::command::Command;
use crate::error::ArgError;
use crate::gcra::{View, Write};
use crate::line::{left_line, settle, slack_after, Handed};
use crate::reply::{Ints, WireReply};
use crate::slot_options::parse_cap;
use crate::spec::{Access, Arg, Keys, Kind, Spec, CAPACITY, KEY, RATE};
use crate::state::State;
use crate::throttle_command::{one_key, Effects, ThrottleCommand};
use crate::words::{parse_slot, read_options, Word};
use crate::Quota;

/// `THROTTLE.RELEASE key capacity rate slot [INFLIGHT n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReleaseArgs {
    /// The bucket's quota.
    pub quota: Quota,
    /// The slot's id, from THROTTLE.TAKE ... INFLIGHT.
    pub slot: u64,
    /// `INFLIGHT n`: the cap the slot was taken under. A release that frees a slot of a table
    /// that held `n` (callers may be waiting for one) announces it on the pause channel.
    pub inflight: Option<u64>,
}

/// What THROTTLE.RENEW or RELEASE decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotOutcome {
    /// The slot was held (the reply: 1), and is renewed or freed.
    pub held: bool,
    /// The state to store, or `None` when the slot was not held. A release that leaves no
    /// slot, a full bucket and nothing in effect deletes the key: [`Write::Delete`].
    pub write: Option<Write>,
    /// A release freed a slot of a table that was full (`INFLIGHT n` slots held): announced,
    /// so that a caller refused for want of a slot looks again at once. A fleet whose table
    /// never fills announces nothing.
    pub freed_full: bool,
    /// The slots the release handed to the head of the line (the first one is announced).
    pub handed: Vec<Handed>,
    /// Waiters gone at the end of their place lease, dropped by this write.
    pub left: u64,
}

/// Frees the slot `args.slot` if it is held at `now_ns`, or takes a waiter with that ticket
/// out of the line; nothing otherwise (a release is
/// idempotent, and since ids are never reused a late one never frees a newer holder's slot).
///
/// With callers in line for a slot, the freed slot (and any whose lease ran out) goes to the
/// head of the line at once, under the cap the line waits under.
fn release(args: &ReleaseArgs, stored: Option<&State>, now_ns: i64) -> SlotOutcome {
    let bucket = View::at(&args.quota, stored, now_ns);
    let Some(mut slots) = bucket.slots.released(bucket.now, args.slot) else {
        // A waiter's ticket: it leaves the line (it gave up, or its call was cancelled).
        if let Some(slots) = left_line(bucket.slots, bucket.now, args.slot) {
            let write = bucket.write_all(bucket.base, bucket.pushback, &slots);
            return SlotOutcome {
                held: write.is_some(),
                write,
                freed_full: false,
                handed: Vec::new(),
                left: 0,
            };
        }
        return SlotOutcome {
            held: false,
            write: None,
            freed_full: false,
            handed: Vec::new(),
            left: 0,
        };
    };
    let (tat, slots, handed) = if slots.waiters.is_empty() {
        (bucket.base, slots, Vec::new())
    } else {
        // The line learns its pace from how much lease the holders leave unused.
        let freed = bucket.slots.live(bucket.now).find(|s| s.id == args.slot);
        if let Some(freed) = freed {
            slots.slack_ms = slack_after(slots.slack_ms, i128::from(freed.lease_end) - bucket.now);
        }
        let cap = slots.cap;
        settle(&bucket, bucket.base, slots, cap)
    };
    let write = bucket.write_all(tat, bucket.pushback, &slots);
    let full = args
        .inflight
        .is_some_and(|cap| bucket.slots.held_at(bucket.now) >= cap);
    let stored = bucket.slots.waiters.len() as u64;
    let live = bucket.slots.waiting(bucket.now).count() as u64;
    let written = write.is_some();
    SlotOutcome {
        held: written,
        freed_full: full && written && handed.is_empty(),
        handed: if written { handed } else { Vec::new() },
        left: if written {
            stored.saturating_sub(live)
        } else {
            0
        },
        write,
    }
}

/// THROTTLE.RELEASE as the server registers and documents it.
pub(crate) static SPEC: Spec = Spec {
    command: Command::Release,
    summary: "Frees a slot taken with THROTTLE.TAKE ... INFLIGHT at once, announcing it when \
        INFLIGHT n says the slots were all held, or hands it to the head of the line for a \
        slot, announcing `handed <id> <wait_ms>`. A waiter's ticket leaves the line. Replies \
        1 if it was held (or in line), 0 if not (released already, or its lease ran out).",
    complexity: "O(N) where N is the number of slots held",
    arity: -5,
    flags: "write deny-oom fast",
    acl_categories: "write fast",
    keys: Keys::One(Access::ReadWrite),
    args: &[
        KEY,
        CAPACITY,
        RATE,
        Arg::new("slot", Kind::Integer),
        Arg::option("inflight", "INFLIGHT", Kind::Integer),
    ],
};

impl Effects for SlotOutcome {
    #[inline]
    fn write(&self, key: usize) -> Option<&Write> {
        self.write.as_ref().filter(|_| key == 0)
    }

    /// The first waiter handed a slot (the rest look at their leases' ends), or else a slot
    /// freed of a full table.
    #[inline]
    fn announce(&self) -> Option<Message> {
        match self.handed.first() {
            Some(handed) => Some(Message::Handed(*handed)),
            None => self.freed_full.then_some(Message::SlotFreed),
        }
    }
}

impl ThrottleCommand for ReleaseArgs {
    const COMMAND: Command = Command::Release;
    const INTEGER_REPLY: bool = bool::INTEGER;
    const REPLY_SHAPE: &'static str = bool::SHAPE;
    type Outcome = SlotOutcome;
    type Ints = Ints<1>;
    /// The slot was held, and is freed.
    type Reply = bool;

    #[inline]
    fn spec() -> &'static Spec {
        &SPEC
    }

    /// Validates the words after the key: `capacity rate slot [INFLIGHT n]`; the quota and the
    /// slot first, then the option's structure, then its value (the order the Lua twin
    /// follows).
    fn parse(args: &[&[u8]]) -> Result<ReleaseArgs, ArgError> {
        let [capacity, rate, slot, options @ ..] = args else {
            return Err(ArgError::Arity(Command::Release));
        };
        let quota = Quota::parse(capacity, rate)?;
        let slot = parse_slot(slot)?;
        let [inflight] = read_options(
            options,
            ["INFLIGHT"],
            |_, _| Ok(None),
            ArgError::UnknownOption(Command::Release),
        )?;
        Ok(ReleaseArgs {
            quota,
            slot,
            inflight: inflight.map(parse_cap).transpose()?,
        })
    }

    /// The words after the key.
    fn words(&self) -> Vec<Word<'_>> {
        let [capacity, rate] = self.quota.words();
        let mut words = vec![capacity, rate, Word::Number(self.slot)];
        if let Some(cap) = self.inflight {
            words.extend([Word::Text("INFLIGHT"), Word::Number(cap)]);
        }
        words
    }

    #[inline]
    fn apply(&self, stored: &[Option<State>], now_ns: i64) -> Result<SlotOutcome, ArgError> {
        Ok(release(self, one_key(stored), now_ns))
    }

    #[inline]
    fn reply(&self, outcome: &SlotOutcome) -> Ints<1> {
        outcome.held.ints()
    }

    #[inline]
    fn decode(&self, ints: &[i64]) -> Option<bool> {
        bool::read(ints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        let parse = |text: &str| {
            let words: Vec<&[u8]> = text.split_whitespace().map(str::as_bytes).collect();
            ReleaseArgs::parse(&words)
        };
        assert_eq!(parse("8 9 42").map(|a| a.slot), Ok(42));
        assert_eq!(parse("8 9 0").map(|a| a.slot), Ok(0));
        assert_eq!(parse("8 9 42 inflight 4").map(|a| a.inflight), Ok(Some(4)));
        assert_eq!(parse("8 9"), Err(ArgError::Arity(Command::Release)));
        assert_eq!(
            parse("8 9 1 2"),
            Err(ArgError::UnknownOption(Command::Release))
        );
        assert_eq!(
            parse("8 9 1 INFLIGHT"),
            Err(ArgError::MissingValue("INFLIGHT"))
        );
        assert_eq!(
            parse("8 9 1 INFLIGHT 2 INFLIGHT 2"),
            Err(ArgError::Repeated("INFLIGHT"))
        );
        assert_eq!(parse("8 9 1 INFLIGHT 0"), Err(ArgError::Inflight));
        assert_eq!(parse("8 9 1 INFLIGHT 1025"), Err(ArgError::Inflight));
        assert_eq!(parse("8 9 1.5 INFLIGHT 0"), Err(ArgError::SlotId));
        assert_eq!(SPEC.syntax(), "key capacity rate slot [INFLIGHT inflight]");
    }
}
