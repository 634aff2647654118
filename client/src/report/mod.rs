//! The fleet's counters in Redis, for the operator's view: each process that asks
//! ([`FleetReport`], `.report(&fleet)` on a limiter's builder) writes every limiter's counters to
//! one small key per process and limiter, every period, with a TTL of three periods, so that a
//! process that stops drops out by itself. The writes run on a task of their own, off the call
//! path: a write that fails or is late never delays or fails a call; it is counted and logged.
//!
//! The key is `throttle:report:{KEY}:PROCESS` (in the bucket's cluster slot; a key with a hash
//! tag keeps its own), the value one line ([`Report`]); `SCAN MATCH throttle:report:*` finds
//! them all.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionLike;

use crate::wire::abort_on_drop::AbortOnDrop;
use crate::{Error, MetricsSnapshot};

mod counter;
mod line;

pub use counter::Counter;
pub use line::{Counts, Report};

/// How often a process reports unless told ([`FleetReport::every`]).
pub const DEFAULT_EVERY: Duration = Duration::from_secs(5);
/// The shortest period: a report is a write per limiter.
pub const MIN_EVERY: Duration = Duration::from_millis(100);
/// `SCAN MATCH` pattern of every report key.
pub const REPORT_PATTERN: &str = "throttle:report:*";
/// A report lives this many periods: one or two missed writes do not drop a process.
const KEPT_PERIODS: u32 = 3;

/// The key of `process`'s report of the limiter on `key`.
pub fn report_key(key: &str, process: &str) -> String {
    format!("throttle:report:{}:{process}", tagged(key))
}

/// `key` as its own hash tag, unless it has one (which then places the report in its slot).
fn tagged(key: &str) -> Cow<'_, str> {
    let has_tag = key
        .find('{')
        .and_then(|open| key.get(open + 1..))
        .and_then(|after| after.find('}'))
        .is_some_and(|close| close > 0);
    if has_tag || key.contains('}') {
        Cow::Borrowed(key)
    } else {
        Cow::Owned(format!("{{{key}}}"))
    }
}

/// What a limiter hands its reports: its counters, read when a report is due.
pub(crate) trait Reported: Send + Sync {
    fn snapshot(&self) -> MetricsSnapshot;
}

/// One process's reports of its limiters' counters to Redis, for the operator's view.
///
/// Built once per process over a connection of its own (a clone of the limiters' is fine),
/// then given to each limiter's builder (`.report(&fleet)`). Every period it writes, for each
/// limiter still alive, `SET throttle:report:{KEY}:PROCESS <line> PX <3 periods>`: one write
/// per limiter and period (at the default 5 s, 0.2 writes/s per limiter; about 300 bytes of
/// line). A failed write is counted in [`FleetReport::failures`], logged at debug level, and
/// tried again at the next period.
///
/// ```no_run
/// use redis_throttle::prelude::*;
/// use redis_throttle::report::FleetReport;
/// use redis_throttle::{Limiter, Quota};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let conn = redis_throttle::connect("redis://127.0.0.1:6379").await?;
/// let fleet = FleetReport::new(conn.clone())?; // one per process
/// let limiter = Limiter::builder("quota:pix", Quota::new(10, 10u64)?)
///     .report(&fleet)
///     .build(conn)?;
/// limiter.acquire().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct FleetReport {
    inner: Arc<Inner>,
}

struct Inner {
    process: String,
    period: Duration,
    limiters: Mutex<Vec<Watched>>,
    writes: AtomicU64,
    failures: AtomicU64,
    task: OnceLock<AbortOnDrop>,
}

/// One bucket of a limiter reported on, as the limiter has it.
#[derive(Clone, Debug)]
pub(crate) struct ReportedKey {
    pub(crate) key: String,
    pub(crate) capacity: u64,
    /// Tokens per second, as the limiter sends it.
    pub(crate) rate: String,
    /// The cap on calls in flight whose slots live in this bucket (a `MultiLimiter` holds its
    /// slots in its first bucket alone).
    pub(crate) max_in_flight: Option<u64>,
    /// The limiter's `max_wait`: the longest a call waits unless it gives its own deadline.
    pub(crate) max_wait: Duration,
}

/// A limiter reported on: its buckets, its counters, and what the last report said.
struct Watched {
    keys: Vec<ReportedKey>,
    limiter: Weak<dyn Reported>,
    last: Option<Counts>,
}

impl FleetReport {
    /// Reports every [`DEFAULT_EVERY`] over `conn`. Fails only outside a tokio runtime.
    pub fn new<C>(conn: C) -> Result<FleetReport, Error>
    where
        C: ConnectionLike + Clone + Send + Sync + 'static,
    {
        FleetReport::every(conn, DEFAULT_EVERY)
    }

