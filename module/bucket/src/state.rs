//! The stored state: the instant the bucket is full again (ns since the Unix epoch), and, only
//! while the supplier's pushback is in effect, when its pause ends and how its rate was cut.
//!
//! - 8 bytes, the `i64` little-endian: a bucket that is neither paused nor cut, which is every
//!   bucket on a good day. The module reads and writes it in place; it is the smallest string
//!   a server keeps outside an integer encoding (which the key API cannot write).
//! - 32 bytes while paused or cut: that instant, the end of the pause, the instant of the cut
//!   (0: none), and the cut's recovery time in ms (48 bits) with its factor in basis points (16
//!   bits), each little-endian. The next write after the pushback is over stores 8 bytes again.
//!
//! - 40 + 16 k bytes while k calls are in flight (1 <= k <= [`MAX_INFLIGHT`]): the 32-byte form
//!   (pause and cut fields zero when neither is in effect), then the next slot id (`u64`), then
//!   each slot held, in id order: its id (`u64`) and its lease's end (`i64`, ns), little-endian.
//!   A bucket with no slot held keeps its 8- or 32-byte form: slots cost nothing to a bucket
//!   that does not use them.
//!
//! - 48 + 16 k + 32 w bytes while w callers wait in the line for a slot (1 <= w <=
//!   [`MAX_LINE`], 0 <= k <= [`MAX_INFLIGHT`]): the 32-byte form, the next slot id (`u64`),
//!   then k, w, the cap the line waits under and the line's slack (`u16` each: how much of its
//!   lease a released slot had left, ms, averaged; 0 before the first release, as earlier
//!   releases wrote it), then the k slots as above, then each waiter in the order it joined:
//!   its ticket (`u64`), the end of its place lease (`i64`, ns), its slot's lease in ms
//!   (`u64`) and its tokens (`u64`). Every other form with a table is 8 mod 16 bytes long, this
//!   one 0 mod 16, so the length alone tells them apart; a bucket with no waiter keeps the
//!   forms above.
//!
//! - Any of those, then a **kept quota** while an operator keeps one at the server
//!   (THROTTLE.QUOTA): its capacity (`u64`, little-endian), its rate as the shortest decimal
//!   of its value (the text a client sends, 1 to 35 bytes), that text's length (one byte), and
//!   the byte `0xFF`. No other form ends in `0xFF` (an instant's top byte is below `0x80`, a
//!   factor's below `0x28`), so a reader looks at the last byte first. Such a key never
//!   expires: the quota stays until THROTTLE.QUOTA ... CLEAR or DEL.
//!
//! RDB, AOF, DUMP/RESTORE, COPY and replication carry either unchanged. Earlier releases stored
//! the instant as decimal digits, which still read, so buckets survive an upgrade.

use std::fmt;

use crate::limits::{
    EARLIEST_STATE_NS, LATEST_STATE_AHEAD_NS, MAX_CAPACITY, MAX_INFLIGHT, MAX_LEASE_MS, MAX_LINE,
    MAX_NOW_NS, MAX_SLOT_ID, MAX_WAIT_MS, MIN_FACTOR_BP,
};
use crate::slots::{Slot, Slots, Waiter};
use crate::Quota;

/// Bytes in the state of a bucket neither paused nor cut.
pub(crate) const STATE_LEN: usize = 8;

/// Bytes in the state of a bucket paused or cut.
pub(crate) const PUSHBACK_STATE_LEN: usize = 32;

/// Bytes in the state of a bucket holding slots, before its slots: the 32-byte form and the
/// next slot id.
pub const SLOTS_STATE_HEAD: usize = PUSHBACK_STATE_LEN + 8;

/// Bytes per slot held.
pub const SLOT_LEN: usize = 16;

/// Bytes in the state of a bucket with a line, before its slots: the table's head and the
/// counts.
pub const LINE_STATE_HEAD: usize = SLOTS_STATE_HEAD + 8;

/// Bytes per waiter in line.
pub const WAITER_LEN: usize = 32;

