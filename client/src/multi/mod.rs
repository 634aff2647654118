//! Several limits taken together: one `THROTTLE.MTAKE` round trip per call, from every
//! bucket or from none.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::Value;
use throttle_bucket::{Command, GiveArgs, Limit, MTakeArgs, PauseArgs, PeekArgs, Word, MAX_KEYS};
use tokio::time::Instant;
use tracing::field::Empty;
use tracing::Instrument;

use crate::backend::{Call, Dispatch};
use crate::bulk_turn::BulkTurn;
use crate::grant::Receipt;
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::reply::{self, MTakeTickets};
use crate::waiting::{self, record, Held};
use crate::{
    Backend, BucketState, Cut, CutReport, Demand, Error, Grant, HttpEvent, MetricsSnapshot,
    Priority, Quota, QuotaError, Settled, Strategy, SupplierCount, SupplierUnit, Throttle,
    TryAcquire, Unreachable, DEFAULT_MAX_WAIT,
};

mod pushback;

/// Several limits at once, all or nothing: suppliers publish more than one (10 per second
/// and 500 per minute; a per-workflow share and the supplier's global quota; requests and
/// tokens). A call is granted only when every bucket can give its cost, waits for the slowest
/// one, and takes from each bucket as of the moment it will be used, so no bucket's tokens
/// are wasted on a call another bucket refuses. One `THROTTLE.MTAKE` round trip per call.
///
/// A limit takes a fixed cost per call ([`MultiLimiterBuilder::limit`]: requests per
/// minute), or the call's tokens ([`MultiLimiterBuilder::per_token`]: an LLM's tokens per
/// minute, whatever `acquire_n(n)` asks for).
///
/// In Redis Cluster every key must be in one hash slot: give them one hash tag, like
/// `{supplier}:per-second` and `{supplier}:per-minute` (the server refuses others with
/// `CROSSSLOT`). Through redis-rs's cluster connection a module call costs a `MOVED`
/// redirection on top: redis-rs routes a command it does not know by its first argument, here
/// `numkeys`. The library and the script have no such cost (`FCALL` and `EVALSHA` are routed
/// by their first key).
///
/// ```no_run
/// use std::time::Duration;
/// use redis_throttle::{MultiLimiter, Quota, Rate};
///
/// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), redis_throttle::Error> {
/// let limiter = MultiLimiter::builder()
///     .limit("{pix}:second", Quota::new(10, 10u64)?, 1)
///     .limit("{pix}:minute", Quota::new(500, Rate::per(500, Duration::from_secs(60)))?, 1)
///     .build(conn)?;
/// limiter.acquire().await?; // both limits allow one more call now
/// # Ok(())
/// # }
/// ```
///
/// Dropping a call's future while it sleeps after a reservation gives its tokens back to every
/// bucket that nothing was taken from since (`THROTTLE.GIVE` with `THROTTLE.MTAKE ... TICKET`'s
/// tickets, from a task of its own, best effort), as a [`Limiter`](crate::Limiter) does.
pub struct MultiLimiter<C> {
    conn: C,
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    keys: Vec<String>,
    /// Each key's quota and what a call takes from it, in key order.
    limits: Vec<(Quota, Cost)>,
    /// The call's tokens when a demand does not say.
    cost: u64,
    strategy: Strategy,
    dispatch: Dispatch,
    metrics: Metrics,
    check_pause: bool,
    bulk_turn: BulkTurn,
    max_wait: Duration,
    unreachable: Unreachable,
}

/// What a call takes from one limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cost {
    /// The same tokens every call.
    PerCall(u64),
    /// The call's tokens.
    PerToken,
}

