//! The chart's data, from the run and its numbers: each phase's arrivals, pauses and calls
//! open at the supplier, titled with what it came to.

use std::fmt::Write;

use crate::chart::PhaseSeries;
use crate::report::summary::{arrival_offsets, Summary};
use crate::scenario::Outcome;

/// The chart's data for each phase, titled with its numbers.
pub fn chart_series(outcome: &Outcome, summary: &Summary) -> Vec<PhaseSeries> {
    outcome
        .phases
        .iter()
        .zip(&summary.phases)
        .map(|(p, r)| {
            let mut subtitle = format!("{} served, {} refused", r.served, r.refused);
            if r.refused_for_concurrency > 0 {
                let _ = write!(subtitle, " ({} for concurrency)", r.refused_for_concurrency);
            }
            if let Some(total) = r.total_s {
                let _ = write!(subtitle, ", last call at {total:.3} s");
            }
            if let Some(wait) = r.wait_mean_s {
                let _ = write!(subtitle, ", mean wait {wait:.2} s");
            }
            if let Some(pauses @ 1..) = r.pauses {
                let _ = write!(
                    subtitle,
                    ", {pauses} pause{}, {} retr{}",
                    if pauses == 1 { "" } else { "s" },
                    r.retries,
                    if r.retries == 1 { "y" } else { "ies" }
                );
            }
            let since =
                |at: std::time::Instant| at.saturating_duration_since(p.start).as_secs_f64();
            PhaseSeries {
                title: p.phase.title().to_owned(),
                subtitle,
                arrivals: arrival_offsets(p),
                pauses: r.pause_windows.clone(),
                open: p.open_log.iter().map(|c| (since(c.at), c.open)).collect(),
                too_many_open: p
                    .arrivals
                    .iter()
                    .filter(|a| a.too_many_open)
                    .map(|a| since(a.at))
                    .collect(),
            }
        })
        .collect()
}