/// The last byte of a state that keeps a quota, which no other form ends with.
pub(crate) const KEPT_MARK: u8 = 0xFF;

/// Whether a value of `len` bytes can be a state this release writes (8, 32, or 40 + 16 k for
/// 1 to [`MAX_INFLIGHT`] slots): the module reads those in place.
pub fn is_state_len(len: usize) -> bool {
    len == STATE_LEN || len == PUSHBACK_STATE_LEN || slot_count(len).is_some() || is_line_len(len)
}

/// Whether `len` bytes can be the form with a line (its counts say exactly).
fn is_line_len(len: usize) -> bool {
    let most = LINE_STATE_HEAD + SLOT_LEN * MAX_INFLIGHT as usize + WAITER_LEN * MAX_LINE as usize;
    len >= LINE_STATE_HEAD + WAITER_LEN && len <= most && len.is_multiple_of(16)
}

/// How many slots a state of `len` bytes holds, if it is the slot form.
fn slot_count(len: usize) -> Option<usize> {
    let body = len.checked_sub(SLOTS_STATE_HEAD)?;
    let count = body / SLOT_LEN;
    (body % SLOT_LEN == 0 && count >= 1 && count as u64 <= MAX_INFLIGHT).then_some(count)
}

/// The factor of a rate that is not cut: 10 000 basis points.
pub const FULL_FACTOR_BP: u16 = 10_000;

/// A bucket's stored state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The instant the bucket is full again, ns since the Unix epoch.
    pub tat: i64,
    /// The supplier's pause and cut, while either is in effect.
    pub pushback: Option<Pushback>,
    /// The calls in flight it holds (empty: none, and no table stored).
    pub slots: Slots,
    /// The quota an operator keeps at the server for the key (THROTTLE.QUOTA): every command
    /// on it computes with this one, whatever quota its caller sends. `None`: the callers'.
    /// Boxed: a bucket without one, the hot path, carries a null pointer, not a quota.
    pub kept: Option<Box<Quota>>,
}

impl State {
    /// A bucket neither paused nor cut.
    pub fn plain(tat: i64) -> State {
        State {
            tat,
            pushback: None,
            slots: Slots::default(),
            kept: None,
        }
    }
}

/// What the supplier's pushback left in a bucket: a pause, a cut rate, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pushback {
    /// Until this instant (ns) no call the pause covers may be sent, reserved ones included;
    /// a cut before it is the same congestion episode as the one that paused.
    pub paused_until: i64,
    /// The rate's cut, if there is one.
    pub cut: Option<RateCut>,
}

/// A cut of the bucket's rate as stored: the factor right after it, climbing back linearly to
/// the full rate over the recovery time. (The client's `Cut` is a caller's request for one.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateCut {
    /// When the rate was cut, ns since the Unix epoch.
    pub at: i64,
    /// The rate's factor right after the cut, in basis points ([`MIN_FACTOR_BP`] to
    /// [`FULL_FACTOR_BP`]).
    pub factor_bp: u16,
    /// How long the rate takes to climb back to the full rate, in ms (at least 1).
    pub recovery_ms: u64,
}

impl RateCut {
    /// The instant the rate is full again, ns.
    pub(crate) fn recovered_at(&self) -> i128 {
        i128::from(self.at) + i128::from(self.recovery_ms) * 1_000_000
    }

    /// The rate's factor at `now`, in basis points: the cut's own before the cut's instant
    /// (a clock that reads earlier: the strictest), the full rate from the recovered instant on,
    /// and a straight line between, rounded down (stricter).
    pub(crate) fn factor_at(&self, now: i128) -> u16 {
        let elapsed_ms = (now - i128::from(self.at)).div_euclid(1_000_000);
        if elapsed_ms <= 0 {
            return self.factor_bp;
        }
        if elapsed_ms >= i128::from(self.recovery_ms) {
            return FULL_FACTOR_BP;
        }
        let gap = i128::from(FULL_FACTOR_BP - self.factor_bp.min(FULL_FACTOR_BP));
        let climbed = gap * elapsed_ms / i128::from(self.recovery_ms.max(1));
        u16::try_from(i128::from(self.factor_bp) + climbed).unwrap_or(FULL_FACTOR_BP)
    }