impl<C: Clone> Clone for MultiLimiter<C> {
    fn clone(&self) -> Self {
        MultiLimiter {
            conn: self.conn.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C> fmt::Debug for MultiLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLimiter")
            .field("name", &self.shared.name)
            .field("keys", &self.shared.keys)
            .field("strategy", &self.shared.strategy)
            .field("backend", &self.shared.dispatch.serving())
            .finish_non_exhaustive()
    }
}

/// Configures a [`MultiLimiter`]; from [`MultiLimiter::builder`].
///
/// ```
/// use std::time::Duration;
/// use redis_throttle::{Error, MultiLimiter, Quota, Rate};
///
/// // An LLM API: 500 requests and 90 000 tokens per minute; a call estimates 1 000 tokens.
/// let minute = Duration::from_secs(60);
/// let builder = MultiLimiter::builder()
///     .limit("{llm}:rpm", Quota::new(500, Rate::per(500, minute))?, 1)
///     .per_token("{llm}:tpm", Quota::new(90_000, Rate::per(90_000, minute))?)
///     .cost(1_000);
/// # let _ = builder;
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MultiLimiterBuilder {
    limits: Vec<(String, Quota, Cost)>,
    cost: u64,
    strategy: Strategy,
    backend: Backend,
    name: Option<String>,
    check_pause: bool,
    max_wait: Duration,
    unreachable: Unreachable,
}

impl MultiLimiterBuilder {
    /// One more limit: the bucket at `key` with `quota`, `cost` tokens per call.
    pub fn limit(mut self, key: impl Into<String>, quota: Quota, cost: u64) -> Self {
        self.limits.push((key.into(), quota, Cost::PerCall(cost)));
        self
    }

    /// One more limit that takes the call's tokens: what `acquire_n(n)` asks for, or the
    /// [`cost`](MultiLimiterBuilder::cost) for `acquire()`.
    pub fn per_token(mut self, key: impl Into<String>, quota: Quota) -> Self {
        self.limits.push((key.into(), quota, Cost::PerToken));
        self
    }

    /// The call's tokens for `acquire()` and `try_acquire()` (default 1): what the
    /// [`per_token`](MultiLimiterBuilder::per_token) limits take.
    pub fn cost(mut self, tokens: u64) -> Self {
        self.cost = tokens;
        self
    }

    /// How calls wait (default [`Strategy::Reserve`]).
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Where the commands run (default [`Backend::Auto`]).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// The limiter's name in spans and metrics (default: the keys joined by `+`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Whether a reserved call looks at every bucket before it is sent (default `true`; one
    /// `THROTTLE.PEEK` per bucket after the sleep), as
    /// [`LimiterBuilder::pause_check`](crate::LimiterBuilder::pause_check) says.
    pub fn pause_check(mut self, check: bool) -> Self {
        self.check_pause = check;
        self
    }

    /// How long a call waits unless its [`Demand`] says (default [`DEFAULT_MAX_WAIT`]), as
    /// [`LimiterBuilder::max_wait`](crate::LimiterBuilder::max_wait) says.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// What a call does while Redis cannot be reached (default
    /// [`Unreachable::FailClosed`]), as
    /// [`LimiterBuilder::on_unreachable`](crate::LimiterBuilder::on_unreachable) says.
    pub fn on_unreachable(mut self, unreachable: Unreachable) -> Self {
        self.unreachable = unreachable;
        self
    }

    /// Builds the limiter over `conn`: 1 to 16 limits on distinct keys, each cost from 1 to
    /// its capacity, or [`Error::InvalidQuota`]. Makes no round trip.
    pub fn build<C>(self, conn: C) -> Result<MultiLimiter<C>, Error> {
        let problem = |problem: &str| QuotaError::Limits {
            problem: problem.to_owned(),
        };
        if self.limits.is_empty() || self.limits.len() > MAX_KEYS {
            return Err(problem(&format!("{} given", self.limits.len())).into());
        }
        for (i, (key, quota, cost)) in self.limits.iter().enumerate() {
            quota.check_cost(cost.tokens(self.cost))?;
            if self
                .limits
                .iter()
                .skip(i + 1)
                .any(|(other, ..)| other == key)
            {
                return Err(problem(&format!("the key {key:?} is given twice")).into());
            }
        }
        let keys: Vec<String> = self.limits.iter().map(|(key, ..)| key.clone()).collect();
        let name = self.name.unwrap_or_else(|| keys.join("+"));
        let limits = self
            .limits
            .into_iter()
            .map(|(_, quota, cost)| (quota, cost))
            .collect();
        Ok(MultiLimiter {
            conn,
            shared: Arc::new(Shared {
                metrics: Metrics::new(&name),
                name,
                keys,
                limits,
                cost: self.cost,
                strategy: self.strategy,
                dispatch: Dispatch::new(self.backend),
                check_pause: self.check_pause,
                bulk_turn: BulkTurn::default(),
                max_wait: self.max_wait,
                unreachable: self.unreachable,
            }),
        })
    }
}

impl Cost {
    /// The tokens a call of `tokens` takes from this limit.
    fn tokens(self, tokens: u64) -> u64 {
        match self {
            Cost::PerCall(cost) => cost,
            Cost::PerToken => tokens,
        }
    }

