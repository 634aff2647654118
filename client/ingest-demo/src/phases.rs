//! The three phases against one mock database: retry on error, the backlog, and the backlog
//! with a worker SIGKILLed mid-run. Each starts with the database's bucket full and ends with
//! its numbers measured by the database itself.

use std::collections::HashSet;
use std::time::{Duration, Instant as StdInstant, SystemTime, UNIX_EPOCH};

use redis_throttle::backlog::{Backlog, BacklogStats};
use redis_throttle::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis_throttle::redis::streams::StreamPendingCountReply;
use redis_throttle::{redis, Limiter, Quota};
use serde::Serialize;
use tokio::time::Instant;

use crate::cli::RunArgs;
use crate::db::{Arrival, Database, Verdict, RU_PER_WRITE};
use crate::fleet::Fleet;
use crate::wire::WorkerReport;

/// The database's provisioning, and the shared bucket's: 20 000 RU of burst, 20 000 RU/s.
pub const CAPACITY_RU: u64 = 20_000;
pub const RATE_RU: u64 = 20_000;
/// The workers' read size: small next to the rate (2 000 records/s), so a record waits in a
/// worker's hands a few ms at most.
const BATCH: usize = 16;
/// Phase 3 kills a worker once this share of the records is stored.
const KILL_AT: f64 = 0.3;
/// The demo checks the database and the queues this often.
const POLL: Duration = Duration::from_millis(10);

