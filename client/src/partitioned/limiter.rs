//! The partitioned limiter: spends the partitions this process leases, in process, with no
//! round trip per call. The leases themselves are kept by a background task (`keeper`), with
//! which it shares only the `core`.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionLike;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::core::{Core, LeaseEvent, Observer, State};
use super::keeper;
use super::lease::ReplicaAcks;
use super::metrics::Counters;
use super::plan::{Rules, Timing};
use super::quota::PartitionedQuota;
use super::share::Take;
use crate::engine::metrics::Metrics;
use crate::engine::waiting::policy::Policy;
use crate::engine::waiting::{self, InLine, NoWatch};
use crate::report::ReportedKey;
use crate::vocabulary::grant::Receipt;
use crate::wire::reply::TakeReply;
use crate::{Demand, Error, Grant, Limiter, Priority, QuotaError, Throttle as _, TryAcquire};

mod throttle;

/// How long a caller with nothing to wait for (no partition held) sleeps before looking again,
/// unless a lease arrives first.
const NO_LEASE_PAUSE: Duration = Duration::from_millis(100);

/// What a `try_acquire` that found every slot held says to wait: a slot's release is not
/// known in advance (the first lease's end is only the latest it comes).
const NO_SLOT_PAUSE: Duration = Duration::from_millis(10);

/// Spends a [`PartitionedQuota`] locally: the partitions this process leases, each a GCRA in
/// process. See the [module](super) for the guarantees.
///
/// Cloning is cheap and the clones share the leases. When the last clone is dropped, or at
/// [`PartitionedLimiter::shutdown`], the leases are released (a process that dies lets them
/// expire instead).
pub struct PartitionedLimiter<C> {
    inner: Arc<Handle>,
    conn: C,
    /// With a cap on calls in flight: the limiter that keeps the fleet's slots, in one
    /// bucket of their own (it takes no tokens there).
    slots: Option<Limiter<C>>,
}

impl<C: Clone> Clone for PartitionedLimiter<C> {
    fn clone(&self) -> Self {
        PartitionedLimiter {
            inner: Arc::clone(&self.inner),
            conn: self.conn.clone(),
            slots: self.slots.clone(),
        }
    }
}

impl<C> fmt::Debug for PartitionedLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let core = &self.inner.core;
        f.debug_struct("PartitionedLimiter")
            .field("name", &core.name)
            .field("quota", &core.quota)
            .field("owner", &core.owner)
            .field("held", &core.state().shares.len())
            .finish_non_exhaustive()
    }
}

/// Stops the keeper when the last clone goes.
struct Handle {
    core: Arc<Core>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// Configures a [`PartitionedLimiter`]; from [`PartitionedLimiter::builder`].
#[derive(Clone)]
pub struct PartitionedLimiterBuilder {
    quota: PartitionedQuota,
    name: Option<String>,
    acks: ReplicaAcks,
    wait_timeout: Duration,
    clock_rate_margin: f64,
    fixed_margin: Duration,
    renew_after: Option<Duration>,
    grow_after: Option<Duration>,
    idle_after: Option<Duration>,
    max_held: Option<u32>,
    observer: Option<Observer>,
    max_wait: Duration,
    announcements: crate::wire::listen::Listening,
    report: Option<crate::report::FleetReport>,
    max_in_flight: Option<u64>,
    slot_lease: Duration,
    backend: crate::Backend,
}

impl fmt::Debug for PartitionedLimiterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionedLimiterBuilder")
            .field("quota", &self.quota)
            .field("acks", &self.acks)
            .finish_non_exhaustive()
    }
}

