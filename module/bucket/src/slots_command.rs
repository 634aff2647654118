//! `THROTTLE.SLOTS key capacity rate`: a bucket's calls in flight, as a read-only command. Its
//! arguments, arithmetic, reply and docs.

use crate::command::Command;
use crate::decision::{Decides, Decision};
use crate::error::ArgError;
use crate::gcra::View;
use crate::reply::{ms_up, wire_reply};
use crate::spec::{Spec, CAPACITY, KEY, RATE};
use crate::state::State;
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

/// THROTTLE.SLOTS as the server registers and documents it: read-only, like THROTTLE.PEEK.
pub(crate) static SPEC: Spec = Spec::reads(
    Command::Slots,
    "Reads a bucket's calls in flight without writing anything. Replies [held, \
        first_lease_ms]: the slots held now and the ms until the first of their leases runs \
        out (0, 0 when none is held).",
    &[KEY, CAPACITY, RATE],
)
.costs("O(N) where N is the number of slots held");

impl Decides for SlotsArgs {
    const COMMAND: Command = Command::Slots;
    const READ_ONLY: bool = true;
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

    /// Reads the bucket's slots at `now_ns`. Writes nothing.
    fn decide(
        &self,
        stored: Option<&State>,
        now_ns: i64,
    ) -> Result<Decision<SlotsReply>, ArgError> {
        let bucket = View::at(&self.quota, stored, now_ns);
        Ok(Decision::read_only(SlotsReply {
            held: bucket.slots.held_at(bucket.now),
            first_lease_ms: bucket
                .slots
                .earliest_end(bucket.now)
                .map_or(0, |end| ms_up(i128::from(end) - bucket.now)),
        }))
    }
}

wire_reply!(
    SlotsReply {
        held,
        first_lease_ms
    },
    "an array of two integers"
);
