//! What a [`Limiter`](crate::Limiter) and a [`MultiLimiter`](crate::MultiLimiter) are under
//! their builders: one or more buckets in Redis taken together, over a redis-rs async
//! connection. One bucket is taken with `THROTTLE.TAKE`, several with `THROTTLE.MTAKE`; every
//! other operation goes bucket by bucket. The I/O lives here; what to do with each reply is
//! [`crate::engine::waiting::policy`]'s decision, and the supplier's side (cut, sync, settle, the pause check) is
//! in `pushback`.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use throttle_bucket::{
    GiveArgs, Inflight, Limit, LineArgs, MTakeArgs, PauseArgs, PeekArgs, TakeArgs, ThrottleCommand,
    MAX_WAIT_MS,
};
use tokio::time::Instant;
use tracing::field::Empty;
use tracing::Instrument;

use crate::engine::metrics::{Event, Metrics};
use crate::engine::waiting::in_flight::InFlight;
use crate::engine::waiting::policy::Policy;
use crate::engine::waiting::{self, record, Held, InLine, Lines, Place};
use crate::report::{FleetReport, Reported, ReportedKey};
use crate::vocabulary::grant::Receipt;
use crate::wire::backend::Dispatch;
use crate::wire::commands;
use crate::wire::listen::{Ears, Listening};
use crate::wire::reply::MTakeTickets;
use crate::{
    Backend, BucketState, Demand, Error, Grant, MetricsSnapshot, Priority, Quota, QuotaError,
    Strategy, SupplierUnit, TryAcquire, Unreachable, DEFAULT_MAX_WAIT,
};

mod pushback;
mod rebook;
mod slots;
mod watch;

use watch::Watch;

/// `impl Throttle for $limiter<C>` through its `buckets` field: a [`Limiter`](crate::Limiter)
/// and a [`MultiLimiter`](crate::MultiLimiter) do the same with one bucket or several, so each
/// call is written once, here, and the two impls cannot drift apart.
macro_rules! throttle_through_buckets {
    ($limiter:ident) => {
        impl<C> $crate::Throttle for $limiter<C>
        where
            C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
        {
            fn name(&self) -> &str {
                self.buckets.name()
            }

            async fn acquire_with(
                &self,
                demand: $crate::Demand,
            ) -> Result<$crate::Grant, $crate::Error> {
                self.buckets.acquire_with(demand).await
            }

            async fn try_acquire_with(
                &self,
                demand: $crate::Demand,
            ) -> Result<$crate::TryAcquire, $crate::Error> {
                self.buckets.try_acquire_with(demand).await
            }

            async fn pause(
                &self,
                retry_after: std::time::Duration,
            ) -> Result<std::time::Duration, $crate::Error> {
                self.buckets.pause(retry_after).await
            }

            async fn give_back(&self, grant: $crate::Grant) -> Result<u64, $crate::Error> {
                self.buckets.give_back(grant).await
            }

            async fn cut(&self, cut: $crate::Cut) -> Result<$crate::CutReport, $crate::Error> {
                self.buckets.cut(cut).await
            }

            async fn sync(&self, count: $crate::SupplierCount) -> Result<bool, $crate::Error> {
                self.buckets.sync(count).await
            }

            async fn settle(
                &self,
                grant: $crate::Grant,
                actual: u64,
            ) -> Result<$crate::Settled, $crate::Error> {
                self.buckets.settle(grant, actual).await
            }

            fn count(&self, event: $crate::HttpEvent) {
                self.buckets.count(event);
            }

            async fn peek(&self) -> Result<$crate::BucketState, $crate::Error> {
                self.buckets.peek().await
            }

            fn metrics(&self) -> $crate::MetricsSnapshot {
                self.buckets.metrics()
            }

            fn on_unreachable(&self) -> $crate::Unreachable {
                self.buckets.options().unreachable
            }

            async fn time_to_serve(
                &self,
                calls: u64,
                tokens: u64,
            ) -> Result<std::time::Duration, $crate::Error> {
                self.buckets.time_to_serve(calls, tokens).await
            }
        }
    };
}
pub(crate) use throttle_through_buckets;