impl PartitionedLimiterBuilder {
    /// How long a call waits unless its [`Demand`](crate::Demand) says (default
    /// [`DEFAULT_MAX_WAIT`](crate::DEFAULT_MAX_WAIT), a minute), as
    /// [`LimiterBuilder::max_wait`](crate::LimiterBuilder::max_wait) says.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// The name in logs (default: the quota's name).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Replica acknowledgements a lease write needs before it is spent (default
    /// [`ReplicaAcks::Auto`]: one where the key's master has replicas).
    pub fn replica_acks(mut self, acks: ReplicaAcks) -> Self {
        self.acks = acks;
        self
    }

    /// How long a lease write waits for its replicas (`WAIT`'s timeout; default 100 ms).
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = timeout;
        self
    }

    /// The fraction of each lease not spent, for a local clock that runs slower than the
    /// servers' (default 0.01).
    pub fn clock_rate_margin(mut self, fraction: f64) -> Self {
        self.clock_rate_margin = fraction;
        self
    }

    /// Time taken off every lease for the servers' ms clocks and clock offsets between a
    /// master and its replicas (default 10 ms; add the largest offset between your nodes).
    pub fn fixed_margin(mut self, margin: Duration) -> Self {
        self.fixed_margin = margin;
        self
    }

    /// Renew a lease this long after its last confirmation (default a third of the lease).
    pub fn renew_after(mut self, after: Duration) -> Self {
        self.renew_after = Some(after);
        self
    }

    /// Lease another partition once a call has waited this long (default one partition's
    /// token interval, at least 5 ms).
    pub fn grow_after(mut self, after: Duration) -> Self {
        self.grow_after = Some(after);
        self
    }

    /// Give up a partition unused this long while no call waits (default the lease).
    pub fn idle_after(mut self, after: Duration) -> Self {
        self.idle_after = Some(after);
        self
    }

    /// Hold at most this many partitions (default all).
    pub fn max_held(mut self, partitions: u32) -> Self {
        self.max_held = Some(partitions);
        self
    }

    /// Calls `observer` on every change to this process's leases (from the keeper task:
    /// keep it quick).
    pub fn on_lease(mut self, observer: impl Fn(&LeaseEvent) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Hears the fleet's pauses on `announcements`' subscription (one per process, shared with
    /// the other limiters): a pause another process sets (a 429 it was answered) stops this one
    /// within a round trip, not at its next renewal round (a third of a lease later). While the
    /// subscription is down the renewal round still reads the pause. Redis Cluster: the
    /// announcement is heard only where the quota's name hashes to the node `announcements`
    /// names; elsewhere the renewal round reads it.
    pub fn listen(mut self, announcements: &crate::Announcements) -> Self {
        self.announcements = crate::wire::listen::Listening::On(announcements.clone());
        self
    }

    /// Does not listen, even over [`connect`](crate::connect)'s connection (which a limiter
    /// otherwise listens with): the fleet's pauses are read at the renewal rounds.
    pub fn without_listening(mut self) -> Self {
        self.announcements = crate::wire::listen::Listening::Off;
        self
    }

    /// Caps the calls in flight across the fleet at `n` (1 to 1024), beside the rate, as
    /// [`LimiterBuilder::max_in_flight`](crate::LimiterBuilder::max_in_flight) does for one
    /// bucket: each grant also holds one of `n` slots until it is dropped (renewed every third
    /// of [`slot_lease`](Self::slot_lease), released when dropped, freed by its lease when its
    /// process dies). The slots live in one bucket of their own, `{name}:inflight` (no tokens
    /// are taken there), so a capped call costs one `THROTTLE.TAKE ... TOKENS 0 INFLIGHT n` (and
    /// a release after it) where an uncapped one makes no round trip: the call takes its slot
    /// first, waiting for one as a capped `Limiter` does (hearing releases where the limiter
    /// [listens](Self::listen)), then its tokens in process, holding the slot meanwhile; so the
    /// calls start no faster than the quota and never more than `n` at once. Every process on
    /// the quota must give the same `n`. Checked in [`build`](Self::build).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redis_throttle::partitioned::{PartitionedLimiter, PartitionedQuota};
    /// use redis_throttle::Quota;
    ///
    /// // 2 000 calls a second over 20 partitions, at most 64 open at once across the fleet.
    /// let quota = PartitionedQuota::builder("quota:llm", Quota::new(200, 2_000u64)?).partitions(20).build()?;
    /// let builder = PartitionedLimiter::builder(quota)
    ///     .max_in_flight(64)
    ///     .slot_lease(Duration::from_secs(5));
    /// # let _ = builder;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_in_flight(mut self, n: u64) -> Self {
        self.max_in_flight = Some(n);
        self
    }

    /// How long a slot stays held without a renewal (default
    /// [`DEFAULT_LEASE`](crate::DEFAULT_LEASE), at least [`MIN_LEASE`](crate::MIN_LEASE)), as
    /// [`LimiterBuilder::slot_lease`](crate::LimiterBuilder::slot_lease) says. Used with
    /// [`max_in_flight`](Self::max_in_flight) only.
    pub fn slot_lease(mut self, lease: Duration) -> Self {
        self.slot_lease = lease;
        self
    }

    /// How the cap's slots are taken (default [`Backend::Auto`](crate::Backend::Auto): the
    /// module where it is loaded, else the function library, else the script), as
    /// [`LimiterBuilder::backend`](crate::LimiterBuilder::backend) says. The leases need none
    /// of them. Used with [`max_in_flight`](Self::max_in_flight) only.
    pub fn backend(mut self, backend: crate::Backend) -> Self {
        self.backend = backend;
        self
    }

    /// Reports the limiter's counters to Redis through `fleet`, under the quota's name, for the
    /// operator's view; off the call path.
    pub fn report(mut self, fleet: &crate::report::FleetReport) -> Self {
        self.report = Some(fleet.clone());
        self
    }

    /// Builds the limiter over `conn` and starts the task that keeps its leases (inside the
    /// current tokio runtime). The reserved partitions are leased at once, in the
    /// background; calls wait for them. Fails with [`Error::InvalidQuota`] if a cap on calls
    /// in flight or its lease is out of range.
    pub fn build<C>(self, conn: C) -> Result<PartitionedLimiter<C>, Error>
    where
        C: ConnectionLike + Clone + Send + Sync + 'static,
    {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let quota = self.quota;
        let ns = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        let lease = quota.lease();
        let timing = Timing {
            lease_ns: ns(lease),
            clock_rate_margin: self.clock_rate_margin,
            fixed_margin_ns: ns(self.fixed_margin),
            renew_after_ns: ns(self.renew_after.unwrap_or(lease / 3)),
        };
        timing
            .check(self.wait_timeout)
            .map_err(|problem| Error::Config {
                problem: format!("partitioned limiter: {problem}"),
            })?;
        let max_held = self.max_held.unwrap_or(quota.partitions());
        if max_held == 0 || max_held > quota.partitions() || max_held < quota.reserved() {
            return Err(Error::Config {
                problem: format!(
                    "partitioned limiter: max_held {max_held} must be from the reserved partitions ({}) to the \
                     partitions ({}), and at least 1",
                    quota.reserved(),
                    quota.partitions()
                ),
            });
        }
        let grow_after = self
            .grow_after
            .unwrap_or_else(|| quota.share_interval().max(Duration::from_millis(5)));
        let rules = Rules {
            reserved: quota.reserved() as usize,
            max_held: max_held as usize,
            grow_after_ns: ns(grow_after),
            idle_after_ns: ns(self.idle_after.unwrap_or(lease)),
            yield_cooldown_ns: ns(lease * 2),
        };
        let owner = format!("{:016x}-{}", fastrand::u64(..), std::process::id());
        let name = self.name.unwrap_or_else(|| quota.name().to_owned());
        let announcements = self.announcements.resolve(&conn);
        let ears = announcements.as_ref().map(|announcements| {
            announcements.ears_on(vec![super::wire::pause_channel(quota.name()).into_bytes()])
        });
        let slots = match self.max_in_flight {
            None => None,
            Some(cap) => {
                let builder =
                    Limiter::builder(super::wire::slots_key(quota.name()), quota.total().clone())
                        .name(format!("{name} (calls in flight)"))
                        .max_wait(self.max_wait)
                        .backend(self.backend)
                        .max_in_flight(cap)
                        .slot_lease(self.slot_lease);
                let builder = match &announcements {
                    Some(announcements) => builder.listen(announcements),
                    None => builder.without_listening(),
                };
                Some(builder.build(conn.clone())?)
            }
        };
        let core = Arc::new(Core {
            share: quota.share(),
            metrics: Metrics::new(&name),
            name,
            quota,
            owner,
            origin: Instant::now(),
            timing,
            rules,
            acks: self.acks,
            wait_timeout: self.wait_timeout,
            state: Mutex::new(State::default()),
            turn: tokio::sync::Mutex::new(()),
            changed: Notify::new(),
            demand: Notify::new(),
            waiters: AtomicUsize::new(0),
            turn_since: AtomicI64::new(-1),
            counters: Counters::default(),
            stopped: AtomicBool::new(false),
            observer: self.observer,
            max_wait: self.max_wait,
            ears,
            slots: slots.as_ref().map(Limiter::reported),
        });
        if let Some(fleet) = &self.report {
            let weak = Arc::downgrade(&core);
            let total = core.quota.total();
            let bucket = ReportedKey {
                key: core.quota.name().to_owned(),
                capacity: total.capacity(),
                rate: total.rate().as_str().to_owned(),
                max_in_flight: self.max_in_flight,
                max_wait: self.max_wait,
            };
            fleet.watch(vec![bucket], weak);
        }
        let (stop, stopped) = watch::channel(false);
        let task = runtime.spawn(keeper::run(Arc::clone(&core), conn.clone(), stopped));
        Ok(PartitionedLimiter {
            inner: Arc::new(Handle {
                core,
                stop,
                task: Mutex::new(Some(task)),
            }),
            conn,
            slots,
        })
    }
}

