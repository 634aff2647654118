//! `THROTTLE.TAKE key capacity rate [TOKENS n] [MAXWAIT ms] [TICKET] [FLOOR f] [INFLIGHT n]
//! [LEASE ms] [LINE place_ms [WAITER id]]`: one take from a bucket at an instant, with INFLIGHT
//! a slot for the call, and with LINE a place in the line for one when every slot is held. Its
//! arguments (read and written), its arithmetic, its reply and its docs.

use crate::channel::Message;
use crate::command::Command;
use crate::error::ArgError;
use crate::gcra::{ceil_ms, saturate, View, Write};
use crate::line::{joined, look_again, place_of, renewed_place, settle, Handed};
use crate::refusal::Refusal;
use crate::reply::{count, flag, int, Ints};
use crate::slot_options::{next_if, slot_words, Inflight, LineArgs, SlotOptions, SlotTail};
use crate::spec::{Access, Arg, Keys, Kind, Spec, CAPACITY, KEY, MAXWAIT, RATE};
use crate::state::State;
use crate::throttle_command::{one_key, Effects, ThrottleCommand};
use crate::words::{once, parse_max_wait, parse_tokens, parse_u64, Word};
use crate::{Quota, NS_PER_MS};

/// `THROTTLE.TAKE key capacity rate [TOKENS n] [MAXWAIT ms] [TICKET] [FLOOR f] [INFLIGHT n]
/// [LEASE ms] [LINE place_ms [WAITER id]]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TakeArgs {
    /// The bucket's quota.
    pub quota: Quota,
    /// Tokens this call takes (0 inspects).
    pub tokens: u64,
    /// How far ahead the call may reserve, in ms (0: only what is there now).
    pub max_wait_ms: u64,
    /// Reply a fifth element: the ticket THROTTLE.GIVE takes.
    pub ticket: bool,
    /// A low-priority take: granted only once at least this many tokens would remain after
    /// it, so that callers without a floor find them. Above 0 it reserves only tokens that are
    /// in the bucket now (see `take`).
    pub floor: Option<u64>,
    /// A slot for the call in flight, taken with the tokens or not at all.
    pub inflight: Option<Inflight>,
    /// A place in line for a slot (only with `inflight`, never with `floor`).
    pub line: Option<LineArgs>,
}

/// `FLOOR f`: fewer tokens than the capacity, and with the call's own at most the capacity.
pub(crate) fn parse_floor(text: &[u8], tokens: u64, capacity: u64) -> Result<u64, ArgError> {
    parse_u64(text)
        .filter(|f| *f < capacity && f.saturating_add(tokens) <= capacity)
        .ok_or(ArgError::Floor { capacity })
}

/// What a take decided. Durations are nanoseconds; [`Outcome::reply`] rounds them up to ms.
/// Its default is a denial that says nothing and changes nothing, for the fields a take leaves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the tokens were taken (always, for a take of 0).
    pub granted: bool,
    /// Whole tokens left after the call (0 while the bucket is in debt).
    pub remaining: u64,
    /// Granted: how long to wait before using the tokens. Denied: until they would be there.
    pub wait_ns: i64,
    /// Until the bucket is full again.
    pub reset_ns: i64,
    /// The state to store, or `None` when nothing changes (a denial, `TOKENS 0`, a peek).
    pub write: Option<Write>,
    /// Denied only because the tokens would have left fewer than the call's floor.
    pub held_by_floor: bool,
    /// With INFLIGHT: the id of the slot taken (`None`: denied, or no INFLIGHT).
    pub slot: Option<u64>,
    /// With INFLIGHT: denied only because every slot was held (the tokens alone would have
    /// been granted).
    pub held_by_slots: bool,
    /// Denied: what held the call back (the reply's last integer). Empty when granted.
    pub refusal: Refusal,
    /// With LINE, denied: the caller's place in line (1: the head); 0 when not in line.
    pub place: u64,
    /// What the call did to the line, for the server's counters.
    pub line: LineCounts,
    /// A waiter's look that found its slot handed over: its tokens were taken at the
    /// hand-off, so the reply's ticket is 0 (nothing of this call's to give back).
    pub handed_look: bool,
    /// The first waiter the call's settling of the line handed a slot (announced).
    pub handed: Option<Handed>,
}

/// What a call did to a line: waiters joined, handed a slot, and gone at the end of their
/// place lease (counted when the call writes the line without them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineCounts {
    /// The call joined the line.
    pub joined: bool,
    /// Waiters handed a slot.
    pub handed: u64,
    /// Waiters that left at the end of their place lease.
    pub left: u64,
}

