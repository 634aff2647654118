//! Phase 1, retry on error: every worker sends its share of the records at once and retries
//! each refused one after the database's `Retry-After`. Measured try by try, next to what the
//! database's bucket allows over each try's span and to the document's arithmetic.

use std::collections::HashSet;
use std::time::Duration;

use demo_support::child::command_lines;
use serde::Serialize;

use crate::db::{Arrival, Verdict, RU_PER_WRITE};
use crate::phases::backlog::Writes;
use crate::phases::{
    ideal, points, reports, secs_between, Env, Point, Workers, CAPACITY_RU, RATE_RU, START_LEAD,
};
use crate::wire::RetryPlan;

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
    pub workers: u32,
    /// As the backlog's phases count them (`finish_s`: when the last record was stored).
    #[serde(flatten)]
    pub writes: Writes,
    /// The bucket cannot store them all sooner: (records·RU − burst) / rate.
    pub min_time_s: f64,
    /// Refused at least, by the waves' bounds.
    pub least_refused: u64,
    pub document_sent: u64,
    pub document_refused: u64,
    pub document_time_s: f64,
    pub waves: Vec<Wave>,
    #[serde(skip)]
    pub points: Vec<Point>,
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
    let plans = (0..u64::from(workers)).map(|index| {
        let first = index * share;
        let count = share.min(records.saturating_sub(first));
        RetryPlan {
            db: env.db.url(),
            first,
            count,
        }
    });
    let mut fleet = Workers::spawn("worker", command_lines("retry-worker", plans)?).await?;
    let start = fleet.start(START_LEAD).await?;
    let reports = reports(fleet, start + Duration::from_secs(150)).await?;
    let arrivals = env.db.take_log();
    let stored_ids = env.db.take_stored();
    let start = start.into_std();

    let expected: HashSet<String> = (0..records).map(|n| format!("r{n:06}")).collect();
    // Counted by the database; the workers' own count says the same unless a write was lost
    // on the way (an error).
    let writes = Writes::count(&arrivals, (&expected, &stored_ids), &reports, start);

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
    Ok(RetrySummary {
        phase: "retry",
        title: "phase 1: retry on error",
        workers,
        writes,
        min_time_s: ideal(records, CAPACITY_RU).as_secs_f64(),
        least_refused,
        document_sent: document.iter().map(|w| w.0).sum(),
        document_refused: document.iter().map(|w| w.0 - w.1).sum(),
        document_time_s: document.len().saturating_sub(1) as f64,
        waves,
        points: points(&arrivals, start),
    })
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
