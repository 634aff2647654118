//! The timeline chart, as SVG: requests per 100 ms for each phase (served and refused,
//! against the upstream's burst and quota), then what the upstream received against its rule
//! (the cumulative count against its line, or the last second's against its window), the
//! calls open at the supplier when the run is about them, and the bucket phase per second
//! when there is pushback to see; each phase's data from the run and its numbers.

use std::fmt::Write;

use demo_support::svg::{
    binned, circle, document, legend_line, swatch, swatches, text, time_axis_end, Page, Plot,
    BIN_S as BIN,
};

use crate::cli::RunArgs;
use crate::limit::UpstreamMode;
use crate::report::pushback::PushbackReport;
use crate::report::summary::{arrival_offsets, Summary};
use crate::scenario::Outcome;

/// One phase as the upstream saw it.
pub struct PhaseSeries {
    pub title: String,
    /// The phase's numbers, shown after its title.
    pub subtitle: String,
    /// Seconds after the shared start, in order, and whether each was served.
    pub arrivals: Vec<(f64, bool)>,
    /// When the fleet was paused after a 429: from the pause to the end of its Retry-After.
    pub pauses: Vec<(f64, f64)>,
    /// The supplier's count of calls open at every change (seconds after the shared start,
    /// the count then; empty when the run is not about them).
    pub open: Vec<(f64, u32)>,
    /// When the supplier refused a call for concurrency, seconds after the shared start.
    pub too_many_open: Vec<f64>,
}

/// The chart's data for each phase, titled with its numbers.
pub fn chart_series(outcome: &Outcome, summary: &Summary) -> Vec<PhaseSeries> {
    outcome
        .phases
        .iter()
        .zip(&summary.phases)
        .map(|(p, r)| {
            let mut subtitle = format!("{} served, {} refused", r.served, r.refused);
            if r.refused_for_concurrency > 0 {
                let _ = write!(subtitle, " ({} for concurrency)", r.refused_for_concurrency);
            }
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
                open: (p.open_log.iter())
                    .map(|c| (p.since_start(c.at), c.open))
                    .collect(),
                too_many_open: p
                    .arrivals
                    .iter()
                    .filter(|a| a.too_many_open)
                    .map(|a| p.since_start(a.at))
                    .collect(),
            }
        })
        .collect()
}

const PAGE: Page = Page {
    width: 1040.0,
    left: 70.0,
    right: 240.0,
};
/// Where the legends start, right of the plots.
const LEGEND_X: f64 = 820.0;
const TIME: &str = "time since the replicas fired";

const SERVED: &str = "#2e9d5b";
const REFUSED: &str = "#d64541";
const ALLOWANCE: &str = "#e08a00";
const PAUSED: &str = "#9aa7b8";
const OTHER_APP: &str = "#8e44ad";
const FACTOR: &str = "#1f6fb2";
const SLOW: &str = "#f0b429";
const PHASE_COLORS: [&str; 2] = ["#8e44ad", "#1f6fb2"];
const WIDE: &str = r#" stroke-width="3""#;
const PHASE_LINE: &str = r#" stroke-width="2""#;
const THIN_DASHED: &str = r#" stroke-width="1.2" stroke-dasharray="6 4""#;

/// The chart of a run with `args`; `per_second`: the bucket phase's, when there is pushback to
/// see.
pub fn render(
    args: &RunArgs,
    per_second: Option<&PushbackReport>,
    phases: &[PhaseSeries],
) -> String {
    let last = phases
        .iter()
        .flat_map(|p| p.arrivals.last().map(|a| a.0))
        .chain(phases.iter().flat_map(|p| p.pauses.iter().map(|w| w.1)))
        .chain(phases.iter().flat_map(|p| p.open.last().map(|o| o.0)))
        .fold(0.0_f64, f64::max);
    let t_max = time_axis_end(last);
    let mut y = 70.0;
    let mut body = String::new();
    for (index, phase) in phases.iter().enumerate() {
        bars(&mut body, args, phase, y, t_max, index == 0);
        y += 240.0;
    }
    match args.upstream_mode {
        UpstreamMode::Bucket => cumulative(&mut body, args, phases, y, t_max),
        UpstreamMode::Window => trailing(&mut body, args, phases, y, t_max),
    }
    y += 360.0;
    if args.watches_open_calls() {
        open_calls(&mut body, args, phases, y, t_max);
        y += 290.0;
    }
    if let Some(report) = per_second {
        seconds_panel(&mut body, args, report, y);
        y += 320.0;
    }
    let heading = format!(
        "{} replicas x {} PIX status queries at once; the API allows {}",
        args.replicas,
        args.calls,
        args.upstream_mode.rule(args.quota)
    );
    document(PAGE.width, y + 10.0, &heading, 17.0, &body)
}

