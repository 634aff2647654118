//! Validation of `THROTTLE.TAKE key capacity rate [TOKENS n] [MAXWAIT ms]`.

use std::fmt;

use crate::limits::{MAX_CAPACITY, MAX_FILL_NS, MAX_RATE, MAX_WAIT_MS, MIN_RATE};
use crate::Rate;

/// A validated call: every number is in range and `capacity * interval` fits the limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TakeArgs {
    /// Largest burst, in tokens.
    pub capacity: u64,
    /// Refill rate.
    pub rate: Rate,
    /// Tokens this call takes (0 inspects).
    pub tokens: u64,
    /// How far ahead the call may reserve, in ms (0: only what is there now).
    pub max_wait_ms: u64,
}

/// What is wrong with a call. `Display` gives the error reply, starting with `ERR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgError {
    /// Fewer than `key capacity rate`.
    Arity,
    /// `capacity` is not an integer in 1..=MAX_CAPACITY.
    Capacity,
    /// `rate` is not a decimal in MIN_RATE..=MAX_RATE.
    Rate,
    /// `capacity / rate` is longer than MAX_FILL_NS.
    FillTooLong,
    /// `TOKENS` is not an integer in 0..=capacity.
    Tokens { capacity: u64 },
    /// `MAXWAIT` is not an integer in 0..=MAX_WAIT_MS.
    MaxWait,
    /// An option name other than TOKENS or MAXWAIT.
    UnknownOption,
    /// An option name with no value after it.
    MissingValue(&'static str),
    /// The same option twice.
    Repeated(&'static str),
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::Arity => f.write_str(
                "ERR wrong number of arguments for 'throttle.take' command: \
                 THROTTLE.TAKE key capacity rate [TOKENS n] [MAXWAIT ms]",
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
            ArgError::UnknownOption => f.write_str(
                "ERR unknown option for THROTTLE.TAKE: the options are TOKENS n and MAXWAIT ms",
            ),
            ArgError::MissingValue(name) => write!(f, "ERR {name} needs a value: {name} n"),
            ArgError::Repeated(name) => write!(f, "ERR {name} is given more than once"),
        }
    }
}

impl std::error::Error for ArgError {}

impl TakeArgs {
    /// Validates everything after the key: `capacity rate [TOKENS n] [MAXWAIT ms]`.
    pub fn parse(args: &[&[u8]]) -> Result<TakeArgs, ArgError> {
        let [capacity, rate, options @ ..] = args else {
            return Err(ArgError::Arity);
        };
        let capacity = parse_u64(capacity)
            .filter(|c| (1..=MAX_CAPACITY).contains(c))
            .ok_or(ArgError::Capacity)?;
        let rate = Rate::parse(rate).ok_or(ArgError::Rate)?;
        // capacity <= 1e15 and interval <= 1e15, so the product fits in u128 with room.
        if u128::from(capacity) * rate.interval_ns() as u128 > MAX_FILL_NS as u128 {
            return Err(ArgError::FillTooLong);
        }

        let mut tokens = None;
        let mut max_wait_ms = None;
        let mut rest = options;
        while let [name, tail @ ..] = rest {
            let (slot, label) = if name.eq_ignore_ascii_case(b"TOKENS") {
                (&mut tokens, "TOKENS")
            } else if name.eq_ignore_ascii_case(b"MAXWAIT") {
                (&mut max_wait_ms, "MAXWAIT")
            } else {
                return Err(ArgError::UnknownOption);
            };
            let [value, tail @ ..] = tail else {
                return Err(ArgError::MissingValue(label));
            };
            if slot.is_some() {
                return Err(ArgError::Repeated(label));
            }
            *slot = Some(*value);
            rest = tail;
        }

        let tokens = match tokens {
            None => 1,
            Some(text) => parse_u64(text)
                .filter(|n| *n <= capacity)
                .ok_or(ArgError::Tokens { capacity })?,
        };
        // Capacity 1 with the default TOKENS 1 is fine; the default never exceeds capacity.
        let max_wait_ms = match max_wait_ms {
            None => 0,
            Some(text) => parse_u64(text)
                .filter(|ms| *ms <= MAX_WAIT_MS)
                .ok_or(ArgError::MaxWait)?,
        };
        Ok(TakeArgs {
            capacity,
            rate,
            tokens,
            max_wait_ms,
        })
    }
}