/// A write as the charts and tables use it: seconds after the phase's start.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub t: f64,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Serialize)]
pub struct Wave {
    /// The try: 1 for the first send of every record, 2 for the first retry, ...
    pub attempt: u32,
    pub sent: u64,
    pub stored: u64,
    pub refused: u64,
    /// When the database saw the first write of this try, and over how long they came.
    pub first_s: f64,
    pub span_s: f64,
    /// The most the database's bucket can store of them: a full bucket when the first one
    /// arrives plus the refill over their span (writes of other tries only take from that).
    pub most_stored: u64,
    /// The document's arithmetic: every try arrives at once, a second apart.
    pub document_sent: u64,
    pub document_stored: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RetrySummary {
    pub phase: &'static str,
    pub title: &'static str,
    pub records: u64,
    pub workers: u32,
    pub sent: u64,
    pub refused: u64,
    pub stored: u64,
    pub duplicates: u64,
    pub errors: u64,
    /// From the start to the last record stored, by the database's clock.
    pub time_s: f64,
    /// The bucket cannot store them all sooner: (records·RU − burst) / rate.
    pub min_time_s: f64,
    /// Refused at least, by the waves' bounds.
    pub least_refused: u64,
    pub document_sent: u64,
    pub document_refused: u64,
    pub document_time_s: f64,
    pub waves: Vec<Wave>,
    /// Each record's id stored exactly once, and nothing else.
    pub all_stored_once: bool,
    #[serde(skip)]
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StreamStats {
    pub stream: String,
    pub depth: u64,
    pub in_flight: u64,
    pub queued_cost: u64,
    pub oldest_age_ms: Option<u64>,
    pub drain_time_s: f64,
}

impl StreamStats {
    fn new(stream: &str, stats: &BacklogStats) -> StreamStats {
        StreamStats {
            stream: stream.to_owned(),
            depth: stats.depth,
            in_flight: stats.in_flight,
            queued_cost: stats.queued_cost,
            oldest_age_ms: stats.oldest_age.map(|d| d.as_millis() as u64),
            drain_time_s: stats.drain_time.as_secs_f64(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct KillSummary {
    pub worker: u32,
    /// When it was killed, after the start, and how many records were stored by then.
    pub at_s: f64,
    pub stored_before: u64,
    /// Records it had read and not acknowledged: left pending in the consumer groups.
    pub held: u64,
    pub claim_idle_s: f64,
    /// From the kill to the first of its records written again by another worker.
    pub claimed_after_s: Option<f64>,
    /// Records the survivors took over (XAUTOCLAIM).
    pub claimed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BacklogSummary {
    pub phase: &'static str,
    pub title: &'static str,
    pub records: u64,
    pub workers: u32,
    pub queue_a: u64,
    pub queue_b: u64,
    pub sent: u64,
    pub refused: u64,
    /// Distinct records in the database.
    pub stored: u64,
    /// Writes of a record already there (at least once delivery): ignored by the database.
    pub duplicates: u64,
    pub errors: u64,
    /// Pushed and not in the database; in the database and never pushed.
    pub lost: u64,
    pub unexpected: u64,
    /// The shared bucket's burst (the database's less the margin); its rate is the database's.
    pub bucket_capacity_ru: u64,
    /// The database cannot store them all sooner: (records·RU − its burst) / rate.
    pub database_min_s: f64,
    /// The shared bucket's burst at once, then its rate: (records·RU − burst) / rate.
    pub ideal_s: f64,
    /// Predicted before the start from the backlogs' stats and the bucket.
    pub predicted_s: f64,
    pub bucket_remaining: u64,
    pub stats: Vec<StreamStats>,
    /// From the start to the last record stored, by the database's clock.
    pub finish_s: f64,
    /// From the start until the demo saw both queues empty.
    pub drained_s: f64,
    /// The last handler call began this long after the start (its tokens were just granted).
    pub last_grant_s: f64,
    /// The longest write, handler call to answer.
    pub max_trip_s: f64,
    pub max_wait_s: f64,
    pub throttled: u64,
    pub claimed: u64,
    pub handed_back: u64,
    pub dead_letters: u64,
    pub kill: Option<KillSummary>,
    /// When the database refused a write, in seconds after the start.
    pub refused_at_s: Vec<f64>,
    #[serde(skip)]
    pub points: Vec<Point>,
}

pub struct Env<'a> {
    pub args: &'a RunArgs,
    pub redis_url: &'a str,
    pub db: &'a Database,
    pub run_id: String,
}

impl Env<'_> {
    pub fn new<'a>(args: &'a RunArgs, redis_url: &'a str, db: &'a Database) -> Env<'a> {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        Env {
            args,
            redis_url,
            db,
            run_id: format!("{}-{ms}", std::process::id()),
        }
    }

    fn records(&self) -> u64 {
        u64::from(self.args.records)
    }

    /// Each phase meets the database with its whole allowance, as after a quiet moment.
    async fn quiet(&self) {
        let full_in = self.db.full_in();
        if !full_in.is_zero() {
            tokio::time::sleep(full_in.min(Duration::from_secs(5)) + Duration::from_millis(50))
                .await;
        }
        self.db.take_log();
        self.db.take_stored();
    }
}

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

/// Records the bucket stores at most from a full bucket over `span`: whole writes of the
/// burst plus the refill, in exact integer arithmetic.
pub fn most_stored(span: Duration) -> u64 {
    let ru = u128::from(CAPACITY_RU) + span.as_nanos() * u128::from(RATE_RU) / 1_000_000_000;
    u64::try_from(ru / u128::from(RU_PER_WRITE)).unwrap_or(u64::MAX)
}

/// The burst in records, and records per second.
fn burst_records() -> u64 {
    CAPACITY_RU / RU_PER_WRITE
}

/// The time a bucket of `capacity` RU at the quota needs for `records` from full:
/// (records·RU − capacity) / rate.
pub fn ideal(records: u64, capacity: u64) -> Duration {
    let ru = (records * RU_PER_WRITE).saturating_sub(capacity);
    Duration::from_nanos(
        u64::try_from(u128::from(ru) * 1_000_000_000 / u128::from(RATE_RU)).unwrap_or(u64::MAX),
    )
}

/// The document's retry arithmetic: every try arrives at once, a second apart, and the
/// bucket (full again after a second) stores a burst of each.
pub fn document_waves(records: u64) -> Vec<(u64, u64)> {
    let burst = burst_records();
    let mut waves = Vec::new();
    let mut left = records;
    while left > 0 && waves.len() < 1_000 {
        let stored = left.min(burst);
        waves.push((left, stored));
        left -= stored;
    }
    waves
}

pub async fn retry_phase(env: &Env<'_>) -> Result<RetrySummary, String> {
    env.quiet().await;
    let records = env.records();
    let workers = env.args.workers;
    eprintln!(
        "ingest-demo: phase 1, retry on error: {workers} workers send all {records} records at once \
         and retry each refused one after Retry-After..."
    );
    let share = records.div_ceil(u64::from(workers));
    let mut arg_lists = Vec::new();
    for index in 0..u64::from(workers) {
        let first = index * share;
        let count = share.min(records.saturating_sub(first));
        arg_lists.push(vec![
            "retry-worker".to_owned(),
            format!("--index={index}"),
            format!("--db={}", env.db.url()),
            format!("--first={first}"),
            format!("--count={count}"),
        ]);
    }
    let mut fleet = Fleet::spawn(arg_lists).await?;
    let start = fleet.start().await?;
    let reports = fleet.reports(start + Duration::from_secs(150)).await?;
    let arrivals = env.db.take_log();
    let stored_ids = env.db.take_stored();
    let start = start.into_std();

    let expected: HashSet<String> = (0..records).map(|n| format!("r{n:06}")).collect();
    let count = |v: Verdict| arrivals.iter().filter(|a| a.verdict == v).count() as u64;
    let (stored, duplicates, refused) = (
        count(Verdict::Stored),
        count(Verdict::Duplicate),
        count(Verdict::Refused),
    );
    let last_stored = arrivals
        .iter()
        .filter(|a| a.verdict == Verdict::Stored)
        .map(|a| a.at)
        .max()
        .unwrap_or(start);

    let document = document_waves(records);
    let tries = arrivals.iter().map(|a| a.attempt).max().unwrap_or(0);
    let mut waves = Vec::new();
    for attempt in 1..=tries.max(document.len() as u32) {
        let of: Vec<&Arrival> = arrivals.iter().filter(|a| a.attempt == attempt).collect();
        let (first, last) = (of.iter().map(|a| a.at).min(), of.iter().map(|a| a.at).max());
        let span = match (first, last) {
            (Some(first), Some(last)) => last - first,
            _ => Duration::ZERO,
        };
        let n = |v: Verdict| of.iter().filter(|a| a.verdict == v).count() as u64;
        let doc = document
            .get(attempt as usize - 1)
            .copied()
            .unwrap_or((0, 0));
        waves.push(Wave {
            attempt,
            sent: of.len() as u64,
            stored: n(Verdict::Stored) + n(Verdict::Duplicate),
            refused: n(Verdict::Refused),
            first_s: first.map_or(0.0, |f| secs_between(start, f)),
            span_s: span.as_secs_f64(),
            most_stored: (of.len() as u64).min(most_stored(span)),
            document_sent: doc.0,
            document_stored: doc.1,
        });
    }
    let least_refused = waves.iter().map(|w| w.sent - w.most_stored).sum();
    // Counted by the database; the workers' own count says the same unless a write was lost
    // on the way (an error).
    let sent = arrivals.len() as u64;
    let errors: u64 = reports.iter().map(|r| r.errors).sum();
    Ok(RetrySummary {
        phase: "retry",
        title: "phase 1: retry on error",
        records,
        workers,
        sent,
        refused,
        stored,
        duplicates,
        errors,
        time_s: secs_between(start, last_stored),
        min_time_s: ideal(records, CAPACITY_RU).as_secs_f64(),
        least_refused,
        document_sent: document.iter().map(|w| w.0).sum(),
        document_refused: document.iter().map(|w| w.0 - w.1).sum(),
        document_time_s: document.len().saturating_sub(1) as f64,
        waves,
        all_stored_once: stored_ids == expected && stored == records,
        points: points(&arrivals, start),
    })
}

async fn connect(url: &str) -> Result<ConnectionManager, String> {
    let client = redis::Client::open(url).map_err(|e| format!("bad Redis URL {url}: {e}"))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(5)))
        .set_number_of_retries(2);
    tokio::time::timeout(
        Duration::from_secs(10),
        ConnectionManager::new_with_config(client, config),
    )
    .await
    .map_err(|_| format!("no connection to {url} within 10 s"))?
    .map_err(|e| format!("cannot connect to {url}: {e}"))
}