/// The setters both builders have the same way, on their `options` field.
macro_rules! option_setters {
    () => {
        /// Tokens [`Throttle::acquire`](crate::Throttle::acquire) and
        /// [`Throttle::try_acquire`](crate::Throttle::try_acquire) take per call (default 1):
        /// at least 1 and at most the capacity. A [`MultiLimiter`](crate::MultiLimiter)'s
        /// [`per_token`](crate::MultiLimiterBuilder::per_token) limits take them; its
        /// [`limit`](crate::MultiLimiterBuilder::limit)s take their own cost.
        pub fn cost(mut self, tokens: u64) -> Self {
            self.options.cost = tokens;
            self
        }

        /// The limiter's name in tracing spans and in the `metrics` facade's `limiter` label
        /// (default: the key, or a [`MultiLimiter`](crate::MultiLimiter)'s keys joined by
        /// `+`). Give one when keys are many or carry user data.
        pub fn name(mut self, name: impl Into<String>) -> Self {
            self.options.name = Some(name.into());
            self
        }

        /// How calls wait (default [`Strategy::Reserve`](crate::Strategy::Reserve)).
        pub fn strategy(mut self, strategy: $crate::Strategy) -> Self {
            self.options.strategy = strategy;
            self
        }

        /// Where the commands run (default [`Backend::Auto`](crate::Backend::Auto): the module
        /// where it is loaded, else the function library, else the Lua script).
        pub fn backend(mut self, backend: $crate::Backend) -> Self {
            self.options.backend = backend;
            self
        }

        /// How long a call waits for its tokens unless its [`Demand`](crate::Demand) says
        /// (default [`DEFAULT_MAX_WAIT`](crate::DEFAULT_MAX_WAIT), a minute): a call that would
        /// wait longer fails at once with
        /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded), taking nothing.
        /// `Duration::MAX`: as long as the buckets need.
        pub fn max_wait(mut self, max_wait: std::time::Duration) -> Self {
            self.options.max_wait = max_wait;
            self
        }

        /// Hears the pauses of the limiter's buckets on `announcements`, the process's one
        /// subscription, so that a reserved call learns of a pause set while it sleeps without
        /// a `THROTTLE.PEEK` after the sleep (it asks only while the subscription is down).
        /// A limiter built over [`connect`](crate::connect)'s connection listens with the
        /// subscription it carries without being told.
        pub fn listen(mut self, announcements: &$crate::Announcements) -> Self {
            self.options.listen = $crate::wire::listen::Listening::On(announcements.clone());
            self
        }

        /// Does not listen, even over [`connect`](crate::connect)'s connection: a reserved
        /// call asks the server (one `THROTTLE.PEEK` per bucket) after its sleep instead.
        pub fn without_listening(mut self) -> Self {
            self.options.listen = $crate::wire::listen::Listening::Off;
            self
        }

        /// Reports the limiter's counters to Redis through `fleet`, the process's one
        /// [`FleetReport`](crate::report::FleetReport), for the operator's view; off the call
        /// path.
        pub fn report(mut self, fleet: &$crate::report::FleetReport) -> Self {
            self.options.report = Some(fleet.clone());
            self
        }

        /// What a call does while Redis cannot be reached (default
        /// [`Unreachable::FailClosed`](crate::Unreachable::FailClosed): it fails with
        /// [`Error::Connection`](crate::Error::Connection);
        /// [`Unreachable::FailOpen`](crate::Unreachable::FailOpen) lets it through, counted and
        /// logged).
        pub fn on_unreachable(mut self, unreachable: $crate::Unreachable) -> Self {
            self.options.unreachable = unreachable;
            self
        }

        /// Whether a reserved call makes sure no pause covers its send (default `true`), so
        /// that a pause another replica set while it slept holds it back (it acquires again
        /// after the pause) instead of letting it reach a supplier that asked for quiet: by
        /// hearing the pause announced, with [`listen`](Self::listen), or else by one
        /// `THROTTLE.PEEK` per bucket after the sleep. A call granted without a sleep sends at
        /// once. Turn it off where nothing pauses the buckets.
        pub fn pause_check(mut self, check: bool) -> Self {
            self.options.check_pause = check;
            self
        }

        /// Caps the calls in flight across the fleet at `n` (1 to 1024), beside the rate: each
        /// grant also holds one of `n` slots, taken with its tokens in the same `THROTTLE.TAKE`
        /// (or `THROTTLE.MTAKE`: every bucket's tokens and a slot, or nothing), until the grant
        /// is dropped. While every slot is held a call waits for one, within its deadline, in
        /// the server's line (`THROTTLE.TAKE ... LINE`): the callers of every process are handed
        /// the freed slots in the order they joined, each told the moment it is its turn where
        /// the limiter [listens](Self::listen) (else looking again when its progress in line
        /// says); its slot first, then its tokens. A floored call
        /// ([`Priority::Bulk`](crate::Priority::Bulk)) does not join the line: it looks again
        /// when a slot is released. A grant renews its slot's lease every third of
        /// [`slot_lease`](Self::slot_lease) while held, and releases it when dropped (given
        /// back, settled, its future cancelled, a panic); a process that dies frees its slots
        /// when their leases run out. Every limiter on the key must give the same `n`; a
        /// [`MultiLimiter`](crate::MultiLimiter)'s slots live in its **first limit's** bucket,
        /// so every limiter that shares its cap gives the same first key (a
        /// [`Limiter`](crate::Limiter) on that key with `max_in_flight(n)` shares it too).
        /// Checked in [`build`](Self::build).
        ///
        /// ```
        /// use std::time::Duration;
        /// use redis_throttle::{Limiter, Quota};
        ///
        /// // 50 calls a second, at most 8 open at once across the fleet.
        /// let builder = Limiter::builder("quota:llm", Quota::new(50, 50u64)?)
        ///     .max_in_flight(8)
        ///     .slot_lease(Duration::from_secs(5));
        /// # let _ = builder;
        /// # Ok::<(), redis_throttle::QuotaError>(())
        /// ```
        pub fn max_in_flight(mut self, n: u64) -> Self {
            self.options.max_in_flight = Some(n);
            self
        }

        /// How long a slot stays held without a renewal (default
        /// [`DEFAULT_LEASE`](crate::DEFAULT_LEASE), at least [`MIN_LEASE`](crate::MIN_LEASE)):
        /// how soon a dead process's slots come back. A grant renews it every third of it; a
        /// call frozen longer (a stopped process) loses its slot, counted in
        /// [`InFlightMetrics::leases_lost`](crate::InFlightMetrics::leases_lost). Used with
        /// [`max_in_flight`](Self::max_in_flight) only.
        pub fn slot_lease(mut self, lease: std::time::Duration) -> Self {
            self.options.slot_lease = lease;
            self
        }
    };
}
pub(crate) use option_setters;

