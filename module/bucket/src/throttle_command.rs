//! The one shape every THROTTLE command has, whatever it computes: its spec, its arguments
//! (read from the words after the key, and written back), its arithmetic on the stored
//! state(s), what comes out of it to write and announce ([`Effects`]), and its reply (the
//! integers sent, and read back from them). Most commands decide just a reply, a write and an
//! announcement: they implement the narrower [`Decides`](crate::Decides), and this follows.
//! The command is its arguments (mini-redis's `Get`): each args type
//! ([`TakeArgs`](crate::TakeArgs), [`PauseArgs`](crate::PauseArgs), ...) implements it in its
//! own file, and the module's handler, the test suite's fake server and the client's calls are
//! each written once over it.
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

/// One THROTTLE command, as the module runs it and a client reads its reply: implemented by the
/// call's arguments.
///
/// A call goes: [`parse`](ThrottleCommand::parse) the words, read the stored state of each of
/// its [`keys`](ThrottleCommand::keys), [`apply`](ThrottleCommand::apply) the arithmetic at the
/// server's time, carry out the outcome's [`write`](Effects::write)s (each replicated as the
/// resulting state), [`announce`](Effects::announce) a pause or a slot, and send the
/// [`reply`](ThrottleCommand::reply); the client [`decode`](ThrottleCommand::decode)s it with
/// the same arguments, so that a reply whose shape depends on the call's options (TICKET,
/// INFLIGHT) reads as the call made.
pub trait ThrottleCommand: Sized {
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

    /// What the arithmetic decided: the reply's values, the write(s), what to announce; a
    /// [`Decision`](crate::Decision) but for THROTTLE.TAKE, MTAKE and RELEASE, which decide
    /// more.
    type Outcome: Effects;
    /// The reply's integers, inline (the module builds one per call, allocating nothing).
    type Ints: AsRef<[i64]>;
    /// The reply read back from its integers.
    type Reply;

    /// How the server registers and documents it: its command's spec.
    #[inline]
    fn spec() -> &'static Spec {
        Self::COMMAND.spec()
    }

    /// Validates the words after the key (THROTTLE.MTAKE: after the command name, its numkeys
    /// and keys included, since it checks them).
    fn parse(words: &[&[u8]]) -> Result<Self, ArgError>;

    /// The words after the key(s), as [`parse`](ThrottleCommand::parse) reads them back (for
    /// THROTTLE.MTAKE, its numkeys and keys go before them).
    fn words(&self) -> Vec<Word<'_>>;

    /// How many keys the call names: 1, or THROTTLE.MTAKE's numkeys. A command with one key has
    /// it first, its words after; one with several has numkeys first, then the keys.
    fn keys(&self) -> usize {
        1
    }

    /// The arithmetic: the call on the buckets whose stored states are `stored` (one per key,
    /// in key order; `None` for a missing key, a full bucket) at the server time `now_ns`. Pure:
    /// what to write and announce is in the outcome. An `Err` is the call's error reply
    /// (THROTTLE.DEBIT past its debt limit).
    fn apply(&self, stored: &[Option<State>], now_ns: i64) -> Result<Self::Outcome, ArgError>;

    /// The integers the server sends for this call, which decided `outcome`.
    fn reply(&self, outcome: &Self::Outcome) -> Self::Ints;

    /// Reads the reply to this call back from its integers (one, for an integer reply); `None`
    /// for any other shape than this call's.
    fn decode(&self, ints: &[i64]) -> Option<Self::Reply>;
}

/// What a call's outcome changes beside its reply: the module carries it out, and so does the
/// test suite's fake server.
pub trait Effects {
    /// The state to write at the call's key number `key` (0 for the first, and only, key of a
    /// one-key command), or `None`: nothing changes there, so nothing is written or replicated.
    fn write(&self, key: usize) -> Option<&Write>;

    /// What to announce on the (first) key's pause channel: a pause this call made last longer
    /// (THROTTLE.PAUSE, CUT and SYNC), a slot it freed or handed on (THROTTLE.RELEASE, and a
    /// take whose line handed one on).
    fn announce(&self) -> Option<Message> {
        None
    }
}

/// A one-key command's stored state: the first of `stored` (a missing one reads as a missing
/// key, a full bucket).
#[inline]
pub(crate) fn one_key(stored: &[Option<State>]) -> Option<&State> {
    stored.first().and_then(Option::as_ref)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Access, Keys};
    use crate::testing::call;
    use crate::{
        CutArgs, DebitArgs, GiveArgs, MTakeArgs, PauseArgs, PeekArgs, QuotaArgs, ReleaseArgs,
        RenewArgs, ResumeArgs, SlotsArgs, SyncArgs, TakeArgs,
    };

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
        agrees_with_its_spec::<TakeArgs>();
        agrees_with_its_spec::<MTakeArgs>();
        agrees_with_its_spec::<PauseArgs>();
        agrees_with_its_spec::<GiveArgs>();
        agrees_with_its_spec::<PeekArgs>();
        agrees_with_its_spec::<CutArgs>();
        agrees_with_its_spec::<SyncArgs>();
        agrees_with_its_spec::<DebitArgs>();
        agrees_with_its_spec::<RenewArgs>();
        agrees_with_its_spec::<ReleaseArgs>();
        agrees_with_its_spec::<SlotsArgs>();
        agrees_with_its_spec::<ResumeArgs>();
        agrees_with_its_spec::<QuotaArgs>();
    }

    #[test]
    fn integer_replies_read_back() {
        let pause: PauseArgs = call("8 9 1500");
        let give: GiveArgs = call("8 9 1 1764547200000000");
        assert_eq!(pause.decode(&[1500]), Some(1500));
        assert_eq!(give.decode(&[3]), Some(3));
        for bad in [&[][..], &[-1], &[1, 2]] {
            assert_eq!(pause.decode(bad), None, "{bad:?}");
            assert_eq!(give.decode(bad), None, "{bad:?}");
        }
    }
}
