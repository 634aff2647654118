//! Where a call waits: the one loop every limiter's acquire runs. It asks, reads why a refusal
//! refused ([`Refusal`]), lets the [`Policy`] decide, and sleeps: for a reserved call's tokens
//! to become usable (woken early by a pause heard and confirmed), for the tokens or the floor of
//! a refused one, for its turn or a slot in its limiter's [`Lines`], or out a pause that held
//! the call back. A partitioned limiter's call runs it too, over the partitions it holds in
//! process (no round trip: a refusal is a token not there yet, looked at again at the next one
//! or when the partitions change). It owns the call's deadline, its count of round trips and its
//! wait metrics; each wait is traced with its reason (`RUST_LOG=redis_throttle=trace`). The I/O
//! of a take is the caller's `ask`; the decisions are the policy's (`policy.rs`, pure, beside
//! it), and a cap on calls in flight's lease arithmetic is `in_flight.rs`'s.

pub(crate) mod in_flight;
pub(crate) mod policy;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use throttle_bucket::Refusal as Said;
use tokio::sync::{futures::Notified, Mutex, MutexGuard, Notify};
use tokio::time::Instant;

use crate::engine::metrics::{Event, Metrics};
use crate::engine::waiting::policy::{
    heard_turn_look, line_look, Decision, GiveUp, Policy, Refusal, SlotLooks,
};
use crate::wire::listen::{Ears, Trust};
use crate::wire::reply::TakeReply;
use crate::Error;

/// Something held while a reserved call sleeps until its tokens are usable: dropped with the
/// call's future if it is cancelled, released once the sleep is over.
pub(crate) trait Held {
    /// The sleep is over: the tokens are the caller's to use.
    fn release(self);

    /// Bucket number `bucket` (in the limiter's order) has moved past the take since (a pause
    /// heard): nothing can be given back there, so nothing is asked.
    fn moved(&mut self, _bucket: usize) {}
}

impl Held for () {
    fn release(self) {}
}

/// A pause heard, and confirmed by the server, that covers a reserved call's send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Covered {
    /// When and how the call asks again.
    pub(crate) resume: Resume,
    /// The buckets (by number) whose state the pause moved past the call's take.
    pub(crate) moved: Vec<usize>,
}

/// How a reserved call's sleep ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Slept {
    /// A pause covers its send, if one does.
    pub(crate) covered: Option<Covered>,
    /// The round trips it spent asking the server about what it heard (0 when another call
    /// of the limiter already had).
    pub(crate) trips: u32,
}

/// How a call that a pause held back asks again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Resume {
    /// Until the pause ends, to be slept out before taking again (may be zero: a cut that
    /// re-spaces every reservation made before it).
    pub(crate) rest: Duration,
    /// The lowest rate factor the pause left on the call's buckets, in basis points (10 000:
    /// not cut, or not known): a cut bucket holds only that share of its capacity at once.
    pub(crate) factor_bp: u16,
}

/// How a reserved call learns of a pause set while it sleeps until its tokens are usable: by
/// hearing it announced, or by asking after the sleep.
pub(crate) trait PauseWatch<R> {
    /// Before each take is sent: what the call may count on hearing from then on.
    fn arm(&mut self);

    /// Sleeps until `wake`, when the reservation in `reply` is usable, or less: until a pause
    /// that covers its send is heard and the server confirms it.
    fn sleep(
        &mut self,
        reply: &R,
        wake: Instant,
    ) -> impl Future<Output = Result<Slept, Error>> + Send;

    /// After a whole sleep: how long a pause still runs (and the rate factor), asked of the
    /// server, and in how many round trips; `None` when nothing needs asking (the call would
    /// have heard it, or the limiter does not check).
    fn check(&mut self) -> impl Future<Output = Result<Option<(Resume, u32)>, Error>> + Send;
}

/// The watch of a call that never reserves ahead (a partitioned limiter's: its grants are
/// usable at once), so that no pause can cover a reserved send.
#[derive(Debug)]
pub(crate) struct NoWatch;

impl<R: Sync> PauseWatch<R> for NoWatch {
    fn arm(&mut self) {}

