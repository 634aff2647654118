//! A bucket as it stands (`peek`), and what follows from it: how long a number of tokens takes.

use std::time::Duration;

/// The full rate, in basis points.
const FULL_BP: u16 = 10_000;

/// The bucket as it stands, from `peek` (`THROTTLE.PEEK`: read-only, so it also answers on a
/// read-only replica and while writes are paused).
///
/// A [`MultiLimiter`](crate::MultiLimiter)'s is its tightest limit's, counted in calls; a
/// [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter)'s is the partitions this
/// process holds.
///
/// ```
/// use std::time::Duration;
/// use redis_throttle::BucketState;
///
/// // 10 tokens at 10 per second, 4 left: 6 more tokens come in 600 ms, so 10 take 600 ms.
/// let state = BucketState::new(4, Duration::from_millis(600), 10, Duration::from_millis(100));
/// assert_eq!(state.time_to_take(4), Duration::ZERO);
/// assert_eq!(state.time_to_take(10), Duration::from_millis(600));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BucketState {
    /// Whole tokens in the bucket now (0 while it is in debt to reservations).
    pub remaining: u64,
    /// Until the bucket is full again (zero if it is full).
    pub until_full: Duration,
    /// Until the supplier's pause ends (zero: not paused). No call may be sent before then,
    /// reserved ones included.
    pub paused_for: Duration,
    /// The rate the bucket refills at now, in basis points of the configured rate: 10 000
    /// unless a congestion signal cut it (see `cut`).
    pub factor_bp: u16,
    /// The bucket's capacity.
    pub capacity: u64,
    /// One token's time at the configured rate.
    pub token_interval: Duration,
}

impl BucketState {
    /// A bucket with `remaining` tokens, full in `until_full`, neither paused nor cut.
    pub fn new(
        remaining: u64,
        until_full: Duration,
        capacity: u64,
        token_interval: Duration,
    ) -> BucketState {
        BucketState {
            remaining,
            until_full,
            paused_for: Duration::ZERO,
            factor_bp: FULL_BP,
            capacity,
            token_interval,
        }
    }

    /// The rate the bucket refills at now, as a fraction of the configured one (1.0: not cut).
    pub fn factor(&self) -> f64 {
        f64::from(self.factor_bp) / f64::from(FULL_BP)
    }

    /// How long taking `tokens` more takes from now, at the rate now (a cut rate climbing
    /// back is taken as it stands: an upper bound): the instant the last of them can be
    /// taken, as the server's arithmetic has it.
    pub fn time_to_take(&self, tokens: u64) -> Duration {
        let interval = self.token_interval.as_nanos();
        let factor = u128::from(self.factor_bp.clamp(1, FULL_BP));
        let fill = u128::from(self.capacity).saturating_mul(interval);
        // In u128 ns, and past even that (a queue of bytes at a rate of one a decade): never.
        let ns = u128::from(tokens)
            .checked_mul(interval)
            .and_then(|ns| ns.checked_mul(u128::from(FULL_BP)))
            .and_then(|ns| ns.div_ceil(factor).checked_add(self.until_full.as_nanos()))
            .map_or(u128::MAX, |ns| ns.saturating_sub(fill));
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn time_to_take_counts_the_debt_and_the_cut() {
        // Full: 10 at once, the 11th one interval later.
        let full = BucketState::new(10, Duration::ZERO, 10, MS * 100);
        assert_eq!(full.time_to_take(10), Duration::ZERO);
        assert_eq!(full.time_to_take(11), MS * 100);
        // 500 ms past empty (full in 1.5 s): the first token comes in 600 ms.
        let debt = BucketState::new(0, MS * 1500, 10, MS * 100);
        assert_eq!(debt.time_to_take(1), MS * 600);
        assert_eq!(debt.time_to_take(0), MS * 500);
        // Cut to half: each token costs 200 ms.
        let cut = BucketState {
            factor_bp: 5000,
            ..BucketState::new(0, MS * 1000, 10, MS * 100)
        };
        assert_eq!(cut.time_to_take(3), MS * 600);
        // Huge counts saturate instead of overflowing.
        let slow = BucketState::new(0, Duration::MAX, u64::MAX, Duration::MAX);
        assert_eq!(slow.time_to_take(u64::MAX), Duration::from_nanos(u64::MAX));
    }
}