impl PartitionedLimiter<()> {
    /// A builder for a limiter on `quota`; the connection comes last, in
    /// [`PartitionedLimiterBuilder::build`].
    pub fn builder(quota: PartitionedQuota) -> PartitionedLimiterBuilder {
        PartitionedLimiterBuilder {
            quota,
            name: None,
            acks: ReplicaAcks::default(),
            wait_timeout: Duration::from_millis(100),
            clock_rate_margin: 0.01,
            fixed_margin: Duration::from_millis(10),
            renew_after: None,
            grow_after: None,
            idle_after: None,
            max_held: None,
            observer: None,
            max_wait: crate::DEFAULT_MAX_WAIT,
            announcements: crate::wire::listen::Listening::default(),
            report: None,
            max_in_flight: None,
            slot_lease: crate::DEFAULT_LEASE,
            backend: crate::Backend::Auto,
        }
    }
}

impl<C> PartitionedLimiter<C> {
    /// The quota.
    pub fn quota(&self) -> &PartitionedQuota {
        &self.inner.core.quota
    }

    /// The token this process's leases carry (random, with the pid).
    pub fn owner(&self) -> &str {
        &self.inner.core.owner
    }

    /// The partitions held now.
    pub fn held(&self) -> Vec<u32> {
        let mut held = self.inner.core.held();
        held.sort_unstable();
        held
    }

