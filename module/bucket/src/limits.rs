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
pub(crate) const MAX_TICKET_US: u64 = i64::MAX as u64 / 1000;

/// Latest clock reading accepted, in ns since the Unix epoch (the year 2200). Keeps
/// `now + MAX_FILL_NS + MAX_WAIT` inside `i64`.
pub const MAX_NOW_NS: i64 = 7_258_118_400 * 1_000_000_000;

/// The earliest state a command writes, ns since the Unix epoch: 2020-01-01T00:00:00Z, before
/// this module could exist. An earlier one is a string some other program wrote.
pub(crate) const EARLIEST_STATE_NS: i64 = 1_577_836_800 * 1_000_000_000;

/// How far after the server's clock a stored state may lie: 21 years. A command writes at most
/// 20 ahead (a full refill, [`MAX_FILL_NS`], plus the longest reservation or pause,
/// [`MAX_WAIT_MS`]); the year more is for a clock that lags the one that wrote the bucket.
pub const LATEST_STATE_AHEAD_NS: i64 = MAX_DEBT_NS + YEAR_NS;

const YEAR_NS: i64 = 365 * 24 * 3600 * 1_000_000_000;

/// The lowest a cut can take a bucket's rate: 1 % of the configured one, in basis points. A
/// fleet cut that far still calls (and learns when the supplier recovers); zero would stop it
/// for good.
pub const MIN_FACTOR_BP: u16 = 100;

/// The deepest debt any command leaves, in ns: 20 years, a full refill plus the longest
/// reservation. THROTTLE.DEBIT, which takes whatever the bucket holds, is refused past it.
pub const MAX_DEBT_NS: i64 = MAX_FILL_NS + MAX_WAIT_MS as i64 * 1_000_000;

/// Most calls in flight one bucket may hold (`THROTTLE.TAKE ... INFLIGHT n`). The slot table
/// lives in the bucket's own value, 16 bytes a slot, and every write that touches it rewrites
/// it whole: 1024 slots keep a key under 17 KB and a write under a few µs of copying. A fleet
/// that needs more calls open at once than that needs no cap on them from a rate limiter.
pub const MAX_INFLIGHT: u64 = 1024;

/// Longest lease (`LEASE ms`, `THROTTLE.RENEW ... ms`), in ms: 10 years, as the longest pause,
/// so a lease's end obeys the same rule as every instant a state holds.
pub const MAX_LEASE_MS: u64 = MAX_WAIT_MS;

/// Largest slot id: 2^53, so that the Lua twin's numbers (doubles) hold every id exactly.
/// Ids start from the server's clock in µs (about 1.8e15 in 2026), far below it.
pub(crate) const MAX_SLOT_ID: u64 = 1 << 53;

/// The most waiters a line holds (32 bytes each in the bucket's value): past it a call is
/// refused with an error, and waits its reply's time before it takes again.
pub const MAX_LINE: u64 = 1024;