    /// Reports every `period` (at least [`MIN_EVERY`]) over `conn`.
    pub fn every<C>(conn: C, period: Duration) -> Result<FleetReport, Error>
    where
        C: ConnectionLike + Clone + Send + Sync + 'static,
    {
        if period < MIN_EVERY {
            return Err(Error::Config {
                problem: format!(
                    "FleetReport::every({period:?}): report at most every {MIN_EVERY:?}; each \
                     report is a write per limiter"
                ),
            });
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::Config {
            problem: "FleetReport must be built inside a tokio runtime: it writes on a task"
                .to_owned(),
        })?;
        let inner = Arc::new(Inner {
            process: format!("{:016x}-{}", fastrand::u64(..), std::process::id()),
            period,
            limiters: Mutex::new(Vec::new()),
            writes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            task: OnceLock::new(),
        });
        let task = runtime.spawn(run(conn, Arc::downgrade(&inner)));
        let _ = inner.task.set(AbortOnDrop::new(&task));
        Ok(FleetReport { inner })
    }

    /// This process's name in its report keys and lines.
    pub fn process(&self) -> &str {
        &self.inner.process
    }

    /// Reports written.
    pub fn writes(&self) -> u64 {
        self.inner.writes.load(Relaxed)
    }

    /// Reports that failed (Redis down, a timeout, an ACL without the key).
    pub fn failures(&self) -> u64 {
        self.inner.failures.load(Relaxed)
    }

    /// Reports on `limiter` under each of its buckets from the next period on, while it lives.
    pub(crate) fn watch(&self, keys: Vec<ReportedKey>, limiter: Weak<dyn Reported>) {
        self.inner.lock().push(Watched {
            keys,
            limiter,
            last: None,
        });
    }
}

impl fmt::Debug for FleetReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetReport")
            .field("process", &self.inner.process)
            .field("period", &self.inner.period)
            .field("writes", &self.writes())
            .field("failures", &self.failures())
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Watched>> {
        self.limiters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The writes due now, `(key, line)`; forgets the limiters that are gone.
    fn due(&self, at_ms: u64) -> Vec<(String, String)> {
        let mut limiters = self.lock();
        limiters.retain(|watched| watched.limiter.strong_count() > 0);
        let mut due = Vec::new();
        for watched in limiters.iter_mut() {
            let Some(limiter) = watched.limiter.upgrade() else {
                continue;
            };
            let snapshot = limiter.snapshot();
            let total = Counts::of(&snapshot);
            let period = total.since(watched.last.as_ref().unwrap_or(&Counts::default()));
            for bucket in &watched.keys {
                let report = Report {
                    key: bucket.key.clone(),
                    process: self.process.clone(),
                    at_ms,
                    period_ms: u64::try_from(self.period.as_millis()).unwrap_or(u64::MAX),
                    capacity: bucket.capacity,
                    rate: bucket.rate.clone(),
                    in_flight: bucket.max_in_flight.map_or(0, |_| snapshot.in_flight.held),
                    max_in_flight: bucket.max_in_flight.unwrap_or(0),
                    max_wait_ms: Some(
                        u64::try_from(bucket.max_wait.as_millis()).unwrap_or(u64::MAX),
                    ),
                    total: total.clone(),
                    period: period.clone(),
                };
                due.push((report_key(&bucket.key, &self.process), report.encode()));
            }
            watched.last = Some(total);
        }
        due
    }
}

/// Writes the reports every period until the last handle is gone.
async fn run<C>(conn: C, inner: Weak<Inner>)
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let Some(period) = inner.upgrade().map(|inner| inner.period) else {
        return;
    };
    let keep_ms = u64::try_from((period * KEPT_PERIODS).as_millis()).unwrap_or(u64::MAX);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is at once: nothing has been counted yet.
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let due = strong.due(at_ms);
        drop(strong);
        for (key, line) in due {
            let mut conn = conn.clone();
            let mut set = redis::cmd("SET");
            set.arg(&key).arg(line).arg("PX").arg(keep_ms);
            let write = set.query_async::<()>(&mut conn);
            // A write may take at most half a period: the next is due then.
            let outcome = tokio::time::timeout(period / 2, write).await;
            let Some(strong) = inner.upgrade() else {
                return;
            };
            match outcome {
                Ok(Ok(())) => strong.writes.fetch_add(1, Relaxed),
                Ok(Err(err)) => {
                    tracing::debug!(%key, %err, "fleet report not written; next period again");
                    strong.failures.fetch_add(1, Relaxed)
                }
                Err(_) => {
                    tracing::debug!(%key, "fleet report timed out; next period again");
                    strong.failures.fetch_add(1, Relaxed)
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_key_is_in_its_buckets_slot() {
        assert_eq!(
            report_key("quota:pix", "p1"),
            "throttle:report:{quota:pix}:p1"
        );
        assert_eq!(report_key("{pix}:s", "p1"), "throttle:report:{pix}:s:p1");
        // No tag to keep: an empty `{}` is none, and a stray `}` cannot be wrapped.
        assert_eq!(report_key("a{}b", "p1"), "throttle:report:a{}b:p1");
        assert_eq!(report_key("a}b", "p1"), "throttle:report:a}b:p1");
    }
}