/// Requests per 100 ms, served stacked under refused, for one phase.
fn bars(out: &mut String, args: &RunArgs, phase: &PhaseSeries, top: f64, t_max: f64, legend: bool) {
    let events = phase
        .arrivals
        .iter()
        .map(|&(t, served)| (t, usize::from(!served)));
    let (counts, busiest) = binned::<2>(t_max, events);
    let burst = f64::from(args.quota);
    let plot = PAGE.plot(top, 170.0, t_max, f64::from(busiest).max(burst) * 1.1);
    let title = match phase.subtitle.as_str() {
        "" => phase.title.clone(),
        subtitle => format!("{}: {subtitle}", phase.title),
    };
    plot.frame(out, &title, "requests per 100 ms", TIME);
    pause_bands(out, &plot, &phase.pauses, true);
    plot.bars(out, &counts, &[SERVED, REFUSED]);
    let (quota, per_bin) = (args.quota, burst * BIN);
    let (burst_label, quota_label) = match args.upstream_mode {
        UpstreamMode::Bucket => (
            format!("upstream burst: {quota}"),
            format!("quota {quota}/s = {per_bin} per 100 ms"),
        ),
        UpstreamMode::Window => (
            format!("window: {quota} in any 1 s"),
            format!("{quota}/s on average = {per_bin} per 100 ms"),
        ),
    };
    plot.hline(out, burst, "#777", &burst_label);
    plot.hline(out, per_bin, ALLOWANCE, &quota_label);
    if legend {
        let keys = [(SERVED, "served (200)"), (REFUSED, "refused (429)")];
        swatches(out, (LEGEND_X, top + 10.0), &keys);
    }
    if !phase.pauses.is_empty() {
        let paused = "fleet paused (Retry-After)";
        swatch(out, LEGEND_X, top + 50.0, PAUSED, paused);
    }
}

/// Shaded spans where the fleet was paused after a 429, behind the data; `label` names the
/// first one at its top.
fn pause_bands(out: &mut String, plot: &Plot, pauses: &[(f64, f64)], label: bool) {
    for &span in pauses {
        plot.band(out, span, PAUSED, 0.35);
    }
    if let (true, Some(&(from, to))) = (label, pauses.first()) {
        plot.note(
            out,
            from,
            "#445",
            &format!("paused {from:.3} s to {to:.3} s"),
        );
    }
}

/// Bucket mode: cumulative arrivals per phase against the upstream's allowance line,
/// `quota + quota·t` (its bucket is full when the replicas fire), and the shared bucket's
/// release line, `capacity + rate·t`.
fn cumulative(out: &mut String, args: &RunArgs, phases: &[PhaseSeries], top: f64, t_max: f64) {
    let most = phases.iter().map(|p| p.arrivals.len()).max().unwrap_or(0) as f64;
    let (q, capacity) = (f64::from(args.quota), args.capacity as f64);
    let allowed_at_end = q + q * t_max;
    let y_max = most.max(allowed_at_end.min(most * 1.5)) * 1.05;
    let plot = PAGE.plot(top, 300.0, t_max, y_max);
    let title = "calls received by the upstream so far, against what it allows";
    frame_over_pauses(out, &plot, phases, title, "calls (cumulative)");
    let allowed = [(0.0, q), (t_max, allowed_at_end)];
    plot.line(out, &allowed, false, ALLOWANCE, WIDE);
    let release = [(0.0, capacity), (t_max, capacity + args.rate * t_max)];
    plot.line(out, &release, false, "#999", THIN_DASHED);
    let counted: Vec<Vec<(f64, f64, bool)>> = phases
        .iter()
        .map(|p| {
            let numbered = p.arrivals.iter().enumerate();
            numbered
                .map(|(i, &(t, served))| (t, (i + 1) as f64, served))
                .collect()
        })
        .collect();
    let lines: Vec<Vec<(f64, f64)>> = counted
        .iter()
        .map(|line| line.iter().map(|&(t, n, _)| (t, n)).collect())
        .collect();
    phase_lines(out, &plot, &lines, &counted);
    let allowance = format!("allowed: {q} + {q}·t", q = args.quota);
    let bucket = format!("bucket: {} + {}·t", args.capacity, args.rate);
    legends(out, top, phases, &allowance, &bucket);
}

