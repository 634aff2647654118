//! `THROTTLE.RESUME key capacity rate`: an operator ends a bucket's pause and its cut early,
//! keeping its tokens and every slot held (DEL, the only lever before, refilled the bucket and
//! dropped the slot table). Its arguments, arithmetic, reply and docs.

use crate::command::Command;
use crate::decision::{Decides, Decision};
use crate::error::ArgError;
use crate::gcra::{in_effect, View};
use crate::spec::{Spec, CAPACITY, KEY, RATE};
use crate::state::State;
use crate::words::Word;
use crate::Quota;

/// `THROTTLE.RESUME key capacity rate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResumeArgs {
    /// The bucket's quota.
    pub quota: Quota,
}

/// THROTTLE.RESUME as the server registers and documents it: a write, like THROTTLE.PAUSE.
pub(crate) static SPEC: Spec = Spec::writes(
    Command::Resume,
    "Ends a bucket's pause and its cut now, keeping its state (no refill) and every \
        slot held. Replies 1 if a pause or a cut was ended, 0 if there was none (then nothing \
        is written).",
    &[KEY, CAPACITY, RATE],
);

impl Decides for ResumeArgs {
    const COMMAND: Command = Command::Resume;
    /// Whether a pause or a cut was ended.
    type Reply = bool;

    /// Validates the words after the key: `capacity rate`.
    fn parse(args: &[&[u8]]) -> Result<ResumeArgs, ArgError> {
        let (quota, []) = Quota::split(args, Command::Resume)?;
        Ok(ResumeArgs { quota })
    }

