//! The waiting policy: what to ask the server, why it refused ([`Refusal`]), and what to do
//! next ([`Decision`]), with how often to look again for a slot ([`SlotLooks`]).
//!
//! Pure: no I/O, no clock, no randomness. The loop in [`crate::engine::waiting`] passes in the time
//! elapsed since the call began and a jitter sample, and gets back a decision; it does the
//! sleeping.

use std::time::Duration;

use throttle_bucket::{Refusal as Said, MAX_WAIT_MS};

use crate::engine::waiting::in_flight::InFlight;
use crate::wire::reply::TakeReply;

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
    /// Refused (for the tokens, or the floor): sleep this long, then ask again.
    SleepThenRetry(Duration),
    /// Refused for want of a slot: wait for one (a release heard, or the next look of
    /// [`SlotLooks`]), within the deadline, then ask again.
    WaitForSlot,
    /// In the server's line for a slot: wait to hear it handed over, or look again at the
    /// reply's wait, within the deadline.
    WaitInLine,
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
    /// The deadline passed before the call's turn came, or in process before its tokens.
    Expired {
        /// The deadline.
        deadline: Duration,
    },
    /// A pause the server confirmed runs past the deadline.
    Paused {
        /// How long the pause still runs.
        rest: Duration,
        /// The deadline.
        deadline: Duration,
    },
}

/// What held a refused call back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The tokens are not there within what the call asked.
    Tokens,
    /// A bulk call: taking would leave less than its floor.
    Floor,
    /// Every slot for calls in flight is held.
    Slot,
    /// Every slot is held, and the call waits in the server's line for one, in its turn.
    Line,
    /// A pause the server confirmed covers the call's reserved send.
    Pause,
}

impl Refusal {
    /// Why `reply`, the answer to a take that asked `max_wait_ms`, refused the call (`None`:
    /// granted). The one place the reason is read: the server's own word where it says it
    /// (every denial from this release's module, library and script: `said`), else inferred,
    /// from a server that does not say. A floored call's refusal is its floor's, whatever else
    /// held it (it sleeps the wait the server names). With a cap on calls in flight, a refusal for the slots names
    /// the first lease's end or the tokens' wait, whichever is later, one for the tokens only
    /// their wait, beyond `max_wait_ms`: a wait within `max_wait_ms` is the slots'; one beyond
    /// the lease is the tokens' (no lease runs longer); one between the two may be either, and
    /// the call waits for a slot until its deadline. A call that may not wait (`max_wait_ms`
    /// 0) never waits for a slot either.
    pub(crate) fn of(
        reply: &TakeReply,
        max_wait_ms: u64,
        in_flight: Option<InFlight>,
        floored: bool,
    ) -> Option<Refusal> {
        if reply.granted {
            return None;
        }
        if floored {
            return Some(Refusal::Floor);
        }
        if let Some(said) = reply.said {
            let waits = in_flight.is_some() && max_wait_ms > 0;
            return Some(if said.contains(Said::LINE) && reply.in_line.is_some() {
                Refusal::Line
            } else if said.contains(Said::SLOT) && waits {
                Refusal::Slot
            } else if said.contains(Said::FLOOR) {
                Refusal::Floor
            } else {
                Refusal::Tokens
            });
        }
        let for_slot = in_flight.is_some_and(|cap| {
            max_wait_ms > 0
                && (reply.wait <= Duration::from_millis(max_wait_ms) || reply.wait <= cap.lease)
        });
        Some(if for_slot {
            Refusal::Slot
        } else {
            Refusal::Tokens
        })
    }
}

/// The first look again, after a refusal for want of a slot, for a slot another process
/// released (a release in this process wakes its waiter at once).
const FIRST_LOOK: Duration = Duration::from_millis(2);

/// The longest wait between two looks: a slot another process frees is found within this.
const LONGEST_LOOK: Duration = Duration::from_millis(50);

