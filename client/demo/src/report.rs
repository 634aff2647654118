//! The numbers a person reads: per phase, what the upstream served and refused, how long
//! the whole took, and how long calls waited in the bucket; next to what the knobs predict.
//! Rendered as a table, or as JSON for scripts and tests.

use std::fmt::Write;
use std::time::Duration;

use serde::Serialize;

use crate::chart::PhaseSeries;
use crate::cli::{Phase, RunArgs, StrategyArg};
use crate::limit::UpstreamMode;
use crate::scenario::{Outcome, PhaseOutcome};
use crate::theory::{self, num};

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub replicas: u32,
    pub calls_per_replica: u32,
    pub calls: u64,
    pub capacity: u64,
    pub rate: f64,
    pub quota: u32,
    pub upstream_mode: UpstreamMode,
    pub strategy: StrategyArg,
    pub redis: String,
    pub upstream: String,
    pub key: String,
    /// The shared bucket's time per token, as the server computes it.
    pub token_interval_ms: f64,
    /// Whether the bucket's shape keeps the fleet inside the upstream's rule, and why.
    pub fits: bool,
    pub fit_reason: String,
    pub fit_example: Option<(u64, u64)>,
    pub phases: Vec<PhaseReport>,
    pub chart: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    pub phase: Phase,
    pub calls: u64,
    /// As the upstream counted them.
    pub served: u64,
    pub refused: u64,
    /// Any other HTTP status.
    pub other_status: u64,
    /// Calls that got no HTTP status (no token in time, connection trouble).
    pub errors: u64,
    pub error_samples: Vec<String>,
    /// From the instant the replicas fired to the upstream's last arrival, both on the
    /// upstream's clock. The bucket cannot make this shorter than the ideal.
    pub total_s: Option<f64>,
    /// From the upstream's first arrival to its last. Can come out a little under the ideal
    /// when the first calls spent longer on the way than the last one.
    pub arrival_span_s: Option<f64>,
    /// From the first call sent to the last, on the replicas' clocks.
    pub sent_span_s: Option<f64>,
    /// The total the bucket allows at best (0 when direct: everything at once).
    pub ideal_total_s: f64,
    /// What the knobs predict. Through the bucket: the upstream's verdicts replayed on the
    /// ideal schedule (the server decides when calls go). Direct: a bound, from how far apart
    /// the calls arrived (`arrival_span_s`, the machine's doing): at most this many served,
    /// at least this many refused (`predicted_is_bound`).
    pub predicted_served: u64,
    pub predicted_refused: u64,
    pub predicted_is_bound: bool,
    /// The earliest a call had its token, from the shared start, on the replicas' clocks
    /// (direct: when the first call began). The bucket's schedule starts no later.
    pub first_token_s: Option<f64>,
    /// When the last call was sent, from the shared start, on the replicas' clocks.
    pub last_sent_s: Option<f64>,
    pub wait_mean_s: Option<f64>,
    pub wait_max_s: Option<f64>,
    pub round_trips: u64,
    /// The latest a task began after the shared start: how together the replicas fired.
    pub start_lag_max_ms: f64,
    /// The least room the upstream's rule left over the phase (negative: crossed): under
    /// `quota + quota·t` for a bucket, under `quota` in any trailing second for a window.
    pub min_headroom: Option<f64>,
}

pub fn summarize(
    args: &RunArgs,
    redis: &str,
    interval: Duration,
    outcome: &Outcome,
    chart: Option<String>,
) -> Summary {
    let calls = u64::from(args.replicas) * u64::from(args.calls);
    let fit = theory::fit(args.upstream_mode, args.quota, args.capacity, args.rate);
    Summary {
        replicas: args.replicas,
        calls_per_replica: args.calls,
        calls,
        capacity: args.capacity,
        rate: args.rate,
        quota: args.quota,
        upstream_mode: args.upstream_mode,
        strategy: args.strategy,
        redis: redis.to_owned(),
        upstream: outcome.upstream_url.clone(),
        key: outcome.key.clone(),
        token_interval_ms: interval.as_secs_f64() * 1e3,
        fits: fit.fits,
        fit_reason: fit.reason,
        fit_example: fit.example,
        phases: outcome
            .phases
            .iter()
            .map(|p| phase_report(args, interval, p))
            .collect(),
        chart,
    }
}

