//! The report as text: how the run was set up, the table of the phases, and the per-second
//! and open-calls tables when the run is about them. What the numbers mean is docs/demos.md.

use std::fmt::Write;

use crate::cli::{arg_name, Phase, RunArgs, StrategyArg};
use crate::report::summary::Summary;
use crate::report::{open_calls, pushback, table};

pub fn text(summary: &Summary, args: &RunArgs) -> String {
    let mut out = String::new();
    setup(&mut out, summary);
    // A sustained run has no burst to explain: its story is the per-second table.
    if args.duration.is_none() {
        table::render(&mut out, summary);
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
        pushback::render(&mut out, report, phase, args);
    }
    let open: Vec<_> = summary
        .phases
        .iter()
        .filter_map(|p| p.open_calls.as_ref().map(|o| (p.phase, o)))
        .collect();
    if !open.is_empty() {
        open_calls::render(&mut out, args, &open);
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
