//! The waiting policy: what to ask the server, and what to do with its answer.
//!
//! Pure: no I/O, no clock, no randomness. The limiter passes in the time elapsed since the
//! call began and a jitter sample, and gets back a [`Decision`]; it does the sleeping.

use std::time::Duration;

use throttle_bucket::MAX_WAIT_MS;

use crate::reply::TakeReply;

/// How [`Throttle::acquire`](crate::Throttle::acquire) waits for tokens.
///
/// ```
/// use std::time::Duration;
/// use redis_throttle::Strategy;
///
/// assert_eq!(Strategy::default(), Strategy::Reserve);
/// let poll = Strategy::poll();
/// assert!(matches!(poll, Strategy::Poll { max_attempts: 1000, .. }));
/// let custom = Strategy::Poll { max_jitter: Duration::from_millis(5), max_attempts: 50 };
/// # let _ = custom;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// One round trip: `THROTTLE.TAKE ... MAXWAIT`, which takes the tokens now (the
    /// bucket goes into debt) and says how long to wait before using them; then a sleep of
    /// exactly that long. Callers are served in the order their reservations reach the
    /// server, and the server does one command per call.
    ///
    /// Dropping the future during the sleep gives the tokens back if no later reservation
    /// followed (see [`Limiter`](crate::Limiter)); otherwise they stay taken, so the fleet
    /// sends a little less than it could, never more.
    #[default]
    Reserve,
    /// Take without `MAXWAIT`; when refused, sleep for the time the server says the tokens
    /// need plus a random jitter, then try again. Nothing is held while waiting, but a call
    /// costs several round trips under contention, and waiters are not served in order.
    Poll {
        /// The jitter added to each sleep is uniform in `0..max_jitter`, so waiters that
        /// were refused together do not all come back at the same instant.
        max_jitter: Duration,
        /// Round trips before the call gives up with [`Error::GaveUp`](crate::Error::GaveUp).
        max_attempts: u32,
    },
}

impl Strategy {
    /// [`Strategy::Poll`] with a jitter of up to 20 ms and at most 1000 attempts.
    pub const fn poll() -> Strategy {
        Strategy::Poll {
            max_jitter: Duration::from_millis(20),
            max_attempts: 1000,
        }
    }
}

/// What to do after a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Granted and usable now.
    Done,
    /// Granted (reserved): sleep this long, then the tokens are usable.
    SleepThenDone(Duration),
    /// Refused: sleep this long, then ask again.
    SleepThenRetry(Duration),
    /// Stop without the tokens.
    GiveUp(GiveUp),
}

/// Why a call stops without its tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GiveUp {
    /// The tokens need longer than the deadline allows.
    Deadline {
        /// How long they need, from the reply.
        needed: Duration,
        /// The deadline.
        deadline: Duration,
    },
    /// The poll strategy's attempts are used up.
    Attempts(u32),
    /// A pause the server confirmed runs past the deadline.
    Paused {
        /// How long the pause still runs.
        rest: Duration,
        /// The deadline.
        deadline: Duration,
    },
}

/// The longest reservation the server accepts.
const MAX_WAIT: Duration = Duration::from_millis(MAX_WAIT_MS);

/// One call's policy: a strategy, and optionally a deadline counted from the call's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    strategy: Strategy,
    deadline: Option<Duration>,
    /// A bulk call's: a refused reservation is asked again.
    floored: bool,
}

impl Policy {
    pub(crate) fn new(strategy: Strategy, deadline: Option<Duration>) -> Policy {
        Policy {
            strategy,
            deadline,
            floored: false,
        }
    }

    /// A bulk call's policy. The server grants a floored reservation only from tokens in the
    /// bucket now (it never puts the bucket in debt ahead of the interactive callers), so a
    /// reservation can be refused even though the tokens and the floor are due within the
    /// deadline: then the call sleeps the exact time the server names (no jitter: they are
    /// due then) and asks again. A poll strategy keeps its own jitter and attempts.
    pub(crate) fn floored(self) -> Policy {
        Policy {
            floored: true,
            ..self
        }
    }

    /// Whether this is a bulk call's policy.
    pub(crate) fn is_floored(&self) -> bool {
        self.floored
    }

