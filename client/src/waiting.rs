//! The waiting loop every limiter shares: ask the server, let the [`Policy`] decide, sleep,
//! maybe ask again. The I/O is the caller's `ask`; what to do with a reply is the policy's.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::metrics::{Event, Metrics};
use crate::policy::{Decision, GiveUp, Policy};
use crate::reply::TakeReply;
use crate::Error;

/// Something held while a reserved call sleeps until its tokens are usable: dropped with the
/// call's future if it is cancelled, released once the sleep is over.
pub(crate) trait Held {
    /// The sleep is over: the tokens are the caller's to use.
    fn release(self);

    /// Bucket number `bucket` (in the limiter's order) has moved past the take since (a pause
    /// heard): nothing can be given back there, so nothing is asked.
    fn moved(&mut self, _bucket: usize) {}
}

impl Held for () {
    fn release(self) {}
}

/// A pause heard, and confirmed by the server, that covers a reserved call's send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Covered {
    /// When and how the call asks again.
    pub(crate) resume: Resume,
    /// The buckets (by number) whose state the pause moved past the call's take.
    pub(crate) moved: Vec<usize>,
}

/// How a reserved call's sleep ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Slept {
    /// A pause covers its send, if one does.
    pub(crate) covered: Option<Covered>,
    /// The round trips it spent asking the server about what it heard (0 when another call
    /// of the limiter already had).
    pub(crate) trips: u32,
}

/// How a call that a pause held back asks again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Resume {
    /// Until the pause ends, to be slept out before taking again (may be zero: a cut that
    /// re-spaces every reservation made before it).
    pub(crate) rest: Duration,
    /// The lowest rate factor the pause left on the call's buckets, in basis points (10 000:
    /// not cut, or not known): a cut bucket holds only that share of its capacity at once.
    pub(crate) factor_bp: u16,
}

/// How a reserved call learns of a pause set while it sleeps until its tokens are usable: by
/// hearing it announced, or by asking after the sleep.
pub(crate) trait PauseWatch<R> {
    /// Before each take is sent: what the call may count on hearing from then on.
    fn arm(&mut self);

    /// Sleeps until `wake`, when the reservation in `reply` is usable, or less: until a pause
    /// that covers its send is heard and the server confirms it.
    fn sleep(
        &mut self,
        reply: &R,
        wake: Instant,
    ) -> impl Future<Output = Result<Slept, Error>> + Send;

    /// After a whole sleep: how long a pause still runs (and the rate factor), asked of the
    /// server, and in how many round trips; `None` when nothing needs asking (the call would
    /// have heard it, or the limiter does not check).
    fn check(&mut self) -> impl Future<Output = Result<Option<(Resume, u32)>, Error>> + Send;
}

/// A granted call: its last reply and what it took.
pub(crate) struct Outcome<R> {
    pub reply: R,
    pub waited: Duration,
    pub slept: Duration,
    pub round_trips: u32,
}

