//! A quota (capacity and refill rate), validated by the same rules as the server's.

use std::fmt;
use std::time::Duration;

use throttle_bucket::{
    ArgError, Quota as BucketQuota, MAX_CAPACITY, MAX_FILL_NS, MAX_INFLIGHT, MAX_KEYS, MAX_RATE,
    MIN_RATE,
};

/// A refill rate in tokens per second, kept as the exact decimal text sent to the server.
///
/// Constructing a `Rate` never fails; [`Quota::new`] checks it (a decimal from
/// `0.000001` to `1000000000`, with at most 18 digits after the point), so a bad rate is
/// reported when the limiter is built, not at the first call.
///
/// ```
/// use std::time::Duration;
/// use redis_throttle::Rate;
///
/// assert_eq!(Rate::per_second(10).as_str(), "10");
/// assert_eq!(Rate::decimal("0.5").as_str(), "0.5");
/// assert_eq!(Rate::from_f64(2.5).as_str(), "2.5");
/// // 100 per minute, rounded down (never up) to 9 decimals.
/// assert_eq!(Rate::per(100, Duration::from_secs(60)).as_str(), "1.666666666");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rate(String);

impl Rate {
    /// `tokens` per second, exactly.
    pub fn per_second(tokens: u64) -> Rate {
        Rate(tokens.to_string())
    }

    /// A decimal number of tokens per second, exactly as written: `"0.5"`, `"35791394.1"`.
    /// No sign, no exponent.
    pub fn decimal(text: impl Into<String>) -> Rate {
        Rate(text.into())
    }

    /// A rate from a float, written as its shortest exact decimal (`0.1` is sent as `0.1`).
    /// NaN, infinities and negative numbers are rejected by [`Quota::new`].
    pub fn from_f64(tokens_per_second: f64) -> Rate {
        // Display for f64 never uses an exponent and round-trips exactly.
        Rate(format!("{tokens_per_second}"))
    }

    /// `tokens` per `period`, rounded **down** to 9 decimals, so the bucket is never looser
    /// than asked. A zero period is rejected by [`Quota::new`].
    pub fn per(tokens: u64, period: Duration) -> Rate {
        const SCALE: u128 = 1_000_000_000;
        let period_ns = period.as_nanos();
        let scaled = (u128::from(tokens) * SCALE * SCALE).checked_div(period_ns);
        match scaled {
            None => Rate("inf".to_owned()),
            Some(scaled) => {
                let (whole, fraction) = (scaled / SCALE, scaled % SCALE);
                if fraction == 0 {
                    Rate(whole.to_string())
                } else {
                    let digits = format!("{fraction:09}");
                    Rate(format!("{whole}.{}", digits.trim_end_matches('0')))
                }
            }
        }
    }

    /// The decimal text sent to the server.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<u64> for Rate {
    fn from(tokens_per_second: u64) -> Rate {
        Rate::per_second(tokens_per_second)
    }
}

/// So that `Quota::new(8, 9)` reads as it is written: an integer literal is an `i32`. A
/// negative one is refused by [`Quota::new`].
impl From<i32> for Rate {
    fn from(tokens_per_second: i32) -> Rate {
        Rate(tokens_per_second.to_string())
    }
}

impl From<u32> for Rate {
    fn from(tokens_per_second: u32) -> Rate {
        Rate::per_second(u64::from(tokens_per_second))
    }
}

impl From<f64> for Rate {
    fn from(tokens_per_second: f64) -> Rate {
        Rate::from_f64(tokens_per_second)
    }
}

impl From<&str> for Rate {
    fn from(text: &str) -> Rate {
        Rate::decimal(text)
    }
}

/// A bucket's shape: the largest burst (`capacity` tokens) and the refill `rate`.
///
/// Checked against the server's limits when it is made: capacity 1 to 10^15, rate
/// 0.000001 to 10^9 tokens per second, and a bucket that refills from empty within 10
/// years (`capacity / rate`).
///
/// ```
/// use redis_throttle::{Quota, QuotaError, Rate};
///
/// // Bursts of up to 10 calls, 10 calls per second sustained.
/// let quota = Quota::new(10, Rate::per_second(10))?;
/// assert_eq!(quota.capacity(), 10);
///
/// assert!(matches!(Quota::new(0, 1u64), Err(QuotaError::Capacity { .. })));
/// assert!(matches!(Quota::new(10, "-1"), Err(QuotaError::Rate { .. })));
/// # Ok::<(), QuotaError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    rate: Rate,
    /// As the server reads it: what the commands' words are written from.
    bucket: BucketQuota,
}

