//! Where a pause (and a slot freed) is announced: a shard channel in the bucket's own hash
//! slot, so that in Redis Cluster the announcement (`SPUBLISH`) stays on the shard that holds
//! the bucket and a client subscribes where it already sends its calls.

use crate::gcra::ceil_ms;
use crate::limits::{
    LATEST_STATE_AHEAD_NS, MAX_SLOT_ID, MAX_TICKET_US, MAX_WAIT_MS, MIN_FACTOR_BP,
};
use crate::line::Handed;
use crate::state::FULL_FACTOR_BP;

/// What THROTTLE.PAUSE, CUT and SYNC announce when they make a bucket's pause last longer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announcement {
    /// The pause lasts this long from now.
    pub pause_ns: i64,
    /// The bucket's state after the call, as a ticket (µs, rounded down): every reservation
    /// made before the call has a ticket at most this, every one made after it a greater one.
    pub ticket_us: i64,
    /// The rate's factor after the call, in basis points (10 000: not cut).
    pub factor_bp: u16,
}

impl Announcement {
    /// The message published: `<pause_ms> <ticket_us> <factor_bp>`, the pause rounded up to
    /// whole ms. Clients that read only the first word (the pause) still read it right.
    pub fn message(&self) -> String {
        format!(
            "{} {} {}",
            ceil_ms(self.pause_ns),
            self.ticket_us,
            self.factor_bp
        )
    }
}

/// What a call announces on its bucket's channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// THROTTLE.PAUSE, CUT or SYNC made the bucket's pause last longer.
    Pause(Announcement),
    /// THROTTLE.RELEASE ... INFLIGHT n freed a slot of a table that held `n`: a caller refused
    /// for want of a slot may look again.
    SlotFreed,
    /// A release (or a lease run out) handed a slot to the head of the line: that waiter
    /// goes ahead, nobody else needs to look.
    Handed(Handed),
}

/// The message of [`Message::SlotFreed`]: one word, which a reader of pause announcements
/// (whose first word is a number) ignores.
pub const SLOT_FREED: &str = "freed";

/// The first word of [`Message::Handed`]: `handed <id> <wait_ms>`, the waiter's ticket (now its
/// slot's id) and how long until its tokens are there, rounded up.
pub(crate) const SLOT_HANDED: &str = "handed";

impl Message {
    /// The message published.
    pub fn text(&self) -> String {
        match self {
            Message::Pause(heard) => heard.message(),
            Message::SlotFreed => SLOT_FREED.to_owned(),
            Message::Handed(handed) => {
                format!("{SLOT_HANDED} {} {}", handed.id, ceil_ms(handed.wait_ns))
            }
        }
    }
}

/// A message read back from a bucket's channel, as a server could have sent it: what
/// [`Message::text`] writes, or an older server's pause of one word (`<pause_ms>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Announced {
    /// A pause, from when it was published; the bucket's state right after it (µs, a
    /// `TICKET`) and its rate factor, from servers that say them.
    Pause {
        /// How long the pause lasts, ms.
        pause_ms: u64,
        /// Every reservation made before the pause has a ticket at most this.
        state_us: Option<u64>,
        /// The rate factor after the call, in basis points (10 000: not cut).
        factor_bp: Option<u16>,
    },
    /// [`Message::SlotFreed`].
    SlotFreed,
    /// [`Message::Handed`]: the waiter's ticket, now its slot's id, and the ms until its
    /// tokens are there.
    Handed {
        /// The waiter's ticket.
        id: u64,
        /// Until its tokens are there, ms.
        wait_ms: u64,
    },
}

impl Announced {
    /// Reads a message heard when the wall clock read `now_us` (µs since the Unix epoch).
    /// Anyone who may publish on the channel can say anything on it, so a message no server
    /// could have sent is `None`: a pause past the longest `THROTTLE.PAUSE`, a state farther
    /// ahead of the clock than any bucket's can be (or past the largest ticket), a factor
    /// outside a cut's range, a ticket no slot can have, a hand-off's wait past the longest
    /// take's, or any other word.
    pub fn parse(message: &[u8], now_us: u64) -> Option<Announced> {
        let text = std::str::from_utf8(message).ok()?;
        if text == SLOT_FREED {
            return Some(Announced::SlotFreed);
        }
        let mut words = text.split(' ');
        let first = words.next()?;
        let mut number = || -> Option<Option<u64>> {
            match words.next() {
                None => Some(None),
                Some(word) => Some(Some(word.parse().ok()?)),
            }
        };
        let announced = if first == SLOT_HANDED {
            let (id, wait_ms) = (number()??, number()??);
            let fits = (1..MAX_SLOT_ID).contains(&id) && wait_ms <= MAX_WAIT_MS;
            fits.then_some(Announced::Handed { id, wait_ms })?
        } else {
            let pause_ms: u64 = first.parse().ok()?;
            let (state_us, factor_bp) = (number()?, number()?);
            let latest_us = now_us.saturating_add(LATEST_STATE_AHEAD_NS.unsigned_abs() / 1000);
            let factor_bp = match factor_bp {
                None => None,
                Some(f) => Some(
                    u16::try_from(f)
                        .ok()
                        .filter(|f| (MIN_FACTOR_BP..=FULL_FACTOR_BP).contains(f))?,
                ),
            };
            let in_range = pause_ms <= MAX_WAIT_MS
                && state_us.is_none_or(|s| s <= latest_us.min(MAX_TICKET_US));
            in_range.then_some(Announced::Pause {
                pause_ms,
                state_us,
                factor_bp,
            })?
        };
        // Nothing after the last word a server writes.
        number()?.is_none().then_some(announced)
    }
}

