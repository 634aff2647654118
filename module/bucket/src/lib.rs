//! The THROTTLE commands, pure: what each one's arguments are (read from the words a client
//! sends, and written by the client), what it does to a bucket, what it replies, and how the
//! server documents it. The module, the client and the tests all use these definitions.
//!
//! Nothing here reads a clock, touches Redis or allocates per call on the server's path: the
//! caller passes the current time in, together with the stored state, and gets back what to
//! reply and what (if anything) to write. That keeps every rule testable as a table of explicit
//! instants.
//!
//! The model is GCRA ("generic cell rate algorithm"): the state is the instant at which the
//! bucket will be full again (the theoretical arrival time, `tat`). Taking `n` tokens moves it
//! `n * interval` later, where `interval` is the time one token takes to refill. A missing key
//! is a full bucket, so idle buckets cost no memory.
//!
//! A congested supplier's pushback changes the bucket for the whole fleet: a pause marks it
//! (no call may be sent before it ends, reserved ones included), a cut makes each token cost
//! more time for a while, and the supplier's own count lowers it. Both are kept with the
//! state only while they are in effect; a bucket never paused or cut runs the arithmetic
//! and stores the 8 bytes it always did.
//!
//! One file per command (`take`, `mtake`, `pause`, `give`, `peek`, `cut`, `sync`, `debit`),
//! each with its arguments, arithmetic, reply and [`Spec`], on the shared model in `gcra`, the
//! quota in `quota`, the stored state in `state`, the pause's announcement channel in
//! `channel` and the limits in `limits`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod channel;
mod command;
mod cut;
mod debit;
mod error;
mod gcra;
mod give;
mod interval;
mod limits;
mod mtake;
mod pause;
mod peek;
mod quota;
mod registry;
mod reply;
pub mod spec;
mod state;
mod sync;
mod take;
mod words;

pub use channel::pause_channel;
pub use command::Command;
pub use cut::{cut, CutArgs, CutOutcome, CutReply};
pub use debit::{debit, DebitArgs, DebitOutcome, DebitReply};
pub use error::ArgError;
pub use gcra::{ceil_ms, Write};
pub use give::{decode_give, give, GiveArgs, GiveOutcome};
pub use interval::Interval;
pub use limits::{
    EARLIEST_STATE_NS, LATEST_STATE_AHEAD_NS, MAX_CAPACITY, MAX_DEBT_NS, MAX_FILL_NS, MAX_KEYS,
    MAX_NOW_NS, MAX_RATE, MAX_TICKET_US, MAX_WAIT_MS, MIN_FACTOR_BP, MIN_RATE,
};
pub use mtake::{mtake, BucketAfter, Limit, MOutcome, MTakeArgs, MTakeReply};
pub use pause::{decode_pause, pause, PauseArgs, PauseOutcome};
pub use peek::{peek, PeekArgs, PeekOutcome, PeekReply};
pub use quota::Quota;
pub use reply::Ints;
pub use spec::Spec;
pub use state::{
    encode_state, parse_state, Cut, Encoded, Pushback, State, StateError, FULL_FACTOR_BP,
    PUSHBACK_STATE_LEN, STATE_LEN,
};
pub use sync::{sync, SyncArgs, SyncOutcome, SyncReply};
pub use take::{take, Outcome, TakeArgs, TakeReply};
pub use words::Word;

/// Nanoseconds per millisecond, the unit of every duration in a reply.
pub const NS_PER_MS: i64 = 1_000_000;
/// Nanoseconds per second, the unit `rate` is expressed in.
pub const NS_PER_S: i64 = 1_000_000_000;