fn phase_report(args: &RunArgs, interval: Duration, outcome: &PhaseOutcome) -> PhaseReport {
    let calls = u64::from(args.replicas) * u64::from(args.calls);
    let schedule = match outcome.phase {
        Phase::Direct => vec![Duration::ZERO; calls as usize],
        Phase::Bucket => theory::bucket_schedule(calls, args.capacity, interval),
    };
    let arrival_span = outcome
        .arrivals
        .first()
        .zip(outcome.arrivals.last())
        .map(|(first, last)| last.at.saturating_duration_since(first.at));
    let (predicted_served, predicted_refused, predicted_is_bound) = match outcome.phase {
        Phase::Direct => {
            let most = theory::most_served(
                args.upstream_mode,
                args.quota,
                calls,
                arrival_span.unwrap_or_default(),
            );
            (most, calls - most, true)
        }
        Phase::Bucket => {
            let (served, refused) = theory::replay(args.upstream_mode, args.quota, &schedule);
            (served, refused, false)
        }
    };
    let count = |status: u16| {
        outcome
            .arrivals
            .iter()
            .filter(|a| a.status == status)
            .count()
    };

    let offsets = arrival_offsets(outcome);
    let times: Vec<f64> = offsets.iter().map(|&(t, _)| t).collect();
    let min_headroom = theory::headroom(args.upstream_mode, args.quota, &times);

    let answered: Vec<_> = outcome
        .records
        .iter()
        .filter(|r| r.error.is_none())
        .collect();
    let waits: Vec<u64> = answered.iter().map(|r| r.wait_us).collect();
    let (wait_mean_s, wait_max_s) = match (outcome.phase, waits.is_empty()) {
        (Phase::Bucket, false) => (
            Some(waits.iter().sum::<u64>() as f64 / waits.len() as f64 / 1e6),
            waits.iter().max().map(|&w| w as f64 / 1e6),
        ),
        _ => (None, None),
    };
    let sent = answered.iter().map(|r| r.sent_us);
    let sent_span_s = sent
        .clone()
        .max()
        .zip(sent.clone().min())
        .map(|(last, first)| (last - first) as f64 / 1e6);
    let last_sent_s = sent.max().map(|us| us as f64 / 1e6);
    let first_token_s = answered
        .iter()
        .map(|r| r.start_us + r.wait_us)
        .min()
        .map(|us| us as f64 / 1e6);

    let errors: Vec<String> = outcome
        .records
        .iter()
        .filter_map(|r| {
            r.error
                .as_ref()
                .map(|e| format!("replica {} call {}: {e}", r.replica, r.call))
        })
        .collect();
    PhaseReport {
        phase: outcome.phase,
        calls,
        served: count(200) as u64,
        refused: count(429) as u64,
        other_status: outcome
            .arrivals
            .iter()
            .filter(|a| a.status != 200 && a.status != 429)
            .count() as u64,
        errors: errors.len() as u64,
        error_samples: errors.into_iter().take(5).collect(),
        total_s: offsets.last().map(|&(t, _)| t),
        arrival_span_s: arrival_span.map(|d| d.as_secs_f64()),
        sent_span_s,
        first_token_s,
        last_sent_s,
        ideal_total_s: schedule.last().copied().unwrap_or_default().as_secs_f64(),
        predicted_served,
        predicted_refused,
        predicted_is_bound,
        wait_mean_s,
        wait_max_s,
        round_trips: outcome
            .records
            .iter()
            .map(|r| u64::from(r.round_trips))
            .sum(),
        start_lag_max_ms: outcome
            .records
            .iter()
            .map(|r| r.start_us)
            .max()
            .unwrap_or(0) as f64
            / 1e3,
        min_headroom,
    }
}

/// Seconds from the shared start to each arrival, and whether each was served. The
/// upstream's allowance is whole at the start, so its line can start there too.
fn arrival_offsets(outcome: &PhaseOutcome) -> Vec<(f64, bool)> {
    outcome
        .arrivals
        .iter()
        .map(|a| {
            let t = a.at.saturating_duration_since(outcome.start);
            (t.as_secs_f64(), a.status == 200)
        })
        .collect()
}

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
            PhaseSeries {
                title: p.phase.title().to_owned(),
                subtitle,
                arrivals: arrival_offsets(p),
            }
        })
        .collect()
}

/// The heading: who calls whom, under which rule.
pub fn heading(args: &RunArgs) -> String {
    format!(
        "{} replicas x {} PIX status queries at once; the API allows {}",
        args.replicas,
        args.calls,
        upstream_rule(args.upstream_mode, args.quota)
    )
}

pub fn upstream_rule(mode: UpstreamMode, quota: u32) -> String {
    match mode {
        UpstreamMode::Bucket => {
            format!("a burst of {quota} refilling at {quota}/s per integrator")
        }
        UpstreamMode::Window => format!("{quota} in any one second per integrator"),
    }
}

/// What the chart's notes and the text's explanation share.
pub fn explanations(summary: &Summary) -> Vec<String> {
    let mut lines = Vec::new();
    let rate = num(summary.rate);
    let late = summary.calls.saturating_sub(summary.capacity);
    if late > 0 {
        lines.push(format!(
            "Ideal through the bucket: {} calls at once, then {late} more at {rate}/s: \
             {late} x {:.3} ms = {:.3} s, never earlier.",
            summary.capacity.min(summary.calls),
            summary.token_interval_ms,
            late as f64 * summary.token_interval_ms / 1e3
        ));
    } else {
        lines.push(format!(
            "All {} calls fit in the bucket's burst of {}: no wait.",
            summary.calls, summary.capacity
        ));
    }
    lines.push(format!("Fit: {}.", summary.fit_reason));
    if summary.upstream_mode == UpstreamMode::Window {
        lines.push(format!(
            "Window mode: the upstream takes at most {q} calls in ANY one-second span, and a \
             full bucket releases its burst plus one second of refill within one second \
             ({} + {} = {}). A window has no cumulative line, so the last panel counts each \
             call's trailing second.",
            summary.capacity,
            num(summary.rate),
            num(theory::bucket_release(summary.capacity, summary.rate, 1.0)),
            q = summary.quota
        ));
    }
    if let Some((capacity, rate)) = summary.fit_example {
        lines.push(format!(
            "To stay inside it, try --capacity {capacity} --rate {rate} (capacity + rate = {}).",
            capacity + rate
        ));
    }
    lines
}

