//! Validation of every command's arguments (the words after the command name, key included
//! only where the rules need it). Checks run in a fixed order, which the Lua twin follows, so
//! a call with several mistakes gets the same error from both.

use crate::error::{ArgError, Command};
use crate::limits::{MAX_CAPACITY, MAX_FILL_NS, MAX_KEYS, MAX_TICKET_US, MAX_WAIT_MS};
use crate::Interval;

/// A bucket's quota: `capacity rate`, checked so that `capacity * interval` fits the limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    /// Largest burst, in tokens.
    pub capacity: u64,
    /// Refill time of one token.
    pub interval: Interval,
}

impl Quota {
    /// Checks capacity, then rate, then that the bucket fills within MAX_FILL_NS.
    pub fn parse(capacity: &[u8], rate: &[u8]) -> Result<Quota, ArgError> {
        let capacity = parse_u64(capacity)
            .filter(|c| (1..=MAX_CAPACITY).contains(c))
            .ok_or(ArgError::Capacity)?;
        let interval = Interval::from_rate(rate).ok_or(ArgError::Rate)?;
        // capacity <= 1e15 and interval <= 1e15, so the product fits in u128 with room.
        if u128::from(capacity) * interval.ns() as u128 > MAX_FILL_NS as u128 {
            return Err(ArgError::FillTooLong);
        }
        Ok(Quota { capacity, interval })
    }

    /// Time to refill from empty, ns (at most MAX_FILL_NS).
    pub fn fill_ns(&self) -> i64 {
        // Checked against MAX_FILL_NS in `parse`.
        i64::try_from(i128::from(self.capacity) * i128::from(self.interval.ns()))
            .unwrap_or(MAX_FILL_NS)
    }
}

/// `THROTTLE.TAKE key capacity rate [TOKENS n] [MAXWAIT ms] [TICKET]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TakeArgs {
    pub quota: Quota,
    /// Tokens this call takes (0 inspects).
    pub tokens: u64,
    /// How far ahead the call may reserve, in ms (0: only what is there now).
    pub max_wait_ms: u64,
    /// Reply a fifth element: the ticket THROTTLE.GIVE takes.
    pub ticket: bool,
}

impl TakeArgs {
    /// Validates everything after the key: `capacity rate [TOKENS n] [MAXWAIT ms] [TICKET]`.
    pub fn parse(args: &[&[u8]]) -> Result<TakeArgs, ArgError> {
        let [capacity, rate, options @ ..] = args else {
            return Err(ArgError::Arity(Command::Take));
        };
        let quota = Quota::parse(capacity, rate)?;

        let mut tokens = None;
        let mut max_wait_ms = None;
        let mut ticket = false;
        let mut rest = options;
        while let [name, tail @ ..] = rest {
            if name.eq_ignore_ascii_case(b"TICKET") {
                if ticket {
                    return Err(ArgError::Repeated("TICKET"));
                }
                ticket = true;
                rest = tail;
                continue;
            }
            let (slot, label) = if name.eq_ignore_ascii_case(b"TOKENS") {
                (&mut tokens, "TOKENS")
            } else if name.eq_ignore_ascii_case(b"MAXWAIT") {
                (&mut max_wait_ms, "MAXWAIT")
            } else {
                return Err(ArgError::UnknownOption(Command::Take));
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

        // The default TOKENS 1 never exceeds a capacity, which is at least 1.
        let tokens = match tokens {
            None => 1,
            Some(text) => parse_tokens(text, quota.capacity)?,
        };
        let max_wait_ms = match max_wait_ms {
            None => 0,
            Some(text) => parse_max_wait(text)?,
        };
        Ok(TakeArgs {
            quota,
            tokens,
            max_wait_ms,
            ticket,
        })
    }
}

/// `THROTTLE.PEEK key capacity rate`: the words after the key.
pub fn parse_peek(args: &[&[u8]]) -> Result<Quota, ArgError> {
    let [capacity, rate] = args else {
        return Err(ArgError::Arity(Command::Peek));
    };
    Quota::parse(capacity, rate)
}

/// `THROTTLE.PAUSE key capacity rate ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PauseArgs {
    pub quota: Quota,
    /// How long until the next token, at least: the supplier's Retry-After.
    pub pause_ms: u64,
}

impl PauseArgs {
    /// Validates the words after the key: `capacity rate ms`.
    pub fn parse(args: &[&[u8]]) -> Result<PauseArgs, ArgError> {
        let [capacity, rate, ms] = args else {
            return Err(ArgError::Arity(Command::Pause));
        };
        let quota = Quota::parse(capacity, rate)?;
        let pause_ms = parse_u64(ms)
            .filter(|ms| (1..=MAX_WAIT_MS).contains(ms))
            .ok_or(ArgError::PauseMs)?;
        Ok(PauseArgs { quota, pause_ms })
    }
}

/// `THROTTLE.GIVE key capacity rate n ticket`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GiveArgs {
    pub quota: Quota,
    /// Tokens the take took and the caller did not use.
    pub tokens: u64,
    /// The take's ticket: the state right after it, µs since the Unix epoch, rounded down.
    pub ticket_us: u64,
}

