//! Calls in flight: the slot table a bucket holds in its own state (THROTTLE.TAKE ... INFLIGHT,
//! THROTTLE.RENEW, THROTTLE.RELEASE, THROTTLE.SLOTS).
//!
//! A slot is held under a lease: it counts against the cap until its lease ends (a dead holder's
//! slot comes back then, with no sweeper), or until its holder releases it. Each slot has an id
//! that is never given out twice while the key exists (the next id is stored with the table), so
//! a late release or renewal never touches a newer holder's slot. Ids start from the server's
//! clock in µs when that is ahead of the stored next id, so a table that was dropped (every slot
//! released or run out) starts past the ids it gave out, unless the clock stepped back.
//!
//! The table lives in the bucket's value, so a token and a slot are one atomic call on one key.
//! Leases that ran out are dropped whenever the state is written; a table with no slot held is
//! not stored at all (the bucket keeps its 8- or 32-byte form).
//!
//! The table also keeps the line of callers waiting for a slot ([`Waiter`], see `line.rs`):
//! a write carries it over with the slots, dropping the waiters whose place ran out.

use crate::limits::{MAX_INFLIGHT, MAX_SLOT_ID};

/// One call in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    /// Its id: 1 to 2^53, never reused while the key exists.
    pub id: u64,
    /// When its lease ends, ns since the Unix epoch: from then on it is not held.
    pub lease_end: i64,
}

/// One caller waiting for a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Waiter {
    /// Its ticket: the id its slot will have (from the slots' own counter: never reused).
    pub id: u64,
    /// When its place lease ends, ns since the Unix epoch: from then on it has left.
    pub place_end: i64,
    /// Its slot's lease, ms from when its tokens are there.
    pub lease_ms: u64,
    /// The tokens it takes when it is handed a slot.
    pub tokens: u64,
}

/// The slots a bucket holds, in id order, with the id the next one gets. Empty (the default):
/// no table stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Slots {
    /// The id the next slot gets (at least: an id is also never below the clock in µs). 0 with
    /// no table.
    pub next_id: u64,
    /// The slots stored, in id order (some may have run out since the last write).
    pub held: Vec<Slot>,
    /// The cap on slots the line waits under: a freed slot goes to the head waiter while fewer
    /// than this many are held (0: no line).
    pub cap: u64,
    /// The callers waiting for a slot, in the order they joined (some may have left since the
    /// last write).
    pub waiters: Vec<Waiter>,
    /// How much of its lease a slot had left when its holder released it, ms, averaged over
    /// the releases seen while this line stood (0: none yet; at most `u16::MAX`): the line's
    /// pace, from which a waiter that hears nothing is told when its turn should come.
    pub slack_ms: u16,
}