/// The buckets of one limiter and how its calls go; cheap to clone (the clones share their
/// counters).
pub(crate) struct Buckets<C> {
    conn: C,
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    /// In the order the limiter was given them.
    buckets: Vec<Bucket>,
    options: Options,
    /// The cap on calls in flight, checked (`Options::in_flight`).
    in_flight: Option<InFlight>,
    /// [`Buckets::peek`] counts in calls of the limiter's cost (several buckets, whose tokens are
    /// in different units), not in the one bucket's tokens.
    peek_in_calls: bool,
    dispatch: Dispatch,
    metrics: Metrics,
    /// Where the calls a pause held back gather to take again together.
    desk: rebook::Desk,
    /// What was heard on the buckets' pause channels, when the limiter listens.
    ears: Option<Arc<Ears>>,
    /// Where calls wait their turn: a bulk call's, a slot.
    lines: Lines,
    /// The server's word on the last announcement heard that covered a call.
    confirms: tokio::sync::Mutex<watch::Confirms>,
}

impl Reported for Shared {
    fn snapshot(&self) -> MetricsSnapshot {
        self.metrics.snapshot(Some(self.dispatch.serving()))
    }
}

/// One bucket: its key, its quota, what a call takes from it and which of the supplier's counts
/// it is in.
#[derive(Clone, Debug)]
pub(crate) struct Bucket {
    pub(crate) key: String,
    pub(crate) quota: Quota,
    pub(crate) cost: Cost,
    /// Which of the supplier's counts lowers it, at how many of its tokens per unit.
    pub(crate) unit: SupplierUnit,
    pub(crate) per_unit: u64,
}

/// What a call takes from one bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cost {
    /// The same tokens every call.
    PerCall(u64),
    /// The call's tokens.
    PerToken,
}

impl Cost {
    /// The tokens a call of `tokens` takes from this bucket.
    pub(crate) fn tokens(self, tokens: u64) -> u64 {
        match self {
            Cost::PerCall(cost) => cost,
            Cost::PerToken => tokens,
        }
    }
}

