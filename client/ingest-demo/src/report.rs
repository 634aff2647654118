//! The tables each phase prints (docs/demos.md says what each column is), and the JSON
//! summary (`--json`).

use std::fmt::Write;

use serde::Serialize;

use crate::phases::backlog::BacklogSummary;
use crate::phases::priority::{PriorityRun, PrioritySummary, TARGET_LATE};
use crate::phases::retry::RetrySummary;
use crate::phases::{CAPACITY_RU, RATE_RU};

#[derive(Debug, Serialize)]
pub struct Summary {
    pub redis: String,
    pub database: String,
    pub records: u64,
    pub ru_per_record: u64,
    pub capacity_ru: u64,
    pub rate_ru_per_s: u64,
    pub retry: Option<RetrySummary>,
    pub backlog: Option<BacklogSummary>,
    pub kill: Option<BacklogSummary>,
    pub priority: Option<PrioritySummary>,
    pub chart: Option<String>,
}

pub fn text(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{} records of {} RU into a database of {} RU refilling at {} RU/s (429 above it)",
        summary.records, summary.ru_per_record, CAPACITY_RU, RATE_RU
    );
    let _ = writeln!(out, "Redis: {}", summary.redis);
    if let Some(retry) = &summary.retry {
        retry_table(&mut out, retry);
    }
    for phase in [&summary.backlog, &summary.kill].into_iter().flatten() {
        backlog_table(&mut out, phase);
    }
    if let Some(phase) = &summary.priority {
        priority_table(&mut out, phase);
    }
    if let Some(chart) = &summary.chart {
        let _ = writeln!(out, "\nchart: {chart}");
    }
    out
}

fn retry_table(out: &mut String, r: &RetrySummary) {
    let w = &r.writes;
    let _ = writeln!(
        out,
        "\n{} ({} workers send all {} at once, retry each refused one after Retry-After)",
        r.title, r.workers, w.records
    );
    out.push_str(
        "  try         sent   stored  refused   first s    span s bucket: most   document: sent\n",
    );
    for wave in &r.waves {
        let _ = writeln!(
            out,
            "  {:<7} {:>8} {:>8} {:>8} {:>9.3} {:>9.3} {:>12} {:>16}",
            wave.attempt,
            wave.sent,
            wave.stored,
            wave.refused,
            wave.first_s,
            wave.span_s,
            wave.most_stored,
            wave.document_sent
        );
    }
    out.push_str("                               sent    refused     stored    time s\n");
    let _ = writeln!(
        out,
        "  {:<22} {:>10} {:>10} {:>10} {:>9.3}",
        "measured", w.sent, w.refused, w.stored, w.finish_s
    );
    let _ = writeln!(
        out,
        "  {:<22} {:>10} {:>10} {:>10} {:>9}",
        "bucket, these spans",
        format!(">= {}", w.records + r.least_refused),
        format!(">= {}", r.least_refused),
        w.records,
        format!(">= {:.1}", r.min_time_s)
    );
    let _ = writeln!(
        out,
        "  {:<22} {:>10} {:>10} {:>10} {:>9.1}",
        "document (at once)", r.document_sent, r.document_refused, w.records, r.document_time_s
    );
    let _ = writeln!(
        out,
        "  duplicates {}, errors {}; every record stored exactly once: {}",
        w.duplicates,
        w.errors,
        yes(w.stored_once)
    );
}

