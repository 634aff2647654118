//! Phase 4's interactive side, in the demo's process: queries of [`RU_PER_QUERY`] at
//! [`QUERIES_PER_S`] on the bulk load's limiter key, open loop (query `i` is due `i` periods
//! after the start, however the ones before it fare), and between them a probe timing one
//! Redis round trip (`THROTTLE.PEEK`) on the same connection, which a query's wait is
//! compared with.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis_throttle::redis::aio::ConnectionManager;
use redis_throttle::{Demand, Limiter, Quota};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{timeout, Instant};

use crate::db::RU_PER_QUERY;
use crate::phases::{Env, RATE_RU};
use demo_support::http::warm_client;
use demo_support::redis_server::connect_async as connect;

/// Interactive queries a second, and so one every `PERIOD`.
pub const QUERIES_PER_S: u64 = 50;
const PERIOD: Duration = Duration::from_millis(1_000 / QUERIES_PER_S);
/// Round-trip probes per period, spread between the queries.
const PROBES: u32 = 3;
/// HTTP connections the queries go out on (a query takes about a ms: a few are enough).
const CONNECTIONS: usize = 4;
/// Bounds: one query's whole life, and the number of queries of one run (10 minutes).
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_QUERIES: u32 = 600 * QUERIES_PER_S as u32;

/// One interactive query's wait, as its caller saw it.
#[derive(Debug, Clone, Copy)]
pub struct Query {
    /// When it was due, and when it called the limiter, after the start.
    pub at: Duration,
    pub issued: Duration,
    /// From the call to the limiter until the tokens were usable: round trips and sleeps.
    pub wait: Duration,
    /// The part of the wait spent sleeping for tokens, as the server asked (0: granted at once).
    pub slept: Duration,
    pub round_trips: u32,
}

/// A run's queries and round trips.
#[derive(Debug, Default)]
pub struct Samples {
    pub queries: Vec<Query>,
    pub round_trips: Vec<Duration>,
}

/// Connected and warm, not yet started.
#[derive(Clone)]
pub struct Interactive {
    limiter: Limiter<ConnectionManager>,
    client: reqwest::Client,
    db: String,
}

/// The queries running; [`Running::stop`] ends them.
pub struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<Samples, String>>,
}

impl Interactive {
    /// A limiter on the bulk load's `key` with its quota (`capacity`, the rate), and warm
    /// HTTP connections to the database.
    pub async fn connect(env: &Env<'_>, key: &str, capacity: u64) -> Result<Interactive, String> {
        let quota = Quota::new(capacity, RATE_RU).map_err(|e| e.to_string())?;
        let limiter = Limiter::builder(key, quota)
            .name("interactive")
            .build(connect(env.redis_url).await?)
            .map_err(|e| e.to_string())?;
        // The first command on a connection costs more than the others: not in the samples.
        limiter.peek().await.map_err(|e| e.to_string())?;
        let db = env.db.url().trim_end_matches('/').to_owned();
        let client = warm_client(&db, "the database", CONNECTIONS).await?;
        Ok(Interactive {
            limiter,
            client,
            db,
        })
    }

    /// Starts the queries (and the probe) at `start`.
    pub fn run_from(self, start: Instant) -> Running {
        let (stop, stopped) = watch::channel(false);
        Running {
            stop,
            task: tokio::spawn(self.schedule(start, stopped)),
        }
    }

    /// A query every period and `PROBES` probes between them, each a task of its own, until
    /// stopped; then every one of them, collected.
    async fn schedule(
        self,
        start: Instant,
        mut stopped: watch::Receiver<bool>,
    ) -> Result<Samples, String> {
        let mut queries = Vec::new();
        let mut probes = Vec::new();
        for i in 0..MAX_QUERIES {
            let due = start + PERIOD * i;
            if !until(due, &mut stopped).await {
                break;
            }
            queries.push(tokio::spawn(self.clone().query(i, (start, due))));
            for k in 1..=PROBES {
                if !until(due + PERIOD * k / (PROBES + 1), &mut stopped).await {
                    break;
                }
                probes.push(tokio::spawn(probe(self.limiter.clone())));
            }
        }
        Ok(Samples {
            queries: collect(queries).await?,
            round_trips: collect(probes).await?,
        })
    }

    /// Query `i`, due at `due`: its tokens, then the database.
    async fn query(self, i: u32, (start, due): (Instant, Instant)) -> Result<Query, String> {
        let began = Instant::now();
        let grant = self
            .limiter
            .acquire_with(Demand::tokens(RU_PER_QUERY))
            .await
            .map_err(|e| format!("interactive query {i}: {e}"))?;
        let wait = began.elapsed();
        let response = self
            .client
            .get(format!("{}/query/q{i}", self.db))
            .send()
            .await
            .map_err(|e| format!("interactive query {i}: HTTP: {e}"))?;
        // Answered or refused, the database counts it (its log).
        let _ = response.bytes().await;
        Ok(Query {
            at: due - start,
            issued: began - start,
            wait,
            slept: grant.slept,
            round_trips: grant.round_trips,
        })
    }
}

