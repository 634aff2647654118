//! A limiter's slots for calls in flight, the I/O beside [`crate::in_flight`]'s decisions: the
//! take that waits for a slot, and the task that keeps one (renews its lease while the grant
//! holds it, releases it when the grant goes).

use std::time::Duration;

use redis::aio::ConnectionLike;
use throttle_bucket::{Limit, ReleaseArgs, RenewArgs};
use tokio::sync::{oneshot, Mutex, Notify};
use tokio::time::Instant;

use super::Buckets;
use crate::grant::SlotHold;
use crate::in_flight::{after_futile_wake, listening_look, next_look};
use crate::reply::MTakeTickets;
use crate::Error;

/// Where a limiter's calls wait for a slot: one in line at a time looks again (the others wait
/// behind it, in order), woken at once by a slot this process releases.
#[derive(Debug, Default)]
pub(super) struct Gate {
    freed: Notify,
    line: Mutex<()>,
}

/// A take, and the slot it holds (with a cap on calls in flight, when granted).
#[derive(Debug)]
pub(super) struct Slotted {
    pub(super) taken: MTakeTickets,
    pub(super) slot: Option<SlotHold>,
}

impl AsRef<crate::reply::TakeReply> for Slotted {
    fn as_ref(&self) -> &crate::reply::TakeReply {
        &self.taken.reply
    }
}