    /// Releases every lease and stops the keeper; later calls fail with
    /// [`Error::Stopped`]. Waits for the releases (each a round trip).
    pub async fn shutdown(&self) -> Result<(), Error> {
        self.inner.stop.send_replace(true);
        let task = self
            .inner
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            task.await.map_err(|e| Error::Config {
                problem: format!("the lease task failed: {e}"),
            })?;
        }
        Ok(())
    }

    /// A bulk call's floor in one partition: the floor's part of the partition, rounded up,
    /// at most what the partition can keep beside the call.
    fn floor(&self, tokens: u64, priority: Priority) -> Option<u64> {
        let Priority::Bulk { floor } = priority else {
            return None;
        };
        let core = &self.inner.core;
        let share = core.share.capacity;
        let total = core.quota.total().capacity().max(1);
        let scaled = u128::from(floor)
            .saturating_mul(u128::from(share))
            .div_ceil(u128::from(total));
        let scaled = u64::try_from(scaled).unwrap_or(u64::MAX);
        Some(scaled.min(share.saturating_sub(tokens))).filter(|f| *f > 0)
    }

    fn check(&self, tokens: u64) -> Result<(), Error> {
        let core = &self.inner.core;
        if core.stopped.load(Relaxed) {
            return Err(Error::Stopped);
        }
        if tokens > core.share.capacity {
            core.metrics.error();
            return Err(Error::InvalidQuota(QuotaError::PartitionTokens {
                tokens,
                capacity: core.share.capacity,
            }));
        }
        Ok(())
    }

    fn take(&self, tokens: u64, floor: Option<u64>) -> Take {
        let core = &self.inner.core;
        if tokens == 0 {
            return Take::Granted {
                index: 0,
                tat_ns: 0,
                remaining: 0,
            };
        }
        let now = core.now_ns();
        core.state().shares.take(&core.share, tokens, floor, now)
    }

    fn granted(
        &self,
        tokens: u64,
        partition: u32,
        tat_ns: i64,
        remaining: u64,
        start: Instant,
    ) -> Grant {
        let waited = start.elapsed();
        self.inner.core.metrics.granted(waited);
        Grant {
            remaining,
            partition: Some(partition),
            ..Grant::new(tokens, waited, Duration::ZERO, Receipt::Partition(tat_ns))
        }
    }

    /// The call's tokens, waiting within `deadline` from `start` (when the call began: a wait
    /// for a slot counts in), in the loop every limiter's call waits in (`crate::engine::waiting`):
    /// first come, first served, only the caller holding the turn looks for tokens, again at
    /// the next token or when the partitions change.
    async fn wait_for(
        &self,
        tokens: u64,
        floor: Option<u64>,
        deadline: Duration,
        start: Instant,
    ) -> Result<Grant, Error> {
        self.check(tokens)?;
        let core = &self.inner.core;
        let _waiting = Waiting::new(core);
        let mut line = InLine::partitioned(start, &core.turn, &core.changed);
        // Marked at the first look, once the call holds the turn; cleared before the turn goes.
        let mut turn_since = None;
        let outcome = waiting::run(
            Policy::partitioned(deadline),
            &core.metrics,
            |_max_wait_ms, _place| {
                turn_since.get_or_insert_with(|| TurnSince::new(core, start));
                std::future::ready(self.look(tokens, floor, start))
            },
            |_, _, _| std::future::ready(None),
            |_: &Looked| (),
            NoWatch,
            &mut line,
        )
        .await;
        drop(turn_since);
        drop(line);
        let outcome = outcome?;
        let Looked { reply, taken } = outcome.reply;
        // Granted: the partition and its state are there.
        let (index, tat_ns) = taken.unwrap_or_default();
        Ok(Grant {
            remaining: reply.remaining,
            partition: Some(index),
            ..Grant::new(
                tokens,
                outcome.waited,
                Duration::ZERO,
                Receipt::Partition(tat_ns),
            )
        })
    }

    /// One look at the partitions this process holds for the call's tokens, as a take's reply:
    /// refused, it names when the next token is there, or, holding none, when to look again
    /// (and the keeper is asked for more, as it is when the call has waited long).
    fn look(&self, tokens: u64, floor: Option<u64>, start: Instant) -> Result<Looked, Error> {
        let core = &self.inner.core;
        if core.stopped.load(Relaxed) {
            return Err(Error::Stopped);
        }
        let (wait, remaining, taken) = match self.take(tokens, floor) {
            Take::Granted {
                index,
                tat_ns,
                remaining,
            } => (Duration::ZERO, remaining, Some((index, tat_ns))),
            Take::Wait { ns } => {
                let waited = i64::try_from(start.elapsed().as_nanos()).unwrap_or(i64::MAX);
                if ns.is_none() || waited >= core.rules.grow_after_ns {
                    core.demand.notify_one();
                }
                (ns.map_or(NO_LEASE_PAUSE, nanos), 0, None)
            }
        };
        // In process: the loop's own decision, no server's word.
        let reply = TakeReply::in_process(taken.is_some(), remaining, wait);
        Ok(Looked { reply, taken })
    }
}

