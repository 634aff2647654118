//! The stored state: the instant the bucket is full again, in ns since the Unix epoch, as 8
//! bytes (the `i64`, little-endian). The module reads and writes it in place, and 8 bytes is
//! the smallest string a server keeps outside an integer encoding (which the key API cannot
//! write); RDB, AOF, DUMP/RESTORE, COPY and replication carry it unchanged.
//!
//! Earlier releases stored the same instant as decimal digits, which still read, so buckets
//! survive an upgrade. A string of exactly 8 bytes is always the binary state.

use std::fmt;

/// Bytes in a stored state.
pub const STATE_LEN: usize = 8;

/// The key holds a string that THROTTLE.TAKE did not write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateError;

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "ERR the key holds a string that is not a THROTTLE bucket (expected the 8-byte \
             state THROTTLE.TAKE writes); use another key, or DEL this one to start a full \
             bucket",
        )
    }
}

/// The bytes to store for `state`.
pub fn encode_state(state: i64) -> [u8; STATE_LEN] {
    state.to_le_bytes()
}

/// Reads a stored state: 8 bytes holding a value in `0..=i64::MAX`, or (as earlier releases
/// wrote it) 1 to 19 ASCII digits of one.
pub fn parse_state(bytes: &[u8]) -> Result<i64, StateError> {
    if let Ok(binary) = <[u8; STATE_LEN]>::try_from(bytes) {
        let state = i64::from_le_bytes(binary);
        return if state >= 0 {
            Ok(state)
        } else {
            Err(StateError)
        };
    }
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
    fn reads_what_it_writes() {
        for state in [0, 1, 1_764_480_000_123_456_789, i64::MAX] {
            assert_eq!(parse_state(&encode_state(state)), Ok(state));
        }
        assert_eq!(
            encode_state(0x0102_0304_0506_0708),
            [8, 7, 6, 5, 4, 3, 2, 1],
            "little-endian"
        );
    }

    #[test]
    fn reads_the_digits_of_earlier_releases() {
        assert_eq!(parse_state(b"0"), Ok(0));
        assert_eq!(
            parse_state(b"1764480000123456789"),
            Ok(1_764_480_000_123_456_789)
        );
        assert_eq!(parse_state(b"9223372036854775807"), Ok(i64::MAX));
    }

    #[test]
    fn rejects_everything_else() {
        let bad: [&[u8]; 10] = [
            b"",
            b"-1",
            b"+1",
            b"1.5",
            b" 1",
            b"9223372036854775808",
            b"99999999999999999999",
            b"abc",
            b"\x00\xff",
            &(-1i64).to_le_bytes(),
        ];
        for bytes in bad {
            assert_eq!(parse_state(bytes), Err(StateError), "state {bytes:?}");
        }
    }
}