    /// The first instant (ns) at which the cut's factor is at least `factor_bp`: the cut's
    /// own instant for a factor it starts at, the recovered instant for the full rate, and in
    /// between the first whole ms the straight line reaches it.
    pub(crate) fn reaches(&self, factor_bp: u16) -> i128 {
        let at = i128::from(self.at);
        if factor_bp <= self.factor_bp {
            return at;
        }
        let gap = i128::from(FULL_FACTOR_BP.saturating_sub(self.factor_bp));
        let recovery = i128::from(self.recovery_ms);
        // factor_bp + floor(gap * ms / recovery) >= f  <=>  ms >= (f - factor_bp) * recovery / gap.
        let climb = i128::from(factor_bp - self.factor_bp) * recovery;
        let ms = if gap > 0 && factor_bp < FULL_FACTOR_BP {
            (climb / gap + i128::from(climb % gap > 0)).min(recovery)
        } else {
            recovery
        };
        at + ms * 1_000_000
    }
}

/// The error reply for a key of another type than a string (a list, a hash, ...), as GET
/// answers it: the module's and the Lua twin's.
pub const WRONG_TYPE: &str =
    "WRONGTYPE the key holds a value that is not a string, so not a THROTTLE bucket: use another key";

/// The key holds a string that THROTTLE.TAKE did not write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateError;

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "ERR the key holds a string that is not a THROTTLE bucket (expected the 8- or \
             32-byte state THROTTLE.TAKE writes, or one with calls in flight); use another \
             key, or DEL this one to start a full bucket",
        )
    }
}

/// A state's bytes: 8 or 32 of them inline, or a slot table's on the heap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded(Bytes);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Bytes {
    /// The 8- or 32-byte form: the first `len` bytes.
    Inline([u8; PUSHBACK_STATE_LEN], usize),
    /// A state holding slots.
    Table(Vec<u8>),
}

impl Encoded {
    /// The bytes to store.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Bytes::Inline(bytes, len) => bytes.get(..*len).unwrap_or(bytes),
            Bytes::Table(table) => table,
        }
    }
}

/// The bytes to store for `state`.
pub fn encode_state(state: &State) -> Encoded {
    match &state.kept {
        None => encode_base(state),
        Some(quota) => Encoded(Bytes::Table(with_kept(encode_base(state), quota))),
    }
}

/// `base`, then the kept quota's trailer. Out of line: only kept quotas pay for it.
#[inline(never)]
fn with_kept(base: Encoded, quota: &Quota) -> Vec<u8> {
    let rate = quota.rate().as_bytes();
    let mut bytes = Vec::with_capacity(base.as_bytes().len() + 8 + rate.len() + 2);
    bytes.extend_from_slice(base.as_bytes());
    bytes.extend_from_slice(&quota.capacity.to_le_bytes());
    bytes.extend_from_slice(rate);
    // The shortest decimal of a rate has at most 35 characters.
    bytes.push(u8::try_from(rate.len()).unwrap_or(u8::MAX));
    bytes.push(KEPT_MARK);
    bytes
}

/// The bytes of `state` without its kept quota.
fn encode_base(state: &State) -> Encoded {
    let mut bytes = [0u8; PUSHBACK_STATE_LEN];
    let mut put = |at: usize, field: [u8; 8]| {
        if let Some(slot) = bytes.get_mut(at..at + 8) {
            slot.copy_from_slice(&field);
        }
    };
    put(0, state.tat.to_le_bytes());
    if state.pushback.is_none() && state.slots.is_empty() {
        return Encoded(Bytes::Inline(bytes, STATE_LEN));
    }
    if let Some(pushback) = state.pushback {
        put(8, pushback.paused_until.to_le_bytes());
        if let Some(cut) = pushback.cut {
            put(16, cut.at.to_le_bytes());
            let packed = (u64::from(cut.factor_bp) << 48) | (cut.recovery_ms & ((1 << 48) - 1));
            put(24, packed.to_le_bytes());
        }
    }
    if state.slots.is_empty() {
        return Encoded(Bytes::Inline(bytes, PUSHBACK_STATE_LEN));
    }
    Encoded(Bytes::Table(encode_table(&bytes, &state.slots)))
}

