//! Phase 4: the backlog drained beside interactive queries on the same limiter key, twice:
//! without priority, then with the bulk load at `Priority::Bulk { floor }`. Each run fills
//! the queues and drains them as phase 2 does, with the queries going meanwhile.

use std::time::Duration;

use serde::Serialize;

use crate::db::{Arrival, Verdict, RU_PER_QUERY, RU_PER_WRITE};
use crate::phases::backlog::{drain, fill_queues, Drained, Plan, Queues, Writes};
use crate::phases::interactive::{beyond_floor, quantile, Interactive, Samples, QUERIES_PER_S};
use crate::phases::{points, time_for, Env, Point, Workers, RATE_RU, START_LEAD};
use crate::wire::WorkerReport;

/// The target for the queries' p99 wait with the floor: this much over the round trip.
pub const TARGET_OVER_ROUND_TRIP: Duration = Duration::from_millis(2);
/// The target for the bulk load's finish: within this share of its ideal.
pub const TARGET_LATE: f64 = 0.05;

#[derive(Debug, Clone, Serialize)]
pub struct PrioritySummary {
    pub phase: &'static str,
    pub title: &'static str,
    pub records: u64,
    pub workers: u32,
    pub queue_a: u64,
    pub queue_b: u64,
    /// The shared bucket's burst (the database's less the margin); its rate is the database's.
    pub bucket_capacity_ru: u64,
    pub queries_per_s: u64,
    pub ru_per_query: u64,
    /// Without priority, then with the floor.
    pub runs: Vec<PriorityRun>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PriorityRun {
    pub label: String,
    /// The bulk load's floor; `None`: no priority (it reserves, as an interactive caller).
    pub floor_ru: Option<u64>,
    pub interactive: InteractiveFigures,
    pub bulk: BulkFigures,
    /// When each query was due and how long it waited for its tokens, for the chart.
    #[serde(skip)]
    pub waits: Vec<(f64, f64)>,
    #[serde(skip)]
    pub points: Vec<Point>,
}

/// The queries' side of a run; times in ms.
#[derive(Debug, Clone, Serialize)]
pub struct InteractiveFigures {
    pub queries: u64,
    /// Queries whose tokens were not there: the server made them sleep.
    pub slept: u64,
    /// With a floor: the queries it cannot cover, by when they were issued (a burst that
    /// spends it faster than the refill puts it back); `slept` is at most this.
    pub beyond_floor: Option<u64>,
    /// Queries that needed more than one round trip (none should).
    pub extra_round_trips: u64,
    pub wait_p50_ms: f64,
    pub wait_p99_ms: f64,
    pub wait_max_ms: f64,
    /// One Redis round trip on the queries' connection (`THROTTLE.PEEK`), between them.
    pub round_trip_samples: u64,
    pub round_trip_p50_ms: f64,
    pub round_trip_p99_ms: f64,
    pub round_trip_max_ms: f64,
    /// `TARGET_OVER_ROUND_TRIP` over the measured round trip's p99.
    pub target_p99_ms: f64,
    pub answered: u64,
    pub refused: u64,
}

/// The bulk load's side of a run.
#[derive(Debug, Clone, Serialize)]
pub struct BulkFigures {
    #[serde(flatten)]
    pub writes: Writes,
    /// The soonest the bucket allows beside the queries: its burst above the floor at once,
    /// then the rate they leave, (records·RU − (burst − floor)) / (rate − queries·RU).
    pub ideal_s: f64,
    /// Without the burst: records·RU / (rate − queries·RU).
    pub steady_ideal_s: f64,
    /// (finish − ideal) / ideal.
    pub late: f64,
    /// The workers' limiter requests, and per record done.
    pub round_trips: u64,
    pub round_trips_per_record: f64,
}

pub async fn priority_phase(env: &Env<'_>) -> Result<PrioritySummary, String> {
    let shared = run(env, None).await?;
    let floored = run(env, Some(env.args.floor_ru)).await?;
    let records = env.records();
    Ok(PrioritySummary {
        phase: "priority",
        title: "phase 4: bulk and interactive on one quota",
        records,
        workers: env.args.workers,
        queue_a: records / 2,
        queue_b: records - records / 2,
        bucket_capacity_ru: plan(env, None).capacity,
        queries_per_s: QUERIES_PER_S,
        ru_per_query: RU_PER_QUERY,
        runs: vec![shared, floored],
    })
}

/// One run, with the bulk load at `floor` (`None`: no priority).
async fn run(env: &Env<'_>, floor: Option<u64>) -> Result<PriorityRun, String> {
    env.quiet().await;
    let plan = plan(env, floor);
    let mut workers = Workers::spawn("worker", plan.worker_arg_lists(env)?).await?;
    let queues = fill_queues(env, &plan).await?;
    let load = Interactive::connect(env, &plan.key, plan.capacity).await?;
    let ideal = ideal(env.records(), plan.capacity, floor.unwrap_or(0));
    eprintln!(
        "ingest-demo: {}: {} queries/s of {RU_PER_QUERY} RU beside the bulk load, on one bucket \
         of {} RU; ideal finish {:.3} s; {} workers start...",
        plan.title,
        QUERIES_PER_S,
        plan.capacity,
        ideal.as_secs_f64(),
        env.args.workers
    );
    let start = workers.start(START_LEAD).await?;
    let queries = load.run_from(start);
    let deadline = start + ideal * 3 + Duration::from_secs(30);
    let drained = drain(env, &plan, &queues, (start, deadline), workers).await;
    // The queries stop with the bulk load, also when it failed.
    let samples = queries.stop().await?;
    let drained = drained?;
    Ok(tally(env, &plan, &queues, drained, &samples, ideal))
}

fn plan(env: &Env<'_>, floor: Option<u64>) -> Plan {
    let (title, base) = match floor {
        None => (
            "phase 4, run 1: one shared bucket, no priority",
            "p4-shared",
        ),
        Some(_) => (
            "phase 4, run 2: the bulk load at a priority floor",
            "p4-floor",
        ),
    };
    let mut plan = Plan::named(env, "priority", title, base);
    plan.floor = floor;
    plan
}

/// The soonest `records` can be stored beside the queries: the bucket's `capacity` less the
/// `floor` at once, then the rate less the queries'.
pub fn ideal(records: u64, capacity: u64, floor: u64) -> Duration {
    let ru = (records * RU_PER_WRITE).saturating_sub(capacity.saturating_sub(floor));
    at_bulk_rate(ru)
}

/// `ru` at the rate the queries leave.
fn at_bulk_rate(ru: u64) -> Duration {
    time_for(ru, RATE_RU - QUERIES_PER_S * RU_PER_QUERY)
}

fn tally(
    env: &Env<'_>,
    plan: &Plan,
    queues: &Queues,
    drained: Drained,
    samples: &Samples,
    ideal: Duration,
) -> PriorityRun {
    let arrivals = env.db.take_log();
    let stored_ids = env.db.take_stored();
    let start = drained.start.into_std();
    let label = match plan.floor {
        None => "no priority".to_owned(),
        Some(floor) => format!("floor {floor} RU"),
    };
    let (writes, queries): (Vec<Arrival>, Vec<Arrival>) =
        arrivals.iter().cloned().partition(|a| !a.query);
    let mut interactive = interactive_figures(samples);
    interactive.beyond_floor = plan.floor.map(|f| beyond_floor(&samples.queries, f));
    interactive.refused = count(&queries, Verdict::Refused);
    interactive.answered = count(&queries, Verdict::Answered);
    PriorityRun {
        label,
        floor_ru: plan.floor,
        interactive,
        bulk: bulk_figures(
            Writes::count(
                &writes,
                (&queues.pushed, &stored_ids),
                &drained.reports,
                start,
            ),
            &drained.reports,
            ideal,
        ),
        waits: samples
            .queries
            .iter()
            .map(|q| (q.at.as_secs_f64(), ms(q.wait)))
            .collect(),
        points: points(&arrivals, start),
    }
}

fn count(arrivals: &[Arrival], verdict: Verdict) -> u64 {
    arrivals.iter().filter(|a| a.verdict == verdict).count() as u64
}

/// The queries' waits and the round trips, from the samples (the database's counts are
/// filled in by the caller).
fn interactive_figures(samples: &Samples) -> InteractiveFigures {
    let waits: Vec<Duration> = samples.queries.iter().map(|q| q.wait).collect();
    let trips = &samples.round_trips;
    let round_trip_p99 = quantile(trips, 0.99);
    InteractiveFigures {
        queries: waits.len() as u64,
        slept: samples
            .queries
            .iter()
            .filter(|q| !q.slept.is_zero())
            .count() as u64,
        beyond_floor: None,
        extra_round_trips: samples.queries.iter().filter(|q| q.round_trips > 1).count() as u64,
        wait_p50_ms: ms(quantile(&waits, 0.5)),
        wait_p99_ms: ms(quantile(&waits, 0.99)),
        wait_max_ms: ms(quantile(&waits, 1.0)),
        round_trip_samples: trips.len() as u64,
        round_trip_p50_ms: ms(quantile(trips, 0.5)),
        round_trip_p99_ms: ms(round_trip_p99),
        round_trip_max_ms: ms(quantile(trips, 1.0)),
        target_p99_ms: ms(round_trip_p99 + TARGET_OVER_ROUND_TRIP),
        answered: 0,
        refused: 0,
    }
}

/// The bulk load's side: its writes, the workers' round trips, the finish against the ideal.
fn bulk_figures(writes: Writes, reports: &[WorkerReport], ideal: Duration) -> BulkFigures {
    let ideal_s = ideal.as_secs_f64();
    let round_trips = reports.iter().map(|r| r.round_trips).sum::<u64>();
    let done = reports.iter().map(|r| r.done).sum::<u64>();
    BulkFigures {
        ideal_s,
        steady_ideal_s: at_bulk_rate(writes.records * RU_PER_WRITE).as_secs_f64(),
        late: (writes.finish_s - ideal_s) / ideal_s.max(1e-9),
        round_trips,
        round_trips_per_record: round_trips as f64 / done.max(1) as f64,
        writes,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ideal_counts_the_burst_above_the_floor_and_the_rate_the_queries_leave() {
        // 100 000 RU at 19 500 RU/s.
        assert_eq!(at_bulk_rate(100_000), Duration::from_nanos(5_128_205_128));
        // (100 000 − (19 800 − 100)) RU at 19 500 RU/s.
        assert_eq!(
            ideal(10_000, 19_800, 100),
            Duration::from_nanos(4_117_948_717)
        );
        assert_eq!(ideal(10_000, 19_800, 0), ideal(10_000, 19_900, 100));
        assert_eq!(ideal(1_000, 19_800, 100), Duration::ZERO);
    }
}