/// The longest a call that hears slots freed waits without looking: the releases are announced,
/// but a lease that runs out is not, and a subscription that died without a word is found only
/// by its pings.
const HEARD_LOOK: Duration = Duration::from_secs(1);

/// The soonest a call in the server's line looks again, and the pace it guesses per place
/// ahead of it before it has seen the line move.
const LINE_FIRST_LOOK: Duration = Duration::from_millis(50);

/// The longest a call at the head of the server's line that has seen it not move waits
/// between looks: a slot handed to it sits idle until it looks.
const LINE_HEAD_LOOK: Duration = Duration::from_millis(250);

/// The soonest a call told its turn looks again, whatever turn it was told: the server floors
/// its answer at 1 ms only, and a forged or broken line must not make a fleet poll it each
/// millisecond until its deadline.
const TURN_FLOOR: Duration = Duration::from_millis(10);

/// When a call in the server's line that hears the hand-off looks on its own, told its turn
/// `at`: for what is not announced, a holder's lease that runs out, which its turn comes to at
/// the latest. A quarter later (at most 250 ms), so that a hand-off a little behind its turn is
/// heard first.
pub(crate) fn heard_turn_look(at: Duration) -> Duration {
    at.saturating_add((at / 4).min(LINE_HEAD_LOOK))
        .max(TURN_FLOOR)
}

/// When a call in the server's line that cannot hear the hand-off looks again. Told its `turn`
/// (the server's `hint` is when the line's pace says it comes), an eighth after it. Otherwise
/// when its turn should come at the pace the line moved since it joined (`in_line` ago, at
/// place `first`; at place `place` now), or, with no progress seen yet, after
/// [`LINE_FIRST_LOOK`] per place ahead, and at least as long again as it has waited up to
/// [`LINE_HEAD_LOOK`]; never later than the server's `hint` (when a holder's lease may run out,
/// or its place needs keeping), never sooner than [`LINE_FIRST_LOOK`].
pub(crate) fn line_look(
    hint: Duration,
    turn: bool,
    in_line: Duration,
    first: u64,
    place: u64,
) -> Duration {
    if turn {
        // A little late rather than early: a look too soon costs a round trip, one a little
        // late only the slot's idle moment.
        return hint.saturating_add(hint / 8).max(TURN_FLOOR);
    }
    let due = match first.checked_sub(place).filter(|moved| *moved > 0) {
        Some(moved) => {
            // A quarter late rather than early: a look too soon costs a round trip, one a
            // little late only the slot's idle moment.
            let per_place = in_line / u32::try_from(moved).unwrap_or(u32::MAX);
            (per_place * 5 / 4).saturating_mul(u32::try_from(place).unwrap_or(u32::MAX))
        }
        None => in_line
            .min(LINE_HEAD_LOOK)
            .max(LINE_FIRST_LOOK.saturating_mul(u32::try_from(place).unwrap_or(u32::MAX))),
    };
    due.clamp(LINE_FIRST_LOOK, hint.max(LINE_FIRST_LOOK))
}

/// When a call waiting for a slot looks again: one call's state, from its first refusal for a
/// slot to its grant (or another refusal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SlotLooks {
    /// The last look on a timer while not hearing releases.
    last: Option<Duration>,
    /// The least time after a reply before a slot freed heard wakes the call: grows with each
    /// such wake that found no slot.
    futile_gap: Option<Duration>,
}

impl SlotLooks {
    /// After a refusal that names `wait` (the first lease's end, at the latest): when to look
    /// again on a timer. Hearing the fleet's releases (`heard`), when the first lease held runs
    /// out, at most [`HEARD_LOOK`] away, and a refusal that names no time as a poll would
    /// ([`LONGEST_LOOK`]), not at once. Otherwise a poll, doubling from [`FIRST_LOOK`] up to
    /// [`LONGEST_LOOK`], never after the first lease ends; a refusal that names no time (a
    /// wait of 0: a slot table that can issue no id, which only a forged state holds) bounds
    /// nothing, so the looks double all the same: never a spin.
    pub(crate) fn next(&mut self, wait: Duration, heard: bool) -> Duration {
        if heard {
            self.last = None;
            return if wait.is_zero() {
                LONGEST_LOOK
            } else {
                wait.min(HEARD_LOOK)
            };
        }
        let look = self
            .last
            .map_or(FIRST_LOOK, |last| (last * 2).min(LONGEST_LOOK));
        self.last = Some(look);
        if wait.is_zero() {
            look
        } else {
            look.min(wait)
        }
    }