/// The bytes of a state with a line after its 32-byte form `head`: the counts after the next
/// id, then the slots, then the waiters. Counts are bounded by the commands (at most
/// [`MAX_INFLIGHT`] slots and cap, [`MAX_LINE`] waiters), so each fits a `u16`.
fn encode_line(head: &[u8], slots: &Slots) -> Vec<u8> {
    let count = |n: u64| u16::try_from(n).unwrap_or(u16::MAX).to_le_bytes();
    let mut table = Vec::with_capacity(
        LINE_STATE_HEAD + SLOT_LEN * slots.held.len() + WAITER_LEN * slots.waiters.len(),
    );
    table.extend_from_slice(head);
    table.extend_from_slice(&slots.next_id.to_le_bytes());
    table.extend_from_slice(&count(slots.held.len() as u64));
    table.extend_from_slice(&count(slots.waiters.len() as u64));
    table.extend_from_slice(&count(slots.cap));
    table.extend_from_slice(&slots.slack_ms.to_le_bytes());
    for slot in &slots.held {
        table.extend_from_slice(&slot.id.to_le_bytes());
        table.extend_from_slice(&slot.lease_end.to_le_bytes());
    }
    for waiter in &slots.waiters {
        table.extend_from_slice(&waiter.id.to_le_bytes());
        table.extend_from_slice(&waiter.place_end.to_le_bytes());
        table.extend_from_slice(&waiter.lease_ms.to_le_bytes());
        table.extend_from_slice(&waiter.tokens.to_le_bytes());
    }
    table
}

/// The bytes of a state holding `slots`, after its 32-byte form `head`. Out of line, so that
/// encoding a plain bucket, the hot path, stays small.
#[inline(never)]
fn encode_table(head: &[u8], slots: &Slots) -> Vec<u8> {
    if !slots.waiters.is_empty() {
        return encode_line(head, slots);
    }
    let mut table = Vec::with_capacity(SLOTS_STATE_HEAD + SLOT_LEN * slots.held.len());
    table.extend_from_slice(head);
    table.extend_from_slice(&slots.next_id.to_le_bytes());
    for slot in &slots.held {
        table.extend_from_slice(&slot.id.to_le_bytes());
        table.extend_from_slice(&slot.lease_end.to_le_bytes());
    }
    table
}

/// Reads a stored state, seen from the server's clock `now_ns`.
///
/// A command writes the instant a bucket is full again: never before 2020-01-01, and never more than 20 years after its clock (a full refill plus
/// the longest reservation). So any 8 bytes are not a bucket: `abcdefgh` reads as the year 2208
/// and `12345678` as 2098, which a take would have treated as debt until then, and a foreign
/// binary 12345 as 1970, which a take would have overwritten. Refused: an instant before 2020
/// (while the clock is past it; a server whose clock reads earlier keeps its own buckets), or
/// more than [`LATEST_STATE_AHEAD_NS`] (21 years) after the clock. The extra year is for a
/// clock that lags the one that wrote the bucket: it reads the bucket as stricter, never as
/// foreign. Two comparisons per read. The pause and the cut of a 32-byte state obey the same
/// rule, and a cut's factor and recovery must be ones a command writes. A slot table's lease
/// ends obey it too; its ids are increasing, from 1, below the next id, which is at most
/// 2^53.
pub fn parse_state(bytes: &[u8], now_ns: i64) -> Result<State, StateError> {
    if bytes.last() == Some(&KEPT_MARK) {
        return parse_kept(bytes, now_ns);
    }
    let now = now_ns.clamp(0, MAX_NOW_NS);
    let len = bytes.len();
    if len == PUSHBACK_STATE_LEN
        || (len != STATE_LEN && (slot_count(len).is_some() || is_line_len(len)))
    {
        return parse_wide(bytes, now);
    }
    decode(bytes)
        .and_then(|at| in_range(at, now))
        .map(State::plain)
}

