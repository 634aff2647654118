//! The line: callers waiting for a slot (THROTTLE.TAKE ... INFLIGHT n LEASE ms LINE place_ms),
//! served in the order they joined. Kept in the bucket's value with its slot table, so a join,
//! a hand-off and a release are one atomic call on one key, replicated as the resulting state.
//!
//! A waiter holds its place under a lease of its own, which it renews by looking again (its
//! ticket as `WAITER id`); one that dies or gives up leaves at the end of that lease, with no
//! sweeper. When a slot is free under the cap (a release, or a holder's lease found run out by
//! the next slot command on the key) it is handed at once to the head waiter: the slot's id is
//! the waiter's ticket, and its tokens are taken then, as a reservation from that instant, so
//! the supplier never sees more than the bucket allows however many hand-offs happen at once.
//! Its lease runs from when those tokens are there, so a waiter that must still wait for its
//! tokens does not lose its lease to that wait. The waiter learns of it from the release's
//! announcement (`handed <id> <wait_ms>`), or when it looks again.

use crate::error::ArgError;
use crate::gcra::{ceil_ms_wide, View};
use crate::limits::{MAX_DEBT_NS, MAX_LINE};
use crate::refusal::Refusal;
use crate::slots::{Slot, Slots, Waiter};
use crate::NS_PER_MS;

/// A slot handed to a waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handed {
    /// The waiter's ticket, now its slot's id.
    pub id: u64,
    /// How long from the hand-off until its tokens are there, ns (0: at once).
    pub wait_ns: i64,
}

/// The bucket (its state instant, from `tat`) and its table after every slot free under `cap`
/// went to the head waiters at the view's now, in order; with the slots handed. The table
/// comes pruned. A waiter whose tokens or lease would not fit a state (a forged value) leaves
/// the line instead.
pub(crate) fn settle(
    bucket: &View<'_>,
    tat: i128,
    mut slots: Slots,
    cap: u64,
) -> (i128, Slots, Vec<Handed>) {
    let now = bucket.now;
    let mut tat = tat.max(now);
    let mut handed = Vec::new();
    while (slots.held.len() as u64) < cap && !slots.waiters.is_empty() {
        let waiter = slots.waiters.remove(0);
        let at = View {
            base: tat,
            ..*bucket
        };
        let (wait, after) = if waiter.tokens == 0 {
            (0, tat)
        } else {
            let wait = at.wait_for(waiter.tokens, 0);
            (wait, at.taken(at.cost(waiter.tokens), now + wait))
        };
        let lease_end = now + wait + i128::from(waiter.lease_ms) * i128::from(NS_PER_MS);
        let (Ok(lease_end), Ok(wait_ns)) = (i64::try_from(lease_end), i64::try_from(wait)) else {
            continue;
        };
        if after - now > i128::from(MAX_DEBT_NS) {
            continue;
        }
        tat = after;
        slots.held.push(Slot {
            id: waiter.id,
            lease_end,
        });
        handed.push(Handed {
            id: waiter.id,
            wait_ns,
        });
    }
    if !handed.is_empty() {
        // Ids in order, as the stored form requires.
        slots.held.sort_unstable_by_key(|s| s.id);
    }
    if slots.waiters.is_empty() {
        slots.cap = 0;
        slots.slack_ms = 0;
    }
    (tat, slots, handed)
}

/// Where ticket `id` stands at `now` in `slots`: its place in line (1: the head), or `None`.
pub(crate) fn place_of(slots: &Slots, now: i128, id: u64) -> Option<u64> {
    slots
        .waiting(now)
        .position(|w| w.id == id)
        .map(|at| at as u64 + 1)
}

/// `slots` (pruned at `now`) with a waiter at the back of the line under `cap`, and its place;
/// `Err` if the line is full, `Ok(None)` if the ids ran out (a forged table).
pub(crate) fn joined(
    slots: &Slots,
    now: i128,
    cap: u64,
    place_end: i64,
    lease_ms: u64,
    tokens: u64,
) -> Result<Option<(Slots, Waiter, u64)>, ArgError> {
    let mut table = slots.pruned(now);
    if table.waiters.len() as u64 >= MAX_LINE {
        return Err(ArgError::LineFull);
    }
    let Some(id) = table.next_id_at(now) else {
        return Ok(None);
    };
    let waiter = Waiter {
        id,
        place_end,
        lease_ms,
        tokens,
    };
    table.next_id = id + 1;
    table.cap = cap;
    table.waiters.push(waiter);
    let place = table.waiters.len() as u64;
    Ok(Some((table, waiter, place)))
}

