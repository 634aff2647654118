//! The four phases against one mock database: retry on error (`retry`), the backlog, the
//! backlog with a worker SIGKILLed mid-run (both `backlog`), and the backlog at bulk
//! priority beside interactive queries (`priority`, its queries in `interactive`). Each
//! starts with the database's bucket full and ends with its numbers measured by the
//! database itself.

pub mod backlog;
pub mod interactive;
pub mod priority;
mod queues;
pub mod retry;

use std::time::{Duration, Instant as StdInstant};

use demo_support::fleet::Fleet;
use demo_support::mock_server::until_full;
use demo_support::redis_server::run_id;
use tokio::time::Instant;

use crate::cli::RunArgs;
use crate::db::{Arrival, Database, Verdict, RU_PER_WRITE};
use crate::wire::{WorkerMessage, WorkerReport};

/// The worker processes of a phase (`crate::worker`).
type Workers = Fleet<WorkerMessage>;
/// From "all ready" to the start: time for the start line to reach every worker.
const START_LEAD: Duration = Duration::from_millis(300);

/// The workers' reports, then their exits, by `by`.
async fn reports(workers: Workers, by: Instant) -> Result<Vec<WorkerReport>, String> {
    let messages = workers.reports(by, |_| true).await?;
    Ok(messages
        .into_iter()
        .map(|WorkerMessage::Report(report)| report)
        .collect())
}

/// The database's provisioning, and the shared bucket's: 20 000 RU of burst, 20 000 RU/s.
pub const CAPACITY_RU: u64 = 20_000;
pub const RATE_RU: u64 = 20_000;

/// A write as the charts and tables use it: seconds after the phase's start.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub t: f64,
    pub verdict: Verdict,
}

/// What every phase works with: the knobs, the Redis, the database, and this run's id (in
/// every key, so an earlier run's cannot interfere).
pub struct Env<'a> {
    pub args: &'a RunArgs,
    pub redis_url: &'a str,
    pub db: &'a Database,
    pub run_id: String,
}

impl Env<'_> {
    pub fn new<'a>(args: &'a RunArgs, redis_url: &'a str, db: &'a Database) -> Env<'a> {
        Env {
            args,
            redis_url,
            db,
            run_id: run_id(),
        }
    }

    fn records(&self) -> u64 {
        u64::from(self.args.records)
    }

    /// Each phase meets the database with its whole allowance, as after a quiet moment.
    async fn quiet(&self) {
        until_full(self.db.full_in()).await;
        self.db.take_log();
        self.db.take_stored();
    }
}

/// The database's log as the chart's points.
fn points(arrivals: &[Arrival], start: StdInstant) -> Vec<Point> {
    arrivals
        .iter()
        .map(|a| Point {
            t: secs_between(start, a.at),
            verdict: a.verdict,
        })
        .collect()
}

/// Seconds from `a` to `b`, negative when `b` is earlier.
fn secs_between(a: StdInstant, b: StdInstant) -> f64 {
    if b >= a {
        (b - a).as_secs_f64()
    } else {
        -(a - b).as_secs_f64()
    }
}

/// The time a bucket of `capacity` RU at the quota needs for `records` from full:
/// (records·RU − capacity) / rate.
pub fn ideal(records: u64, capacity: u64) -> Duration {
    time_for((records * RU_PER_WRITE).saturating_sub(capacity), RATE_RU)
}

/// How long `ru` take at `rate` RU/s, to the nanosecond.
pub fn time_for(ru: u64, rate: u64) -> Duration {
    Duration::from_nanos(
        u64::try_from(u128::from(ru) * 1_000_000_000 / u128::from(rate)).unwrap_or(u64::MAX),
    )
}