    /// Which of the supplier's counts this limit is in, and its tokens per unit of it: a
    /// per-call limit counts requests at its cost, a per-token one tokens.
    fn unit(self) -> (SupplierUnit, u64) {
        match self {
            Cost::PerCall(cost) => (SupplierUnit::Calls, cost),
            Cost::PerToken => (SupplierUnit::Tokens, 1),
        }
    }
}

impl MultiLimiter<()> {
    /// A builder: add limits with [`MultiLimiterBuilder::limit`] and
    /// [`MultiLimiterBuilder::per_token`], then build over a connection.
    pub fn builder() -> MultiLimiterBuilder {
        MultiLimiterBuilder {
            limits: Vec::new(),
            cost: 1,
            strategy: Strategy::default(),
            backend: Backend::default(),
            name: None,
            check_pause: true,
            max_wait: DEFAULT_MAX_WAIT,
            unreachable: Unreachable::default(),
        }
    }
}

impl<C> MultiLimiter<C> {
    /// The keys, in the order they were given.
    pub fn keys(&self) -> &[String] {
        &self.shared.keys
    }

    /// The limiter's name (the keys joined by `+` unless named).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The call's tokens for `acquire()`.
    pub fn cost(&self) -> u64 {
        self.shared.cost
    }

    /// What serves the calls ([`Backend::Auto`] until the first call has answered).
    pub fn backend(&self) -> Backend {
        self.shared.dispatch.serving()
    }

    /// The counters of this limiter and its clones since it was built.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.shared.metrics.snapshot(Some(self.backend()))
    }

    /// What a call of `tokens` at `priority` takes from each bucket, in key order, or why it
    /// never can.
    fn limits_for(&self, tokens: u64, priority: Priority) -> Result<Vec<Limit>, Error> {
        self.shared
            .limits
            .iter()
            .map(|(quota, cost)| {
                let tokens = cost.tokens(tokens);
                quota.check_tokens(tokens)?;
                let floor = match priority {
                    Priority::Interactive => None,
                    Priority::Bulk { floor } => {
                        Some(floor.min(quota.capacity().saturating_sub(tokens)))
                    }
                };
                Ok(Limit {
                    quota: *quota.bucket(),
                    tokens,
                    floor: floor.filter(|f| *f > 0),
                })
            })
            .collect()
    }
}