/// [`parse_state`] of a state that keeps a quota: the form before the trailer (binary: 8, 32
/// or a slot table), then the quota, whose rate must be the text a command writes for it.
#[inline(never)]
fn parse_kept(bytes: &[u8], now_ns: i64) -> Result<State, StateError> {
    let len = bytes.len();
    let text_len = usize::from(*bytes.get(len.wrapping_sub(2)).ok_or(StateError)?);
    let base_len = len.checked_sub(text_len + 10).ok_or(StateError)?;
    let base = bytes.get(..base_len).ok_or(StateError)?;
    let capacity = bytes.get(base_len..base_len + 8).ok_or(StateError)?;
    let capacity = u64::from_le_bytes(<[u8; 8]>::try_from(capacity).map_err(|_| StateError)?);
    let rate = bytes
        .get(base_len + 8..base_len + 8 + text_len)
        .ok_or(StateError)?;
    if !is_state_len(base_len) || base.last() == Some(&KEPT_MARK) {
        return Err(StateError);
    }
    let quota = Quota::new(capacity, rate).map_err(|_| StateError)?;
    if quota.rate().as_bytes() != rate {
        return Err(StateError);
    }
    let mut state = parse_state(base, now_ns)?;
    state.kept = Some(Box::new(quota));
    Ok(state)
}

/// An instant a command could have written, seen from the clamped clock `now` (see
/// [`parse_state`]).
fn in_range(at: i64, now: i64) -> Result<i64, StateError> {
    let too_early = at < EARLIEST_STATE_NS && now >= EARLIEST_STATE_NS;
    if too_early || at.saturating_sub(now) > LATEST_STATE_AHEAD_NS {
        Err(StateError)
    } else {
        Ok(at)
    }
}

/// [`parse_state`] of the 32-byte form or one with slots, at the clamped clock `now`. Out of
/// line, so that reading the 8 bytes of a plain bucket, the hot path, stays small.
#[inline(never)]
fn parse_wide(bytes: &[u8], now: i64) -> Result<State, StateError> {
    let instant = |at: i64| in_range(at, now);
    let slots = slot_count(bytes.len());
    let field = |at: usize| -> Result<i64, StateError> {
        let field = bytes.get(at..at + 8).ok_or(StateError)?;
        let field = <[u8; 8]>::try_from(field).map_err(|_| StateError)?;
        Ok(i64::from_le_bytes(field))
    };
    let tat = instant(field(0)?)?;
    let slots = match slots {
        None if bytes.len() == PUSHBACK_STATE_LEN => Slots::default(),
        None => parse_line(bytes, now)?,
        Some(count) => {
            let next_id = next_slot_id(bytes)?;
            Slots {
                next_id,
                held: parse_slots(bytes, SLOTS_STATE_HEAD, count, next_id, now)?,
                ..Slots::default()
            }
        }
    };
    let paused_at = field(8)?;
    let cut_at = field(16)?;
    let packed = u64::from_le_bytes(field(24)?.to_le_bytes());
    if !slots.is_empty() && paused_at == 0 && cut_at == 0 && packed == 0 {
        return Ok(State {
            tat,
            pushback: None,
            slots,
            kept: None,
        });
    }
    let paused_until = instant(paused_at)?;
    let cut = if cut_at == 0 && packed == 0 {
        None
    } else {
        let factor_bp = u16::try_from(packed >> 48).map_err(|_| StateError)?;
        let recovery_ms = packed & ((1 << 48) - 1);
        let factor_ok = (MIN_FACTOR_BP..=FULL_FACTOR_BP).contains(&factor_bp);
        if !factor_ok || !(1..=MAX_WAIT_MS).contains(&recovery_ms) {
            return Err(StateError);
        }
        Some(RateCut {
            at: instant(cut_at)?,
            factor_bp,
            recovery_ms,
        })
    };
    Ok(State {
        tat,
        pushback: Some(Pushback { paused_until, cut }),
        slots,
        kept: None,
    })
}

