//! The partitioned limiter: spends the partitions this process leases, in process, with no
//! round trip per call. The leases themselves are kept by a background task (`keeper`).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionLike;
use throttle_bucket::Quota as BucketQuota;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::keeper;
use super::lease::ReplicaAcks;
use super::metrics::{Counters, PartitionMetrics};
use super::plan::{Rules, Timing};
use super::share::{Shares, Take};
use super::{PartitionError, PartitionedQuota};

/// How long a caller with nothing to wait for (no partition held) sleeps before looking again,
/// unless a lease arrives first.
const NO_LEASE_PAUSE: Duration = Duration::from_millis(100);

/// One call's grant from a [`PartitionedLimiter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionGrant {
    /// Tokens taken.
    pub tokens: u64,
    /// The partition that served them.
    pub partition: u32,
    /// Time spent in the call.
    pub waited: Duration,
    /// The instant the tokens were taken, before the partition's lease stopped being usable.
    /// Whatever happens to the process after this instant (a freeze) is what the in-flight
    /// bound covers.
    pub at: Instant,
}

/// A change to one of this process's leases, for [`PartitionedLimiterBuilder::on_lease`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseEvent {
    /// The partition.
    pub partition: u32,
    /// What happened.
    pub kind: LeaseEventKind,
    /// When: for a confirmation, when its reply came; for the others, the instant from
    /// which nothing more is spent from the partition.
    pub at: Instant,
}

/// What happened to a lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseEventKind {
    /// Acquired or renewed, and confirmed: the partition is spent from `usable_from` (when it
    /// was leased) until `valid_until`, exclusive.
    Confirmed {
        /// When this hold began.
        usable_from: Instant,
        /// Nothing is spent from it at or after this instant unless a renewal confirms.
        valid_until: Instant,
    },
    /// A renewal found the key gone or another owner's: spending stopped at once.
    Lost,
    /// The usable time ran out before a renewal confirmed.
    Lapsed,
    /// Given back (idle, yielded, or at shutdown).
    Released,
}

type Observer = Arc<dyn Fn(&LeaseEvent) + Send + Sync>;

/// Spends a [`PartitionedQuota`] locally: the partitions this process leases, each a GCRA in
/// process. See the [module](super) for the guarantees.
///
/// Cloning is cheap and the clones share the leases. When the last clone is dropped, or at
/// [`PartitionedLimiter::shutdown`], the leases are released (a process that dies lets them
/// expire instead).
pub struct PartitionedLimiter<C> {
    inner: Arc<Handle>,
    conn: C,
}

