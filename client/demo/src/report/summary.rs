//! The numbers of a run: per phase, what the upstream served and refused, how long the
//! whole took, and how long calls waited in the bucket; next to what the knobs predict. The
//! table, the prose, the chart and `--json` all show these.

use std::time::Duration;

use serde::Serialize;

use crate::cli::{Phase, RunArgs, StrategyArg};
use crate::report::open_calls::{open_calls, OpenCallsReport};
use crate::report::pushback::{pushback, PushbackReport};
use crate::scenario::{Outcome, PhaseOutcome};
use crate::theory;
use crate::upstream::Arrival;
use crate::wire::{replica_of, CallRecord, LimiterCounts};

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The knobs, as given.
    pub args: RunArgs,
    pub calls: u64,
    /// The strategy the replicas used: `--strategy`, or its default (`RunArgs::strategy`).
    pub strategy: StrategyArg,
    /// What served the bucket phase, as the replicas' limiters report it: `module` or
    /// `script` (`mixed` if they differ).
    pub backend: Option<String>,
    /// Whether the Redis server has the module loaded.
    pub module_loaded: bool,
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
    /// The bucket phase second by second, and issue 19's figures.
    pub pushback: Option<PushbackReport>,
    /// Whether the report shows it (a sustained run, another application, the supplier's
    /// count, or a 429 in the bucket phase).
    pub show_pushback: bool,
    pub chart: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    pub phase: Phase,
    pub calls: u64,
    /// As the upstream counted them.
    pub served: u64,
    pub refused: u64,
    /// Of `refused`, those for concurrency: the supplier had its most calls open already.
    pub refused_for_concurrency: u64,
    /// Calls open at once, with a limit on them, a slow spell or a cap (`--supplier-max-open`,
    /// `--slow-from`, `--max-in-flight`).
    pub open_calls: Option<OpenCallsReport>,
    /// Any other HTTP status.
    pub other_status: u64,
    /// Calls that got no HTTP status (no token in time, connection trouble).
    pub errors: u64,
    /// Calls not served in the end (their last attempt was not a 200).
    pub unserved: u64,
    /// 429s the replicas got (every attempt counted).
    pub seen_429: u64,
    /// `THROTTLE.PAUSE`s the replicas' limiters sent (`None` when direct: no limiter).
    pub pauses: Option<u64>,
    /// Pauses that changed nothing: the bucket already owed tokens further out than the
    /// pause (reservations granted before it keep their slots), or another replica's pause
    /// already held it; the server's reply put the next token beyond the Retry-After.
    pub pauses_absorbed: u64,
    /// Sends after the first, over every call.
    pub retries: u64,
    /// What served the calls: `module`, `script`, `mixed`, or `None` when direct.
    pub backend: Option<String>,
    /// The upstream's first 429, from the shared start, on its clock, and its Retry-After.
    pub first_429_s: Option<f64>,
    pub first_retry_after_s: Option<u64>,
    /// The upstream's last 429, from the shared start.
    pub last_429_s: Option<f64>,
    /// Calls that reached the upstream from the first 429 to the end of its Retry-After,
    /// from any replica (bucket phase only: the pause should hold them all back).
    pub arrivals_in_first_pause: Option<u64>,
    /// 429s at the upstream after the first 429's Retry-After ran out.
    pub refused_after_first_pause: Option<u64>,
    /// Each pause the replicas set, from the shared start: when it was sent, and when the
    /// Retry-After it was asked for ran out (overlapping ones merged).
    pub pause_windows: Vec<(f64, f64)>,
    /// Every call as the upstream saw it, in arrival order.
    pub arrivals: Vec<ArrivalReport>,
    pub error_samples: Vec<String>,
    /// From the instant the replicas fired to the upstream's last arrival, both on the
    /// upstream's clock. The bucket cannot make this shorter than the ideal.
    pub total_s: Option<f64>,
    /// From the upstream's first arrival to its last. Can come out a little under the ideal
    /// when the first calls spent longer on the way than the last one.
    pub arrival_span_s: Option<f64>,
    /// The total the bucket allows at best (0 when direct: everything at once).
    pub ideal_total_s: f64,
    /// What the knobs predict. Through the bucket: the upstream's verdicts on an ideal
    /// machine, the replicas obeying each 429 (`theory::obey`; the server decides when calls
    /// go). Direct: a bound, from how far apart
    /// the calls arrived (`arrival_span_s`, the machine's doing): at most this many served,
    /// at least this many refused (`predicted_is_bound`).
    pub predicted_served: u64,
    pub predicted_refused: u64,
    pub predicted_is_bound: bool,
    /// Through the bucket: the pauses the ideal run takes, and what the upstream would have
    /// refused on the plain schedule, had nobody obeyed a 429.
    pub predicted_pauses: Option<u64>,
    pub predicted_refused_without_pause: Option<u64>,
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
    /// The most any call's wait for its token exceeded the sleeps the server asked for (its
    /// round trips and its timer's lateness: the machine's share), in ms.
    pub machine_wait_max_ms: f64,
    /// The least room the upstream's rule left over the phase (negative: crossed): under
    /// `quota + quota·t` for a bucket, under `quota` in any trailing second for a window.
    pub min_headroom: Option<f64>,
}

