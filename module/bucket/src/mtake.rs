//! `THROTTLE.MTAKE numkeys key [key ...] capacity rate tokens [...] [MAXWAIT ms] [FLOOR f ...]
//! [TICKET] [INFLIGHT n LEASE ms] [LINE place_ms [WAITER id]]`: take from several buckets at
//! once, from every one or from none, with INFLIGHT a slot for the call in the first key's
//! bucket, and with LINE a place in that bucket's line for one. Its arguments, arithmetic,
//! reply and docs.

use crate::channel::Message;
use crate::command::Command;
use crate::error::ArgError;
use crate::gcra::{ceil_ms, saturate, View, Write};
use crate::limits::MAX_KEYS;
use crate::line::{joined, look_again, place_of, renewed_place, settle, Handed};
use crate::refusal::Refusal;
use crate::reply::{count, flag, int, Ints};
use crate::slot_options::{slot_words, Inflight, LineArgs, SlotOptions, SlotTail};
use crate::slots::Slots;
use crate::spec::{Access, Arg, Keys, Kind, Spec, CAPACITY, KEY, MAXWAIT, RATE};
use crate::state::State;
use crate::take::{parse_floor, LineCounts};
use crate::throttle_command::{Effects, ThrottleCommand};
use crate::words::{parse_max_wait, parse_tokens, parse_u64, read_options, Word};
use crate::{Quota, NS_PER_MS};

/// One bucket of a THROTTLE.MTAKE: its quota and the tokens taken from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// The bucket's quota.
    pub quota: Quota,
    /// Tokens taken from it (0: it is only inspected).
    pub tokens: u64,
    /// With `FLOOR`: the tokens that must remain in it after the take.
    pub floor: Option<u64>,
}

/// `THROTTLE.MTAKE numkeys key [key ...] capacity rate tokens [...] [MAXWAIT ms] [FLOOR f ...]
/// [TICKET] [INFLIGHT n LEASE ms] [LINE place_ms [WAITER id]]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MTakeArgs {
    len: usize,
    limits: [Limit; MAX_KEYS],
    /// How far ahead the call may reserve, in ms (0: only what is there now).
    pub max_wait_ms: u64,
    /// Reply one ticket per key after the pairs: what THROTTLE.GIVE takes for that key.
    pub ticket: bool,
    /// A slot for the call in flight, in the first key's bucket, taken with every bucket's
    /// tokens or not at all.
    pub inflight: Option<Inflight>,
    /// A place in the first bucket's line for a slot (only with `inflight`, never with a
    /// floor).
    pub line: Option<LineArgs>,
}

impl MTakeArgs {
    /// The call for `limits` (1 to [`MAX_KEYS`], in key order), as a client makes it, without
    /// TICKET, INFLIGHT or LINE (set [`MTakeArgs::ticket`], [`MTakeArgs::inflight`] and
    /// [`MTakeArgs::line`] for them);
    /// `None` for none or too many.
    pub fn new(limits: &[Limit], max_wait_ms: u64) -> Option<MTakeArgs> {
        let first = *limits.first()?;
        if limits.len() > MAX_KEYS {
            return None;
        }
        let mut all = [first; MAX_KEYS];
        all.iter_mut().zip(limits).for_each(|(slot, l)| *slot = *l);
        Some(MTakeArgs {
            len: limits.len(),
            limits: all,
            max_wait_ms,
            ticket: false,
            inflight: None,
            line: None,
        })
    }
    /// One limit per key, in key order.
    pub fn limits(&self) -> &[Limit] {
        self.limits.get(..self.len).unwrap_or(&[])
    }
}

/// One bucket after a multi-take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketAfter {
    /// Whole tokens left.
    pub remaining: u64,
    /// Until this bucket is full again.
    pub reset_ns: i64,
    /// Its state to store, or `None` (a denial, or 0 tokens from this bucket).
    pub write: Option<Write>,
}

/// What a multi-take decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MOutcome {
    /// Whether every bucket gave its tokens.
    pub granted: bool,
    /// Granted: how long to wait before using the tokens (the slowest bucket's wait).
    /// Denied: until every bucket would have its tokens.
    pub wait_ns: i64,
    /// Denied only because some bucket would have been left below its floor.
    pub held_by_floor: bool,
    /// With INFLIGHT: the id of the slot taken in the first key's bucket (`None`: denied, or
    /// no INFLIGHT).
    pub slot: Option<u64>,
    /// With INFLIGHT: denied only because every slot was held (the tokens alone would have
    /// been granted).
    pub held_by_slots: bool,
    /// Denied: what held the call back, over every bucket (the reply's last integer). Empty
    /// when granted.
    pub refusal: Refusal,
    /// With LINE, denied: the caller's place in the first bucket's line (1: the head); 0 when
    /// not in line.
    pub place: u64,
    /// What the call did to the line, for the server's counters.
    pub line: LineCounts,
    /// The first waiter the call's settling of the line handed a slot (announced).
    pub handed: Option<Handed>,
    len: usize,
    buckets: [BucketAfter; MAX_KEYS],
    /// Which buckets gave tokens: only those have a ticket (the first key's write may hold a
    /// slot and no tokens).
    took: [bool; MAX_KEYS],
}

