//! Phase 4's table: both runs side by side, the queries' waits against the round trip, the
//! bulk load's finish against its ideal, and the targets. docs/demos.md says what each column
//! is.

use std::fmt::Write;

use crate::phases::priority::{PriorityRun, PrioritySummary, TARGET_LATE};
use crate::phases::RATE_RU;
use crate::report::yes;

pub fn table(out: &mut String, p: &PrioritySummary) {
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
