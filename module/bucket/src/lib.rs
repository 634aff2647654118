//! The arithmetic behind the THROTTLE commands: a token bucket kept as one instant.
//!
//! Nothing here reads a clock, touches Redis or allocates per call: the caller passes the
//! current time in, together with the stored state, and gets back what to reply and what (if
//! anything) to write. That keeps every rule testable as a table of explicit instants.
//!
//! The model is GCRA ("generic cell rate algorithm"): the state is the instant at which the
//! bucket will be full again (the theoretical arrival time, `tat`). Taking `n` tokens moves it
//! `n * interval` later, where `interval` is the time one token takes to refill. A missing key
//! is a full bucket, so idle buckets cost no memory.
//!
//! One file per command (`take`, `mtake`, `pause`, `give`; a peek is a take of nothing), on
//! the shared model in `gcra`; `args` validates every command's words.

#![forbid(unsafe_code)]

mod args;
mod error;
mod gcra;
mod give;
mod interval;
mod limits;
mod mtake;
mod pause;
mod state;
mod take;

pub use args::{parse_peek, GiveArgs, Limit, MTakeArgs, PauseArgs, Quota, TakeArgs};
pub use error::{ArgError, Command};
pub use gcra::{ceil_ms, Write};
pub use give::{give, GiveOutcome};
pub use interval::Interval;
pub use limits::{
    EARLIEST_STATE_NS, LATEST_STATE_AHEAD_NS, MAX_CAPACITY, MAX_FILL_NS, MAX_KEYS, MAX_NOW_NS,
    MAX_RATE, MAX_TICKET_US, MAX_WAIT_MS, MIN_RATE,
};
pub use mtake::{mtake, BucketAfter, MOutcome};
pub use pause::{pause, PauseOutcome};
pub use state::{encode_state, parse_state, StateError, STATE_LEN};
pub use take::{peek, take, Outcome};

/// Nanoseconds per millisecond, the unit of every duration in a reply.
pub const NS_PER_MS: i64 = 1_000_000;
/// Nanoseconds per second, the unit `rate` is expressed in.
pub const NS_PER_S: i64 = 1_000_000_000;