impl Outcome {
    /// The reply: `[granted, remaining, wait_ms, reset_ms]`, durations rounded up.
    pub fn reply(&self) -> [i64; 4] {
        [
            i64::from(self.granted),
            int(self.remaining),
            ceil_ms(self.wait_ns),
            ceil_ms(self.reset_ns),
        ]
    }

    /// The reply's fifth element with `TICKET`: the state after the take in µs, 0 when
    /// nothing was taken (a denial, even one that wrote: a join, a place renewed, a line
    /// settled).
    pub fn ticket(&self) -> i64 {
        if !self.granted || self.handed_look {
            return 0;
        }
        self.write.as_ref().map_or(0, Write::ticket_us)
    }
}

/// Takes `args.tokens` from a bucket whose stored state is `stored` (`None`: no key, a full
/// bucket), at the server time `now_ns`.
///
/// With a floor the take is granted only once at least the floor would be left after it:
/// callers without one (interactive, high priority) find those tokens, while floored ones (a
/// bulk load) use everything above it. A floored take (floor above 0) may reserve, but only
/// tokens that are in the bucket now: it is granted iff the tokens and the floor are both there
/// within MAXWAIT and the tokens alone are there now, so it never puts the bucket into debt and
/// callers without a floor never find a debt a bulk reservation made (they may find less than
/// the floor while one is outstanding). Granted with a wait, it is a reservation like any other;
/// denied, the wait is until the tokens and the floor are both there.
///
/// With `INFLIGHT n LEASE ms` the call also takes a slot for the call in flight, leased until
/// the server's now plus `ms`: granted only if the tokens are (as above) and fewer than `n`
/// slots are held now; otherwise nothing at all is taken or written. Denied because every slot
/// is held, the wait is until the first lease ends (or the tokens' wait, if longer). `TOKENS 0`
/// with INFLIGHT takes a slot and no tokens.
fn take(args: &TakeArgs, stored: Option<&State>, now_ns: i64) -> Result<Outcome, ArgError> {
    let bucket = View::at(&args.quota, stored, now_ns);
    // Without INFLIGHT that is the call (a write carries the stored slots over, if any).
    let Some(inflight) = args.inflight else {
        return Ok(take_tokens(args, &bucket));
    };
    if bucket.slots.waiters.is_empty() {
        return match args.line {
            None => Ok(take_slot(args, inflight, &bucket, false)),
            Some(_) => take_in_line(args, inflight, &bucket, false),
        };
    }
    // The line first: a slot free since (a holder's lease ran out) goes to its head, before
    // this call, which may be the head's own look.
    let (tat, slots, handed) = settle(
        &bucket,
        bucket.base,
        bucket.slots.pruned(bucket.now),
        inflight.cap,
    );
    let settled = View {
        base: tat,
        slots: &slots,
        ..bucket
    };
    let mut outcome = take_in_line(args, inflight, &settled, !handed.is_empty())?;
    let stored = bucket.slots.waiters.len() as u64;
    let live = bucket.slots.waiting(bucket.now).count() as u64;
    outcome.line.handed = handed.len() as u64;
    if outcome.write.is_some() {
        outcome.line.left = stored.saturating_sub(live);
        // Announced, so that a waiter whose holder's lease ran out goes ahead at once.
        outcome.handed = handed.first().copied();
    }
    Ok(outcome)
}