/// Window mode: a sliding window has no cumulative line (it allows `quota` in every
/// one-second span), so this counts, at each moment, the calls of the last second.
fn trailing(out: &mut String, args: &RunArgs, phases: &[PhaseSeries], top: f64, t_max: f64) {
    let burst_second = args.capacity as f64 + args.rate;
    let counted: Vec<Vec<(f64, f64, bool)>> = phases
        .iter()
        .map(|p| {
            let times: Vec<f64> = p.arrivals.iter().map(|&(t, _)| t).collect();
            let inside = crate::theory::trailing_counts(&times).into_iter();
            p.arrivals
                .iter()
                .zip(inside)
                .map(|(&(t, s), n)| (t, n as f64, s))
                .collect()
        })
        .collect();
    let most = counted
        .iter()
        .flatten()
        .map(|&(_, n, _)| n)
        .fold(0.0, f64::max);
    let q = f64::from(args.quota);
    let plot = PAGE.plot(top, 300.0, t_max, most.max(q).max(burst_second) * 1.1);
    let title = "calls received by the upstream in the last second, against its window";
    frame_over_pauses(out, &plot, phases, title, "calls in the last 1 s");
    plot.line(out, &[(0.0, q), (t_max, q)], false, ALLOWANCE, WIDE);
    plot.hline(out, burst_second, "#999", "");
    // Between arrivals the count also falls, as calls leave the window.
    let stepped: Vec<Vec<(f64, f64)>> = phases
        .iter()
        .map(|phase| {
            let mut events: Vec<(f64, f64)> = phase
                .arrivals
                .iter()
                .flat_map(|&(t, _)| [(t, 1.0), (t + 1.0, -1.0)])
                .collect();
            // At one instant, a call leaving goes before one arriving: (t - 1 s, t].
            events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
            let mut level = 0.0;
            let step = |(t, delta): (f64, f64)| {
                level += delta;
                (t, level)
            };
            events.into_iter().map(step).collect()
        })
        .collect();
    phase_lines(out, &plot, &stepped, &counted);
    let window = format!("window: {} in any 1 s", args.quota);
    let bucket = format!("bucket: {} + {} in 1 s", args.capacity, args.rate);
    legends(out, top, phases, &window, &bucket);
}

/// The last panels' frame, with every phase's pauses shaded behind the data (unlabelled: the
/// phases' own panels name them).
fn frame_over_pauses(out: &mut String, plot: &Plot, phases: &[PhaseSeries], title: &str, y: &str) {
    plot.frame(out, title, y, TIME);
    for phase in phases {
        pause_bands(out, plot, &phase.pauses, false);
    }
}

/// A step line per phase, and its refused calls as red dots on it.
fn phase_lines(
    out: &mut String,
    plot: &Plot,
    lines: &[Vec<(f64, f64)>],
    calls: &[Vec<(f64, f64, bool)>],
) {
    for (line, color) in lines.iter().zip(PHASE_COLORS) {
        plot.line(out, line, true, color, PHASE_LINE);
    }
    for &(t, level, served) in calls.iter().flatten() {
        if !served {
            plot.dot(out, t, level, 2.6, REFUSED);
        }
    }
}

fn legends(out: &mut String, top: f64, phases: &[PhaseSeries], allowance: &str, bucket: &str) {
    legend_line(out, (LEGEND_X, top + 10.0), ALLOWANCE, WIDE, allowance);
    legend_line(out, (LEGEND_X, top + 30.0), "#999", THIN_DASHED, bucket);
    phase_legends(out, top + 50.0, phases, "refused (429)");
}

/// A line's key per phase from `top`, then the red dot's (`refused`), right of a panel; the
/// dot's y.
fn phase_legends(out: &mut String, top: f64, phases: &[PhaseSeries], refused: &str) -> f64 {
    for (i, (phase, color)) in phases.iter().zip(PHASE_COLORS).enumerate() {
        let at = (LEGEND_X, top + 20.0 * i as f64);
        legend_line(out, at, color, PHASE_LINE, &phase.title);
    }
    let y = top + 20.0 * phases.len() as f64;
    circle(out, (LEGEND_X + 12.0, y + 6.0), 2.6, REFUSED);
    let (x, text_y) = (LEGEND_X + 30.0, y + 10.0);
    text(out, x, text_y, 12.0, "start", "#333", refused);
    y
}

