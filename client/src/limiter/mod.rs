//! The limiter: one bucket (key + quota) over a redis-rs async connection. The I/O lives
//! here; what to do with each reply is [`crate::policy`]'s decision.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::Value;
use throttle_bucket::{Command, GiveArgs, PauseArgs, PeekArgs, TakeArgs, Word, MAX_WAIT_MS};
use tokio::time::Instant;
use tracing::field::Empty;
use tracing::Instrument;

use crate::backend::{Call, Dispatch};
use crate::bulk_turn::BulkTurn;
use crate::grant::Receipt;
use crate::metrics::{Event, Metrics};
use crate::policy::Policy;
use crate::reply::{self, TakeReply};
use crate::waiting::{self, record, Held};
use crate::{
    Backend, BucketState, Cut, CutReport, Demand, Error, Grant, HttpEvent, MetricsSnapshot,
    Priority, Quota, Settled, Strategy, SupplierCount, SupplierUnit, Throttle, TryAcquire,
    Unreachable, DEFAULT_MAX_WAIT,
};

mod pushback;

/// A shared token bucket in Redis: a key and a [`Quota`], over a redis-rs async connection.
///
/// Every call first takes tokens from the bucket with one `THROTTLE.TAKE` (or its Lua twin,
/// see [`Backend`]); a call that finds none waits (see [`Strategy`]) instead of failing. All limiters on the same key and
/// server share the bucket, whichever process they are in, so a fleet as a whole never goes
/// above the quota.
///
/// `C` is any redis-rs async connection that is cheap to clone: a
/// [`ConnectionManager`](https://docs.rs/redis/1/redis/aio/struct.ConnectionManager.html) (reconnects by itself), a
/// [`MultiplexedConnection`](redis::aio::MultiplexedConnection), or a cluster connection
/// (`redis::cluster_async::ClusterConnection`, with the `cluster` feature). Each call
/// clones it; its timeouts (connection and response) are the limiter's. Cloning the limiter
/// is cheap too, and the clones share their counters.
///
/// # Cancellation
///
/// Dropping a call's future is safe at any point, and never blocks. What the bucket keeps
/// depends on when:
/// - before the reply came back: the server may or may not have taken the tokens;
/// - with [`Strategy::Reserve`], during the sleep after a reservation: the tokens are
///   **given back** (`THROTTLE.GIVE`, sent from a task spawned on the current tokio runtime,
///   best effort) if no other caller reserved after them; with others queued behind, they
///   stay taken and every reservation keeps its time (as with Go's `x/time/rate`
///   `Reservation.Cancel`);
/// - with [`Strategy::Poll`], during a sleep: nothing is held.
///
/// A call that got its tokens and then did not use them (the request failed before it
/// reached the supplier) gives them back with [`Limiter::give_back`].
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use redis_throttle::{Limiter, Quota, Rate, Strategy};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379")?;
/// let conn = redis::aio::ConnectionManager::new(client).await?;
///
/// // 10 status queries per second across the fleet, in bursts of at most 10.
/// let quota = Quota::new(10, Rate::per_second(10))?;
/// let limiter = Limiter::new(conn.clone(), "quota:payments:status", quota.clone());
///
/// let grant = limiter.acquire().await?; // waits as long as the bucket needs
/// println!("waited {:?}, {} left", grant.waited, grant.remaining);
///
/// // Do not wait more than 200 ms: fails at once, taking nothing, if that is not enough.
/// match limiter.acquire_within(Duration::from_millis(200)).await {
///     Ok(_) => { /* call the supplier */ }
///     Err(redis_throttle::Error::DeadlineExceeded { needed, .. }) => {
///         println!("busy: the tokens would take {needed:?}");
///     }
///     Err(other) => return Err(other.into()),
/// }
///
/// // A bucket of bytes, several tokens per call, polling instead of reserving.
/// let bytes = Limiter::builder("quota:upload-bytes", Quota::new(1 << 30, Rate::per_second(1 << 27))?)
///     .strategy(Strategy::poll())
///     .build(conn)?;
/// bytes.acquire_n(64 * 1024).await?;
/// # Ok(())
/// # }
/// ```
pub struct Limiter<C> {
    conn: C,
    shared: Arc<Shared>,
}