    async fn sleep(&mut self, _reply: &R, wake: Instant) -> Result<Slept, Error> {
        tokio::time::sleep_until(wake).await;
        Ok(Slept::default())
    }

    async fn check(&mut self) -> Result<Option<(Resume, u32)>, Error> {
        Ok(None)
    }
}

/// How long a call keeps its place in the server's line for a slot without looking again:
/// one that listens looks every half of it, and one that died leaves the line at most this
/// long after.
pub(crate) const PLACE: Duration = Duration::from_secs(10);

/// Where a call that takes a slot stands in the server's line, as its next take is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// A take that never waits (`try_acquire`): it does not join the line.
    Outside,
    /// Not in line: the take may join it, if every slot is held.
    First,
    /// In line with this ticket: the take looks again (its place renewed, or its slot found
    /// handed over).
    Look(u64),
    /// Its slot was heard handed over, its tokens there after `wait`: granted, with no take.
    Handed {
        /// The ticket, now the slot's id.
        ticket: u64,
        /// Until its tokens are there, as the hand-off said.
        wait: Duration,
    },
}

/// A granted call: its last reply and what it took.
pub(crate) struct Outcome<R> {
    pub reply: R,
    pub waited: Duration,
    pub slept: Duration,
    pub round_trips: u32,
}

