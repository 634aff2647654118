//! THROTTLE.PAUSE: the supplier answered 429 with Retry-After, so the whole fleet stops.

use crate::gcra::{ceil_ms, saturate, View, Write};
use crate::{PauseArgs, NS_PER_MS};

/// What a pause decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PauseOutcome {
    /// Until the next token is there: at least the pause asked for.
    pub next_token_ns: i64,
    /// The state to store, or `None` when a longer pause or a deeper debt is already there.
    pub write: Option<Write>,
}

impl PauseOutcome {
    /// The reply: ms until the next token, rounded up.
    pub fn reply(&self) -> i64 {
        ceil_ms(self.next_token_ns)
    }
}

/// After a pause the first token is there exactly `pause_ms` from now, and refill goes on
/// from that one token, with no burst on resume: the supplier has just said it is overloaded.
/// As GCRA: `state = max(state, now + pause + (capacity - 1) * interval)`. A pause only ever
/// moves the state later, so it never shortens a longer pause or an existing debt, and the
/// reservations granted before it keep their times.
pub fn pause(args: &PauseArgs, stored: Option<i64>, now_ns: i64) -> PauseOutcome {
    let bucket = View::at(&args.quota, stored, now_ns);
    let one_short_of_full = bucket.fill - bucket.interval;
    let target = bucket.now + i128::from(args.pause_ms) * i128::from(NS_PER_MS) + one_short_of_full;
    let write = if target > bucket.base {
        Write::at(target)
    } else {
        None
    };
    let tat = write.map_or(bucket.base, |w| i128::from(w.tat_ns));
    PauseOutcome {
        next_token_ns: saturate(tat - one_short_of_full - bucket.now),
        write,
    }
}