    /// A wake by a slot freed found none (another process won it, or the message was forged:
    /// anyone with publish rights on the channel can send one): the least time after a reply
    /// before the next such wake counts doubles, from [`FIRST_LOOK`] up to [`LONGEST_LOOK`],
    /// so that a flood of them costs a waiter a few takes, not one each.
    pub(crate) fn futile_wake(&mut self) -> Duration {
        let gap = self
            .futile_gap
            .map_or(FIRST_LOOK, |last| (last * 2).min(LONGEST_LOOK));
        self.futile_gap = Some(gap);
        gap
    }

    /// How long after a reply a slot freed heard may wake the call.
    pub(crate) fn not_before(&self) -> Duration {
        self.futile_gap.unwrap_or_default()
    }
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
    /// With a cap on calls in flight: a refusal may be for a slot.
    in_flight: Option<InFlight>,
    /// A partitioned limiter's call, which takes in process.
    partitioned: bool,
}

impl Policy {
    pub(crate) fn new(strategy: Strategy, deadline: Option<Duration>) -> Policy {
        Policy {
            strategy,
            deadline,
            floored: false,
            in_flight: None,
            partitioned: false,
        }
    }

    /// A partitioned limiter's call, within `deadline`. It takes from the partitions this
    /// process holds: a refusal names when the next token is there (or a time to look again,
    /// holding none), and the call looks again then, or at its deadline, one last time.
    pub(crate) fn partitioned(deadline: Duration) -> Policy {
        Policy {
            partitioned: true,
            ..Policy::new(Strategy::Reserve, Some(deadline))
        }
    }