/// The `u64` at `at` in `bytes`.
fn u64_at(bytes: &[u8], at: usize) -> Result<u64, StateError> {
    let field = bytes.get(at..at + 8).ok_or(StateError)?;
    Ok(u64::from_le_bytes(
        <[u8; 8]>::try_from(field).map_err(|_| StateError)?,
    ))
}

/// A table's next slot id: at most [`MAX_SLOT_ID`].
fn next_slot_id(bytes: &[u8]) -> Result<u64, StateError> {
    u64_at(bytes, PUSHBACK_STATE_LEN).and_then(|id| {
        if id > MAX_SLOT_ID {
            Err(StateError)
        } else {
            Ok(id)
        }
    })
}

/// `count` slots from `at`: ids increasing, from 1, below `next_id`; lease ends instants a
/// command could write, seen from `now`.
fn parse_slots(
    bytes: &[u8],
    at: usize,
    count: usize,
    next_id: u64,
    now: i64,
) -> Result<Vec<Slot>, StateError> {
    let mut held = Vec::with_capacity(count);
    let mut last = 0;
    for i in 0..count {
        let at = at + i * SLOT_LEN;
        let id = u64_at(bytes, at)?;
        if id <= last || id >= next_id {
            return Err(StateError);
        }
        last = id;
        let lease_end = in_range(
            i64::from_le_bytes(u64_at(bytes, at + 8)?.to_le_bytes()),
            now,
        )?;
        held.push(Slot { id, lease_end });
    }
    Ok(held)
}

/// The table of the form with a line: the counts must give exactly its length, the cap and
/// the counts be ones a command writes, and the waiters' tickets increasing, below the next
/// id and held by no slot, with values a join writes.
#[inline(never)]
fn parse_line(bytes: &[u8], now: i64) -> Result<Slots, StateError> {
    let next_id = next_slot_id(bytes)?;
    let counts = u64_at(bytes, SLOTS_STATE_HEAD)?;
    let [k, w, cap, slack] = [0, 16, 32, 48].map(|shift| (counts >> shift) & 0xFFFF);
    let (k, w) = (
        usize::try_from(k).map_err(|_| StateError)?,
        usize::try_from(w).map_err(|_| StateError)?,
    );
    let exact = LINE_STATE_HEAD + SLOT_LEN * k + WAITER_LEN * w == bytes.len();
    let bounded = k as u64 <= MAX_INFLIGHT && (1..=MAX_LINE).contains(&(w as u64));
    if !exact || !bounded || !(1..=MAX_INFLIGHT).contains(&cap) {
        return Err(StateError);
    }
    let held = parse_slots(bytes, LINE_STATE_HEAD, k, next_id, now)?;
    let mut waiters = Vec::with_capacity(w);
    let mut last = 0;
    for i in 0..w {
        let at = LINE_STATE_HEAD + SLOT_LEN * k + WAITER_LEN * i;
        let id = u64_at(bytes, at)?;
        let place_end = in_range(
            i64::from_le_bytes(u64_at(bytes, at + 8)?.to_le_bytes()),
            now,
        )?;
        let lease_ms = u64_at(bytes, at + 16)?;
        let tokens = u64_at(bytes, at + 24)?;
        let fresh = id > last && id < next_id && !held.iter().any(|s| s.id == id);
        if !fresh || !(1..=MAX_LEASE_MS).contains(&lease_ms) || tokens > MAX_CAPACITY {
            return Err(StateError);
        }
        last = id;
        waiters.push(Waiter {
            id,
            place_end,
            lease_ms,
            tokens,
        });
    }
    Ok(Slots {
        next_id,
        held,
        cap,
        waiters,
        slack_ms: u16::try_from(slack).map_err(|_| StateError)?,
    })
}