fn backlog_table(out: &mut String, b: &BacklogSummary) {
    let _ = writeln!(
        out,
        "\n{} (queue A {} + queue B {} records, {} workers, one shared bucket of {} RU at {} RU/s: \
         {} RU under the database's burst as a margin for the trip)",
        b.title,
        b.queue_a,
        b.queue_b,
        b.workers,
        b.bucket_capacity_ru,
        RATE_RU,
        CAPACITY_RU - b.bucket_capacity_ru
    );
    for s in &b.stats {
        let _ = writeln!(
            out,
            "  stats before the start, {}: depth {}, in flight {}, queued {} RU, oldest {} ms, \
             drain alone {:.3} s",
            s.stream,
            s.depth,
            s.in_flight,
            s.queued_cost,
            s.oldest_age_ms.map_or("-".to_owned(), |ms| ms.to_string()),
            s.drain_time_s
        );
    }
    out.push_str("                 sent  refused   stored  duplicates   lost    ideal s  predicted s   finish s\n");
    let _ = writeln!(
        out,
        "  {:<10} {:>8} {:>8} {:>8} {:>11} {:>6} {:>10.3} {:>12.3} {:>10.3}",
        "measured",
        b.writes.sent,
        b.writes.refused,
        b.writes.stored,
        b.writes.duplicates,
        b.writes.lost,
        b.ideal_s,
        b.predicted_s,
        b.writes.finish_s
    );
    let _ = writeln!(
        out,
        "  ideal: {} records at once, then {} a second (the database alone: {:.3} s); \
         predicted from stats() before the start\n  \
         last grant at {:.3} s ({:+.3} s from the ideal), longest write {:.1} ms, longest wait \
         for tokens {:.3} s; queues empty at {:.3} s; throttled {}, dead letters {}, errors {}",
        b.bucket_capacity_ru / crate::db::RU_PER_WRITE,
        RATE_RU / crate::db::RU_PER_WRITE,
        b.database_min_s,
        b.last_grant_s,
        b.last_grant_s - b.ideal_s,
        b.max_trip_s * 1e3,
        b.writes.max_wait_s,
        b.drained_s,
        b.throttled,
        b.dead_letters,
        b.writes.errors
    );
    if let Some(k) = &b.kill {
        let _ = writeln!(
            out,
            "  worker {} SIGKILLed at {:.3} s ({} stored by then); records it had read and not \
             acknowledged: {}; claimed by the others once idle for claim_idle = {:.1} s: {} \
             (first written again {} after the kill); duplicates (had reached the database \
             before the kill), ignored by it: {}",
            k.worker,
            k.at_s,
            k.stored_before,
            k.held,
            k.claim_idle_s,
            k.claimed,
            k.claimed_after_s
                .map_or("never".to_owned(), |s| format!("{s:.3} s")),
            b.writes.duplicates
        );
    }
    let _ = writeln!(
        out,
        "  every record stored exactly once: {} ({} pushed, {} stored, {} lost, {} unexpected)",
        yes(b.writes.stored_once),
        b.writes.records,
        b.writes.stored,
        b.writes.lost,
        b.writes.unexpected
    );
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "NO"
    }
}

/// Phase 4: both runs side by side, the queries' waits against the round trip, the bulk
/// load's finish against its ideal, and the targets.
fn priority_table(out: &mut String, p: &PrioritySummary) {
    let _ = writeln!(
        out,
        "\n{} (queue A {} + queue B {} records through {} workers, beside {} interactive \
         queries/s of {} RU, all on one shared bucket of {} RU at {} RU/s)",
        p.title,
        p.queue_a,
        p.queue_b,
        p.workers,
        p.queries_per_s,
        p.ru_per_query,
        p.bucket_capacity_ru,
        RATE_RU
    );
    interactive_rows(out, &p.runs);
    bulk_rows(out, &p.runs);
    for run in &p.runs {
        targets(out, run);
    }
}

fn interactive_rows(out: &mut String, runs: &[PriorityRun]) {
    out.push_str("  interactive   queries  slept  wait p50  wait p99  wait max  trip p50  trip p99  target p99  met\n");
    for r in runs {
        let i = &r.interactive;
        let _ = writeln!(
            out,
            "  {:<13} {:>7} {:>6} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>11} {:>4}",
            r.label,
            i.queries,
            i.slept,
            i.wait_p50_ms,
            i.wait_p99_ms,
            i.wait_max_ms,
            i.round_trip_p50_ms,
            i.round_trip_p99_ms,
            format!("<= {:.3}", i.target_p99_ms),
            yes(i.wait_p99_ms <= i.target_p99_ms)
        );
    }
}

fn bulk_rows(out: &mut String, runs: &[PriorityRun]) {
    out.push_str("  bulk             sent  refused  stored   dup  lost  once  finish s  ideal s    late  trips/record\n");
    for r in runs {
        let b = &r.bulk.writes;
        let _ = writeln!(
            out,
            "  {:<13} {:>7} {:>8} {:>7} {:>5} {:>5} {:>5} {:>9.3} {:>8.3} {:>6.1}% {:>13.2}",
            r.label,
            b.sent,
            b.refused,
            b.stored,
            b.duplicates,
            b.lost,
            yes(b.stored_once),
            b.finish_s,
            r.bulk.ideal_s,
            r.bulk.late * 100.0,
            r.bulk.round_trips_per_record
        );
    }
}

fn targets(out: &mut String, r: &PriorityRun) {
    let (i, b) = (&r.interactive, &r.bulk.writes);
    let covered = i.beyond_floor.map_or(String::new(), |n| {
        format!(" (bursts beyond what the floor covers: {n})")
    });
    let _ = writeln!(
        out,
        "  {}: queries answered {}, refused {}, slept {}{covered}; writes refused {}, errors {}; p99 wait \
         {:.3} ms <= {:.3} ms: {}; finished within {:.0}% of the ideal: {}; every record \
         stored exactly once: {} ({} lost, {} unexpected); longest wait of a record for tokens \
         {:.3} s",
        r.label,
        i.answered,
        i.refused,
        i.slept,
        b.refused,
        b.errors,
        i.wait_p99_ms,
        i.target_p99_ms,
        yes(i.wait_p99_ms <= i.target_p99_ms),
        TARGET_LATE * 100.0,
        yes(r.bulk.late <= TARGET_LATE),
        yes(b.stored_once),
        b.lost,
        b.unexpected,
        b.max_wait_s
    );
}
