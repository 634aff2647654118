//! What is wrong with a call. `Display` gives the error reply, which starts with `ERR`; the
//! Lua twin of the commands sends the very same text.

use std::fmt;

use crate::command::Command;
use crate::limits::{
    MAX_CAPACITY, MAX_FILL_NS, MAX_INFLIGHT, MAX_KEYS, MAX_LEASE_MS, MAX_LINE, MAX_RATE,
    MAX_SLOT_ID, MAX_WAIT_MS, MIN_RATE,
};

/// What is wrong with a call. `Display` gives the error reply, which starts with `ERR`; the Lua
/// twin of the commands sends the very same text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgError {
    /// Too few or too many words: the same text as the server's own arity check.
    Arity(Command),
    /// `capacity` is not an integer in 1..=MAX_CAPACITY.
    Capacity,
    /// `rate` is not a decimal in MIN_RATE..=MAX_RATE.
    Rate,
    /// `capacity / rate` is longer than MAX_FILL_NS.
    FillTooLong,
    /// `TOKENS` (or an MTAKE triple's tokens) is not an integer in 0..=capacity.
    Tokens {
        /// The bucket's capacity, which the error names.
        capacity: u64,
    },
    /// `MAXWAIT` is not an integer in 0..=MAX_WAIT_MS.
    MaxWait,
    /// An option the command does not have.
    UnknownOption(Command),
    /// An option name with no value after it.
    MissingValue(&'static str),
    /// The same option twice.
    Repeated(&'static str),
    /// THROTTLE.PAUSE's `ms` is not an integer in 1..=MAX_WAIT_MS.
    PauseMs,
    /// THROTTLE.GIVE's `n` is not an integer in 0..=capacity.
    GiveTokens {
        /// The bucket's capacity, which the error names.
        capacity: u64,
    },
    /// THROTTLE.GIVE's `ticket` is not an integer in 0..=MAX_TICKET_US.
    Ticket,
    /// THROTTLE.MTAKE's `numkeys` is not an integer in 1..=MAX_KEYS.
    NumKeys,
    /// THROTTLE.MTAKE's words after the keys are not one triple per key (and options).
    Triples {
        /// The call's numkeys, which the error names.
        keys: usize,
    },
    /// THROTTLE.MTAKE names a key twice.
    DuplicateKey,
    /// `FLOOR` is not an integer below the capacity that leaves room for the call's tokens.
    Floor {
        /// The bucket's capacity, which the error names.
        capacity: u64,
    },
    /// THROTTLE.MTAKE's `FLOOR` has fewer values than keys.
    Floors {
        /// The call's numkeys, which the error names.
        keys: usize,
    },
    /// THROTTLE.CUT's `factor` is not a decimal from 0.01 to 1.
    Factor,
    /// THROTTLE.CUT's `recovery_ms` is not an integer in 1..=MAX_WAIT_MS.
    Recovery,
    /// THROTTLE.SYNC's `remaining` is not an integer in 0..=MAX_CAPACITY.
    Remaining,
    /// THROTTLE.SYNC's `reset_ms` is not an integer in 0..=MAX_WAIT_MS.
    ResetMs,
    /// THROTTLE.DEBIT's `n` is not an integer in 0..=MAX_CAPACITY.
    DebitTokens,
    /// THROTTLE.DEBIT would leave the bucket deeper in debt than MAX_DEBT_NS.
    DebtTooDeep,
    /// `INFLIGHT` is not an integer in 1..=MAX_INFLIGHT.
    Inflight,
    /// `LEASE` (or THROTTLE.RENEW's `ms`) is not an integer in 1..=MAX_LEASE_MS.
    Lease,
    /// `INFLIGHT` without `LEASE`, or `LEASE` without `INFLIGHT`.
    InflightLease,
    /// THROTTLE.RENEW's or RELEASE's `slot` is not an integer in 0..=MAX_SLOT_ID.
    SlotId,
    /// `LINE` without `INFLIGHT n LEASE ms`.
    LineInflight,
    /// `WAITER` without `LINE`.
    WaiterLine,
    /// `LINE` with `FLOOR`.
    LineFloor,
    /// `LINE`'s `place_ms` is not an integer in 1..=MAX_LEASE_MS.
    PlaceMs,
    /// The line already holds MAX_LINE waiters.
    LineFull,
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::Arity(command) => write!(
                f,
                "ERR wrong number of arguments for '{}' command",
                command.name()
            ),
            ArgError::Capacity => write!(
                f,
                "ERR capacity must be a whole number of tokens from 1 to {MAX_CAPACITY}"
            ),
            ArgError::Rate => write!(
                f,
                "ERR rate must be a decimal number of tokens per second from {MIN_RATE} to \
                 {MAX_RATE}, like 10 or 0.5"
            ),
            ArgError::FillTooLong => write!(
                f,
                "ERR capacity / rate must be at most {} seconds (10 years): raise the rate or \
                 lower the capacity",
                MAX_FILL_NS / 1_000_000_000
            ),
            ArgError::Tokens { capacity } => write!(
                f,
                "ERR TOKENS must be a whole number from 0 to the capacity ({capacity})"
            ),
            ArgError::MaxWait => write!(
                f,
                "ERR MAXWAIT must be a whole number of milliseconds from 0 to {MAX_WAIT_MS} \
                 (10 years)"
            ),
            ArgError::UnknownOption(Command::MTake) => f.write_str(
                "ERR unknown option for THROTTLE.MTAKE: the options are MAXWAIT ms, FLOOR f \
                 [f ...] (one floor per key), TICKET, INFLIGHT n, LEASE ms, LINE place_ms and \
                 WAITER id",
            ),
            ArgError::UnknownOption(Command::Release) => f.write_str(
                "ERR unknown option for THROTTLE.RELEASE: the option is INFLIGHT n, the cap the \
                 slot was taken under",
            ),
            ArgError::UnknownOption(Command::Quota) => f.write_str(
                "ERR unknown option for THROTTLE.QUOTA: the option is CLEAR, which gives the key \
                 back to its callers' quotas",
            ),
            ArgError::UnknownOption(_) => f.write_str(
                "ERR unknown option for THROTTLE.TAKE: the options are TOKENS n, MAXWAIT ms, \
                 TICKET, FLOOR f, INFLIGHT n, LEASE ms, LINE place_ms and WAITER id",
            ),
            ArgError::MissingValue(name) => write!(f, "ERR {name} needs a value: {name} n"),
            ArgError::Repeated(name) => write!(f, "ERR {name} is given more than once"),
            ArgError::PauseMs => write!(
                f,
                "ERR ms must be a whole number of milliseconds from 1 to {MAX_WAIT_MS} \
                 (10 years): the supplier's Retry-After"
            ),
            ArgError::GiveTokens { capacity } => write!(
                f,
                "ERR n must be a whole number of tokens from 0 to the capacity ({capacity})"
            ),
            ArgError::Ticket => f.write_str(
                "ERR ticket must be a ticket from a THROTTLE.TAKE or MTAKE ... TICKET reply \
                 for this key (a whole number of microseconds)",
            ),
            ArgError::NumKeys => {
                write!(f, "ERR numkeys must be a whole number from 1 to {MAX_KEYS}")
            }
            ArgError::Triples { keys } => write!(
                f,
                "ERR THROTTLE.MTAKE needs capacity, rate and tokens for each of its {keys} \
                 keys, in key order, then the options (MAXWAIT ms, FLOOR f [f ...], TICKET, INFLIGHT n, \
                 LEASE ms, LINE place_ms, WAITER id)"
            ),
            ArgError::DuplicateKey => f.write_str(
                "ERR the keys of THROTTLE.MTAKE must be distinct: name each bucket once",
            ),
            ArgError::Floor { capacity } => write!(
                f,
                "ERR FLOOR must be a whole number of tokens below the capacity ({capacity}) \
                 that leaves room for the call's TOKENS"
            ),
            ArgError::Floors { keys } => write!(
                f,
                "ERR FLOOR needs one floor per key, in key order: {keys} values"
            ),
            ArgError::Factor => f.write_str(
                "ERR factor must be a decimal from 0.01 to 1, like 0.7: the rate is \
                 multiplied by it",
            ),
            ArgError::Recovery => write!(
                f,
                "ERR recovery_ms must be a whole number of milliseconds from 1 to \
                 {MAX_WAIT_MS} (10 years): how long the rate takes to climb back"
            ),
            ArgError::Remaining => write!(
                f,
                "ERR remaining must be a whole number of tokens from 0 to {MAX_CAPACITY}: \
                 what the supplier says is left"
            ),
            ArgError::ResetMs => write!(
                f,
                "ERR reset_ms must be a whole number of milliseconds from 0 to {MAX_WAIT_MS} \
                 (10 years): when the supplier's quota resets"
            ),
            ArgError::DebitTokens => write!(
                f,
                "ERR n must be a whole number of tokens from 0 to {MAX_CAPACITY}"
            ),
            ArgError::DebtTooDeep => f.write_str(
                "ERR THROTTLE.DEBIT would put the bucket more than 20 years in debt: debit \
                 fewer tokens, or DEL the key to start a full bucket",
            ),
            ArgError::Inflight => write!(
                f,
                "ERR INFLIGHT must be a whole number of calls from 1 to {MAX_INFLIGHT}: how \
                 many may be in flight at once"
            ),
            ArgError::Lease => write!(
                f,
                "ERR the lease must be a whole number of milliseconds from 1 to \
                 {MAX_LEASE_MS} (10 years): longer than a round trip plus the renewal period"
            ),
            ArgError::InflightLease => f.write_str(
                "ERR INFLIGHT and LEASE go together: INFLIGHT n LEASE ms takes a slot for a \
                 call in flight, held for ms unless renewed",
            ),
            ArgError::LineInflight => f.write_str(
                "ERR LINE needs INFLIGHT n LEASE ms: the line is for a slot under that cap",
            ),
            ArgError::WaiterLine => f.write_str(
                "ERR WAITER needs LINE place_ms: WAITER id looks again at a place in the line",
            ),
            ArgError::LineFloor => f.write_str(
                "ERR LINE does not go with FLOOR: a floored call waits for its tokens and takes \
                 again, without a place in line",
            ),
            ArgError::PlaceMs => write!(
                f,
                "ERR LINE's place_ms must be a whole number of milliseconds from 1 to \
                 {MAX_LEASE_MS} (10 years): how long a waiter keeps its place without looking \
                 again"
            ),
            ArgError::LineFull => write!(
                f,
                "ERR the line for a slot is full ({MAX_LINE} waiters): wait a lease and take \
                 again"
            ),
            ArgError::SlotId => write!(
                f,
                "ERR slot must be a slot id from a THROTTLE.TAKE ... INFLIGHT reply (a whole \
                 number from 0 to {MAX_SLOT_ID})"
            ),
        }
    }
}

impl std::error::Error for ArgError {}
