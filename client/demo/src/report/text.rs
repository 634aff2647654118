//! The report as text: how the run was set up, the table of the phases, and the per-second
//! and open-calls tables when the run is about them. What the numbers mean is docs/demos.md.

use std::fmt::Write;

use crate::cli::{arg_name, Phase, RunArgs, StrategyArg};
use crate::limit::UpstreamMode;
use crate::report::open_calls::OpenCallsReport;
use crate::report::pushback::{
    PushbackReport, RECOVERY_WINDOW_S, TARGET_RECOVERED_SHARE, TARGET_REFUSED_SHARE,
    TARGET_SERVED_SHARE, WARM_UP_S,
};
use crate::report::summary::{PhaseReport, Summary};

pub fn text(summary: &Summary, args: &RunArgs) -> String {
    let mut out = String::new();
    setup(&mut out, summary);
    // A sustained run has no burst to explain: its story is the per-second table.
    if args.duration.is_none() {
        table(&mut out, summary);
        let _ = writeln!(
            out,
            "fit: {}{}",
            summary.fit_reason,
            summary.fit_example.map_or(String::new(), |(c, r)| format!(
                "; try --capacity {c} --rate {r}"
            ))
        );
    }
    if let (true, Some(report), Some(phase)) = (
        summary.show_pushback,
        &summary.pushback,
        summary.phases.iter().find(|p| p.phase == Phase::Bucket),
    ) {
        pushback_tables(&mut out, report, phase, args);
    }
    let open: Vec<_> = summary
        .phases
        .iter()
        .filter_map(|p| p.open_calls.as_ref().map(|o| (p.phase, o)))
        .collect();
    if !open.is_empty() {
        open_calls_tables(&mut out, args, &open);
    }
    for phase in &summary.phases {
        for sample in &phase.error_samples {
            let _ = writeln!(out, "{}: {sample}", phase.phase.title());
        }
    }
    if let Some(chart) = &summary.chart {
        let _ = writeln!(out, "chart: {chart}");
    }
    out
}