/// [`take`] of a slot by a call that waits in line or may join it (a line is stored, or the
/// call says LINE): `changed` if settling the line handed a slot, which must be written
/// whatever the call's own answer.
fn take_in_line(
    args: &TakeArgs,
    inflight: Inflight,
    bucket: &View<'_>,
    changed: bool,
) -> Result<Outcome, ArgError> {
    let now = bucket.now;
    let unchanged = || {
        changed
            .then(|| bucket.write_all(bucket.base, bucket.pushback, bucket.slots))
            .flatten()
    };
    // A take that wrote (granted) holds the settled table in its own write; one that did not
    // writes the settling's, if it handed a slot.
    let or_settled = |outcome: Outcome| {
        if outcome.write.is_some() {
            outcome
        } else {
            Outcome {
                write: unchanged(),
                ..outcome
            }
        }
    };
    let Some(line) = args.line else {
        let full = bucket.slots.waiting(now).next().is_some();
        return Ok(or_settled(take_slot(args, inflight, bucket, full)));
    };
    let place_end = line.place_end(now);
    if let Some(id) = line.waiter {
        // Handed a slot: granted, its tokens taken at the hand-off. Its lease runs from now
        // at the latest (a waiter that learns of the hand-off late still has all of it).
        if let Some(slot) = bucket.slots.live(now).find(|s| s.id == id) {
            let lease = i128::from(inflight.lease_ms) * i128::from(NS_PER_MS);
            let usable = i128::from(slot.lease_end) - lease;
            let wait = (usable - now).max(0);
            let write = match bucket.slots.lengthened(now, slot, now + wait + lease) {
                Some(slots) => bucket.write_all(bucket.base, bucket.pushback, &slots),
                None => unchanged(),
            };
            return Ok(Outcome {
                wait_ns: saturate(wait),
                write,
                slot: Some(id),
                handed_look: true,
                ..inspect(bucket)
            });
        }
        // Still in line: its place renewed.
        if let Some(place) = place_of(bucket.slots, now, id) {
            let Some(slots) = renewed_place(bucket.slots, now, id, place_end) else {
                return Ok(take_slot(args, inflight, bucket, true));
            };
            return Ok(waiting(bucket, &slots, line, id, place));
        }
        // Neither (it left, or never joined): a take like any other.
    }
    let held = bucket.slots.held_at(now);
    let waiters = bucket.slots.waiting(now).next().is_some();
    if held < inflight.cap && !waiters {
        return Ok(or_settled(take_slot(args, inflight, bucket, false)));
    }
    let tokens = take_tokens(args, bucket);
    if !tokens.granted {
        // Held back by its tokens too: it waits for those, not in line.
        return Ok(Outcome {
            write: unchanged(),
            ..take_slot(args, inflight, bucket, true)
        });
    }
    let Some((slots, waiter, place)) = joined(
        bucket.slots,
        now,
        inflight.cap,
        place_end,
        inflight.lease_ms,
        args.tokens,
    )?
    else {
        return Ok(Outcome {
            write: unchanged(),
            ..take_slot(args, inflight, bucket, true)
        });
    };
    let mut outcome = waiting(bucket, &slots, line, waiter.id, place);
    outcome.line.joined = outcome.write.is_some();
    Ok(outcome)
}

/// The reply to a call in line at `place` with ticket `id`, and the write of `slots` (its join,
/// or its place renewed): denied, for a slot, the wait when to look again.
fn waiting(
    bucket: &View<'_>,
    slots: &crate::Slots,
    line: LineArgs,
    id: u64,
    place: u64,
) -> Outcome {
    let write = bucket.write_all(bucket.base, bucket.pushback, slots);
    let (wait_ns, refusal) = look_again(slots, bucket.now, line.place_ms, id, place);
    Outcome {
        granted: false,
        wait_ns,
        held_by_slots: true,
        refusal,
        slot: Some(id),
        place,
        write,
        ..inspect(bucket)
    }
}

/// The take of tokens and a slot, granted only if a slot is free under the cap: `full` if
/// none is (every slot held, or callers in line ahead).
fn take_slot(args: &TakeArgs, inflight: Inflight, bucket: &View<'_>, full: bool) -> Outcome {
    let tokens = take_tokens(args, bucket);
    let held = bucket.slots.held_at(bucket.now);
    if full || held >= inflight.cap {
        let first_free = bucket.slots.first_free_in(bucket.now);
        return Outcome {
            granted: false,
            remaining: bucket.remaining(bucket.debt()),
            wait_ns: tokens.wait_ns.max(saturate(first_free)),
            reset_ns: saturate(bucket.debt()),
            held_by_slots: tokens.granted,
            refusal: tokens.refusal | Refusal::SLOT,
            ..Outcome::default()
        };
    }
    if !tokens.granted {
        return tokens;
    }
    let tat = tokens
        .write
        .as_ref()
        .and_then(Write::tat)
        .map_or(bucket.base, i128::from);
    let lease_end = bucket.now + i128::from(inflight.lease_ms) * i128::from(NS_PER_MS);
    let acquired = i64::try_from(lease_end)
        .ok()
        .and_then(|end| bucket.slots.acquire(bucket.now, end));
    let written = acquired.and_then(|(slots, id)| {
        let write = bucket.write_all(tat, bucket.pushback, &slots)?;
        Some((write, id))
    });
    let Some((write, id)) = written else {
        // No slot id left (a forged table): the slot is what could not be taken.
        return Outcome {
            granted: false,
            write: None,
            refusal: Refusal::SLOT,
            ..inspect(bucket)
        };
    };
    Outcome {
        write: Some(write),
        slot: Some(id),
        ..tokens
    }
}