impl<C: Clone> Clone for PartitionedLimiter<C> {
    fn clone(&self) -> Self {
        PartitionedLimiter {
            inner: Arc::clone(&self.inner),
            conn: self.conn.clone(),
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

/// What the callers and the keeper share.
pub(crate) struct Core {
    pub quota: PartitionedQuota,
    pub share: BucketQuota,
    pub name: String,
    pub owner: String,
    pub origin: Instant,
    pub timing: Timing,
    pub rules: Rules,
    pub acks: ReplicaAcks,
    pub wait_timeout: Duration,
    pub state: Mutex<State>,
    /// Callers wait their turn here, first come first served; the one holding it sleeps
    /// until the next token.
    turn: tokio::sync::Mutex<()>,
    /// A partition was added or extended, or the limiter stopped: the waiting caller looks
    /// again.
    pub changed: Notify,
    /// A caller waits longer than the rules like: the keeper looks again.
    pub demand: Notify,
    waiters: AtomicUsize,
    /// When the caller holding the turn began waiting (ns since `origin`; -1: none).
    turn_since: AtomicI64,
    pub counters: Counters,
    pub stopped: AtomicBool,
    pub observer: Option<Observer>,
}

#[derive(Default)]
pub(crate) struct State {
    pub shares: Shares,
}

impl Core {
    pub fn now_ns(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(i64::MAX)
    }

    pub fn instant(&self, ns: i64) -> Instant {
        self.origin + Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn waiters(&self) -> usize {
        self.waiters.load(Relaxed)
    }

    /// How long the longest-waiting caller has waited, ns.
    pub fn longest_wait_ns(&self, now_ns: i64) -> i64 {
        match self.turn_since.load(Relaxed) {
            since if since >= 0 => now_ns.saturating_sub(since),
            _ => 0,
        }
    }

    pub fn observe(&self, partition: u32, kind: LeaseEventKind, at_ns: i64) {
        if let Some(observer) = &self.observer {
            observer(&LeaseEvent {
                partition,
                kind,
                at: self.instant(at_ns),
            });
        }
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

    /// Builds the limiter over `conn` and starts the task that keeps its leases (inside the
    /// current tokio runtime). The reserved partitions are leased at once, in the
    /// background; calls wait for them.
    pub fn build<C>(self, conn: C) -> Result<PartitionedLimiter<C>, PartitionError>
    where
        C: ConnectionLike + Clone + Send + Sync + 'static,
    {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| PartitionError::NoRuntime)?;
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
            .map_err(|problem| PartitionError::Config { problem })?;
        let max_held = self.max_held.unwrap_or(quota.partitions());
        if max_held == 0 || max_held > quota.partitions() || max_held < quota.reserved() {
            return Err(PartitionError::Config {
                problem: format!(
                    "max_held {max_held} must be from the reserved partitions ({}) to the \
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
        let core = Arc::new(Core {
            share: quota.share(),
            name: self.name.unwrap_or_else(|| quota.name().to_owned()),
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
        });
        let (stop, stopped) = watch::channel(false);
        let task = runtime.spawn(keeper::run(Arc::clone(&core), conn.clone(), stopped));
        Ok(PartitionedLimiter {
            inner: Arc::new(Handle {
                core,
                stop,
                task: Mutex::new(Some(task)),
            }),
            conn,
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
        }
    }
}

impl<C> PartitionedLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The supplier pushed back (429 with `Retry-After`): this process takes nothing for
    /// `retry_after`, then resumes each partition from one token (no burst), as
    /// `THROTTLE.PAUSE` does; and it tells the fleet (`{name}:pause`, never shortening a
    /// longer pause), whose processes follow at their next renewal round, within a third of
    /// a lease. Returns how long until the next token (at least `retry_after`).
    pub async fn pause(&self, retry_after: Duration) -> Result<Duration, PartitionError> {
        let core = &self.inner.core;
        let until = core
            .now_ns()
            .saturating_add(i64::try_from(retry_after.as_nanos()).unwrap_or(i64::MAX));
        core.state().shares.pause(&core.share, until);
        let until_ms = u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .saturating_add(retry_after)
                .as_millis(),
        )
        .unwrap_or(u64::MAX);
        let keep_ms = u64::try_from((retry_after + core.quota.lease()).as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut conn = self.conn.clone();
        redis::cmd("EVAL")
            .arg(keeper::PAUSE_IF_LATER)
            .arg(1)
            .arg(keeper::pause_key(core.quota.name()))
            .arg(until_ms)
            .arg(keep_ms)
            .query_async::<()>(&mut conn)
            .await
            .map_err(|e| PartitionError::Redis(crate::Error::from_redis(e)))?;
        Counters::add(&core.counters.round_trips, 1);
        Ok(retry_after)
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
        let mut held: Vec<u32> = self
            .inner
            .core
            .state()
            .shares
            .held()
            .iter()
            .map(|h| h.index)
            .collect();
        held.sort_unstable();
        held
    }

    /// Counters since the limiter was built.
    pub fn metrics(&self) -> PartitionMetrics {
        let core = &self.inner.core;
        core.counters.snapshot(core.state().shares.len())
    }

    /// Takes one token, waiting for a leased partition to have it.
    pub async fn acquire(&self) -> Result<PartitionGrant, PartitionError> {
        self.acquire_n(1).await
    }

    /// Takes `tokens` (at most one partition's burst) from one partition, waiting as long as
    /// it takes.
    pub async fn acquire_n(&self, tokens: u64) -> Result<PartitionGrant, PartitionError> {
        self.wait_for(tokens, None).await
    }

    /// Like [`PartitionedLimiter::acquire`], but gives up at `deadline` with
    /// [`PartitionError::DeadlineExceeded`], taking nothing.
    pub async fn acquire_within(
        &self,
        deadline: Duration,
    ) -> Result<PartitionGrant, PartitionError> {
        self.wait_for(1, Some(deadline)).await
    }

    /// [`PartitionedLimiter::acquire_n`] with a deadline.
    pub async fn acquire_n_within(
        &self,
        tokens: u64,
        deadline: Duration,
    ) -> Result<PartitionGrant, PartitionError> {
        self.wait_for(tokens, Some(deadline)).await
    }

    /// Takes one token if a leased partition has it now; never waits, never a round trip.
    pub fn try_acquire(&self) -> Result<Option<PartitionGrant>, PartitionError> {
        self.try_acquire_n(1)
    }

    /// Takes `tokens` if a leased partition has them now.
    pub fn try_acquire_n(&self, tokens: u64) -> Result<Option<PartitionGrant>, PartitionError> {
        let core = &self.inner.core;
        self.check(tokens)?;
        let start = Instant::now();
        match self.take(tokens) {
            Take::Granted { index } => Ok(Some(self.granted(tokens, index, start))),
            Take::Wait { .. } => {
                Counters::add(&core.counters.denied, 1);
                Ok(None)
            }
        }
    }

    /// Releases every lease and stops the keeper; later calls fail with
    /// [`PartitionError::Stopped`]. Waits for the releases (each a round trip).
    pub async fn shutdown(&self) -> Result<(), PartitionError> {
        self.inner.stop.send_replace(true);
        let task = self
            .inner
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            task.await.map_err(|e| PartitionError::Config {
                problem: format!("the lease task failed: {e}"),
            })?;
        }
        Ok(())
    }

    fn check(&self, tokens: u64) -> Result<(), PartitionError> {
        let core = &self.inner.core;
        if core.stopped.load(Relaxed) {
            return Err(PartitionError::Stopped);
        }
        if tokens > core.share.capacity {
            return Err(PartitionError::Tokens {
                tokens,
                capacity: core.share.capacity,
            });
        }
        Ok(())
    }

    fn take(&self, tokens: u64) -> Take {
        let core = &self.inner.core;
        if tokens == 0 {
            return Take::Granted { index: 0 };
        }
        let now = core.now_ns();
        core.state().shares.take(&core.share, tokens, now)
    }

    fn granted(&self, tokens: u64, partition: u32, start: Instant) -> PartitionGrant {
        let at = Instant::now();
        Counters::add(&self.inner.core.counters.granted, 1);
        PartitionGrant {
            tokens,
            partition,
            waited: at - start,
            at,
        }
    }

    async fn wait_for(
        &self,
        tokens: u64,
        deadline: Option<Duration>,
    ) -> Result<PartitionGrant, PartitionError> {
        self.check(tokens)?;
        let core = &self.inner.core;
        let start = Instant::now();
        let give_up_at = deadline.map(|d| start + d);
        let _waiting = Waiting::new(core);
        let gave_up = || {
            Counters::add(&core.counters.gave_up, 1);
            PartitionError::DeadlineExceeded {
                deadline: deadline.unwrap_or_default(),
            }
        };
        // First come, first served: only the caller holding the turn looks for tokens.
        let _turn = match give_up_at {
            None => core.turn.lock().await,
            Some(at) => tokio::time::timeout_at(at, core.turn.lock())
                .await
                .map_err(|_| gave_up())?,
        };
        let _turn_since = TurnSince::new(core, start);
        loop {
            let changed = core.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if core.stopped.load(Relaxed) {
                return Err(PartitionError::Stopped);
            }
            let pause = match self.take(tokens) {
                Take::Granted { index } => return Ok(self.granted(tokens, index, start)),
                Take::Wait { ns } => {
                    let waited = i64::try_from(start.elapsed().as_nanos()).unwrap_or(i64::MAX);
                    if ns.is_none() || waited >= core.rules.grow_after_ns {
                        core.demand.notify_one();
                    }
                    ns.map_or(NO_LEASE_PAUSE, |ns| {
                        Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
                    })
                }
            };
            let wake = Instant::now() + pause;
            let wake = give_up_at.map_or(wake, |at| wake.min(at));
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = &mut changed => {}
            }
            if give_up_at.is_some_and(|at| Instant::now() >= at) {
                // One last look: a token may have come due at the deadline.
                if let Take::Granted { index } = self.take(tokens) {
                    return Ok(self.granted(tokens, index, start));
                }
                return Err(gave_up());
            }
        }
    }
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
