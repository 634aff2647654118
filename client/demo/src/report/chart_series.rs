//! The chart's data, from the run and its numbers: each phase's arrivals and pauses, titled
//! with what it came to.

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
            PhaseSeries {
                title: p.phase.title().to_owned(),
                subtitle,
                arrivals: arrival_offsets(p),
                pauses: r.pause_windows.clone(),
            }
        })
        .collect()
}