/// The token part of a take: everything but the slot.
fn take_tokens(args: &TakeArgs, bucket: &View<'_>) -> Outcome {
    if args.tokens == 0 {
        return inspect(bucket);
    }
    let cost = bucket.cost(args.tokens);
    // A floored take needs its floor there too (and takes only its own tokens).
    let floor = args.floor.unwrap_or(0);
    let wait = bucket.wait_for(args.tokens, floor);
    let within = wait <= i128::from(args.max_wait_ms) * i128::from(NS_PER_MS);
    // Taken as of when the tokens are used: the bucket's own slot, unless a deep cut makes
    // them wait for the rate to recover, past it (see `View::taken`).
    let tat = bucket.taken(cost, bucket.now + wait);
    // A floored take never leaves the bucket in debt: its tokens are there now, and no deep
    // cut's wait puts its slot past the bucket's fill (see `View::leaves_no_debt`).
    let write = if within && (floor == 0 || bucket.leaves_no_debt(tat)) {
        bucket.write(tat)
    } else {
        None
    };
    let debt_after = write
        .as_ref()
        .and_then(Write::tat)
        .map_or(bucket.debt(), |tat| i128::from(tat) - bucket.now);
    // Worked out only for a denial: a grant pays nothing for it.
    let (held_by_floor, refusal) = if write.is_some() {
        (false, Refusal::NONE)
    } else {
        let floor = args.floor.is_some() && bucket.wait_for(args.tokens, 0) == 0;
        (floor, Refusal::of_tokens(floor, bucket.paused_for() > 0))
    };
    Outcome {
        granted: write.is_some(),
        remaining: bucket.remaining(debt_after),
        wait_ns: saturate(wait),
        reset_ns: saturate(debt_after),
        held_by_floor,
        write,
        refusal,
        ..Outcome::default()
    }
}

/// The bucket as it stands: what `TOKENS 0` and THROTTLE.PEEK reply. Writes nothing.
pub(crate) fn inspect(bucket: &View<'_>) -> Outcome {
    Outcome {
        granted: true,
        remaining: bucket.remaining(bucket.debt()),
        wait_ns: 0,
        reset_ns: saturate(bucket.debt()),
        ..Outcome::default()
    }
}

/// THROTTLE.TAKE's reply: `[granted, remaining, wait_ms, reset_ms]`, the ticket with `TICKET`,
/// the slot with `INFLIGHT`, and on a denial what held it back, last. The same from the module
/// and the Lua twin, in RESP2 and RESP3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TakeReply {
    /// The tokens were taken.
    pub granted: bool,
    /// Whole tokens left after the call (0 while the bucket is in debt).
    pub remaining: u64,
    /// Granted: ms to wait before using the tokens. Denied: ms until they would be there.
    /// Rounded up, so a caller that sleeps this long is never early.
    pub wait_ms: u64,
    /// Ms until the bucket is full again, rounded up.
    pub reset_ms: u64,
    /// With `TICKET`: what THROTTLE.GIVE needs to give the tokens back (0: nothing taken).
    pub ticket: Option<u64>,
    /// With `INFLIGHT`: the slot's id, for THROTTLE.RENEW and RELEASE (0: not granted). In
    /// line (`place` above 0): the waiter's ticket, which its slot's id will be.
    pub slot: Option<u64>,
    /// With `LINE`: the place in line (1: the head), 0 when not in line.
    pub place: Option<u64>,
    /// Denied: what held the call back, the reply's last integer. `None` when granted, or
    /// from a server that does not say (a module or library before it did).
    pub refusal: Option<Refusal>,
}