/// A look at the partitions: the reply the waiting loop reads, and where the tokens were taken
/// (the partition, and its state after the take).
#[derive(Debug)]
struct Looked {
    reply: TakeReply,
    taken: Option<(u32, i64)>,
}

impl AsRef<TakeReply> for Looked {
    fn as_ref(&self) -> &TakeReply {
        &self.reply
    }
}

impl<C> PartitionedLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// With a cap on calls in flight, a slot for the call (a grant of no tokens that holds
    /// it): waiting for one within `within`, in the slot limiter's loop as any limiter's call
    /// waits for a slot (`crate::engine::waiting`), or, `None`, only if one is free now.
    async fn slot(&self, within: Option<Duration>) -> Result<Slot, Error> {
        let Some(slots) = &self.slots else {
            return Ok(Slot::Uncapped);
        };
        let metrics = &self.inner.core.metrics;
        let taken = match within {
            Some(deadline) => slots
                .acquire_with(Demand::tokens(0).within(deadline))
                .await
                .map(Slot::Held),
            None => slots
                .try_acquire_with(Demand::tokens(0))
                .await
                .map(|tried| match tried {
                    TryAcquire::Granted(grant) => Slot::Held(grant),
                    TryAcquire::Denied { .. } => Slot::Busy,
                }),
        };
        taken.inspect_err(|err| match err {
            Error::DeadlineExceeded { .. } => metrics.gave_up(),
            _ => metrics.error(),
        })
    }
}

