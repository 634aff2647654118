//! `THROTTLE.RENEW key capacity rate slot ms`: a call in flight runs on; its slot's lease is
//! extended to the server's now plus `ms`, if the slot is still held. Its arguments,
//! arithmetic, reply and docs.

use crate::command::Command;
use crate::decision::{Decides, Decision};
use crate::error::ArgError;
use crate::gcra::View;
use crate::slot_options::parse_lease;
use crate::spec::{Arg, Kind, Spec, CAPACITY, KEY, RATE};
use crate::state::State;
use crate::words::{parse_slot, Word};
use crate::{Quota, NS_PER_MS};

/// `THROTTLE.RENEW key capacity rate slot ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenewArgs {
    /// The bucket's quota.
    pub quota: Quota,
    /// The slot's id, from THROTTLE.TAKE ... INFLIGHT.
    pub slot: u64,
    /// The new lease, ms from the server's now.
    pub lease_ms: u64,
}

/// THROTTLE.RENEW as the server registers and documents it.
pub(crate) static SPEC: Spec = Spec::writes(
    Command::Renew,
    "Extends the lease of a slot taken with THROTTLE.TAKE ... INFLIGHT to ms from now, \
        if it is still held. Replies 1 if it was, 0 if not (its lease ran out, or it was \
        released).",
    &[
        KEY,
        CAPACITY,
        RATE,
        Arg::new("slot", Kind::Integer),
        Arg::new("ms", Kind::Integer),
    ],
)
.costs("O(N) where N is the number of slots held");

impl Decides for RenewArgs {
    const COMMAND: Command = Command::Renew;
    /// The slot was held, and is renewed.
    type Reply = bool;

    /// Validates the words after the key: `capacity rate slot ms`.
    fn parse(args: &[&[u8]]) -> Result<RenewArgs, ArgError> {
        let (quota, [slot, ms]) = Quota::split(args, Command::Renew)?;
        Ok(RenewArgs {
            quota,
            slot: parse_slot(slot)?,
            lease_ms: parse_lease(ms)?,
        })
    }

    /// The words after the key.
    fn words(&self) -> Vec<Word<'_>> {
        self.quota
            .with([Word::Number(self.slot), Word::Number(self.lease_ms)])
    }

    /// Extends the slot to `now + ms` if it is held at `now_ns` (a slot whose lease ran out is
    /// gone: its late holder learns it lost it). Writes only when it is held.
    fn decide(&self, stored: Option<&State>, now_ns: i64) -> Result<Decision<bool>, ArgError> {
        let bucket = View::at(&self.quota, stored, now_ns);
        let lease_end = bucket.now + i128::from(self.lease_ms) * i128::from(NS_PER_MS);
        let write = i64::try_from(lease_end)
            .ok()
            .and_then(|end| bucket.slots.renewed(bucket.now, self.slot, end))
            .and_then(|slots| bucket.write_all(bucket.base, bucket.pushback, &slots));
        Ok(Decision::writing(write.is_some(), write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{call, refuses, written};

    #[test]
    fn arguments() {
        use ArgError::*;
        let args: RenewArgs = call("8 9 1796083200000000 5000");
        assert_eq!((args.slot, args.lease_ms), (1_796_083_200_000_000, 5000));
        refuses::<RenewArgs>(&[
            ("8 9 1", Arity(Command::Renew)),
            ("8 9 1 2 3", Arity(Command::Renew)),
            ("8 9 x 1", SlotId),
            ("8 9 -1 1", SlotId),
            ("8 9 9007199254740993 1", SlotId),
            ("8 9 1 0", Lease),
            ("8 9 1 315360000001", Lease),
            ("8 9 1 x", Lease),
            ("0 9 1 1", Capacity),
        ]);
        assert_eq!(written(&args), ["8", "9", "1796083200000000", "5000"]);
        assert_eq!(SPEC.syntax(), "key capacity rate slot ms");
    }
}