/// Asks (`ask(max_wait_ms)`) until granted, sleeping as the policy says. A reservation is
/// held (`hold(reply)`) for the sleep before its tokens are usable, and `watch` makes sure no
/// pause set meanwhile (by any replica) covers its send: heard while it sleeps, or asked after.
/// If one does, the reservation is dropped (its `Held` gives its tokens back where it can) and
/// the call asks again once the pause is over: together with the limiter's other calls the
/// pause held back where the policy lets it (`rebook(max_wait_ms, resume, at)`, `None`: ask
/// alone), so no call the pause covers reaches the supplier. A call that waits its turn (a
/// bulk call, a partitioned limiter's) first waits for it in `line`, and a refusal for a slot
/// waits for one there, then asks again. The deadline and the wait count from the call's start
/// (`line`'s), its turn included.
pub(crate) async fn run<A, F, B, G, R, H, W>(
    policy: Policy,
    metrics: &Metrics,
    mut ask: A,
    mut rebook: B,
    hold: impl Fn(&R) -> H,
    mut watch: W,
    line: &mut InLine<'_>,
) -> Result<Outcome<R>, Error>
where
    A: FnMut(u64, Place) -> F,
    F: Future<Output = Result<R, Error>>,
    B: FnMut(u64, Resume, Instant) -> G,
    G: Future<Output = Option<R>>,
    R: AsRef<TakeReply>,
    H: Held,
    W: PauseWatch<R>,
{
    let start = line.since;
    // `None`: no deadline an instant can hold (the policy's cap is ten years).
    let until = start.checked_add(policy.deadline());
    if !line.take_turn(until).await {
        let reason = GiveUp::Expired {
            deadline: policy.deadline(),
        };
        return Err(give_up(metrics, reason, start, 0));
    }
    let mut round_trips = 0u32;
    let mut slept = Duration::ZERO;
    // A pause that held the call back: its rest is slept out before asking again.
    let mut after_pause: Option<Resume> = None;
    // Where the next take stands in the server's line for a slot.
    let mut place = Place::First;
    loop {
        let asked_place = std::mem::replace(&mut place, Place::First);
        watch.arm();
        let resume = after_pause.take();
        let asked = start.elapsed() + resume.map_or(Duration::ZERO, |r| r.rest);
        let max_wait_ms = policy.max_wait_ms(asked);
        let mut batched = None;
        if let Some(resume) = resume {
            let at = Instant::now() + resume.rest;
            if policy.rebooks(max_wait_ms) {
                batched = rebook(max_wait_ms, resume, at).await;
            }
            if batched.is_none() {
                trace_wait(Refusal::Pause, resume.rest, round_trips);
                tokio::time::sleep_until(at).await;
            }
        }
        let reply = match batched {
            Some(reply) => reply,
            None => {
                line.arm(policy.takes_slots());
                ask(max_wait_ms, asked_place).await?
            }
        };
        let replied = Instant::now();
        // A call that asked again together with others may have sent nothing of its own.
        let trips = reply.as_ref().round_trips;
        let sent = !matches!(asked_place, Place::Handed { .. });
        round_trips = round_trips.saturating_add(if resume.is_some() || !sent {
            trips
        } else {
            trips.max(1)
        });
        let decision = policy.decide(
            reply.as_ref(),
            max_wait_ms,
            round_trips,
            start.elapsed(),
            fastrand::f64(),
        );
        if !matches!(decision, Decision::WaitForSlot | Decision::WaitInLine) {
            // Out of the line for a slot: granted, or held back by something else.
            line.leave_slot_line();
        }
        // In the server's line only while its reply says so (a grant holds the ticket's slot).
        line.server.stand(reply.as_ref().in_line);
        match decision {
            Decision::Done => {}
            Decision::SleepThenDone(pause) => {
                let mut held = hold(&reply);
                let asleep = Instant::now();
                let Slept {
                    covered: heard,
                    trips,
                } = watch.sleep(&reply, asleep + pause).await?;
                round_trips = round_trips.saturating_add(trips);
                // What the call asked to sleep (the timer's lateness is the machine's), or what
                // it slept until a pause woke it.
                slept += if heard.is_some() {
                    asleep.elapsed()
                } else {
                    pause
                };
                let covered = match heard {
                    Some(Covered { resume, moved }) => {
                        metrics.event(Event::HeardPause);
                        for bucket in moved {
                            held.moved(bucket);
                        }
                        Some(resume)
                    }
                    None => match watch.check().await? {
                        Some((resume, trips)) => {
                            round_trips = round_trips.saturating_add(trips);
                            (!resume.rest.is_zero()).then_some(resume)
                        }
                        None => None,
                    },
                };
                if let Some(resume) = covered {
                    metrics.held_by_pause();
                    // The pause is the server's word: one that outlasts the deadline fails
                    // the call now (its tokens go back as it is dropped), not at its end.
                    if let Some(reason) = policy.after_pause(resume.rest, start.elapsed()) {
                        drop(held);
                        return Err(give_up(metrics, reason, start, round_trips));
                    }
                    tracing::debug!(
                        rest = ?resume.rest,
                        "a pause covers the reserved call; acquiring again after it"
                    );
                    drop(held);
                    after_pause = Some(resume);
                    slept += resume.rest;
                    continue;
                }
                held.release();
            }
            Decision::SleepThenRetry(pause) => {
                let reason = if policy.is_floored() {
                    metrics.held_by_floor();
                    Refusal::Floor
                } else {
                    Refusal::Tokens
                };
                trace_wait(reason, pause, round_trips);
                line.sleep(pause).await;
                slept += pause;
                continue;
            }
            Decision::WaitForSlot => {
                let wait = reply.as_ref().wait;
                if !line.in_slot_line() {
                    metrics.waited_for_slot();
                }
                trace_wait(Refusal::Slot, wait, round_trips);
                if line.wait_for_slot(wait, replied, until).await {
                    continue;
                }
                // Still behind another waiter at the deadline.
                let reason = GiveUp::Deadline {
                    needed: wait,
                    deadline: policy.deadline(),
                };
                return Err(give_up(metrics, reason, start, round_trips));
            }
            Decision::WaitInLine => {
                let wait = reply.as_ref().wait;
                // The server knows the line's pace: its wait is the call's turn.
                let turn = reply
                    .as_ref()
                    .said
                    .is_some_and(|said| said.contains(Said::TURN));
                let Some((ticket, place_now)) = reply.as_ref().in_line else {
                    return Err(give_up(
                        metrics,
                        GiveUp::Attempts(round_trips),
                        start,
                        round_trips,
                    ));
                };
                if matches!(asked_place, Place::First) {
                    metrics.joined_line();
                    line.server.joined = Some((replied, place_now));
                }
                trace_wait(Refusal::Line, wait, round_trips);
                match line
                    .wait_in_line(ticket, place_now, wait, turn, replied, until)
                    .await
                {
                    Some(next) => {
                        if matches!(next, Place::Handed { .. }) {
                            metrics.heard_handed();
                            line.server.stand(None);
                        }
                        place = next;
                        continue;
                    }
                    // Still in line at the deadline: its place lapses with its lease.
                    None => {
                        let reason = GiveUp::Deadline {
                            needed: wait,
                            deadline: policy.deadline(),
                        };
                        return Err(give_up(metrics, reason, start, round_trips));
                    }
                }
            }
            Decision::GiveUp(reason) => {
                return Err(give_up(metrics, reason, start, round_trips));
            }
        }
        let waited = start.elapsed();
        metrics.granted(waited);
        record(waited, round_trips, "granted");
        return Ok(Outcome {
            reply,
            waited,
            slept,
            round_trips,
        });
    }
}