impl Running {
    /// No more queries; the ones under way finish (each bounded), and all are returned.
    pub async fn stop(self) -> Result<Samples, String> {
        let _ = self.stop.send(true);
        self.task
            .await
            .map_err(|e| format!("the interactive queries failed: {e}"))?
    }
}

/// One round trip to Redis on the queries' connection, timed.
async fn probe(limiter: Limiter<ConnectionManager>) -> Result<Duration, String> {
    let began = Instant::now();
    limiter
        .peek()
        .await
        .map_err(|e| format!("round-trip probe: {e}"))?;
    Ok(began.elapsed())
}

/// Sleeps until `due`; false if stopped first.
async fn until(due: Instant, stopped: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        biased;
        _ = stopped.wait_for(|s| *s) => false,
        () = tokio::time::sleep_until(due) => true,
    }
}

/// Every task's result, each within `QUERY_TIMEOUT` from when it is looked at.
async fn collect<T>(tasks: Vec<JoinHandle<Result<T, String>>>) -> Result<Vec<T>, String> {
    let mut results = Vec::with_capacity(tasks.len());
    for task in tasks {
        let result = timeout(QUERY_TIMEOUT, task)
            .await
            .map_err(|_| format!("an interactive call took over {QUERY_TIMEOUT:?}"))?
            .map_err(|e| format!("an interactive task failed: {e}"))??;
        results.push(result);
    }
    Ok(results)
}

/// How many of `queries` the bulk load's `floor` cannot cover: those that reach the bucket
/// while the queries just before them, faster than the refill puts their tokens back, have
/// spent the floor (from when they were issued). The bulk load takes nothing while the
/// bucket is under its floor, so the queries' deficit is a queue: each adds its tokens, the
/// rate drains it; a query sleeps when what is left of the floor is less than its own.
pub fn beyond_floor(queries: &[Query], floor: u64) -> u64 {
    let mut issued: Vec<Duration> = queries.iter().map(|q| q.issued).collect();
    issued.sort_unstable();
    let ru_per_ns = RATE_RU as f64 / 1e9;
    let mut beyond = 0;
    for (j, t) in issued.iter().enumerate() {
        // The deficit when query j arrives: the most any run of queries just before it
        // took beyond the refill since the run began (a run from more than 1 s back would
        // have to be 2 000 queries long).
        let deficit = issued[..j]
            .iter()
            .rev()
            .take_while(|s| t.saturating_sub(**s) <= Duration::from_secs(1))
            .enumerate()
            .map(|(n, s)| {
                (n as f64 + 1.0) * RU_PER_QUERY as f64 - (*t - *s).as_nanos() as f64 * ru_per_ns
            })
            .fold(0.0_f64, f64::max);
        if floor as f64 - deficit < RU_PER_QUERY as f64 {
            beyond += 1;
        }
    }
    beyond
}

/// The `q` quantile (0 < q <= 1) of `samples` by nearest rank; zero for none.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len().max(1)) - 1)
        .copied()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let ms = |n: u64| Duration::from_millis(n);
        let samples: Vec<Duration> = (1..=100).rev().map(ms).collect();
        assert_eq!(quantile(&samples, 0.5), ms(50));
        assert_eq!(quantile(&samples, 0.99), ms(99));
        assert_eq!(quantile(&samples, 1.0), ms(100));
        assert_eq!(quantile(&[ms(7)], 0.99), ms(7));
        assert_eq!(quantile(&[], 0.99), Duration::ZERO);
    }

    fn issued_at(ms: &[f64]) -> Vec<Query> {
        ms.iter()
            .map(|ms| Query {
                at: Duration::ZERO,
                issued: Duration::from_secs_f64(ms / 1e3),
                wait: Duration::ZERO,
                slept: Duration::ZERO,
                round_trips: 1,
            })
            .collect()
    }

    #[test]
    fn the_floor_covers_queries_unless_a_burst_outruns_the_refill() {
        // One every 20 ms: each finds the floor whole.
        let steady: Vec<f64> = (0..100).map(|i| f64::from(i) * 20.0).collect();
        assert_eq!(beyond_floor(&issued_at(&steady), 100), 0);
        assert_eq!(beyond_floor(&issued_at(&steady), 10), 0);
        // 12 at once against a floor of 100 RU: the first 10 take it, 2 must wait.
        assert_eq!(beyond_floor(&issued_at(&[5.0; 12]), 100), 2);
        // 12 over 6 ms: the refill (20 RU/ms) puts back more than they take.
        let spread: Vec<f64> = (0..12).map(|i| f64::from(i) * 0.5).collect();
        assert_eq!(beyond_floor(&issued_at(&spread), 100), 0);
        // A floor below one query's tokens covers none of them.
        assert_eq!(beyond_floor(&issued_at(&[1.0]), 5), 1);
    }
}
