//! What a pause announcement says, and whether it covers a reserved call: pure, with time as
//! an argument.
//!
//! The server publishes a message on a bucket's pause channel each time a call makes the
//! bucket's pause last longer (THROTTLE.PAUSE, a cut, a sync that found nothing left):
//! `<pause_ms>`, or `<pause_ms> <state_us> <factor_bp>` from servers that say more (the bucket's
//! state right after the call, in the units of a `TICKET`, and its rate factor). The bucket
//! crate reads it (`throttle_bucket::Announced`, beside the text the server writes), and drops
//! what no server could have sent.
//!
//! Anyone who may publish on the channel can say anything on it, so what is heard is a hint:
//! one that would hold a call back is confirmed with the server before it does (the limiter's
//! `watch`).

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
    /// A pause of `pause_ms` (with the bucket's state and rate factor, where the server said
    /// them), heard at `at`.
    pub(crate) fn new(
        at: Instant,
        pause_ms: u64,
        state_us: Option<u64>,
        factor_bp: Option<u16>,
    ) -> Heard {
        Heard {
            at,
            pause: Duration::from_millis(pause_ms),
            state_us,
            factor_bp: factor_bp.map(u64::from),
        }
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
            .is_some_and(|f| f < u64::from(throttle_bucket::FULL_FACTOR_BP))
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

    /// `message`, as read by the bucket crate, heard at `at`.
    fn heard(message: &[u8], at: Instant) -> Heard {
        let Some(throttle_bucket::Announced::Pause {
            pause_ms,
            state_us,
            factor_bp,
        }) = throttle_bucket::Announced::parse(message, NOW_US)
        else {
            panic!("not a pause: {message:?}");
        };
        Heard::new(at, pause_ms, state_us, factor_bp)
    }

    fn at(ms: u64) -> Instant {
        // Instants of one base, so the tables read as ms after it.
        thread_local!(static BASE: Instant = Instant::now());
        BASE.with(|b| *b + Duration::from_millis(ms))
    }

    #[test]
    fn a_pause_covers_what_was_reserved_before_it_and_sent_inside_it() {
        // Heard at 100 ms: paused for 1000 ms, the state after it 5_000.
        let heard = heard(b"1000 5000 10000", at(100));
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
        let heard = heard(b"1000 5000 2500", at(100));
        assert!(heard.covers(4_000, at(60_000)));
        assert!(!heard.covers(5_001, at(200)));
    }

    #[test]
    fn without_the_state_every_reservation_sent_inside_is_covered() {
        let heard = heard(b"1000", at(100));
        assert!(heard.covers(9_999_999, at(1_099)));
        assert!(!heard.covers(9_999_999, at(1_100)));
    }

    #[test]
    fn the_last_four_are_kept() {
        let mut recent = Recent::default();
        let cut = heard(b"10 5000 2500", at(0));
        recent.push(cut);
        assert_eq!(
            recent.covers(4_000, at(60_000)),
            Some((at(10), true)),
            "the cut covers it"
        );
        for i in 0..3 {
            recent.push(heard(b"10 6000 10000", at(i)));
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
        recent.push(heard(b"10 6000 10000", at(3)));
        assert_eq!(
            recent.covers(4_000, at(60_000)),
            None,
            "pushed out by a fourth"
        );
    }
}