impl Quota {
    /// A quota of `capacity` tokens refilled at `rate` tokens per second.
    pub fn new(capacity: u64, rate: impl Into<Rate>) -> Result<Quota, QuotaError> {
        let rate = rate.into();
        let capacity_text = capacity.to_string();
        match BucketQuota::parse(capacity_text.as_bytes(), rate.as_str().as_bytes()) {
            Ok(bucket) => Ok(Quota { rate, bucket }),
            Err(ArgError::Capacity) => Err(QuotaError::Capacity { capacity }),
            Err(ArgError::FillTooLong) => Err(QuotaError::FillTooLong { capacity, rate }),
            // Rate is the only other error two arguments can have.
            Err(_) => Err(QuotaError::Rate { rate }),
        }
    }

    /// The largest burst, in tokens.
    pub fn capacity(&self) -> u64 {
        self.bucket.capacity
    }

    /// The refill rate, in tokens per second, as it was given.
    pub fn rate(&self) -> &Rate {
        &self.rate
    }

    /// The time one token takes to refill, as the server computes it (rounded up to the
    /// nanosecond, so the effective rate is never above the one asked for).
    pub fn token_interval(&self) -> Duration {
        Duration::from_nanos(u64::try_from(self.bucket.interval.ns()).unwrap_or(u64::MAX))
    }

    /// The quota as the server reads it.
    pub(crate) fn bucket(&self) -> &BucketQuota {
        &self.bucket
    }

    /// Checks a limiter's cost per call: at least 1 token, at most the capacity.
    pub(crate) fn check_cost(&self, cost: u64) -> Result<(), QuotaError> {
        if cost == 0 {
            return Err(QuotaError::ZeroCost);
        }
        self.check_tokens(cost)
    }

    /// Checks that a call may take `tokens`: at most the capacity.
    pub(crate) fn check_tokens(&self, tokens: u64) -> Result<(), QuotaError> {
        if tokens > self.capacity() {
            Err(QuotaError::Tokens {
                tokens,
                capacity: self.capacity(),
            })
        } else {
            Ok(())
        }
    }
}

