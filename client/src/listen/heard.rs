//! What a pause announcement says, and whether it covers a reserved call: pure, with time as
//! an argument.
//!
//! The server publishes a message on a bucket's pause channel each time a call makes the
//! bucket's pause last longer (THROTTLE.PAUSE, a cut, a sync that found nothing left):
//! `<pause_ms>`, or `<pause_ms> <state_us> <factor_bp>` from servers that say more (the bucket's
//! state right after the call, in the units of a `TICKET`, and its rate factor).

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
    /// Reads a message heard at `at`; `None` for one that is not an announcement.
    pub(crate) fn parse(message: &[u8], at: Instant) -> Option<Heard> {
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
        let cut = self
            .factor_bp
            .is_some_and(|f| f < u64::from(throttle_bucket::FULL_FACTOR_BP));
        before && (cut || send < self.ends())
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

    /// When the last pause that covers the reservation `ticket` sent at `send` ends, if any
    /// does.
    pub(crate) fn covers(&self, ticket: u64, send: Instant) -> Option<Instant> {
        self.heard
            .iter()
            .flatten()
            .filter(|h| h.covers(ticket, send))
            .map(Heard::ends)
            .max()
    }

    /// The rate factor the newest announcement that says one left, in basis points: a cut
    /// only climbs back after it (a newer cut is announced too).
    pub(crate) fn factor_bp(&self) -> Option<u64> {
        self.heard.iter().rev().flatten().find_map(|h| h.factor_bp)
    }

    /// When the longest of the pauses heard ends, if one was heard.
    pub(crate) fn end(&self) -> Option<Instant> {
        self.heard.iter().flatten().map(Heard::ends).max()
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

    fn at(ms: u64) -> Instant {
        // Instants of one base, so the tables read as ms after it.
        thread_local!(static BASE: Instant = Instant::now());
        BASE.with(|b| *b + Duration::from_millis(ms))
    }

    #[test]
    fn messages_read_back() {
        let heard = Heard::parse(b"1500", at(0)).unwrap();
        assert_eq!(
            (heard.pause, heard.state_us, heard.factor_bp),
            (Duration::from_millis(1500), None, None)
        );
        let heard = Heard::parse(b"250 1733300000123456 5000", at(0)).unwrap();
        assert_eq!(heard.state_us, Some(1_733_300_000_123_456));
        assert_eq!(heard.factor_bp, Some(5000));
        for bad in [&b""[..], b"x", b"1 2 3 4", b"-1", b"1  2", b"1 y"] {
            assert_eq!(Heard::parse(bad, at(0)), None, "{bad:?}");
        }
    }

    #[test]
    fn a_pause_covers_what_was_reserved_before_it_and_sent_inside_it() {
        // Heard at 100 ms: paused for 1000 ms, the state after it 5_000.
        let heard = Heard::parse(b"1000 5000 10000", at(100)).unwrap();
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
        let heard = Heard::parse(b"1000 5000 2500", at(100)).unwrap();
        assert!(heard.covers(4_000, at(60_000)));
        assert!(!heard.covers(5_001, at(200)));
    }

    #[test]
    fn without_the_state_every_reservation_sent_inside_is_covered() {
        let heard = Heard::parse(b"1000", at(100)).unwrap();
        assert!(heard.covers(9_999_999, at(1_099)));
        assert!(!heard.covers(9_999_999, at(1_100)));
    }

    #[test]
    fn the_last_four_are_kept() {
        let mut recent = Recent::default();
        let cut = Heard::parse(b"10 5000 2500", at(0)).unwrap();
        recent.push(cut);
        assert_eq!(
            recent.covers(4_000, at(60_000)),
            Some(at(10)),
            "the cut covers it"
        );
        for i in 0..3 {
            recent.push(Heard::parse(b"10 6000 10000", at(i)).unwrap());
        }
        assert_eq!(
            recent.covers(4_000, at(60_000)),
            Some(at(10)),
            "still heard behind three pauses, which do not cover it (sent after them)"
        );
        assert_eq!(
            recent.covers(5_500, at(11)),
            Some(at(12)),
            "the latest end of those that do"
        );
        recent.push(Heard::parse(b"10 6000 10000", at(3)).unwrap());
        assert_eq!(
            recent.covers(4_000, at(60_000)),
            None,
            "pushed out by a fourth"
        );
    }
}