struct Shared {
    key: String,
    name: String,
    quota: Quota,
    cost: u64,
    strategy: Strategy,
    dispatch: Dispatch,
    metrics: Metrics,
    unit: SupplierUnit,
    check_pause: bool,
    bulk_turn: BulkTurn,
    max_wait: Duration,
    unreachable: Unreachable,
}

impl<C: Clone> Clone for Limiter<C> {
    fn clone(&self) -> Self {
        Limiter {
            conn: self.conn.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C> fmt::Debug for Limiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = &self.shared;
        f.debug_struct("Limiter")
            .field("name", &shared.name)
            .field("key", &shared.key)
            .field("quota", &shared.quota)
            .field("cost", &shared.cost)
            .field("strategy", &shared.strategy)
            .field("backend", &shared.dispatch.serving())
            .finish_non_exhaustive()
    }
}

/// Configures a [`Limiter`]; from [`Limiter::builder`].
///
/// ```
/// use redis_throttle::{Limiter, Quota, QuotaError, Error, Strategy};
///
/// let quota = Quota::new(100, 50u64)?;
/// let builder = Limiter::builder("quota:search", quota)
///     .cost(5)
///     .strategy(Strategy::Reserve)
///     .name("search-api");
/// # let _ = builder;
///
/// // The cost is checked when the limiter is built, before any call.
/// let conn = (); // stands for a redis connection here
/// let err = Limiter::builder("quota:search", Quota::new(2, 1u64)?).cost(3).build(conn);
/// assert!(matches!(err, Err(Error::InvalidQuota(QuotaError::Tokens { tokens: 3, capacity: 2 }))));
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct LimiterBuilder {
    key: String,
    quota: Quota,
    cost: u64,
    strategy: Strategy,
    backend: Backend,
    name: Option<String>,
    unit: SupplierUnit,
    check_pause: bool,
    max_wait: Duration,
    unreachable: Unreachable,
}

impl LimiterBuilder {
    /// Tokens [`Limiter::acquire`] and [`Limiter::try_acquire`] take per call (default 1);
    /// at least 1 and at most the capacity.
    pub fn cost(mut self, tokens: u64) -> Self {
        self.cost = tokens;
        self
    }

    /// How calls wait (default [`Strategy::Reserve`]).
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Where the commands run (default [`Backend::Auto`]: the module where it is loaded,
    /// else the Lua script).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// The limiter's name in tracing spans and in the `metrics` facade's `limiter` label
    /// (default: the key). Give one when keys are many or carry user data.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Which of the supplier's counts the bucket is in, for [`Limiter::sync`] (default
    /// [`SupplierUnit::Calls`]).
    pub fn supplier_unit(mut self, unit: SupplierUnit) -> Self {
        self.unit = unit;
        self
    }

    /// Whether a reserved call looks at the bucket before it is sent (default `true`): one
    /// `THROTTLE.PEEK` after the sleep, so that a pause another replica set while it slept
    /// holds it back (it acquires again after the pause) instead of letting it reach a
    /// supplier that asked for quiet. A call granted without a sleep sends at once. Turn it off
    /// to save the round trip where nothing pauses the bucket.
    pub fn pause_check(mut self, check: bool) -> Self {
        self.check_pause = check;
        self
    }

    /// How long a call waits for its tokens unless its [`Demand`] says (default
    /// [`DEFAULT_MAX_WAIT`], a minute): a call that would wait longer fails at once with
    /// [`Error::DeadlineExceeded`], taking nothing. `Duration::MAX`: as long as the bucket
    /// needs.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// What a call does while Redis cannot be reached (default [`Unreachable::FailClosed`]:
    /// it fails with [`Error::Connection`]; [`Unreachable::FailOpen`] lets it through,
    /// counted and logged).
    pub fn on_unreachable(mut self, unreachable: Unreachable) -> Self {
        self.unreachable = unreachable;
        self
    }

    /// Builds the limiter over `conn`. Fails with [`Error::InvalidQuota`] if the cost is 0 or
    /// above the capacity. Makes no round trip: a missing server or module shows up at the
    /// first call.
    pub fn build<C>(self, conn: C) -> Result<Limiter<C>, Error> {
        self.quota.check_cost(self.cost)?;
        let name = self.name.unwrap_or_else(|| self.key.clone());
        Ok(Limiter {
            conn,
            shared: Arc::new(Shared {
                metrics: Metrics::new(&name),
                key: self.key,
                name,
                quota: self.quota,
                cost: self.cost,
                strategy: self.strategy,
                dispatch: Dispatch::new(self.backend),
                unit: self.unit,
                check_pause: self.check_pause,
                bulk_turn: BulkTurn::default(),
                max_wait: self.max_wait,
                unreachable: self.unreachable,
            }),
        })
    }
}

impl Limiter<()> {
    /// A builder for a limiter on `key` with `quota`, to set the cost per call, the
    /// strategy or the name. The connection comes last, in [`LimiterBuilder::build`].
    pub fn builder(key: impl Into<String>, quota: Quota) -> LimiterBuilder {
        LimiterBuilder {
            key: key.into(),
            quota,
            cost: 1,
            strategy: Strategy::default(),
            backend: Backend::default(),
            name: None,
            unit: SupplierUnit::default(),
            check_pause: true,
            max_wait: DEFAULT_MAX_WAIT,
            unreachable: Unreachable::default(),
        }
    }
}

impl<C> Limiter<C> {
    /// A limiter on `key` with `quota`, one token per call, the [`Strategy::Reserve`]
    /// strategy. Makes no round trip.
    pub fn new(conn: C, key: impl Into<String>, quota: Quota) -> Limiter<C> {
        Limiter::builder(key, quota)
            .build(conn)
            .expect("a cost of 1 fits every valid quota")
    }

