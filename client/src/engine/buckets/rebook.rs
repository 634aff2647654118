//! Calls that a pause held back ask again together. A pause heard (or asked about) wakes every
//! reserved call it covers at once, and each would otherwise take again on its own when the
//! pause ends: one round trip per call, for calls the fleet had already paid a round trip
//! for. Instead the held calls of one limiter gather at its desk, and when the pause ends one
//! take asks for all of their tokens; each call then goes at its own slot inside that take.
//!
//! The slots are where the take's tokens become usable, counted at the configured rate from
//! the end: the last call goes at the wait the server named, each one before it that many
//! tokens' full-rate interval earlier. A cut only makes tokens cost more time, so every slot
//! is at or after the moment its tokens were there: never early, whatever the server's factor.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionLike;
use throttle_bucket::{Limit, Quota, FULL_FACTOR_BP};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Buckets;
use crate::engine::waiting::Place;
use crate::wire::reply::MTakeTickets;

/// A held call joins a batch that fires at most this long after its own pause ends: the calls
/// one announcement wakes all end their rest on the same instant.
const JOIN_WITHIN: Duration = Duration::from_millis(5);

/// Where the held calls of one limiter (and its clones) gather; one batch open at a time.
#[derive(Debug, Default)]
pub(super) struct Desk {
    open: Mutex<Option<Arc<Batch>>>,
}

#[derive(Debug)]
struct Batch {
    fire_at: Instant,
    members: Mutex<Members>,
}

#[derive(Debug, Default)]
struct Members {
    /// The take is under way: no one joins any more.
    closed: bool,
    list: Vec<Member>,
}

#[derive(Debug)]
struct Member {
    /// Tokens per bucket, in key order.
    tokens: Vec<u64>,
    max_wait_ms: u64,
    /// The call's share of the take; `None`: ask alone (the take was refused or failed).
    share: oneshot::Sender<Option<MTakeTickets>>,
}

impl<C> Buckets<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Takes `limits` again at `fire_at`, when the pause that covered a call's reservation
    /// is over, together with the other held calls of this limiter: the call's share of the
    /// take, or `None` when it must ask alone (another pause's batch, or the take was refused
    /// or failed). Whether a call may ask together is the policy's (`Policy::rebooks`).
    pub(super) async fn rebook(
        &self,
        limits: &[Limit],
        max_wait_ms: u64,
        fire_at: Instant,
        factor_bp: u16,
    ) -> Option<MTakeTickets> {
        let share = self.join(limits, max_wait_ms, fire_at, factor_bp)?;
        share.await.ok().flatten()
    }

    /// Joins the open batch, or opens one firing at `fire_at`; `None` when the call must ask
    /// alone.
    fn join(
        &self,
        limits: &[Limit],
        max_wait_ms: u64,
        fire_at: Instant,
        factor_bp: u16,
    ) -> Option<oneshot::Receiver<Option<MTakeTickets>>> {
        let (share, receiver) = oneshot::channel();
        let member = Member {
            tokens: limits.iter().map(|l| l.tokens).collect(),
            max_wait_ms,
            share,
        };
        let mut open = self.shared.desk.lock();
        if let Some(batch) = open.as_ref() {
            let mut members = batch.lock();
            if !members.closed {
                let apart = batch.fire_at.max(fire_at) - batch.fire_at.min(fire_at);
                if apart > JOIN_WITHIN {
                    // Another pause's batch: this call asks alone, at its time.
                    return None;
                }
                if fits(&members.list, &member.tokens, limits, factor_bp) {
                    members.list.push(member);
                    return Some(receiver);
                }
                // A full batch: the next one opens beside it, and takes right after it.
            }
        }
        let batch = Arc::new(Batch {
            fire_at,
            members: Mutex::new(Members {
                closed: false,
                list: vec![member],
            }),
        });
        *open = Some(Arc::clone(&batch));
        drop(open);
        // A task of its own: the batch fires whichever of its calls is dropped meanwhile.
        let buckets = self.clone();
        let quotas: Vec<_> = limits.iter().map(|l| l.quota).collect();
        tokio::spawn(async move { buckets.fire(batch, quotas).await });
        Some(receiver)
    }

    /// At the batch's time: one take for all its calls, then each call's share.
    async fn fire(self, batch: Arc<Batch>, quotas: Vec<Quota>) {
        tokio::time::sleep_until(batch.fire_at).await;
        let members = {
            let mut members = batch.lock();
            members.closed = true;
            std::mem::take(&mut members.list)
        };
        {
            let mut open = self.shared.desk.lock();
            if open.as_ref().is_some_and(|b| Arc::ptr_eq(b, &batch)) {
                *open = None;
            }
        }
        // A call dropped meanwhile takes nothing.
        let members: Vec<Member> = members
            .into_iter()
            .filter(|m| !m.share.is_closed())
            .collect();
        let Some(max_wait_ms) = members.iter().map(|m| m.max_wait_ms).min() else {
            return;
        };
        let totals = totals(&members);
        let limits: Vec<Limit> = quotas
            .iter()
            .zip(&totals)
            .map(|(quota, tokens)| Limit {
                quota: *quota,
                tokens: *tokens,
                floor: None,
            })
            .collect();
        // A rebooked call takes no slot (see `Policy::rebooks`): no line.
        let taken = match self.take(&limits, max_wait_ms, Place::Outside).await {
            Ok(taken) if taken.reply.granted => taken,
            // Refused within the shortest deadline, or failed: each asks alone, as it would have.
            _ => {
                for member in members {
                    let _ = member.share.send(None);
                }
                return;
            }
        };
        let intervals: Vec<Duration> = self
            .shared
            .buckets
            .iter()
            .map(|b| b.quota.token_interval())
            .collect();
        let tokens: Vec<&[u64]> = members.iter().map(|m| m.tokens.as_slice()).collect();
        let slots = slots(taken.reply.wait, &tokens, &intervals);
        for (number, (member, slot)) in members.into_iter().zip(slots).enumerate() {
            let mut share = taken.clone();
            share.reply.wait = slot;
            // The take's round trips are the first call's; the others took none of their own.
            if number > 0 {
                share.reply.round_trips = 0;
            }
            let _ = member.share.send(Some(share));
        }
    }
}

