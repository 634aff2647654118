//! Phases 2 and 3, the backlog: an API pushes the records into two streams (queues A and B),
//! the bucket's prediction is read from their stats before any worker starts, and the workers
//! drain both through one shared bucket; in phase 3 one of them is SIGKILLed mid-run. Four
//! jobs, a function each: fill the queues, predict the finish, drain (and kill), tally.
//! Phase 4 (`priority`) fills and drains its queues with the same functions.

use redis_throttle::prelude::*;
use std::collections::HashSet;
use std::time::Duration;

use demo_support::child::command_lines;
use redis_throttle::backlog::{Backlog, BacklogStats};
use redis_throttle::redis::aio::ConnectionManager;
use redis_throttle::{Limiter, Quota};
use serde::Serialize;
use tokio::time::Instant;

use crate::db::{Arrival, Verdict, RU_PER_WRITE};
use crate::phases::queues::{depth, held_by};
use crate::phases::{
    ideal, points, reports, secs_between, Env, Point, Workers, CAPACITY_RU, RATE_RU, START_LEAD,
};
use crate::wire::{BacklogPlan, DemoMessage, WorkerReport};
use demo_support::redis_server::connect_async as connect;

/// The workers' read size: small next to the rate (2 000 records/s), so a record waits in a
/// worker's hands a few ms at most.
const BATCH: usize = 16;
/// Phase 3 kills a worker once this share of the records is stored.
const KILL_AT: f64 = 0.3;
/// The demo checks the database and the queues this often.
const POLL: Duration = Duration::from_millis(10);
/// The consumer group every worker reads the queues in.
const GROUP: &str = "writers";
/// Records the API pushes in one round trip.
const PUSH_CHUNK: u64 = 1_000;

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
    pub workers: u32,
    pub queue_a: u64,
    pub queue_b: u64,
    #[serde(flatten)]
    pub writes: Writes,
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
    /// From the start until the demo saw both queues empty.
    pub drained_s: f64,
    /// The last handler call began this long after the start (its tokens were just granted).
    pub last_grant_s: f64,
    /// The longest write, handler call to answer.
    pub max_trip_s: f64,
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

/// A phase's writes as the database counted them, against the records it was to store.
#[derive(Debug, Clone, Serialize)]
pub struct Writes {
    pub records: u64,
    pub sent: u64,
    pub refused: u64,
    /// Distinct records stored; writes of one already there (at least once delivery: ignored
    /// by the database); pushed and never stored; stored and never pushed.
    pub stored: u64,
    pub duplicates: u64,
    pub lost: u64,
    pub unexpected: u64,
    pub stored_once: bool,
    /// The workers' writes that got no answer or an unexpected one.
    pub errors: u64,
    /// From the start to the last record stored, by the database's clock.
    pub finish_s: f64,
    /// The longest wait of a record for its tokens.
    pub max_wait_s: f64,
}

impl Writes {
    /// `writes` (the database's log of them) and the ids it stored, against `pushed`.
    pub(super) fn count(
        writes: &[Arrival],
        (pushed, stored_ids): (&HashSet<String>, &HashSet<String>),
        reports: &[WorkerReport],
        start: std::time::Instant,
    ) -> Writes {
        let count = |v: Verdict| writes.iter().filter(|a| a.verdict == v).count() as u64;
        let finish = (writes.iter().filter(|a| a.verdict == Verdict::Stored))
            .map(|a| a.at)
            .max()
            .unwrap_or(start);
        let lost = pushed.difference(stored_ids).count() as u64;
        let unexpected = stored_ids.difference(pushed).count() as u64;
        let (records, stored) = (pushed.len() as u64, stored_ids.len() as u64);
        Writes {
            records,
            sent: writes.len() as u64,
            refused: count(Verdict::Refused),
            stored,
            duplicates: count(Verdict::Duplicate),
            lost,
            unexpected,
            stored_once: lost == 0 && unexpected == 0 && stored == records,
            errors: reports.iter().map(|r| r.errors).sum(),
            finish_s: secs_between(start, finish),
            max_wait_s: reports.iter().map(|r| r.max_wait_us).max().unwrap_or(0) as f64 / 1e6,
        }
    }
}

/// A backlog phase's names and knobs.
pub(super) struct Plan {
    phase: &'static str,
    pub(super) title: &'static str,
    /// Kill a worker mid-run (phase 3).
    kill: bool,
    pub(super) key: String,
    streams: [String; 2],
    claim_idle: Duration,
    /// The shared bucket's burst: the database's, less the margin.
    pub(super) capacity: u64,
    /// The workers take at bulk priority, leaving this floor (phase 4).
    pub(super) floor: Option<u64>,
}