/// The prefix of every pause channel.
pub(crate) const CHANNEL_PREFIX: &[u8] = b"throttle:pause:";

/// The shard channel THROTTLE.PAUSE, CUT and SYNC announce a pause of `key` on (the message is
/// an [`Announcement`]), in the same hash slot as `key`:
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

/// The ACL channel patterns (each for an `&` rule) that give a user whose keys are
/// `~key_pattern` the pause channels of those keys, and not every fleet's (`&throttle:pause:*`
/// would let one fleet announce forged pauses on another's quotas). ACL patterns are globs in
/// which `{` and `}` are literal, and the prefix holds no glob character, so each pattern
/// below matches a channel exactly when `key_pattern` matches the key it was made from:
/// - `throttle:pause:{PATTERN}`, [`pause_channel`] of the pattern, for the keys without a hash
///   tag (left out when the pattern has a tag of its own: every key it matches then has one);
/// - `throttle:pause:PATTERN`, for the keys it matches that have a hash tag.
///
/// Not covered: a key that has no hash tag and holds a `}` (or is empty), whose channel is the
/// key itself. Also matched: the channels of the same keys in braces (`{quota:a:x}` has the
/// channel of `quota:a:x`), which no other fleet should be given.
pub fn pause_channel_patterns(key_pattern: &[u8]) -> Vec<Vec<u8>> {
    let mut patterns = Vec::with_capacity(2);
    if !has_hash_tag(key_pattern) {
        patterns.push([CHANNEL_PREFIX, b"{", key_pattern, b"}"].concat());
    }
    patterns.push([CHANNEL_PREFIX, key_pattern].concat());
    patterns
}

/// Whether Redis hashes `key` by a tag: a `{`, then a `}` after it with something between.
fn has_hash_tag(key: &[u8]) -> bool {
    hash_tag(key).is_some()
}

