//! The stored state: the instant the bucket is full again, in ns since the Unix epoch, as 8
//! bytes (the `i64`, little-endian). The module reads and writes it in place, and 8 bytes is
//! the smallest string a server keeps outside an integer encoding (which the key API cannot
//! write); RDB, AOF, DUMP/RESTORE, COPY and replication carry it unchanged.
//!
//! Earlier releases stored the same instant as decimal digits, which still read, so buckets
//! survive an upgrade. A string of exactly 8 bytes is always the binary state.

use std::fmt;

use crate::limits::{EARLIEST_STATE_NS, LATEST_STATE_AHEAD_NS, MAX_NOW_NS};

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

/// Reads a stored state, seen from the server's clock `now_ns`: 8 bytes holding the `i64`
/// (or, as earlier releases wrote it, 1 to 19 ASCII digits of one) of an instant that a
/// command could have written.
///
/// A command writes the instant a bucket is full again: never before 2020
/// ([`EARLIEST_STATE_NS`]), and never more than 20 years after its clock (a full refill plus
/// the longest reservation). So any 8 bytes are not a bucket: `abcdefgh` reads as the year 2208
/// and `12345678` as 2098, which a take would have treated as debt until then, and a foreign
/// binary 12345 as 1970, which a take would have overwritten. Refused: an instant before 2020
/// (while the clock is past it; a server whose clock reads earlier keeps its own buckets), or
/// more than [`LATEST_STATE_AHEAD_NS`] (21 years) after the clock. The extra year is for a
/// clock that lags the one that wrote the bucket: it reads the bucket as stricter, never as
/// foreign. Two comparisons per read.
pub fn parse_state(bytes: &[u8], now_ns: i64) -> Result<i64, StateError> {
    let state = decode(bytes)?;
    let now = now_ns.clamp(0, MAX_NOW_NS);
    let too_early = state < EARLIEST_STATE_NS && now >= EARLIEST_STATE_NS;
    if too_early || state - now > LATEST_STATE_AHEAD_NS {
        return Err(StateError);
    }
    Ok(state)
}

fn decode(bytes: &[u8]) -> Result<i64, StateError> {
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

    /// 2026-12-01T00:00:00Z.
    const NOW: i64 = 1_796_083_200 * 1_000_000_000;
    const YEAR: i64 = 365 * 86_400 * 1_000_000_000;

    #[test]
    fn reads_what_it_writes() {
        for state in [EARLIEST_STATE_NS, NOW - YEAR, NOW, NOW + 20 * YEAR] {
            assert_eq!(parse_state(&encode_state(state), NOW), Ok(state));
        }
        assert_eq!(
            encode_state(0x0102_0304_0506_0708),
            [8, 7, 6, 5, 4, 3, 2, 1],
            "little-endian"
        );
    }

    #[test]
    fn reads_the_digits_of_earlier_releases() {
        assert_eq!(
            parse_state(b"1796083200123456789", NOW),
            Ok(1_796_083_200_123_456_789)
        );
        assert_eq!(
            parse_state(b"0001796083200123456", NOW),
            Err(StateError),
            "1.8e15 ns is 1970"
        );
    }

    #[test]
    fn refuses_instants_no_command_writes() {
        let bad: [&[u8]; 7] = [
            b"abcdefgh",             // the year 2208
            b"12345678",             // 2098
            &12345i64.to_le_bytes(), // 1970
            &0i64.to_le_bytes(),     // 1970
            &(EARLIEST_STATE_NS - 1).to_le_bytes(),
            &(NOW + LATEST_STATE_AHEAD_NS + 1).to_le_bytes(),
            &i64::MAX.to_le_bytes(),
        ];
        for bytes in bad {
            assert_eq!(parse_state(bytes, NOW), Err(StateError), "state {bytes:?}");
        }
        let latest = NOW + LATEST_STATE_AHEAD_NS;
        assert_eq!(parse_state(&latest.to_le_bytes(), NOW), Ok(latest));
    }

    #[test]
    fn a_clock_before_2020_keeps_its_own_buckets() {
        let early = EARLIEST_STATE_NS - 10 * YEAR;
        let state = early + 5_000_000_000;
        assert_eq!(parse_state(&encode_state(state), early), Ok(state));
        assert_eq!(parse_state(&encode_state(state), NOW), Err(StateError));
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
            assert_eq!(parse_state(bytes, NOW), Err(StateError), "state {bytes:?}");
        }
    }
}