/// The supplier's own count of calls open over each phase, a step at every change, against
/// its limit and the fleet's cap, with the slow spell shaded behind and each refusal for
/// concurrency a dot on the limit.
fn open_calls(out: &mut String, args: &RunArgs, phases: &[PhaseSeries], top: f64, t_max: f64) {
    let most = phases
        .iter()
        .flat_map(|p| p.open.iter().map(|&(_, n)| n))
        .max()
        .unwrap_or(0);
    let (max_open, max_in_flight) = (args.supplier_max_open(), args.max_in_flight());
    let slow = args.slow_spell().map(|s| (s.from_s, s.until_s));
    let limit = max_open.map_or(0.0, f64::from);
    let cap = max_in_flight.map_or(0.0, |n| n as f64);
    let y_max = f64::from(most).max(limit).max(cap).max(1.0) * 1.25;
    let plot = PAGE.plot(top, 220.0, t_max, y_max);
    let title =
        "calls open at the supplier at once (its own count), against its limit and the fleet's cap";
    plot.frame(out, title, "calls open", TIME);
    if let Some((from, until)) = slow.filter(|&(from, _)| from < t_max) {
        plot.band(out, (from, until), SLOW, 0.18);
        plot.note(out, from, "#7a5b00", "slow spell");
    }
    // Labelled inside the plot, at its right end, so that they never meet the legends; the
    // cap under its line, so that a cap equal to the limit keeps both labels apart.
    let right = plot.right - 4.0;
    if let Some(n) = max_open {
        plot.hline(out, limit, REFUSED, "");
        let (y, label) = (plot.y(limit) - 4.0, format!("supplier's limit: {n}"));
        text(out, right, y, 11.0, "end", REFUSED, &label);
    }
    if let Some(n) = max_in_flight {
        plot.hline(out, cap, SERVED, "");
        let (y, label) = (plot.y(cap) + 14.0, format!("fleet's cap: {n}"));
        text(out, right, y, 11.0, "end", SERVED, &label);
    }
    for (phase, color) in phases.iter().zip(PHASE_COLORS) {
        let line: Vec<(f64, f64)> = phase.open.iter().map(|&(t, n)| (t, f64::from(n))).collect();
        plot.line(out, &line, true, color, PHASE_LINE);
        for &t in &phase.too_many_open {
            plot.dot(out, t, limit, 2.6, REFUSED);
        }
    }
    let y = phase_legends(out, top + 40.0, phases, "refused for concurrency");
    if slow.is_some() {
        swatch(out, LEGEND_X, y + 20.0, SLOW, "slow spell");
    }
}

