//! The commands that decide only a reply, a write and an announcement (all but THROTTLE.TAKE,
//! MTAKE and RELEASE): each says its name, its words and its arithmetic ([`Decides`]),
//! its reply type says its integers ([`WireReply`]), and the rest of [`ThrottleCommand`]
//! follows, written once here.

use crate::channel::Message;
use crate::command::Command;
use crate::error::ArgError;
use crate::gcra::Write;
use crate::reply::WireReply;
use crate::state::State;
use crate::throttle_command::{one_key, Effects, ThrottleCommand};
use crate::words::Word;

/// What a one-key command decided: its reply (the values the server sends), the state to
/// store, and what to announce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision<R> {
    /// The reply.
    pub reply: R,
    /// The state to store at the key, or `None`: nothing changes.
    pub write: Option<Write>,
    /// What to tell the fleet, or `None`.
    pub announce: Option<Message>,
}

impl<R> Decision<R> {
    /// `reply`, with nothing written or announced: what a read-only command decides.
    pub(crate) fn read_only(reply: R) -> Decision<R> {
        Decision::writing(reply, None)
    }

    /// `reply`, writing `write` (if any) and announcing nothing.
    pub(crate) fn writing(reply: R, write: Option<Write>) -> Decision<R> {
        Decision {
            reply,
            write,
            announce: None,
        }
    }
}

impl<R> Effects for Decision<R> {
    #[inline]
    fn write(&self, key: usize) -> Option<&Write> {
        self.write.as_ref().filter(|_| key == 0)
    }

    #[inline]
    fn announce(&self) -> Option<Message> {
        self.announce
    }
}

/// A one-key command that decides a [`Decision`]: its [`ThrottleCommand`] follows.
pub trait Decides: Sized {
    /// Its name.
    const COMMAND: Command;
    /// It only reads its key (see [`ThrottleCommand::READ_ONLY`]).
    const READ_ONLY: bool = false;
    /// Its reply.
    type Reply: WireReply;

    /// Validates the words after the key.
    fn parse(words: &[&[u8]]) -> Result<Self, ArgError>;

    /// The words after the key, as [`parse`](Decides::parse) reads them back.
    fn words(&self) -> Vec<Word<'_>>;

    /// The arithmetic on the key's stored state (`None`: missing, a full bucket) at the server
    /// time `now_ns`; an `Err` is the call's error reply.
    fn decide(
        &self,
        stored: Option<&State>,
        now_ns: i64,
    ) -> Result<Decision<Self::Reply>, ArgError>;
}

impl<C: Decides> ThrottleCommand for C {
    const COMMAND: Command = <C as Decides>::COMMAND;
    const READ_ONLY: bool = <C as Decides>::READ_ONLY;
    const INTEGER_REPLY: bool = <C as Decides>::Reply::INTEGER;
    const REPLY_SHAPE: &'static str = <C as Decides>::Reply::SHAPE;
    type Outcome = Decision<<C as Decides>::Reply>;
    type Ints = <<C as Decides>::Reply as WireReply>::Ints;
    type Reply = <C as Decides>::Reply;

    #[inline]
    fn parse(words: &[&[u8]]) -> Result<C, ArgError> {
        <C as Decides>::parse(words)
    }

    #[inline]
    fn words(&self) -> Vec<Word<'_>> {
        Decides::words(self)
    }

    #[inline]
    fn apply(&self, stored: &[Option<State>], now_ns: i64) -> Result<Self::Outcome, ArgError> {
        self.decide(one_key(stored), now_ns)
    }

    #[inline]
    fn reply(&self, outcome: &Self::Outcome) -> Self::Ints {
        outcome.reply.ints()
    }

    #[inline]
    fn decode(&self, ints: &[i64]) -> Option<Self::Reply> {
        <C as Decides>::Reply::read(ints)
    }
}
