//! What a granted call holds: its tokens, what it took to get them, and what giving them back
//! or settling them needs. The same for every kind of limiter.

use std::time::Duration;

use tokio::time::Instant;

use crate::pushback::SyncBounds;

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
    /// Requests to Redis the call made (0 for a partitioned limiter, which spends in process).
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
}

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
        }
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