    /// The policy of a call that takes a slot of `in_flight` with its tokens.
    pub(crate) fn with_slots(self, in_flight: Option<InFlight>) -> Policy {
        Policy { in_flight, ..self }
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

    /// Whether a refusal may be for a slot (a cap on calls in flight).
    pub(crate) fn takes_slots(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Whether this is a bulk call's policy.
    pub(crate) fn is_floored(&self) -> bool {
        self.floored
    }

    /// The deadline this policy enforces: the one given, or the server's longest
    /// reservation (10 years).
    pub(crate) fn deadline(&self) -> Duration {
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

    /// Whether a call that a pause held back may ask again together with the limiter's other
    /// held calls (one take for all, `max_wait_ms` the call's): a reservation only, never a
    /// floored one (it reserves from tokens there now) nor one that takes a slot of its own.
    pub(crate) fn rebooks(&self, max_wait_ms: u64) -> bool {
        matches!(self.strategy, Strategy::Reserve)
            && !self.partitioned
            && !self.floored
            && self.in_flight.is_none()
            && max_wait_ms > 0
    }

    /// What to do after `reply`, the answer to round trip number `attempt` (from 1), which
    /// asked `max_wait_ms`, `elapsed` after the call began. `jitter` is a sample in `0.0..1.0`.
    pub(crate) fn decide(
        &self,
        reply: &TakeReply,
        max_wait_ms: u64,
        attempt: u32,
        elapsed: Duration,
        jitter: f64,
    ) -> Decision {
        let refusal = match Refusal::of(reply, max_wait_ms, self.in_flight, self.floored) {
            None if reply.wait.is_zero() => return Decision::Done,
            None => return Decision::SleepThenDone(reply.wait),
            // The slot wait ends by the deadline; the take after it, asking what is left of
            // the deadline, gives up if it is spent.
            Some(Refusal::Slot) => return Decision::WaitForSlot,
            Some(Refusal::Line) => return Decision::WaitInLine,
            Some(refusal) => refusal,
        };
        let deadline = self.deadline();
        if self.partitioned {
            let left = deadline.saturating_sub(elapsed);
            return if left.is_zero() {
                Decision::GiveUp(GiveUp::Expired { deadline })
            } else {
                Decision::SleepThenRetry(reply.wait.min(left))
            };
        }
        let out_of_time = Decision::GiveUp(GiveUp::Deadline {
            needed: reply.wait,
            deadline,
        });
        let left = deadline.saturating_sub(elapsed);
        match self.strategy {
            // A floored reservation refused for want of tokens now, due within the deadline.
            Strategy::Reserve if refusal == Refusal::Floor && reply.wait <= left => {
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
            said: None,
            in_line: None,
        }
    }

    fn denied(wait_ms: u64) -> TakeReply {
        TakeReply {
            granted: false,
            ..granted(wait_ms)
        }
    }

    /// What a take asked: only a call with a cap on calls in flight reads it.
    const ASK: u64 = 1_000;

    const POLL: Strategy = Strategy::Poll {
        max_jitter: Duration::from_millis(20),
        max_attempts: 3,
    };

    #[test]
    fn a_call_in_line_looks_when_its_turn_should_come() {
        let hint = MS * 5_000;
        // (in line for, place at join, place now, look after)
        let table = [
            // Just joined at place 36: a guess of 50 ms a place.
            (0, 36, 36, 1_800),
            // 40 ms later at 35: a place per 40 ms, 35 places to go, a quarter late.
            (40, 36, 35, 1_750),
            // At the head after 1.4 s: the next release is due in a place's time.
            (1_400, 36, 1, 50),
            // No progress in 200 ms: as long again, at most 250 ms, at least 50 ms a place.
            (200, 5, 5, 250),
            (200, 2, 2, 200),
            (400, 2, 2, 250),
            (400, 10, 10, 500),
            // A pace slower than the hint: the hint.
            (3_000, 40, 39, 5_000),
            // A place that jumped back (a ticket that left and joined again): as no progress.
            (300, 3, 9, 450),
        ];
        for (in_line, first, place, look) in table {
            assert_eq!(
                line_look(hint, false, MS * in_line, first, place),
                MS * look,
                "{in_line} ms in line, from place {first} to {place}"
            );
            // Told its turn, whatever its progress: an eighth after the turn.
            assert_eq!(
                line_look(MS * 160, true, MS * in_line, first, place),
                MS * 180
            );
        }
        // A server's hint under the first look still waits the first look; a turn does not,
        // down to a floor: however early the server says the turn comes (a forged line's
        // 1 ms), never a look each millisecond.
        assert_eq!(
            line_look(MS * 10, false, Duration::ZERO, 1, 1),
            LINE_FIRST_LOOK
        );
        assert_eq!(line_look(MS * 16, true, Duration::ZERO, 1, 1), MS * 18);
        assert_eq!(line_look(MS, true, Duration::ZERO, 1, 1), TURN_FLOOR);
        // Hearing the hand-off: a quarter after the turn, at most 250 ms, the same floor.
        assert_eq!(heard_turn_look(MS), TURN_FLOOR);
        assert_eq!(heard_turn_look(MS * 160), MS * 200);
        assert_eq!(
            heard_turn_look(Duration::from_secs(4)),
            Duration::from_millis(4250)
        );
    }

    #[test]
    fn reserve_asks_for_the_deadline_and_sleeps_exactly_the_wait() {
        let policy = Policy::new(Strategy::Reserve, None);
        assert_eq!(policy.max_wait_ms(Duration::ZERO), MAX_WAIT_MS);
        assert_eq!(policy.decide(&granted(0), ASK, 1, MS, 0.5), Decision::Done);
        assert_eq!(
            policy.decide(&granted(250), ASK, 1, MS, 0.99),
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
            policy.decide(&denied(300), ASK, 1, MS, 0.0),
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
        assert_eq!(policy.decide(&granted(0), ASK, 1, MS, 0.5), Decision::Done);
        assert_eq!(
            policy.decide(&denied(100), ASK, 1, MS, 0.0),
            Decision::SleepThenRetry(MS * 100)
        );
        assert_eq!(
            policy.decide(&denied(100), ASK, 2, MS, 0.5),
            Decision::SleepThenRetry(MS * 110)
        );
        // Never early, whatever the sample.
        for sample in [-1.0, 0.0, 0.3, 0.999, 2.0, f64::NAN] {
            match policy.decide(&denied(100), ASK, 1, MS, sample) {
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
        assert_eq!(policy.decide(&granted(0), ASK, 1, MS, 0.9), Decision::Done);
        assert_eq!(
            policy.decide(&granted(40), ASK, 1, MS, 0.9),
            Decision::SleepThenDone(MS * 40),
            "one round trip, one sleep"
        );
        assert_eq!(
            policy.decide(&denied(100), ASK, 1_000_000, MS, 0.9),
            Decision::SleepThenRetry(MS * 100),
            "no tokens now: no jitter, no attempt limit"
        );
        assert_eq!(
            policy.decide(&denied(100), ASK, 1, MS * 450, 0.0),
            Decision::GiveUp(GiveUp::Deadline {
                needed: MS * 100,
                deadline: MS * 500
            }),
            "past what is left of the deadline"
        );
        assert_eq!(
            policy.decide(&denied(600), ASK, 1, MS, 0.0),
            Decision::GiveUp(GiveUp::Deadline {
                needed: MS * 600,
                deadline: MS * 500
            })
        );
        // An interactive reservation refused is out of time, whatever the wait.
        assert_eq!(
            Policy::new(Strategy::Reserve, Some(MS * 500)).decide(&denied(100), ASK, 1, MS, 0.0),
            Decision::GiveUp(GiveUp::Deadline {
                needed: MS * 100,
                deadline: MS * 500
            })
        );
        // A poll strategy keeps its jitter and its attempts.
        let policy = Policy::new(POLL, None).floored();
        assert_eq!(
            policy.decide(&denied(100), ASK, 3, MS, 0.0),
            Decision::GiveUp(GiveUp::Attempts(3))
        );
    }

    #[test]
    fn poll_is_bounded_by_attempts_and_deadline() {
        let policy = Policy::new(POLL, None);
        assert_eq!(
            policy.decide(&denied(100), ASK, 3, MS, 0.0),
            Decision::GiveUp(GiveUp::Attempts(3))
        );

        let policy = Policy::new(POLL, Some(MS * 500));
        // 450 ms in, 100 ms more would overshoot: give up now, holding nothing.
        assert_eq!(
            policy.decide(&denied(100), ASK, 1, MS * 450, 0.0),
            Decision::GiveUp(GiveUp::Deadline {
                needed: MS * 100,
                deadline: MS * 500
            })
        );
        // 390 ms in: the wait fits, the jitter is cut at the deadline.
        assert_eq!(
            policy.decide(&denied(100), ASK, 1, MS * 390, 0.9),
            Decision::SleepThenRetry(MS * 110)
        );
    }

    fn cap() -> Option<InFlight> {
        Some(InFlight::new(4, Duration::from_secs(2)).unwrap())
    }

    #[test]
    fn which_refusals_wait_for_a_slot() {
        let of = |reply: &TakeReply, asked, cap, floored| Refusal::of(reply, asked, cap, floored);
        // Within the deadline: the tokens were there, the slots were not.
        assert_eq!(of(&denied(500), 1_000, cap(), false), Some(Refusal::Slot));
        // Beyond the deadline but within a lease: a slot may free first; wait for it.
        assert_eq!(of(&denied(1_500), 1_000, cap(), false), Some(Refusal::Slot));
        // Beyond every lease: the tokens' wait, past the deadline.
        assert_eq!(
            of(&denied(2_001), 1_000, cap(), false),
            Some(Refusal::Tokens)
        );
        // A call that may not wait never waits for a slot either.
        assert_eq!(of(&denied(5), 0, cap(), false), Some(Refusal::Tokens));
        assert_eq!(of(&granted(0), 1_000, cap(), false), None);
        // Without a cap there is no slot to want; a floored call's refusal is its floor's.
        assert_eq!(of(&denied(500), 1_000, None, false), Some(Refusal::Tokens));
        assert_eq!(of(&denied(500), 1_000, cap(), true), Some(Refusal::Floor));
        assert_eq!(of(&denied(500), 1_000, None, true), Some(Refusal::Floor));
    }

    #[test]
    fn a_refusal_the_server_names_is_taken_at_its_word() {
        let of = |said: Said, asked, cap| {
            let reply = TakeReply {
                said: Some(said),
                ..denied(3_000)
            };
            Refusal::of(&reply, asked, cap, false)
        };
        // A wait past every lease that the inference would read as the tokens': the slots.
        assert_eq!(of(Said::SLOT, 1_000, cap()), Some(Refusal::Slot));
        assert_eq!(
            of(Said::SLOT | Said::TOKENS, 1_000, cap()),
            Some(Refusal::Slot)
        );
        // A call that may not wait, or has no cap, does not wait for a slot.
        assert_eq!(of(Said::SLOT, 0, cap()), Some(Refusal::Tokens));
        assert_eq!(of(Said::SLOT, 1_000, None), Some(Refusal::Tokens));
        assert_eq!(of(Said::FLOOR, 1_000, cap()), Some(Refusal::Floor));
        assert_eq!(
            of(Said::TOKENS | Said::PAUSE, 1_000, cap()),
            Some(Refusal::Tokens)
        );
        // Within the deadline and said to be the tokens': not a slot, as inferred.
        let reply = TakeReply {
            said: Some(Said::TOKENS),
            ..denied(500)
        };
        assert_eq!(
            Refusal::of(&reply, 1_000, cap(), false),
            Some(Refusal::Tokens)
        );
    }

    #[test]
    fn a_refusal_for_a_slot_waits_for_one_and_the_others_as_without_a_cap() {
        let policy = Policy::new(Strategy::Reserve, Some(MS * 1_000)).with_slots(cap());
        assert_eq!(
            policy.decide(&denied(500), 1_000, 1, MS, 0.0),
            Decision::WaitForSlot
        );
        assert_eq!(
            policy.decide(&denied(1_500), 1_000, 7, MS * 10, 0.0),
            Decision::WaitForSlot,
            "no attempt limit"
        );
        assert_eq!(
            policy.decide(&denied(2_001), 1_000, 1, MS, 0.0),
            Decision::GiveUp(GiveUp::Deadline {
                needed: MS * 2_001,
                deadline: MS * 1_000
            })
        );
        // The deadline spent: the last take asked nothing, and its refusal ends the call.
        assert_eq!(
            policy.decide(&denied(5), 0, 3, MS * 1_000, 0.0),
            Decision::GiveUp(GiveUp::Deadline {
                needed: MS * 5,
                deadline: MS * 1_000
            })
        );
        assert_eq!(
            policy.decide(&granted(40), 1_000, 2, MS, 0.0),
            Decision::SleepThenDone(MS * 40)
        );
        // A bulk call sleeps the wait the server names, slot or not.
        let bulk = policy.floored();
        assert_eq!(
            bulk.decide(&denied(100), 1_000, 1, MS, 0.0),
            Decision::SleepThenRetry(MS * 100)
        );
        // A poll asks nothing ahead: its refusals are the tokens'.
        let poll = Policy::new(POLL, None).with_slots(cap());
        assert_eq!(
            poll.decide(&denied(100), 0, 3, MS, 0.0),
            Decision::GiveUp(GiveUp::Attempts(3))
        );
    }

    #[test]
    fn a_partitioned_call_looks_again_until_its_deadline() {
        let policy = Policy::partitioned(MS * 500);
        assert!(!policy.takes_slots() && !policy.rebooks(500));
        assert_eq!(policy.decide(&granted(0), 0, 1, MS, 0.5), Decision::Done);
        assert_eq!(
            policy.decide(&denied(100), 0, 1_000, MS * 10, 0.9),
            Decision::SleepThenRetry(MS * 100),
            "the next token, no jitter, no attempt limit"
        );
        assert_eq!(
            policy.decide(&denied(100), 0, 1, MS * 450, 0.0),
            Decision::SleepThenRetry(MS * 50),
            "a last look at the deadline"
        );
        assert_eq!(
            policy.decide(&denied(100), 0, 1, MS * 500, 0.0),
            Decision::GiveUp(GiveUp::Expired { deadline: MS * 500 })
        );
        assert!(!Policy::new(Strategy::Reserve, None).takes_slots());
        assert!(Policy::new(Strategy::Reserve, None)
            .with_slots(cap())
            .takes_slots());
    }

    #[test]
    fn only_a_plain_reservation_asks_again_with_the_others_after_a_pause() {
        let reserve = Policy::new(Strategy::Reserve, None);
        assert!(reserve.rebooks(100));
        assert!(
            !reserve.rebooks(0),
            "may not wait: takes what is there, alone"
        );
        assert!(!reserve.floored().rebooks(100));
        assert!(!reserve.with_slots(cap()).rebooks(100));
        assert!(!Policy::new(POLL, None).rebooks(100));
    }

    #[test]
    fn after_a_pause_the_call_gives_up_only_if_the_pause_outlasts_its_deadline() {
        let policy = Policy::new(Strategy::Reserve, Some(MS * 500));
        assert_eq!(policy.after_pause(MS * 300, MS * 200), None);
        assert_eq!(
            policy.after_pause(MS * 301, MS * 200),
            Some(GiveUp::Paused {
                rest: MS * 301,
                deadline: MS * 500
            })
        );
    }

    fn looks(wait: Duration, heard: bool, n: usize) -> Vec<u64> {
        let mut looks = SlotLooks::default();
        (0..n)
            .map(|_| looks.next(wait, heard).as_millis() as u64)
            .collect()
    }

    #[test]
    fn looks_double_up_to_the_longest_and_never_past_the_first_lease() {
        let far = Duration::from_secs(5);
        assert_eq!(looks(far, false, 8), [2, 4, 8, 16, 32, 50, 50, 50]);
        let mut after_32 = SlotLooks::default();
        for _ in 0..5 {
            after_32.next(far, false);
        }
        assert_eq!(after_32.next(MS * 7, false), MS * 7);
        // A refusal that names no time (a forged table): the looks double all the same.
        assert_eq!(looks(Duration::ZERO, false, 7), [2, 4, 8, 16, 32, 50, 50]);
    }

    #[test]
    fn a_listening_call_looks_when_the_first_lease_ends_or_within_a_second() {
        assert_eq!(looks(MS * 300, true, 1), [300]);
        assert_eq!(looks(MS * 10_000, true, 1), [1000]);
        assert_eq!(looks(MS, true, 1), [1]);
        assert_eq!(
            looks(Duration::ZERO, true, 1),
            [50],
            "names no time: not at once"
        );
        // Heard, then not: the poll starts again from the first look.
        let mut mixed = SlotLooks::default();
        assert_eq!(mixed.next(MS * 300, false), MS * 2);
        assert_eq!(mixed.next(MS * 300, true), MS * 300);
        assert_eq!(mixed.next(MS * 300, false), MS * 2);
    }

    #[test]
    fn futile_wakes_back_off() {
        let mut looks = SlotLooks::default();
        assert_eq!(looks.not_before(), Duration::ZERO);
        let gaps: Vec<u64> = (0..7)
            .map(|_| looks.futile_wake().as_millis() as u64)
            .collect();
        assert_eq!(gaps, [2, 4, 8, 16, 32, 50, 50]);
        assert_eq!(looks.not_before(), MS * 50);
    }
}
