//! The refill rate: parsed exactly from its decimal text, kept as the refill time of one token.

use crate::NS_PER_S;

/// A refill rate, kept as the time one token takes to refill, in whole nanoseconds.
///
/// The interval is rounded **up**, so the effective rate (`1e9 / interval` tokens per second)
/// is never above the one asked for: 9/s becomes one token per 111 111 112 ns. The error is
/// below one part in a thousand for rates up to a million per second; above that, prefer a
/// coarser token (KiB rather than bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interval {
    ns: i64,
}

/// Digits after the decimal point that count; later ones are dropped, which can only lower the
/// rate (a longer interval: fewer tokens, never more). At rates >= 10^-6 they change the
/// interval by less than a thousandth of a nanosecond.
const FRACTION_DIGITS: usize = 24;
/// Most digits accepted before it (leading zeros aside): 1000000000 has ten.
const MAX_INTEGER_DIGITS: u32 = 10;

impl Interval {
    /// Parses a decimal such as `10`, `0.5` or `35791394.1` (tokens per second), exactly.
    ///
    /// Returns `None` for anything else: signs, exponents, spaces, empty text, or a rate
    /// outside [`MIN_RATE`](crate::MIN_RATE)..=[`MAX_RATE`](crate::MAX_RATE).
    pub fn from_rate(text: &[u8]) -> Option<Interval> {
        parse_rate(text).map(|(interval, _)| interval)
    }

    /// Nanoseconds one token takes to refill (at least 1, at most 10^15).
    pub fn ns(self) -> i64 {
        self.ns
    }
}

/// A rate as the shortest decimal of the same value: `007.250` is `7.25`, and digits after the
/// 24th are dropped (they never counted). At most 10 + 1 + 24 bytes, kept inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Decimal {
    len: u8,
    bytes: [u8; DECIMAL_LEN],
}

const DECIMAL_LEN: usize = MAX_INTEGER_DIGITS as usize + 1 + FRACTION_DIGITS;

impl Decimal {
    fn new(int_part: &[u8], frac_part: &[u8]) -> Option<Decimal> {
        let mut decimal = Decimal {
            len: 0,
            bytes: [0; DECIMAL_LEN],
        };
        let int_part = if int_part.is_empty() { b"0" } else { int_part };
        let point: &[u8] = if frac_part.is_empty() { b"" } else { b"." };
        for part in [int_part, point, frac_part] {
            let start = usize::from(decimal.len);
            let end = start + part.len();
            decimal.bytes.get_mut(start..end)?.copy_from_slice(part);
            decimal.len = u8::try_from(end).ok()?;
        }
        Some(decimal)
    }

    /// The decimal's text: ASCII digits and at most one point.
    pub(crate) fn as_str(&self) -> &str {
        let bytes = self.bytes.get(..usize::from(self.len)).unwrap_or_default();
        std::str::from_utf8(bytes).unwrap_or_default()
    }
}