    /// The bucket's key.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The limiter's name (the key unless [`LimiterBuilder::name`] set one).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The bucket's quota.
    pub fn quota(&self) -> &Quota {
        &self.shared.quota
    }

    /// Tokens per call for [`Limiter::acquire`] and [`Limiter::try_acquire`].
    pub fn cost(&self) -> u64 {
        self.shared.cost
    }

    /// How calls wait.
    pub fn strategy(&self) -> Strategy {
        self.shared.strategy
    }

    /// What serves the calls: [`Backend::Module`] or [`Backend::Script`], or
    /// [`Backend::Auto`] until the first call has answered.
    pub fn backend(&self) -> Backend {
        self.shared.dispatch.serving()
    }

    /// The counters of this limiter and its clones since it was built.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.shared.metrics.snapshot(Some(self.backend()))
    }

    /// The connection the limiter uses.
    pub fn connection(&self) -> &C {
        &self.conn
    }
}

impl<C> Limiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Takes [`cost`](LimiterBuilder::cost) tokens, waiting as long as the bucket needs.
    ///
    /// With [`Strategy::Reserve`] this is one round trip and one sleep of exactly the
    /// time the server asks for; see [`Limiter`] for what dropping the future leaves behind.
    pub async fn acquire(&self) -> Result<Grant, Error> {
        self.acquire_with(Demand::call()).await
    }

    /// Takes `tokens` tokens (at most the capacity; 0 takes nothing), waiting as long as
    /// the bucket needs.
    pub async fn acquire_n(&self, tokens: u64) -> Result<Grant, Error> {
        self.acquire_with(Demand::tokens(tokens)).await
    }

    /// Like [`Limiter::acquire`], but fails at once with [`Error::DeadlineExceeded`],
    /// taking nothing, if the tokens will not be there within `deadline`.
    ///
    /// With [`Strategy::Reserve`] the server decides: the request carries
    /// `MAXWAIT <deadline in ms, rounded down>`, so a wait beyond the deadline is refused
    /// without touching the bucket. The deadline bounds the wait; the round trip comes on
    /// top of it.
    pub async fn acquire_within(&self, deadline: Duration) -> Result<Grant, Error> {
        self.acquire_with(Demand::call().within(deadline)).await
    }

