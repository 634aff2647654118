//! The arguments that are more than a word: a duration (`2s`, `500ms`) and a quota
//! (`CAPACITY/RATE`).

use std::fmt;
use std::str::FromStr;

use redis_throttle::{Quota, Rate};

/// A duration in whole milliseconds, written `500ms`, `2s`, `1.5s`, `1m` or `1h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Duration {
    pub(crate) ms: u64,
}

impl FromStr for Duration {
    type Err = String;

    fn from_str(text: &str) -> Result<Duration, String> {
        let wrong = || {
            format!("{text:?} is not a duration: write a number and a unit, like 500ms, 2s, 1.5s, 1m or 1h")
        };
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(wrong)?;
        let (number, unit) = text.split_at(split);
        let unit_ms: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(wrong()),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(wrong());
        }
        let whole: u64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| wrong())?
        };
        let mut ms = whole.checked_mul(unit_ms).ok_or_else(wrong)?;
        if !fraction.is_empty() {
            let digits = u32::try_from(fraction.len()).map_err(|_| wrong())?;
            let scale = 10u128.checked_pow(digits).ok_or_else(wrong)?;
            let part: u128 = fraction.parse().map_err(|_| wrong())?;
            let scaled = part * u128::from(unit_ms);
            if !scaled.is_multiple_of(scale) {
                return Err(format!("{text:?} is not a whole number of milliseconds"));
            }
            let extra = u64::try_from(scaled / scale).map_err(|_| wrong())?;
            ms = ms.checked_add(extra).ok_or_else(wrong)?;
        }
        Ok(Duration { ms })
    }
}

/// A bucket's quota as the command line gives it: `CAPACITY/RATE`, checked as the server checks
/// it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct QuotaArg {
    pub(crate) capacity: u64,
    pub(crate) rate: String,
}

impl FromStr for QuotaArg {
    type Err = String;

    fn from_str(text: &str) -> Result<QuotaArg, String> {
        let (capacity, rate) = text.split_once('/').ok_or_else(|| {
            format!(
                "{text:?} is not a quota: write CAPACITY/RATE, like 10/5 (burst 10, 5 per second)"
            )
        })?;
        let capacity: u64 = capacity
            .parse()
            .map_err(|_| format!("{capacity:?} is not a capacity: a whole number of tokens"))?;
        let quota = Quota::new(capacity, Rate::decimal(rate)).map_err(|err| err.to_string())?;
        Ok(QuotaArg {
            capacity: quota.capacity(),
            rate: quota.rate().as_str().to_owned(),
        })
    }
}

impl fmt::Display for QuotaArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.capacity, self.rate)
    }
}

/// `ms` as seconds with three decimals: `2.000 s`.
pub(crate) fn seconds(ms: u64) -> String {
    format!("{}.{:03} s", ms / 1000, ms % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_whole_milliseconds() {
        for (text, ms) in [
            ("500ms", 500),
            ("2s", 2000),
            ("1.5s", 1500),
            (".25s", 250),
            ("1m", 60_000),
            ("1h", 3_600_000),
            ("0ms", 0),
        ] {
            assert_eq!(text.parse::<Duration>(), Ok(Duration { ms }), "{text}");
        }
        for bad in ["", "2", "s", "2x", "-1s", "1.2.3s", "0.5ms", "1e3ms", "."] {
            assert!(bad.parse::<Duration>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn quotas_are_checked_as_the_server_checks_them() {
        let quota: QuotaArg = "10/0.5".parse().unwrap();
        assert_eq!((quota.capacity, quota.rate.as_str()), (10, "0.5"));
        assert_eq!(quota.to_string(), "10/0.5");
        for bad in ["10", "x/1", "0/1", "10/-1", "10/1e3", "10/"] {
            assert!(bad.parse::<QuotaArg>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn seconds_have_three_decimals() {
        assert_eq!(seconds(2000), "2.000 s");
        assert_eq!(seconds(1004), "1.004 s");
        assert_eq!(seconds(7), "0.007 s");
    }
}
