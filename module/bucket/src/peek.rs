//! `THROTTLE.PEEK key capacity rate`: the bucket as it stands (what `THROTTLE.TAKE ... TOKENS 0`
//! replies) and the supplier's pushback on it, as a read-only command.

use crate::command::Command;
use crate::decision::{Decides, Decision};
use crate::error::ArgError;
use crate::gcra::View;
use crate::reply::{ms_up, Ints, ReplyInt, WireReply};
use crate::spec::{Spec, CAPACITY, KEY, RATE};
use crate::state::State;
use crate::take::inspect;
use crate::words::Word;
use crate::Quota;

/// `THROTTLE.PEEK key capacity rate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeekArgs {
    /// The bucket's quota.
    pub quota: Quota,
}

/// THROTTLE.PEEK's reply: `[1, remaining, 0, reset_ms, paused_ms, factor_bp]`. Its first four
/// are what `THROTTLE.TAKE ... TOKENS 0` replies; then how long the bucket's pause lasts (a
/// reserved call whose time falls inside it must not be sent) and its rate's factor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeekReply {
    /// Whole tokens in the bucket now (0 while in debt).
    pub remaining: u64,
    /// Ms until the bucket is full again, rounded up.
    pub reset_ms: u64,
    /// Ms until its pause ends, rounded up (0: not paused).
    pub paused_ms: u64,
    /// The rate's factor now, in basis points (10 000: not cut).
    pub factor_bp: u16,
}

/// THROTTLE.PEEK as the server registers and documents it. Read-only: allowed on a read-only
/// replica, in EVAL_RO and `no-writes` functions, during CLIENT PAUSE WRITE and when the server
/// is out of memory.
pub(crate) static SPEC: Spec = Spec::reads(
    Command::Peek,
    "Reads a bucket without taking or writing anything. Replies [1, remaining, 0, \
        reset_ms, paused_ms, factor_bp]: what THROTTLE.TAKE ... TOKENS 0 replies, then how long \
        the bucket is paused and its rate's factor in basis points.",
    &[KEY, CAPACITY, RATE],
);

impl Decides for PeekArgs {
    const COMMAND: Command = Command::Peek;
    const READ_ONLY: bool = true;
    type Reply = PeekReply;

    /// Validates the words after the key: `capacity rate`.
    fn parse(args: &[&[u8]]) -> Result<PeekArgs, ArgError> {
        let (quota, []) = Quota::split(args, Command::Peek)?;
        Ok(PeekArgs { quota })
    }

    /// The words after the key.
    fn words(&self) -> Vec<Word<'_>> {
        self.quota.words().to_vec()
    }

    /// Reads the bucket at `now_ns`: what `TOKENS 0` sees, and the supplier's pushback on it.
    /// Writes nothing.
    fn decide(&self, stored: Option<&State>, now_ns: i64) -> Result<Decision<PeekReply>, ArgError> {
        let bucket = View::at(&self.quota, stored, now_ns);
        let seen = inspect(&bucket);
        Ok(Decision::read_only(PeekReply {
            remaining: seen.remaining,
            reset_ms: ms_up(i128::from(seen.reset_ns)),
            paused_ms: ms_up(bucket.paused_for()),
            factor_bp: bucket.factor,
        }))
    }
}

impl WireReply for PeekReply {
    const SHAPE: &'static str = "an array of six integers";
    type Ints = Ints<6>;

    #[inline]
    fn ints(&self) -> Ints<6> {
        Ints::new([
            1,
            self.remaining.to_int(),
            0,
            self.reset_ms.to_int(),
            self.paused_ms.to_int(),
            self.factor_bp.to_int(),
        ])
    }

    #[inline]
    fn read(ints: &[i64]) -> Option<PeekReply> {
        let [1, remaining, 0, reset_ms, paused_ms, factor_bp] = ints else {
            return None;
        };
        Some(PeekReply {
            remaining: u64::from_int(*remaining)?,
            reset_ms: u64::from_int(*reset_ms)?,
            paused_ms: u64::from_int(*paused_ms)?,
            factor_bp: u16::from_int(*factor_bp)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{call, read_back, refuses};
    use crate::throttle_command::ThrottleCommand;

    #[test]
    fn takes_exactly_a_quota() {
        use ArgError::*;
        refuses::<PeekArgs>(&[
            ("8", Arity(Command::Peek)),
            ("8 9 TOKENS 0", Arity(Command::Peek)),
            ("8 x", Rate),
        ]);
        assert_eq!(SPEC.syntax(), "key capacity rate");
        let reply = PeekReply {
            remaining: 3,
            reset_ms: 700,
            paused_ms: 1000,
            factor_bp: 7000,
        };
        let args: PeekArgs = call("8 9");
        let outcome = Decision::read_only(reply);
        assert_eq!(args.reply(&outcome).as_slice(), [1, 3, 0, 700, 1000, 7000]);
        assert_eq!(read_back(&args, &outcome), Some(reply));
        assert_eq!(args.decode(&[1, 3, 0, 700]), None);
        assert_eq!(args.decode(&[0, 3, 0, 700, 0, 10_000]), None);
    }
}