    /// [`Limiter::acquire_n`] with a deadline, as in [`Limiter::acquire_within`].
    pub async fn acquire_n_within(&self, tokens: u64, deadline: Duration) -> Result<Grant, Error> {
        self.acquire_with(Demand::tokens(tokens).within(deadline))
            .await
    }

    /// Takes what `demand` asks for: its tokens (the cost unless it says), within its
    /// deadline, at its priority. A [`Priority::Bulk`] call takes only while its floor stays in
    /// the bucket (`THROTTLE.TAKE ... FLOOR`) and never reserves: refused, it sleeps the exact
    /// time the server names and takes again; the bulk calls of a limiter and its clones take
    /// turns, so that they do not wake together to the same tokens.
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
        let floor = self.floor(tokens, demand.priority);
        let deadline = Some(demand.deadline.unwrap_or(self.shared.max_wait));
        let span = self.span("acquire", tokens, deadline);
        let (policy, turn) = match floor {
            None => (Policy::new(self.shared.strategy, deadline), None),
            Some(_) => {
                let turn = self
                    .shared
                    .bulk_turn
                    .take(deadline)
                    .await
                    .inspect_err(|_| {
                        self.shared.metrics.gave_up();
                    })?;
                (
                    Policy::new(self.shared.strategy, turn.deadline).floored(),
                    Some(turn),
                )
            }
        };
        let in_line = turn.as_ref().map_or(Duration::ZERO, |t| t.waited);
        let outcome = waiting::run(
            policy,
            &self.shared.metrics,
            |max_wait_ms| self.checked_take(tokens, max_wait_ms, floor),
            |reply| Refund::new(self, tokens, reply.ticket),
            || self.pause_check(),
        )
        .instrument(span)
        .await?;
        drop(turn);
        Ok(Grant {
            remaining: outcome.reply.remaining,
            round_trips: outcome.round_trips,
            ..Grant::new(
                tokens,
                outcome.waited + in_line,
                outcome.slept,
                Receipt::Tickets(vec![outcome.reply.ticket]),
            )
        })
    }

    /// Takes [`cost`](LimiterBuilder::cost) tokens if they are there now; never waits
    /// (one round trip, no reservation).
    pub async fn try_acquire(&self) -> Result<TryAcquire, Error> {
        self.try_acquire_with(Demand::call()).await
    }

    /// Takes `tokens` tokens if they are there now; never waits.
    pub async fn try_acquire_n(&self, tokens: u64) -> Result<TryAcquire, Error> {
        self.try_acquire_with(Demand::tokens(tokens)).await
    }

    /// Takes what `demand` asks for if it is there now (its floor kept, for a bulk call);
    /// never waits, whatever its deadline.
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
        let floor = self.floor(tokens, demand.priority);
        let span = self.span("try_acquire", tokens, Some(Duration::ZERO));
        async {
            let metrics = &self.shared.metrics;
            let start = Instant::now();
            let reply = self.checked_take(tokens, 0, floor).await?;
            if reply.granted {
                let waited = start.elapsed();
                metrics.granted(waited);
                record(waited, 1, "granted");
                Ok(TryAcquire::Granted(Grant {
                    remaining: reply.remaining,
                    round_trips: reply.round_trips,
                    ..Grant::new(
                        tokens,
                        waited,
                        Duration::ZERO,
                        Receipt::Tickets(vec![reply.ticket]),
                    )
                }))
            } else {
                metrics.denied();
                record(start.elapsed(), 1, "denied");
                Ok(TryAcquire::Denied {
                    retry_after: reply.wait,
                })
            }
        }
        .instrument(span)
        .await
    }

    /// The floor a bulk call of `tokens` keeps: at most what the bucket can keep beside the
    /// call; `None` for an interactive call (or a floor of 0).
    fn floor(&self, tokens: u64, priority: Priority) -> Option<u64> {
        match priority {
            Priority::Interactive => None,
            Priority::Bulk { floor } => {
                let room = self.shared.quota.capacity().saturating_sub(tokens);
                Some(floor.min(room)).filter(|f| *f > 0)
            }
        }
    }

    /// The bucket as it stands, its pause and its rate (`THROTTLE.PEEK`: read-only, so it
    /// also answers on a read-only replica and while writes are paused).
    pub async fn peek(&self) -> Result<BucketState, Error> {
        let quota = &self.shared.quota;
        let args = PeekArgs {
            quota: *quota.bucket(),
        };
        let value = self.send(Command::Peek, args.words()).await?;
        let reply = reply::peek(&value).map_err(|reply| Error::UnexpectedReply { reply })?;
        Ok(BucketState {
            paused_for: Duration::from_millis(reply.paused_ms),
            factor_bp: reply.factor_bp,
            ..BucketState::new(
                reply.remaining,
                Duration::from_millis(reply.reset_ms),
                quota.capacity(),
                quota.token_interval(),
            )
        })
    }

    /// The supplier pushed back (HTTP 429 or 503 with `Retry-After`): stops the whole fleet
    /// on this bucket, not just this caller. After the call the bucket's next token is there
    /// `retry_after` from now (rounded up to whole ms, at least 1 ms), and refill resumes
    /// from that one token, with no burst. A pause never shortens a longer pause or the
    /// bucket's debt, so every replica that saw the 429 may call it. Returns how long until
    /// the next token (at least `retry_after`). Reservations granted before the pause keep
    /// their times, but a reserved call looks before it is sent (see
    /// [`LimiterBuilder::pause_check`]) and waits out a pause that covers it.
    pub async fn pause(&self, retry_after: Duration) -> Result<Duration, Error> {
        let ms = pause_ms(retry_after);
        self.shared.metrics.paused();
        tracing::debug!(key = %self.shared.key, ms, "pausing the bucket: the supplier pushed back");
        let args = PauseArgs {
            quota: *self.shared.quota.bucket(),
            pause_ms: ms,
        };
        let value = self.send(Command::Pause, args.words()).await?;
        let next = reply::integer(&value, Command::Pause)
            .map_err(|reply| Error::UnexpectedReply { reply })?;
        if next > ms {
            self.shared.metrics.event(Event::PauseUnchanged);
        }
        Ok(Duration::from_millis(next))
    }

    /// Gives back the tokens of a grant that were not used (the request failed before it
    /// reached the supplier), if no other caller took tokens after it: their reservations
    /// stay valid. Returns the tokens given back: 0 when a later call took tokens, and fewer
    /// than the grant's when the bucket has refilled meanwhile (never beyond full).
    pub async fn give_back(&self, grant: Grant) -> Result<u64, Error> {
        match grant.receipt {
            Receipt::Tickets(tickets) => match tickets.as_slice() {
                [ticket] => self.give(grant.tokens, *ticket).await,
                _ => Ok(0),
            },
            _ => Ok(0),
        }
    }

    async fn give(&self, tokens: u64, ticket: u64) -> Result<u64, Error> {
        if tokens == 0 || ticket == 0 {
            return Ok(0);
        }
        let args = GiveArgs {
            quota: *self.shared.quota.bucket(),
            tokens,
            ticket_us: ticket,
        };
        let value = self.send(Command::Give, args.words()).await?;
        let given = reply::integer(&value, Command::Give)
            .map_err(|reply| Error::UnexpectedReply { reply })?;
        self.shared.metrics.gave_back(given);
        tracing::debug!(key = %self.shared.key, tokens, given, "gave tokens back");
        Ok(given)
    }

    /// One take, with the token count checked first and failures counted.
    async fn checked_take(
        &self,
        tokens: u64,
        max_wait_ms: u64,
        floor: Option<u64>,
    ) -> Result<TakeReply, Error> {
        let result = match self.shared.quota.check_tokens(tokens) {
            Ok(()) => self.take(tokens, max_wait_ms, floor).await,
            Err(err) => Err(Error::from(err)),
        };
        result.inspect_err(|err| {
            debug_assert!(!err.is_give_up());
            self.shared.metrics.error();
            tracing::debug!(error = %err, "THROTTLE.TAKE failed");
            tracing::Span::current().record("outcome", "error");
        })
    }

    /// One `THROTTLE.TAKE key capacity rate [TOKENS n] [MAXWAIT ms] TICKET [FLOOR f]` round
    /// trip.
    async fn take(
        &self,
        tokens: u64,
        max_wait_ms: u64,
        floor: Option<u64>,
    ) -> Result<TakeReply, Error> {
        let args = TakeArgs {
            quota: *self.shared.quota.bucket(),
            tokens,
            max_wait_ms,
            ticket: true,
            floor,
        };
        let (value, round_trips) = self.send_counted(Command::Take, args.words()).await;
        let reply = reply::take(&value?).map_err(|reply| Error::UnexpectedReply { reply })?;
        Ok(TakeReply {
            round_trips,
            ..reply
        })
    }

    /// `command key <args>` to the backend: one round trip (more for the first call under
    /// `Auto`, or one that loads the library or script again).
    async fn send(&self, command: Command, args: Vec<Word<'_>>) -> Result<Value, Error> {
        self.send_counted(command, args).await.0
    }

    /// [`Limiter::send`], and the round trips it took.
    async fn send_counted(
        &self,
        command: Command,
        args: Vec<Word<'_>>,
    ) -> (Result<Value, Error>, u32) {
        let shared = &self.shared;
        let call = Call {
            command,
            keys: &[shared.key.as_str()],
            args,
        };
        let mut conn = self.conn.clone();
        let (result, trips) = shared.dispatch.send(&mut conn, &call).await;
        shared
            .metrics
            .round_trips_of(shared.dispatch.serving(), trips);
        (result, trips)
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
            key = %shared.key,
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
    limiter: &'a Limiter<C>,
    tokens: u64,
    ticket: u64,
    armed: bool,
}