/// Asks (`ask(max_wait_ms, None)`) until granted, sleeping as the policy says. A reservation
/// is held (`hold(reply)`) for the sleep before its tokens are usable, and `watch` makes sure
/// no pause set meanwhile (by any replica) covers its send: heard while it sleeps, or asked
/// after. If one does, the reservation is dropped (its `Held` gives its tokens back where it
/// can) and the call asks again once the pause is over (`ask(max_wait_ms, Some(resume))`: the
/// asker sleeps out the rest of the pause, and may ask together with the other calls it held
/// back), so no call the pause covers reaches the supplier.
pub(crate) async fn run<A, F, R, H, W>(
    policy: Policy,
    metrics: &Metrics,
    mut ask: A,
    hold: impl Fn(&R) -> H,
    mut watch: W,
) -> Result<Outcome<R>, Error>
where
    A: FnMut(u64, Option<Resume>) -> F,
    F: Future<Output = Result<R, Error>>,
    R: AsRef<TakeReply>,
    H: Held,
    W: PauseWatch<R>,
{
    let start = Instant::now();
    let mut round_trips = 0u32;
    let mut slept = Duration::ZERO;
    // A pause that held the call back: its rest is slept out before asking again.
    let mut after_pause: Option<Resume> = None;
    loop {
        watch.arm();
        let resume = after_pause.take();
        let asked = start.elapsed() + resume.map_or(Duration::ZERO, |r| r.rest);
        let reply = ask(policy.max_wait_ms(asked), resume).await?;
        // A call that asked again together with others may have sent nothing of its own.
        let trips = reply.as_ref().round_trips;
        round_trips = round_trips.saturating_add(if resume.is_some() {
            trips
        } else {
            trips.max(1)
        });
        match policy.decide(
            reply.as_ref(),
            round_trips,
            start.elapsed(),
            fastrand::f64(),
        ) {
            Decision::Done => {}
            Decision::SleepThenDone(pause) => {
                let mut held = hold(&reply);
                let asleep = Instant::now();
                let Slept {
                    covered: heard,
                    trips,
                } = watch.sleep(&reply, asleep + pause).await?;
                round_trips = round_trips.saturating_add(trips);
                // What the call asked to sleep (the timer's lateness is the machine's), or what
                // it slept until a pause woke it.
                slept += if heard.is_some() {
                    asleep.elapsed()
                } else {
                    pause
                };
                let covered = match heard {
                    Some(Covered { resume, moved }) => {
                        metrics.event(Event::HeardPause);
                        for bucket in moved {
                            held.moved(bucket);
                        }
                        Some(resume)
                    }
                    None => match watch.check().await? {
                        Some((resume, trips)) => {
                            round_trips = round_trips.saturating_add(trips);
                            (!resume.rest.is_zero()).then_some(resume)
                        }
                        None => None,
                    },
                };
                if let Some(resume) = covered {
                    metrics.held_by_pause();
                    // The pause is the server's word: one that outlasts the deadline fails
                    // the call now (its tokens go back as it is dropped), not at its end.
                    if let Some(reason) = policy.after_pause(resume.rest, start.elapsed()) {
                        drop(held);
                        return Err(give_up(metrics, reason, start, round_trips));
                    }
                    tracing::debug!(
                        rest = ?resume.rest,
                        "a pause covers the reserved call; acquiring again after it"
                    );
                    drop(held);
                    after_pause = Some(resume);
                    slept += resume.rest;
                    continue;
                }
                held.release();
            }
            Decision::SleepThenRetry(pause) => {
                if policy.is_floored() {
                    metrics.held_by_floor();
                }
                tracing::trace!(?pause, round_trips, "refused; polling again");
                tokio::time::sleep(pause).await;
                slept += pause;
                continue;
            }
            Decision::GiveUp(reason) => {
                return Err(give_up(metrics, reason, start, round_trips));
            }
        }
        let waited = start.elapsed();
        metrics.granted(waited);
        record(waited, round_trips, "granted");
        return Ok(Outcome {
            reply,
            waited,
            slept,
            round_trips,
        });
    }
}

/// A call that stops without its tokens: counted, recorded, and the error that says why.
fn give_up(metrics: &Metrics, reason: GiveUp, start: Instant, round_trips: u32) -> Error {
    metrics.gave_up();
    let waited = start.elapsed();
    record(waited, round_trips, "gave_up");
    match reason {
        GiveUp::Deadline { needed, deadline } => Error::DeadlineExceeded {
            needed: Some(needed),
            deadline,
            paused: false,
        },
        GiveUp::Paused { rest, deadline } => Error::DeadlineExceeded {
            needed: Some(rest),
            deadline,
            paused: true,
        },
        GiveUp::Attempts(attempts) => Error::GaveUp { attempts, waited },
    }
}

/// Records a call's result on the current span.
pub(crate) fn record(waited: Duration, round_trips: u32, outcome: &'static str) {
    let span = tracing::Span::current();
    span.record("waited", tracing::field::debug(waited));
    span.record("round_trips", round_trips);
    span.record("outcome", outcome);
}
