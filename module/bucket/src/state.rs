//! The stored state: the instant the bucket is full again, as decimal nanoseconds since the
//! Unix epoch. A plain integer string, so Redis keeps it int-encoded (as small as
//! `SET key <int>`), and RDB, AOF, DUMP/RESTORE, COPY and replication carry it unchanged.

use std::fmt;

/// The key holds a string that THROTTLE.TAKE did not write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateError;

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "ERR the key holds a string that is not a THROTTLE bucket (expected the integer \
             THROTTLE.TAKE writes); use another key, or DEL this one to start a full bucket",
        )
    }
}

/// Reads a stored state: ASCII digits only (at most 19), a value in `0..=i64::MAX`.
pub fn parse_state(bytes: &[u8]) -> Result<i64, StateError> {
    if bytes.is_empty() || bytes.len() > 19 || !bytes.iter().all(u8::is_ascii_digit) {
        return Err(StateError);
    }
    bytes.iter().try_fold(0i64, |acc, &d| {
        acc.checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(d - b'0')))
            .ok_or(StateError)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_the_module_writes() {
        assert_eq!(parse_state(b"0"), Ok(0));
        assert_eq!(
            parse_state(b"1764480000123456789"),
            Ok(1_764_480_000_123_456_789)
        );
        assert_eq!(parse_state(b"9223372036854775807"), Ok(i64::MAX));
    }

    #[test]
    fn rejects_everything_else() {
        let bad: [&[u8]; 9] = [
            b"",
            b"-1",
            b"+1",
            b"1.5",
            b" 1",
            b"9223372036854775808",
            b"99999999999999999999",
            b"abc",
            b"\x00\xff",
        ];
        for bytes in bad {
            assert_eq!(parse_state(bytes), Err(StateError), "state {bytes:?}");
        }
    }
}
