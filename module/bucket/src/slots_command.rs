//! `THROTTLE.SLOTS key capacity rate`: a bucket's calls in flight, as a read-only command. Its
//! arguments, arithmetic, reply and docs.

use crate::command::Command;
use crate::error::ArgError;
use crate::gcra::View;
use crate::reply::{count, int, ms_up, Ints};
use crate::spec::{Spec, CAPACITY, KEY, RATE};
use crate::state::State;
use crate::throttle_command::{one_key, Decision, ThrottleCommand};
use crate::words::Word;
use crate::Quota;

/// `THROTTLE.SLOTS key capacity rate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotsArgs {
    /// The bucket's quota.
    pub quota: Quota,
}

/// THROTTLE.SLOTS's reply: `[held, first_lease_ms_left]` (0, 0 when none is held).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotsReply {
    /// Slots held now.
    pub held: u64,
    /// Ms until the first lease held runs out, rounded up (0: none held).
    pub first_lease_ms: u64,
}

/// Reads the bucket's slots at `now_ns`. Writes nothing.
fn slots(quota: &Quota, stored: Option<&State>, now_ns: i64) -> Decision<SlotsReply> {
    let bucket = View::at(quota, stored, now_ns);
    Decision::reply(SlotsReply {
        held: bucket.slots.held_at(bucket.now),
        first_lease_ms: bucket
            .slots
            .earliest_end(bucket.now)
            .map_or(0, |end| ms_up(i128::from(end) - bucket.now)),
    })
}

/// THROTTLE.SLOTS as the server registers and documents it: read-only, like THROTTLE.PEEK.
pub(crate) static SPEC: Spec = Spec::reads(
    Command::Slots,
    "Reads a bucket's calls in flight without writing anything. Replies [held, \
        first_lease_ms]: the slots held now and the ms until the first of their leases runs \
        out (0, 0 when none is held).",
    &[KEY, CAPACITY, RATE],
)
.costs("O(N) where N is the number of slots held");

impl ThrottleCommand for SlotsArgs {
    const COMMAND: Command = Command::Slots;
    const READ_ONLY: bool = true;
    const REPLY_SHAPE: &'static str = "an array of two integers";
    type Outcome = Decision<SlotsReply>;
    type Ints = Ints<2>;
    type Reply = SlotsReply;

    /// Validates the words after the key: `capacity rate`.
    fn parse(args: &[&[u8]]) -> Result<SlotsArgs, ArgError> {
        let (quota, []) = Quota::split(args, Command::Slots)?;
        Ok(SlotsArgs { quota })
    }

    /// The words after the key.
    fn words(&self) -> Vec<Word<'_>> {
        self.quota.words().to_vec()
    }

    #[inline]
    fn apply(
        &self,
        stored: &[Option<State>],
        now_ns: i64,
    ) -> Result<Decision<SlotsReply>, ArgError> {
        Ok(slots(&self.quota, one_key(stored), now_ns))
    }

    #[inline]
    fn reply(&self, outcome: &Decision<SlotsReply>) -> Ints<2> {
        let reply = &outcome.reply;
        Ints::new([int(reply.held), int(reply.first_lease_ms)])
    }

    #[inline]
    fn decode(&self, ints: &[i64]) -> Option<SlotsReply> {
        let [held, first] = ints else {
            return None;
        };
        Some(SlotsReply {
            held: count(*held)?,
            first_lease_ms: count(*first)?,
        })
    }
}
