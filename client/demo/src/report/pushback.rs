//! The supplier's pushback over a bucket phase, second by second: what the fleet sent and
//! had refused, what the other application sent, the bucket's rate factor (cuts and
//! recovery); and the figures issue 19's targets name, each against its target.

use serde::Serialize;

use crate::cli::{Phase, RunArgs};
use crate::scenario::{PhaseOutcome, OTHER_APP_PREFIX};

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
    pub cut: bool,
    pub cut_recovery_s: f64,
    pub pause_check: bool,
    pub supplier_headers: bool,
    pub retry_after: bool,
    pub other_app_rate: Option<f64>,
    pub other_app_stop_s: Option<f64>,
    pub seconds: Vec<Second>,
    pub fleet_sent: u64,
    pub fleet_refused: u64,
    pub other_sent: u64,
    pub other_refused: u64,
    /// The replicas' limiters, summed (`MetricsSnapshot`).
    pub granted: u64,
    pub round_trips: u64,
    pub round_trips_per_grant: Option<f64>,
    pub cuts: u64,
    pub cuts_same_episode: u64,
    pub syncs: u64,
    pub syncs_unchanged: u64,
    pub held_by_pause: u64,
    pub pauses: u64,
    pub pauses_unchanged: u64,
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

/// One second of the phase, `[t, t + 1)` from the shared start.
#[derive(Debug, Clone, Serialize)]
pub struct Second {
    pub t: u32,
    pub fleet_sent: u32,
    pub fleet_served: u32,
    pub fleet_refused: u32,
    pub other_sent: u32,
    pub other_refused: u32,
    /// The lowest and the last rate factor sampled in the second, basis points.
    pub factor_min_bp: Option<u16>,
    pub factor_last_bp: Option<u16>,
    /// A pause was sampled in the second.
    pub paused: bool,
}