impl<C> MultiLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Takes a call's cost from every limit, waiting as long as the slowest bucket needs.
    pub async fn acquire(&self) -> Result<Grant, Error> {
        self.acquire_with(Demand::call()).await
    }

    /// A call of `tokens` (what the per-token limits take), waiting as long as needed.
    pub async fn acquire_n(&self, tokens: u64) -> Result<Grant, Error> {
        self.acquire_with(Demand::tokens(tokens)).await
    }

    /// Like [`MultiLimiter::acquire`], but fails at once with [`Error::DeadlineExceeded`],
    /// taking nothing, if some bucket cannot give its cost within `deadline`.
    pub async fn acquire_within(&self, deadline: Duration) -> Result<Grant, Error> {
        self.acquire_with(Demand::call().within(deadline)).await
    }

    /// [`MultiLimiter::acquire_n`] with a deadline.
    pub async fn acquire_n_within(&self, tokens: u64, deadline: Duration) -> Result<Grant, Error> {
        self.acquire_with(Demand::tokens(tokens).within(deadline))
            .await
    }

    /// Takes what `demand` asks for from every limit, within its deadline, at its priority (a
    /// [`Priority::Bulk`] call keeps its floor in every bucket and never reserves).
    pub async fn acquire_with(&self, demand: Demand) -> Result<Grant, Error> {
        let tokens = demand.tokens.unwrap_or(self.shared.cost);
        let result = self.acquire_checked(tokens, demand).await;
        let shared = &self.shared;
        let (metrics, name) = (&shared.metrics, shared.name.as_str());
        shared
            .unreachable
            .or_let_through(result, tokens, metrics, name, std::convert::identity)
    }

    async fn acquire_checked(&self, tokens: u64, demand: Demand) -> Result<Grant, Error> {
        let limits = self.counted(self.limits_for(tokens, demand.priority))?;
        let deadline = Some(demand.deadline.unwrap_or(self.shared.max_wait));
        let span = self.span("acquire", tokens, deadline);
        // Bulk calls take turns, as a `Limiter`'s do.
        let (policy, turn) = if demand.priority == Priority::Interactive {
            (Policy::new(self.shared.strategy, deadline), None)
        } else {
            let turn = self
                .shared
                .bulk_turn
                .take(deadline)
                .await
                .inspect_err(|_| self.shared.metrics.gave_up())?;
            (
                Policy::new(self.shared.strategy, turn.deadline).floored(),
                Some(turn),
            )
        };
        let in_line = turn.as_ref().map_or(Duration::ZERO, |t| t.waited);
        let outcome = waiting::run(
            policy,
            &self.shared.metrics,
            |max_wait_ms| self.take(&limits, max_wait_ms),
            |taken: &MTakeTickets| Refund {
                limiter: self,
                tokens,
                tickets: Some(taken.tickets.clone()),
            },
            || self.pause_check(),
        )
        .instrument(span)
        .await?;
        drop(turn);
        Ok(Grant {
            remaining: outcome.reply.reply.remaining,
            round_trips: outcome.round_trips,
            sync_bounds: Some(self.sync_bounds(&outcome.reply.left)),
            ..Grant::new(
                tokens,
                outcome.waited + in_line,
                outcome.slept,
                Receipt::Tickets(outcome.reply.tickets),
            )
        })
    }

    /// Takes a call's cost from every limit if all are there now; never waits.
    pub async fn try_acquire(&self) -> Result<TryAcquire, Error> {
        self.try_acquire_with(Demand::call()).await
    }

    /// A call of `tokens` if every limit has it now; never waits.
    pub async fn try_acquire_n(&self, tokens: u64) -> Result<TryAcquire, Error> {
        self.try_acquire_with(Demand::tokens(tokens)).await
    }

    /// What `demand` asks for, if every limit has it now (floors kept); never waits.
    pub async fn try_acquire_with(&self, demand: Demand) -> Result<TryAcquire, Error> {
        let tokens = demand.tokens.unwrap_or(self.shared.cost);
        let result = self.try_acquire_checked(tokens, demand).await;
        let shared = &self.shared;
        let (metrics, name) = (&shared.metrics, shared.name.as_str());
        shared
            .unreachable
            .or_let_through(result, tokens, metrics, name, TryAcquire::Granted)
    }

    async fn try_acquire_checked(&self, tokens: u64, demand: Demand) -> Result<TryAcquire, Error> {
        let limits = self.counted(self.limits_for(tokens, demand.priority))?;
        let span = self.span("try_acquire", tokens, Some(Duration::ZERO));
        async {
            let metrics = &self.shared.metrics;
            let start = Instant::now();
            let MTakeTickets {
                reply,
                tickets,
                left,
            } = self.take(&limits, 0).await?;
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
                ..Grant::new(tokens, waited, Duration::ZERO, Receipt::Tickets(tickets))
            }))
        }
        .instrument(span)
        .await
    }

    /// The supplier pushed back: pauses every bucket (one `THROTTLE.PAUSE` each, see
    /// [`Limiter::pause`](crate::Limiter::pause)), so no limit lets a call through before
    /// `retry_after`. Returns the longest wait until a call can go.
    pub async fn pause(&self, retry_after: Duration) -> Result<Duration, Error> {
        let args_of = |quota: &Quota| PauseArgs {
            quota: *quota.bucket(),
            pause_ms: crate::limiter::pause_ms(retry_after),
        };
        self.shared.metrics.paused();
        let mut longest = Duration::ZERO;
        for (key, (quota, _)) in self.shared.keys.iter().zip(&self.shared.limits) {
            let value = self
                .send(key, Command::Pause, args_of(quota).words())
                .await?;
            let next = reply::integer(&value, Command::Pause)
                .map_err(|reply| Error::UnexpectedReply { reply })?;
            longest = longest.max(Duration::from_millis(next));
        }
        Ok(longest)
    }

    /// Gives back the tokens of a grant that were not used, to each bucket that nothing was
    /// taken from after it (`THROTTLE.GIVE` per bucket, with its ticket), never beyond full.
    /// Returns the tokens given back: the call's tokens when every bucket took them back, and
    /// fewer (0) when some did not: the fewest any bucket gave back, counted in the call's
    /// tokens for a per-token limit and in whole calls for a per-call one.
    pub async fn give_back(&self, grant: Grant) -> Result<u64, Error> {
        let Receipt::Tickets(tickets) = grant.receipt else {
            return Ok(0);
        };
        self.give(grant.tokens, &tickets).await
    }

    async fn give(&self, tokens: u64, tickets: &[u64]) -> Result<u64, Error> {
        let mut fewest = tokens;
        let mut gave_any = false;
        for ((key, (quota, cost)), ticket) in self
            .shared
            .keys
            .iter()
            .zip(&self.shared.limits)
            .zip(tickets)
        {
            let taken = cost.tokens(tokens);
            if taken == 0 || *ticket == 0 {
                continue;
            }
            let args = GiveArgs {
                quota: *quota.bucket(),
                tokens: taken,
                ticket_us: *ticket,
            };
            let value = self.send(key, Command::Give, args.words()).await?;
            let given = reply::integer(&value, Command::Give)
                .map_err(|reply| Error::UnexpectedReply { reply })?;
            gave_any = true;
            // In the call's tokens: all of them only if this bucket took all of its cost back.
            if given < taken {
                fewest = match cost {
                    Cost::PerToken => fewest.min(given),
                    Cost::PerCall(_) => 0,
                };
            }
        }
        let given = if gave_any { fewest } else { 0 };
        self.shared.metrics.gave_back(given);
        tracing::debug!(limiter = %self.shared.name, tokens, given, "gave tokens back");
        Ok(given)
    }

    /// The tightest limit as it stands, counted in calls of the limiter's cost: the fewest
    /// calls left, the longest wait until full and pause, the lowest rate factor (one
    /// `THROTTLE.PEEK` per bucket).
    pub async fn peek(&self) -> Result<BucketState, Error> {
        let mut tightest: Option<BucketState> = None;
        for (key, (quota, cost)) in self.shared.keys.iter().zip(&self.shared.limits) {
            let args = PeekArgs {
                quota: *quota.bucket(),
            };
            let value = self.send(key, Command::Peek, args.words()).await?;
            let reply = reply::peek(&value).map_err(|reply| Error::UnexpectedReply { reply })?;
            let per_call = cost.tokens(self.shared.cost).max(1);
            let state = BucketState {
                paused_for: Duration::from_millis(reply.paused_ms),
                factor_bp: reply.factor_bp,
                ..BucketState::new(
                    reply.remaining / per_call,
                    Duration::from_millis(reply.reset_ms),
                    quota.capacity() / per_call,
                    quota
                        .token_interval()
                        .saturating_mul(per_call.try_into().unwrap_or(u32::MAX)),
                )
            };
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

    /// How long `calls` calls of `tokens` tokens in all take, the slowest limit's: a per-call
    /// limit takes `calls` times its cost, a per-token one `tokens` (one `THROTTLE.PEEK` per
    /// bucket).
    pub async fn time_to_serve(&self, calls: u64, tokens: u64) -> Result<Duration, Error> {
        let mut slowest = Duration::ZERO;
        for (key, (quota, cost)) in self.shared.keys.iter().zip(&self.shared.limits) {
            let args = PeekArgs {
                quota: *quota.bucket(),
            };
            let value = self.send(key, Command::Peek, args.words()).await?;
            let reply = reply::peek(&value).map_err(|reply| Error::UnexpectedReply { reply })?;
            let state = BucketState {
                paused_for: Duration::from_millis(reply.paused_ms),
                factor_bp: reply.factor_bp,
                ..BucketState::new(
                    reply.remaining,
                    Duration::from_millis(reply.reset_ms),
                    quota.capacity(),
                    quota.token_interval(),
                )
            };
            let needed = match cost {
                Cost::PerCall(cost) => calls.saturating_mul(*cost),
                Cost::PerToken => tokens,
            };
            slowest = slowest.max(state.time_to_take(needed));
        }
        Ok(slowest)
    }

    /// Counts a call that cannot be made as an error, as a take would.
    fn counted<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        result.inspect_err(|_| self.shared.metrics.error())
    }

    /// One `THROTTLE.MTAKE ... TICKET` round trip.
    async fn take(&self, limits: &[Limit], max_wait_ms: u64) -> Result<MTakeTickets, Error> {
        let shared = &self.shared;
        let mut args = MTakeArgs::new(limits, max_wait_ms).ok_or_else(|| {
            Error::from(QuotaError::Limits {
                problem: format!("{} given", limits.len()),
            })
        })?;
        args.ticket = true;
        let keys: Vec<&str> = shared.keys.iter().map(String::as_str).collect();
        let call = Call {
            command: Command::MTake,
            keys: &keys,
            args: args.words(),
        };
        let mut conn = self.conn.clone();
        let (result, round_trips) = shared.dispatch.send(&mut conn, &call).await;
        shared
            .metrics
            .round_trips_of(shared.dispatch.serving(), round_trips);
        let mut reply = result
            .and_then(|value| {
                reply::mtake(&value, keys.len()).map_err(|reply| Error::UnexpectedReply { reply })
            })
            .inspect_err(|err| {
                shared.metrics.error();
                tracing::debug!(error = %err, "THROTTLE.MTAKE failed");
                tracing::Span::current().record("outcome", "error");
            })?;
        reply.reply.round_trips = round_trips;
        Ok(reply)
    }

    /// One round trip of a one-key command on `key`.
    async fn send(&self, key: &str, command: Command, args: Vec<Word<'_>>) -> Result<Value, Error> {
        let shared = &self.shared;
        let call = Call {
            command,
            keys: &[key],
            args,
        };
        let mut conn = self.conn.clone();
        let (result, round_trips) = shared.dispatch.send(&mut conn, &call).await;
        shared
            .metrics
            .round_trips_of(shared.dispatch.serving(), round_trips);
        result
    }

    fn span(
        &self,
        operation: &'static str,
        tokens: u64,
        deadline: Option<Duration>,
    ) -> tracing::Span {
        let shared = &self.shared;
        tracing::debug_span!(
            "throttle",
            operation,
            limiter = %shared.name,
            keys = shared.keys.len(),
            tokens,
            strategy = ?shared.strategy,
            backend = shared.dispatch.serving().name(),
            deadline = ?deadline,
            waited = Empty,
            round_trips = Empty,
            outcome = Empty,
        )
    }
}

