//! A limiter's slots for calls in flight, the I/O beside [`crate::engine::waiting::in_flight`]: the take that
//! holds a slot, and the task that keeps one (renews its lease while the grant holds it,
//! releases it when the grant goes). A call waits for one in [`crate::engine::waiting`].

use redis::aio::ConnectionLike;
use throttle_bucket::{Limit, ReleaseArgs, RenewArgs};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{line_args, Buckets};
use crate::engine::waiting::Place;
use crate::vocabulary::grant::SlotHold;
use crate::wire::reply::MTakeTickets;
use crate::Error;

/// A take, and the slot it holds (with a cap on calls in flight, when granted).
#[derive(Debug)]
pub(super) struct Slotted {
    pub(super) taken: MTakeTickets,
    pub(super) slot: Option<SlotHold>,
}

impl AsRef<crate::wire::reply::TakeReply> for Slotted {
    fn as_ref(&self) -> &crate::wire::reply::TakeReply {
        &self.taken.reply
    }
}

/// A slot heard handed to a call of several buckets, its until the look that takes their
/// tokens answers: given back when dropped unless that look was answered (`id` taken).
struct HandedSlot<'a, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    buckets: &'a Buckets<C>,
    id: Option<u64>,
}

impl<C> Drop for HandedSlot<'_, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.buckets.leave_line(id);
        }
    }
}

impl<C> Buckets<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// One take of `limits` within `max_wait_ms` (one round trip; several buckets' call that
    /// waited in line, two), holding its slot when the limiter caps calls in flight and the
    /// take is granted. A refusal for want of a slot is waited out by the loop
    /// (`crate::engine::waiting`).
    pub(super) async fn take_holding(
        &self,
        limits: &[Limit],
        max_wait_ms: u64,
        place: Place,
    ) -> Result<Slotted, Error> {
        let taken = self.take(limits, max_wait_ms, place).await?;
        let slot = taken
            .slot
            .filter(|_| taken.reply.granted)
            .map(|id| self.hold_slot(id));
        Ok(Slotted { taken, slot })
    }

    /// The take of several buckets by a call at `place`, and its round trips: one
    /// THROTTLE.MTAKE, which with a cap on calls in flight and no floor waits for its slot in
    /// the first bucket's line (`LINE`), as one bucket's take does. A slot handed to it there
    /// comes without the tokens (THROTTLE.RELEASE names the first key only), so the call's
    /// look (`WAITER`) takes every bucket's; the server passes the slot on if they are not
    /// there in time. A call dropped before that look is answered gives the slot back.
    pub(super) async fn take_several(
        &self,
        limits: &[Limit],
        max_wait_ms: u64,
        place: Place,
    ) -> (Result<MTakeTickets, Error>, u32) {
        let inflight = self.inflight();
        let floored = limits.iter().any(|l| l.floor.is_some());
        let line = if floored {
            None
        } else {
            line_args(inflight, None, place)
        };
        let mut handed = HandedSlot {
            buckets: self,
            id: match place {
                Place::Handed { ticket, .. } => Some(ticket),
                _ => None,
            },
        };
        let (taken, trips) = self.mtake(limits, max_wait_ms, inflight, line).await;
        if taken.is_ok() {
            // Granted, the grant holds the slot; refused, the server passed it on.
            handed.id = None;
        }
        (taken, trips)
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
        let Some(in_flight) = shared.in_flight else {
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
        shared.lines.freed();
    }

    /// Takes ticket `ticket` out of the server's line for a slot (a call that gave up, or
    /// whose future was dropped, while it stood there), or gives back the slot handed to it
    /// (a call of several buckets dropped before its look took their tokens), in a task of its
    /// own.
    /// Without a runtime, or if the release fails, the ticket leaves at the end of its place
    /// lease, and the slot at the end of its own.
    pub(super) fn leave_line(&self, ticket: u64) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let buckets = self.clone();
        runtime.spawn(async move {
            if let Err(err) = buckets.release(ticket).await {
                tracing::debug!(error = %err, ticket, "could not leave the line: its place runs out");
            }
        });
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
            inflight: self.shared.in_flight.map(|f| f.cap),
        };
        self.call(&bucket.key, &args).await
    }
}