/// A call's slot for calls in flight.
#[derive(Debug)]
enum Slot {
    /// The limiter has no cap: nothing to hold.
    Uncapped,
    /// Held by this grant of no tokens, until the call's grant goes.
    Held(Grant),
    /// Every slot is held, and the call may not wait.
    Busy,
}

/// `grant` holding the slot `slot` granted (and the round trips it took).
fn with_slot(mut grant: Grant, slot: Slot) -> Grant {
    if let Slot::Held(mut slot) = slot {
        grant.round_trips = grant.round_trips.saturating_add(slot.round_trips);
        grant.slot = slot.slot.take();
    }
    grant
}

/// Nanoseconds (never negative in practice) as a duration.
fn nanos(ns: i64) -> Duration {
    Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
}

/// Counts a waiting caller for the keeper's rules.
struct Waiting<'a>(&'a Core);

impl<'a> Waiting<'a> {
    fn new(core: &'a Core) -> Self {
        core.waiters.fetch_add(1, Relaxed);
        Waiting(core)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Relaxed);
    }
}

/// Marks when the caller holding the turn began waiting.
struct TurnSince<'a>(&'a Core);

impl<'a> TurnSince<'a> {
    fn new(core: &'a Core, start: Instant) -> Self {
        let since = i64::try_from(start.duration_since(core.origin).as_nanos()).unwrap_or(0);
        core.turn_since.store(since, Relaxed);
        TurnSince(core)
    }
}

impl Drop for TurnSince<'_> {
    fn drop(&mut self) {
        self.0.turn_since.store(-1, Relaxed);
    }
}