/// 8 bytes holding a value in `0..=i64::MAX`, or (as earlier releases wrote it) 1 to 19 ASCII
/// digits of one.
fn decode(bytes: &[u8]) -> Result<i64, StateError> {
    if let Ok(binary) = <[u8; STATE_LEN]>::try_from(bytes) {
        let state = i64::from_le_bytes(binary);
        return if state >= 0 {
            Ok(state)
        } else {
            Err(StateError)
        };
    }
    if bytes.is_empty() || bytes.len() > 19 || !bytes.iter().all(u8::is_ascii_digit) {
        return Err(StateError);
    }
    bytes.iter().try_fold(0i64, |acc, &d| {
        acc.checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(d - b'0')))
            .ok_or(StateError)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-01T00:00:00Z.
    const NOW: i64 = 1_796_083_200 * 1_000_000_000;
    const YEAR: i64 = 365 * 86_400 * 1_000_000_000;
    const MS: i64 = 1_000_000;

    fn plain(tat: i64) -> Vec<u8> {
        encode_state(&State::plain(tat)).as_bytes().to_vec()
    }

    #[test]
    fn reads_what_it_writes() {
        for tat in [EARLIEST_STATE_NS, NOW - YEAR, NOW, NOW + 20 * YEAR] {
            assert_eq!(parse_state(&plain(tat), NOW), Ok(State::plain(tat)));
        }
        assert_eq!(
            plain(0x0102_0304_0506_0708),
            [8, 7, 6, 5, 4, 3, 2, 1],
            "little-endian"
        );
        let paused = State {
            tat: NOW + 5000 * MS,
            slots: Slots::default(),
            kept: None,
            pushback: Some(Pushback {
                paused_until: NOW + 1000 * MS,
                cut: None,
            }),
        };
        let cut = State {
            tat: NOW,
            slots: Slots::default(),
            kept: None,
            pushback: Some(Pushback {
                paused_until: NOW - 1000 * MS,
                cut: Some(RateCut {
                    at: NOW - 2000 * MS,
                    factor_bp: 7000,
                    recovery_ms: 30_000,
                }),
            }),
        };
        for state in [paused, cut.clone()] {
            let bytes = encode_state(&state);
            assert_eq!(bytes.as_bytes().len(), PUSHBACK_STATE_LEN);
            assert_eq!(parse_state(bytes.as_bytes(), NOW), Ok(state));
        }
        let encoded = encode_state(&cut);
        assert_eq!(
            &encoded.as_bytes()[24..],
            [0x30, 0x75, 0, 0, 0, 0, 0x58, 0x1b],
            "30000 ms, 7000 bp"
        );
    }

    #[test]
    fn reads_the_digits_of_earlier_releases() {
        assert_eq!(
            parse_state(b"1796083200123456789", NOW),
            Ok(State::plain(1_796_083_200_123_456_789))
        );
        assert_eq!(
            parse_state(b"0001796083200123456", NOW),
            Err(StateError),
            "1.8e15 ns is 1970"
        );
    }

    #[test]
    fn refuses_instants_no_command_writes() {
        let bad: [&[u8]; 7] = [
            b"abcdefgh",             // the year 2208
            b"12345678",             // 2098
            &12345i64.to_le_bytes(), // 1970
            &0i64.to_le_bytes(),     // 1970
            &(EARLIEST_STATE_NS - 1).to_le_bytes(),
            &(NOW + LATEST_STATE_AHEAD_NS + 1).to_le_bytes(),
            &i64::MAX.to_le_bytes(),
        ];
        for bytes in bad {
            assert_eq!(parse_state(bytes, NOW), Err(StateError), "state {bytes:?}");
        }
        let latest = NOW + LATEST_STATE_AHEAD_NS;
        assert_eq!(parse_state(&plain(latest), NOW), Ok(State::plain(latest)));
    }

    #[test]
    fn refuses_pushback_no_command_writes() {
        let good = State {
            tat: NOW,
            slots: Slots::default(),
            kept: None,
            pushback: Some(Pushback {
                paused_until: NOW,
                cut: Some(RateCut {
                    at: NOW,
                    factor_bp: 7000,
                    recovery_ms: 1000,
                }),
            }),
        };
        let bytes = encode_state(&good).as_bytes().to_vec();
        let with = |at: usize, field: [u8; 8]| {
            let mut b = bytes.clone();
            b[at..at + 8].copy_from_slice(&field);
            b
        };
        for bad in [
            with(8, 12345i64.to_le_bytes()),                    // a pause in 1970
            with(16, (NOW + 30 * YEAR).to_le_bytes()),          // a cut 30 years ahead
            with(24, ((50u64 << 48) | 1000).to_le_bytes()),     // factor below the floor
            with(24, ((10_001u64 << 48) | 1000).to_le_bytes()), // above the full rate
            with(24, (7000u64 << 48).to_le_bytes()),            // no recovery time
            b"abcdefghabcdefghabcdefghabcdefgh".to_vec(),
        ] {
            assert_eq!(parse_state(&bad, NOW), Err(StateError), "{bad:?}");
        }
        // Pause only: the cut's fields are zero.
        let paused = with(16, [0; 8]);
        let paused = [&paused[..24], &[0u8; 8][..]].concat();
        assert_eq!(
            parse_state(&paused, NOW).map(|s| s.pushback.and_then(|p| p.cut)),
            Ok(None)
        );
    }

    #[test]
    fn a_clock_before_2020_keeps_its_own_buckets() {
        let early = EARLIEST_STATE_NS - 10 * YEAR;
        let tat = early + 5_000_000_000;
        assert_eq!(parse_state(&plain(tat), early), Ok(State::plain(tat)));
        assert_eq!(parse_state(&plain(tat), NOW), Err(StateError));
    }

    #[test]
    fn rejects_everything_else() {
        let bad: [&[u8]; 11] = [
            b"",
            b"-1",
            b"+1",
            b"1.5",
            b" 1",
            b"9223372036854775808",
            b"99999999999999999999",
            b"abc",
            b"\x00\xff",
            &(-1i64).to_le_bytes(),
            &[0u8; 16],
        ];
        for bytes in bad {
            assert_eq!(parse_state(bytes, NOW), Err(StateError), "state {bytes:?}");
        }
    }

    #[test]
    fn the_factor_climbs_back_in_a_straight_line() {
        let cut = RateCut {
            at: NOW,
            factor_bp: 7000,
            recovery_ms: 10_000,
        };
        let at = |ms: i64| cut.factor_at(i128::from(NOW + ms * MS));
        assert_eq!(at(-5000), 7000, "a clock that reads earlier: the cut's own");
        assert_eq!(at(0), 7000);
        assert_eq!(at(1), 7000, "rounded down");
        assert_eq!(at(4), 7001);
        assert_eq!(at(5000), 8500);
        assert_eq!(at(9999), 9999);
        assert_eq!(at(10_000), FULL_FACTOR_BP);
        assert_eq!(at(1_000_000), FULL_FACTOR_BP);
        assert_eq!(cut.recovered_at(), i128::from(NOW + 10_000 * MS));
    }

    #[test]
    fn the_first_instant_a_factor_is_reached() {
        let cut = RateCut {
            at: NOW,
            factor_bp: 7000,
            recovery_ms: 10_000,
        };
        for (factor, ms) in [
            (5000, 0),
            (7000, 0),
            (7001, 4),
            (8500, 5000),
            (9999, 9997),
            (FULL_FACTOR_BP, 10_000),
        ] {
            let at = cut.reaches(factor);
            assert_eq!(at, i128::from(NOW + ms * MS), "{factor}");
            assert!(cut.factor_at(at) >= factor, "{factor} reached at {ms} ms");
            if ms > 0 {
                assert!(
                    cut.factor_at(at - i128::from(MS)) < factor,
                    "{factor}: the first ms"
                );
            }
        }
    }
}
