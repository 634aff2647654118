//! `THROTTLE.CUT key capacity rate ms factor recovery_ms`: the supplier is congested (a 429 or
//! a 503, with or without Retry-After), so the whole fleet pauses and slows down together, and
//! speeds up again as time passes without another cut. Its arguments, arithmetic, reply and
//! docs.

use crate::command::Command;
use crate::decision::{Decides, Decision};
use crate::error::ArgError;
use crate::gcra::{ceil_ms_wide, View};
use crate::limits::{MAX_WAIT_MS, MIN_FACTOR_BP};
use crate::pause::paused;
use crate::reply::{ms_up, wire_reply};
use crate::spec::{Arg, Kind, Spec, CAPACITY, KEY, RATE};
use crate::state::{self, State, FULL_FACTOR_BP};
use crate::words::{parse_within, Word};
use crate::Quota;

/// `THROTTLE.CUT key capacity rate ms factor recovery_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutArgs {
    /// The bucket's quota: its configured rate stays the ceiling.
    pub quota: Quota,
    /// The pause that comes with the cut, in ms: the supplier's Retry-After, or the caller's
    /// own (1 s in the HTTP layers). A cut before it ends is the same episode.
    pub pause_ms: u64,
    /// What the rate is multiplied by, in basis points (0.7 is 7000).
    pub factor_bp: u16,
    /// How long the rate takes to climb back to the configured one, in ms.
    pub recovery_ms: u64,
}

/// `0.7`, `1`, `0.05`: a decimal from 0.01 to 1, with at most 4 digits after the point that
/// count (later ones are dropped: a smaller factor, a stricter cut). In basis points.
fn parse_factor(text: &[u8]) -> Option<u16> {
    let (whole, fraction) = match text.iter().position(|&b| b == b'.') {
        Some(point) => (text.get(..point)?, text.get(point + 1..)?),
        None => (text, &[][..]),
    };
    if (whole.is_empty() && fraction.is_empty())
        || !whole.iter().chain(fraction).all(u8::is_ascii_digit)
    {
        return None;
    }
    let whole_zero = whole.iter().all(|&d| d == b'0');
    let whole_one = whole.last() == Some(&b'1')
        && whole
            .iter()
            .take(whole.len().saturating_sub(1))
            .all(|&d| d == b'0');
    let mut bp = 0u16;
    for i in 0..4 {
        let digit = fraction.get(i).map_or(0, |d| u16::from(d - b'0'));
        bp = bp * 10 + digit;
    }
    let value = if whole_zero {
        bp
    } else if whole_one && fraction.iter().all(|&d| d == b'0') {
        FULL_FACTOR_BP
    } else {
        return None;
    };
    (MIN_FACTOR_BP..=FULL_FACTOR_BP)
        .contains(&value)
        .then_some(value)
}

/// THROTTLE.CUT's reply, the same from the module and the Lua twin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutReply {
    /// This call cut the rate (0: the same episode as a pause still on).
    pub cut: bool,
    /// Ms until the next token, rounded up.
    pub next_ms: u64,
    /// The rate's factor now, in basis points (10 000: the configured rate).
    pub factor_bp: u16,
    /// Ms until the rate is the configured one again, rounded up (0: not cut).
    pub recovered_ms: u64,
}

/// THROTTLE.CUT as the server registers and documents it.
pub(crate) static SPEC: Spec = Spec::writes(
    Command::Cut,
    "The supplier is congested: pauses the bucket for ms and multiplies its rate by \
        factor (once per episode: a cut during a pause changes only the pause), never below 1% \
        of the configured rate; the rate climbs back linearly over recovery_ms. Replies [cut, \
        next_ms, factor_bp, recovered_ms].",
    &[
        KEY,
        CAPACITY,
        RATE,
        Arg::new("ms", Kind::Integer),
        Arg::new("factor", Kind::Double),
        Arg::new("recovery_ms", Kind::Integer),
    ],
);

impl Decides for CutArgs {
    const COMMAND: Command = Command::Cut;
    type Reply = CutReply;

    /// Validates the words after the key: `capacity rate ms factor recovery_ms`.
    fn parse(args: &[&[u8]]) -> Result<CutArgs, ArgError> {
        let (quota, [ms, factor, recovery]) = Quota::split(args, Command::Cut)?;
        let pause_ms = parse_within(ms, 1..=MAX_WAIT_MS, ArgError::PauseMs)?;
        let factor_bp = parse_factor(factor).ok_or(ArgError::Factor)?;
        let recovery_ms = parse_within(recovery, 1..=MAX_WAIT_MS, ArgError::Recovery)?;
        Ok(CutArgs {
            quota,
            pause_ms,
            factor_bp,
            recovery_ms,
        })
    }