/// Says why the call waits next, and how long (for a slot: at most).
fn trace_wait(reason: Refusal, wait: Duration, round_trips: u32) {
    tracing::trace!(?reason, ?wait, round_trips, "waiting");
}

/// Where the calls of a limiter and its clones wait their turn in process, first come first
/// served: the bulk calls for theirs (interactive calls never wait for it), and the calls
/// waiting for a slot, of which one at a time looks again (the others wait behind it, in
/// order), woken at once by a slot this process releases.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    freed: Notify,
    slot: Mutex<()>,
    bulk: Mutex<()>,
    /// The process's calls in the server's line that cannot hear a hand-off, and what wakes
    /// the first of them to look when the process releases a slot (the server may have handed
    /// it to that call).
    deaf_in_line: AtomicUsize,
    released_here: Notify,
}

impl Lines {
    /// A slot of this process was released: its waiters look again at once, and the first of
    /// its calls in the server's line that cannot hear the hand-off looks.
    pub(crate) fn freed(&self) {
        self.freed.notify_waiters();
        if self.deaf_in_line.load(Relaxed) > 0 {
            self.released_here.notify_one();
        }
    }
}

/// Counts a call in the server's line that cannot hear its hand-off, while it waits.
struct Deaf<'a>(&'a AtomicUsize);

impl<'a> Deaf<'a> {
    fn new(count: &'a AtomicUsize) -> Deaf<'a> {
        count.fetch_add(1, Relaxed);
        Deaf(count)
    }
}

impl Drop for Deaf<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// One call's places in its limiter's lines, from its start: the turn it holds through its
/// grant (a bulk call's, a partitioned limiter's call's), what wakes it early when refused (a
/// partitioned limiter's partitions changed), and its wait for a slot, from its first refusal
/// for one to its grant: its place in the line, what wakes it (a slot this process releases,
/// a release of the fleet heard where the limiter listens, a look on a timer) and when it
/// looks again ([`SlotLooks`], the policy's). The bucket limiters' calls wait here, and so
/// does a partitioned limiter's, for its tokens and for its slot (which a limiter of one
/// bucket keeps).
pub(crate) struct InLine<'a> {
    /// When the call began: its deadline and its wait count from here.
    since: Instant,
    /// Where it waits for its turn, if it waits for one.
    turn_line: Option<&'a Mutex<()>>,
    /// Its turn, held until the call ends.
    turn_held: Option<MutexGuard<'a, ()>>,
    /// What wakes it early from a refusal, armed before each take.
    changed: Option<(&'a Notify, Option<Pin<Box<Notified<'a>>>>)>,
    /// The bucket limiter's lines, for its slot.
    lines: Option<&'a Lines>,
    ears: Option<&'a Ears>,
    /// Listening since before the last take: a slot freed while it is under way still wakes
    /// the call, whether this process freed it or the fleet's announcement of it comes in
    /// before the take's reply does.
    freed: Option<Pin<Box<Notified<'a>>>>,
    /// What the call could count on hearing when the take was sent, and the releases heard
    /// by then.
    hearing: Option<(Trust, u64)>,
    /// Its turn in the slot line, once it has waited for one.
    slot_turn: Option<MutexGuard<'a, ()>>,
    looks: SlotLooks,
    /// The last wake was a release heard: if the take after it found no slot, the next such
    /// wake counts only later.
    woken_by_freed: bool,
    /// Where it stands in the server's line for a slot.
    server: ServerPlace<'a>,
}