/// Gives a reservation's tokens back if the call is dropped while it waits to use them.
struct Refund<'a, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    limiter: &'a MultiLimiter<C>,
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
}

impl<C> Drop for Refund<'_, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        let Some(tickets) = self.tickets.take() else {
            return;
        };
        // Never block a drop: the give-back runs as a task of its own, if there is a runtime.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let limiter = self.limiter.clone();
        let tokens = self.tokens;
        runtime.spawn(async move {
            if let Err(err) = limiter.give(tokens, &tickets).await {
                tracing::debug!(error = %err, "could not give back the tokens of a dropped call");
            }
        });
    }
}

impl<C> Throttle for MultiLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        MultiLimiter::name(self)
    }

    fn acquire_with(&self, demand: Demand) -> impl Future<Output = Result<Grant, Error>> + Send {
        MultiLimiter::acquire_with(self, demand)
    }

    fn try_acquire_with(
        &self,
        demand: Demand,
    ) -> impl Future<Output = Result<TryAcquire, Error>> + Send {
        MultiLimiter::try_acquire_with(self, demand)
    }

    fn pause(&self, retry_after: Duration) -> impl Future<Output = Result<Duration, Error>> + Send {
        MultiLimiter::pause(self, retry_after)
    }

    fn give_back(&self, grant: Grant) -> impl Future<Output = Result<u64, Error>> + Send {
        MultiLimiter::give_back(self, grant)
    }

    fn peek(&self) -> impl Future<Output = Result<BucketState, Error>> + Send {
        MultiLimiter::peek(self)
    }

    fn cut(&self, cut: Cut) -> impl Future<Output = Result<CutReport, Error>> + Send {
        MultiLimiter::cut(self, cut)
    }

    fn sync(&self, count: SupplierCount) -> impl Future<Output = Result<bool, Error>> + Send {
        MultiLimiter::sync(self, count)
    }

    fn settle(
        &self,
        grant: Grant,
        actual: u64,
    ) -> impl Future<Output = Result<Settled, Error>> + Send {
        MultiLimiter::settle(self, grant, actual)
    }

    fn count(&self, event: HttpEvent) {
        self.shared.metrics.event(event.into());
    }

    fn metrics(&self) -> MetricsSnapshot {
        MultiLimiter::metrics(self)
    }

    fn on_unreachable(&self) -> Unreachable {
        self.shared.unreachable
    }

    fn time_to_serve(
        &self,
        calls: u64,
        tokens: u64,
    ) -> impl Future<Output = Result<Duration, Error>> + Send {
        MultiLimiter::time_to_serve(self, calls, tokens)
    }
}
