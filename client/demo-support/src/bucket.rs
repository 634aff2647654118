//! The mocks' own limit: a token bucket in nano-tokens, so that refill is exact integer
//! arithmetic (`rate` tokens a second is `rate` nano-tokens a nanosecond). Pure: time comes in
//! as a duration since any fixed epoch, and must not go backwards.

use std::time::Duration;

const NANO: u128 = 1_000_000_000;

#[derive(Debug, Clone)]
pub struct Bucket {
    capacity: u128,
    rate: u128,
    level: u128,
    at: Duration,
}

impl Bucket {
    /// Full at time zero.
    pub fn new(capacity: u64, rate_per_s: u64) -> Bucket {
        let capacity = u128::from(capacity) * NANO;
        let rate = u128::from(rate_per_s.max(1));
        Bucket {
            capacity,
            rate,
            level: capacity,
            at: Duration::ZERO,
        }
    }

    fn level(&self, now: Duration) -> u128 {
        (self.level + now.saturating_sub(self.at).as_nanos() * self.rate).min(self.capacity)
    }

    /// How long until the bucket holds `level` nano-tokens (rounded up: never early).
    fn until(&self, now: Duration, level: u128) -> Duration {
        let ns = level.saturating_sub(self.level(now)).div_ceil(self.rate);
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// Takes `tokens` at `now`, or says how long until they are there.
    pub fn take(&mut self, tokens: u64, now: Duration) -> Result<(), Duration> {
        let need = u128::from(tokens) * NANO;
        if now > self.at {
            (self.level, self.at) = (self.level(now), now);
        }
        if self.level < need {
            return Err(self.until(now, need));
        }
        self.level -= need;
        Ok(())
    }

    /// What a caller would find at `now`: the whole tokens there, and how long until one
    /// more is (zero when the bucket is full).
    pub fn remaining(&self, now: Duration) -> (u64, Duration) {
        let tokens = self.level(now) / NANO;
        let back_in = match self.level(now) >= self.capacity {
            true => Duration::ZERO,
            false => self.until(now, (tokens + 1) * NANO),
        };
        (u64::try_from(tokens).unwrap_or(u64::MAX), back_in)
    }

    /// How long until the bucket is full again.
    pub fn full_in(&self, now: Duration) -> Duration {
        self.until(now, self.capacity)
    }
}

/// A refusal's wait as a `Retry-After` header says it, in whole seconds: rounded up, so a
/// client that obeys is never early, and at least 1.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    u64::try_from(wait.as_nanos().div_ceil(NANO))
        .unwrap_or(u64::MAX)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn twenty_thousand_at_twenty_thousand_a_second_holds_two_thousand_takes_of_ten() {
        let mut bucket = Bucket::new(20_000, 20_000);
        for _ in 0..2_000 {
            bucket.take(10, Duration::ZERO).unwrap();
        }
        // 10 at 20 a ms: half a millisecond.
        assert_eq!(bucket.take(10, Duration::ZERO), Err(MS / 2));
        assert_eq!(bucket.take(10, MS / 2), Ok(()));
        assert_eq!(bucket.full_in(MS / 2), Duration::from_secs(1));
        // A long pause refills to the capacity, no further.
        assert_eq!(bucket.full_in(Duration::from_secs(5)), Duration::ZERO);
        for _ in 0..2_000 {
            bucket.take(10, Duration::from_secs(5)).unwrap();
        }
        assert!(bucket.take(10, Duration::from_secs(5)).is_err());
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(retry_after_seconds(MS * 667), 1);
        assert_eq!(retry_after_seconds(MS), 1);
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(MS * 1000), 1);
        assert_eq!(retry_after_seconds(MS * 1001), 2);
    }

    #[test]
    fn remaining_is_what_the_next_takes_would_find() {
        let mut bucket = Bucket::new(10, 10);
        assert_eq!(bucket.remaining(Duration::ZERO), (10, Duration::ZERO));
        for _ in 0..10 {
            bucket.take(1, Duration::ZERO).unwrap();
        }
        assert_eq!(bucket.remaining(Duration::ZERO), (0, MS * 100));
        assert_eq!(bucket.remaining(MS * 40), (0, MS * 60));
        assert_eq!(bucket.remaining(MS * 250), (2, MS * 50));
        assert_eq!(bucket.remaining(MS * 1_000), (10, Duration::ZERO));
    }
}
