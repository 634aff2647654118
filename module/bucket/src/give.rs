//! THROTTLE.GIVE: give back tokens a take did not use.

use crate::gcra::{View, Write};
use crate::GiveArgs;

/// What a give-back decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GiveOutcome {
    /// Tokens given back (0 to `n`): the reply.
    pub given: u64,
    /// The state to store, or `None` when nothing is given back or the bucket is left full.
    pub write: Option<Write>,
    /// The give-back leaves the bucket full: delete the key (a missing key is a full bucket),
    /// rather than keep one that expires within the millisecond.
    pub delete: bool,
}

/// Returns `n` tokens of the take whose ticket this is, if nothing was taken after it, and
/// never beyond a full bucket; nothing if the state has moved past the ticket.
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
pub fn give(args: &GiveArgs, stored: Option<i64>, now_ns: i64) -> GiveOutcome {
    const NOTHING: GiveOutcome = GiveOutcome {
        given: 0,
        write: None,
        delete: false,
    };
    let Some(state) = stored else {
        return NOTHING;
    };
    let bucket = View::at(&args.quota, stored, now_ns);
    let since_ticket = i128::from(state) - i128::from(args.ticket_us) * 1000;
    let rounding = if bucket.interval > 999 { 999 } else { 0 };
    if !(0..=rounding).contains(&since_ticket) || bucket.debt() <= 0 || args.tokens == 0 {
        return NOTHING;
    }
    // Never beyond a full bucket: what fits is the debt, in tokens rounded up.
    let room = bucket.debt() / bucket.interval + i128::from(bucket.debt() % bucket.interval > 0);
    let given = i128::from(args.tokens).min(room);
    let tat = bucket.base - bucket.cost(args.tokens);
    match u64::try_from(given) {
        Ok(given) if tat <= bucket.now => GiveOutcome {
            given,
            write: None,
            delete: true,
        },
        Ok(given) => match Write::at(tat) {
            Some(write) => GiveOutcome {
                given,
                write: Some(write),
                delete: false,
            },
            None => NOTHING,
        },
        Err(_) => NOTHING,
    }
}
