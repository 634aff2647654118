//! `THROTTLE.PEEK key capacity rate`: the bucket as it stands, what `THROTTLE.TAKE ... TOKENS 0`
//! replies, as a read-only command.

use crate::error::{ArgError, Command};
use crate::gcra::View;
use crate::spec::{Access, Keys, Spec, CAPACITY, KEY, RATE};
use crate::take::{inspect, Outcome};
use crate::words::Word;
use crate::Quota;

/// `THROTTLE.PEEK key capacity rate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeekArgs {
    /// The bucket's quota.
    pub quota: Quota,
}

impl PeekArgs {
    /// Validates the words after the key: `capacity rate`.
    pub fn parse(args: &[&[u8]]) -> Result<PeekArgs, ArgError> {
        let [capacity, rate] = args else {
            return Err(ArgError::Arity(Command::Peek));
        };
        Ok(PeekArgs {
            quota: Quota::parse(capacity, rate)?,
        })
    }

    /// The words after the key.
    pub fn words(&self) -> Vec<Word<'_>> {
        self.quota.words().to_vec()
    }
}

/// The bucket as it stands: `[1, remaining, 0, reset_ms]` (see [`crate::TakeReply`]). Writes
/// nothing.
pub fn peek(quota: &Quota, stored: Option<i64>, now_ns: i64) -> Outcome {
    inspect(&View::at(quota, stored, now_ns))
}

/// THROTTLE.PEEK as the server registers and documents it. Read-only: allowed on a read-only
/// replica, in EVAL_RO and `no-writes` functions, during CLIENT PAUSE WRITE and when the server
/// is out of memory.
pub static SPEC: Spec = Spec {
    command: Command::Peek,
    summary: "Reads a bucket without taking or writing anything. Replies [1, remaining, 0, \
        reset_ms], as THROTTLE.TAKE ... TOKENS 0.",
    complexity: "O(1)",
    arity: 4,
    flags: "readonly fast",
    acl_categories: "read fast",
    keys: Keys::One(Access::ReadOnly),
    args: &[KEY, CAPACITY, RATE],
};

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<&[u8]> {
        text.split_whitespace().map(str::as_bytes).collect()
    }

    #[test]
    fn takes_exactly_a_quota() {
        use ArgError::*;
        assert!(PeekArgs::parse(&words("8 9")).is_ok());
        assert_eq!(PeekArgs::parse(&words("8")), Err(Arity(Command::Peek)));
        assert_eq!(
            PeekArgs::parse(&words("8 9 TOKENS 0")),
            Err(Arity(Command::Peek))
        );
        assert_eq!(PeekArgs::parse(&words("8 x")), Err(Rate));
        assert_eq!(SPEC.syntax(), "key capacity rate");
    }
}