impl MOutcome {
    /// One entry per key, in key order.
    pub fn buckets(&self) -> &[BucketAfter] {
        self.buckets.get(..self.len).unwrap_or(&[])
    }

    /// Each key's ticket, in key order: its state after the take in µs, as THROTTLE.TAKE ...
    /// TICKET gives it (see `Write::ticket_us`); 0 where nothing was taken (a denial, a key
    /// asked for 0 tokens).
    pub fn tickets(&self) -> impl Iterator<Item = i64> + '_ {
        self.buckets()
            .iter()
            .zip(self.took)
            .map(|(b, took)| match &b.write {
                Some(write) if took => write.ticket_us(),
                _ => 0,
            })
    }
}

/// THROTTLE.MTAKE's reply read back: whether granted, the wait, each bucket's `remaining`
/// and `reset_ms`, in key order, with TICKET each bucket's ticket, with INFLIGHT the slot, and
/// with LINE the place in line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MTakeReply {
    /// Every bucket gave its tokens.
    pub granted: bool,
    /// Granted: ms to wait before using the tokens. Denied: ms until every bucket would have
    /// them.
    pub wait_ms: u64,
    /// `(remaining, reset_ms)` per bucket, in key order.
    pub buckets: Vec<(u64, u64)>,
    /// With TICKET: per bucket, in key order, what THROTTLE.GIVE needs to give its tokens back
    /// (0: nothing taken from it).
    pub tickets: Option<Vec<u64>>,
    /// With INFLIGHT: the slot's id in the first key's bucket, for THROTTLE.RENEW and RELEASE
    /// (0: not granted). In line (`place` above 0): the waiter's ticket, which its slot's id
    /// will be.
    pub slot: Option<u64>,
    /// With LINE: the place in the first bucket's line (1: the head), 0 when not in line.
    pub place: Option<u64>,
    /// Denied: what held the call back, the reply's last integer. `None` when granted, or
    /// from a server that does not say (a module or library before it did).
    pub refusal: Option<Refusal>,
}

