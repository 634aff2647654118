//! The options that ask THROTTLE.TAKE and MTAKE for a slot, `INFLIGHT n LEASE ms` and
//! `LINE place_ms [WAITER id]`: read, checked and written back the same way by both commands
//! (and by the Lua twin, in the same order).

use crate::error::ArgError;
use crate::limits::{MAX_INFLIGHT, MAX_LEASE_MS};
use crate::refusal::Refusal;
use crate::reply::{count, int, Ints};
use crate::words::{parse_slot, parse_u64, Word};
use crate::NS_PER_MS;

/// `INFLIGHT n LEASE ms`: the take also takes a slot for a call in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inflight {
    /// At most this many slots held at once (1 to [`MAX_INFLIGHT`]).
    pub cap: u64,
    /// The slot's lease, in ms from the server's now (1 to [`MAX_LEASE_MS`]).
    pub lease_ms: u64,
}

/// `LINE place_ms [WAITER id]`: a take that finds every slot held (or callers already waiting
/// for one) joins the quota's line instead of being refused outright.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineArgs {
    /// The waiter's place lease, ms: it leaves the line unless it looks again within it.
    pub place_ms: u64,
    /// The ticket of a waiter looking again (from the reply that put it in line).
    pub waiter: Option<u64>,
}

impl LineArgs {
    /// When a place taken or renewed at `now` runs out (a place past i64 lasts as long as
    /// one can).
    pub(crate) fn place_end(self, now: i128) -> i64 {
        let end = now + i128::from(self.place_ms) * i128::from(NS_PER_MS);
        i64::try_from(end).unwrap_or(i64::MAX)
    }
}

/// The slot options' words as a command's option loop found them, their structure checked.
pub(crate) struct SlotOptions<'a> {
    inflight: Option<&'a [u8]>,
    lease: Option<&'a [u8]>,
    line: Option<&'a [u8]>,
    waiter: Option<&'a [u8]>,
}

// Both are on every THROTTLE.TAKE's path, a plain take's included: inlined always, since
// callgrind counted 40 more instructions per plain take when they were not.
impl<'a> SlotOptions<'a> {
    /// The words of `[INFLIGHT, LEASE, LINE, WAITER]`, their structure checked beside the call's
    /// other options (`floor`: FLOOR was given) before any value is read: INFLIGHT and LEASE
    /// together, LINE only with INFLIGHT, WAITER only with LINE, and LINE never with FLOOR.
    #[inline(always)]
    pub(crate) fn checked(
        [inflight, lease, line, waiter]: [Option<&'a [u8]>; 4],
        floor: bool,
    ) -> Result<SlotOptions<'a>, ArgError> {
        if inflight.is_some() != lease.is_some() {
            return Err(ArgError::InflightLease);
        }
        if line.is_some() && inflight.is_none() {
            return Err(ArgError::LineInflight);
        }
        if waiter.is_some() && line.is_none() {
            return Err(ArgError::WaiterLine);
        }
        if line.is_some() && floor {
            return Err(ArgError::LineFloor);
        }
        Ok(SlotOptions {
            inflight,
            lease,
            line,
            waiter,
        })
    }

    /// Their values, after the call's others: INFLIGHT, LEASE, LINE, then WAITER.
    #[inline(always)]
    pub(crate) fn values(&self) -> Result<(Option<Inflight>, Option<LineArgs>), ArgError> {
        // Without INFLIGHT there is no LINE either (`checked`): a plain take's path.
        let (Some(cap), Some(lease)) = (self.inflight, self.lease) else {
            return Ok((None, None));
        };
        let inflight = Inflight {
            cap: parse_cap(cap)?,
            lease_ms: parse_lease(lease)?,
        };
        let line = match self.line {
            Some(place) => Some(LineArgs {
                place_ms: parse_u64(place)
                    .filter(|ms| (1..=MAX_LEASE_MS).contains(ms))
                    .ok_or(ArgError::PlaceMs)?,
                waiter: self.waiter.map(parse_slot).transpose()?,
            }),
            None => None,
        };
        Ok((Some(inflight), line))
    }
}

/// `INFLIGHT n LEASE ms` and `LINE place_ms [WAITER id]` as a call's last words.
pub(crate) fn slot_words(
    inflight: Option<Inflight>,
    line: Option<LineArgs>,
    words: &mut Vec<Word<'_>>,
) {
    if let Some(inflight) = inflight {
        words.extend([
            Word::Text("INFLIGHT"),
            Word::Number(inflight.cap),
            Word::Text("LEASE"),
            Word::Number(inflight.lease_ms),
        ]);
    }
    if let Some(line) = line {
        words.extend([Word::Text("LINE"), Word::Number(line.place_ms)]);
        // A look: the waiter's ticket.
        if let Some(id) = line.waiter {
            words.extend([Word::Text("WAITER"), Word::Number(id)]);
        }
    }
}

/// The end of a TAKE's or MTAKE's reply, after its tickets: the slot's id (0: none) if the
/// call asked for a slot, its place in line (0: none) with LINE, and on a denial only what held
/// it back. Both commands write and read it here, so their replies end alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotTail {
    pub(crate) slot: Option<u64>,
    pub(crate) place: Option<u64>,
    pub(crate) refusal: Option<Refusal>,
}

impl SlotTail {
    /// Its integers after `ints`'.
    #[inline]
    pub(crate) fn push_onto<const N: usize>(self, ints: &mut Ints<N>) {
        // Not a loop over the three: callgrind counted 37 more instructions per take with one.
        if let Some(slot) = self.slot {
            ints.push(int(slot));
        }
        if let Some(place) = self.place {
            ints.push(int(place));
        }
        if let Some(refusal) = self.refusal {
            ints.push(int(refusal.bits()));
        }
    }

    /// The end read back from `ints`, the integers after the tickets, for a call that asked
    /// for a slot (`inflight`) and a place (`line`); `None` for any other shape.
    pub(crate) fn read(ints: &[i64], inflight: bool, line: bool, granted: bool) -> Option<Self> {
        let (slot, ints) = next_if(inflight, ints)?;
        let (place, ints) = next_if(line, ints)?;
        // A server from before refusals says nothing; one that knows LINE always says why.
        let refusal = match ints {
            [] if granted || !line => None,
            [bits] if !granted => Some(Refusal::from_bits(count(*bits)?)),
            _ => return None,
        };
        Some(SlotTail {
            slot,
            place,
            refusal,
        })
    }
}

/// The first of `ints` as a count if the call `asked` for it, and the rest.
pub(crate) fn next_if(asked: bool, ints: &[i64]) -> Option<(Option<u64>, &[i64])> {
    match (asked, ints) {
        (false, rest) => Some((None, rest)),
        (true, [value, rest @ ..]) => Some((Some(count(*value)?), rest)),
        (true, []) => None,
    }
}

/// `INFLIGHT n`'s cap: 1..=MAX_INFLIGHT (TAKE's, MTAKE's and RELEASE's).
pub(crate) fn parse_cap(text: &[u8]) -> Result<u64, ArgError> {
    parse_u64(text)
        .filter(|n| (1..=MAX_INFLIGHT).contains(n))
        .ok_or(ArgError::Inflight)
}

/// A lease, `LEASE ms` or THROTTLE.RENEW's `ms`: 1..=MAX_LEASE_MS.
pub(crate) fn parse_lease(text: &[u8]) -> Result<u64, ArgError> {
    parse_u64(text)
        .filter(|ms| (1..=MAX_LEASE_MS).contains(ms))
        .ok_or(ArgError::Lease)
}