    /// The deadline this policy enforces: the one given, or the server's longest
    /// reservation (10 years).
    fn deadline(&self) -> Duration {
        self.deadline.map_or(MAX_WAIT, |d| d.min(MAX_WAIT))
    }

    /// `MAXWAIT` for the next request, in ms, `elapsed` after the call began.
    ///
    /// Reserve: what is left of the deadline, rounded down so the server never grants a
    /// wait beyond it. Poll: 0, take only what is there.
    pub(crate) fn max_wait_ms(&self, elapsed: Duration) -> u64 {
        match self.strategy {
            Strategy::Reserve => {
                let left = self.deadline().saturating_sub(elapsed);
                u64::try_from(left.as_millis()).unwrap_or(MAX_WAIT_MS)
            }
            Strategy::Poll { .. } => 0,
        }
    }

    /// A pause covers the call's reservation and still runs `rest`, `elapsed` after the call
    /// began: the call gives up at once if the pause alone outlasts its deadline (it would
    /// wait past it for nothing), and sleeps it out otherwise.
    pub(crate) fn after_pause(&self, rest: Duration, elapsed: Duration) -> Option<GiveUp> {
        let deadline = self.deadline();
        (elapsed.saturating_add(rest) > deadline).then_some(GiveUp::Paused { rest, deadline })
    }

