//! A bucket's quota, `capacity rate`: the first two words after the key of every command.

use crate::command::Command;
use crate::error::ArgError;
use crate::interval::{parse_rate, Decimal};
use crate::limits::{MAX_CAPACITY, MAX_FILL_NS};
use crate::words::{parse_u64, Word};
use crate::Interval;

/// A bucket's quota: `capacity rate`, checked so that `capacity * interval` fits the limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    /// Largest burst, in tokens.
    pub capacity: u64,
    /// Refill time of one token.
    pub interval: Interval,
    /// The rate as the shortest decimal of its value, the text a client sends.
    rate: Decimal,
}

impl Quota {
    /// Checks capacity, then rate, then that the bucket fills within MAX_FILL_NS.
    pub fn parse(capacity: &[u8], rate: &[u8]) -> Result<Quota, ArgError> {
        Quota::new(parse_u64(capacity).ok_or(ArgError::Capacity)?, rate)
    }

    /// [`Quota::parse`] of a capacity already read as a number (a kept quota's, stored).
    pub fn new(capacity: u64, rate: &[u8]) -> Result<Quota, ArgError> {
        if !(1..=MAX_CAPACITY).contains(&capacity) {
            return Err(ArgError::Capacity);
        }
        let (interval, rate) = parse_rate(rate).ok_or(ArgError::Rate)?;
        // capacity <= 1e15 and interval <= 1e15, so the product fits in u128 with room.
        if u128::from(capacity) * interval.ns() as u128 > MAX_FILL_NS as u128 {
            return Err(ArgError::FillTooLong);
        }
        Ok(Quota {
            capacity,
            interval,
            rate,
        })
    }

    /// Time to refill from empty, ns (at most MAX_FILL_NS).
    pub fn fill_ns(&self) -> i64 {
        // Checked against MAX_FILL_NS in `parse`.
        i64::try_from(i128::from(self.capacity) * i128::from(self.interval.ns()))
            .unwrap_or(MAX_FILL_NS)
    }

    /// The rate in tokens per second, as the shortest decimal of its value (`7.25` for
    /// `007.250`): what [`Quota::words`] sends.
    pub fn rate(&self) -> &str {
        self.rate.as_str()
    }

    /// `capacity rate`, as every command has them after its key.
    pub fn words(&self) -> [Word<'_>; 2] {
        [Word::Number(self.capacity), Word::Text(self.rate())]
    }

    /// The words of a call that starts with a quota (every one-key command's, after the key):
    /// the quota, then the `N` words after it; any other count is `command`'s arity error,
    /// before a word is read.
    pub(crate) fn split<'a, const N: usize>(
        words: &[&'a [u8]],
        command: Command,
    ) -> Result<(Quota, [&'a [u8]; N]), ArgError> {
        let [capacity, rate, rest @ ..] = words else {
            return Err(ArgError::Arity(command));
        };
        let rest = <[&[u8]; N]>::try_from(rest).map_err(|_| ArgError::Arity(command))?;
        Ok((Quota::parse(capacity, rate)?, rest))
    }

    /// The words of a call: this quota, then `rest`.
    pub(crate) fn with<'a>(&'a self, rest: impl IntoIterator<Item = Word<'a>>) -> Vec<Word<'a>> {
        self.words().into_iter().chain(rest).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_what_it_writes() {
        for (capacity, rate) in [("8", "9"), ("0010", "007.250"), ("1", "0.000001")] {
            let quota = Quota::parse(capacity.as_bytes(), rate.as_bytes()).unwrap();
            let [Word::Number(c), Word::Text(r)] = quota.words() else {
                panic!("{:?}", quota.words());
            };
            assert_eq!(
                Quota::parse(c.to_string().as_bytes(), r.as_bytes()),
                Ok(quota)
            );
        }
    }
}