    /// The words after the key.
    fn words(&self) -> Vec<Word<'_>> {
        self.quota.with([
            Word::Number(self.pause_ms),
            Word::BasisPoints(self.factor_bp),
            Word::Number(self.recovery_ms),
        ])
    }

    /// Cuts the bucket's rate and pauses it, once per congestion episode.
    ///
    /// A cut while the bucket is paused (by a cut or a pause whose time has not run out) is the
    /// same episode: many replicas see 429s from one overload, and the rate is cut once, not once
    /// each; the call still pauses (as THROTTLE.PAUSE: never shorter). Otherwise the rate's factor
    /// now (a cut recovering climbs back linearly) is multiplied by `factor`, never below 1 % of
    /// the configured rate, and it climbs back to the configured rate over `recovery_ms`, or over
    /// what is left of an earlier cut's recovery if that is longer (a later cut never loosens an
    /// earlier one). The configured rate stays the ceiling: a cut only ever makes tokens cost more.
    fn decide(&self, stored: Option<&State>, now_ns: i64) -> Result<Decision<CutReply>, ArgError> {
        let bucket = View::at(&self.quota, stored, now_ns);
        let stored_cut = bucket.pushback.and_then(|p| p.cut);
        let same_episode = bucket.paused_for() > 0;
        let cut = if same_episode {
            stored_cut
        } else {
            let factor =
                u32::from(bucket.factor) * u32::from(self.factor_bp) / u32::from(FULL_FACTOR_BP);
            let factor_bp = u16::try_from(factor)
                .unwrap_or(FULL_FACTOR_BP)
                .max(MIN_FACTOR_BP);
            // A later cut never loosens an earlier one: its factor is the lower (it multiplies
            // the factor now), and it recovers no sooner than the earlier one would have.
            let earlier =
                stored_cut.map_or(0, |c| ceil_ms_wide((c.recovered_at() - bucket.now).max(0)));
            let recovery_ms = u64::try_from(earlier)
                .unwrap_or(0)
                .max(self.recovery_ms)
                .min(MAX_WAIT_MS);
            i64::try_from(bucket.now).ok().map(|at| state::RateCut {
                at,
                factor_bp,
                recovery_ms,
            })
        };
        let paused = paused(&bucket, cut, self.pause_ms);
        let effective = if paused.write.is_some() {
            cut
        } else {
            stored_cut
        };
        let recovered_ms = effective.map_or(0, |c| ms_up(c.recovered_at() - bucket.now));
        Ok(Decision {
            reply: CutReply {
                cut: !same_episode && paused.write.is_some(),
                next_ms: paused.reply,
                factor_bp: effective.map_or(FULL_FACTOR_BP, |c| c.factor_at(bucket.now)),
                recovered_ms,
            },
            write: paused.write,
            announce: paused.announce,
        })
    }
}

wire_reply!(
    CutReply {
        cut,
        next_ms,
        factor_bp,
        recovered_ms
    },
    "an array of four integers"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{call, read_back, refuses, words, written};
    use crate::throttle_command::ThrottleCommand;

    #[test]
    fn factors_are_decimals_from_a_hundredth_to_one() {
        for (text, bp) in [
            ("0.7", Some(7000)),
            (".7", Some(7000)),
            ("0.70", Some(7000)),
            ("0.01", Some(100)),
            ("0.0099", None),
            ("0.12345", Some(1234)),
            ("1", Some(10_000)),
            ("1.0", Some(10_000)),
            ("01", Some(10_000)),
            ("0001.0000", Some(10_000)),
            ("1.0001", None),
            ("0", None),
            ("0.", None),
            ("2", None),
            ("10", None),
            ("", None),
            (".", None),
            ("-0.5", None),
            ("0.5e1", None),
            ("1.2.3", None),
        ] {
            assert_eq!(parse_factor(text.as_bytes()), bp, "{text:?}");
        }
    }

    #[test]
    fn arguments() {
        use ArgError::*;
        let args: CutArgs = call("10 10 1000 0.7 30000");
        assert_eq!(
            (args.pause_ms, args.factor_bp, args.recovery_ms),
            (1000, 7000, 30_000)
        );
        refuses::<CutArgs>(&[
            ("10 10 1000 0.7", Arity(Command::Cut)),
            ("10 10 1000 0.7 1 1", Arity(Command::Cut)),
            ("0 10 1000 0.7 1", Capacity),
            ("10 10 0 0.7 1", PauseMs),
            ("10 10 1000 0 1", Factor),
            ("10 10 1000 1.5 1", Factor),
            ("10 10 1000 0.7 0", Recovery),
            ("10 10 1000 0.7 315360000001", Recovery),
        ]);
        for text in ["10 10 1000 0.7 30000", "10 10 1 1 1", "10 10 5 0.0101 7"] {
            let args: CutArgs = call(text);
            let written = written(&args).join(" ");
            assert_eq!(
                <CutArgs as Decides>::parse(&words(&written)),
                Ok(args),
                "{text} -> {written}"
            );
        }
        assert_eq!(SPEC.syntax(), "key capacity rate ms factor recovery_ms");
    }

    #[test]
    fn replies_read_back() {
        let reply = CutReply {
            cut: true,
            next_ms: 1000,
            factor_bp: 7000,
            recovered_ms: 30_000,
        };
        let args: CutArgs = call("10 10 1000 0.7 30000");
        assert_eq!(args.decode(&[1, 1000, 7000, 30_000]), Some(reply));
        assert_eq!(args.decode(&[1, 0, 10_001, 0]), None);
        assert_eq!(args.decode(&[2, 0, 0, 0]), None);
        // What the server sends reads back as what the arithmetic decided.
        let outcome = args.apply(&[None], 1_764_547_200_000_000_000).unwrap();
        assert_eq!(read_back(&args, &outcome), Some(outcome.reply));
    }
}