impl std::fmt::Debug for Decimal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses a rate: its interval, and the shortest decimal of the same value.
pub(crate) fn parse_rate(text: &[u8]) -> Option<(Interval, Decimal)> {
    let (int_part, frac_part) = match text.iter().position(|&b| b == b'.') {
        Some(dot) => (text.get(..dot)?, text.get(dot + 1..)?),
        None => (text, &[][..]),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let int_part = trim_start(int_part, b'0');
    let frac_part = trim_end(frac_part, b'0');
    if digits(int_part)? > MAX_INTEGER_DIGITS || digits(frac_part).is_none() {
        return None;
    }
    // Above MAX_RATE, however little: checked on every digit, before any are dropped.
    if int_part.len() == 10 && !frac_part.is_empty() {
        return None;
    }
    let frac_part = trim_end(frac_part.get(..FRACTION_DIGITS).unwrap_or(frac_part), b'0');
    // rate = mantissa / 10^scale, exactly. Both fit in u128 (< 10^35).
    let scale = frac_part.len() as u32;
    let mantissa = int_part
        .iter()
        .chain(frac_part)
        .fold(0u128, |acc, &d| acc * 10 + u128::from(d - b'0'));
    let unit = 10u128.pow(scale);
    // MIN_RATE (1e-6) <= rate <= MAX_RATE (1e9).
    let below_min = mantissa.checked_mul(1_000_000).is_some_and(|m| m < unit);
    if mantissa == 0 || below_min || mantissa > 1_000_000_000 * unit {
        return None;
    }
    let interval = (NS_PER_S as u128 * unit).div_ceil(mantissa);
    let interval = Interval {
        ns: i64::try_from(interval).ok()?,
    };
    Some((interval, Decimal::new(int_part, frac_part)?))
}

/// Number of bytes if they are all ASCII digits, else `None`.
fn digits(text: &[u8]) -> Option<u32> {
    if text.iter().all(u8::is_ascii_digit) {
        u32::try_from(text.len()).ok()
    } else {
        None
    }
}

fn trim_start(text: &[u8], byte: u8) -> &[u8] {
    let start = text.iter().position(|&b| b != byte).unwrap_or(text.len());
    text.get(start..).unwrap_or_default()
}

fn trim_end(text: &[u8], byte: u8) -> &[u8] {
    let end = text.iter().rposition(|&b| b != byte).map_or(0, |i| i + 1);
    text.get(..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(text: &str) -> Option<i64> {
        Interval::from_rate(text.as_bytes()).map(Interval::ns)
    }

    #[test]
    fn intervals_round_up() {
        let cases = [
            ("9", Some(111_111_112)),
            ("10", Some(100_000_000)),
            ("0.5", Some(2_000_000_000)),
            (".5", Some(2_000_000_000)),
            ("5.", Some(200_000_000)),
            ("007.250", Some(137_931_035)),
            ("35791394.1", Some(28)),
            ("1000000000", Some(1)),
            ("1000000000.000", Some(1)),
            ("999999999.9", Some(2)),
            ("0.000001", Some(1_000_000_000_000_000)),
            ("0.0000010", Some(1_000_000_000_000_000)),
            ("0.0000015", Some(666_666_666_666_667)),
            ("0.000000000000000001000000", None),
            // More digits than a double prints are fine: 1/3600 as Python, JS and Rust print it.
            ("0.0002777777777777778", Some(3_600_000_000_000)),
            (
                "0.00027777777777777777777777777777",
                Some(3_600_000_000_001),
            ),
            (
                "0.000001000000000000000000000000000000",
                Some(1_000_000_000_000_000),
            ),
            ("0.000000999999999999999999999999999999", None),
            ("999999999.999999999999999999999999999", Some(2)),
        ];
        for (text, expected) in cases {
            assert_eq!(interval(text), expected, "rate {text:?}");
        }
    }

    #[test]
    fn the_decimal_is_the_shortest_text_of_the_same_value() {
        let cases = [
            ("9", "9"),
            ("007.250", "7.25"),
            (".5", "0.5"),
            ("5.", "5"),
            ("0.0000010", "0.000001"),
            ("1000000000.000", "1000000000"),
            (
                "0.00027777777777777777777777777777",
                "0.000277777777777777777777",
            ),
            ("1.000000000000000000000000001", "1"),
        ];
        for (text, shortest) in cases {
            let (interval, decimal) = parse_rate(text.as_bytes()).expect(text);
            assert_eq!(decimal.as_str(), shortest, "rate {text:?}");
            // The same value: the same interval.
            assert_eq!(Interval::from_rate(shortest.as_bytes()), Some(interval));
        }
    }

    #[test]
    fn rejects_what_is_not_a_plain_decimal_in_range() {
        let bad: [&[u8]; 20] = [
            b"",
            b".",
            b"0",
            b"0.0",
            b"-1",
            b"+1",
            b"1e3",
            b" 1",
            b"1 ",
            b"1.2.3",
            b"abc",
            b"nan",
            b"inf",
            b"0.0000009",
            b"1000000000.1",
            b"1000000000.000000000000000000000000001",
            b"99999999999",
            b"1,5",
            b"\xff\xfe",
            b"0x10",
        ];
        for text in bad {
            assert_eq!(Interval::from_rate(text), None, "rate {text:?}");
        }
    }
}
