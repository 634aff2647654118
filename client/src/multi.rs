//! Several limits taken together: one `THROTTLE.MTAKE` round trip per call, from every
//! bucket or from none.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use throttle_bucket::{Command, Limit, MTakeArgs, MAX_KEYS};
use tracing::field::Empty;
use tracing::Instrument;

use crate::backend::{Call, Dispatch};
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::reply::{self, TakeReply};
use crate::waiting;
use crate::{Backend, Error, MetricsSnapshot, Quota, QuotaError, Strategy};

/// Several limits at once, all or nothing: suppliers publish more than one (10 per second
/// and 500 per minute; a per-workflow share and the supplier's global quota; requests and
/// bytes). A call is granted only when every bucket can give its cost, waits for the slowest
/// one, and takes from each bucket as of the moment it will be used, so no bucket's tokens
/// are wasted on a call another bucket refuses. One `THROTTLE.MTAKE` round trip per call.
///
/// In Redis Cluster every key must be in one hash slot: give them one hash tag, like
/// `{supplier}:per-second` and `{supplier}:per-minute` (the server refuses others with
/// `CROSSSLOT`). Through redis-rs's cluster connection a module call costs a `MOVED`
/// redirection on top: redis-rs routes a command it does not know by its first argument, here
/// `numkeys`. [`Backend::Script`] has no such cost (`EVALSHA` is routed by its first key).
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
/// Dropping a waiting call leaves its tokens taken (there is no give-back for a multi-take):
/// the fleet then sends a little less than it could, never more.
pub struct MultiLimiter<C> {
    conn: C,
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    keys: Vec<String>,
    /// Each key's quota and cost, in key order, as THROTTLE.MTAKE takes them.
    limits: Vec<Limit>,
    strategy: Strategy,
    dispatch: Dispatch,
    metrics: Metrics,
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
#[derive(Clone, Debug, Default)]
pub struct MultiLimiterBuilder {
    limits: Vec<(String, Quota, u64)>,
    strategy: Strategy,
    backend: Backend,
    name: Option<String>,
}

impl MultiLimiterBuilder {
    /// One more limit: the bucket at `key` with `quota`, `cost` tokens per call.
    pub fn limit(mut self, key: impl Into<String>, quota: Quota, cost: u64) -> Self {
        self.limits.push((key.into(), quota, cost));
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

    /// Builds the limiter over `conn`: 1 to 16 limits on distinct keys, each cost at most its
    /// capacity, or [`Error::InvalidQuota`]. Makes no round trip.
    pub fn build<C>(self, conn: C) -> Result<MultiLimiter<C>, Error> {
        let problem = |problem: &str| QuotaError::Limits {
            problem: problem.to_owned(),
        };
        if self.limits.is_empty() || self.limits.len() > MAX_KEYS {
            return Err(problem(&format!("{} given", self.limits.len())).into());
        }
        for (i, (key, quota, cost)) in self.limits.iter().enumerate() {
            quota.check_tokens(*cost)?;
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
            .iter()
            .map(|(_, quota, cost)| Limit {
                quota: *quota.bucket(),
                tokens: *cost,
                floor: None,
            })
            .collect();
        Ok(MultiLimiter {
            conn,
            shared: Arc::new(Shared {
                metrics: Metrics::new(&name),
                name,
                keys,
                limits,
                strategy: self.strategy,
                dispatch: Dispatch::new(self.backend),
            }),
        })
    }
}

/// What a granted multi-limit call got.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MultiGrant {
    /// The whole time spent in the call: round trips and sleeps.
    pub waited: Duration,
    /// The part of [`MultiGrant::waited`] spent sleeping, as the server asked.
    pub slept: Duration,
    /// Whole tokens left in the tightest bucket right after the call.
    pub remaining: u64,
    /// `THROTTLE.MTAKE` round trips the call made (always 1 with [`Strategy::Reserve`]).
    pub round_trips: u32,
}

impl MultiLimiter<()> {
    /// A builder: add limits with [`MultiLimiterBuilder::limit`], then build over a
    /// connection.
    pub fn builder() -> MultiLimiterBuilder {
        MultiLimiterBuilder::default()
    }
}

impl<C> MultiLimiter<C> {
    /// The keys, in the order they were given.
    pub fn keys(&self) -> &[String] {
        &self.shared.keys
    }

