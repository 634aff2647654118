//! What the command files' unit tests share: a call written as text, parsed, run on a stored
//! state, and read back.

use std::fmt::Debug;

use crate::error::ArgError;
use crate::state::State;
use crate::throttle_command::{Effects, ThrottleCommand};
use crate::words::Word;

/// 2026-12-01T00:00:00Z: the tests' server time, in ns.
pub(crate) const NOW: i64 = 1_796_083_200 * 1_000_000_000;
/// A ms, in ns.
pub(crate) const MS: i64 = 1_000_000;

/// The words of `text`, split at white space.
pub(crate) fn words(text: &str) -> Vec<&[u8]> {
    text.split_whitespace().map(str::as_bytes).collect()
}

/// `text` (the words after the key) parsed as a `C`.
pub(crate) fn parse<C: ThrottleCommand>(text: &str) -> Result<C, ArgError> {
    C::parse(&words(text))
}

/// `text` parsed as a `C` that must parse.
pub(crate) fn call<C: ThrottleCommand>(text: &str) -> C {
    parse(text).unwrap()
}

/// Each `(text, error)`: `text` is refused with `error`.
pub(crate) fn refuses<C: ThrottleCommand + Debug>(cases: &[(&str, ArgError)]) {
    for (text, expected) in cases {
        let parsed = parse::<C>(text);
        assert_eq!(parsed.as_ref().err(), Some(expected), "{text}: {parsed:?}");
    }
}

/// The words `args` writes, as text.
pub(crate) fn written<C: ThrottleCommand>(args: &C) -> Vec<String> {
    args.words().into_iter().map(Word::to_text).collect()
}

/// What the server sends for `outcome`, read back as the client reads it.
pub(crate) fn read_back<C: ThrottleCommand>(args: &C, outcome: &C::Outcome) -> Option<C::Reply> {
    args.decode(args.reply(outcome).as_ref())
}

/// `text` run on `stored` at `now`: the reply's integers, the state after it (what was written,
/// or `stored` where nothing was), and whether it wrote.
pub(crate) fn run<C: ThrottleCommand>(
    text: &str,
    stored: Option<State>,
    now: i64,
) -> (Vec<i64>, Option<State>, bool) {
    let args: C = call(text);
    let outcome = args.apply(std::slice::from_ref(&stored), now).unwrap();
    let ints = args.reply(&outcome).as_ref().to_vec();
    match outcome.write(0) {
        Some(write) => (ints, write.stored(), true),
        None => (ints, stored, false),
    }
}

/// [`run`], its reply read back as the client reads it.
pub(crate) fn run_read<C: ThrottleCommand>(
    text: &str,
    stored: Option<State>,
    now: i64,
) -> (C::Reply, Option<State>, bool) {
    let (ints, after, wrote) = run::<C>(text, stored, now);
    (call::<C>(text).decode(&ints).unwrap(), after, wrote)
}