/// What both builders set the same way.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// The call's tokens when a demand does not say.
    pub(crate) cost: u64,
    pub(crate) strategy: Strategy,
    pub(crate) backend: Backend,
    pub(crate) name: Option<String>,
    pub(crate) check_pause: bool,
    pub(crate) max_wait: Duration,
    pub(crate) unreachable: Unreachable,
    pub(crate) listen: Listening,
    pub(crate) report: Option<FleetReport>,
    /// The cap on calls in flight the builder was given, and its slots' lease.
    pub(crate) max_in_flight: Option<u64>,
    pub(crate) slot_lease: Duration,
}

impl Options {
    /// The builder's cap on calls in flight with its lease, checked when the limiter is built
    /// (one bucket's slots: `THROTTLE.TAKE ... INFLIGHT`), or why it cannot be.
    pub(crate) fn in_flight(&self) -> Result<Option<InFlight>, QuotaError> {
        self.max_in_flight
            .map(|cap| InFlight::new(cap, self.slot_lease))
            .transpose()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cost: 1,
            strategy: Strategy::default(),
            backend: Backend::default(),
            name: None,
            check_pause: true,
            max_wait: DEFAULT_MAX_WAIT,
            unreachable: Unreachable::default(),
            listen: Listening::default(),
            report: None,
            max_in_flight: None,
            slot_lease: crate::DEFAULT_LEASE,
        }
    }
}

