//! The waiting loop every limiter shares: ask the server, let the [`Policy`] decide, sleep,
//! maybe ask again. The I/O is the caller's `ask`; what to do with a reply is the policy's.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::policy::{Decision, GiveUp, Policy};
use crate::reply::TakeReply;
use crate::Error;

/// Something held while a reserved call sleeps until its tokens are usable: dropped with the
/// call's future if it is cancelled, released once the sleep is over.
pub(crate) trait Held {
    /// The sleep is over: the tokens are the caller's to use.
    fn release(self);
}

impl Held for () {
    fn release(self) {}
}

/// A granted call: its last reply and what it took.
pub(crate) struct Outcome<R> {
    pub reply: R,
    pub waited: Duration,
    pub slept: Duration,
    pub round_trips: u32,
}

/// Asks (`ask(max_wait_ms)`) until granted, sleeping as the policy says. A reservation is
/// held (`hold(reply)`) for the sleep before its tokens are usable; after the sleep,
/// `paused()` asks how long the bucket is paused for now, and in how many round trips
/// (`None`: the check is off), so
/// that a pause set meanwhile (by any replica) covers the send: if so,
/// the reservation is dropped (its `Held` gives its tokens back where it can), the call
/// sleeps out the pause and asks again, so no call the pause covers reaches the supplier.
pub(crate) async fn run<A, F, R, H, P, G>(
    policy: Policy,
    metrics: &Metrics,
    mut ask: A,
    hold: impl Fn(&R) -> H,
    mut paused: P,
) -> Result<Outcome<R>, Error>
where
    A: FnMut(u64) -> F,
    F: Future<Output = Result<R, Error>>,
    R: AsRef<TakeReply>,
    H: Held,
    P: FnMut() -> Option<G>,
    G: Future<Output = Result<(Duration, u32), Error>>,
{
    let start = Instant::now();
    let mut round_trips = 0u32;
    let mut slept = Duration::ZERO;
    loop {
        let reply = ask(policy.max_wait_ms(start.elapsed())).await?;
        round_trips = round_trips.saturating_add(reply.as_ref().round_trips.max(1));
        match policy.decide(
            reply.as_ref(),
            round_trips,
            start.elapsed(),
            fastrand::f64(),
        ) {
            Decision::Done => {}
            Decision::SleepThenDone(pause) => {
                let held = hold(&reply);
                tokio::time::sleep(pause).await;
                slept += pause;
                if let Some(check) = paused() {
                    let (rest, trips) = check.await?;
                    round_trips = round_trips.saturating_add(trips);
                    if !rest.is_zero() {
                        metrics.held_by_pause();
                        tracing::debug!(
                            ?rest,
                            "a pause covers the reserved call; acquiring again after it"
                        );
                        drop(held);
                        tokio::time::sleep(rest).await;
                        slept += rest;
                        continue;
                    }
                }
                held.release();
            }
            Decision::SleepThenRetry(pause) => {
                tracing::trace!(?pause, round_trips, "refused; polling again");
                tokio::time::sleep(pause).await;
                slept += pause;
                continue;
            }
            Decision::GiveUp(reason) => {
                metrics.gave_up();
                let waited = start.elapsed();
                record(waited, round_trips, "gave_up");
                return Err(match reason {
                    GiveUp::Deadline { needed, deadline } => Error::DeadlineExceeded {
                        needed: Some(needed),
                        deadline,
                    },
                    GiveUp::Attempts(attempts) => Error::GaveUp { attempts, waited },
                });
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

/// Records a call's result on the current span.
pub(crate) fn record(waited: Duration, round_trips: u32, outcome: &'static str) {
    let span = tracing::Span::current();
    span.record("waited", tracing::field::debug(waited));
    span.record("round_trips", round_trips);
    span.record("outcome", outcome);
}
