//! Calls open at once over a phase, as the supplier counted them, against its limit and the
//! fleet's cap: its most open at once, its 429s for concurrency apart from the rate's, the
//! calls that waited for a slot, and the count second by second beside the slow spell.

use std::time::Duration;

use serde::Serialize;

use crate::cli::{Phase, RunArgs};
use crate::open_calls::{open_per_bin, SlowSpell};
use crate::report::seconds::{seconds, Second};
use crate::scenario::PhaseOutcome;
use crate::wire::LimiterCounts;

/// The width of the bins of [`OpenCallsReport::open_per_bin`].
pub const BIN: Duration = Duration::from_millis(100);

/// One phase's calls open at once.
#[derive(Debug, Clone, Serialize)]
pub struct OpenCallsReport {
    /// The supplier's limit on calls open at once (`None`: it has none).
    pub supplier_max_open: Option<u32>,
    /// The fleet's cap on calls in flight (`None`: none, always when direct).
    pub max_in_flight: Option<u64>,
    pub slow_spell: Option<SlowSpell>,
    /// The most the supplier had open at once (its own count, at every change: exact).
    pub most_open: u32,
    /// Still open when the phase ended, as the supplier counts them: 0 once every answer is
    /// out (each call it counted in, it counted out).
    pub open_at_end: u32,
    /// The fleet's 429s for concurrency, and for the rate.
    pub refused_for_concurrency: u64,
    pub refused_for_rate: u64,
    /// The replicas' limiters, summed (`MetricsSnapshot::in_flight`; `None` without a cap):
    /// calls that found every slot held and waited for one, and slots whose lease ran out
    /// while held.
    pub slot_waits: Option<u64>,
    pub leases_lost: Option<u64>,
    /// The most open in each [`BIN`] from the shared start.
    pub bin_s: f64,
    pub open_per_bin: Vec<u32>,
    pub seconds: Vec<Second>,
}

/// The phase's calls open at once, when the run is about them.
pub fn open_calls(args: &RunArgs, outcome: &PhaseOutcome) -> Option<OpenCallsReport> {
    if !args.watches_open_calls() {
        return None;
    }
    let changes = outcome.open_log.iter().map(|c| c.at);
    let last = (outcome.arrivals.iter().map(|a| a.at).chain(changes))
        .map(|at| outcome.since_start(at))
        .fold(0.0_f64, f64::max);
    let bins = (last / BIN.as_secs_f64()).floor() as usize + 1;
    let per_bin = open_per_bin(&outcome.open_log, outcome.start, BIN, bins);
    let spell = args.slow_spell();
    let seconds = seconds(outcome, last, &per_bin, spell);
    let for_concurrency = outcome.arrivals.iter().filter(|a| a.too_many_open).count() as u64;
    let refused = outcome.arrivals.iter().filter(|a| a.status == 429).count() as u64;
    let capped = outcome.phase == Phase::Bucket && args.max_in_flight().is_some();
    let counts = LimiterCounts::total(&outcome.stats);
    Some(OpenCallsReport {
        supplier_max_open: args.supplier_max_open(),
        max_in_flight: args
            .max_in_flight()
            .filter(|_| outcome.phase == Phase::Bucket),
        slow_spell: spell,
        // Every change of the count lands in a bin.
        most_open: per_bin.iter().copied().max().unwrap_or(0),
        open_at_end: outcome.open_log.last().map_or(0, |c| c.open),
        refused_for_concurrency: for_concurrency,
        refused_for_rate: refused - for_concurrency,
        slot_waits: capped.then_some(counts.slot_waits),
        leases_lost: capped.then_some(counts.leases_lost),
        bin_s: BIN.as_secs_f64(),
        open_per_bin: per_bin,
        seconds,
    })
}