impl Desk {
    /// The open batch, if any.
    fn lock(&self) -> MutexGuard<'_, Option<Arc<Batch>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Batch {
    fn lock(&self) -> MutexGuard<'_, Members> {
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `tokens` fits beside `members` in every bucket: one take holds at most what the
/// bucket holds at once, its capacity at the rate factor `factor_bp` (a cut bucket holds only
/// that share; more would wait for the rate to climb back).
fn fits(members: &[Member], tokens: &[u64], limits: &[Limit], factor_bp: u16) -> bool {
    limits.iter().enumerate().all(|(bucket, limit)| {
        let taken: u64 = members
            .iter()
            .filter_map(|m| m.tokens.get(bucket))
            .fold(0u64, |sum, t| sum.saturating_add(*t));
        let mine = tokens.get(bucket).copied().unwrap_or(0);
        let holds = u128::from(limit.quota.capacity) * u128::from(factor_bp.min(FULL_FACTOR_BP))
            / u128::from(FULL_FACTOR_BP);
        u128::from(taken.saturating_add(mine)) <= holds
    })
}

/// Tokens per bucket of all the members.
fn totals(members: &[Member]) -> Vec<u64> {
    let buckets = members.first().map_or(0, |m| m.tokens.len());
    (0..buckets)
        .map(|bucket| {
            members
                .iter()
                .filter_map(|m| m.tokens.get(bucket))
                .fold(0u64, |sum, t| sum.saturating_add(*t))
        })
        .collect()
}

/// When each member's tokens are usable, from the take's `wait` (when all are), in member
/// order: in every bucket, the tokens of the members after it are counted off the end at the
/// full rate's interval, and the slot is the latest over the buckets.
fn slots(wait: Duration, members: &[&[u64]], intervals: &[Duration]) -> Vec<Duration> {
    let mut after: Vec<u64> = intervals
        .iter()
        .enumerate()
        .map(|(bucket, _)| {
            members
                .iter()
                .filter_map(|m| m.get(bucket))
                .fold(0u64, |sum, t| sum.saturating_add(*t))
        })
        .collect();
    members
        .iter()
        .map(|tokens| {
            for (left, mine) in after.iter_mut().zip(tokens.iter()) {
                *left = left.saturating_sub(*mine);
            }
            let earlier = after
                .iter()
                .zip(intervals)
                .map(|(left, interval)| {
                    interval.saturating_mul(u32::try_from(*left).unwrap_or(u32::MAX))
                })
                .min()
                .unwrap_or(Duration::ZERO);
            wait.saturating_sub(earlier)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_last_goes_at_the_wait_and_each_earlier_one_its_tokens_before() {
        // One bucket at 2/s: 1, 1 and 2 tokens, all usable at 2 s.
        let slots = slots(MS * 2000, &[&[1], &[1], &[2]], &[MS * 500]);
        assert_eq!(slots, [MS * 500, MS * 1000, MS * 2000]);
    }

    #[test]
    fn several_buckets_take_the_latest_slot() {
        // Requests at 10/s (one each) and tokens at 1000/s (100, 300, 50). After the first
        // call come 2 requests (200 ms) and 350 tokens (350 ms): 200 ms before the end holds
        // both. After the second, 1 request (100 ms) and 50 tokens (50 ms): 50 ms before it.
        let slots = slots(MS * 400, &[&[1, 100], &[1, 300], &[1, 50]], &[MS * 100, MS]);
        assert_eq!(slots, [MS * 200, MS * 350, MS * 400]);
    }

    #[test]
    fn a_slot_is_never_before_the_take() {
        assert_eq!(
            slots(MS * 100, &[&[5], &[5]], &[MS * 50]),
            [Duration::ZERO, MS * 100]
        );
        assert_eq!(
            slots(Duration::ZERO, &[&[1], &[1]], &[MS]),
            [Duration::ZERO, Duration::ZERO]
        );
    }
}
