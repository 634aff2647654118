//! What the tables of explicit instants share: the server's time they start at, the call on one
//! stored bucket as the module runs it, the state a call leaves, and a call's words written as
//! text; and what the random schedules on a line check after every step.

// Each test binary that includes this module uses only some of it (the tables of 2026-12-01
// keep their own instant): what one leaves unused another uses.
#![allow(dead_code)]

use proptest::prelude::*;
use throttle_bucket::{Slots, State, ThrottleCommand, Write, NS_PER_MS};

/// 2025-12-01T00:00:00Z.
pub const T0: i64 = 1_764_547_200_000_000_000;
pub const MS: i64 = NS_PER_MS;

/// The call on one bucket whose stored state is `stored`, at `now`, as the module runs it.
pub fn on<C: ThrottleCommand>(call: &C, stored: Option<&State>, now: i64) -> C::Outcome {
    call.apply(&[stored.cloned()], now).unwrap()
}

/// The bucket stored after a call that wrote `write` (`None` where it deleted the key), or
/// `before` where it wrote nothing.
pub fn after(write: &Option<Write>, before: Option<State>) -> Option<State> {
    match write {
        Some(w) => w.stored(),
        None => before,
    }
}

/// The words of `text`, split at white space.
pub fn words(text: &str) -> Vec<&[u8]> {
    text.split_whitespace().map(str::as_bytes).collect()
}

/// What a line keeps at `now`, whatever its callers did: never more than `cap` slots held, and
/// every slot held given before any waiter still in line joined (a slot handed from the line
/// has its waiter's ticket as its id).
pub fn check_line_in_order(slots: &Slots, now: i128, cap: u64) -> Result<(), TestCaseError> {
    prop_assert!(slots.held_at(now) <= cap);
    let newest_held = slots.live(now).map(|s| s.id).max();
    let oldest_waiting = slots.waiting(now).map(|w| w.id).min();
    if let (Some(held), Some(waiting)) = (newest_held, oldest_waiting) {
        prop_assert!(held < waiting, "{:?}", slots);
    }
    Ok(())
}
