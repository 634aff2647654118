//! What a pause announcement says, and whether it covers a reserved call: pure, with time as
//! an argument.
//!
//! The server publishes a message on a bucket's pause channel each time a call makes the
//! bucket's pause last longer (THROTTLE.PAUSE, a cut, a sync that found nothing left):
//! `<pause_ms>`, or `<pause_ms> <state_us> <factor_bp>` from servers that say more (the bucket's
//! state right after the call, in the units of a `TICKET`, and its rate factor).
//!
//! Anyone who may publish on the channel can say anything on it, so what is heard is a hint:
//! a message whose fields no server could have sent is dropped here, and one that would hold a
//! call back is confirmed with the server before it does (the limiter's `watch`).

use throttle_bucket::{FULL_FACTOR_BP, LATEST_STATE_AHEAD_NS, MAX_WAIT_MS, MIN_FACTOR_BP};
use tokio::time::{Duration, Instant};

/// One announcement, as heard at `at` (this process's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Heard {
    /// When this process heard it.
    pub(crate) at: Instant,
    /// How long the bucket is paused for, from when the server published it.
    pub(crate) pause: Duration,
    /// The bucket's state right after the pause (µs since the Unix epoch, as a `TICKET`), where
    /// the server says it: every reservation made before the pause has a ticket at most this.
    pub(crate) state_us: Option<u64>,
    /// The rate factor after the call, in basis points (10 000: not cut).
    pub(crate) factor_bp: Option<u64>,
}

impl Heard {
    /// Reads a message heard at `at`, when the wall clock read `now_us` (µs since the Unix
    /// epoch); `None` for one that is not an announcement a server could have sent: a pause
    /// past the longest `THROTTLE.PAUSE`, a state farther ahead of the clock than any bucket's
    /// can be (or past the largest ticket), a factor outside the cut's range.
    pub(crate) fn parse(message: &[u8], at: Instant, now_us: u64) -> Option<Heard> {
        let text = std::str::from_utf8(message).ok()?;
        let mut words = text.split(' ');
        let pause_ms: u64 = words.next()?.parse().ok()?;
        let state_us = match words.next() {
            None => None,
            Some(word) => Some(word.parse().ok()?),
        };
        let factor_bp = match words.next() {
            None => None,
            Some(word) => Some(word.parse().ok()?),
        };
        if words.next().is_some() {
            return None;
        }
        let latest_us = now_us.saturating_add(LATEST_STATE_AHEAD_NS.unsigned_abs() / 1000);
        let in_range = pause_ms <= MAX_WAIT_MS
            && state_us.is_none_or(|s| s <= latest_us.min(throttle_bucket::MAX_TICKET_US))
            && factor_bp.is_none_or(|f| {
                (u64::from(MIN_FACTOR_BP)..=u64::from(FULL_FACTOR_BP)).contains(&f)
            });
        if !in_range {
            return None;
        }
        Some(Heard {
            at,
            pause: Duration::from_millis(pause_ms),
            state_us,
            factor_bp,
        })
    }

    /// When the pause ends, on this process's clock, at the latest: the server published it
    /// before it was heard, so the pause ends no later than this.
    pub(crate) fn ends(&self) -> Instant {
        self.at + self.pause
    }

    /// Whether the pause covers a reservation whose ticket is `ticket` and that would be sent
    /// at `send`: it was made before the pause (its ticket at most the pause's state; without
    /// the state, any reservation is taken to be) and it is sent before the pause ends, or the
    /// call also cut the rate (every reservation made before a cut is taken again at the new
    /// rate). A ticket of 0 took nothing and is never covered.
    pub(crate) fn covers(&self, ticket: u64, send: Instant) -> bool {
        if ticket == 0 {
            return false;
        }
        let before = self.state_us.is_none_or(|state| ticket <= state);
        before && (self.cut() || send < self.ends())
    }

    /// Whether it says the call cut the rate.
    pub(crate) fn cut(&self) -> bool {
        self.factor_bp
            .is_some_and(|f| f < u64::from(FULL_FACTOR_BP))
    }
}

/// The last few announcements heard on one bucket, newest last: a reservation checks them all
/// when it starts to sleep (an announcement may come in while its take is on the way back), and
/// each new one while it sleeps. Four is plenty: a pause never shortens a longer one, so a newer
/// pause covers what an older did, and only a cut followed by pauses needs the older one.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Recent {
    heard: [Option<Heard>; 4],
}

impl Recent {
    pub(crate) fn push(&mut self, heard: Heard) {
        self.heard.rotate_left(1);
        if let Some(last) = self.heard.last_mut() {
            *last = Some(heard);
        }
    }

    /// When the last pause that covers the reservation `ticket` sent at `send` ends, and
    /// whether one that covers it cut the rate, if any covers it.
    pub(crate) fn covers(&self, ticket: u64, send: Instant) -> Option<(Instant, bool)> {
        self.heard
            .iter()
            .flatten()
            .filter(|h| h.covers(ticket, send))
            .fold(None, |acc, h| {
                let (end, cut) = acc.unwrap_or((h.ends(), false));
                Some((end.max(h.ends()), cut || h.cut()))
            })
    }

