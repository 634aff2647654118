//! Where a pause is announced: a shard channel in the bucket's own hash slot, so that in Redis
//! Cluster the announcement (`SPUBLISH`) stays on the shard that holds the bucket and a client
//! subscribes where it already sends its calls.

/// The prefix of every pause channel.
pub(crate) const CHANNEL_PREFIX: &[u8] = b"throttle:pause:";

/// The shard channel THROTTLE.PAUSE, CUT and SYNC announce a pause of `key` on (the message is
/// the pause's length from then, in whole ms), in the same hash slot as `key`:
/// - a key with a hash tag (`{pix}:second`): `throttle:pause:` and the key, the same tag;
/// - a key without one: `throttle:pause:{key}`, the whole key as the tag;
/// - the rare key that has none and cannot be one (empty, or holding a `}` that would end the
///   tag early): the key itself.
pub fn pause_channel(key: &[u8]) -> Vec<u8> {
    if has_hash_tag(key) {
        return [CHANNEL_PREFIX, key].concat();
    }
    if !key.is_empty() && !key.contains(&b'}') {
        return [CHANNEL_PREFIX, b"{", key, b"}"].concat();
    }
    key.to_vec()
}

/// Whether Redis hashes `key` by a tag: a `{`, then a `}` after it with something between.
fn has_hash_tag(key: &[u8]) -> bool {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return false;
    };
    let after = key.get(open + 1..).unwrap_or_default();
    after
        .iter()
        .position(|&b| b == b'}')
        .is_some_and(|close| close > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis Cluster's key slot: CRC16 (XMODEM) of the tag or the key, mod 16384.
    fn slot(key: &[u8]) -> u16 {
        let hashed = match key.iter().position(|&b| b == b'{') {
            Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
                Some(close) if close > 0 => &key[open + 1..open + 1 + close],
                _ => key,
            },
            None => key,
        };
        let mut crc: u16 = 0;
        for &byte in hashed {
            crc ^= u16::from(byte) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
            }
        }
        crc % 16384
    }

    #[test]
    fn known_slots() {
        // From the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(slot(b"123456789"), 12739);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
    }

    #[test]
    fn every_channel_is_in_its_keys_slot() {
        let keys: [&[u8]; 14] = [
            b"quota:pix",
            b"{pix}:second",
            b"a{b",
            b"a{}b",
            b"a}b",
            b"}",
            b"{",
            b"{}",
            b"{}{x}",
            b"",
            b"x{y}z{w}",
            b"\xff\x00{",
            b"plain key with spaces",
            b"q:{tenant:42}:minute",
        ];
        for key in keys {
            let channel = pause_channel(key);
            assert_eq!(slot(&channel), slot(key), "{key:?} -> {channel:?}");
        }
        assert_eq!(pause_channel(b"quota:pix"), b"throttle:pause:{quota:pix}");
        assert_eq!(
            pause_channel(b"{pix}:second"),
            b"throttle:pause:{pix}:second"
        );
        assert_eq!(pause_channel(b"a}b"), b"a}b");
    }
}
