//! The report as text: how the run was set up, the table of the phases, and the prose under
//! it.

use std::fmt::Write;

use crate::cli::StrategyArg;
use crate::report::summary::Summary;
use crate::report::{prose, table};
use crate::theory::num;

pub fn text(summary: &Summary) -> String {
    let mut out = String::new();
    setup(&mut out, summary);
    table::render(&mut out, summary);
    for line in prose::explanations(summary)
        .into_iter()
        .chain(prose::comparison(summary))
    {
        let _ = writeln!(out, "{line}");
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
        "\nupstream:      mock API on {}, {} (429 with Retry-After above it)",
        summary.upstream,
        summary.upstream_mode.rule(summary.quota)
    );
    let _ = writeln!(
        out,
        "shared bucket: key {}, capacity {}, rate {}/s (one token every {:.3} ms), strategy {}{}",
        summary.key,
        summary.capacity,
        num(summary.rate),
        summary.token_interval_ms,
        summary.strategy.name(),
        if summary.strategy_defaulted && summary.strategy == StrategyArg::Poll {
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
        summary.backend_requested.name(),
        if summary.module_loaded {
            ""
        } else {
            "; the server has no module"
        }
    );
}
