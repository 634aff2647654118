//! What the tables of explicit instants share: the server's time they start at, the call on one
//! stored bucket as the module runs it, and a call's words written as text.

use throttle_bucket::{State, ThrottleCommand, NS_PER_MS};

/// 2025-12-01T00:00:00Z.
pub const T0: i64 = 1_764_547_200_000_000_000;
pub const MS: i64 = NS_PER_MS;

/// The call on one bucket whose stored state is `stored`, at `now`, as the module runs it.
pub fn on<C: ThrottleCommand>(call: &C, stored: Option<&State>, now: i64) -> C::Outcome {
    call.apply(&[stored.cloned()], now).unwrap()
}

/// The words of `text`, split at white space.
pub fn words(text: &str) -> Vec<&[u8]> {
    text.split_whitespace().map(str::as_bytes).collect()
}
