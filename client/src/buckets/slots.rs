//! A limiter's slots for calls in flight, the I/O beside [`crate::waiting::in_flight`]: the take that
//! holds a slot, and the task that keeps one (renews its lease while the grant holds it,
//! releases it when the grant goes). A call waits for one in [`crate::waiting`].

use redis::aio::ConnectionLike;
use throttle_bucket::{Limit, LineArgs, Refusal, ReleaseArgs, RenewArgs, TakeArgs};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{line_args, Buckets};
use crate::grant::SlotHold;
use crate::waiting::Place;
use crate::wire::reply::MTakeTickets;
use crate::{Error, QuotaError};

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

/// Where a call of several buckets stands after a take of its slot in the line.
enum LineTake {
    /// It holds the slot with this id.
    Holds(u64),
    /// The take's reply: in line (or refused).
    Answer(Box<MTakeTickets>),
}

/// A slot a call of several buckets holds while it takes their tokens: released when dropped
/// unless the call got them (`id` taken).
struct SlotBack<'a, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    buckets: &'a Buckets<C>,
    id: Option<u64>,
}

impl<C> Drop for SlotBack<'_, C>
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
    /// (`crate::waiting`).
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

    /// The take of several buckets by a call at `place`, and its round trips. Capped with no
    /// floor, the call waits for its slot in the first bucket's line, as one bucket's call
    /// does, but THROTTLE.RELEASE hands a slot over with that bucket's tokens only: so the
    /// call joins the line with a take of the slot alone (`TOKENS 0 ... LINE`), and once it
    /// holds a slot (free at once, or handed over) one THROTTLE.MTAKE without INFLIGHT takes
    /// every bucket's tokens. A call that finds a slot free takes it with its tokens in one
    /// THROTTLE.MTAKE, as without the line; one that gets its slot and then not its tokens
    /// gives the slot back.
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
        let mut trips = 0;
        let held = if let Place::Handed { ticket, .. } = place {
            ticket
        } else {
            let Some(line) = line else {
                return self.mtake(limits, max_wait_ms, inflight).await;
            };
            if !matches!(place, Place::Look(_)) {
                // Its slot with every bucket's tokens first, as when one is free.
                let (taken, t) = self.mtake(limits, max_wait_ms, inflight).await;
                trips += t;
                match taken {
                    // Refused for a slot alone (every slot held, or callers in line ahead):
                    // it joins the line.
                    Ok(taken)
                        if !taken.reply.granted && taken.reply.said == Some(Refusal::SLOT) => {}
                    other => return (other, trips),
                }
            }
            let (taken, t) = self.slot_in_line(limits, line).await;
            trips += t;
            match taken {
                Ok(LineTake::Holds(id)) => id,
                Ok(LineTake::Answer(in_line)) => return (Ok(*in_line), trips),
                Err(err) => return (Err(err), trips),
            }
        };
        // Holding slot `held`: every bucket's tokens. Without them (refused, no answer, or the
        // call dropped meanwhile) the slot goes back, to the next caller in line.
        let mut slot = SlotBack {
            buckets: self,
            id: Some(held),
        };
        let (taken, t) = self.mtake(limits, max_wait_ms, None).await;
        trips += t;
        match taken {
            Ok(mut taken) if taken.reply.granted => {
                taken.slot = slot.id.take();
                (Ok(taken), trips)
            }
            other => (other, trips),
        }
    }

    /// A take of the first bucket's slot alone in its line (`TOKENS 0 ... LINE`, a look with
    /// the call's ticket if `line` has one): the slot it holds now (free, or handed over), or
    /// the reply that puts it in line.
    async fn slot_in_line(
        &self,
        limits: &[Limit],
        line: LineArgs,
    ) -> (Result<LineTake, Error>, u32) {
        let (Some(bucket), Some(limit)) = (self.shared.buckets.first(), limits.first()) else {
            return (
                Err(Error::from(QuotaError::Limits {
                    problem: "none given".to_owned(),
                })),
                0,
            );
        };
        let args = TakeArgs {
            quota: limit.quota,
            tokens: 0,
            max_wait_ms: 0,
            ticket: false,
            floor: None,
            inflight: self.inflight(),
            line: Some(line),
        };
        let (reply, trips) = self.call_counted(&[bucket.key.as_str()], &args).await;
        let taken = reply.map(MTakeTickets::from);
        let held = taken.map(|taken| match taken.slot {
            Some(id) if taken.reply.granted => LineTake::Holds(id),
            _ => LineTake::Answer(Box::new(taken)),
        });
        (held, trips)
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
        shared.lines.freed();
    }

    /// Takes ticket `ticket` out of the server's line for a slot (a call that gave up, or
    /// whose future was dropped, while it stood there), or gives back the slot handed to it
    /// (a call of several buckets that did not get their tokens), in a task of its own.
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
            inflight: self.shared.options.in_flight.map(|f| f.cap),
        };
        self.call(&bucket.key, &args).await
    }
}
