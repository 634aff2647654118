//! The arithmetic behind `THROTTLE.TAKE`: a token bucket kept as one instant.
//!
//! Nothing here reads a clock, touches Redis or allocates per call: the caller passes the
//! current time in, together with the stored state, and gets back what to reply and what (if
//! anything) to write. That keeps every rule testable as a table of explicit instants.
//!
//! The model is GCRA ("generic cell rate algorithm"): the state is the instant at which the
//! bucket will be full again (the theoretical arrival time, `tat`). Taking `n` tokens moves it
//! `n * interval` later, where `interval` is the time one token takes to refill. A missing key
//! is a full bucket, so idle buckets cost no memory.

mod args;
mod gcra;
mod limits;
mod rate;
mod state;

pub use args::{ArgError, TakeArgs};
pub use gcra::{take, Outcome, Write};
pub use limits::{MAX_CAPACITY, MAX_FILL_NS, MAX_NOW_NS, MAX_RATE, MAX_WAIT_MS, MIN_RATE};
pub use rate::Rate;
pub use state::{parse_state, StateError};

/// Nanoseconds per millisecond, the unit of every duration in a reply.
pub const NS_PER_MS: i64 = 1_000_000;
/// Nanoseconds per second, the unit `rate` is expressed in.
pub const NS_PER_S: i64 = 1_000_000_000;