/// THROTTLE.TAKE as the server registers and documents it.
pub(crate) static SPEC: Spec = Spec {
    command: Command::Take,
    summary: "Takes tokens from a token bucket (capacity, refill rate in tokens per second). \
        Replies [granted, remaining, wait_ms, reset_ms] (and the ticket with TICKET). With \
        MAXWAIT, reserves tokens that will be there within that many ms; with FLOOR, takes \
        only if that many tokens remain after; with INFLIGHT n LEASE ms, also takes a slot for \
        a call in flight (fewer than n held), leased for ms, or nothing, and replies its id; \
        with LINE place_ms, a call that finds every slot held joins the line and replies its \
        ticket and place (WAITER id looks again). A denial ends with what held it back: 1 \
        tokens, 2 floor, 4 slot, 8 pause, 16 in line, 32 told its turn, summed.",
    complexity: "O(1)",
    arity: -4,
    flags: "write deny-oom fast",
    acl_categories: "write fast",
    keys: Keys::One(Access::ReadWrite),
    args: &[
        KEY,
        CAPACITY,
        RATE,
        Arg::option("tokens", "TOKENS", Kind::Integer),
        MAXWAIT,
        Arg::option("ticket", "TICKET", Kind::PureToken),
        Arg::option("floor", "FLOOR", Kind::Integer),
        Arg::option("inflight", "INFLIGHT", Kind::Integer),
        Arg::option("lease", "LEASE", Kind::Integer),
        Arg::option("place_ms", "LINE", Kind::Integer),
        Arg::option("waiter_id", "WAITER", Kind::Integer),
    ],
};

impl Effects for Outcome {
    #[inline]
    fn write(&self, key: usize) -> Option<&Write> {
        self.write.as_ref().filter(|_| key == 0)
    }

    /// A slot its line handed on.
    #[inline]
    fn announce(&self) -> Option<Message> {
        self.handed.map(Message::Handed)
    }
}

impl ThrottleCommand for TakeArgs {
    const COMMAND: Command = Command::Take;
    const REPLY_SHAPE: &'static str = "an array of four to eight integers";
    type Outcome = Outcome;
    type Ints = Ints<8>;
    type Reply = TakeReply;