    /// Whether a pause heard left the bucket's state past `ticket`: the take is no longer the
    /// last one, so THROTTLE.GIVE would give nothing back for it.
    pub(crate) fn moved_past(&self, ticket: u64) -> bool {
        self.heard
            .iter()
            .flatten()
            .any(|h| h.state_us.is_some_and(|state| state > ticket))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wall clock when the tables' messages are heard: 2024-12-04, µs.
    const NOW_US: u64 = 1_733_300_000_000_000;

    fn at(ms: u64) -> Instant {
        // Instants of one base, so the tables read as ms after it.
        thread_local!(static BASE: Instant = Instant::now());
        BASE.with(|b| *b + Duration::from_millis(ms))
    }

    #[test]
    fn messages_read_back() {
        let heard = Heard::parse(b"1500", at(0), NOW_US).unwrap();
        assert_eq!(
            (heard.pause, heard.state_us, heard.factor_bp),
            (Duration::from_millis(1500), None, None)
        );
        let heard = Heard::parse(b"250 1733300000123456 5000", at(0), NOW_US).unwrap();
        assert_eq!(heard.state_us, Some(1_733_300_000_123_456));
        assert_eq!(heard.factor_bp, Some(5000));
        for bad in [&b""[..], b"x", b"1 2 3 4", b"-1", b"1  2", b"1 y"] {
            assert_eq!(Heard::parse(bad, at(0), NOW_US), None, "{bad:?}");
        }
    }

    #[test]
    fn messages_no_server_could_send_are_dropped() {
        // The longest pause, the farthest state and the factors a server can announce.
        let longest = format!("{MAX_WAIT_MS} {NOW_US} 10000");
        let far = NOW_US + LATEST_STATE_AHEAD_NS.unsigned_abs() / 1000;
        let farthest = format!("1 {far} {MIN_FACTOR_BP}");
        for good in [longest.as_str(), farthest.as_str(), "0", "1 0 10000"] {
            assert!(
                Heard::parse(good.as_bytes(), at(0), NOW_US).is_some(),
                "{good}"
            );
        }
        let too_long = format!("{} {NOW_US} 10000", MAX_WAIT_MS + 1);
        let too_far = format!("1 {} 10000", far + 1);
        let below_floor = format!("1 {NOW_US} {}", MIN_FACTOR_BP - 1);
        for bad in [
            "86400000 18446744073709551615 10000", // the trial's freeze: a ticket no clock reaches
            "1 18446744073709551615 5000",         // the trial's forged cut
            too_long.as_str(),
            too_far.as_str(),
            below_floor.as_str(),
            "1 1733300000000000 10001", // a factor above the configured rate
            "1 1733300000000000 0",
            "18446744073709551616", // past u64
        ] {
            assert_eq!(Heard::parse(bad.as_bytes(), at(0), NOW_US), None, "{bad}");
        }
    }

    #[test]
    fn a_pause_covers_what_was_reserved_before_it_and_sent_inside_it() {
        // Heard at 100 ms: paused for 1000 ms, the state after it 5_000.
        let heard = Heard::parse(b"1000 5000 10000", at(100), NOW_US).unwrap();
        // (ticket, send at ms, covered)
        let table = [
            (4_000, 200, true),    // reserved before, sent inside
            (5_000, 1_099, true),  // the last reservation before it, sent just inside
            (5_000, 1_100, false), // sent as the pause ends: after it
            (5_001, 200, false),   // reserved after the pause: the server already counted it
            (0, 200, false),       // took nothing
        ];
        for (ticket, send, covered) in table {
            assert_eq!(
                heard.covers(ticket, at(send)),
                covered,
                "{ticket} at {send} ms"
            );
        }
    }

    #[test]
    fn a_cut_covers_every_reservation_before_it() {
        let heard = Heard::parse(b"1000 5000 2500", at(100), NOW_US).unwrap();
        assert!(heard.covers(4_000, at(60_000)));
        assert!(!heard.covers(5_001, at(200)));
    }

    #[test]
    fn without_the_state_every_reservation_sent_inside_is_covered() {
        let heard = Heard::parse(b"1000", at(100), NOW_US).unwrap();
        assert!(heard.covers(9_999_999, at(1_099)));
        assert!(!heard.covers(9_999_999, at(1_100)));
    }

    #[test]
    fn the_last_four_are_kept() {
        let mut recent = Recent::default();
        let cut = Heard::parse(b"10 5000 2500", at(0), NOW_US).unwrap();
        recent.push(cut);
        assert_eq!(
            recent.covers(4_000, at(60_000)),
            Some((at(10), true)),
            "the cut covers it"
        );
        for i in 0..3 {
            recent.push(Heard::parse(b"10 6000 10000", at(i), NOW_US).unwrap());
        }
        assert_eq!(
            recent.covers(4_000, at(60_000)),
            Some((at(10), true)),
            "still heard behind three pauses, which do not cover it (sent after them)"
        );
        assert_eq!(
            recent.covers(5_500, at(11)),
            Some((at(12), false)),
            "the latest end of those that do"
        );
        recent.push(Heard::parse(b"10 6000 10000", at(3), NOW_US).unwrap());
        assert_eq!(
            recent.covers(4_000, at(60_000)),
            None,
            "pushed out by a fourth"
        );
    }
}