pub fn pushback(args: &RunArgs, outcome: &PhaseOutcome) -> Option<PushbackReport> {
    if outcome.phase != Phase::Bucket {
        return None;
    }
    let at =
        |a: &crate::upstream::Arrival| a.at.saturating_duration_since(outcome.start).as_secs_f64();
    let is_other = |id: &str| id.starts_with(OTHER_APP_PREFIX);
    let all = || outcome.arrivals.iter().chain(&outcome.other_arrivals);
    let last = all()
        .map(at)
        .chain(outcome.samples.iter().map(|s| s.t_s))
        .fold(0.0_f64, f64::max);
    let n = last.floor() as usize + 1;
    let mut seconds: Vec<Second> = (0..n)
        .map(|t| Second {
            t: t as u32,
            fleet_sent: 0,
            fleet_served: 0,
            fleet_refused: 0,
            other_sent: 0,
            other_refused: 0,
            factor_min_bp: None,
            factor_last_bp: None,
            paused: false,
        })
        .collect();
    let (mut fleet_sent, mut fleet_refused, mut other_sent, mut other_refused) = (0, 0, 0, 0);
    for a in all() {
        let second = &mut seconds[(at(a).floor() as usize).min(n - 1)];
        let refused = a.status == 429;
        if is_other(&a.id) {
            second.other_sent += 1;
            second.other_refused += u32::from(refused);
            other_sent += 1;
            other_refused += u64::from(refused);
        } else {
            second.fleet_sent += 1;
            second.fleet_served += u32::from(a.status == 200);
            second.fleet_refused += u32::from(refused);
            fleet_sent += 1;
            fleet_refused += u64::from(refused);
        }
    }
    for s in &outcome.samples {
        let second = &mut seconds[(s.t_s.floor() as usize).min(n - 1)];
        second.factor_min_bp = Some(
            second
                .factor_min_bp
                .map_or(s.factor_bp, |m| m.min(s.factor_bp)),
        );
        second.factor_last_bp = Some(s.factor_bp);
        second.paused |= s.paused_ms > 0;
    }

    let fleet: Vec<(f64, u16)> = outcome
        .arrivals
        .iter()
        .filter(|a| !is_other(&a.id))
        .map(|a| (at(a), a.status))
        .collect();
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
    let sum = |f: fn(&crate::wire::ReplicaStats) -> u64| outcome.stats.iter().map(f).sum::<u64>();
    let granted = sum(|s| s.granted);
    let round_trips = sum(|s| s.round_trips);
    Some(PushbackReport {
        cut: !args.no_cut,
        cut_recovery_s: args.cut_recovery,
        pause_check: !args.no_pause_check,
        supplier_headers: args.supplier_headers,
        retry_after: !args.no_retry_after,
        other_app_rate: args.other_app,
        other_app_stop_s: args.other_app_stop_after,
        seconds,
        fleet_sent,
        fleet_refused,
        other_sent,
        other_refused,
        granted,
        round_trips,
        round_trips_per_grant: (granted > 0).then(|| round_trips as f64 / granted as f64),
        cuts: sum(|s| s.cuts),
        cuts_same_episode: sum(|s| s.cuts_same_episode),
        syncs: sum(|s| s.syncs),
        syncs_unchanged: sum(|s| s.syncs_unchanged),
        held_by_pause: sum(|s| s.held_by_pause),
        pauses: sum(|s| s.pauses),
        pauses_unchanged: sum(|s| s.pauses_unchanged),
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

/// Whether a figure meets its target, as the report says it.
fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

fn factor(bp: Option<u16>) -> String {
    bp.map_or("-".to_owned(), |bp| {
        format!("{:.2}", f64::from(bp) / 10_000.0)
    })
}

/// What the bucket phase served, for the targets' figures.
#[derive(Clone, Copy, Debug)]
pub struct Served {
    pub calls: u64,
    pub refused: u64,
    pub unserved: u64,
    /// Fired to the last call, in seconds.
    pub total_s: Option<f64>,
}

/// The per-second table, the limiter's pushback counters, and the targets' figures.
pub fn render(out: &mut String, report: &PushbackReport, phase: Served, args: &RunArgs) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "\nbucket phase per second (cut on 429: {}, recovery {} s; pause check: {}; supplier's count: {}; Retry-After: {}; other application: {})",
        if report.cut { "0.7" } else { "off, pause only" },
        report.cut_recovery_s,
        if report.pause_check { "on" } else { "off" },
        if report.supplier_headers { "sent and read" } else { "not sent" },
        if report.retry_after { "sent" } else { "none, as nginx" },
        match (report.other_app_rate, report.other_app_stop_s) {
            (Some(rate), Some(stop)) => format!("{}/s until {} s", rate, stop),
            (Some(rate), None) => format!("{}/s throughout", rate),
            _ => "none".to_owned(),
        }
    );
    let _ = writeln!(
        out,
        "{:>5}  {:>10}  {:>11}  {:>10}  {:>11}  {:>13}  paused",
        "s", "fleet sent", "fleet 429s", "other sent", "other 429s", "rate factor"
    );
    for s in &report.seconds {
        let _ = writeln!(
            out,
            "{:>5}  {:>10}  {:>11}  {:>10}  {:>11}  {:>13}  {}",
            format!("{}-{}", s.t, s.t + 1),
            s.fleet_sent,
            s.fleet_refused,
            s.other_sent,
            s.other_refused,
            match (s.factor_min_bp, s.factor_last_bp) {
                (Some(min), Some(last)) if factor(Some(min)) != factor(Some(last)) => {
                    format!("{} ({})", factor(Some(min)), factor(Some(last)))
                }
                (min, _) => factor(min),
            },
            if s.paused { "yes" } else { "" }
        );
    }
    let _ = writeln!(
        out,
        "fleet: {} sends, {} refused; other application: {} sent, {} refused",
        report.fleet_sent, report.fleet_refused, report.other_sent, report.other_refused
    );
    let _ = writeln!(
        out,
        "limiters: {} grants, {} round trips ({} per grant), {} cuts (+{} in an episode already cut), {} pauses ({} changed nothing), {} syncs lowered the bucket ({} changed nothing), {} reserved calls held by a pause; lowest rate factor {}",
        report.granted,
        report.round_trips,
        report.round_trips_per_grant.map_or("-".to_owned(), |r| format!("{r:.2}")),
        report.cuts,
        report.cuts_same_episode,
        report.pauses,
        report.pauses_unchanged,
        report.syncs,
        report.syncs_unchanged,
        report.held_by_pause,
        factor(report.lowest_factor_bp),
    );

    let _ = writeln!(out, "\nissue 19's figures:");
    if args.duration.is_none() {
        let limit = 3;
        let _ = writeln!(
            out,
            "  refused calls: {} (target, bucket above the supplier: <= {limit}): {}",
            phase.refused,
            verdict(phase.refused <= limit)
        );
        let _ = writeln!(
            out,
            "  every call ends served: {} of {} ({} not served): {}",
            phase.calls.saturating_sub(phase.unserved),
            phase.calls,
            phase.unserved,
            verdict(phase.unserved == 0)
        );
        let _ = writeln!(
            out,
            "  round trips per grant: {}; time to the last call: {}",
            report
                .round_trips_per_grant
                .map_or("-".to_owned(), |r| format!("{r:.2}")),
            phase
                .total_s
                .map_or("-".to_owned(), |t| format!("{t:.3} s"))
        );
        return;
    }
    if let Some(share) = report.refused_share_after_warm_up {
        let _ = writeln!(
            out,
            "  refused after the first {} s: {} of {} fleet sends = {:.2} % (target <= {} %): {}",
            WARM_UP_S,
            report.refused_after_warm_up,
            report.sent_after_warm_up,
            share * 100.0,
            TARGET_REFUSED_SHARE * 100.0,
            verdict(share <= TARGET_REFUSED_SHARE)
        );
    }
    if let (Some(rate), Some(left)) = (report.served_rate_with_other, report.left_for_fleet) {
        let _ = writeln!(
            out,
            "  served while the other application ran ({} s to {} s): {:.2}/s of {}/s left = {:.1} % (target >= {} %, {:.2}/s): {}",
            WARM_UP_S,
            report.other_app_stop_s.unwrap_or(f64::NAN),
            rate,
            left,
            rate / left * 100.0,
            TARGET_SERVED_SHARE * 100.0,
            TARGET_SERVED_SHARE * left,
            verdict(rate >= TARGET_SERVED_SHARE * left)
        );
    }
    if let Some(watched) = report.watched_after_stop_s {
        let target = args.cut_recovery;
        let need = TARGET_RECOVERED_SHARE * args.rate;
        let _ = writeln!(
            out,
            "  back to >= {} % of the configured {}/s ({:.2}/s served over a trailing {} s) after the other application stopped: {} (target <= the recovery time, {} s; watched {:.0} s): {}",
            TARGET_RECOVERED_SHARE * 100.0,
            args.rate,
            need,
            RECOVERY_WINDOW_S,
            report.recovered_after_s.map_or("not within the run".to_owned(), |s| format!("{s:.1} s")),
            target,
            watched,
            verdict(report.recovered_after_s.is_some_and(|s| s <= target))
        );
        let _ = writeln!(
            out,
            "  the bucket's rate factor at >= 0.95 for good: {} after the stop",
            report
                .factor_recovered_after_s
                .map_or("not within the run".to_owned(), |s| format!("{s:.1} s"))
        );
    }
}