impl Slots {
    /// No slot and no waiter stored: no table.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.waiters.is_empty()
    }

    /// The slots whose lease has not run out at `now` (ns).
    pub fn live(&self, now: i128) -> impl Iterator<Item = &Slot> + '_ {
        self.held
            .iter()
            .filter(move |s| i128::from(s.lease_end) > now)
    }

    /// How many slots are held at `now`.
    pub fn held_at(&self, now: i128) -> u64 {
        self.live(now).count() as u64
    }

    /// When the first of the slots held at `now` runs out (`None`: none held).
    pub(crate) fn earliest_end(&self, now: i128) -> Option<i64> {
        self.live(now).map(|s| s.lease_end).min()
    }

    /// How long from `now` until the first slot held runs out, ns: a take refused for a slot
    /// waits that long (0: none held).
    pub(crate) fn first_free_in(&self, now: i128) -> i128 {
        self.earliest_end(now)
            .map_or(0, |end| i128::from(end) - now)
    }

    /// When the last lease stored ends, a slot's or a waiter's place (`None`: no table): the
    /// key lives until then, so that the line keeps its order.
    pub fn latest_end(&self) -> Option<i64> {
        let slots = self.held.iter().map(|s| s.lease_end);
        slots.chain(self.waiters.iter().map(|w| w.place_end)).max()
    }

    /// The table as written at `now`: the slots whose lease ran out and the waiters whose
    /// place ran out dropped, and no table at all when nothing is left.
    pub(crate) fn pruned(&self, now: i128) -> Slots {
        // No table (a bucket that never used INFLIGHT): nothing to look at or collect.
        if self.is_empty() {
            return Slots::default();
        }
        let held: Vec<Slot> = self.live(now).copied().collect();
        let waiters: Vec<Waiter> = self.waiting(now).copied().collect();
        if held.is_empty() && waiters.is_empty() {
            return Slots::default();
        }
        let line = !waiters.is_empty();
        Slots {
            next_id: self.next_id,
            held,
            cap: if line { self.cap } else { 0 },
            waiters,
            slack_ms: if line { self.slack_ms } else { 0 },
        }
    }

    /// The waiters still in line at `now`, head first.
    pub fn waiting(&self, now: i128) -> impl Iterator<Item = &Waiter> + '_ {
        self.waiters
            .iter()
            .filter(move |w| i128::from(w.place_end) > now)
    }

    /// The next id to give out at `now` (a slot's or a waiter's ticket): the stored next id,
    /// or the clock in µs if that is ahead; `None` once the ids ran out.
    pub(crate) fn next_id_at(&self, now: i128) -> Option<u64> {
        let clock_us = u64::try_from(now.div_euclid(1000)).unwrap_or(0);
        let id = self.next_id.max(clock_us).max(1);
        (id < MAX_SLOT_ID).then_some(id)
    }

    /// The table (pruned at `now`) with one more slot, leased until `lease_end`, and its id;
    /// `None` if the ids ran out (past [`MAX_SLOT_ID`]) or the table is full.
    pub(crate) fn acquire(&self, now: i128, lease_end: i64) -> Option<(Slots, u64)> {
        let mut table = self.pruned(now);
        if table.held.len() as u64 >= MAX_INFLIGHT {
            return None;
        }
        let id = self.next_id_at(now)?;
        table.held.push(Slot { id, lease_end });
        table.next_id = id + 1;
        Some((table, id))
    }

    /// The table (pruned at `now`) with the slot `id` leased until `lease_end`, if it is held.
    pub(crate) fn renewed(&self, now: i128, id: u64, lease_end: i64) -> Option<Slots> {
        let mut table = self.pruned(now);
        let slot = table.held.iter_mut().find(|s| s.id == id)?;
        slot.lease_end = lease_end;
        Some(table)
    }

    /// The table (pruned at `now`) with `slot`'s lease running to `end` if that is later than
    /// it runs now: a handed waiter's lease, a whole one from when its tokens are there.
    pub(crate) fn lengthened(&self, now: i128, slot: &Slot, end: i128) -> Option<Slots> {
        i64::try_from(end)
            .ok()
            .filter(|end| *end > slot.lease_end)
            .and_then(|end| self.renewed(now, slot.id, end))
    }

    /// The table (pruned at `now`) without the slot `id`, if it is held.
    pub(crate) fn released(&self, now: i128, id: u64) -> Option<Slots> {
        let mut table = self.pruned(now);
        let at = table.held.iter().position(|s| s.id == id)?;
        table.held.remove(at);
        if table.is_empty() {
            return Some(Slots::default());
        }
        Some(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i128 = 1_796_083_200 * 1_000_000_000;
    const MS: i64 = 1_000_000;

    #[test]
    fn ids_start_at_the_clock_and_only_grow() {
        let now_ns = NOW as i64;
        let (one, a) = Slots::default().acquire(NOW, now_ns + MS).unwrap();
        assert_eq!(a, 1_796_083_200_000_000, "the clock in µs");
        let (two, b) = one.acquire(NOW, now_ns + MS).unwrap();
        assert_eq!(b, a + 1, "the same µs: the next id");
        // A clock stepped back: still the next id.
        let (_, c) = two.acquire(NOW - 1_000_000_000, now_ns + MS).unwrap();
        assert_eq!(c, b + 1);
        // Everything ran out: the table is gone, and a later clock starts past it.
        assert!(two.pruned(NOW + 2 * i128::from(MS)).is_empty());
    }

    #[test]
    fn release_and_renew_only_a_slot_held() {
        let now_ns = NOW as i64;
        let (table, id) = Slots::default().acquire(NOW, now_ns + 10 * MS).unwrap();
        assert!(table.released(NOW, id + 1).is_none());
        assert_eq!(table.released(NOW, id), Some(Slots::default()));
        let later = NOW + 10 * i128::from(MS);
        assert!(table.released(later, id).is_none(), "its lease ran out");
        assert!(table.renewed(later, id, now_ns + 20 * MS).is_none());
        let renewed = table.renewed(NOW, id, now_ns + 20 * MS).unwrap();
        assert_eq!(renewed.earliest_end(later), Some(now_ns + 20 * MS));
    }
}