    /// What serves the calls ([`Backend::Auto`] until the first call has answered).
    pub fn backend(&self) -> Backend {
        self.shared.dispatch.serving()
    }

    /// The counters of this limiter and its clones since it was built.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.shared.metrics.snapshot(self.backend())
    }
}

impl<C> MultiLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Takes every limit's cost, waiting as long as the slowest bucket needs.
    pub async fn acquire(&self) -> Result<MultiGrant, Error> {
        self.run(None).await
    }

    /// Like [`MultiLimiter::acquire`], but fails at once with [`Error::DeadlineExceeded`],
    /// taking nothing, if some bucket cannot give its cost within `deadline`.
    pub async fn acquire_within(&self, deadline: Duration) -> Result<MultiGrant, Error> {
        self.run(Some(deadline)).await
    }

    /// Takes every limit's cost if all are there now; never waits. `Ok(None)`: refused,
    /// nothing taken.
    pub async fn try_acquire(&self) -> Result<Option<MultiGrant>, Error> {
        let start = tokio::time::Instant::now();
        let reply = self.take(0).await?;
        let waited = start.elapsed();
        if !reply.granted {
            self.shared.metrics.denied();
            return Ok(None);
        }
        self.shared.metrics.granted(waited);
        Ok(Some(MultiGrant {
            waited,
            slept: Duration::ZERO,
            remaining: reply.remaining,
            round_trips: 1,
        }))
    }

    async fn run(&self, deadline: Option<Duration>) -> Result<MultiGrant, Error> {
        let shared = &self.shared;
        let span = tracing::debug_span!(
            "throttle",
            operation = "acquire_all",
            limiter = %shared.name,
            keys = shared.keys.len(),
            strategy = ?shared.strategy,
            backend = shared.dispatch.serving().name(),
            deadline = ?deadline,
            waited = Empty,
            round_trips = Empty,
            outcome = Empty,
        );
        let policy = Policy::new(shared.strategy, deadline);
        let outcome = waiting::run(
            policy,
            &shared.metrics,
            |max_wait_ms| self.take(max_wait_ms),
            |_| (),
        )
        .instrument(span)
        .await?;
        Ok(MultiGrant {
            waited: outcome.waited,
            slept: outcome.slept,
            remaining: outcome.reply.remaining,
            round_trips: outcome.round_trips,
        })
    }

    /// One `THROTTLE.MTAKE` round trip.
    async fn take(&self, max_wait_ms: u64) -> Result<TakeReply, Error> {
        let shared = &self.shared;
        let args = MTakeArgs::new(&shared.limits, max_wait_ms).ok_or_else(|| {
            Error::from(QuotaError::Limits {
                problem: format!("{} given", shared.limits.len()),
            })
        })?;
        let keys: Vec<&str> = shared.keys.iter().map(String::as_str).collect();
        let call = Call {
            command: Command::MTake,
            keys: &keys,
            args: args.words(),
        };
        let mut conn = self.conn.clone();
        let result = shared.dispatch.send(&mut conn, &call).await;
        shared.metrics.round_trip(shared.dispatch.serving());
        let reply = result
            .and_then(|value| {
                reply::mtake(&value, keys.len()).map_err(|reply| Error::UnexpectedReply { reply })
            })
            .inspect_err(|err| {
                shared.metrics.error();
                tracing::debug!(error = %err, "THROTTLE.MTAKE failed");
                tracing::Span::current().record("outcome", "error");
            })?;
        Ok(reply)
    }
}