/// The bucket phase per second: the fleet's served and refused calls stacked, the other
/// application's calls beside them, and the bucket's rate factor (lowest sampled in each
/// second) on a scale of its own, 0 to 100 % at the right.
fn seconds_panel(out: &mut String, args: &RunArgs, report: &PushbackReport, top: f64) {
    let t_max = (report.seconds.len() as f64).max(1.0);
    let seconds = &report.seconds;
    let busiest = seconds
        .iter()
        .map(|s| s.fleet_sent.max(s.other_sent))
        .max()
        .unwrap_or(0);
    let q = f64::from(args.quota);
    let plot = PAGE.plot(top, 260.0, t_max, f64::from(busiest).max(q) * 1.15);
    let cuts = report.limiters.cuts;
    let title = format!(
        "bucket phase per second: {} fleet sends, {} refused; other application {} sent, {} \
         refused; {cuts} cut{}",
        report.fleet_sent,
        report.fleet_refused,
        report.other_sent,
        report.other_refused,
        if cuts == 1 { "" } else { "s" },
    );
    plot.frame(out, &title, "requests per second", TIME);
    for s in seconds {
        let (t, refused) = (f64::from(s.t), s.fleet_sent - s.fleet_served);
        plot.stacked(out, t, 0.5, &[s.fleet_served, refused], &[SERVED, REFUSED]);
        plot.stacked(out, t + 0.5, 0.5, &[s.other_sent], &[OTHER_APP]);
    }
    plot.hline(out, q, ALLOWANCE, &format!("supplier: {}/s", args.quota));
    plot.hline(out, args.rate, "#777", &format!("bucket: {}/s", args.rate));
    // The rate factor, 0 at the bottom to 1 at the top.
    let factor = Plot { y_max: 1.0, ..plot };
    let points: Vec<(f64, f64)> = seconds
        .iter()
        .filter_map(|s| Some((f64::from(s.t) + 0.5, f64::from(s.factor_min_bp?) / 1e4)))
        .collect();
    factor.line(out, &points, false, FACTOR, PHASE_LINE);
    for pct in [0, 50, 100] {
        let (x, y) = (plot.right + 4.0, factor.y(f64::from(pct) / 100.0) + 4.0);
        text(out, x, y, 11.0, "start", FACTOR, &format!("{pct} %"));
    }
    if let Some(stop) = args.other_app_stop_after.filter(|&stop| stop < t_max) {
        plot.vline(out, stop, r##" stroke="#555" stroke-dasharray="4 3""##);
        plot.note(out, stop, "#333", "other application stops");
    }
    let keys = [
        (SERVED, "fleet served (200)"),
        (REFUSED, "fleet refused (429)"),
        (OTHER_APP, "other application"),
        (FACTOR, "bucket rate factor"),
    ];
    swatches(out, (LEGEND_X + 20.0, top + 10.0), &keys);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(flags: &[&str]) -> RunArgs {
        use clap::Parser;
        let with_name = std::iter::once("pix-demo").chain(flags.iter().copied());
        crate::cli::Cli::parse_from(with_name).run
    }

    fn phases() -> Vec<PhaseSeries> {
        vec![
            PhaseSeries {
                title: "phase 1: direct".to_owned(),
                subtitle: "10 served, 30 refused".to_owned(),
                arrivals: (0..40).map(|i| (0.0001 * f64::from(i), i < 10)).collect(),
                pauses: Vec::new(),
                open: Vec::new(),
                too_many_open: Vec::new(),
            },
            PhaseSeries {
                title: "phase 2: shared bucket".to_owned(),
                subtitle: String::new(),
                arrivals: (0..40)
                    .map(|i| (f64::from(i.max(7) - 7) / 9.0, true))
                    .collect(),
                pauses: vec![(0.334, 1.334)],
                open: Vec::new(),
                too_many_open: Vec::new(),
            },
        ]
    }

    #[test]
    fn renders_a_well_formed_svg_with_every_part() {
        for mode in ["bucket", "window"] {
            let svg = render(&knobs(&["--upstream-mode", mode]), None, &phases());
            assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
            assert!(svg.contains("2 replicas x 20 PIX status queries at once; the API allows"));
            assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
            assert!(svg.contains("phase 1: direct") && svg.contains("phase 2: shared bucket"));
            assert!(svg.contains("refused (429)"));
            // 30 refused calls are dots on the cumulative line, plus one in the legend.
            assert!(svg.matches(&format!(r#"fill="{REFUSED}"/>"#)).count() >= 31);
            assert!(!svg.contains("NaN") && !svg.contains("inf"));
        }
        let bucket = render(&knobs(&[]), None, &phases());
        assert!(bucket.contains("allowed: 10 + 10·t"));
        // The pause: a band in its phase's panel (labelled) and one in the last panel.
        assert!(bucket.contains("paused 0.334 s to 1.334 s"));
        assert!(bucket.contains("fleet paused (Retry-After)"));
        assert_eq!(bucket.matches(&format!(r#"fill="{PAUSED}""#)).count(), 3);
        let window = render(&knobs(&["--upstream-mode", "window"]), None, &phases());
        assert!(
            window.contains("window: 10 in any 1 s") && window.contains("bucket: 8 + 9 in 1 s")
        );
    }

    #[test]
    fn the_calls_open_at_once_against_the_limit_and_the_cap() {
        let flags = ["--supplier-max-open", "4", "--max-in-flight", "4"];
        let args = knobs(&[&flags[..], &["--slow-from", "0", "--slow-until", "2"]].concat());
        let mut phases = phases();
        phases[0].open = vec![(0.001, 1), (0.002, 4), (0.6, 0)];
        phases[0].too_many_open = vec![0.003, 0.004];
        phases[1].open = vec![(0.001, 3), (0.5, 2), (1.9, 0)];
        let svg = render(&args, None, &phases);
        assert!(svg.contains("calls open at the supplier at once"));
        assert!(svg.contains("supplier's limit: 4"));
        assert!(svg.contains("fleet's cap: 4") && svg.contains("slow spell"));
        assert!(svg.contains("refused for concurrency"));
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        // Without the panel, none of it.
        assert!(!render(&knobs(&[]), None, &phases).contains("slow spell"));
    }

    #[test]
    fn an_empty_run_still_renders() {
        let svg = render(&knobs(&[]), None, &[]);
        assert!(svg.ends_with("</svg>\n") && !svg.contains("NaN"));
    }
}