    /// The words after the key.
    fn words(&self) -> Vec<Word<'_>> {
        self.quota.words().to_vec()
    }

    /// Ends the bucket's pause and cut at `now_ns`.
    ///
    /// "Keeping the tokens" is the state instant kept as it is (never moved earlier, never
    /// refilled): a pause writes `max(state, its own floor)` and then takes add to that, so the
    /// stored state cannot tell the pause's share from the debt of real takes (a debt longer than
    /// the pause, or reservations made during it, leave the same bytes). Any earlier instant could
    /// hand out tokens that were taken. So what ends is the pushback record: the pause mark
    /// (reserved calls are no longer held back, a give-back may go below the pause's floor, the
    /// next CUT starts a new episode) and the cut (each token costs the configured rate again,
    /// so the same instant reads as fewer tokens of debt). A token a pause already pushed into the
    /// state comes when the state says, as after a pause that ran out.
    ///
    /// The slot table is carried over as every write carries it (only leases that ran out drop).
    /// The reply: whether a pause or a cut was in effect, and is ended; when there was none,
    /// nothing is written or replicated.
    fn decide(&self, stored: Option<&State>, now_ns: i64) -> Result<Decision<bool>, ArgError> {
        let bucket = View::at(&self.quota, stored, now_ns);
        let ended = bucket
            .pushback
            .and_then(|p| in_effect(p, bucket.now))
            .is_some();
        // `base` is the stored instant, or `now` for a bucket already full: the same bucket.
        let write = ended
            .then(|| bucket.write_with(bucket.base, None))
            .flatten();
        Ok(Decision::writing(write.is_some(), write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slots::{Slot, Slots};
    use crate::state::{Pushback, RateCut};
    use crate::testing::{call, refuses, run_read, MS, NOW};
    use crate::throttle_command::ThrottleCommand;
    use crate::{CutArgs, PauseArgs, PeekArgs, TakeArgs};

    fn peek(stored: &Option<State>, now: i64) -> crate::PeekReply {
        run_read::<PeekArgs>("10 10", stored.clone(), now).0
    }

    fn slots(ends: &[i64]) -> Slots {
        Slots {
            next_id: ends.len() as u64 + 1,
            held: (1..)
                .zip(ends)
                .map(|(id, &lease_end)| Slot { id, lease_end })
                .collect(),
            ..Slots::default()
        }
    }

    #[test]
    fn arguments() {
        refuses::<ResumeArgs>(&[
            ("8", ArgError::Arity(Command::Resume)),
            ("8 9 1000", ArgError::Arity(Command::Resume)),
            ("0 9", ArgError::Capacity),
            ("8 x", ArgError::Rate),
        ]);
        assert_eq!(SPEC.syntax(), "key capacity rate");
        let args: ResumeArgs = call("8 9");
        assert_eq!(Decides::words(&args), [Word::Number(8), Word::Text("9")]);
        assert_eq!(args.decode(&[1]), Some(true));
        assert_eq!(args.decode(&[0]), Some(false));
        assert_eq!(args.decode(&[2]), None);
        assert_eq!(args.decode(&[1, 0]), None);
    }

    #[test]
    fn pause_then_resume_keeps_the_state_and_ends_the_pause() {
        // 3 tokens taken, then a 5 s pause: the state the pause left is kept as it is.
        let (_, taken, _) = run_read::<TakeArgs>("10 10 TOKENS 3", None, NOW);
        let (_, paused, _) = run_read::<PauseArgs>("10 10 5000", taken, NOW);
        let at = NOW + 1000 * MS;
        assert_eq!(peek(&paused, at).paused_ms, 4000);
        let (ended, resumed, wrote) = run_read::<ResumeArgs>("10 10", paused.clone(), at);
        assert!(ended && wrote);
        let resumed = resumed.unwrap();
        let paused = paused.unwrap();
        assert_eq!(resumed.tat, paused.tat, "no refill, and never earlier");
        assert_eq!(resumed.pushback, None, "the pause mark is gone");
        let seen = peek(&Some(resumed.clone()), at);
        assert_eq!(seen.paused_ms, 0);
        assert_eq!(seen.factor_bp, 10_000);
        assert_eq!(seen.remaining, peek(&Some(paused), at).remaining);
        // A second resume has nothing to end: it writes nothing.
        let (ended, _, wrote) = run_read::<ResumeArgs>("10 10", Some(resumed), at);
        assert!(!ended && !wrote);
    }

    #[test]
    fn cut_then_resume_restores_the_rate_at_the_same_instant() {
        let (_, taken, _) = run_read::<TakeArgs>("10 10 TOKENS 5", None, NOW);
        let (_, cut, _) = run_read::<CutArgs>("10 10 1000 0.5 60000", taken, NOW);
        let cut = cut.unwrap();
        assert!(cut.pushback.and_then(|p| p.cut).is_some());
        // After the pause ran out, the cut alone is still in effect: resume ends it.
        let at = NOW + 2000 * MS;
        assert_eq!(peek(&Some(cut.clone()), at).paused_ms, 0);
        assert!(peek(&Some(cut.clone()), at).factor_bp < 10_000);
        let (ended, resumed, wrote) = run_read::<ResumeArgs>("10 10", Some(cut.clone()), at);
        assert!(ended && wrote);
        match &resumed {
            Some(state) => {
                assert_eq!(state.tat, cut.tat);
                assert_eq!(state.pushback, None);
            }
            // The instant had passed: a full bucket with nothing held is deleted.
            None => assert!(cut.tat <= at),
        }
        assert_eq!(peek(&resumed, at).factor_bp, 10_000);
    }

    #[test]
    fn slots_held_are_kept() {
        let state = State {
            tat: NOW + 3000 * MS,
            pushback: Some(Pushback {
                paused_until: NOW + 2000 * MS,
                cut: Some(RateCut {
                    at: NOW,
                    factor_bp: 7000,
                    recovery_ms: 30_000,
                }),
            }),
            // Two held, one whose lease ran out before the resume.
            slots: slots(&[NOW + 60_000 * MS, NOW + 500 * MS, NOW + 90_000 * MS]),
            kept: None,
        };
        let at = NOW + 1000 * MS;
        let (ended, after, _) = run_read::<ResumeArgs>("10 10", Some(state.clone()), at);
        assert!(ended);
        let after = after.unwrap();
        assert_eq!(after.tat, state.tat);
        assert_eq!(after.pushback, None);
        assert_eq!(after.slots.next_id, state.slots.next_id, "ids never reused");
        assert_eq!(after.slots.held_at(i128::from(at)), 2);
        assert_eq!(
            after.slots.live(i128::from(at)).collect::<Vec<_>>(),
            state.slots.live(i128::from(at)).collect::<Vec<_>>()
        );
        // Full, with slots held: still stored, for the slots.
        let full = State {
            tat: NOW - 1000 * MS,
            ..state
        };
        let (ended, after, _) = run_read::<ResumeArgs>("10 10", Some(full), at);
        assert!(ended);
        assert_eq!(after.map(|s| s.slots.held_at(i128::from(at))), Some(2));
    }

    #[test]
    fn nothing_to_end_writes_nothing() {
        let at = NOW;
        let over = State {
            tat: NOW + 100 * MS,
            // A pause that is over and a cut that has recovered, not yet rewritten.
            pushback: Some(Pushback {
                paused_until: NOW - 1,
                cut: Some(RateCut {
                    at: NOW - 10_000 * MS,
                    factor_bp: 5000,
                    recovery_ms: 5000,
                }),
            }),
            slots: slots(&[NOW + 1000 * MS]),
            kept: None,
        };
        for stored in [None, Some(State::plain(NOW + 500 * MS)), Some(over)] {
            let (ended, after, wrote) = run_read::<ResumeArgs>("10 10", stored.clone(), at);
            assert!(!ended && !wrote, "{stored:?}");
            assert_eq!(after, stored);
        }
    }

    #[test]
    fn clocks_stepped_back() {
        // Paused and cut by a clock 10 s ahead of this one: both are in effect here, and the
        // state (ahead of this clock) is kept, never moved to this clock's now.
        let ahead = NOW + 10_000 * MS;
        let (_, paused, _) = run_read::<CutArgs>("10 10 2000 0.5 5000", None, ahead);
        let paused = paused.unwrap();
        let (ended, after, _) = run_read::<ResumeArgs>("10 10", Some(paused.clone()), NOW);
        assert!(ended);
        let after = after.unwrap();
        assert_eq!(after.tat, paused.tat);
        assert_eq!(after.pushback, None);
        // A clock before 1970 or past the clamp reads as one inside it: no panic.
        for now in [i64::MIN, -1, i64::MAX] {
            let _ = run_read::<ResumeArgs>("10 10", Some(paused.clone()), now);
        }
    }
}
