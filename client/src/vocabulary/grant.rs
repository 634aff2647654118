//! What a granted call holds: its tokens, what it took to get them, and what giving them back
//! or settling them needs. The same for every kind of limiter.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::vocabulary::pushback::SyncBounds;

/// What a granted call got: its tokens, and what it took to get them.
///
/// Neither `Clone` nor `Copy`: [`give_back`](crate::Throttle::give_back) and
/// [`settle`](crate::Throttle::settle) consume it, so its tokens are returned or settled at
/// most once.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Grant {
    /// Tokens taken (for a [`MultiLimiter`](crate::MultiLimiter): the call's tokens, what its
    /// per-token limits took; each limit took its own cost).
    pub tokens: u64,
    /// The whole time spent in the call: round trips and sleeps.
    pub waited: Duration,
    /// The part of [`Grant::waited`] spent sleeping, as the server asked.
    pub slept: Duration,
    /// Whole tokens left in the bucket right after the call (the tightest bucket of a
    /// [`MultiLimiter`](crate::MultiLimiter); the partition that served it for a
    /// [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter)); 0 while the bucket
    /// is in debt to reservations.
    pub remaining: u64,
    /// Requests to Redis the call made (0 for a partitioned limiter, which spends in process,
    /// unless it caps its calls in flight: its slot's takes).
    pub round_trips: u32,
    /// The instant the tokens were usable: when the call returned, or, for a partitioned
    /// limiter, when they were taken from a lease still usable.
    pub at: Instant,
    /// The partition that served the call (partitioned limiters only).
    pub partition: Option<u32>,
    /// Granted without the bucket: Redis could not be reached and the limiter fails open
    /// ([`Unreachable::FailOpen`](crate::Unreachable::FailOpen)). Nothing to give back.
    pub unchecked: bool,
    pub(crate) receipt: Receipt,
    /// Which of the supplier's counts could lower the buckets as the call left them, each
    /// unit against its own buckets (`None`: one bucket, [`Grant::remaining`]).
    pub(crate) sync_bounds: Option<SyncBounds>,
    /// The call's slot, with a cap on calls in flight: held while the grant lives.
    pub(crate) slot: Option<SlotHold>,
}

/// A slot for a call in flight, held while its grant lives: a task of the limiter renews its
/// lease meanwhile and releases it once this is dropped (the grant dropped, given back or
/// settled; its future cancelled; a panic unwinding through it).
#[derive(Debug)]
pub(crate) struct SlotHold {
    pub(crate) id: u64,
    /// Dropped with the hold: the keeping task's signal to release the slot.
    pub(crate) _held: oneshot::Sender<()>,
}

/// Two holds are the same slot if their ids are: ids are never given out twice.
impl PartialEq for SlotHold {
    fn eq(&self, other: &SlotHold) -> bool {
        self.id == other.id
    }
}

impl Eq for SlotHold {}

/// What returning a grant's tokens needs, by the kind of limiter that granted it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) enum Receipt {
    /// Nothing can be returned (nothing was taken).
    #[default]
    None,
    /// `THROTTLE.GIVE`'s ticket for each bucket, in key order (one for a [`crate::Limiter`];
    /// 0: nothing was taken from that bucket).
    Tickets(Vec<u64>),
    /// The partition's local state right after the take (ns), which a give-back must find
    /// unchanged.
    Partition(i64),
}

impl Grant {
    /// A grant; its receipt says how to return it.
    pub(crate) fn new(tokens: u64, waited: Duration, slept: Duration, receipt: Receipt) -> Grant {
        Grant {
            tokens,
            waited,
            slept,
            remaining: 0,
            round_trips: 0,
            at: Instant::now(),
            partition: None,
            unchecked: false,
            receipt,
            sync_bounds: None,
            slot: None,
        }
    }

    /// The id of the slot the call holds, with a cap on calls in flight
    /// ([`LimiterBuilder::max_in_flight`](crate::LimiterBuilder::max_in_flight)); `None`
    /// without one. The slot is the grant's until the grant is dropped: hold the grant for
    /// the call's whole life (reading the response included), and drop it when the call ends.
    pub fn slot(&self) -> Option<u64> {
        self.slot.as_ref().map(|slot| slot.id)
    }
}

/// The result of a `try_acquire`: granted now, or not without waiting.
#[derive(Debug, PartialEq, Eq)]
pub enum TryAcquire {
    /// The tokens were there and are taken.
    Granted(Grant),
    /// The tokens were not there; nothing was taken.
    Denied {
        /// How long until they will be (if nobody else takes them first).
        retry_after: Duration,
    },
}

impl TryAcquire {
    /// The tokens were taken.
    pub fn is_granted(&self) -> bool {
        matches!(self, TryAcquire::Granted(_))
    }

    /// The grant, if the tokens were taken.
    pub fn granted(self) -> Option<Grant> {
        match self {
            TryAcquire::Granted(grant) => Some(grant),
            TryAcquire::Denied { .. } => None,
        }
    }
}
