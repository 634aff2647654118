//! `THROTTLE.PAUSE key capacity rate ms`: the supplier answered 429 with Retry-After, so the
//! whole fleet stops. Its arguments, arithmetic, reply and docs.

use crate::channel::{Announcement, Message};
use crate::command::Command;
use crate::decision::{Decides, Decision};
use crate::error::ArgError;
use crate::gcra::{cost, saturate, View, Write};
use crate::limits::MAX_WAIT_MS;
use crate::reply::ms_up;
use crate::spec::{Arg, Kind, Spec, CAPACITY, KEY, RATE};
use crate::state::{Pushback, RateCut, State, FULL_FACTOR_BP};
use crate::words::{parse_within, Word};
use crate::{Quota, NS_PER_MS};

/// `THROTTLE.PAUSE key capacity rate ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PauseArgs {
    /// The bucket's quota.
    pub quota: Quota,
    /// How long until the next token, at least: the supplier's Retry-After.
    pub pause_ms: u64,
}

/// The bucket paused for `pause_ms` from now, with `cut` as its cut: what THROTTLE.PAUSE,
/// THROTTLE.CUT and THROTTLE.SYNC (when nothing remains) write. The reply is the ms until the
/// next token is there (at least the pause asked for), rounded up; nothing is written when a
/// longer pause or a deeper debt is already there; the fleet is told only of a pause this call
/// made last longer.
pub(crate) fn paused(bucket: &View<'_>, cut: Option<RateCut>, pause_ms: u64) -> Decision<u64> {
    let until = bucket.now + i128::from(pause_ms) * i128::from(NS_PER_MS);
    let stored_until = bucket.pushback.map(|p| i128::from(p.paused_until));
    let cut_changed = cut != bucket.pushback.and_then(|p| p.cut);
    let target = bucket.paused_state(until, cut);
    let longer = stored_until.is_none_or(|stored| until > stored);
    let tat = bucket.base.max(target);
    let write = if tat > bucket.base || longer || cut_changed {
        let paused_until = stored_until.map_or(until, |stored| stored.max(until));
        let pushback = i64::try_from(paused_until)
            .ok()
            .map(|paused_until| Pushback { paused_until, cut });
        pushback.and_then(|pushback| bucket.write_with(tat, Some(pushback)))
    } else {
        None
    };
    let tat = write
        .as_ref()
        .and_then(Write::tat)
        .map_or(bucket.base, i128::from);
    // The next token, at the rate now (a recovering cut only gets faster, so never early).
    let factor_now = cut.map_or(FULL_FACTOR_BP, |c| c.factor_at(bucket.now));
    let one_short_of_full = bucket.fill - cost(1, bucket.interval, factor_now);
    Decision {
        reply: ms_up(tat - one_short_of_full - bucket.now),
        announce: write.as_ref().filter(|_| longer).map(|write| {
            Message::Pause(Announcement {
                pause_ns: saturate(until - bucket.now),
                ticket_us: write.ticket_us(),
                factor_bp: factor_now,
            })
        }),
        write,
    }
}

/// THROTTLE.PAUSE as the server registers and documents it.
pub(crate) static SPEC: Spec = Spec::writes(
    Command::Pause,
    "Pauses a bucket: its next token is there ms from now, then it refills from one \
        token. Never shortens a longer pause or a debt. Replies the ms until the next token.",
    &[KEY, CAPACITY, RATE, Arg::new("ms", Kind::Integer)],
);

impl Decides for PauseArgs {
    const COMMAND: Command = Command::Pause;
    /// Ms until the next token.
    type Reply = u64;

    /// Validates the words after the key: `capacity rate ms`.
    fn parse(args: &[&[u8]]) -> Result<PauseArgs, ArgError> {
        let (quota, [ms]) = Quota::split(args, Command::Pause)?;
        let pause_ms = parse_within(ms, 1..=MAX_WAIT_MS, ArgError::PauseMs)?;
        Ok(PauseArgs { quota, pause_ms })
    }

    /// The words after the key.
    fn words(&self) -> Vec<Word<'_>> {
        self.quota.with([Word::Number(self.pause_ms)])
    }

    /// After a pause the first token is there exactly `pause_ms` from now, and refill goes on
    /// from that one token, with no burst on resume: the supplier has just said it is overloaded.
    /// As GCRA: `state = max(state, now + pause + fill - cost(1))`, `cost(1)` at the rate the
    /// bucket has then. A pause only ever moves the state later, so it never shortens a longer
    /// pause or an existing debt, and the reservations granted before it keep their times; but it
    /// marks the bucket paused until `now + pause`, so that none of them is sent before then (the
    /// client checks the mark before a reserved send, or hears the announcement).
    fn decide(&self, stored: Option<&State>, now_ns: i64) -> Result<Decision<u64>, ArgError> {
        let bucket = View::at(&self.quota, stored, now_ns);
        let cut = bucket.pushback.and_then(|p| p.cut);
        Ok(paused(&bucket, cut, self.pause_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{call, parse, refuses};

    #[test]
    fn arguments() {
        use ArgError::*;
        assert_eq!(parse::<PauseArgs>("8 9 1500").map(|a| a.pause_ms), Ok(1500));
        assert_eq!(
            parse::<PauseArgs>("8 9 315360000000").map(|a| a.pause_ms),
            Ok(MAX_WAIT_MS)
        );
        refuses::<PauseArgs>(&[
            ("8 9", Arity(Command::Pause)),
            ("8 9 1 2", Arity(Command::Pause)),
            ("0 9 1", Capacity),
            ("8 9 0", PauseMs),
            ("8 9 315360000001", PauseMs),
            ("8 9 1.5", PauseMs),
        ]);
        let args: PauseArgs = call("8 9 1500");
        assert_eq!(
            Decides::words(&args),
            [Word::Number(8), Word::Text("9"), Word::Number(1500)]
        );
        assert_eq!(SPEC.syntax(), "key capacity rate ms");
    }
}
