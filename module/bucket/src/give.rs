//! THROTTLE.GIVE: give back tokens a take did not use.

use crate::gcra::{View, Write};
use crate::GiveArgs;

/// What a give-back decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GiveOutcome {
    /// Tokens given back (0 to `n`): the reply.
    pub given: u64,
    /// The state to store, or `None` when nothing is given back.
    pub write: Option<Write>,
}

/// Returns the `n` tokens of the take whose ticket this is, less whatever was taken after it,
/// and never beyond a full bucket. This is the rule of Go's `x/time/rate`
/// `Reservation.Cancel`: the state has moved past the ticket by what later calls took, and
/// their reservations were timed behind this one, so those tokens stay taken; every other
/// reservation stays valid.
///
/// Rounding errs toward giving back less: the ticket is the state rounded down to the µs, so
/// the tokens taken after it are counted high. A state earlier than the ticket means the
/// bucket was reset since (deleted, expired, or this ticket already given back): nothing to
/// give. A ticket is good for one give-back (the client's grant is consumed by it).
pub fn give(args: &GiveArgs, stored: Option<i64>, now_ns: i64) -> GiveOutcome {
    const NOTHING: GiveOutcome = GiveOutcome {
        given: 0,
        write: None,
    };
    let Some(state) = stored else {
        return NOTHING;
    };
    let bucket = View::at(&args.quota, stored, now_ns);
    let since_ticket = i128::from(state) - i128::from(args.ticket_us) * 1000;
    if since_ticket < 0 || bucket.debt() <= 0 {
        return NOTHING;
    }
    let taken_after = div_ceil(since_ticket, bucket.interval);
    let room = div_ceil(bucket.debt(), bucket.interval);
    let given = (i128::from(args.tokens) - taken_after).min(room);
    let Ok(given) = u64::try_from(given) else {
        return NOTHING;
    };
    if given == 0 {
        return NOTHING;
    }
    let tat = (bucket.base - bucket.cost(given)).max(bucket.now);
    match Write::at(tat) {
        Some(write) => GiveOutcome {
            given,
            write: Some(write),
        },
        None => NOTHING,
    }
}

/// `a / b` rounded up, for `a >= 0`, `b > 0`.
fn div_ceil(a: i128, b: i128) -> i128 {
    a / b + i128::from(a % b > 0)
}