/// The upstream, the shared bucket, the Redis and what served the commands.
fn setup(out: &mut String, summary: &Summary) {
    let _ = writeln!(
        out,
        "\nupstream:      mock API on {}, {} (429 {} above it)",
        summary.upstream,
        summary.args.upstream_mode.rule(summary.args.quota),
        if !summary.args.no_retry_after {
            "with Retry-After"
        } else {
            "without Retry-After, as nginx's limit_req"
        }
    );
    let _ = writeln!(
        out,
        "shared bucket: key {}, capacity {}, rate {}/s (one token every {:.3} ms), strategy {}{}",
        summary.key,
        summary.args.capacity,
        summary.args.rate,
        summary.token_interval_ms,
        arg_name(summary.strategy),
        if summary.args.strategy.is_none() && summary.strategy == StrategyArg::Poll {
            " (the default against a window)"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "redis:         {}", summary.redis);
    let _ = writeln!(
        out,
        "backend:       {}, from --backend {}{}\n",
        match summary.backend.as_deref() {
            Some("script") => "script (the commands ran as Lua, EVALSHA)",
            Some("module") => "module (the THROTTLE.* commands ran natively)",
            Some(other) => other,
            None => "unknown",
        },
        arg_name(summary.args.backend),
        if summary.module_loaded {
            ""
        } else {
            "; the server has no module"
        }
    );
}

/// The table of the phases, a column each, and its footnotes.
fn table(out: &mut String, summary: &Summary) {
    let phases = &summary.phases;
    let row = |out: &mut String, label: &str, cell: &dyn Fn(&PhaseReport) -> String| {
        let _ = write!(out, "{label:<36}");
        for phase in phases {
            let _ = write!(out, "  {:>24}", cell(phase));
        }
        out.push('\n');
    };
    row(out, "", &|p| p.phase.title().to_owned());
    row(out, "served (200)", &|p| p.served.to_string());
    row(out, "refused (429)", &|p| p.refused.to_string());
    row(out, "429s seen by the replicas", &|p| {
        p.seen_429.to_string()
    });
    row(out, "pauses (THROTTLE.PAUSE)", &|p| {
        p.pauses
            .map_or("- (no limiter)".to_owned(), |n| n.to_string())
    });
    row(out, "retries after a 429", &|p| match p.phase {
        Phase::Direct => "- (none)".to_owned(),
        Phase::Bucket => p.retries.to_string(),
    });
    row(out, "last 429 at", &|p| seconds(p.last_429_s));
    // The pause's rows, only when something was paused (otherwise they would be all
    // dashes): when, what reached the API meanwhile, and what was refused after.
    if phases.iter().any(|p| p.pauses.is_some_and(|n| n > 0)) {
        row(out, "fleet paused (first Retry-After)", &|p| match (
            p.phase,
            p.first_429_s,
            p.first_retry_after_s,
        ) {
            // Without Retry-After the replicas pause 1 s.
            (Phase::Bucket, Some(at), ra) => {
                format!("{at:.3} s to {:.3} s", at + ra.unwrap_or(1) as f64)
            }
            _ => "-".to_owned(),
        });
        row(out, "  calls at the API meanwhile", &|p| {
            dash(p.arrivals_in_first_pause)
        });
        row(out, "  429s after it", &|p| {
            dash(p.refused_after_first_pause)
        });
    }
    if phases.iter().any(|p| p.errors > 0 || p.other_status > 0) {
        row(out, "failed (no answer or other status)", &|p| {
            (p.errors + p.other_status).to_string()
        });
    }
    if phases
        .iter()
        .any(|p| p.phase == Phase::Bucket && p.unserved > 0)
    {
        row(out, "not served in the end", &|p| match p.phase {
            Phase::Direct => "-".to_owned(),
            Phase::Bucket => p.unserved.to_string(),
        });
    }
    row(out, "total time, fired to last call *", &|p| {
        seconds(p.total_s)
    });
    row(out, "  ideal, from the knobs", &|p| {
        format!("{:.3} s", p.ideal_total_s)
    });
    row(out, "wait in the bucket, mean", &|p| seconds(p.wait_mean_s));
    row(out, "wait in the bucket, max", &|p| seconds(p.wait_max_s));
    let rule = match summary.args.upstream_mode {
        UpstreamMode::Bucket => "upstream's line quota + quota·t",
        UpstreamMode::Window => "upstream's window (any 1 s)",
    };
    row(out, rule, &|p| match p.min_headroom {
        None => "-".to_owned(),
        Some(h) if h < 0.0 => format!("crossed by {}", -h.floor()),
        Some(h) => format!("never crossed ({} spare)", h.floor()),
    });
    row(out, "predicted served / refused †", &|p| {
        if p.predicted_is_bound {
            format!("<= {} / >= {}", p.predicted_served, p.predicted_refused)
        } else {
            format!("{} / {}", p.predicted_served, p.predicted_refused)
        }
    });
    if phases
        .iter()
        .any(|p| p.predicted_pauses.is_some_and(|n| n > 0))
    {
        row(out, "  predicted pauses (without: refused)", &|p| match (
            p.predicted_pauses,
            p.predicted_refused_without_pause,
        ) {
            (Some(pauses), Some(without)) => format!("{pauses} (without: {without})"),
            _ => "-".to_owned(),
        });
    }
    let _ = writeln!(
        out,
        "\n* from the instant the replicas fired to the upstream's last arrival, on one clock."
    );
    if let Some(direct) = phases.iter().find(|p| p.predicted_is_bound) {
        let _ = writeln!(
            out,
            "† direct: the calls reached the API over {}, so at most {} can be served; through \
             the bucket: on an ideal machine, every 429 obeyed.",
            seconds(direct.arrival_span_s),
            direct.predicted_served
        );
    }
}

/// A value, or a dash where there is none.
fn dash(value: Option<impl std::fmt::Display>) -> String {
    value.map_or("-".to_owned(), |v| v.to_string())
}

fn seconds(value: Option<f64>) -> String {
    dash(value.map(|s| format!("{s:.3} s")))
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
    dash(bp.map(|bp| format!("{:.2}", f64::from(bp) / 10_000.0)))
}

/// The bucket phase per second, the limiters' pushback counters, and issue 19's figures.
fn pushback_tables(out: &mut String, report: &PushbackReport, phase: &PhaseReport, args: &RunArgs) {
    let _ = writeln!(
        out,
        "\nbucket phase per second (cut on 429: {}, recovery {} s; pause check: {}; supplier's count: {}; Retry-After: {}; other application: {})",
        if args.no_cut { "off, pause only" } else { "0.7" },
        args.cut_recovery,
        if args.no_pause_check { "off" } else { "on" },
        if args.supplier_headers { "sent and read" } else { "not sent" },
        if args.no_retry_after { "none, as nginx" } else { "sent" },
        match (args.other_app, args.other_app_stop_after) {
            (Some(rate), Some(stop)) => format!("{}/s until {} s", rate, stop),
            (Some(rate), None) => format!("{}/s throughout", rate),
            _ => "none".to_owned(),
        }
    );
    out.push_str(
        "    s  fleet sent   fleet 429s  other sent   other 429s    rate factor  paused\n",
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
    let per_grant = dash(report.round_trips_per_grant.map(|r| format!("{r:.2}")));
    let _ = writeln!(
        out,
        "limiters: {} grants, {} round trips ({} per grant), {} cuts (+{} in an episode already cut), {} pauses ({} changed nothing), {} syncs lowered the bucket ({} changed nothing), {} reserved calls held by a pause; lowest rate factor {}",
        report.limiters.granted,
        report.limiters.round_trips,
        per_grant,
        report.limiters.cuts,
        report.limiters.cuts_same_episode,
        report.limiters.pauses,
        report.limiters.pauses_unchanged,
        report.limiters.syncs,
        report.limiters.syncs_unchanged,
        report.limiters.held_by_pause,
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
            "  round trips per grant: {per_grant}; time to the last call: {}",
            seconds(phase.total_s)
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
            args.other_app_stop_after.unwrap_or(f64::NAN),
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
        let after =
            |s: Option<f64>| s.map_or("not within the run".to_owned(), |s| format!("{s:.1} s"));
        let _ = writeln!(
            out,
            "  back to >= {} % of the configured {}/s ({:.2}/s served over a trailing {} s) after the other application stopped: {} (target <= the recovery time, {} s; watched {:.0} s): {}",
            TARGET_RECOVERED_SHARE * 100.0,
            args.rate,
            need,
            RECOVERY_WINDOW_S,
            after(report.recovered_after_s),
            target,
            watched,
            verdict(report.recovered_after_s.is_some_and(|s| s <= target))
        );
        let _ = writeln!(
            out,
            "  the bucket's rate factor at >= 0.95 for good: {} after the stop",
            after(report.factor_recovered_after_s)
        );
    }
}

/// The supplier's rules, then per phase its figures and its seconds.
fn open_calls_tables(out: &mut String, args: &RunArgs, phases: &[(Phase, &OpenCallsReport)]) {
    let _ = writeln!(
        out,
        "\ncalls open at once, as the supplier counts them {}",
        args.supplier_rules()
    );
    for (phase, report) in phases {
        let _ = writeln!(
            out,
            "{}: most open at once {}{}; refused for concurrency {}, for the rate {}{}",
            phase.title(),
            report.most_open,
            report
                .supplier_max_open
                .map_or(String::new(), |n| format!(" (limit {n})")),
            report.refused_for_concurrency,
            report.refused_for_rate,
            match (report.slot_waits, report.leases_lost) {
                (Some(waits), Some(lost)) => format!(
                    "; waits for a slot {waits}, leases lost {lost} (cap {})",
                    report.max_in_flight.unwrap_or_default()
                ),
                _ => String::new(),
            }
        );
        out.push_str("      s  served   429 concurrency     429 rate  most open  slow\n");
        for s in &report.seconds {
            let _ = writeln!(
                out,
                "{:>7}  {:>6}  {:>16}  {:>11}  {:>9}  {}",
                format!("{}-{}", s.t, s.t + 1),
                s.fleet_served,
                s.refused_for_concurrency,
                s.fleet_refused.saturating_sub(s.refused_for_concurrency),
                s.most_open,
                if s.slow { "yes" } else { "" }
            );
        }
    }
}
