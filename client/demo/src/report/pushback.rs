//! The supplier's pushback over a bucket phase, second by second: what the fleet sent and
//! had refused, what the other application sent, the bucket's rate factor (cuts and
//! recovery); and the figures issue 19's targets name, each against its target.

use serde::Serialize;

use crate::cli::{Phase, RunArgs};
use crate::report::seconds::{seconds, Second};
use crate::scenario::PhaseOutcome;
use crate::upstream::Arrival;
use crate::wire::LimiterCounts;

/// Fleet calls in the first seconds are not counted against the refused-share target: the
/// fleet learns the supplier's capacity there.
pub const WARM_UP_S: f64 = 10.0;
/// The targets.
pub const TARGET_REFUSED_SHARE: f64 = 0.01;
pub const TARGET_SERVED_SHARE: f64 = 0.90;
pub const TARGET_RECOVERED_SHARE: f64 = 0.95;
/// The trailing window over which the fleet's served rate counts as recovered.
pub const RECOVERY_WINDOW_S: f64 = 3.0;

#[derive(Debug, Clone, Serialize)]
pub struct PushbackReport {
    pub seconds: Vec<Second>,
    pub fleet_sent: u64,
    pub fleet_refused: u64,
    pub other_sent: u64,
    pub other_refused: u64,
    /// The replicas' limiters, summed.
    #[serde(flatten)]
    pub limiters: LimiterCounts,
    pub round_trips_per_grant: Option<f64>,
    /// The lowest rate factor sampled, in basis points.
    pub lowest_factor_bp: Option<u16>,
    /// Fleet 429s over fleet sends, from [`WARM_UP_S`] to the end.
    pub refused_share_after_warm_up: Option<f64>,
    pub sent_after_warm_up: u64,
    pub refused_after_warm_up: u64,
    /// What the supplier leaves the fleet while the other application runs: its quota
    /// less the other's rate, at most the bucket's rate.
    pub left_for_fleet: Option<f64>,
    /// The fleet's served rate from [`WARM_UP_S`] until the other application stopped (or
    /// the end).
    pub served_rate_with_other: Option<f64>,
    /// From the other application's stop: until the fleet's served rate over the trailing
    /// [`RECOVERY_WINDOW_S`] first reached 95 % of the bucket's configured rate.
    pub recovered_after_s: Option<f64>,
    /// From the stop: until the sampled rate factor reached 95 % and stayed there.
    pub factor_recovered_after_s: Option<f64>,
    /// The run went on this long after the stop (the recovery could be seen within it).
    pub watched_after_stop_s: Option<f64>,
}

pub fn pushback(args: &RunArgs, outcome: &PhaseOutcome) -> Option<PushbackReport> {
    if outcome.phase != Phase::Bucket {
        return None;
    }
    let at = |a: &Arrival| outcome.since_start(a.at);
    let last = (outcome.arrivals.iter().chain(&outcome.other_arrivals))
        .map(at)
        .chain(outcome.samples.iter().map(|s| s.t_s))
        .fold(0.0_f64, f64::max);
    let seconds = seconds(outcome, last, &[], None);
    let sum = |f: fn(&Second) -> u32| seconds.iter().map(|s| u64::from(f(s))).sum::<u64>();

    let fleet: Vec<(f64, u16)> = outcome.arrivals.iter().map(|a| (at(a), a.status)).collect();
    let after: Vec<_> = fleet.iter().filter(|(t, _)| *t >= WARM_UP_S).collect();
    let refused_after = after.iter().filter(|(_, s)| *s == 429).count() as u64;
    let sustained = args.duration.is_some();
    let stop = args
        .other_app
        .map(|_| args.other_app_stop_after.unwrap_or(last).min(last));
    let left_for_fleet = args
        .other_app
        .map(|rate| (f64::from(args.quota) - rate).max(0.0).min(args.rate));
    let served_rate_with_other = match stop {
        Some(stop) if sustained && stop > WARM_UP_S => Some(
            fleet
                .iter()
                .filter(|(t, s)| *s == 200 && *t >= WARM_UP_S && *t < stop)
                .count() as f64
                / (stop - WARM_UP_S),
        ),
        _ => None,
    };
    let stopped_mid_run = args.other_app_stop_after.filter(|&s| s < last);
    let recovered_after_s = stopped_mid_run.and_then(|stop| {
        // The first served call at which the trailing window holds enough served calls.
        let served: Vec<f64> = fleet
            .iter()
            .filter(|(_, s)| *s == 200)
            .map(|(t, _)| *t)
            .collect();
        let need = (TARGET_RECOVERED_SHARE * args.rate * RECOVERY_WINDOW_S).ceil() as usize;
        served
            .iter()
            .enumerate()
            .filter(|(_, &t)| t >= stop + RECOVERY_WINDOW_S)
            .find(|(i, &t)| {
                let from = t - RECOVERY_WINDOW_S;
                served[..=*i]
                    .iter()
                    .rev()
                    .take_while(|&&u| u > from)
                    .count()
                    >= need
            })
            .map(|(_, &t)| t - stop)
    });
    let factor_recovered_after_s = stopped_mid_run.and_then(|stop| {
        let after: Vec<_> = outcome.samples.iter().filter(|s| s.t_s >= stop).collect();
        let threshold = (TARGET_RECOVERED_SHARE * 10_000.0) as u16;
        // The first sample from which every later one is at or above the threshold.
        let last_low = after.iter().rposition(|s| s.factor_bp < threshold);
        match last_low {
            None => after.first().map(|s| s.t_s - stop),
            Some(i) => after.get(i + 1).map(|s| s.t_s - stop),
        }
    });
    let limiters = LimiterCounts::total(&outcome.stats);
    let grants = limiters.granted;
    Some(PushbackReport {
        fleet_sent: sum(|s| s.fleet_sent),
        fleet_refused: sum(|s| s.fleet_refused),
        other_sent: sum(|s| s.other_sent),
        other_refused: sum(|s| s.other_refused),
        seconds,
        limiters,
        round_trips_per_grant: (grants > 0).then(|| limiters.round_trips as f64 / grants as f64),
        lowest_factor_bp: outcome.samples.iter().map(|s| s.factor_bp).min(),
        refused_share_after_warm_up: (sustained && !after.is_empty())
            .then(|| refused_after as f64 / after.len() as f64),
        sent_after_warm_up: after.len() as u64,
        refused_after_warm_up: refused_after,
        left_for_fleet,
        served_rate_with_other,
        recovered_after_s,
        factor_recovered_after_s,
        watched_after_stop_s: stopped_mid_run.map(|stop| last - stop),
    })
}