/// A non-negative decimal integer: ASCII digits only, no sign, no spaces.
fn parse_u64(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    text.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<TakeArgs, ArgError> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        TakeArgs::parse(&bytes)
    }

    #[test]
    fn defaults_and_options() {
        let args = parse(&["8", "9"]).unwrap();
        assert_eq!((args.capacity, args.tokens, args.max_wait_ms), (8, 1, 0));
        assert_eq!(args.rate.interval_ns(), 111_111_112);

        let args = parse(&["8", "9", "maxwait", "5000", "Tokens", "3"]).unwrap();
        assert_eq!((args.tokens, args.max_wait_ms), (3, 5000));

        let args = parse(&["8", "9", "TOKENS", "0"]).unwrap();
        assert_eq!(args.tokens, 0);
        let args = parse(&["8", "9", "TOKENS", "8", "MAXWAIT", "315360000000"]).unwrap();
        assert_eq!((args.tokens, args.max_wait_ms), (8, MAX_WAIT_MS));
    }

    #[test]
    fn every_bad_call_names_its_problem() {
        use ArgError::*;
        let cases: &[(&[&str], ArgError)] = &[
            (&[], Arity),
            (&["8"], Arity),
            (&["0", "9"], Capacity),
            (&["-1", "9"], Capacity),
            (&["1.5", "9"], Capacity),
            (&["1000000000000001", "9"], Capacity),
            (&["18446744073709551616", "9"], Capacity),
            (&["abc", "9"], Capacity),
            (&["8", "0"], Rate),
            (&["8", "-9"], Rate),
            (&["8", "nan"], Rate),
            (&["8", "inf"], Rate),
            (&["8", "1e400"], Rate),
            (&["1000000000000000", "0.000001"], FillTooLong),
            (&["315360001", "1"], FillTooLong),
            (&["8", "9", "TOKENS", "9"], Tokens { capacity: 8 }),
            (&["8", "9", "TOKENS", "-1"], Tokens { capacity: 8 }),
            (&["8", "9", "TOKENS", "x"], Tokens { capacity: 8 }),
            (&["8", "9", "MAXWAIT", "315360000001"], MaxWait),
            (&["8", "9", "MAXWAIT", "-5"], MaxWait),
            (&["8", "9", "MAXWAIT", "1.5"], MaxWait),
            (&["8", "9", "WAIT", "1"], UnknownOption),
            (&["8", "9", "TOKENS"], MissingValue("TOKENS")),
            (
                &["8", "9", "MAXWAIT", "1", "MAXWAIT"],
                MissingValue("MAXWAIT"),
            ),
            (
                &["8", "9", "TOKENS", "1", "tokens", "2"],
                Repeated("TOKENS"),
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(parse(args), Err(*expected), "args {args:?}");
            assert!(expected.to_string().starts_with("ERR "), "{expected}");
        }
    }

    #[test]
    fn largest_fill_is_accepted() {
        // 315360000 tokens at 1/s refill in exactly 10 years.
        assert!(parse(&["315360000", "1"]).is_ok());
        assert!(parse(&["1000000000000000", "1000000000"]).is_ok());
    }

    #[test]
    fn non_utf8_bytes_are_rejected_not_decoded() {
        let args: [&[u8]; 2] = [b"\xff", b"9"];
        assert_eq!(TakeArgs::parse(&args), Err(ArgError::Capacity));
        let args: [&[u8]; 4] = [b"8", b"9", b"TOK\xffENS", b"1"];
        assert_eq!(TakeArgs::parse(&args), Err(ArgError::UnknownOption));
    }
}
