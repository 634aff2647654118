//! The table of the phases, a column each, and its footnotes.

use std::fmt::Write;

use crate::cli::Phase;
use crate::limit::UpstreamMode;
use crate::report::summary::{PhaseReport, Summary};

pub fn render(out: &mut String, summary: &Summary) {
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
    // Only when something was paused: otherwise they would be all dashes.
    if phases.iter().any(|p| p.pauses.is_some_and(|n| n > 0)) {
        pause_rows(out, &row);
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
        p.total_s.map_or("-".to_owned(), |t| format!("{t:.3} s"))
    });
    row(out, "  ideal, from the knobs", &|p| {
        format!("{:.3} s", p.ideal_total_s)
    });
    row(out, "wait in the bucket, mean", &|p| seconds(p.wait_mean_s));
    row(out, "wait in the bucket, max", &|p| seconds(p.wait_max_s));
    row(
        out,
        rule_row(summary.args.upstream_mode),
        &|p| match p.min_headroom {
            None => "-".to_owned(),
            Some(h) if h < 0.0 => format!("crossed by {}", -h.floor()),
            Some(h) => format!("never crossed ({} spare)", h.floor()),
        },
    );
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

type Row<'a> = dyn Fn(&mut String, &str, &dyn Fn(&PhaseReport) -> String) + 'a;

/// The pause's rows: when, what reached the API meanwhile, and what was refused after.
fn pause_rows(out: &mut String, row: &Row<'_>) {
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
        p.arrivals_in_first_pause
            .map_or("-".to_owned(), |n| n.to_string())
    });
    row(out, "  429s after it", &|p| {
        p.refused_after_first_pause
            .map_or("-".to_owned(), |n| n.to_string())
    });
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