    #[inline]
    fn spec() -> &'static Spec {
        &SPEC
    }

    /// Validates everything after the key: `capacity rate [TOKENS n] [MAXWAIT ms] [TICKET]
    /// [FLOOR f] [INFLIGHT n LEASE ms]`.
    /// The structure first (every option known, each with its value, none twice), then the
    /// values, in a fixed order the Lua twin follows.
    fn parse(args: &[&[u8]]) -> Result<TakeArgs, ArgError> {
        let [capacity, rate, options @ ..] = args else {
            return Err(ArgError::Arity(Command::Take));
        };
        let quota = Quota::parse(capacity, rate)?;

        let mut tokens = None;
        let mut max_wait_ms = None;
        let mut floor = None;
        let mut inflight = None;
        let mut lease = None;
        let mut line = None;
        let mut waiter = None;
        let mut ticket = false;
        let mut rest = options;
        while let [name, tail @ ..] = rest {
            if name.eq_ignore_ascii_case(b"TICKET") {
                if ticket {
                    return Err(ArgError::Repeated("TICKET"));
                }
                ticket = true;
                rest = tail;
                continue;
            }
            let (slot, label) = if name.eq_ignore_ascii_case(b"TOKENS") {
                (&mut tokens, "TOKENS")
            } else if name.eq_ignore_ascii_case(b"MAXWAIT") {
                (&mut max_wait_ms, "MAXWAIT")
            } else if name.eq_ignore_ascii_case(b"FLOOR") {
                (&mut floor, "FLOOR")
            } else if name.eq_ignore_ascii_case(b"INFLIGHT") {
                (&mut inflight, "INFLIGHT")
            } else if name.eq_ignore_ascii_case(b"LEASE") {
                (&mut lease, "LEASE")
            } else if name.eq_ignore_ascii_case(b"LINE") {
                (&mut line, "LINE")
            } else if name.eq_ignore_ascii_case(b"WAITER") {
                (&mut waiter, "WAITER")
            } else {
                return Err(ArgError::UnknownOption(Command::Take));
            };
            let [value, tail @ ..] = tail else {
                return Err(ArgError::MissingValue(label));
            };
            once(slot, value, label)?;
            rest = tail;
        }
        let slot_options = SlotOptions::checked([inflight, lease, line, waiter], floor.is_some())?;

        // The default TOKENS 1 never exceeds a capacity, which is at least 1.
        let tokens = match tokens {
            None => 1,
            Some(text) => parse_tokens(text, quota.capacity)?,
        };
        let max_wait_ms = match max_wait_ms {
            None => 0,
            Some(text) => parse_max_wait(text)?,
        };
        let floor = match floor {
            None => None,
            Some(text) => Some(parse_floor(text, tokens, quota.capacity)?),
        };
        let (inflight, line) = slot_options.values()?;
        Ok(TakeArgs {
            quota,
            tokens,
            max_wait_ms,
            ticket,
            floor,
            inflight,
            line,
        })
    }

    /// The words after the key, as [`TakeArgs::parse`] reads them back: options only where
    /// they differ from the defaults.
    fn words(&self) -> Vec<Word<'_>> {
        let mut words = self.quota.words().to_vec();
        if self.tokens != 1 {
            words.extend([Word::Text("TOKENS"), Word::Number(self.tokens)]);
        }
        if self.max_wait_ms > 0 {
            words.extend([Word::Text("MAXWAIT"), Word::Number(self.max_wait_ms)]);
        }
        if self.ticket {
            words.push(Word::Text("TICKET"));
        }
        if let Some(floor) = self.floor {
            words.extend([Word::Text("FLOOR"), Word::Number(floor)]);
        }
        slot_words(self.inflight, self.line, &mut words);
        words
    }

    #[inline]
    fn apply(&self, stored: &[Option<State>], now_ns: i64) -> Result<Outcome, ArgError> {
        take(self, one_key(stored), now_ns)
    }

    #[inline]
    fn reply(&self, outcome: &Outcome) -> Ints<8> {
        let [granted, remaining, wait_ms, reset_ms] = outcome.reply();
        let mut ints = Ints::new([granted, remaining, wait_ms.max(0), reset_ms.max(0)]);
        if self.ticket {
            // A slot taken with no tokens took nothing a ticket could give back.
            let ticket = if self.tokens > 0 {
                outcome.ticket().max(0)
            } else {
                0
            };
            ints.push(ticket);
        }
        // Only a denial says why: a granted reply is as it always was, and costs nothing more.
        SlotTail {
            slot: self.inflight.map(|_| outcome.slot.unwrap_or(0)),
            place: self.line.map(|_| outcome.place),
            refusal: (!outcome.granted).then_some(outcome.refusal),
        }
        .push_onto(&mut ints);
        ints
    }

    /// Four integers, then the ticket if the call asked for one (TICKET), then the slot's id
    /// if it asked for one (INFLIGHT), then the place in line with LINE: five integers alone
    /// could be either. A denial may end with what held it back (a server from before that
    /// says nothing: read as `None`).
    fn decode(&self, ints: &[i64]) -> Option<TakeReply> {
        let [granted, remaining, wait_ms, reset_ms, tail @ ..] = ints else {
            return None;
        };
        let granted = flag(*granted)?;
        let (ticket, tail) = next_if(self.ticket, tail)?;
        let SlotTail {
            slot,
            place,
            refusal,
        } = SlotTail::read(tail, self.inflight.is_some(), self.line.is_some(), granted)?;
        Some(TakeReply {
            granted,
            remaining: count(*remaining)?,
            wait_ms: count(*wait_ms)?,
            reset_ms: count(*reset_ms)?,
            ticket,
            slot,
            place,
            refusal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MAX_WAIT_MS;

    fn words(text: &str) -> Vec<&[u8]> {
        text.split_whitespace().map(str::as_bytes).collect()
    }

    fn take(text: &str) -> Result<TakeArgs, ArgError> {
        TakeArgs::parse(&words(text))
    }

    #[test]
    fn take_defaults_and_options() {
        let args = take("8 9").unwrap();
        assert_eq!(
            (args.quota.capacity, args.tokens, args.max_wait_ms),
            (8, 1, 0)
        );
        assert_eq!(args.quota.interval.ns(), 111_111_112);
        assert!(!args.ticket);

        let args = take("8 9 maxwait 5000 Tokens 3 ticket").unwrap();
        assert_eq!(
            (args.tokens, args.max_wait_ms, args.ticket),
            (3, 5000, true)
        );
        let args = take("8 9 TICKET TOKENS 0").unwrap();
        assert_eq!((args.tokens, args.ticket), (0, true));
        let args = take("8 9 FLOOR 0 MAXWAIT 5").unwrap();
        assert_eq!(
            (args.floor, args.max_wait_ms),
            (Some(0), 5),
            "FLOOR 0 is no floor"
        );
        for text in ["8 9 FLOOR 2 MAXWAIT 1", "8 9 MAXWAIT 1 FLOOR 2"] {
            let args = take(text).unwrap();
            assert_eq!((args.floor, args.max_wait_ms), (Some(2), 1), "{text}");
        }
        let args = take("8 9 TOKENS 8 MAXWAIT 315360000000").unwrap();
        assert_eq!((args.tokens, args.max_wait_ms), (8, MAX_WAIT_MS));
    }

    #[test]
    fn the_words_read_back_as_the_same_call() {
        for text in [
            "8 9",
            "8 9 TOKENS 0",
            "8 9 TOKENS 3 MAXWAIT 5000 TICKET",
            "0010 007.250 MAXWAIT 1",
            "8 9 TOKENS 3 FLOOR 5 MAXWAIT 0",
            "8 9 TOKENS 3 FLOOR 5 MAXWAIT 700 TICKET",
        ] {
            let args = take(text).unwrap();
            let written: Vec<String> = args.words().into_iter().map(Word::to_text).collect();
            let back: Vec<&[u8]> = written.iter().map(String::as_bytes).collect();
            assert_eq!(TakeArgs::parse(&back), Ok(args), "{text} -> {written:?}");
        }
    }

    #[test]
    fn every_bad_take_names_its_problem() {
        use ArgError::*;
        let cases: &[(&str, ArgError)] = &[
            ("", Arity(Command::Take)),
            ("8", Arity(Command::Take)),
            ("0 9", Capacity),
            ("-1 9", Capacity),
            ("1.5 9", Capacity),
            ("1000000000000001 9", Capacity),
            ("18446744073709551616 9", Capacity),
            ("abc 9", Capacity),
            ("8 0", Rate),
            ("8 -9", Rate),
            ("8 nan", Rate),
            ("8 inf", Rate),
            ("8 1e400", Rate),
            ("1000000000000000 0.000001", FillTooLong),
            ("315360001 1", FillTooLong),
            ("8 9 TOKENS 9", Tokens { capacity: 8 }),
            ("8 9 TOKENS -1", Tokens { capacity: 8 }),
            ("8 9 TOKENS x", Tokens { capacity: 8 }),
            ("8 9 MAXWAIT 315360000001", MaxWait),
            ("8 9 MAXWAIT -5", MaxWait),
            ("8 9 MAXWAIT 1.5", MaxWait),
            ("8 9 WAIT 1", UnknownOption(Command::Take)),
            ("8 9 TOKENS", MissingValue("TOKENS")),
            ("8 9 MAXWAIT 1 MAXWAIT", MissingValue("MAXWAIT")),
            ("8 9 TOKENS 1 tokens 2", Repeated("TOKENS")),
            ("8 9 TICKET ticket", Repeated("TICKET")),
            // Structure before values: the unknown option wins over the bad TOKENS.
            ("8 9 TOKENS x FOO", UnknownOption(Command::Take)),
            ("8 9 FLOOR 8", Floor { capacity: 8 }),
            ("8 9 TOKENS 3 FLOOR 6", Floor { capacity: 8 }),
            ("8 9 FLOOR -1", Floor { capacity: 8 }),
            ("8 9 FLOOR", MissingValue("FLOOR")),
            ("8 9 FLOOR 1 floor 1", Repeated("FLOOR")),
            // Values in order: TOKENS before FLOOR.
            ("8 9 FLOOR 9 TOKENS 9", Tokens { capacity: 8 }),
        ];
        for (args, expected) in cases {
            assert_eq!(take(args), Err(*expected), "args {args:?}");
            assert!(expected.to_string().starts_with("ERR "), "{expected}");
        }
    }

    #[test]
    fn largest_fill_is_accepted() {
        // 315360000 tokens at 1/s refill in exactly 10 years.
        assert!(take("315360000 1").is_ok());
        assert!(take("1000000000000000 1000000000").is_ok());
    }

    #[test]
    fn non_utf8_bytes_are_rejected_not_decoded() {
        let args: [&[u8]; 2] = [b"\xff", b"9"];
        assert_eq!(TakeArgs::parse(&args), Err(ArgError::Capacity));
        let args: [&[u8]; 4] = [b"8", b"9", b"TOK\xffENS", b"1"];
        assert_eq!(
            TakeArgs::parse(&args),
            Err(ArgError::UnknownOption(Command::Take))
        );
    }

    #[test]
    fn replies_read_back_from_their_integers() {
        let reply = |granted, remaining, wait_ms, reset_ms, ticket, slot| TakeReply {
            granted,
            remaining,
            wait_ms,
            reset_ms,
            ticket,
            slot,
            place: None,
            refusal: None,
        };
        // Each call reads the shape its own options make: five integers are a ticket after
        // TICKET, a slot after INFLIGHT.
        for (call, ints, expected) in [
            (
                "8 9",
                &[1, 7, 0, 112][..],
                reply(true, 7, 0, 112, None, None),
            ),
            (
                "8 9 TICKET",
                &[0, 0, 250, 1000, 0],
                reply(false, 0, 250, 1000, Some(0), None),
            ),
            (
                "8 9 TICKET",
                &[1, 0, 5, 10, 1_764_547_200_000_123],
                reply(true, 0, 5, 10, Some(1_764_547_200_000_123), None),
            ),
            (
                "8 9 INFLIGHT 2 LEASE 100",
                &[1, 1, 0, 2, 7],
                reply(true, 1, 0, 2, None, Some(7)),
            ),
            (
                "8 9 TICKET INFLIGHT 2 LEASE 100",
                &[1, 1, 0, 2, 5, 0],
                reply(true, 1, 0, 2, Some(5), Some(0)),
            ),
        ] {
            let args = take(call).unwrap();
            assert_eq!(args.decode(ints), Some(expected), "{call}");
        }
        let plain = take("8 9").unwrap();
        let ticket = take("8 9 TICKET").unwrap();
        let inflight = take("8 9 INFLIGHT 2 LEASE 100").unwrap();
        // A denial ends with what held it back, after everything the call asked for.
        let held = |bits| Some(Refusal::from_bits(bits));
        for (args, ints, expected) in [
            (&plain, &[0, 0, 95, 873, 1][..], (None, None, held(1))),
            (&plain, &[0, 7, 96, 296, 2], (None, None, held(2))),
            (&ticket, &[0, 0, 1490, 2268, 0, 9], (Some(0), None, held(9))),
            (
                &inflight,
                &[0, 98, 29990, 30, 0, 4],
                (None, Some(0), held(4)),
            ),
            (
                &inflight,
                &[0, 0, 29990, 30, 0, 5],
                (None, Some(0), held(5)),
            ),
        ] {
            let back = args.decode(ints).unwrap();
            assert_eq!((back.ticket, back.slot, back.refusal), expected, "{ints:?}");
        }
        assert_eq!(
            plain.decode(&[1, 1, 0, 2, 1]),
            None,
            "a grant says no reason"
        );
        assert_eq!(plain.decode(&[0, 1, 0, 2, -1]), None);
        assert_eq!(inflight.decode(&[0, 98, 29990, 30, 0, 4, 4]), None);
        assert_eq!(plain.decode(&[1, 1, 0, 2, 7]), None, "not asked for");
        assert_eq!(ticket.decode(&[1, 1, 0, 2]), None, "asked for, missing");
        assert_eq!(inflight.decode(&[1, 1, 0, 2, 5, 7]), None);
        for bad in [
            &[][..],
            &[1, 2, 3],
            &[1, 2, 3, 4, 5, 6],
            &[2, 0, 0, 0],
            &[1, -1, 0, 0],
            &[1, 0, -5, 0],
        ] {
            assert_eq!(plain.decode(bad), None, "{bad:?}");
        }
        assert_eq!(ticket.decode(&[1, 0, 0, 0, -1]), None);
        // What the server sends reads back as what the arithmetic decided.
        let both = take("8 9 TOKENS 2 TICKET INFLIGHT 2 LEASE 100").unwrap();
        let now = 1_764_547_200_000_000_000;
        let outcome = both.apply(&[None], now).unwrap();
        let back = both.decode(both.reply(&outcome).as_slice()).unwrap();
        let [granted, remaining, wait_ms, reset_ms] = outcome.reply();
        assert_eq!(
            back,
            reply(
                granted == 1,
                remaining as u64,
                wait_ms as u64,
                reset_ms as u64,
                Some(outcome.ticket() as u64),
                outcome.slot,
            )
        );
        assert!(back.granted && back.slot.is_some_and(|id| id > 0));
        // And a denial, with its reason: every slot held, the tokens there.
        let stored = outcome.write.and_then(|w| w.stored());
        let one = take("8 9 INFLIGHT 1 LEASE 100").unwrap();
        let denied = one.apply(&[stored], now).unwrap();
        let ints = one.reply(&denied);
        assert_eq!(ints.as_slice(), &[0, 6, 100, 223, 0, 4]);
        assert_eq!(one.decode(ints.as_slice()).unwrap().refusal, held(4));
    }

    #[test]
    fn the_docs_read_as_the_syntax() {
        assert_eq!(
            SPEC.syntax(),
            "key capacity rate [TOKENS tokens] [MAXWAIT maxwait] [TICKET] [FLOOR floor] \
             [INFLIGHT inflight] [LEASE lease] [LINE place_ms] [WAITER waiter_id]"
        );
    }
}