/// Why a quota, or the number of tokens a call takes, cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuotaError {
    /// The capacity is not a whole number of tokens from 1 to 10^15.
    #[error("capacity {capacity} is out of range: it must be from 1 to {MAX_CAPACITY} tokens")]
    Capacity {
        /// The capacity asked for.
        capacity: u64,
    },
    /// The rate is not a plain decimal from 0.000001 to 10^9 tokens per second.
    #[error(
        "rate \"{rate}\" is not usable: it must be a plain decimal (no sign or exponent) from \
         {MIN_RATE} to {MAX_RATE} tokens per second, like 10 or 0.5"
    )]
    Rate {
        /// The rate asked for, as it would be sent.
        rate: Rate,
    },
    /// The bucket would take more than 10 years to refill from empty.
    #[error(
        "capacity {capacity} at rate {rate}/s takes longer than {} s (10 years) to refill: raise \
         the rate or lower the capacity",
        MAX_FILL_NS / 1_000_000_000
    )]
    FillTooLong {
        /// The capacity asked for.
        capacity: u64,
        /// The rate asked for.
        rate: Rate,
    },
    /// A limiter's cost per call is 0: it would never limit anything.
    #[error(
        "a cost of 0 tokens per call never limits anything: give each call at least 1 token \
         (a call that only looks at the bucket is `peek`)"
    )]
    ZeroCost,
    /// A call (or the limiter's cost per call) takes more tokens than the bucket holds, so
    /// it could never be granted.
    #[error("a call cannot take {tokens} tokens from a bucket of capacity {capacity}")]
    Tokens {
        /// Tokens asked for.
        tokens: u64,
        /// The bucket's capacity.
        capacity: u64,
    },
    /// A call takes more tokens than one partition of a
    /// [`PartitionedQuota`](crate::partitioned::PartitionedQuota) holds: a call is served by
    /// one partition.
    #[error(
        "a call cannot take {tokens} tokens: one partition holds at most {capacity}; raise the \
         burst or use fewer partitions"
    )]
    PartitionTokens {
        /// Tokens asked for.
        tokens: u64,
        /// One partition's burst.
        capacity: u64,
    },
    /// A [`MultiLimiter`](crate::MultiLimiter) needs 1 to 16 limits on distinct keys.
    #[error("a multi-limit limiter takes 1 to {MAX_KEYS} limits, each on its own key: {problem}")]
    Limits {
        /// What is wrong with them.
        problem: String,
    },
    /// A cap on calls in flight outside 1 to 1024
    /// ([`LimiterBuilder::max_in_flight`](crate::LimiterBuilder::max_in_flight)).
    #[error(
        "a cap of {cap} calls in flight is out of range: it must be from 1 to {MAX_INFLIGHT} \
         (the slots live in the bucket's key)"
    )]
    InFlight {
        /// The cap asked for.
        cap: u64,
    },
    /// A slot's lease shorter than 300 ms or longer than 10 years
    /// ([`LimiterBuilder::slot_lease`](crate::LimiterBuilder::slot_lease)).
    #[error(
        "a slot lease of {lease:?} is out of range: it must be from 300 ms (it is renewed every \
         third of it, a round trip included) to 10 years"
    )]
    Lease {
        /// The lease asked for.
        lease: Duration,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_exact_text() {
        assert_eq!(Rate::from_f64(9.0).as_str(), "9");
        assert_eq!(Rate::from_f64(0.1).as_str(), "0.1");
        assert_eq!(Rate::from_f64(1e-6).as_str(), "0.000001");
        assert_eq!(Rate::from_f64(1e9).as_str(), "1000000000");
        assert_eq!(Rate::per(10, Duration::from_secs(1)).as_str(), "10");
        assert_eq!(Rate::per(1, Duration::from_millis(500)).as_str(), "2");
        assert_eq!(Rate::per(1, Duration::from_secs(3)).as_str(), "0.333333333");
        assert_eq!(Rate::per(5, Duration::ZERO).as_str(), "inf");
    }

    #[test]
    fn good_quotas() {
        let quota = Quota::new(8, 9u64).unwrap();
        assert_eq!(quota.capacity(), 8);
        assert_eq!(quota.token_interval(), Duration::from_nanos(111_111_112));
        assert!(Quota::new(MAX_CAPACITY, 1_000_000_000u64).is_ok());
        assert!(Quota::new(1, "0.000001").is_ok());
        assert!(Quota::new(315_360_000, 1u64).is_ok());
        assert!(Quota::new(1, 0.5).is_ok());
    }

    #[test]
    fn bad_quotas_name_their_problem() {
        assert_eq!(
            Quota::new(0, 1u64),
            Err(QuotaError::Capacity { capacity: 0 })
        );
        assert_eq!(
            Quota::new(MAX_CAPACITY + 1, 1u64),
            Err(QuotaError::Capacity {
                capacity: MAX_CAPACITY + 1
            })
        );
        for rate in [
            Rate::from_f64(0.0),
            Rate::from_f64(-1.0),
            Rate::from_f64(f64::NAN),
            Rate::from_f64(f64::INFINITY),
            Rate::from_f64(1e-7),
            Rate::from_f64(1e10),
            Rate::from_f64(f64::MIN_POSITIVE),
            Rate::decimal("1e3"),
            Rate::decimal(" 1"),
            Rate::decimal(""),
            Rate::per(1, Duration::ZERO),
        ] {
            let err = Quota::new(1, rate.clone()).unwrap_err();
            assert_eq!(err, QuotaError::Rate { rate: rate.clone() });
            assert!(err.to_string().contains("0.000001"), "{err}");
        }
        let err = Quota::new(315_360_001, 1u64).unwrap_err();
        assert!(matches!(err, QuotaError::FillTooLong { .. }), "{err}");
        assert!(err.to_string().contains("10 years"), "{err}");
    }

    #[test]
    fn integer_literals_and_the_rates_text() {
        assert_eq!(
            Quota::new(8, 9).map(|q| q.token_interval()),
            Quota::new(8, 9u64).map(|q| q.token_interval())
        );
        let err = Quota::new(8, -9).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rate \"-9\" is not usable: it must be a plain decimal (no sign or exponent) from \
             0.000001 to 1000000000 tokens per second, like 10 or 0.5"
        );
        assert_eq!(Quota::new(8, 9u32), Quota::new(8, 9u64));
    }

    #[test]
    fn a_cost_of_0_is_refused() {
        let quota = Quota::new(8, 9).unwrap();
        assert_eq!(quota.check_cost(0), Err(QuotaError::ZeroCost));
        assert_eq!(quota.check_cost(8), Ok(()));
        assert!(matches!(
            quota.check_cost(9),
            Err(QuotaError::Tokens { .. })
        ));
    }

    #[test]
    fn tokens_above_capacity_are_refused() {
        let quota = Quota::new(8, 9u64).unwrap();
        assert_eq!(quota.check_tokens(8), Ok(()));
        assert_eq!(quota.check_tokens(0), Ok(()));
        assert_eq!(
            quota.check_tokens(9),
            Err(QuotaError::Tokens {
                tokens: 9,
                capacity: 8
            })
        );
    }
}