/// The hash tag Redis hashes `key` by: what is between its first `{` and the first `}` after
/// it, when that is not empty.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let after = key.get(open + 1..)?;
    let close = after.iter().position(|&b| b == b'}')?;
    after.get(..close).filter(|tag| !tag.is_empty())
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag, or of the whole key,
/// modulo 16 384, as the server computes it.
pub fn key_slot(key: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in hash_tag(key).unwrap_or(key) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16_384
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announcement_reads_pause_ticket_and_factor() {
        let cases = [
            (
                1_000_000_000,
                1_700_000_000_123_456,
                10_000,
                "1000 1700000000123456 10000",
            ),
            (1, 0, 5_000, "1 0 5000"),
            (1_000_001, 42, 100, "2 42 100"),
        ];
        for (pause_ns, ticket_us, factor_bp, text) in cases {
            let heard = Announcement {
                pause_ns,
                ticket_us,
                factor_bp,
            };
            assert_eq!(heard.message(), text);
        }
    }

    /// The wall clock when the tables' messages are heard: 2024-12-04, µs.
    const NOW_US: u64 = 1_733_300_000_000_000;

    #[test]
    fn what_a_server_writes_reads_back() {
        let pause = Message::Pause(Announcement {
            pause_ns: 250_000_000,
            ticket_us: 1_733_300_000_123_456,
            factor_bp: 5_000,
        });
        let handed = Message::Handed(Handed {
            id: 1_733_300_000_000_001,
            wait_ns: 1_500_000,
        });
        let cases = [
            (
                pause,
                Announced::Pause {
                    pause_ms: 250,
                    state_us: Some(1_733_300_000_123_456),
                    factor_bp: Some(5_000),
                },
            ),
            (Message::SlotFreed, Announced::SlotFreed),
            (
                handed,
                Announced::Handed {
                    id: 1_733_300_000_000_001,
                    wait_ms: 2,
                },
            ),
        ];
        for (message, announced) in cases {
            let text = message.text();
            assert_eq!(
                Announced::parse(text.as_bytes(), NOW_US),
                Some(announced),
                "{text}"
            );
        }
        // An older server's pause: one word.
        assert_eq!(
            Announced::parse(b"1500", NOW_US),
            Some(Announced::Pause {
                pause_ms: 1500,
                state_us: None,
                factor_bp: None
            })
        );
    }

    #[test]
    fn messages_no_server_could_send_are_refused() {
        // The longest pause, the farthest state, the factors and hand-offs a server can send.
        let longest = format!("{MAX_WAIT_MS} {NOW_US} 10000");
        let far = NOW_US + LATEST_STATE_AHEAD_NS.unsigned_abs() / 1000;
        let farthest = format!("1 {far} {MIN_FACTOR_BP}");
        let last_id = format!("handed {} {MAX_WAIT_MS}", MAX_SLOT_ID - 1);
        for good in [
            longest.as_str(),
            farthest.as_str(),
            "0",
            "1 0 10000",
            "handed 1 0",
            last_id.as_str(),
        ] {
            assert!(
                Announced::parse(good.as_bytes(), NOW_US).is_some(),
                "{good}"
            );
        }
        let too_long = format!("{} {NOW_US} 10000", MAX_WAIT_MS + 1);
        let too_far = format!("1 {} 10000", far + 1);
        let below_floor = format!("1 {NOW_US} {}", MIN_FACTOR_BP - 1);
        let no_such_id = format!("handed {MAX_SLOT_ID} 0");
        let handed_too_long = format!("handed 5 {}", MAX_WAIT_MS + 1);
        for bad in [
            "86400000 18446744073709551615 10000", // a ticket no clock reaches: a frozen fleet
            "1 18446744073709551615 5000",         // a forged cut
            too_long.as_str(),
            too_far.as_str(),
            below_floor.as_str(),
            "1 1733300000000000 10001", // a factor above the configured rate
            "1 1733300000000000 0",
            "1 1733300000000000 65536",
            "18446744073709551616", // past u64
            "",
            "x",
            "1 2 3 4",
            "-1",
            "1  2",
            "1 y",
            "freed ",
            "Freed",
            "handed",
            "handed 5",
            "handed 0 1",
            "handed 5 1 2",
            "handed -5 1",
            "handed 5 x",
            no_such_id.as_str(),
            handed_too_long.as_str(),
        ] {
            assert_eq!(Announced::parse(bad.as_bytes(), NOW_US), None, "{bad:?}");
        }
        assert_eq!(Announced::parse(b"\xff\xfe", NOW_US), None);
    }

    #[test]
    fn known_slots() {
        // From the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag is no tag: the whole key is hashed.
        assert_eq!(key_slot(b"foo{}{bar}"), 8363);
        assert_eq!(key_slot(b"{}x"), 10595);
        assert_eq!(key_slot(b"somekey"), 11058);
    }

    /// Redis's glob (`stringmatchlen`), enough of it for the patterns here: `*`, `?`, `\`.
    fn glob(pattern: &[u8], text: &[u8]) -> bool {
        match (pattern.first(), text.first()) {
            (None, None) => true,
            (Some(b'*'), _) => {
                glob(&pattern[1..], text) || (!text.is_empty() && glob(pattern, &text[1..]))
            }
            (Some(b'?'), Some(_)) => glob(&pattern[1..], &text[1..]),
            (Some(b'\\'), Some(t)) if pattern.get(1) == Some(t) => glob(&pattern[2..], &text[1..]),
            (Some(p), Some(t)) if p == t => glob(&pattern[1..], &text[1..]),
            _ => false,
        }
    }

    #[test]
    fn a_fleets_channel_patterns_match_its_keys_channels_and_no_other_fleets() {
        assert_eq!(
            pause_channel_patterns(b"quota:a:*"),
            [
                b"throttle:pause:{quota:a:*}".to_vec(),
                b"throttle:pause:quota:a:*".to_vec()
            ]
        );
        assert_eq!(
            pause_channel_patterns(b"{tenant:a}:*"),
            [b"throttle:pause:{tenant:a}:*".to_vec()]
        );
        let cases: [(&[u8], &[u8], bool); 12] = [
            (b"quota:a:*", b"quota:a:x", true),
            (b"quota:a:*", b"quota:a:{t}:x", true),
            (b"quota:a:*", b"quota:a:x y", true),
            (b"quota:a:*", b"quota:b:x", false),
            (b"quota:a:*", b"quota:b:{t}:x", false),
            (b"quota:a:*", b"{quota:b:x}", false),
            (b"quota:a:*", b"quota:ab:x", false),
            (b"quota:a:?", b"quota:a:x", true),
            (b"{tenant:a}:*", b"{tenant:a}:x", true),
            (b"{tenant:a}:*", b"{tenant:b}:x", false),
            (b"{tenant:a}:*", b"tenant:a:x", false),
            (b"q:{tenant:a}:*", b"q:{tenant:a}:x", true),
        ];
        for (pattern, key, mine) in cases {
            let channel = pause_channel(key);
            let matched = pause_channel_patterns(pattern)
                .iter()
                .any(|p| glob(p, &channel));
            assert_eq!(
                matched,
                mine,
                "{} -> {}",
                String::from_utf8_lossy(pattern),
                String::from_utf8_lossy(&channel)
            );
            // The channel is the key's exactly when the key pattern matches the key.
            assert_eq!(glob(pattern, key), mine);
        }
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
            assert_eq!(key_slot(&channel), key_slot(key), "{key:?} -> {channel:?}");
        }
        assert_eq!(pause_channel(b"quota:pix"), b"throttle:pause:{quota:pix}");
        assert_eq!(
            pause_channel(b"{pix}:second"),
            b"throttle:pause:{pix}:second"
        );
        assert_eq!(pause_channel(b"a}b"), b"a}b");
    }
}
