//! `THROTTLE.SYNC key capacity rate remaining reset_ms`: the supplier said how much of its quota
//! is left (`RateLimit`, `X-RateLimit-Remaining` and the like). The bucket is lowered to hold at
//! most that, never raised, and paused until the supplier's reset when nothing remains. Its
//! arguments, arithmetic, reply and docs.

use crate::command::Command;
use crate::decision::{Decides, Decision};
use crate::error::ArgError;
use crate::gcra::{View, Write};
use crate::limits::{MAX_CAPACITY, MAX_WAIT_MS};
use crate::pause::paused;
use crate::reply::{ms_up, wire_reply};
use crate::spec::{Arg, Kind, Spec, CAPACITY, KEY, RATE};
use crate::state::State;
use crate::words::{parse_within, Word};
use crate::Quota;

/// `THROTTLE.SYNC key capacity rate remaining reset_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncArgs {
    /// The bucket's quota.
    pub quota: Quota,
    /// What the supplier says is left of its quota (a count larger than the capacity changes
    /// nothing).
    pub remaining: u64,
    /// In how many ms the supplier's quota resets; the bucket pauses that long when nothing
    /// remains (0: no pause).
    pub reset_ms: u64,
}

/// THROTTLE.SYNC's reply, the same from the module and the Lua twin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncReply {
    /// The bucket was lowered or paused (0: it already held no more).
    pub lowered: bool,
    /// Whole tokens left after the call.
    pub remaining: u64,
    /// Ms until the bucket is full again, rounded up.
    pub reset_ms: u64,
}

/// THROTTLE.SYNC as the server registers and documents it.
pub(crate) static SPEC: Spec = Spec::writes(
    Command::Sync,
    "The supplier said how much of its quota is left: lowers the bucket to at most \
        remaining tokens (never raises it), and when nothing remains pauses it for reset_ms. \
        Writes nothing when the bucket already holds no more. Replies [lowered, remaining, \
        reset_ms].",
    &[
        KEY,
        CAPACITY,
        RATE,
        Arg::new("remaining", Kind::Integer),
        Arg::new("reset_ms", Kind::Integer),
    ],
);

impl Decides for SyncArgs {
    const COMMAND: Command = Command::Sync;
    type Reply = SyncReply;

    /// Validates the words after the key: `capacity rate remaining reset_ms`.
    fn parse(args: &[&[u8]]) -> Result<SyncArgs, ArgError> {
        let (quota, [remaining, reset]) = Quota::split(args, Command::Sync)?;
        let remaining = parse_within(remaining, 0..=MAX_CAPACITY, ArgError::Remaining)?;
        let reset_ms = parse_within(reset, 0..=MAX_WAIT_MS, ArgError::ResetMs)?;
        Ok(SyncArgs {
            quota,
            remaining,
            reset_ms,
        })
    }

    /// The words after the key.
    fn words(&self) -> Vec<Word<'_>> {
        self.quota
            .with([Word::Number(self.remaining), Word::Number(self.reset_ms)])
    }

    /// Lowers the bucket to hold at most `args.remaining` tokens now, at the rate now; with 0
    /// remaining and a reset, pauses it until then, as THROTTLE.PAUSE would. Writes nothing when
    /// the bucket already holds no more than the supplier said (and needs no pause): a response is
    /// stale the moment it arrives, so a count above the bucket's is no reason to raise it. Tells
    /// the fleet only of a pause it made last longer (lowering the bucket moves no reservation).
    fn decide(&self, stored: Option<&State>, now_ns: i64) -> Result<Decision<SyncReply>, ArgError> {
        let bucket = View::at(&self.quota, stored, now_ns);
        let mut tat = bucket.base;
        if bucket.remaining(bucket.debt()) > self.remaining {
            // The debt that leaves exactly `remaining` whole tokens: `remaining` is below what the
            // bucket holds, so below its capacity, and its cost below the fill.
            tat = tat.max(bucket.now + bucket.fill - bucket.cost(self.remaining));
        }
        let lowered = View {
            base: tat,
            ..bucket
        };
        let (write, announce) = if self.remaining == 0 && self.reset_ms > 0 {
            let cut = bucket.pushback.and_then(|p| p.cut);
            let pause = paused(&lowered, cut, self.reset_ms);
            match pause.write {
                Some(write) => (Some(write), pause.announce),
                None if tat > bucket.base => (bucket.write(tat), None),
                None => (None, None),
            }
        } else if tat > bucket.base {
            (bucket.write(tat), None)
        } else {
            (None, None)
        };
        let debt = write
            .as_ref()
            .and_then(Write::tat)
            .map_or(bucket.debt(), |tat| i128::from(tat) - bucket.now);
        Ok(Decision {
            reply: SyncReply {
                lowered: write.is_some(),
                remaining: bucket.remaining(debt),
                reset_ms: ms_up(debt),
            },
            write,
            announce,
        })
    }
}

wire_reply!(
    SyncReply {
        lowered,
        remaining,
        reset_ms
    },
    "an array of three integers"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{call, parse, read_back, refuses, written};
    use crate::throttle_command::ThrottleCommand;

    #[test]
    fn arguments() {
        use ArgError::*;
        let args: SyncArgs = call("10 10 3 5000");
        assert_eq!((args.remaining, args.reset_ms), (3, 5000));
        assert!(parse::<SyncArgs>("10 10 1000000000000000 0").is_ok());
        refuses::<SyncArgs>(&[
            ("10 10 3", Arity(Command::Sync)),
            ("10 10 -1 0", Remaining),
            ("10 10 1000000000000001 0", Remaining),
            ("10 10 3 315360000001", ResetMs),
            ("10 10 3 x", ResetMs),
        ]);
        assert_eq!(written(&args), ["10", "10", "3", "5000"]);
        assert_eq!(SPEC.syntax(), "key capacity rate remaining reset_ms");
        let reply = SyncReply {
            lowered: true,
            remaining: 3,
            reset_ms: 700,
        };
        assert_eq!(args.decode(&[1, 3, 700]), Some(reply));
        assert_eq!(args.decode(&[2, 3, 700]), None);
        assert_eq!(args.decode(&[1, 3]), None);
        // What the server sends reads back as what the arithmetic decided.
        let outcome = args.apply(&[None], 1_764_547_200_000_000_000).unwrap();
        assert_eq!(read_back(&args, &outcome), Some(outcome.reply));
    }
}