impl<'a, C> Refund<'a, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn new(limiter: &'a Limiter<C>, tokens: u64, ticket: u64) -> Self {
        Refund {
            limiter,
            tokens,
            ticket,
            armed: true,
        }
    }
}

impl<C> Held for Refund<'_, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn release(mut self) {
        self.armed = false;
    }
}

impl<C> Drop for Refund<'_, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        if !self.armed || self.ticket == 0 {
            return;
        }
        // Never block a drop: the give-back runs as a task of its own, if there is a runtime
        // to run it (a drop outside any runtime leaves the tokens taken, as a crash would).
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let limiter = self.limiter.clone();
        let (tokens, ticket) = (self.tokens, self.ticket);
        runtime.spawn(async move {
            if let Err(err) = limiter.give(tokens, ticket).await {
                tracing::debug!(error = %err, "could not give back the tokens of a dropped call");
            }
        });
    }
}

impl<C> Throttle for Limiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        Limiter::name(self)
    }

    fn acquire_with(&self, demand: Demand) -> impl Future<Output = Result<Grant, Error>> + Send {
        Limiter::acquire_with(self, demand)
    }

    fn try_acquire_with(
        &self,
        demand: Demand,
    ) -> impl Future<Output = Result<TryAcquire, Error>> + Send {
        Limiter::try_acquire_with(self, demand)
    }

    fn pause(&self, retry_after: Duration) -> impl Future<Output = Result<Duration, Error>> + Send {
        Limiter::pause(self, retry_after)
    }

    fn give_back(&self, grant: Grant) -> impl Future<Output = Result<u64, Error>> + Send {
        Limiter::give_back(self, grant)
    }

    fn peek(&self) -> impl Future<Output = Result<BucketState, Error>> + Send {
        Limiter::peek(self)
    }

    fn cut(&self, cut: Cut) -> impl Future<Output = Result<CutReport, Error>> + Send {
        Limiter::cut(self, cut)
    }

    fn sync(&self, count: SupplierCount) -> impl Future<Output = Result<bool, Error>> + Send {
        Limiter::sync(self, count)
    }

    fn settle(
        &self,
        grant: Grant,
        actual: u64,
    ) -> impl Future<Output = Result<Settled, Error>> + Send {
        Limiter::settle(self, grant, actual)
    }

    fn count(&self, event: HttpEvent) {
        self.shared.metrics.event(event.into());
    }

    fn metrics(&self) -> MetricsSnapshot {
        Limiter::metrics(self)
    }

    fn on_unreachable(&self) -> Unreachable {
        self.shared.unreachable
    }
}