/// Takes each limit's tokens from its bucket (`stored[i]` is key `i`'s state) if every bucket
/// can give them within MAXWAIT (and, with FLOOR, leave its floor: see THROTTLE.TAKE). A
/// bucket with a floor above 0 is never left in debt, as with a floored THROTTLE.TAKE: its
/// tokens are there now, and the call's wait (the longest) does not put its slot past its
/// fill. All the tokens are used at one instant, after the longest wait, so each bucket takes
/// them as of that instant (see `View::taken`): a bucket that alone could have served sooner is
/// not left with a slot that later calls would also use.
///
/// With `INFLIGHT n LEASE ms` the call also takes a slot for the call in flight in the first
/// key's bucket (one place every caller of the same limits looks: the first key is the call's
/// own, so the cap is per first key), leased until the server's now plus `ms`, as
/// THROTTLE.TAKE does: granted only if every bucket's tokens are and fewer than `n` slots are
/// held in the first key now; otherwise nothing at all is taken or written. Denied because
/// every slot is held, the wait is until the first lease ends (or the tokens' wait, if longer).
///
/// With `LINE place_ms` a call whose tokens would be granted but that finds every slot held (or
/// callers in line ahead) joins the first bucket's line, as THROTTLE.TAKE's, for the slot
/// alone: a release hands it the slot, and its look (`WAITER id`) then takes every bucket's
/// tokens, its lease running from when they are there. A handed look that cannot have its
/// tokens within MAXWAIT gives the slot back at once, to the next in line.
fn mtake(args: &MTakeArgs, stored: &[Option<State>], now_ns: i64) -> Result<MOutcome, ArgError> {
    let limits = args.limits();
    let len = limits.len().min(stored.len());
    // The first bucket's line, settled first (as THROTTLE.TAKE's): a slot free since (a
    // holder's lease ran out) goes to its head, before this call, which may be its own look.
    let settled: Slots;
    let mut views: [Option<(View<'_>, u64, bool)>; MAX_KEYS] = Default::default();
    for ((view, limit), state) in views.iter_mut().zip(limits).zip(stored) {
        let bucket = View::at(&limit.quota, state.as_ref(), now_ns);
        *view = Some((bucket, limit.tokens, limit.floor.is_some_and(|f| f > 0)));
    }
    let stored_waiters = match views.first() {
        Some(Some((first, _, _))) => first.slots.waiters.len() as u64,
        _ => 0,
    };
    let mut handed = Vec::new();
    if let (Some(inflight), Some(Some((first, tokens, floored)))) =
        (args.inflight, views.first().copied())
    {
        if stored_waiters > 0 {
            let (tat, slots, given) = settle(
                &first,
                first.base,
                first.slots.pruned(first.now),
                inflight.cap,
            );
            settled = slots;
            handed = given;
            let view = View {
                base: tat,
                slots: &settled,
                ..first
            };
            if let Some(slot) = views.first_mut() {
                *slot = Some((view, tokens, floored));
            }
        }
    }

    let mut wait = 0i128;
    let mut wait_unfloored = 0i128;
    for (view, limit) in views.iter().zip(limits) {
        let Some((bucket, tokens, _)) = view else {
            break;
        };
        // A bucket asked for nothing is only inspected: its debt delays no one.
        if *tokens > 0 {
            wait = wait.max(bucket.wait_for(*tokens, limit.floor.unwrap_or(0)));
            wait_unfloored = wait_unfloored.max(bucket.wait_for(*tokens, 0));
        }
    }
    let takes_any = limits.iter().any(|l| l.tokens > 0);
    let within = wait <= i128::from(args.max_wait_ms) * i128::from(NS_PER_MS);

    let mut buckets: [BucketAfter; MAX_KEYS] = Default::default();
    let mut granted = takes_any && within;
    if granted {
        for (after, view) in buckets.iter_mut().zip(&views) {
            let Some((bucket, tokens, floored)) = view else {
                break;
            };
            if *tokens > 0 {
                let tat = bucket.taken(bucket.cost(*tokens), bucket.now + wait);
                // A floored bucket is never left in debt (see THROTTLE.TAKE): its tokens are
                // there now, and the call's wait does not put its slot past its fill.
                granted &= !*floored || bucket.leaves_no_debt(tat);
                after.write = bucket.write(tat);
                // A state more than 20 years ahead (a deep cut) or past i64 (a forged one)
                // refuses the whole call, as for one bucket.
                granted &= after.write.is_some();
            }
        }
        if !granted {
            buckets.iter_mut().for_each(|b| b.write = None);
        }
    }
    let tokens_granted = granted || !takes_any;
    let floored = limits.iter().any(|l| l.floor.is_some());
    let held_by_floor = !tokens_granted && floored && wait_unfloored == 0;
    // Worked out only for a denial: the floor or the tokens, and a pause in effect on any
    // bucket the call takes from.
    let mut refusal = Refusal::NONE;
    if !tokens_granted {
        let paused = views
            .iter()
            .flatten()
            .any(|(bucket, tokens, _)| *tokens > 0 && bucket.paused_for() > 0);
        refusal = Refusal::of_tokens(held_by_floor, paused);
    }
    let mut outcome = MOutcome {
        granted: tokens_granted,
        wait_ns: if takes_any { saturate(wait) } else { 0 },
        held_by_floor,
        slot: None,
        held_by_slots: false,
        refusal,
        place: 0,
        line: LineCounts::default(),
        handed: None,
        len,
        buckets,
        took: [false; MAX_KEYS],
    };
    // What the call writes to the first bucket when it is denied: its line changed.
    let mut line_write = None;
    if let (Some(inflight), Some(Some((first, _, _)))) = (args.inflight, views.first()) {
        line_write = take_slot(args, inflight, first, wait, &mut outcome, &mut handed)?;
    }
    if !outcome.granted {
        outcome.buckets.iter_mut().for_each(|b| b.write = None);
        if let (Some(after), Some(Some((first, _, _)))) =
            (outcome.buckets.first_mut(), views.first())
        {
            // The line's own change, or the settling's if it handed a slot.
            after.write = line_write.or_else(|| {
                (!handed.is_empty())
                    .then(|| first.write_all(first.base, first.pushback, first.slots))
                    .flatten()
            });
        }
    }
    let first_written = outcome.buckets.first().is_some_and(|b| b.write.is_some());
    if args.inflight.is_some() && first_written {
        let live = match views.first() {
            Some(Some((first, _, _))) => first.slots.waiting(first.now).count() as u64,
            _ => 0,
        };
        outcome.line.handed = handed.len() as u64;
        outcome.line.left = stored_waiters.saturating_sub(live);
        // Announced, so that a waiter whose holder's lease ran out goes ahead at once.
        outcome.handed = handed.first().copied();
    }
    for (after, view) in outcome.buckets.iter_mut().zip(&views) {
        let Some((bucket, _, _)) = view else { break };
        let debt = after
            .write
            .as_ref()
            .and_then(Write::tat)
            .map_or(bucket.debt(), |tat| i128::from(tat) - bucket.now);
        after.remaining = bucket.remaining(debt);
        after.reset_ns = saturate(debt);
    }
    for (took, limit) in outcome.took.iter_mut().zip(limits) {
        *took = outcome.granted && limit.tokens > 0;
    }
    Ok(outcome)
}

/// The slot part of a multi-take, in the first key's bucket (`first`, its line settled), after
/// its tokens were decided (`outcome.granted`, with the tokens' `wait`): the slot taken with
/// them (written into the first bucket's write), a handed slot confirmed or given back, a place
/// in line joined or renewed, or a denial for want of a slot. Returns what to write to the
/// first bucket if the call is denied (its line changed); the slots handed on go to `handed`.
fn take_slot(
    args: &MTakeArgs,
    inflight: Inflight,
    first: &View<'_>,
    wait: i128,
    outcome: &mut MOutcome,
    handed: &mut Vec<Handed>,
) -> Result<Option<Write>, ArgError> {
    let now = first.now;
    let tokens_granted = outcome.granted;
    let lease = i128::from(inflight.lease_ms) * i128::from(NS_PER_MS);
    // The first bucket's state with this call's tokens, if it took any.
    let tat = outcome
        .buckets
        .first()
        .and_then(|b| b.write.as_ref())
        .and_then(Write::tat)
        .map_or(first.base, i128::from);
    let waiter = args.line.and_then(|line| line.waiter);
    // Handed a slot: its tokens now, its lease from when they are there (a waiter that learns
    // of the hand-off late still has all of it); without them, the slot goes on down the line.
    if let Some(slot) = waiter.and_then(|id| first.slots.live(now).find(|s| s.id == id)) {
        let id = slot.id;
        if !tokens_granted {
            let table = first
                .slots
                .released(now, id)
                .unwrap_or_else(|| first.slots.pruned(now));
            let (tat, table, more) = settle(first, first.base, table, inflight.cap);
            handed.extend(more);
            return Ok(first.write_all(tat, first.pushback, &table));
        }
        let wait = if outcome.wait_ns > 0 { wait } else { 0 };
        let table = first
            .slots
            .lengthened(now, slot, now + wait + lease)
            .unwrap_or_else(|| first.slots.pruned(now));
        return Ok(grant_slot(first, tat, &table, id, outcome));
    }
    let place_end = args.line.map(|line| line.place_end(now));
    // Still in line: its place renewed.
    if let (Some(id), Some(place_end), Some(line)) = (waiter, place_end, args.line) {
        if let Some(place) = place_of(first.slots, now, id) {
            if let Some(table) = renewed_place(first.slots, now, id, place_end) {
                return Ok(in_line(first, &table, line.place_ms, id, place, outcome));
            }
        }
    }
    let in_line_ahead = first.slots.waiting(now).next().is_some();
    if !in_line_ahead && first.slots.held_at(now) < inflight.cap {
        if !tokens_granted {
            return Ok(None);
        }
        // A slot free: taken with the tokens, leased from now.
        let acquired = i64::try_from(now + lease)
            .ok()
            .and_then(|end| first.slots.acquire(now, end));
        return Ok(match acquired {
            Some((table, id)) => grant_slot(first, tat, &table, id, outcome),
            None => refuse_slot(outcome, None),
        });
    }
    // Every slot held, or callers in line ahead: a call whose tokens would be granted joins the
    // line with LINE, for the slot alone (its tokens are taken at its look).
    if let (Some(line), Some(place_end), true) = (args.line, place_end, tokens_granted) {
        let Some((table, waiter, place)) = joined(
            first.slots,
            now,
            inflight.cap,
            place_end,
            inflight.lease_ms,
            0,
        )?
        else {
            return Ok(refuse_slot(outcome, None));
        };
        let write = in_line(first, &table, line.place_ms, waiter.id, place, outcome);
        outcome.line.joined = write.is_some();
        return Ok(write);
    }
    // Nothing taken: the wait until the first lease ends (or the tokens', if longer).
    let first_free = first.slots.first_free_in(now);
    Ok(refuse_slot(outcome, Some(first_free)))
}

/// The call holds slot `id` of `table`: the first bucket's write with its tokens (`tat`) and the
/// table; a state that cannot be written (a forged one) refuses the call.
fn grant_slot(
    first: &View<'_>,
    tat: i128,
    table: &Slots,
    id: u64,
    outcome: &mut MOutcome,
) -> Option<Write> {
    match first.write_all(tat, first.pushback, table) {
        Some(write) => {
            if let Some(after) = outcome.buckets.first_mut() {
                after.write = Some(write);
            }
            outcome.slot = Some(id);
            None
        }
        None => refuse_slot(outcome, None),
    }
}

/// Denied in line at `place` with ticket `id`, writing `table` (its join, or its place
/// renewed): for a slot, the wait when to look again.
fn in_line(
    first: &View<'_>,
    table: &Slots,
    place_ms: u64,
    id: u64,
    place: u64,
    outcome: &mut MOutcome,
) -> Option<Write> {
    let (wait_ns, refusal) = look_again(table, first.now, place_ms, id, place);
    outcome.granted = false;
    outcome.wait_ns = wait_ns;
    outcome.held_by_slots = true;
    outcome.refusal = refusal;
    outcome.slot = Some(id);
    outcome.place = place;
    first.write_all(first.base, first.pushback, table)
}

/// Denied for want of a slot, nothing written: with the wait until one may be free
/// (`first_free`, or the tokens' wait if longer), or none (no id or no room left in a forged
/// table: no wait to give).
fn refuse_slot(outcome: &mut MOutcome, first_free: Option<i128>) -> Option<Write> {
    match first_free {
        Some(first_free) => {
            outcome.wait_ns = outcome.wait_ns.max(saturate(first_free));
            outcome.held_by_slots = outcome.granted;
            outcome.refusal |= Refusal::SLOT;
        }
        None => {
            outcome.wait_ns = 0;
            outcome.refusal = Refusal::SLOT;
        }
    }
    outcome.granted = false;
    None
}

/// THROTTLE.MTAKE as the server registers and documents it. No legacy key range can say
/// "numkeys keys from argv[2]": the key spec (keynum) serves COMMAND GETKEYS and ACL key
/// patterns, and the module answers the cluster's key-position requests (`getkeys-api`).
pub(crate) static SPEC: Spec = Spec {
    command: Command::MTake,
    summary: "Takes tokens from several buckets at once, from all or from none (one capacity, \
        rate and tokens triple per key, in key order); with FLOOR, only if each bucket keeps \
        its floor; with INFLIGHT n LEASE ms, also takes a slot for a call in flight in the \
        first key's bucket (fewer than n held), leased for ms, or nothing; with LINE place_ms, \
        a call that finds every slot held joins that bucket's line and replies its ticket and \
        place (WAITER id looks again, and takes the tokens once handed the slot). Replies \
        [granted, wait_ms, then remaining and reset_ms per bucket] (then one ticket per bucket \
        with TICKET, then the slot's id with INFLIGHT, then the place with LINE, then on a \
        denial what held it back: 1 tokens, 2 floor, 4 slot, 8 pause, 16 in line, 32 told \
        its turn, summed).",
    complexity: "O(N) where N is the number of keys",
    arity: -6,
    flags: "write deny-oom fast getkeys-api",
    acl_categories: "write fast",
    keys: Keys::Counted(Access::ReadWrite),
    args: &[
        Arg::new("numkeys", Kind::Integer),
        KEY.multiple(),
        Arg::new(
            "quota",
            Kind::Block(&[CAPACITY, RATE, Arg::new("tokens", Kind::Integer)]),
        )
        .multiple(),
        MAXWAIT,
        Arg::option(
            "floors",
            "FLOOR",
            Kind::Block(&[Arg::new("floor", Kind::Integer).multiple()]),
        ),
        Arg::option("ticket", "TICKET", Kind::PureToken),
        Arg::option("inflight", "INFLIGHT", Kind::Integer),
        Arg::option("lease", "LEASE", Kind::Integer),
        Arg::option("place_ms", "LINE", Kind::Integer),
        Arg::option("waiter_id", "WAITER", Kind::Integer),
    ],
};

impl Effects for MOutcome {
    #[inline]
    fn write(&self, key: usize) -> Option<&Write> {
        self.buckets().get(key).and_then(|b| b.write.as_ref())
    }

    /// A slot its line handed on (on the first key's channel, where the line is).
    #[inline]
    fn announce(&self) -> Option<Message> {
        self.handed.map(Message::Handed)
    }
}

impl ThrottleCommand for MTakeArgs {
    const COMMAND: Command = Command::MTake;
    const REPLY_SHAPE: &'static str = "an array of integers: two, two or three per key, the \
        slot with INFLIGHT, the place with LINE, and the reason on a denial";
    type Outcome = MOutcome;
    type Ints = Ints<{ 5 + 3 * MAX_KEYS }>;
    type Reply = MTakeReply;

    #[inline]
    fn spec() -> &'static Spec {
        &SPEC
    }

    /// Validates the words after the command name, keys included (they must be distinct):
    /// numkeys, the number of words, the keys, each triple in key order, then the options'
    /// structure (MAXWAIT, FLOOR, TICKET, INFLIGHT, LEASE; INFLIGHT and LEASE together), then
    /// their values, in that order.
    fn parse(args: &[&[u8]]) -> Result<MTakeArgs, ArgError> {
        let [numkeys, rest @ ..] = args else {
            return Err(ArgError::Arity(Command::MTake));
        };
        let len = parse_u64(numkeys)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| (1..=MAX_KEYS).contains(n))
            .ok_or(ArgError::NumKeys)?;
        let shape = ArgError::Triples { keys: len };
        let (keys, rest) = rest.split_at_checked(len).ok_or(shape)?;
        let (triples, options) = rest.split_at_checked(3 * len).ok_or(shape)?;
        for (i, key) in keys.iter().enumerate() {
            if keys.iter().skip(i + 1).any(|other| other == key) {
                return Err(ArgError::DuplicateKey);
            }
        }

        let mut parsed = [None; MAX_KEYS];
        for (slot, triple) in parsed.iter_mut().zip(triples.chunks_exact(3)) {
            let [capacity, rate, tokens] = triple else {
                return Err(shape);
            };
            let quota = Quota::parse(capacity, rate)?;
            let tokens = parse_tokens(tokens, quota.capacity)?;
            *slot = Some(Limit {
                quota,
                tokens,
                floor: None,
            });
        }

        // The same rules as THROTTLE.TAKE's options: MAXWAIT ms, FLOOR with one value per
        // key, TICKET alone, INFLIGHT n and LEASE ms.
        let mut floors: Option<&[&[u8]]> = None;
        let mut ticket = false;
        let [max_wait, inflight, lease, line, waiter] = read_options(
            options,
            ["MAXWAIT", "INFLIGHT", "LEASE", "LINE", "WAITER"],
            |name, tail| {
                if name.eq_ignore_ascii_case(b"TICKET") {
                    if std::mem::replace(&mut ticket, true) {
                        return Err(ArgError::Repeated("TICKET"));
                    }
                    return Ok(Some(0));
                }
                if !name.eq_ignore_ascii_case(b"FLOOR") {
                    return Ok(None);
                }
                let values = tail.get(..len).ok_or(ArgError::Floors { keys: len })?;
                if floors.replace(values).is_some() {
                    return Err(ArgError::Repeated("FLOOR"));
                }
                Ok(Some(len))
            },
            ArgError::UnknownOption(Command::MTake),
        )?;
        let slot_options = SlotOptions::checked([inflight, lease, line, waiter], floors.is_some())?;
        let max_wait_ms = match max_wait {
            None => 0,
            Some(text) => parse_max_wait(text)?,
        };
        if let Some(values) = floors {
            for (limit, value) in parsed.iter_mut().flatten().zip(values) {
                limit.floor = Some(parse_floor(value, limit.tokens, limit.quota.capacity)?);
            }
        }
        let (inflight, line) = slot_options.values()?;
        let Some(first) = parsed.first().copied().flatten() else {
            return Err(shape);
        };
        let mut all = [first; MAX_KEYS];
        for (slot, limit) in all.iter_mut().zip(parsed.iter().flatten()) {
            *slot = *limit;
        }
        Ok(MTakeArgs {
            len,
            limits: all,
            max_wait_ms,
            ticket,
            inflight,
            line,
        })
    }

    /// The words after the keys: one `capacity rate tokens` triple per key, then MAXWAIT if
    /// it is not 0, FLOOR if any key has one, TICKET, INFLIGHT n LEASE ms, and LINE place_ms
    /// [WAITER id]. (The module's
    /// call has `numkeys` and the keys before them.)
    fn words(&self) -> Vec<Word<'_>> {
        let mut words = Vec::with_capacity(4 * self.len + 8);
        for limit in self.limits() {
            words.extend(limit.quota.words());
            words.push(Word::Number(limit.tokens));
        }
        if self.max_wait_ms > 0 {
            words.extend([Word::Text("MAXWAIT"), Word::Number(self.max_wait_ms)]);
        }
        if self.limits().iter().any(|l| l.floor.is_some()) {
            words.push(Word::Text("FLOOR"));
            words.extend(
                self.limits()
                    .iter()
                    .map(|l| Word::Number(l.floor.unwrap_or(0))),
            );
        }
        if self.ticket {
            words.push(Word::Text("TICKET"));
        }
        slot_words(self.inflight, self.line, &mut words);
        words
    }

    #[inline]
    fn keys(&self) -> usize {
        self.limits().len()
    }

    #[inline]
    fn apply(&self, stored: &[Option<State>], now_ns: i64) -> Result<MOutcome, ArgError> {
        mtake(self, stored, now_ns)
    }

    /// `granted, wait_ms`, then `remaining, reset_ms` per key, then with TICKET one ticket per
    /// key, then with INFLIGHT the slot's id (0: not granted, or the ticket in line), then with
    /// LINE the place in line (0: not in line).
    #[inline]
    fn reply(&self, outcome: &MOutcome) -> Self::Ints {
        let tickets = outcome
            .tickets()
            .take(if self.ticket { outcome.len } else { 0 });
        let mut ints = Ints::new(
            [i64::from(outcome.granted), ceil_ms(outcome.wait_ns)]
                .into_iter()
                .chain(
                    outcome
                        .buckets()
                        .iter()
                        .flat_map(|b| [int(b.remaining), ceil_ms(b.reset_ns)]),
                )
                .chain(tickets),
        );
        // Only a denial says why, last: a granted reply is as it always was.
        SlotTail {
            slot: self.inflight.map(|_| outcome.slot.unwrap_or(0)),
            place: self.line.map(|_| outcome.place),
            refusal: (!outcome.granted).then_some(outcome.refusal),
        }
        .push_onto(&mut ints);
        ints
    }

    /// The reply to this call: two integers per key after the first two, then one ticket per
    /// key if it asked for TICKET, then the slot if it asked for INFLIGHT (its length alone
    /// could be either: one key's 2 + 2 + 1 is 2 + 3).
    fn decode(&self, ints: &[i64]) -> Option<MTakeReply> {
        let [granted, wait_ms, rest @ ..] = ints else {
            return None;
        };
        let granted = flag(*granted)?;
        let keys = self.len;
        if keys == 0 {
            return None;
        }
        let (buckets, rest) = rest.split_at_checked(keys.checked_mul(2)?)?;
        let (tickets, rest) = rest.split_at_checked(if self.ticket { keys } else { 0 })?;
        let tickets = if self.ticket {
            Some(
                tickets
                    .iter()
                    .map(|t| count(*t))
                    .collect::<Option<Vec<_>>>()?,
            )
        } else {
            None
        };
        let SlotTail {
            slot,
            place,
            refusal,
        } = SlotTail::read(rest, self.inflight.is_some(), self.line.is_some(), granted)?;
        let buckets = buckets
            .chunks_exact(2)
            .map(|pair| match pair {
                [remaining, reset] => Some((count(*remaining)?, count(*reset)?)),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        Some(MTakeReply {
            granted,
            wait_ms: count(*wait_ms)?,
            buckets,
            tickets,
            slot,
            place,
            refusal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::words;

    #[test]
    fn shape_keys_and_options() {
        use ArgError::*;
        let mtake = |t: &str| MTakeArgs::parse(&words(t));
        let args = mtake("2 {s}:a {s}:b 10 10 1 25 5 2 MAXWAIT 700").unwrap();
        assert_eq!((args.max_wait_ms, args.ticket), (700, false));
        let limits: Vec<(u64, u64)> = args
            .limits()
            .iter()
            .map(|l| (l.quota.capacity, l.tokens))
            .collect();
        assert_eq!(limits, [(10, 1), (25, 2)]);
        assert_eq!(mtake("1 a 8 9 0").map(|a| a.limits().len()), Ok(1));
        // A floor above 0 may come with MAXWAIT, before or after it.
        for text in [
            "1 a 8 9 1 FLOOR 2 MAXWAIT 5",
            "2 a b 8 9 1 8 9 1 MAXWAIT 5 FLOOR 0 1",
        ] {
            assert_eq!(mtake(text).map(|a| a.max_wait_ms), Ok(5), "{text}");
        }
        // TICKET anywhere among the options, in any case.
        for text in [
            "1 a 8 9 1 TICKET",
            "1 a 8 9 1 ticket MAXWAIT 5",
            "1 a 8 9 1 MAXWAIT 5 Ticket",
            "2 a b 8 9 1 8 9 1 TICKET FLOOR 2 3",
            "2 a b 8 9 1 8 9 1 FLOOR 2 3 TICKET",
        ] {
            assert_eq!(mtake(text).map(|a| a.ticket), Ok(true), "{text}");
        }

        let sixteen = (0..16).map(|i| format!("k{i} ")).collect::<String>();
        let triples = "8 9 1 ".repeat(16);
        assert_eq!(
            mtake(&format!("16 {sixteen} {triples}")).map(|a| a.limits().len()),
            Ok(16)
        );
        for (text, expected) in [
            ("", Arity(Command::MTake)),
            ("0 a 8 9 1", NumKeys),
            ("17 a 8 9 1", NumKeys),
            ("x a 8 9 1", NumKeys),
            ("2 a b 8 9 1", Triples { keys: 2 }),
            ("2 a", Triples { keys: 2 }),
            ("2 a a 8 9 1 8 9 1", DuplicateKey),
            ("2 a b 8 9 1 0 9 1", Capacity),
            ("2 a b 8 9 9 8 9 1", Tokens { capacity: 8 }),
            ("1 a 8 9 1 TOKENS 1", UnknownOption(Command::MTake)),
            ("1 a 8 9 1 TICKET TICKET", Repeated("TICKET")),
            ("1 a 8 9 1 ticket MAXWAIT 1 TICKET", Repeated("TICKET")),
            // TICKET takes no value: what follows it is the next option's name.
            ("1 a 8 9 1 TICKET 1", UnknownOption(Command::MTake)),
            ("1 a 8 9 1 TICKETS", UnknownOption(Command::MTake)),
            ("1 a 8 9 1 TICKET MAXWAIT", MissingValue("MAXWAIT")),
            ("2 a b 8 9 1 8 9 1 TICKET FLOOR 2", Floors { keys: 2 }),
            // Structure before values: a second TICKET wins over a bad MAXWAIT.
            ("1 a 8 9 1 MAXWAIT x TICKET TICKET", Repeated("TICKET")),
            ("2 a b 8 9 1 8 9 1 FLOOR 2", Floors { keys: 2 }),
            ("1 a 8 9 1 FLOOR 2 FLOOR 2", Repeated("FLOOR")),
            ("1 a 8 9 1 FLOOR 8", Floor { capacity: 8 }),
            ("2 a b 8 9 1 4 9 1 FLOOR 2 4", Floor { capacity: 4 }),
            ("1 a 8 9 1 MAXWAIT", MissingValue("MAXWAIT")),
            ("1 a 8 9 1 MAXWAIT 1 MAXWAIT", MissingValue("MAXWAIT")),
            ("1 a 8 9 1 MAXWAIT 1 maxwait 2", Repeated("MAXWAIT")),
            ("1 a 8 9 1 MAXWAIT -1", MaxWait),
        ] {
            assert_eq!(mtake(text), Err(expected), "{text}");
        }
    }

    #[test]
    fn the_words_read_back_as_the_same_call() {
        for text in [
            "2 a b 10 10 1 25 5 2 MAXWAIT 700",
            "2 a b 10 10 1 25 5 2 FLOOR 3 0",
            "2 a b 10 10 1 25 5 2 TICKET MAXWAIT 700",
            "2 a b 10 10 1 25 5 2 ticket FLOOR 3 0",
            "2 a b 10 10 1 25 5 2 FLOOR 3 1 MAXWAIT 700 TICKET",
        ] {
            let args = MTakeArgs::parse(&words(text)).unwrap();
            let mut written = vec!["2".to_owned(), "a".into(), "b".into()];
            written.extend(args.words().into_iter().map(Word::to_text));
            let back: Vec<&[u8]> = written.iter().map(String::as_bytes).collect();
            assert_eq!(MTakeArgs::parse(&back), Ok(args), "{text}");
            let made = MTakeArgs::new(args.limits(), args.max_wait_ms).map(|made| MTakeArgs {
                ticket: args.ticket,
                ..made
            });
            assert_eq!(made, Some(args));
        }
        assert_eq!(MTakeArgs::new(&[], 0), None);
    }

    #[test]
    fn replies_read_back_from_their_integers() {
        let call = |t: &str| MTakeArgs::parse(&words(t)).unwrap();
        let plain = call("2 a b 10 10 1 25 5 2");
        let reply = plain.decode(&[1, 300, 9, 100, 2, 4000]).unwrap();
        assert_eq!(
            reply,
            MTakeReply {
                granted: true,
                wait_ms: 300,
                buckets: vec![(9, 100), (2, 4000)],
                tickets: None,
                slot: None,
                place: None,
                refusal: None,
            }
        );
        let ticket = call("2 a b 10 10 1 25 5 2 TICKET");
        let with_tickets = ticket.decode(&[1, 300, 9, 100, 2, 4000, 17, 0]).unwrap();
        assert_eq!(with_tickets.tickets, Some(vec![17, 0]));
        assert_eq!(with_tickets.buckets, reply.buckets);
        // Each reads only the shape of its own call.
        assert_eq!(plain.decode(&[1, 300, 9, 100, 2, 4000, 17, 0]), None);
        assert_eq!(ticket.decode(&[1, 300, 9, 100, 2, 4000]), None);
        assert_eq!(ticket.decode(&[1, 300, 9, 100, 2, 4000, 17]), None);
        assert_eq!(ticket.decode(&[1, 300, 9, 100, 2, 4000, 17, -1]), None);
        assert_eq!(plain.decode(&[1, 300, 9, 100]), None);
        assert_eq!(call("1 a 8 9 1").decode(&[2, 0, 9, 100]), None);
        assert_eq!(call("1 a 8 9 1").decode(&[1, 0]), None);
        // A denial ends with what held it back, after the tickets and the slot.
        let slotted = call("2 a b 10 10 1 25 5 2 TICKET INFLIGHT 1 LEASE 100");
        let denied = slotted
            .decode(&[0, 300, 9, 100, 2, 4000, 0, 0, 0, 5])
            .unwrap();
        assert_eq!(
            (denied.tickets, denied.slot, denied.refusal),
            (Some(vec![0, 0]), Some(0), Some(Refusal::from_bits(5)))
        );
        // In line: the ticket, then the place, then the reason.
        let line = call("2 a b 10 10 1 25 5 2 INFLIGHT 1 LEASE 100 LINE 500");
        let waiting = line.decode(&[0, 40, 9, 100, 2, 4000, 77, 3, 20]).unwrap();
        assert_eq!(
            (waiting.slot, waiting.place, waiting.refusal),
            (Some(77), Some(3), Some(Refusal::SLOT | Refusal::LINE))
        );
        assert_eq!(line.decode(&[0, 40, 9, 100, 2, 4000, 77]), None);
        assert_eq!(line.decode(&[0, 40, 9, 100, 2, 4000, 77, 3, 20, 1]), None);
        assert_eq!(
            slotted.decode(&[0, 300, 9, 100, 2, 4000, 0, 0, 0, 3, 5]),
            None
        );
        let held = plain.decode(&[0, 300, 9, 100, 2, 4000, 9]).unwrap();
        assert_eq!(held.refusal, Some(Refusal::TOKENS | Refusal::PAUSE));
        assert_eq!(
            plain.decode(&[0, 300, 9, 100, 2, 4000]).unwrap().refusal,
            None
        );
        assert_eq!(
            plain.decode(&[1, 300, 9, 100, 2, 4000, 1]),
            None,
            "a grant says none"
        );
        assert_eq!(plain.decode(&[0, 300, 9, 100, 2, 4000, 1, 1]), None);
        // What the server sends reads back as what the arithmetic decided.
        let outcome = ticket
            .apply(&[None, None], 1_764_547_200_000_000_000)
            .unwrap();
        let ints = ticket.reply(&outcome);
        let back = ticket.decode(ints.as_slice()).unwrap();
        assert_eq!(
            (back.granted, back.buckets),
            (true, vec![(9, 100), (23, 400)])
        );
        assert_eq!(
            SPEC.syntax(),
            "numkeys key [key ...] capacity rate tokens [capacity rate tokens ...] \
             [MAXWAIT maxwait] [FLOOR floor [floor ...]] [TICKET] [INFLIGHT inflight] \
             [LEASE lease] [LINE place_ms] [WAITER waiter_id]"
        );
    }
}