pub fn text(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nupstream:      mock API on {}, {} (429 with Retry-After above it)",
        summary.upstream,
        upstream_rule(summary.upstream_mode, summary.quota)
    );
    let _ = writeln!(
        out,
        "shared bucket: key {}, capacity {}, rate {}/s (one token every {:.3} ms), strategy {}",
        summary.key,
        summary.capacity,
        num(summary.rate),
        summary.token_interval_ms,
        match summary.strategy {
            StrategyArg::Reserve => "reserve",
            StrategyArg::Poll => "poll",
        }
    );
    let _ = writeln!(out, "redis:         {}\n", summary.redis);

    let phases = &summary.phases;
    let row = |out: &mut String, label: &str, cell: &dyn Fn(&PhaseReport) -> String| {
        let _ = write!(out, "{label:<36}");
        for phase in phases {
            let _ = write!(out, "  {:>24}", cell(phase));
        }
        out.push('\n');
    };
    row(&mut out, "", &|p| p.phase.title().to_owned());
    row(&mut out, "served (200)", &|p| p.served.to_string());
    row(&mut out, "refused (429)", &|p| p.refused.to_string());
    if phases.iter().any(|p| p.errors > 0 || p.other_status > 0) {
        row(&mut out, "failed (no answer or other status)", &|p| {
            (p.errors + p.other_status).to_string()
        });
    }
    row(&mut out, "total time, fired to last call *", &|p| {
        p.total_s.map_or("-".to_owned(), |t| format!("{t:.3} s"))
    });
    row(&mut out, "  ideal, from the knobs", &|p| {
        format!("{:.3} s", p.ideal_total_s)
    });
    row(&mut out, "wait in the bucket, mean", &|p| {
        seconds(p.wait_mean_s)
    });
    row(&mut out, "wait in the bucket, max", &|p| {
        seconds(p.wait_max_s)
    });
    row(
        &mut out,
        rule_row(summary.upstream_mode),
        &|p| match p.min_headroom {
            None => "-".to_owned(),
            Some(h) if h < 0.0 => format!("crossed by {}", num(-h.floor())),
            Some(h) => format!("never crossed ({} spare)", num(h.floor())),
        },
    );
    row(&mut out, "predicted served / refused †", &|p| {
        if p.predicted_is_bound {
            format!("<= {} / >= {}", p.predicted_served, p.predicted_refused)
        } else {
            format!("{} / {}", p.predicted_served, p.predicted_refused)
        }
    });
    let _ = writeln!(
        out,
        "\n* from the instant the replicas fired to the upstream's last arrival, on one clock."
    );
    if let Some(direct) = phases.iter().find(|p| p.predicted_is_bound) {
        let _ = writeln!(
            out,
            "† direct: the calls reached the API over {}, so at most {} can be served; through \
             the bucket: on the ideal schedule.",
            seconds(direct.arrival_span_s),
            direct.predicted_served
        );
    }
    for line in explanations(summary) {
        let _ = writeln!(out, "{line}");
    }
    if let [direct, shared] = phases.as_slice() {
        let _ = writeln!(
            out,
            "Direct, the API served {} and refused {}; through the shared bucket it served {} \
             and refused {}: the calls waited instead{}.",
            direct.served,
            direct.refused,
            shared.served,
            shared.refused,
            shared
                .wait_mean_s
                .map_or(String::new(), |w| format!(" (mean {w:.2} s)"))
        );
        if summary.upstream_mode == UpstreamMode::Window && shared.refused > 0 {
            let _ = writeln!(
                out,
                "The window refused {} through the bucket ({} predicted on the ideal schedule).",
                shared.refused, shared.predicted_refused
            );
        }
    }
    for phase in phases {
        for sample in &phase.error_samples {
            let _ = writeln!(out, "{}: {sample}", phase.phase.title());
        }
    }
    if let Some(chart) = &summary.chart {
        let _ = writeln!(out, "chart: {chart}");
    }
    out
}

fn rule_row(mode: UpstreamMode) -> &'static str {
    match mode {
        UpstreamMode::Bucket => "upstream's line quota + quota·t",
        UpstreamMode::Window => "upstream's window (any 1 s)",
    }
}

fn seconds(value: Option<f64>) -> String {
    value.map_or("-".to_owned(), |s| format!("{s:.3} s"))
}