/// `slots` (pruned at `now`) without the waiter with ticket `id`, if it is in line: it gave
/// up, and leaves before its place runs out.
pub(crate) fn left_line(slots: &Slots, now: i128, id: u64) -> Option<Slots> {
    place_of(slots, now, id)?;
    let mut table = slots.pruned(now);
    table.waiters.retain(|w| w.id != id);
    if table.waiters.is_empty() {
        table.cap = 0;
        table.slack_ms = 0;
    }
    Some(table)
}

/// `slots` (pruned at `now`) with ticket `id`'s place renewed until `place_end`, if it is in
/// line.
pub(crate) fn renewed_place(slots: &Slots, now: i128, id: u64, place_end: i64) -> Option<Slots> {
    let mut table = slots.pruned(now);
    let waiter = table.waiters.iter_mut().find(|w| w.id == id)?;
    waiter.place_end = place_end;
    Some(table)
}

/// A waiter's denial (THROTTLE.TAKE's and MTAKE's alike): when it should look again if it
/// hears nothing, ns from now, and what held it back: a slot, in line, and
/// [`Refusal::TURN`] if that is when the line's pace says its turn comes ([`turn_ms`]). Without
/// a pace, when the first slot held may run out. Either way at least every half of its place
/// lease (so that it keeps its place), and never sooner than 1 ms (no spin).
pub(crate) fn look_again(
    slots: &Slots,
    now: i128,
    place_ms: u64,
    id: u64,
    place: u64,
) -> (i64, Refusal) {
    let renew = (place_ms / 2).max(1);
    let in_line = Refusal::SLOT | Refusal::LINE;
    let (look_ms, refusal) = match turn_ms(slots, now, id, place) {
        Some(turn) => (turn.clamp(1, renew), in_line | Refusal::TURN),
        None => {
            let first_end = slots
                .earliest_end(now)
                .map_or(i128::from(renew), |end| ceil_ms_wide(i128::from(end) - now));
            (
                u64::try_from(first_end).unwrap_or(renew).clamp(1, renew),
                in_line,
            )
        }
    };
    let wait_ns = i64::try_from(look_ms)
        .unwrap_or(i64::MAX)
        .saturating_mul(NS_PER_MS);
    (wait_ns, refusal)
}

/// When the waiter with ticket `id`, at `place` in line, should be handed a slot, ms from
/// `now`, at the line's pace: each holder frees its slot the line's slack before its lease
/// ends, and a slot handed on is held for the waiter's own lease less the slack (a hold). So
/// the waiters' turns come in the order the held slots should free, a round of the held slots
/// per as many places. A holder past its time is expected as much later again as it is late,
/// not sooner than an eighth of a hold, and at the latest when its lease ends: a dead holder's
/// waiters look ever less often until its lease runs out, never in a spin. `None` before the line saw a release, or with a slot
/// free under the cap (the line waits for tokens, not slots).
fn turn_ms(slots: &Slots, now: i128, id: u64, place: u64) -> Option<u64> {
    let slack = u64::from(slots.slack_ms);
    let lease_ms = slots.waiters.iter().find(|w| w.id == id)?.lease_ms;
    let hold = lease_ms.saturating_sub(slack).max(1);
    let mut frees: Vec<u64> = slots
        .live(now)
        .map(|s| {
            let left = u64::try_from(ceil_ms_wide(i128::from(s.lease_end) - now)).unwrap_or(0);
            match left.checked_sub(slack) {
                Some(due) if due > 0 => due,
                _ => (slack - left.min(slack)).max(hold / 8).min(left),
            }
        })
        .collect();
    let held = frees.len() as u64;
    if slack == 0 || held == 0 || held < slots.cap {
        return None;
    }
    frees.sort_unstable();
    // The frees to wait for before this place's, the held slots above the cap first.
    let before = place.checked_sub(1)?.checked_add(held - slots.cap)?;
    let first = frees.get(usize::try_from(before % held).ok()?)?;
    Some(first.saturating_add((before / held).saturating_mul(hold)))
}

/// The line's slack after a holder released a slot with `left_ns` of its lease left: the
/// first release sets it, each later one weighs a quarter, in whole ms from 1 to `u16::MAX`.
pub(crate) fn slack_after(slack_ms: u16, left_ns: i128) -> u16 {
    let left = u16::try_from(ceil_ms_wide(left_ns).max(1)).unwrap_or(u16::MAX);
    if slack_ms == 0 {
        return left;
    }
    let averaged = (3 * u32::from(slack_ms) + u32::from(left)) / 4;
    u16::try_from(averaged).unwrap_or(u16::MAX)
}