pub async fn backlog_phase(env: &Env<'_>, kill: bool) -> Result<BacklogSummary, String> {
    env.quiet().await;
    let records = env.records();
    let workers = env.args.workers;
    let (phase, title, n) = if kill {
        ("kill", "phase 3: backlog, a worker SIGKILLed mid-run", 3)
    } else {
        ("backlog", "phase 2: backlog", 2)
    };
    let base = format!("ingest-demo:{}:p{n}", env.run_id);
    let key = format!("{base}:bucket");
    let streams = [format!("{base}:A"), format!("{base}:B")];
    let group = "writers";
    let claim_idle = Duration::from_millis(env.args.claim_idle_ms);
    let capacity = CAPACITY_RU
        .saturating_sub(env.args.margin_ru)
        .max(RU_PER_WRITE);

    let mut arg_lists = Vec::new();
    for index in 0..workers {
        let mut args = vec![
            "backlog-worker".to_owned(),
            format!("--index={index}"),
            format!("--db={}", env.db.url()),
            format!("--redis-url={}", env.redis_url),
            format!("--key={key}"),
            format!("--group={group}"),
            format!("--capacity={capacity}"),
            format!("--rate={RATE_RU}"),
            format!("--claim-idle-ms={}", env.args.claim_idle_ms),
            format!("--batch={BATCH}"),
        ];
        args.extend(streams.iter().map(|s| format!("--stream={s}")));
        arg_lists.push(args);
    }
    let mut fleet = Fleet::spawn(arg_lists).await?;

    // The API: two kinds of record, a queue each (the document's queues A and B).
    let conn = connect(env.redis_url).await?;
    let backlogs = [
        Backlog::new(conn.clone(), streams[0].as_str(), group),
        Backlog::new(conn.clone(), streams[1].as_str(), group),
    ];
    let queue_a = records / 2;
    let sizes = [queue_a, records - queue_a];
    eprintln!(
        "ingest-demo: {title}: the API pushes {} records into queue A and {} into queue B...",
        sizes[0], sizes[1]
    );
    let mut pushed = HashSet::new();
    for (backlog, size) in backlogs.iter().zip(sizes) {
        let mut left = size;
        while left > 0 {
            let chunk = left.min(1_000);
            let batch = (0..chunk).map(|_| (b"{\"ru\":10}".to_vec(), RU_PER_WRITE));
            let ids = backlog.push_batch(batch).await.map_err(|e| e.to_string())?;
            pushed.extend(
                ids.iter()
                    .map(|id| crate::worker::doc_id(backlog.stream(), id)),
            );
            left -= chunk;
        }
    }

    // The prediction, before any worker starts: the queued cost at the quota, from the
    // bucket's state now.
    let quota = Quota::new(capacity, RATE_RU).map_err(|e| e.to_string())?;
    let limiter = Limiter::builder(key.as_str(), quota.clone())
        .name("ingest-demo")
        .build(conn.clone())
        .map_err(|e| e.to_string())?;
    let mut stats = Vec::new();
    let mut queued = 0;
    for backlog in &backlogs {
        let s = backlog.stats(&limiter).await.map_err(|e| e.to_string())?;
        queued += s.queued_cost;
        stats.push(StreamStats::new(backlog.stream(), &s));
    }
    let bucket = limiter.peek().await.map_err(|e| e.to_string())?;
    // Both queues go through one bucket: their costs add up before the bucket's tokens count.
    let predicted = quota
        .token_interval()
        .saturating_mul(u32::try_from(queued.saturating_sub(bucket.remaining)).unwrap_or(u32::MAX));
    eprintln!(
        "ingest-demo: {title}: {queued} RU queued, bucket {} RU: predicted to finish in {:.3} s; \
         {workers} workers start...",
        bucket.remaining,
        predicted.as_secs_f64()
    );

    let start = fleet.start().await?;
    let deadline = start + predicted * 3 + Duration::from_secs(30);
    let mut killed = None;
    let drained_at;
    loop {
        tokio::time::sleep(POLL).await;
        let now = Instant::now();
        if now > deadline {
            return Err(format!(
                "{title}: the queues were not empty {:?} after the start",
                deadline - start
            ));
        }
        let stored = env.db.stored_count() as u64;
        if kill && killed.is_none() && stored as f64 >= records as f64 * KILL_AT {
            fleet.kill(0).await?;
            let at = Instant::now();
            let held = held_by(&conn, &streams, group, "worker-0").await?;
            eprintln!(
                "ingest-demo: {title}: SIGKILLed worker 0 at {:.3} s with {stored} records stored; \
                 records it had read and not acknowledged: {held}",
                (at - start).as_secs_f64()
            );
            killed = Some((at, stored, held));
        }
        if depth(&conn, &streams).await? == 0 {
            drained_at = now;
            break;
        }
    }
    fleet.stop().await?;
    let reports = fleet
        .reports(Instant::now() + Duration::from_secs(60))
        .await?;
    let arrivals = env.db.take_log();
    let stored_ids = env.db.take_stored();
    let mut dead_letters = 0;
    for backlog in &backlogs {
        dead_letters += backlog
            .stats(&limiter)
            .await
            .map_err(|e| e.to_string())?
            .dead_letters;
    }
    let start_std = start.into_std();
    let count = |v: Verdict| arrivals.iter().filter(|a| a.verdict == v).count() as u64;
    let finish = arrivals
        .iter()
        .filter(|a| a.verdict == Verdict::Stored)
        .map(|a| a.at)
        .max()
        .unwrap_or(start_std);
    let sum = |f: fn(&WorkerReport) -> u64| reports.iter().map(f).sum::<u64>();
    let max = |f: fn(&WorkerReport) -> u64| reports.iter().map(f).max().unwrap_or(0);
    let kill = killed.map(|(at, stored_before, held)| {
        let at_std = at.into_std();
        // Another worker's write of a record delivered more than once, after the kill.
        let again = arrivals
            .iter()
            .filter(|a| a.at > at_std && a.attempt > 1)
            .map(|a| a.at)
            .min();
        KillSummary {
            worker: 0,
            at_s: (at - start).as_secs_f64(),
            stored_before,
            held,
            claim_idle_s: claim_idle.as_secs_f64(),
            claimed_after_s: again.map(|t| (t - at_std).as_secs_f64()),
            claimed: sum(|r| r.claimed),
        }
    });
    Ok(BacklogSummary {
        phase,
        title,
        records,
        workers,
        queue_a: sizes[0],
        queue_b: sizes[1],
        sent: arrivals.len() as u64,
        refused: count(Verdict::Refused),
        stored: stored_ids.len() as u64,
        duplicates: count(Verdict::Duplicate),
        errors: sum(|r| r.errors),
        lost: pushed.difference(&stored_ids).count() as u64,
        unexpected: stored_ids.difference(&pushed).count() as u64,
        bucket_capacity_ru: capacity,
        database_min_s: ideal(records, CAPACITY_RU).as_secs_f64(),
        ideal_s: ideal(records, capacity).as_secs_f64(),
        predicted_s: predicted.as_secs_f64(),
        bucket_remaining: bucket.remaining,
        stats,
        finish_s: secs_between(start_std, finish),
        drained_s: (drained_at - start).as_secs_f64(),
        last_grant_s: max(|r| r.last_grant_us) as f64 / 1e6,
        max_trip_s: max(|r| r.max_trip_us) as f64 / 1e6,
        max_wait_s: max(|r| r.max_wait_us) as f64 / 1e6,
        throttled: sum(|r| r.throttled),
        claimed: sum(|r| r.claimed),
        handed_back: sum(|r| r.handed_back),
        dead_letters,
        kill,
        refused_at_s: arrivals
            .iter()
            .filter(|a| a.verdict == Verdict::Refused)
            .map(|a| secs_between(start_std, a.at))
            .collect(),
        points: points(&arrivals, start_std),
    })
}