impl GiveArgs {
    /// Validates the words after the key: `capacity rate n ticket`.
    pub fn parse(args: &[&[u8]]) -> Result<GiveArgs, ArgError> {
        let [capacity, rate, n, ticket] = args else {
            return Err(ArgError::Arity(Command::Give));
        };
        let quota = Quota::parse(capacity, rate)?;
        let tokens = parse_u64(n)
            .filter(|n| *n <= quota.capacity)
            .ok_or(ArgError::GiveTokens {
                capacity: quota.capacity,
            })?;
        let ticket_us = parse_u64(ticket)
            .filter(|t| *t <= MAX_TICKET_US)
            .ok_or(ArgError::Ticket)?;
        Ok(GiveArgs {
            quota,
            tokens,
            ticket_us,
        })
    }
}

/// One bucket of a THROTTLE.MTAKE: its quota and the tokens taken from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub quota: Quota,
    pub tokens: u64,
}

/// `THROTTLE.MTAKE numkeys key [key ...] capacity rate tokens [...] [MAXWAIT ms]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MTakeArgs {
    len: usize,
    limits: [Limit; MAX_KEYS],
    /// How far ahead the call may reserve, in ms (0: only what is there now).
    pub max_wait_ms: u64,
}

impl MTakeArgs {
    /// Validates the words after the command name, keys included (they must be distinct):
    /// numkeys, the number of words, the keys, each triple in key order, then MAXWAIT.
    pub fn parse(args: &[&[u8]]) -> Result<MTakeArgs, ArgError> {
        let [numkeys, rest @ ..] = args else {
            return Err(ArgError::Arity(Command::MTake));
        };
        let len = parse_u64(numkeys)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| (1..=MAX_KEYS).contains(n))
            .ok_or(ArgError::NumKeys)?;
        let shape = ArgError::Triples { keys: len };
        let (keys, rest) = rest.split_at_checked(len).ok_or(shape)?;
        let (triples, options) = rest.split_at_checked(3 * len).ok_or(shape)?;
        for (i, key) in keys.iter().enumerate() {
            if keys.iter().skip(i + 1).any(|other| other == key) {
                return Err(ArgError::DuplicateKey);
            }
        }

        let placeholder = Limit {
            quota: Quota {
                capacity: 1,
                interval: Interval::ONE_NS,
            },
            tokens: 0,
        };
        let mut limits = [placeholder; MAX_KEYS];
        for (slot, triple) in limits.iter_mut().zip(triples.chunks_exact(3)) {
            let [capacity, rate, tokens] = triple else {
                return Err(shape);
            };
            let quota = Quota::parse(capacity, rate)?;
            let tokens = parse_tokens(tokens, quota.capacity)?;
            *slot = Limit { quota, tokens };
        }

        // The same rules as THROTTLE.TAKE's options, with MAXWAIT the only one.
        let mut max_wait = None;
        let mut rest = options;
        while let [name, tail @ ..] = rest {
            if !name.eq_ignore_ascii_case(b"MAXWAIT") {
                return Err(ArgError::UnknownOption(Command::MTake));
            }
            let [value, tail @ ..] = tail else {
                return Err(ArgError::MissingValue("MAXWAIT"));
            };
            if max_wait.is_some() {
                return Err(ArgError::Repeated("MAXWAIT"));
            }
            max_wait = Some(*value);
            rest = tail;
        }
        let max_wait_ms = match max_wait {
            None => 0,
            Some(text) => parse_max_wait(text)?,
        };
        Ok(MTakeArgs {
            len,
            limits,
            max_wait_ms,
        })
    }

    /// One limit per key, in key order.
    pub fn limits(&self) -> &[Limit] {
        self.limits.get(..self.len).unwrap_or(&[])
    }
}

