//! `THROTTLE.GIVE key capacity rate n ticket`: give back tokens a take did not use. Its
//! arguments, arithmetic, reply and docs.

use crate::command::Command;
use crate::decision::{Decides, Decision};
use crate::error::ArgError;
use crate::gcra::View;
use crate::limits::MAX_TICKET_US;
use crate::spec::{Arg, Kind, Spec, CAPACITY, KEY, RATE};
use crate::state::State;
use crate::words::{parse_within, Word};
use crate::Quota;

/// `THROTTLE.GIVE key capacity rate n ticket`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GiveArgs {
    /// The bucket's quota.
    pub quota: Quota,
    /// Tokens the take took and the caller did not use.
    pub tokens: u64,
    /// The take's ticket: the state right after it, µs since the Unix epoch, rounded down.
    pub ticket_us: u64,
}

/// THROTTLE.GIVE as the server registers and documents it.
pub(crate) static SPEC: Spec = Spec::writes(
    Command::Give,
    "Gives back the tokens of a take made with TICKET while nothing was taken after \
        it, never beyond a full bucket. Replies the tokens given back.",
    &[
        KEY,
        CAPACITY,
        RATE,
        Arg::new("n", Kind::Integer),
        Arg::new("ticket", Kind::Integer),
    ],
);

impl Decides for GiveArgs {
    const COMMAND: Command = Command::Give;
    /// The tokens given back.
    type Reply = u64;

    /// Validates the words after the key: `capacity rate n ticket`.
    fn parse(args: &[&[u8]]) -> Result<GiveArgs, ArgError> {
        let (quota, [n, ticket]) = Quota::split(args, Command::Give)?;
        let capacity = quota.capacity;
        let tokens = parse_within(n, 0..=capacity, ArgError::GiveTokens { capacity })?;
        let ticket_us = parse_within(ticket, 0..=MAX_TICKET_US, ArgError::Ticket)?;
        Ok(GiveArgs {
            quota,
            tokens,
            ticket_us,
        })
    }

    /// The words after the key.
    fn words(&self) -> Vec<Word<'_>> {
        self.quota
            .with([Word::Number(self.tokens), Word::Number(self.ticket_us)])
    }

    /// Returns `n` tokens of the take whose ticket this is, if nothing was taken after it, never
    /// beyond a full bucket and never into a pause; nothing if the state has moved past the
    /// ticket.
    ///
    /// The state is the end of the last take's slot. While it still is this take's, giving back
    /// frees this take's own slot (the last `n` tokens of it: `n` may be fewer than it took), and
    /// every other reservation keeps its time. Once a later call took tokens, the last slot is
    /// that call's: moving the state back would free a slot someone still uses, and a third call
    /// would be given it too (module/bucket/tests/properties.rs finds such cases for the rule of
    /// x/time/rate's `Cancel`, "n less what was taken after", in a bucket kept as one instant). So
    /// a waiter with others queued behind it gives back nothing, as with x/time/rate; the others,
    /// and a call that failed right after its take, give back everything.
    ///
    /// The ticket is the state rounded down to the µs: up to 999 ns before it. With an interval
    /// longer than that, a later take moves the state by more, so "nothing after" is exact; with a
    /// shorter one the state must sit exactly on the ticket. A state before the ticket means the
    /// bucket was reset since (deleted, or this ticket given back already): nothing to give. A
    /// ticket is good for one give-back (the client's grant is consumed by it).
    ///
    /// The reply is the tokens given back (0 to `n`). A give-back that leaves the bucket full (and
    /// neither paused nor cut) deletes the key: [`Write::Delete`](crate::Write::Delete).
    fn decide(&self, stored: Option<&State>, now_ns: i64) -> Result<Decision<u64>, ArgError> {
        const NOTHING: Decision<u64> = Decision {
            reply: 0,
            write: None,
            announce: None,
        };
        let Some(stored_tat) = stored.map(|s| s.tat) else {
            return Ok(NOTHING);
        };
        let bucket = View::at(&self.quota, stored, now_ns);
        let since_ticket = i128::from(stored_tat) - i128::from(self.ticket_us) * 1000;
        let rounding = if bucket.interval > 999 { 999 } else { 0 };
        if !(0..=rounding).contains(&since_ticket) {
            return Ok(NOTHING);
        }
        // At the configured rate, the least the take can have cost: a cut since the take (with no
        // take after it) makes tokens cost more now, and giving that much back would free part of
        // the slot before this take's. Never beyond a full bucket (`now`), and never into a pause
        // set since the take: a give-back must not hand out tokens the pause holds back.
        let tat = (bucket.base - bucket.full_cost(self.tokens))
            .max(bucket.now)
            .max(bucket.pause_floor());
        if tat >= bucket.base {
            return Ok(NOTHING);
        }
        // What was freed, in tokens rounded up (the last one may be part of a token's time).
        let freed = bucket.base - tat;
        let given = (freed / bucket.interval + i128::from(freed % bucket.interval > 0))
            .min(i128::from(self.tokens));
        Ok(match (u64::try_from(given), bucket.write(tat)) {
            (Ok(given), Some(write)) => Decision::writing(given, Some(write)),
            _ => NOTHING,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{parse, refuses, written};

    #[test]
    fn arguments() {
        use ArgError::*;
        let args = parse::<GiveArgs>("8 9 3 1764547200000123").unwrap();
        assert_eq!((args.tokens, args.ticket_us), (3, 1_764_547_200_000_123));
        assert_eq!(
            parse::<GiveArgs>("8 9 0 9223372036854775").map(|a| a.ticket_us),
            Ok(MAX_TICKET_US)
        );
        refuses::<GiveArgs>(&[
            ("8 9 3", Arity(Command::Give)),
            ("8 9 9 1", GiveTokens { capacity: 8 }),
            ("8 9 x 1", GiveTokens { capacity: 8 }),
            ("8 9 1 -1", Ticket),
            ("8 9 1 9223372036854776", Ticket),
            ("8 9 1 1.5", Ticket),
        ]);
        assert_eq!(written(&args), ["8", "9", "3", "1764547200000123"]);
        assert_eq!(SPEC.syntax(), "key capacity rate n ticket");
    }
}