/// One call at the upstream.
#[derive(Debug, Clone, Serialize)]
pub struct ArrivalReport {
    /// From the shared start, on the upstream's clock.
    pub t_s: f64,
    pub replica: Option<u32>,
    pub status: u16,
    pub retry_after_s: Option<u64>,
}

pub fn summarize(
    args: &RunArgs,
    redis: &str,
    module_loaded: bool,
    interval: Duration,
    outcome: &Outcome,
    chart: Option<String>,
) -> Summary {
    let bucket = outcome.phases.iter().find(|p| p.phase == Phase::Bucket);
    let calls = match args.duration {
        Some(_) => bucket.map_or(0, |p| p.records.len() as u64),
        None => args.total_calls(),
    };
    let pushback = bucket.and_then(|p| pushback(args, p));
    // Refusals for concurrency have a report of their own: only the rate's call for this one.
    let refused_for_rate = bucket.map_or(0, |p| {
        p.arrivals
            .iter()
            .filter(|a| a.status == 429 && !a.too_many_open)
            .count()
    });
    let show_pushback = args.duration.is_some()
        || args.other_app.is_some()
        || args.supplier_headers
        || refused_for_rate > 0;
    let fit = theory::fit(args.upstream_mode, args.quota, args.capacity, args.rate);
    Summary {
        args: args.clone(),
        calls,
        strategy: args.strategy(),
        backend: bucket.and_then(served_by),
        module_loaded,
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
        pushback,
        show_pushback,
        chart,
    }
}