/// A call's ticket while it stands in the server's line for a slot, counted in its
/// limiter's metrics (`in_line`, `last_place`) while it does, and how it leaves: if the call
/// ends there (gives up, or its future is dropped), its ticket is taken out of the line, so
/// that it is not handed a slot nobody will use.
#[derive(Default)]
struct ServerPlace<'a> {
    ticket: Option<u64>,
    /// When it joined the line, and its place then.
    joined: Option<(Instant, u64)>,
    leave: Option<Box<dyn Fn(u64) + Send + Sync + 'a>>,
    metrics: Option<&'a Metrics>,
}

impl ServerPlace<'_> {
    /// In line with `(ticket, place)`, as the last reply said, or out of it (`None`: granted,
    /// handed its slot, or refused for something else).
    fn stand(&mut self, in_line: Option<(u64, u64)>) {
        if let Some(metrics) = self.metrics {
            if let Some((_, place)) = in_line {
                metrics.placed(place);
            }
            if self.ticket.is_some() != in_line.is_some() {
                metrics.in_line(in_line.is_some());
            }
        }
        self.ticket = in_line.map(|(ticket, _)| ticket);
    }
}

impl Drop for ServerPlace<'_> {
    fn drop(&mut self) {
        if let (Some(ticket), Some(leave)) = (self.ticket, self.leave.as_ref()) {
            leave(ticket);
        }
        self.stand(None);
    }
}

