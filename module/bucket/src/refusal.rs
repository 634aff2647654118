//! What held a refused take back (THROTTLE.TAKE and MTAKE): the reply's last integer on a
//! refusal, so that a client in any language can tell a wait it should sleep out (tokens, a
//! floor, a pause) from one a release may end early (a slot).
//!
//! Bits, not one code: a call can be held back by several things at once (every slot held
//! and the tokens short), and a client that waits for a released slot must know it, even
//! when the tokens' wait is the longer one the reply names.

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

/// What held a refused take back: a sum of [`Refusal::TOKENS`], [`Refusal::FLOOR`],
/// [`Refusal::SLOT`] and [`Refusal::PAUSE`]. Empty for a call that was granted.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Refusal(u64);

impl Refusal {
    /// Nothing held it back: the call was granted.
    pub const NONE: Refusal = Refusal(0);
    /// 1: the tokens will not be there within MAXWAIT (the bucket's debt, its refill, a cut's
    /// slower rate).
    pub const TOKENS: Refusal = Refusal(1);
    /// 2: the tokens are there now, but not with the call's floor behind them (never with
    /// [`Refusal::TOKENS`]).
    pub const FLOOR: Refusal = Refusal(2);
    /// 4: every slot of the cap on calls in flight is held (INFLIGHT): a release may free one
    /// before the reply's `wait_ms`, the first lease's end.
    pub const SLOT: Refusal = Refusal(4);
    /// 8: a pause is in effect on a bucket the call takes from (the supplier's Retry-After),
    /// and the tokens are held back (always with [`Refusal::TOKENS`] or [`Refusal::FLOOR`]).
    pub const PAUSE: Refusal = Refusal(8);
    /// 16: the call is in the line for a slot (LINE), with [`Refusal::SLOT`]: it is handed
    /// one in its turn, announced as `handed <id> <wait_ms>`, or finds it when it looks again.
    pub const LINE: Refusal = Refusal(16);
    /// 32: with [`Refusal::LINE`], the reply's `wait_ms` is when the line's pace says the
    /// call's turn comes (from how long the holders kept their slots), not just when to keep
    /// its place: a waiter that hears nothing can sleep it out and look once.
    pub const TURN: Refusal = Refusal(32);

    /// What held back a take's tokens (THROTTLE.TAKE's and MTAKE's): the floor (the tokens
    /// alone are there now) or the tokens, and the pause if one is in effect on a bucket the
    /// call takes from.
    pub(crate) fn of_tokens(by_floor: bool, paused: bool) -> Refusal {
        let held = if by_floor {
            Refusal::FLOOR
        } else {
            Refusal::TOKENS
        };
        if paused {
            held | Refusal::PAUSE
        } else {
            held
        }
    }

    /// The reply's integer.
    pub fn bits(self) -> u64 {
        self.0
    }

    /// The reply's integer read back. Bits this build does not know are kept (a newer server
    /// may say more); only [`Refusal::contains`] of the known ones is asked.
    pub(crate) fn from_bits(bits: u64) -> Refusal {
        Refusal(bits)
    }

    /// Nothing held the call back.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Refusal) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Refusal {
    type Output = Refusal;

    fn bitor(self, other: Refusal) -> Refusal {
        Refusal(self.0 | other.0)
    }
}

impl BitOrAssign for Refusal {
    fn bitor_assign(&mut self, other: Refusal) {
        self.0 |= other.0;
    }
}

impl fmt::Debug for Refusal {
    /// `Refusal(tokens | pause)`, `Refusal(none)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Refusal::TOKENS, "tokens"),
            (Refusal::FLOOR, "floor"),
            (Refusal::SLOT, "slot"),
            (Refusal::PAUSE, "pause"),
        ];
        let mut words: Vec<String> = names
            .iter()
            .filter(|(bit, _)| self.contains(*bit))
            .map(|(_, name)| (*name).to_owned())
            .collect();
        let unknown = self.0 & !15;
        if unknown != 0 {
            words.push(format!("{unknown:#x}"));
        }
        if words.is_empty() {
            words.push("none".to_owned());
        }
        write!(f, "Refusal({})", words.join(" | "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_read_back_and_print() {
        let both = Refusal::TOKENS | Refusal::PAUSE;
        assert_eq!(both.bits(), 9);
        assert_eq!(Refusal::from_bits(9), both);
        assert!(both.contains(Refusal::PAUSE) && !both.contains(Refusal::SLOT));
        assert_eq!(format!("{both:?}"), "Refusal(tokens | pause)");
        assert_eq!(format!("{:?}", Refusal::NONE), "Refusal(none)");
        assert_eq!(
            format!("{:?}", Refusal::from_bits(20)),
            "Refusal(slot | 0x10)"
        );
        assert_eq!(
            [
                Refusal::TOKENS,
                Refusal::FLOOR,
                Refusal::SLOT,
                Refusal::PAUSE
            ]
            .map(Refusal::bits),
            [1, 2, 4, 8]
        );
    }
}