impl<C: Clone> Clone for Buckets<C> {
    fn clone(&self) -> Self {
        Buckets {
            conn: self.conn.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C> Buckets<C> {
    /// Its counters, for a limiter that keeps its slots in this one (a partitioned limiter's
    /// cap on calls in flight).
    pub(crate) fn reported(&self) -> Arc<dyn Reported> {
        Arc::clone(&self.shared) as Arc<dyn Reported>
    }

    /// The limiter over `conn`: `buckets` and `in_flight` (checked by the builder) named
    /// `name`.
    pub(crate) fn new(
        conn: C,
        name: String,
        buckets: Vec<Bucket>,
        options: Options,
        in_flight: Option<InFlight>,
        peek_in_calls: bool,
    ) -> Buckets<C>
    where
        C: 'static,
    {
        let keys: Vec<&str> = buckets.iter().map(|b| b.key.as_str()).collect();
        let ears = options
            .listen
            .resolve(&conn)
            .filter(|_| options.check_pause)
            .map(|announcements| announcements.ears(&keys));
        // The slots live in the first bucket.
        let cap = in_flight.map(|f| f.cap);
        let report_keys = buckets
            .iter()
            .enumerate()
            .map(|(i, b)| ReportedKey {
                key: b.key.clone(),
                capacity: b.quota.capacity(),
                rate: b.quota.rate().as_str().to_owned(),
                max_in_flight: cap.filter(|_| i == 0),
                max_wait: options.max_wait,
            })
            .collect();
        let shared = Arc::new(Shared {
            ears,
            metrics: Metrics::new(&name),
            name,
            buckets,
            dispatch: Dispatch::new(options.backend),
            options,
            in_flight,
            peek_in_calls,
            desk: rebook::Desk::default(),
            lines: Lines::default(),
            confirms: tokio::sync::Mutex::default(),
        });
        if let Some(fleet) = &shared.options.report {
            let weak = Arc::downgrade(&shared);
            fleet.watch(report_keys, weak);
        }
        Buckets { conn, shared }
    }

    pub(crate) fn name(&self) -> &str {
        &self.shared.name
    }

    pub(crate) fn buckets(&self) -> &[Bucket] {
        &self.shared.buckets
    }

    pub(crate) fn options(&self) -> &Options {
        &self.shared.options
    }

    pub(crate) fn backend(&self) -> Backend {
        self.shared.dispatch.serving()
    }

    pub(crate) fn metrics(&self) -> MetricsSnapshot {
        self.shared.snapshot()
    }

    pub(crate) fn connection(&self) -> &C {
        &self.conn
    }

    pub(crate) fn count(&self, event: crate::HttpEvent) {
        self.shared.metrics.event(event.into());
    }

    /// What a call of `tokens` at `priority` takes from each bucket, in key order, or why it
    /// never can. A bulk call keeps its floor in each bucket, at most what the bucket can keep
    /// beside the call (a floor of 0 is none).
    fn limits_for(&self, tokens: u64, priority: Priority) -> Result<Vec<Limit>, Error> {
        self.shared
            .buckets
            .iter()
            .map(|bucket| {
                let tokens = bucket.cost.tokens(tokens);
                bucket.quota.check_tokens(tokens)?;
                let floor = match priority {
                    Priority::Interactive => None,
                    Priority::Bulk { floor } => {
                        Some(floor.min(bucket.quota.capacity().saturating_sub(tokens)))
                    }
                };
                Ok(Limit {
                    quota: *bucket.quota.bucket(),
                    tokens,
                    floor: floor.filter(|f| *f > 0),
                })
            })
            .collect()
    }
}

impl<C> Buckets<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    pub(crate) async fn acquire_with(&self, demand: Demand) -> Result<Grant, Error> {
        let tokens = demand.tokens.unwrap_or(self.shared.options.cost);
        let result = self.acquire_checked(tokens, demand).await;
        self.or_let_through(result, tokens, std::convert::identity)
    }

    /// A call's `result` for `tokens`, or, where it failed because Redis is unreachable and
    /// the limiter fails open, the unchecked grant it gets instead (as `T`, through `grant`).
    fn or_let_through<T>(
        &self,
        result: Result<T, Error>,
        tokens: u64,
        grant: impl FnOnce(Grant) -> T,
    ) -> Result<T, Error> {
        result.or_else(|err| self.let_through(&err, tokens).map(grant).ok_or(err))
    }

    /// The grant a call that failed with `err` gets instead: `Some` when the limiter fails
    /// open and `err` is Redis being unreachable (counted, and logged at powers of two).
    fn let_through(&self, err: &Error, tokens: u64) -> Option<Grant> {
        let shared = &self.shared;
        if shared.options.unreachable != Unreachable::FailOpen || !err.is_unreachable() {
            return None;
        }
        let count = shared.metrics.failed_open();
        if count.is_power_of_two() {
            tracing::warn!(
                limiter = shared.name.as_str(),
                calls = count,
                error = %err,
                "Redis is unreachable: letting calls through unthrottled (Unreachable::FailOpen)"
            );
        }
        Some(Grant {
            unchecked: true,
            ..Grant::new(tokens, Duration::ZERO, Duration::ZERO, Receipt::None)
        })
    }

    async fn acquire_checked(&self, tokens: u64, demand: Demand) -> Result<Grant, Error> {
        let shared = &self.shared;
        let limits = self.counted(self.limits_for(tokens, demand.priority))?;
        let deadline = Some(demand.deadline.unwrap_or(shared.options.max_wait));
        let span = self.span("acquire", tokens, deadline);
        let mut policy = Policy::new(shared.options.strategy, deadline);
        let bulk = limits.iter().any(|limit| limit.floor.is_some());
        if bulk {
            policy = policy.floored();
        }
        let limits = limits.as_slice();
        let in_flight = shared.in_flight;
        let outcome = waiting::run(
            policy.with_slots(in_flight),
            &shared.metrics,
            |max_wait_ms, place| self.take_holding(limits, max_wait_ms, place),
            |max_wait_ms, resume, at| async move {
                let taken = self
                    .rebook(limits, max_wait_ms, at, resume.factor_bp)
                    .await?;
                Some(slots::Slotted { taken, slot: None })
            },
            |slotted: &slots::Slotted| Refund {
                buckets: self,
                tokens,
                tickets: Some(slotted.taken.tickets.clone()),
            },
            Watch::new(self),
            &mut InLine::new(&shared.lines, shared.ears.as_deref(), bulk)
                .leaving(|ticket| self.leave_line(ticket), &shared.metrics),
        )
        .instrument(span)
        .await?;
        let slots::Slotted { taken, slot } = outcome.reply;
        Ok(Grant {
            remaining: taken.reply.remaining,
            round_trips: outcome.round_trips,
            sync_bounds: Some(self.sync_bounds(&taken.left)),
            slot,
            ..Grant::new(
                tokens,
                outcome.waited,
                outcome.slept,
                Receipt::Tickets(taken.tickets),
            )
        })
    }

    pub(crate) async fn try_acquire_with(&self, demand: Demand) -> Result<TryAcquire, Error> {
        let tokens = demand.tokens.unwrap_or(self.shared.options.cost);
        let result = self.try_acquire_checked(tokens, demand).await;
        self.or_let_through(result, tokens, TryAcquire::Granted)
    }

    async fn try_acquire_checked(&self, tokens: u64, demand: Demand) -> Result<TryAcquire, Error> {
        let limits = self.counted(self.limits_for(tokens, demand.priority))?;
        let span = self.span("try_acquire", tokens, Some(Duration::ZERO));
        async {
            let metrics = &self.shared.metrics;
            let start = Instant::now();
            let slots::Slotted {
                taken:
                    MTakeTickets {
                        reply,
                        tickets,
                        left,
                        ..
                    },
                slot,
            } = self.take_holding(&limits, 0, Place::Outside).await?;
            let waited = start.elapsed();
            if !reply.granted {
                metrics.denied();
                record(waited, 1, "denied");
                return Ok(TryAcquire::Denied {
                    retry_after: reply.wait,
                });
            }
            metrics.granted(waited);
            record(waited, 1, "granted");
            Ok(TryAcquire::Granted(Grant {
                remaining: reply.remaining,
                round_trips: reply.round_trips,
                sync_bounds: Some(self.sync_bounds(&left)),
                slot,
                ..Grant::new(tokens, waited, Duration::ZERO, Receipt::Tickets(tickets))
            }))
        }
        .instrument(span)
        .await
    }

    /// Pauses every bucket (one `THROTTLE.PAUSE` each), so that none lets a call through before
    /// `retry_after`. Returns the longest wait until a call can go.
    pub(crate) async fn pause(&self, retry_after: Duration) -> Result<Duration, Error> {
        let shared = &self.shared;
        let ms = pause_ms(retry_after);
        shared.metrics.paused();
        tracing::debug!(limiter = %shared.name, ms, "pausing: the supplier pushed back");
        let mut longest = Duration::ZERO;
        for bucket in &shared.buckets {
            let args = PauseArgs {
                quota: *bucket.quota.bucket(),
                pause_ms: ms,
            };
            let next = self.call(&bucket.key, &args).await?;
            if next > ms {
                shared.metrics.event(Event::PauseUnchanged);
            }
            longest = longest.max(Duration::from_millis(next));
        }
        Ok(longest)
    }

    pub(crate) async fn give_back(&self, grant: Grant) -> Result<u64, Error> {
        let Receipt::Tickets(tickets) = grant.receipt else {
            return Ok(0);
        };
        self.give(grant.tokens, &tickets).await
    }

    /// Gives a call's `tokens` back to each bucket nothing was taken from after its ticket
    /// (`THROTTLE.GIVE` per bucket). Returns the fewest any bucket gave back, in the call's
    /// tokens: for a per-call bucket, all of them only if it took all of its cost back.
    async fn give(&self, tokens: u64, tickets: &[u64]) -> Result<u64, Error> {
        let shared = &self.shared;
        let mut fewest = tokens;
        let mut gave_any = false;
        for (bucket, ticket) in shared.buckets.iter().zip(tickets) {
            let taken = bucket.cost.tokens(tokens);
            if taken == 0 || *ticket == 0 {
                continue;
            }
            let args = GiveArgs {
                quota: *bucket.quota.bucket(),
                tokens: taken,
                ticket_us: *ticket,
            };
            let given = self.call(&bucket.key, &args).await?;
            gave_any = true;
            if given < taken {
                fewest = match bucket.cost {
                    Cost::PerToken => fewest.min(given),
                    Cost::PerCall(_) => 0,
                };
            }
        }
        let given = if gave_any { fewest } else { 0 };
        shared.metrics.gave_back(given);
        tracing::debug!(limiter = %shared.name, tokens, given, "gave tokens back");
        Ok(given)
    }

    /// The tightest bucket as it stands (one `THROTTLE.PEEK` each): in the one bucket's tokens,
    /// or in calls of the limiter's cost when [`Shared::peek_in_calls`] says so.
    pub(crate) async fn peek(&self) -> Result<BucketState, Error> {
        let shared = &self.shared;
        let mut tightest: Option<BucketState> = None;
        for bucket in &shared.buckets {
            let per_call = if shared.peek_in_calls {
                bucket.cost.tokens(shared.options.cost).max(1)
            } else {
                1
            };
            let state = self.peek_one(bucket, per_call).await?;
            tightest = Some(match tightest {
                None => state,
                Some(t) => BucketState {
                    remaining: t.remaining.min(state.remaining),
                    until_full: t.until_full.max(state.until_full),
                    paused_for: t.paused_for.max(state.paused_for),
                    factor_bp: t.factor_bp.min(state.factor_bp),
                    capacity: t.capacity.min(state.capacity),
                    token_interval: t.token_interval.max(state.token_interval),
                },
            });
        }
        tightest.ok_or_else(|| Error::UnexpectedReply {
            reply: "no limits".to_owned(),
        })
    }

    /// How long `calls` calls of `tokens` tokens in all take, the slowest bucket's: a per-call
    /// bucket takes `calls` times its cost, a per-token one `tokens`.
    pub(crate) async fn time_to_serve(&self, calls: u64, tokens: u64) -> Result<Duration, Error> {
        let mut slowest = Duration::ZERO;
        for bucket in &self.shared.buckets {
            let state = self.peek_one(bucket, 1).await?;
            let needed = match bucket.cost {
                Cost::PerCall(cost) => calls.saturating_mul(cost),
                Cost::PerToken => tokens,
            };
            slowest = slowest.max(state.time_to_take(needed));
        }
        Ok(slowest)
    }

    /// One bucket as it stands (`THROTTLE.PEEK`: read-only, so it also answers on a read-only
    /// replica), counted in units of `per_call` tokens.
    async fn peek_one(&self, bucket: &Bucket, per_call: u64) -> Result<BucketState, Error> {
        let args = PeekArgs {
            quota: *bucket.quota.bucket(),
        };
        let reply = self.call(&bucket.key, &args).await?;
        Ok(BucketState {
            paused_for: Duration::from_millis(reply.paused_ms),
            factor_bp: reply.factor_bp,
            ..BucketState::new(
                reply.remaining / per_call,
                Duration::from_millis(reply.reset_ms),
                bucket.quota.capacity() / per_call,
                bucket
                    .quota
                    .token_interval()
                    .saturating_mul(per_call.try_into().unwrap_or(u32::MAX)),
            )
        })
    }

    /// Counts a call that cannot be made as an error, as a take would.
    fn counted<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        result.inspect_err(|_| self.shared.metrics.error())
    }

    /// The take of a call at `place` with `TICKET`: `THROTTLE.TAKE` for one bucket,
    /// `THROTTLE.MTAKE` for several; failures counted.
    ///
    /// A call that takes a slot with no floor waits for one in the server's line (`LINE`),
    /// where it stands at `place`: a slot handed to one bucket's call comes with its tokens
    /// (no round trip); one handed to several buckets' call comes alone, and its look takes
    /// their tokens ([`Buckets::take_several`]).
    async fn take(
        &self,
        limits: &[Limit],
        max_wait_ms: u64,
        place: Place,
    ) -> Result<MTakeTickets, Error> {
        let shared = &self.shared;
        let inflight = self.inflight();
        let (result, round_trips) = match (shared.buckets.as_slice(), limits, place) {
            ([_], [_], Place::Handed { ticket, wait }) => {
                (Ok(MTakeTickets::handed(ticket, wait)), 0)
            }
            ([bucket], [limit], _) => {
                let args = TakeArgs {
                    quota: limit.quota,
                    tokens: limit.tokens,
                    max_wait_ms,
                    ticket: true,
                    floor: limit.floor,
                    inflight,
                    line: line_args(inflight, limit.floor, place),
                };
                let (reply, trips) = self.call_counted(&[bucket.key.as_str()], &args).await;
                (reply.map(MTakeTickets::from), trips)
            }
            _ => self.take_several(limits, max_wait_ms, place).await,
        };
        let mut taken = result.inspect_err(|err| {
            debug_assert!(!err.is_give_up());
            shared.metrics.error();
            tracing::debug!(error = %err, "the take failed");
            tracing::Span::current().record("outcome", "error");
        })?;
        taken.reply.round_trips = round_trips;
        Ok(taken)
    }

    /// The cap on calls in flight as the commands take it.
    fn inflight(&self) -> Option<Inflight> {
        self.shared.in_flight.map(|cap| Inflight {
            cap: cap.cap,
            lease_ms: cap.lease_ms(),
        })
    }

    /// `THROTTLE.MTAKE ... TICKET` of `limits` within `max_wait_ms`, with the slot of the cap
    /// on calls in flight (`inflight`, taken in the first bucket, where RENEW and RELEASE go
    /// too) or without one, and with `line` its place in that bucket's line.
    async fn mtake(
        &self,
        limits: &[Limit],
        max_wait_ms: u64,
        inflight: Option<Inflight>,
        line: Option<LineArgs>,
    ) -> (Result<MTakeTickets, Error>, u32) {
        let Some(mut args) = MTakeArgs::new(limits, max_wait_ms) else {
            let problem = format!("{} given", limits.len());
            return (Err(Error::from(QuotaError::Limits { problem })), 0);
        };
        args.ticket = true;
        args.inflight = inflight;
        args.line = line;
        let keys: Vec<&str> = self.shared.buckets.iter().map(|b| b.key.as_str()).collect();
        let (reply, trips) = self.call_counted(&keys, &args).await;
        (reply.map(MTakeTickets::from), trips)
    }

    /// The command `args` on `key` through the backend, its reply read back by `args`: one
    /// round trip (more for the first call under `Auto`, or one that loads the library or
    /// script again). Every operation of a limiter goes through here.
    async fn call<A: ThrottleCommand>(&self, key: &str, args: &A) -> Result<A::Reply, Error> {
        self.call_counted(&[key], args).await.0
    }

    /// [`Buckets::call`] on any keys (THROTTLE.MTAKE's), and the round trips it took.
    async fn call_counted<A: ThrottleCommand>(
        &self,
        keys: &[&str],
        args: &A,
    ) -> (Result<A::Reply, Error>, u32) {
        let shared = &self.shared;
        let mut conn = self.conn.clone();
        let (reply, trips) = commands::call(&shared.dispatch, &mut conn, keys, args).await;
        shared
            .metrics
            .round_trips_of(shared.dispatch.serving(), trips);
        (reply, trips)
    }

    fn span(
        &self,
        operation: &'static str,
        tokens: u64,
        deadline: Option<Duration>,
    ) -> tracing::Span {
        let shared = &self.shared;
        let key = match shared.buckets.as_slice() {
            [bucket] => bucket.key.as_str(),
            _ => "",
        };
        tracing::debug_span!(
            "throttle",
            operation,
            limiter = %shared.name,
            key,
            keys = shared.buckets.len(),
            tokens,
            strategy = ?shared.options.strategy,
            backend = shared.dispatch.serving().name(),
            deadline = ?deadline,
            waited = Empty,
            round_trips = Empty,
            outcome = Empty,
        )
    }
}

/// `LINE` for a take of a slot (`inflight`) with no floor, as the call stands at `place`
/// (`None`: no line: a floored call waits for its tokens, and a call with no cap takes no slot).
fn line_args(inflight: Option<Inflight>, floor: Option<u64>, place: Place) -> Option<LineArgs> {
    if inflight.is_none() || floor.is_some() {
        return None;
    }
    let waiter = match place {
        Place::Outside => return None,
        // A look: to keep its place, or (one bucket's deaf to the hand-off, several buckets'
        // handed the slot alone) to take its slot.
        Place::Look(ticket) | Place::Handed { ticket, .. } => Some(ticket),
        Place::First => None,
    };
    Some(LineArgs {
        place_ms: u64::try_from(waiting::PLACE.as_millis()).unwrap_or(u64::MAX),
        waiter,
    })
}

/// `retry_after` as THROTTLE.PAUSE's `ms`: rounded up, from 1 ms to the longest pause.
pub(crate) fn pause_ms(retry_after: Duration) -> u64 {
    let ms = retry_after
        .as_nanos()
        .div_ceil(1_000_000)
        .clamp(1, u128::from(MAX_WAIT_MS));
    u64::try_from(ms).unwrap_or(MAX_WAIT_MS)
}

/// Gives a reservation's tokens back if the call is dropped while it waits to use them.
struct Refund<'a, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    buckets: &'a Buckets<C>,
    tokens: u64,
    /// `None` once the sleep is over: the tokens are the caller's.
    tickets: Option<Vec<u64>>,
}

impl<C> Held for Refund<'_, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn release(mut self) {
        self.tickets = None;
    }

    fn moved(&mut self, bucket: usize) {
        if let Some(ticket) = self.tickets.as_mut().and_then(|t| t.get_mut(bucket)) {
            *ticket = 0;
        }
    }
}

impl<C> Drop for Refund<'_, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        let Some(tickets) = self.tickets.take() else {
            return;
        };
        if tickets.iter().all(|t| *t == 0) {
            return;
        }
        // Never block a drop: the give-back runs as a task of its own, if there is a runtime
        // to run it (a drop outside any runtime leaves the tokens taken, as a crash would).
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let buckets = self.buckets.clone();
        let tokens = self.tokens;
        runtime.spawn(async move {
            if let Err(err) = buckets.give(tokens, &tickets).await {
                tracing::debug!(error = %err, "could not give back the tokens of a dropped call");
            }
        });
    }
}
