//! Limits on every number a client sends, chosen so that no arithmetic can overflow.
//!
//! Time is kept in nanoseconds in an `i64` (good until the year 2262). A state the module
//! writes is at most `now + MAX_FILL_NS + MAX_WAIT_MS * 1e6` (a take, a pause), far below
//! `i64::MAX`; the arithmetic runs in `i128` regardless, so a forged state is only debt.

/// Largest bucket, in tokens (10^15: a petabyte bucket when tokens are bytes).
pub const MAX_CAPACITY: u64 = 1_000_000_000_000_000;

/// Smallest rate, tokens per second, as text for error messages: one token every ~11.6 days.
pub const MIN_RATE: &str = "0.000001";

/// Largest rate, tokens per second, as text: one token per nanosecond, the state's resolution.
pub const MAX_RATE: &str = "1000000000";

/// Longest time a bucket may take to refill from empty (`capacity / rate`): 10 years, in ns.
pub const MAX_FILL_NS: i64 = 10 * 365 * 24 * 3600 * 1_000_000_000;

/// Longest reservation (`MAXWAIT`) and longest pause (`THROTTLE.PAUSE ... ms`), in ms: 10 years.
pub const MAX_WAIT_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// Most keys one THROTTLE.MTAKE takes from.
pub const MAX_KEYS: usize = 16;

/// Largest ticket, in µs since the Unix epoch: a state (ns, `i64`) divided by 1000.
pub const MAX_TICKET_US: u64 = i64::MAX as u64 / 1000;

/// Latest clock reading accepted, in ns since the Unix epoch (the year 2200). Keeps
/// `now + MAX_FILL_NS + MAX_WAIT` inside `i64`.
pub const MAX_NOW_NS: i64 = 7_258_118_400 * 1_000_000_000;