impl Plan {
    fn new(env: &Env<'_>, kill: bool) -> Plan {
        let (phase, title, base) = if kill {
            ("kill", "phase 3: backlog, a worker SIGKILLed mid-run", "p3")
        } else {
            ("backlog", "phase 2: backlog", "p2")
        };
        Plan {
            kill,
            ..Plan::named(env, phase, title, base)
        }
    }

    /// A plan with its own keys (`base` in them), no kill, no floor.
    pub(super) fn named(
        env: &Env<'_>,
        phase: &'static str,
        title: &'static str,
        base: &str,
    ) -> Plan {
        let base = format!("ingest-demo:{}:{base}", env.run_id);
        Plan {
            phase,
            title,
            kill: false,
            key: format!("{base}:bucket"),
            streams: [format!("{base}:A"), format!("{base}:B")],
            claim_idle: Duration::from_millis(env.args.claim_idle_ms),
            capacity: CAPACITY_RU
                .saturating_sub(env.args.margin_ru)
                .max(RU_PER_WRITE),
            floor: None,
        }
    }

    /// Every worker's command line: the same plan.
    pub(super) fn worker_arg_lists(&self, env: &Env<'_>) -> Result<Vec<Vec<String>>, String> {
        let plan = BacklogPlan {
            db: env.db.url(),
            redis_url: env.redis_url.to_owned(),
            key: self.key.clone(),
            capacity: self.capacity,
            rate: RATE_RU,
            streams: self.streams.to_vec(),
            group: GROUP.to_owned(),
            claim_idle_ms: env.args.claim_idle_ms,
            batch: BATCH,
            floor: self.floor,
        };
        command_lines(
            "backlog-worker",
            std::iter::repeat_n(plan, env.args.workers as usize),
        )
    }
}

/// The two queues, filled.
pub(super) struct Queues {
    conn: ConnectionManager,
    backlogs: [Backlog<ConnectionManager>; 2],
    /// Records pushed into queue A and queue B.
    sizes: [u64; 2],
    /// Every record's document id.
    pub(super) pushed: HashSet<String>,
}

/// What the shared bucket says about the queues before the start.
struct Prediction {
    limiter: Limiter<ConnectionManager>,
    stats: Vec<StreamStats>,
    bucket_remaining: u64,
    predicted: Duration,
}

/// The queues drained: when, and the kill if there was one.
pub(super) struct Drained {
    pub(super) start: Instant,
    drained_at: Instant,
    /// When the worker was killed, the records stored by then, and those it held.
    killed: Option<(Instant, u64, u64)>,
    pub(super) reports: Vec<WorkerReport>,
}

pub async fn backlog_phase(env: &Env<'_>, kill: bool) -> Result<BacklogSummary, String> {
    env.quiet().await;
    let plan = Plan::new(env, kill);
    let mut workers = Workers::spawn("worker", plan.worker_arg_lists(env)?).await?;
    let queues = fill_queues(env, &plan).await?;
    let prediction = predict(env, &plan, &queues).await?;
    let start = workers.start(START_LEAD).await?;
    let deadline = start + prediction.predicted * 3 + Duration::from_secs(30);
    let drained = drain(env, &plan, &queues, (start, deadline), workers).await?;
    tally(env, &plan, &queues, prediction, drained).await
}

/// The API: two kinds of record, a queue each (the document's queues A and B).
pub(super) async fn fill_queues(env: &Env<'_>, plan: &Plan) -> Result<Queues, String> {
    let conn = connect(env.redis_url).await?;
    let backlogs = (plan.streams.each_ref()).map(|s| Backlog::new(conn.clone(), s.as_str(), GROUP));
    let records = env.records();
    let queue_a = records / 2;
    let sizes = [queue_a, records - queue_a];
    eprintln!(
        "ingest-demo: {}: the API pushes {} records into queue A and {} into queue B...",
        plan.title, sizes[0], sizes[1]
    );
    let mut pushed = HashSet::new();
    for (backlog, size) in backlogs.iter().zip(sizes) {
        let mut left = size;
        while left > 0 {
            let chunk = left.min(PUSH_CHUNK);
            let batch = (0..chunk).map(|_| (b"{\"ru\":10}".to_vec(), RU_PER_WRITE));
            let ids = backlog.push_batch(batch).await.map_err(|e| e.to_string())?;
            pushed.extend(
                ids.iter()
                    .map(|id| crate::worker::doc_id(backlog.stream(), id)),
            );
            left -= chunk;
        }
    }
    Ok(Queues {
        conn,
        backlogs,
        sizes,
        pushed,
    })
}

