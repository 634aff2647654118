//! The one shape every THROTTLE command has, whatever it computes: its spec, its arguments
//! (read from the words after the key, and written back), its arithmetic on the stored
//! state(s), the writes and the pause to announce that come out of it, and its reply (the
//! integers sent, and read back from them). Each command implements it in its own file, on a
//! unit type ([`commands`](crate::commands)); the module's handler, the test suite's fake
//! server and the client's decoding are each written once over it.
//!
//! [`Command`] names the commands (for the registry, the counters and the Lua twin's dispatch);
//! this trait is what they are.

use crate::channel::Message;
use crate::command::Command;
use crate::error::ArgError;
use crate::gcra::Write;
use crate::spec::Spec;
use crate::state::State;
use crate::words::Word;

/// One THROTTLE command, as the module runs it and a client reads its reply.
///
/// A call goes: [`parse`](ThrottleCommand::parse) the words, read the stored state of each of
/// its [`keys`](ThrottleCommand::keys), [`apply`](ThrottleCommand::apply) the arithmetic at the
/// server's time, carry out the [`write`](ThrottleCommand::write)s (each replicated as the
/// resulting state), [`announce`](ThrottleCommand::announce) a pause, and send the
/// [`reply`](ThrottleCommand::reply); the client [`decode`](ThrottleCommand::decode)s it.
pub trait ThrottleCommand {
    /// Its name.
    const COMMAND: Command;
    /// It only reads its key: the module reads it with GET (never the key API, which can
    /// change a value's encoding) and writes nothing. Its spec's keys say the same (checked by
    /// a test).
    const READ_ONLY: bool = false;
    /// The reply is one integer (THROTTLE.PAUSE, THROTTLE.GIVE), not an array:
    /// [`reply`](ThrottleCommand::reply) holds just that one.
    const INTEGER_REPLY: bool = false;
    /// What the reply is, for a client's error about one that is not: `an array of six
    /// integers`.
    const REPLY_SHAPE: &'static str;

    /// The call's arguments, validated.
    type Args;
    /// What the arithmetic decided: the reply's values, the write(s), the pause to announce.
    type Outcome;
    /// The reply's integers, inline (the module builds one per call, allocating nothing).
    type Ints: AsRef<[i64]>;
    /// The reply read back from its integers.
    type Reply;

    /// How the server registers and documents it.
    fn spec() -> &'static Spec;

    /// Validates the words after the key (THROTTLE.MTAKE: after the command name, its numkeys
    /// and keys included, since it checks them).
    fn parse(words: &[&[u8]]) -> Result<Self::Args, ArgError>;

    /// The words after the key(s), as [`parse`](ThrottleCommand::parse) reads them back (for
    /// THROTTLE.MTAKE, its numkeys and keys go before them).
    fn words(args: &Self::Args) -> Vec<Word<'_>>;

    /// How many keys the call names: 1, or THROTTLE.MTAKE's numkeys. A command with one key has
    /// it first, its words after; one with several has numkeys first, then the keys.
    fn keys(_args: &Self::Args) -> usize {
        1
    }

    /// The arithmetic: the call on the buckets whose stored states are `stored` (one per key,
    /// in key order; `None` for a missing key, a full bucket) at the server time `now_ns`. Pure:
    /// what to write and announce is in the outcome. An `Err` is the call's error reply
    /// (THROTTLE.DEBIT past its debt limit).
    fn apply(
        args: &Self::Args,
        stored: &[Option<State>],
        now_ns: i64,
    ) -> Result<Self::Outcome, ArgError>;

    /// The state to write at the call's key number `key` (0 for the first, and only, key of a
    /// one-key command), or `None`: nothing changes there, so nothing is written or replicated.
    fn write(outcome: &Self::Outcome, key: usize) -> Option<&Write>;

    /// What to announce on the key's pause channel: a pause this call made last longer
    /// (THROTTLE.PAUSE, CUT and SYNC), a slot it freed where callers may wait for one
    /// (THROTTLE.RELEASE ... INFLIGHT).
    fn announce(_outcome: &Self::Outcome) -> Option<Message> {
        None
    }

    /// The integers the server sends for the call `args` that decided `outcome`.
    fn reply(args: &Self::Args, outcome: &Self::Outcome) -> Self::Ints;

    /// Reads a reply back from its integers (one, for an integer reply), for a call on `keys`
    /// keys (1 for every command but THROTTLE.MTAKE); `None` for any other shape.
    fn decode(ints: &[i64], keys: usize) -> Option<Self::Reply>;
}

/// A one-key command's stored state: the first of `stored` (a missing one reads as a missing
/// key, a full bucket).
#[inline]
pub(crate) fn one_key(stored: &[Option<State>]) -> Option<&State> {
    stored.first().and_then(Option::as_ref)
}

/// An integer reply's one integer.
#[inline]
pub(crate) fn only(ints: &[i64]) -> Option<i64> {
    match ints {
        [value] => Some(*value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::{
        Cut, Debit, Give, MTake, Pause, Peek, Release, Renew, Slots, Sync, Take,
    };
    use crate::spec::{Access, Keys};

    fn agrees_with_its_spec<C: ThrottleCommand>() {
        let spec = C::spec();
        assert!(std::ptr::eq(spec, C::COMMAND.spec()), "{:?}", C::COMMAND);
        assert_eq!(spec.command, C::COMMAND);
        assert_eq!(C::READ_ONLY, spec.keys.access() == Access::ReadOnly);
        // Only a command with counted keys says how many a call has.
        let counted = matches!(spec.keys, Keys::Counted(_));
        assert_eq!(counted, C::COMMAND == Command::MTake, "{:?}", C::COMMAND);
    }

    #[test]
    fn every_command_agrees_with_its_spec() {
        agrees_with_its_spec::<Take>();
        agrees_with_its_spec::<MTake>();
        agrees_with_its_spec::<Pause>();
        agrees_with_its_spec::<Give>();
        agrees_with_its_spec::<Peek>();
        agrees_with_its_spec::<Cut>();
        agrees_with_its_spec::<Sync>();
        agrees_with_its_spec::<Debit>();
        agrees_with_its_spec::<Renew>();
        agrees_with_its_spec::<Release>();
        agrees_with_its_spec::<Slots>();
    }

    #[test]
    fn integer_replies_read_back() {
        assert_eq!(Pause::decode(&[1500], 1), Some(1500));
        assert_eq!(Give::decode(&[3], 1), Some(3));
        for bad in [&[][..], &[-1], &[1, 2]] {
            assert_eq!(Pause::decode(bad, 1), None, "{bad:?}");
            assert_eq!(Give::decode(bad, 1), None, "{bad:?}");
        }
    }
}
