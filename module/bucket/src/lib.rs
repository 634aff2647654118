#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
// A stored value or a client's argument must never panic the server.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

mod channel;
mod command;
mod cut;
mod debit;
mod decision;
mod error;
mod gcra;
mod give;
mod interval;
mod limits;
mod line;
mod mtake;
mod pause;
mod peek;
mod quota;
mod quota_command;
mod refusal;
mod registry;
mod release;
mod renew;
mod reply;
mod resume;
mod slot_options;
mod slots;
mod slots_command;
pub mod spec;
mod state;
mod sync;
mod take;
#[cfg(test)]
mod testing;
mod throttle_command;
mod words;

pub use channel::{
    key_slot, pause_channel, pause_channel_patterns, Announced, Announcement, Message, SLOT_FREED,
};
pub use command::Command;
pub use cut::{CutArgs, CutReply};
pub use debit::{DebitArgs, DebitReply};
pub use decision::{Decides, Decision};
pub use error::ArgError;
pub use gcra::Write;
pub use give::GiveArgs;
pub use interval::Interval;
pub use limits::{
    LATEST_STATE_AHEAD_NS, MAX_CAPACITY, MAX_DEBT_NS, MAX_FILL_NS, MAX_INFLIGHT, MAX_KEYS,
    MAX_LEASE_MS, MAX_LINE, MAX_NOW_NS, MAX_RATE, MAX_WAIT_MS, MIN_FACTOR_BP, MIN_RATE,
};
pub use line::Handed;
pub use mtake::{BucketAfter, Limit, MOutcome, MTakeArgs, MTakeReply};
pub use pause::PauseArgs;
pub use peek::{PeekArgs, PeekReply};
pub use quota::Quota;
pub use quota_command::{QuotaArgs, QuotaReply};
pub use refusal::Refusal;
pub use release::{ReleaseArgs, SlotOutcome};
pub use renew::RenewArgs;
pub use reply::{Ints, WireReply};
pub use resume::ResumeArgs;
pub use slot_options::{Inflight, LineArgs};
pub use slots::{Slot, Slots, Waiter};
pub use slots_command::{SlotsArgs, SlotsReply};
pub use spec::Spec;
pub use state::{
    encode_state, is_state_len, parse_state, Encoded, Pushback, RateCut, State, StateError,
    FULL_FACTOR_BP, LINE_STATE_HEAD, SLOTS_STATE_HEAD, SLOT_LEN, WAITER_LEN, WRONG_TYPE,
};
pub use sync::{SyncArgs, SyncReply};
pub use take::{LineCounts, Outcome, TakeArgs, TakeReply};
pub use throttle_command::{Effects, ThrottleCommand};
pub use words::Word;

/// Nanoseconds per millisecond, the unit of every duration in a reply.
pub const NS_PER_MS: i64 = 1_000_000;
/// Nanoseconds per second, the unit `rate` is expressed in.
pub const NS_PER_S: i64 = 1_000_000_000;