    /// What to do after `reply`, the answer to round trip number `attempt` (from 1),
    /// `elapsed` after the call began. `jitter` is a sample in `0.0..1.0`.
    pub(crate) fn decide(
        &self,
        reply: &TakeReply,
        attempt: u32,
        elapsed: Duration,
        jitter: f64,
    ) -> Decision {
        if reply.granted {
            return if reply.wait.is_zero() {
                Decision::Done
            } else {
                Decision::SleepThenDone(reply.wait)
            };
        }
        let deadline = self.deadline();
        let out_of_time = Decision::GiveUp(GiveUp::Deadline {
            needed: reply.wait,
            deadline,
        });
        let left = deadline.saturating_sub(elapsed);
        match self.strategy {
            // A floored reservation refused for want of tokens now, due within the deadline.
            Strategy::Reserve if self.floored && reply.wait <= left => {
                Decision::SleepThenRetry(reply.wait)
            }
            // The server refused the reservation: the wait is longer than MAXWAIT.
            Strategy::Reserve => out_of_time,
            Strategy::Poll {
                max_jitter,
                max_attempts,
            } => {
                if reply.wait > left {
                    return out_of_time;
                }
                if attempt >= max_attempts {
                    return Decision::GiveUp(GiveUp::Attempts(attempt));
                }
                let sample = if jitter.is_finite() {
                    jitter.clamp(0.0, 1.0)
                } else {
                    0.0
                };
                let jitter = Duration::try_from_secs_f64(max_jitter.as_secs_f64() * sample)
                    .unwrap_or(max_jitter)
                    .min(max_jitter);
                Decision::SleepThenRetry(reply.wait.saturating_add(jitter).min(left))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn granted(wait_ms: u64) -> TakeReply {
        TakeReply {
            granted: true,
            remaining: 0,
            wait: MS * wait_ms as u32,
            reset: MS * 1000,
            ticket: 0,
            round_trips: 1,
        }
    }

    fn denied(wait_ms: u64) -> TakeReply {
        TakeReply {
            granted: false,
            ..granted(wait_ms)
        }
    }

    const POLL: Strategy = Strategy::Poll {
        max_jitter: Duration::from_millis(20),
        max_attempts: 3,
    };

    #[test]
    fn reserve_asks_for_the_deadline_and_sleeps_exactly_the_wait() {
        let policy = Policy::new(Strategy::Reserve, None);
        assert_eq!(policy.max_wait_ms(Duration::ZERO), MAX_WAIT_MS);
        assert_eq!(policy.decide(&granted(0), 1, MS, 0.5), Decision::Done);
        assert_eq!(
            policy.decide(&granted(250), 1, MS, 0.99),
            Decision::SleepThenDone(MS * 250)
        );

        let policy = Policy::new(Strategy::Reserve, Some(Duration::from_micros(1500)));
        assert_eq!(policy.max_wait_ms(Duration::ZERO), 1, "rounded down");
        assert_eq!(policy.max_wait_ms(MS * 5), 0);
        let policy = Policy::new(Strategy::Reserve, Some(Duration::from_secs(400_000_000)));
        assert_eq!(policy.max_wait_ms(Duration::ZERO), MAX_WAIT_MS, "capped");
    }

    #[test]
    fn reserve_refused_means_the_deadline_is_too_short() {
        let policy = Policy::new(Strategy::Reserve, Some(MS * 100));
        assert_eq!(
            policy.decide(&denied(300), 1, MS, 0.0),
            Decision::GiveUp(GiveUp::Deadline {
                needed: MS * 300,
                deadline: MS * 100
            })
        );
    }

    #[test]
    fn poll_never_reserves_and_retries_after_the_wait_plus_jitter() {
        let policy = Policy::new(POLL, None);
        assert_eq!(policy.max_wait_ms(Duration::ZERO), 0);
        assert_eq!(policy.decide(&granted(0), 1, MS, 0.5), Decision::Done);
        assert_eq!(
            policy.decide(&denied(100), 1, MS, 0.0),
            Decision::SleepThenRetry(MS * 100)
        );
        assert_eq!(
            policy.decide(&denied(100), 2, MS, 0.5),
            Decision::SleepThenRetry(MS * 110)
        );
        // Never early, whatever the sample.
        for sample in [-1.0, 0.0, 0.3, 0.999, 2.0, f64::NAN] {
            match policy.decide(&denied(100), 1, MS, sample) {
                Decision::SleepThenRetry(d) => assert!(d >= MS * 100 && d <= MS * 120, "{d:?}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_floored_call_reserves_and_asks_again_when_refused_within_the_deadline() {
        let policy = Policy::new(Strategy::Reserve, Some(MS * 500)).floored();
        assert_eq!(policy.max_wait_ms(Duration::ZERO), 500, "it reserves");
        assert_eq!(policy.max_wait_ms(MS * 120), 380);
        assert_eq!(policy.decide(&granted(0), 1, MS, 0.9), Decision::Done);
        assert_eq!(
            policy.decide(&granted(40), 1, MS, 0.9),
            Decision::SleepThenDone(MS * 40),
            "one round trip, one sleep"
        );
        assert_eq!(
            policy.decide(&denied(100), 1_000_000, MS, 0.9),
            Decision::SleepThenRetry(MS * 100),
            "no tokens now: no jitter, no attempt limit"
        );
        assert_eq!(
            policy.decide(&denied(100), 1, MS * 450, 0.0),
            Decision::GiveUp(GiveUp::Deadline {
                needed: MS * 100,
                deadline: MS * 500
            }),
            "past what is left of the deadline"
        );
        assert_eq!(
            policy.decide(&denied(600), 1, MS, 0.0),
            Decision::GiveUp(GiveUp::Deadline {
                needed: MS * 600,
                deadline: MS * 500
            })
        );
        // An interactive reservation refused is out of time, whatever the wait.
        assert_eq!(
            Policy::new(Strategy::Reserve, Some(MS * 500)).decide(&denied(100), 1, MS, 0.0),
            Decision::GiveUp(GiveUp::Deadline {
                needed: MS * 100,
                deadline: MS * 500
            })
        );
        // A poll strategy keeps its jitter and its attempts.
        let policy = Policy::new(POLL, None).floored();
        assert_eq!(
            policy.decide(&denied(100), 3, MS, 0.0),
            Decision::GiveUp(GiveUp::Attempts(3))
        );
    }

    #[test]
    fn poll_is_bounded_by_attempts_and_deadline() {
        let policy = Policy::new(POLL, None);
        assert_eq!(
            policy.decide(&denied(100), 3, MS, 0.0),
            Decision::GiveUp(GiveUp::Attempts(3))
        );

        let policy = Policy::new(POLL, Some(MS * 500));
        // 450 ms in, 100 ms more would overshoot: give up now, holding nothing.
        assert_eq!(
            policy.decide(&denied(100), 1, MS * 450, 0.0),
            Decision::GiveUp(GiveUp::Deadline {
                needed: MS * 100,
                deadline: MS * 500
            })
        );
        // 390 ms in: the wait fits, the jitter is cut at the deadline.
        assert_eq!(
            policy.decide(&denied(100), 1, MS * 390, 0.9),
            Decision::SleepThenRetry(MS * 110)
        );
    }
}