fn parse_tokens(text: &[u8], capacity: u64) -> Result<u64, ArgError> {
    parse_u64(text)
        .filter(|n| *n <= capacity)
        .ok_or(ArgError::Tokens { capacity })
}

fn parse_max_wait(text: &[u8]) -> Result<u64, ArgError> {
    parse_u64(text)
        .filter(|ms| *ms <= MAX_WAIT_MS)
        .ok_or(ArgError::MaxWait)
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

    fn words(text: &str) -> Vec<&[u8]> {
        text.split_whitespace().map(str::as_bytes).collect()
    }

    fn take(text: &str) -> Result<TakeArgs, ArgError> {
        TakeArgs::parse(&words(text))
    }

    #[test]
    fn take_defaults_and_options() {
        let args = take("8 9").unwrap();
        assert_eq!(
            (args.quota.capacity, args.tokens, args.max_wait_ms),
            (8, 1, 0)
        );
        assert_eq!(args.quota.interval.ns(), 111_111_112);
        assert!(!args.ticket);

        let args = take("8 9 maxwait 5000 Tokens 3 ticket").unwrap();
        assert_eq!(
            (args.tokens, args.max_wait_ms, args.ticket),
            (3, 5000, true)
        );
        let args = take("8 9 TICKET TOKENS 0").unwrap();
        assert_eq!((args.tokens, args.ticket), (0, true));
        let args = take("8 9 TOKENS 8 MAXWAIT 315360000000").unwrap();
        assert_eq!((args.tokens, args.max_wait_ms), (8, MAX_WAIT_MS));
    }

    #[test]
    fn every_bad_take_names_its_problem() {
        use ArgError::*;
        let cases: &[(&str, ArgError)] = &[
            ("", Arity(Command::Take)),
            ("8", Arity(Command::Take)),
            ("0 9", Capacity),
            ("-1 9", Capacity),
            ("1.5 9", Capacity),
            ("1000000000000001 9", Capacity),
            ("18446744073709551616 9", Capacity),
            ("abc 9", Capacity),
            ("8 0", Rate),
            ("8 -9", Rate),
            ("8 nan", Rate),
            ("8 inf", Rate),
            ("8 1e400", Rate),
            ("1000000000000000 0.000001", FillTooLong),
            ("315360001 1", FillTooLong),
            ("8 9 TOKENS 9", Tokens { capacity: 8 }),
            ("8 9 TOKENS -1", Tokens { capacity: 8 }),
            ("8 9 TOKENS x", Tokens { capacity: 8 }),
            ("8 9 MAXWAIT 315360000001", MaxWait),
            ("8 9 MAXWAIT -5", MaxWait),
            ("8 9 MAXWAIT 1.5", MaxWait),
            ("8 9 WAIT 1", UnknownOption(Command::Take)),
            ("8 9 TOKENS", MissingValue("TOKENS")),
            ("8 9 MAXWAIT 1 MAXWAIT", MissingValue("MAXWAIT")),
            ("8 9 TOKENS 1 tokens 2", Repeated("TOKENS")),
            ("8 9 TICKET ticket", Repeated("TICKET")),
            // Structure before values: the unknown option wins over the bad TOKENS.
            ("8 9 TOKENS x FOO", UnknownOption(Command::Take)),
        ];
        for (args, expected) in cases {
            assert_eq!(take(args), Err(*expected), "args {args:?}");
            assert!(expected.to_string().starts_with("ERR "), "{expected}");
        }
    }

    #[test]
    fn largest_fill_is_accepted() {
        // 315360000 tokens at 1/s refill in exactly 10 years.
        assert!(take("315360000 1").is_ok());
        assert!(take("1000000000000000 1000000000").is_ok());
    }

    #[test]
    fn non_utf8_bytes_are_rejected_not_decoded() {
        let args: [&[u8]; 2] = [b"\xff", b"9"];
        assert_eq!(TakeArgs::parse(&args), Err(ArgError::Capacity));
        let args: [&[u8]; 4] = [b"8", b"9", b"TOK\xffENS", b"1"];
        assert_eq!(
            TakeArgs::parse(&args),
            Err(ArgError::UnknownOption(Command::Take))
        );
    }

    #[test]
    fn pause_peek_and_give() {
        use ArgError::*;
        let pause = |t: &str| PauseArgs::parse(&words(t));
        assert_eq!(pause("8 9 1500").map(|a| a.pause_ms), Ok(1500));
        assert_eq!(
            pause("8 9 315360000000").map(|a| a.pause_ms),
            Ok(MAX_WAIT_MS)
        );
        for (text, expected) in [
            ("8 9", Arity(Command::Pause)),
            ("8 9 1 2", Arity(Command::Pause)),
            ("0 9 1", Capacity),
            ("8 9 0", PauseMs),
            ("8 9 315360000001", PauseMs),
            ("8 9 1.5", PauseMs),
        ] {
            assert_eq!(pause(text), Err(expected), "{text}");
        }

        assert!(parse_peek(&words("8 9")).is_ok());
        assert_eq!(parse_peek(&words("8")), Err(Arity(Command::Peek)));
        assert_eq!(
            parse_peek(&words("8 9 TOKENS 0")),
            Err(Arity(Command::Peek))
        );
        assert_eq!(parse_peek(&words("8 x")), Err(Rate));

        let give = |t: &str| GiveArgs::parse(&words(t));
        let args = give("8 9 3 1764547200000123").unwrap();
        assert_eq!((args.tokens, args.ticket_us), (3, 1_764_547_200_000_123));
        assert_eq!(
            give("8 9 0 9223372036854775").map(|a| a.ticket_us),
            Ok(MAX_TICKET_US)
        );
        for (text, expected) in [
            ("8 9 3", Arity(Command::Give)),
            ("8 9 9 1", GiveTokens { capacity: 8 }),
            ("8 9 x 1", GiveTokens { capacity: 8 }),
            ("8 9 1 -1", Ticket),
            ("8 9 1 9223372036854776", Ticket),
            ("8 9 1 1.5", Ticket),
        ] {
            assert_eq!(give(text), Err(expected), "{text}");
        }
    }

    #[test]
    fn mtake_shape_keys_and_options() {
        use ArgError::*;
        let mtake = |t: &str| MTakeArgs::parse(&words(t));
        let args = mtake("2 {s}:a {s}:b 10 10 1 25 5 2 MAXWAIT 700").unwrap();
        assert_eq!(args.max_wait_ms, 700);
        let limits: Vec<(u64, u64)> = args
            .limits()
            .iter()
            .map(|l| (l.quota.capacity, l.tokens))
            .collect();
        assert_eq!(limits, [(10, 1), (25, 2)]);
        assert_eq!(mtake("1 a 8 9 0").map(|a| a.limits().len()), Ok(1));

        let sixteen = (0..16).map(|i| format!("k{i} ")).collect::<String>();
        let triples = "8 9 1 ".repeat(16);
        assert_eq!(
            mtake(&format!("16 {sixteen} {triples}")).map(|a| a.limits().len()),
            Ok(16)
        );
        for (text, expected) in [
            ("", Arity(Command::MTake)),
            ("0 a 8 9 1", NumKeys),
            ("17 a 8 9 1", NumKeys),
            ("x a 8 9 1", NumKeys),
            ("2 a b 8 9 1", Triples { keys: 2 }),
            ("2 a", Triples { keys: 2 }),
            ("2 a a 8 9 1 8 9 1", DuplicateKey),
            ("2 a b 8 9 1 0 9 1", Capacity),
            ("2 a b 8 9 9 8 9 1", Tokens { capacity: 8 }),
            ("1 a 8 9 1 TOKENS 1", UnknownOption(Command::MTake)),
            ("1 a 8 9 1 MAXWAIT", MissingValue("MAXWAIT")),
            ("1 a 8 9 1 MAXWAIT 1 MAXWAIT", MissingValue("MAXWAIT")),
            ("1 a 8 9 1 MAXWAIT 1 maxwait 2", Repeated("MAXWAIT")),
            ("1 a 8 9 1 MAXWAIT -1", MaxWait),
        ] {
            assert_eq!(mtake(text), Err(expected), "{text}");
        }
    }
}