/// The prediction, before any worker starts: the queued cost at the quota, from the bucket's
/// state now.
async fn predict(env: &Env<'_>, plan: &Plan, queues: &Queues) -> Result<Prediction, String> {
    let quota = Quota::new(plan.capacity, RATE_RU).map_err(|e| e.to_string())?;
    let limiter = Limiter::builder(plan.key.as_str(), quota.clone())
        .name("ingest-demo")
        .build(queues.conn.clone())
        .map_err(|e| e.to_string())?;
    let mut stats = Vec::new();
    let mut queued = 0;
    for backlog in &queues.backlogs {
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
        "ingest-demo: {}: {queued} RU queued, bucket {} RU: predicted to finish in {:.3} s; \
         {} workers start...",
        plan.title,
        bucket.remaining,
        predicted.as_secs_f64(),
        env.args.workers
    );
    Ok(Prediction {
        limiter,
        stats,
        bucket_remaining: bucket.remaining,
        predicted,
    })
}

/// Watches the database and the queues, from the workers' `start` until both queues are
/// empty (killing worker 0 once `KILL_AT` of the records are stored, in phase 3) or the
/// `deadline` passes (an error), then stops the workers and takes their reports.
pub(super) async fn drain(
    env: &Env<'_>,
    plan: &Plan,
    queues: &Queues,
    (start, deadline): (Instant, Instant),
    mut workers: Workers,
) -> Result<Drained, String> {
    let title = plan.title;
    let records = env.records();
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
        if plan.kill && killed.is_none() && stored as f64 >= records as f64 * KILL_AT {
            workers.kill(0).await?;
            let at = Instant::now();
            let held = held_by(&queues.conn, &plan.streams, GROUP, "worker-0").await?;
            eprintln!(
                "ingest-demo: {title}: SIGKILLed worker 0 at {:.3} s with {stored} records stored; \
                 records it had read and not acknowledged: {held}",
                (at - start).as_secs_f64()
            );
            killed = Some((at, stored, held));
        }
        if depth(&queues.conn, &plan.streams).await? == 0 {
            drained_at = now;
            break;
        }
    }
    // Backlog workers finish the record they are on.
    workers.send(&DemoMessage::Stop).await?;
    let reports = reports(workers, Instant::now() + Duration::from_secs(60)).await?;
    Ok(Drained {
        start,
        drained_at,
        killed,
        reports,
    })
}

/// What the phase came to: the database's log and store, the workers' reports, and the
/// queues' dead letters, next to the prediction.
async fn tally(
    env: &Env<'_>,
    plan: &Plan,
    queues: &Queues,
    prediction: Prediction,
    drained: Drained,
) -> Result<BacklogSummary, String> {
    let records = env.records();
    let arrivals = env.db.take_log();
    let stored_ids = env.db.take_stored();
    let mut dead_letters = 0;
    for backlog in &queues.backlogs {
        dead_letters += backlog
            .stats(&prediction.limiter)
            .await
            .map_err(|e| e.to_string())?
            .dead_letters;
    }
    let (start, reports) = (drained.start, &drained.reports);
    let start_std = start.into_std();
    let sum = |f: fn(&WorkerReport) -> u64| reports.iter().map(f).sum::<u64>();
    let max = |f: fn(&WorkerReport) -> u64| reports.iter().map(f).max().unwrap_or(0);
    let kill = drained.killed.map(|(at, stored_before, held)| {
        let at_std = at.into_std();
        KillSummary {
            worker: 0,
            at_s: (at - start).as_secs_f64(),
            stored_before,
            held,
            claim_idle_s: plan.claim_idle.as_secs_f64(),
            claimed_after_s: written_again_after(&arrivals, at_std)
                .map(|t| (t - at_std).as_secs_f64()),
            claimed: sum(|r| r.claimed),
        }
    });
    Ok(BacklogSummary {
        phase: plan.phase,
        title: plan.title,
        workers: env.args.workers,
        queue_a: queues.sizes[0],
        queue_b: queues.sizes[1],
        writes: Writes::count(&arrivals, (&queues.pushed, &stored_ids), reports, start_std),
        bucket_capacity_ru: plan.capacity,
        database_min_s: ideal(records, CAPACITY_RU).as_secs_f64(),
        ideal_s: ideal(records, plan.capacity).as_secs_f64(),
        predicted_s: prediction.predicted.as_secs_f64(),
        bucket_remaining: prediction.bucket_remaining,
        stats: prediction.stats,
        drained_s: (drained.drained_at - start).as_secs_f64(),
        last_grant_s: max(|r| r.last_grant_us) as f64 / 1e6,
        max_trip_s: max(|r| r.max_trip_us) as f64 / 1e6,
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

/// The first write, after `at`, of a record delivered more than once: another worker's,
/// after the kill.
fn written_again_after(arrivals: &[Arrival], at: std::time::Instant) -> Option<std::time::Instant> {
    arrivals
        .iter()
        .filter(|a| a.at > at && a.attempt > 1)
        .map(|a| a.at)
        .min()
}