fn phase_report(args: &RunArgs, interval: Duration, outcome: &PhaseOutcome) -> PhaseReport {
    let calls = outcome.records.len() as u64;
    let obeyed =
        (outcome.phase == Phase::Bucket).then(|| theory::ideal_bucket_phase(args, interval));
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
            let obeyed = obeyed.as_ref().expect("the bucket phase");
            (obeyed.served(), obeyed.refused(), false)
        }
    };
    let predicted_refused_without_pause = (outcome.phase == Phase::Bucket).then(|| {
        // One attempt, reserved at the start: the plain schedule, nobody obeying a 429.
        let once = StrategyArg::Reserve;
        let (mode, quota, capacity) = (args.upstream_mode, args.quota, args.capacity);
        theory::obey(mode, quota, calls, capacity, interval, once, 1).refused()
    });
    // Arrivals that pass `f`; a sum and a most over the calls' records.
    let arrivals = |f: &dyn Fn(&Arrival) -> bool| outcome.arrivals.iter().filter(|a| f(a)).count();
    let sum = |f: fn(&CallRecord) -> u64| outcome.records.iter().map(f).sum::<u64>();
    let most = |f: fn(&CallRecord) -> u64| outcome.records.iter().map(f).max().unwrap_or(0);

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
    let secs = |us: Option<u64>| us.map(|us| us as f64 / 1e6);
    let last_sent_s = secs(answered.iter().map(|r| r.sent_us).max());
    let first_token_s = secs(answered.iter().map(|r| r.start_us + r.wait_us).min());

    let refusals: Vec<_> = outcome
        .arrivals
        .iter()
        .filter(|a| a.status == 429)
        .collect();
    let first_429 = refusals.first();
    let first_pause_ends = first_429.map(|a| {
        (
            a.at,
            // Without Retry-After the replicas pause 1 s.
            a.at + Duration::from_secs(a.retry_after_s.unwrap_or(1)),
        )
    });
    let (arrivals_in_first_pause, refused_after_first_pause) =
        match (outcome.phase, first_pause_ends) {
            (Phase::Bucket, Some((from, to))) => (
                Some(arrivals(&|a| a.at > from && a.at < to) as u64),
                Some(refusals.iter().filter(|a| a.at >= to).count() as u64),
            ),
            _ => (None, None),
        };
    let pause_windows = merge(
        (outcome.records.iter().flat_map(|r| &r.pauses))
            .map(|&(at_us, asked_ms)| {
                (
                    at_us as f64 / 1e6,
                    (at_us as f64 / 1e3 + asked_ms as f64) / 1e3,
                )
            })
            .collect(),
    );
    let limiters = outcome.phase == Phase::Bucket;
    let totals = LimiterCounts::total(&outcome.stats);

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
        served: arrivals(&|a| a.status == 200) as u64,
        refused: arrivals(&|a| a.status == 429) as u64,
        refused_for_concurrency: arrivals(&|a| a.too_many_open) as u64,
        open_calls: open_calls(args, outcome),
        other_status: arrivals(&|a| a.status != 200 && a.status != 429) as u64,
        errors: errors.len() as u64,
        error_samples: errors.into_iter().take(5).collect(),
        unserved: sum(|r| u64::from(r.status != 200)),
        seen_429: sum(|r| u64::from(r.refused)),
        pauses: limiters.then_some(totals.pauses),
        pauses_absorbed: totals.pauses_unchanged,
        retries: sum(|r| u64::from(r.sends.saturating_sub(1))),
        backend: served_by(outcome),
        first_429_s: first_429.map(|a| outcome.since_start(a.at)),
        first_retry_after_s: first_429.and_then(|a| a.retry_after_s),
        last_429_s: refusals.last().map(|a| outcome.since_start(a.at)),
        arrivals_in_first_pause,
        refused_after_first_pause,
        pause_windows,
        arrivals: outcome
            .arrivals
            .iter()
            .map(|a| ArrivalReport {
                t_s: outcome.since_start(a.at),
                replica: replica_of(&a.id),
                status: a.status,
                retry_after_s: a.retry_after_s,
            })
            .collect(),
        total_s: offsets.last().map(|&(t, _)| t),
        arrival_span_s: arrival_span.map(|d| d.as_secs_f64()),
        first_token_s,
        last_sent_s,
        ideal_total_s: obeyed.as_ref().map_or(0.0, |o| o.last().as_secs_f64()),
        predicted_served,
        predicted_refused,
        predicted_is_bound,
        predicted_pauses: obeyed.as_ref().map(|o| o.pauses.len() as u64),
        predicted_refused_without_pause,
        wait_mean_s,
        wait_max_s,
        round_trips: sum(|r| u64::from(r.round_trips)),
        start_lag_max_ms: most(|r| r.start_us) as f64 / 1e3,
        machine_wait_max_ms: answered
            .iter()
            .map(|r| r.wait_us.saturating_sub(r.slept_us))
            .max()
            .unwrap_or(0) as f64
            / 1e3,
        min_headroom,
    }
}

/// What served a phase's calls, as its replicas' limiters say.
fn served_by(outcome: &PhaseOutcome) -> Option<String> {
    let mut names = outcome.stats.iter().filter_map(|s| s.backend.as_deref());
    let first = names.next()?;
    Some(if names.all(|n| n == first) {
        first.to_owned()
    } else {
        "mixed".to_owned()
    })
}

/// Sorted, overlapping spans joined.
fn merge(mut spans: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(spans.len());
    for (from, to) in spans {
        match merged.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => merged.push((from, to)),
        }
    }
    merged
}

/// Seconds from the shared start to each arrival, and whether each was served. The
/// upstream's allowance is whole at the start, so its line can start there too.
pub fn arrival_offsets(outcome: &PhaseOutcome) -> Vec<(f64, bool)> {
    (outcome.arrivals.iter())
        .map(|a| (outcome.since_start(a.at), a.status == 200))
        .collect()
}