impl<'a> InLine<'a> {
    /// A call starting now of the bucket limiter whose lines are `lines`, hearing the fleet's
    /// releases on `ears` where it listens. A bulk call (`bulk`) waits its turn: the bulk calls
    /// of a limiter and its clones take turns, each holding it through its reservation's
    /// sleep, so that they do not wake together to the same tokens, and a limiter has one bulk
    /// reservation under the floor at a time.
    pub(crate) fn new(lines: &'a Lines, ears: Option<&'a Ears>, bulk: bool) -> InLine<'a> {
        InLine {
            turn_line: bulk.then_some(&lines.bulk),
            lines: Some(lines),
            ears,
            ..InLine::started(Instant::now())
        }
    }

    /// A call of a partitioned limiter that began `since`: it waits its turn in `turn`, and a
    /// refusal is looked at again when `changed` says the partitions changed.
    pub(crate) fn partitioned(
        since: Instant,
        turn: &'a Mutex<()>,
        changed: &'a Notify,
    ) -> InLine<'a> {
        InLine {
            turn_line: Some(turn),
            changed: Some((changed, None)),
            ..InLine::started(since)
        }
    }

    fn started(since: Instant) -> InLine<'a> {
        InLine {
            since,
            turn_line: None,
            turn_held: None,
            changed: None,
            lines: None,
            ears: None,
            freed: None,
            hearing: None,
            slot_turn: None,
            looks: SlotLooks::default(),
            woken_by_freed: false,
            server: ServerPlace::default(),
        }
    }

    /// The call takes its ticket out of the server's line with `leave` if it ends there, and
    /// is counted in `metrics` while it stands there.
    pub(crate) fn leaving(
        mut self,
        leave: impl Fn(u64) + Send + Sync + 'a,
        metrics: &'a Metrics,
    ) -> InLine<'a> {
        self.server.leave = Some(Box::new(leave));
        self.server.metrics = Some(metrics);
        self
    }

    /// Waits for the call's turn, if it takes one, until `until`: false past it.
    async fn take_turn(&mut self, until: Option<Instant>) -> bool {
        let Some(line) = self.turn_line else {
            return true;
        };
        let turn = match until {
            None => line.lock().await,
            Some(at) => match tokio::time::timeout_at(at, line.lock()).await {
                Ok(turn) => turn,
                Err(_) => return false,
            },
        };
        self.turn_held = Some(turn);
        true
    }

    /// Before each take: listening from then on for what may end the wait after a refusal
    /// early, a slot freed (when the refusal may be for a slot) or the partitions changed.
    fn arm(&mut self, for_slot: bool) {
        if let Some((changed, armed)) = self.changed.as_mut() {
            let changed: &'a Notify = changed;
            let mut notified = Box::pin(changed.notified());
            notified.as_mut().enable();
            *armed = Some(notified);
        }
        let Some(lines) = self.lines.filter(|_| for_slot) else {
            return;
        };
        let mut freed = Box::pin(lines.freed.notified());
        freed.as_mut().enable();
        self.freed = Some(freed);
        self.hearing = self
            .ears
            .and_then(|ears| Some((ears.trust()?, ears.freed_seen())));
    }

    /// Sleeps `pause` after a refusal, or less: until what the last take armed says changed.
    async fn sleep(&mut self, pause: Duration) {
        let changed = async {
            match self.changed.as_mut().and_then(|(_, armed)| armed.as_mut()) {
                Some(armed) => armed.as_mut().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = changed => {}
        }
    }

    /// Whether the call has its turn in the slot line.
    fn in_slot_line(&self) -> bool {
        self.slot_turn.is_some()
    }

    /// The call is out of the slot line: granted, or refused for something else.
    fn leave_slot_line(&mut self) {
        self.freed = None;
        self.hearing = None;
        self.slot_turn = None;
        self.looks = SlotLooks::default();
        self.woken_by_freed = false;
    }

    /// At `place` in the server's line with `ticket` after a take `replied`, whose reply said
    /// to look again after `wait` at the latest (its `turn`: when the line's pace says the
    /// call's turn comes): until the hand-off of its slot is heard, or the look is due. A call
    /// that can count on hearing the hand-off, or that was told its turn, looks when the
    /// server says; one that cannot looks when its progress in line says its turn comes
    /// ([`line_look`]). `None`: the deadline `until` came first.
    async fn wait_in_line(
        &mut self,
        ticket: u64,
        place: u64,
        wait: Duration,
        turn: bool,
        replied: Instant,
        until: Option<Instant>,
    ) -> Option<Place> {
        let heard = self
            .ears
            .zip(self.hearing)
            .filter(|(ears, (trust, _))| ears.kept(*trust));
        let look = match (heard, self.server.joined) {
            (None, Some((at, first))) => {
                line_look(wait, turn, replied.duration_since(at), first, place)
            }
            (Some(_), _) if turn => heard_turn_look(wait),
            _ => wait,
        };
        let look = replied + look.max(Duration::from_millis(1));
        let deadline_first = until.is_some_and(|at| at <= look);
        let wake = until.map_or(look, |at| look.min(at));
        // Deaf to the hand-off and not told its turn: a release in this process wakes the
        // first such call to look (a call told its turn would only look early).
        let deaf = self
            .lines
            .filter(|_| heard.is_none() && !turn)
            .map(|lines| (Deaf::new(&lines.deaf_in_line), &lines.released_here));
        let released_here = async {
            match &deaf {
                Some((_, released)) => released.notified().await,
                None => std::future::pending().await,
            }
        };
        let hear = async {
            match heard {
                Some((ears, (trust, _))) => tokio::select! {
                    wait = ears.handed(ticket) => Some(wait),
                    () = ears.lost(trust) => None,
                },
                None => None,
            }
        };
        tokio::select! {
            Some(wait) = hear => Some(Place::Handed { ticket, wait }),
            () = released_here => Some(Place::Look(ticket)),
            () = tokio::time::sleep_until(wake) => (!deadline_first).then_some(Place::Look(ticket)),
        }
    }

    /// After a take `replied` refused for want of a slot, naming `wait`: in line behind this
    /// process's other waiters, then until a slot is freed here, a release is heard, or the
    /// next look, never past `until`. False: the call was still in line at `until`.
    async fn wait_for_slot(
        &mut self,
        wait: Duration,
        replied: Instant,
        until: Option<Instant>,
    ) -> bool {
        if self.woken_by_freed {
            self.looks.futile_wake();
        }
        let Some(lines) = self.lines else {
            return false;
        };
        if self.slot_turn.is_none() {
            // Behind another waiter: when its turn comes, the wait below ends at once if a
            // slot was freed since this take (or a look is due), and not otherwise.
            let turn = match (lines.slot.try_lock(), until) {
                (Ok(turn), _) => turn,
                (Err(_), None) => lines.slot.lock().await,
                (Err(_), Some(at)) => match tokio::time::timeout_at(at, lines.slot.lock()).await {
                    Ok(turn) => turn,
                    Err(_) => return false,
                },
            };
            self.slot_turn = Some(turn);
        }
        // Heard from since before the take: a release anywhere wakes the call, and it looks
        // again on its own only when a lease may have run out. Otherwise it polls.
        let heard = self
            .ears
            .zip(self.hearing)
            .filter(|(ears, (trust, _))| ears.kept(*trust));
        let look = self.looks.next(wait, heard.is_some());
        let wake = replied + look;
        let wake = until.map_or(wake, |at| wake.min(at));
        let not_before = replied + self.looks.not_before();
        let hear = async {
            match heard {
                Some((ears, (trust, seen))) => tokio::select! {
                    () = async {
                        tokio::time::sleep_until(not_before).await;
                        ears.freed_since(seen).await;
                    } => true,
                    () = ears.lost(trust) => false,
                },
                None => std::future::pending().await,
            }
        };
        let freed = async {
            match self.freed.as_mut() {
                Some(freed) => freed.as_mut().await,
                None => std::future::pending().await,
            }
        };
        self.woken_by_freed = tokio::select! {
            () = freed => false,
            by_freed = hear => by_freed,
            () = tokio::time::sleep_until(wake) => false,
        };
        true
    }
}