impl<C> Buckets<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// One take of `limits` within `max_wait_ms`, holding its slot when the limiter caps calls
    /// in flight; refused for want of a slot, the call waits for one (in line behind this
    /// process's other waiters, woken by a slot released here, by a slot freed elsewhere that
    /// the limiter hears announced, or looking again on a timer where it does not) and takes
    /// again, until its `max_wait_ms` is spent. A floored call does not wait here: its refusals
    /// are the floor's as much as the slots', and it sleeps the wait the server names.
    pub(super) async fn take_slotted(
        &self,
        limits: &[Limit],
        max_wait_ms: u64,
    ) -> Result<Slotted, Error> {
        let shared = &self.shared;
        let Some(in_flight) = shared.options.in_flight else {
            let taken = self.take(limits, max_wait_ms).await?;
            return Ok(Slotted { taken, slot: None });
        };
        let floored = limits.iter().any(|l| l.floor.is_some());
        let deadline = Instant::now() + Duration::from_millis(max_wait_ms);
        let mut round_trips = 0u32;
        let mut in_line = None;
        let mut last_look = None;
        // The least time after a reply before a slot freed heard wakes the call: grows with
        // each such wake that found no slot.
        let mut futile_gap: Option<std::time::Duration> = None;
        let mut woken_by_freed = false;
        let ears = shared.ears.as_deref();
        loop {
            let left = ms_until(deadline);
            // Listening before the take: a slot freed while it is under way still wakes us,
            // whether this process freed it or the fleet's announcement of it comes in before
            // the take's reply does.
            let freed = shared.gate.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let hearing = ears.and_then(|ears| Some((ears, ears.trust()?, ears.freed_seen())));
            let mut taken = self.take(limits, left).await?;
            let replied = Instant::now();
            round_trips = round_trips.saturating_add(taken.reply.round_trips);
            taken.reply.round_trips = round_trips;
            if taken.reply.granted {
                let slot = taken.slot.map(|id| self.hold_slot(id));
                return Ok(Slotted { taken, slot });
            }
            if floored || !in_flight.refused_for_slot(&taken.reply, left) {
                return Ok(Slotted { taken, slot: None });
            }
            if woken_by_freed {
                futile_gap = Some(after_futile_wake(futile_gap));
            }
            if in_line.is_none() {
                shared.metrics.waited_for_slot();
                // Behind another waiter: when its turn comes, the wait below ends at once if a
                // slot was freed since this take (or a look is due), and not otherwise.
                let turn = match shared.gate.line.try_lock() {
                    Ok(turn) => turn,
                    Err(_) => {
                        match tokio::time::timeout_at(deadline, shared.gate.line.lock()).await {
                            Ok(turn) => turn,
                            Err(_) => return Ok(Slotted { taken, slot: None }),
                        }
                    }
                };
                in_line = Some(turn);
            }
            // Heard from since before the take: a release anywhere wakes the call, and it looks
            // again on its own only when a lease may have run out. Otherwise it polls.
            let heard = hearing.filter(|(ears, trust, _)| ears.kept(*trust));
            let look = match heard {
                Some(_) => {
                    last_look = None;
                    listening_look(taken.reply.wait)
                }
                None => {
                    let look = next_look(last_look, taken.reply.wait);
                    last_look = Some(look);
                    look
                }
            };
            let wake = (replied + look).min(deadline);
            let not_before = replied + futile_gap.unwrap_or_default();
            let hear = async {
                match heard {
                    Some((ears, trust, seen)) => tokio::select! {
                        () = async {
                            tokio::time::sleep_until(not_before).await;
                            ears.freed_since(seen).await;
                        } => true,
                        () = ears.lost(trust) => false,
                    },
                    None => std::future::pending().await,
                }
            };
            woken_by_freed = tokio::select! {
                () = &mut freed => false,
                by_freed = hear => by_freed,
                () = tokio::time::sleep_until(wake) => false,
            };
        }
    }

    /// Holds slot `id` for a grant: renewed while held, released once the hold is dropped.
    fn hold_slot(&self, id: u64) -> SlotHold {
        let (held, ended) = oneshot::channel();
        let shared = &self.shared;
        shared.metrics.slot_taken();
        // Without a runtime (a grant outside any) the slot runs out with its lease, as a
        // crashed holder's does.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let buckets = self.clone();
                runtime.spawn(async move { buckets.keep_slot(id, ended).await });
            }
            Err(_) => shared.metrics.slot_ended(),
        }
        SlotHold { id, _held: held }
    }

    /// Renews slot `id` every third of its lease until `ended` says the grant is gone, then
    /// releases it and wakes the next caller in line. A renewal that finds the slot gone (the
    /// holder froze, or Redis lost it) is counted and logged: the call runs on without it.
    async fn keep_slot(self, id: u64, mut ended: oneshot::Receiver<()>) {
        let shared = &self.shared;
        let Some(in_flight) = shared.options.in_flight else {
            return;
        };
        let mut held = true;
        let mut renew_at = Instant::now() + in_flight.renew_every();
        loop {
            tokio::select! {
                _ = &mut ended => break,
                () = tokio::time::sleep_until(renew_at), if held => {
                    renew_at += in_flight.renew_every();
                    match self.renew(id, in_flight.lease_ms()).await {
                        Ok(true) => {}
                        Ok(false) => {
                            held = false;
                            shared.metrics.lease_lost();
                            tracing::warn!(
                                limiter = %shared.name, slot = id,
                                "a call in flight lost its slot: its lease ran out before it \
                                 was renewed (a frozen process, or a lease shorter than the \
                                 round trips); lengthen the lease with slot_lease"
                            );
                        }
                        // The lease has two thirds left: the next renewal may get through.
                        Err(err) => tracing::debug!(error = %err, slot = id, "could not renew a slot"),
                    }
                }
            }
        }
        // The call has ended: counted before the release is sent, so that whoever sees the
        // slot free on the server also sees it gone from this process's metrics.
        shared.metrics.slot_ended();
        if held {
            match self.release(id).await {
                Ok(_) => shared.metrics.slot_released(),
                Err(err) => {
                    tracing::debug!(error = %err, slot = id, "could not release a slot: its lease frees it");
                }
            }
        }
        shared.gate.freed.notify_waiters();
    }

    /// `THROTTLE.RENEW` of slot `id` for `lease_ms`: whether it was held.
    async fn renew(&self, id: u64, lease_ms: u64) -> Result<bool, Error> {
        let Some(bucket) = self.shared.buckets.first() else {
            return Ok(false);
        };
        let args = RenewArgs {
            quota: *bucket.quota.bucket(),
            slot: id,
            lease_ms,
        };
        self.call(&bucket.key, &args).await
    }

    /// `THROTTLE.RELEASE` of slot `id`: whether it was held.
    async fn release(&self, id: u64) -> Result<bool, Error> {
        let Some(bucket) = self.shared.buckets.first() else {
            return Ok(false);
        };
        // With the cap, so that a release from a full table wakes the fleet's waiters.
        let args = ReleaseArgs {
            quota: *bucket.quota.bucket(),
            slot: id,
            inflight: self.shared.options.in_flight.map(|f| f.cap),
        };
        self.call(&bucket.key, &args).await
    }
}

/// Whole ms from now until `deadline`, rounded down (0 once it has passed).
fn ms_until(deadline: Instant) -> u64 {
    let left = deadline.saturating_duration_since(Instant::now());
    u64::try_from(left.as_millis()).unwrap_or(u64::MAX)
}
