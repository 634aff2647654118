//! `THROTTLE.DEBIT key capacity rate n`: a call cost more than it took (an LLM call's completion
//! tokens, a response's bytes), so the difference is taken now, into debt, whatever the bucket
//! holds. Taking more after the fact only makes the bucket stricter. Its arguments,
//! arithmetic, reply and docs.

use crate::command::Command;
use crate::decision::{Decides, Decision};
use crate::error::ArgError;
use crate::gcra::View;
use crate::limits::{MAX_CAPACITY, MAX_DEBT_NS};
use crate::reply::{ms_up, wire_reply};
use crate::spec::{Arg, Kind, Spec, CAPACITY, KEY, RATE};
use crate::state::State;
use crate::words::{parse_within, Word};
use crate::Quota;

/// `THROTTLE.DEBIT key capacity rate n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DebitArgs {
    /// The bucket's quota.
    pub quota: Quota,
    /// Tokens to take now, whatever the bucket holds (more than its capacity is fine).
    pub tokens: u64,
}

/// THROTTLE.DEBIT's reply, the same from the module and the Lua twin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DebitReply {
    /// Whole tokens left after the call.
    pub remaining: u64,
    /// Ms until the bucket is full again, rounded up.
    pub reset_ms: u64,
}

/// THROTTLE.DEBIT as the server registers and documents it.
pub(crate) static SPEC: Spec = Spec::writes(
    Command::Debit,
    "Takes n tokens now, into debt whatever the bucket holds: a call that cost more \
        than it took settles the difference. Refused past 20 years of debt. Replies \
        [remaining, reset_ms].",
    &[KEY, CAPACITY, RATE, Arg::new("n", Kind::Integer)],
);

impl Decides for DebitArgs {
    const COMMAND: Command = Command::Debit;
    type Reply = DebitReply;

    /// Validates the words after the key: `capacity rate n`.
    fn parse(args: &[&[u8]]) -> Result<DebitArgs, ArgError> {
        let (quota, [n]) = Quota::split(args, Command::Debit)?;
        let tokens = parse_within(n, 0..=MAX_CAPACITY, ArgError::DebitTokens)?;
        Ok(DebitArgs { quota, tokens })
    }

    /// The words after the key.
    fn words(&self) -> Vec<Word<'_>> {
        self.quota.with([Word::Number(self.tokens)])
    }

    /// Takes `args.tokens` now, into debt if need be. Refused (the bucket untouched) when the debt
    /// would be deeper than any other command leaves one, [`MAX_DEBT_NS`] (20 years): past that
    /// the state would no longer read as a bucket. Writes nothing for 0 tokens.
    fn decide(
        &self,
        stored: Option<&State>,
        now_ns: i64,
    ) -> Result<Decision<DebitReply>, ArgError> {
        let bucket = View::at(&self.quota, stored, now_ns);
        let debt = bucket.debt() + bucket.cost(self.tokens);
        let write = match self.tokens {
            0 => None,
            _ if debt > i128::from(MAX_DEBT_NS) => return Err(ArgError::DebtTooDeep),
            _ => bucket.write(bucket.base + bucket.cost(self.tokens)),
        };
        let reply = DebitReply {
            remaining: bucket.remaining(debt),
            reset_ms: ms_up(debt),
        };
        Ok(Decision::writing(reply, write))
    }
}

wire_reply!(
    DebitReply {
        remaining,
        reset_ms
    },
    "an array of two integers"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{call, parse, read_back, refuses, written};
    use crate::throttle_command::ThrottleCommand;

    #[test]
    fn arguments() {
        use ArgError::*;
        assert_eq!(
            parse::<DebitArgs>("10 10 25").map(|a| a.tokens),
            Ok(25),
            "above the capacity"
        );
        refuses::<DebitArgs>(&[
            ("10 10", Arity(Command::Debit)),
            ("10 10 1 2", Arity(Command::Debit)),
            ("10 10 -1", DebitTokens),
            ("10 10 1000000000000001", DebitTokens),
            ("10 x 1", Rate),
        ]);
        let args: DebitArgs = call("10 10 25");
        assert_eq!(written(&args), ["10", "10", "25"]);
        assert_eq!(SPEC.syntax(), "key capacity rate n");
        let reply = DebitReply {
            remaining: 0,
            reset_ms: 3500,
        };
        assert_eq!(args.decode(&[0, 3500]), Some(reply));
        assert_eq!(args.decode(&[0, -1]), None);
        let outcome = args.apply(&[None], 1_764_547_200_000_000_000).unwrap();
        assert_eq!(read_back(&args, &outcome), Some(outcome.reply));
    }
}