/// A call that stops without its tokens: counted, recorded, and the error that says why.
fn give_up(metrics: &Metrics, reason: GiveUp, start: Instant, round_trips: u32) -> Error {
    metrics.gave_up();
    let waited = start.elapsed();
    record(waited, round_trips, "gave_up");
    match reason {
        GiveUp::Deadline { needed, deadline } => Error::DeadlineExceeded {
            needed: Some(needed),
            deadline,
            paused: false,
        },
        GiveUp::Paused { rest, deadline } => Error::DeadlineExceeded {
            needed: Some(rest),
            deadline,
            paused: true,
        },
        GiveUp::Expired { deadline } => Error::DeadlineExceeded {
            needed: None,
            deadline,
            paused: false,
        },
        GiveUp::Attempts(attempts) => Error::GaveUp { attempts, waited },
    }
}

/// Records a call's result on the current span.
pub(crate) fn record(waited: Duration, round_trips: u32, outcome: &'static str) {
    let span = tracing::Span::current();
    span.record("waited", tracing::field::debug(waited));
    span.record("round_trips", round_trips);
    span.record("outcome", outcome);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bulk_callers_wait_their_turn_within_their_deadline() {
        let lines = Lines::default();
        let mut first = InLine::new(&lines, None, true);
        assert!(
            first
                .take_turn(Some(Instant::now() + Duration::from_secs(1)))
                .await
        );
        let mut late = InLine::new(&lines, None, true);
        let in_10_ms = Instant::now() + Duration::from_millis(10);
        assert!(!late.take_turn(Some(in_10_ms)).await);
        assert_eq!(late.since.elapsed(), Duration::from_millis(10));
        let mut interactive = InLine::new(&lines, None, false);
        assert!(interactive.take_turn(None).await, "never waits for it");
        let waiting = async {
            let mut second = InLine::new(&lines, None, true);
            assert!(second.take_turn(None).await);
            second.since.elapsed()
        };
        let release = async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(first);
        };
        let (waited, ()) = tokio::join!(waiting, release);
        assert_eq!(
            waited,
            Duration::from_millis(30),
            "in line until the first let go"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_call_sleeps_until_what_it_armed_for_changes() {
        let (turn, changed) = (Mutex::new(()), Notify::new());
        let mut line = InLine::partitioned(Instant::now(), &turn, &changed);
        line.arm(false);
        changed.notify_one();
        let asleep = Instant::now();
        line.sleep(Duration::from_secs(1)).await;
        assert_eq!(
            asleep.elapsed(),
            Duration::ZERO,
            "a change since the take wakes it"
        );
        line.arm(false);
        line.sleep(Duration::from_millis(40)).await;
        assert_eq!(asleep.elapsed(), Duration::from_millis(40));
    }
}