/// Records not yet acknowledged in both queues (acknowledged records are deleted).
async fn depth(conn: &ConnectionManager, streams: &[String]) -> Result<u64, String> {
    let mut pipe = redis::pipe();
    for stream in streams {
        pipe.cmd("XLEN").arg(stream);
    }
    let mut conn = conn.clone();
    let lens: Vec<u64> = pipe
        .query_async(&mut conn)
        .await
        .map_err(|e| format!("XLEN: {e}"))?;
    Ok(lens.iter().sum())
}

/// Records `consumer` read and did not acknowledge, in both queues.
async fn held_by(
    conn: &ConnectionManager,
    streams: &[String],
    group: &str,
    consumer: &str,
) -> Result<u64, String> {
    let mut held = 0;
    for stream in streams {
        let mut conn = conn.clone();
        let reply: StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(stream)
            .arg(group)
            .arg("-")
            .arg("+")
            .arg(10_000)
            .arg(consumer)
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("XPENDING: {e}"))?;
        held += reply.ids.len() as u64;
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_numbers() {
        let waves = document_waves(10_000);
        let sent: Vec<u64> = waves.iter().map(|w| w.0).collect();
        assert_eq!(sent, [10_000, 8_000, 6_000, 4_000, 2_000]);
        assert_eq!(sent.iter().sum::<u64>(), 30_000);
        assert_eq!(ideal(10_000, CAPACITY_RU), Duration::from_secs(4));
        assert_eq!(
            ideal(10_000, CAPACITY_RU - 200),
            Duration::from_millis(4_010)
        );
        assert_eq!(most_stored(Duration::ZERO), 2_000);
        assert_eq!(most_stored(Duration::from_micros(499)), 2_000);
        assert_eq!(most_stored(Duration::from_micros(500)), 2_001);
        assert_eq!(most_stored(Duration::from_millis(1_500)), 5_000);
    }
}
