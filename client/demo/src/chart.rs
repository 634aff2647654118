//! The timeline chart, as a hand-written SVG: requests per 100 ms for each phase (served and
//! refused, against the upstream's burst and quota), then the cumulative count the upstream
//! received against its allowance line, so the burst, the plateau and the line never
//! crossed are visible at a glance.

use std::fmt::Write;

use demo_support::svg::{
    bin_count, bin_of, document, nice_ceiling, nice_step, rect, text, time_axis_end,
    vertical_label, BIN_S as BIN,
};

use crate::limit::UpstreamMode;
use crate::report::pushback::PushbackReport;
use crate::theory;

mod open_calls;

pub use open_calls::OpenCallsSpec;

/// One phase as the upstream saw it.
pub struct PhaseSeries {
    pub title: String,
    /// The phase's numbers, shown after its title.
    pub subtitle: String,
    /// Seconds after the shared start, in order, and whether each was served.
    pub arrivals: Vec<(f64, bool)>,
    /// When the fleet was paused after a 429: from the pause to the end of its Retry-After.
    pub pauses: Vec<(f64, f64)>,
    /// The supplier's count of calls open, at every change: seconds after the shared start,
    /// and the count then (empty when the run is not about them).
    pub open: Vec<(f64, u32)>,
    /// When the supplier refused a call for concurrency, seconds after the shared start.
    pub too_many_open: Vec<f64>,
}

/// What the chart is about.
pub struct ChartSpec {
    pub heading: String,
    pub mode: UpstreamMode,
    pub quota: u32,
    pub capacity: u64,
    pub rate: f64,
    /// The bucket phase second by second (fleet sends and 429s, the other application, the
    /// rate factor), shown under the rest when there is pushback to see.
    pub per_second: Option<PushbackReport>,
    /// The panel of calls open at once, when the run is about them.
    pub open_calls: Option<OpenCallsSpec>,
}

const WIDTH: f64 = 1040.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 240.0; // room for the legends

const SERVED: &str = "#2e9d5b";
const REFUSED: &str = "#d64541";
const ALLOWANCE: &str = "#e08a00";
const PAUSED: &str = "#9aa7b8";
const OTHER_APP: &str = "#8e44ad";
const FACTOR: &str = "#1f6fb2";
const PHASE_COLORS: [&str; 2] = ["#8e44ad", "#1f6fb2"];

pub fn render(spec: &ChartSpec, phases: &[PhaseSeries]) -> String {
    let last = phases
        .iter()
        .flat_map(|p| p.arrivals.last().map(|a| a.0))
        .chain(phases.iter().flat_map(|p| p.pauses.iter().map(|w| w.1)))
        .chain(phases.iter().flat_map(|p| p.open.last().map(|o| o.0)))
        .fold(0.0_f64, f64::max);
    let t_max = time_axis_end(last);

    let bars_height = 170.0;
    let cumulative_height = 300.0;
    let mut y = 70.0;
    let mut body = String::new();
    for (index, phase) in phases.iter().enumerate() {
        bars(&mut body, spec, phase, y, bars_height, t_max, index == 0);
        y += bars_height + 70.0;
    }
    match spec.mode {
        UpstreamMode::Bucket => cumulative(&mut body, spec, phases, y, cumulative_height, t_max),
        UpstreamMode::Window => trailing(&mut body, spec, phases, y, cumulative_height, t_max),
    }
    y += cumulative_height + 60.0;
    if let Some(open) = &spec.open_calls {
        let height = 220.0;
        open_calls::panel(&mut body, open, phases, y, height, t_max);
        y += height + 70.0;
    }
    if let Some(report) = &spec.per_second {
        let height = 260.0;
        per_second(&mut body, spec, report, y, height);
        y += height + 60.0;
    }
    document(WIDTH, y + 10.0, &spec.heading, 17.0, &body)
}

/// Requests per 100 ms, served stacked under refused, for one phase.
fn bars(
    out: &mut String,
    spec: &ChartSpec,
    phase: &PhaseSeries,
    top: f64,
    height: f64,
    t_max: f64,
    legend: bool,
) {
    let bins = bin_count(t_max);
    let mut counts = vec![(0u32, 0u32); bins];
    for &(t, served) in &phase.arrivals {
        let bin = bin_of(t, bins);
        if served {
            counts[bin].0 += 1;
        } else {
            counts[bin].1 += 1;
        }
    }
    let busiest = counts.iter().map(|(s, r)| s + r).max().unwrap_or(0);
    let burst = f64::from(spec.quota);
    let y_max = nice_ceiling(f64::from(busiest).max(burst) * 1.1);
    let axes = Axes::new(top, height, t_max, y_max);
    let title = if phase.subtitle.is_empty() {
        phase.title.clone()
    } else {
        format!("{}: {}", phase.title, phase.subtitle)
    };
    axes.frame(out, &title, "requests per 100 ms");
    pause_bands(out, &axes, &phase.pauses, true);

    let bin_width = axes.x(BIN) - axes.x(0.0);
    for (i, &(served, refused)) in counts.iter().enumerate() {
        let x = axes.x(i as f64 * BIN) + 1.0;
        let w = (bin_width - 2.0).max(1.0);
        let y_served = axes.y(f64::from(served));
        let y_total = axes.y(f64::from(served + refused));
        if served > 0 {
            rect(out, x, y_served, w, axes.y(0.0) - y_served, SERVED);
        }
        if refused > 0 {
            rect(out, x, y_total, w, y_served - y_total, REFUSED);
        }
    }
    let per_bin = f64::from(spec.quota) * BIN;
    let (burst_label, quota_label) = match spec.mode {
        UpstreamMode::Bucket => (
            format!("upstream burst: {}", spec.quota),
            format!(
                "quota {}/s = {} per 100 ms",
                spec.quota,
                theory::num(per_bin)
            ),
        ),
        UpstreamMode::Window => (
            format!("window: {} in any 1 s", spec.quota),
            format!(
                "{}/s on average = {} per 100 ms",
                spec.quota,
                theory::num(per_bin)
            ),
        ),
    };
    axes.hline(out, burst, "#777", &burst_label);
    axes.hline(out, per_bin, ALLOWANCE, &quota_label);
    if legend {
        let x = WIDTH - RIGHT + 20.0;
        swatch(out, x, top + 10.0, SERVED, "served (200)");
        swatch(out, x, top + 30.0, REFUSED, "refused (429)");
    }
    if !phase.pauses.is_empty() {
        let x = WIDTH - RIGHT + 20.0;
        let _ = writeln!(
            out,
            r#"<rect x="{x:.1}" y="{:.1}" width="14" height="12" fill="{PAUSED}" fill-opacity="0.35"/>"#,
            top + 50.0
        );
        text(
            out,
            x + 20.0,
            top + 60.0,
            12.0,
            "start",
            "#333",
            "fleet paused (Retry-After)",
        );
    }
}

/// The bucket phase per second: the fleet's served and refused calls stacked, the other
/// application's calls beside them, and the bucket's rate factor (lowest sampled in each
/// second) on a scale of its own, 0 to 100 % at the right.
fn per_second(out: &mut String, spec: &ChartSpec, report: &PushbackReport, top: f64, height: f64) {
    let t_max = (report.seconds.len() as f64).max(1.0);
    let busiest = report
        .seconds
        .iter()
        .map(|s| s.fleet_sent.max(s.other_sent))
        .max()
        .unwrap_or(0);
    let y_max = nice_ceiling(f64::from(busiest).max(f64::from(spec.quota)) * 1.15);
    let axes = Axes::new(top, height, t_max, y_max);
    let title = format!(
        "bucket phase per second: {} fleet sends, {} refused; other application {} sent, {} refused; {} cut{}",
        report.fleet_sent,
        report.fleet_refused,
        report.other_sent,
        report.other_refused,
        report.cuts,
        if report.cuts == 1 { "" } else { "s" },
    );
    axes.frame(out, &title, "requests per second");
    let slot = axes.x(1.0) - axes.x(0.0);
    let w = ((slot - 2.0) / 2.0).max(1.0);
    for s in &report.seconds {
        let x = axes.x(f64::from(s.t)) + 1.0;
        let y_served = axes.y(f64::from(s.fleet_served));
        let y_total = axes.y(f64::from(s.fleet_sent));
        if s.fleet_served > 0 {
            rect(out, x, y_served, w, axes.y(0.0) - y_served, SERVED);
        }
        if s.fleet_sent > s.fleet_served {
            rect(out, x, y_total, w, y_served - y_total, REFUSED);
        }
        if s.other_sent > 0 {
            let y_other = axes.y(f64::from(s.other_sent));
            rect(out, x + w, y_other, w, axes.y(0.0) - y_other, OTHER_APP);
        }
    }
    axes.hline(
        out,
        f64::from(spec.quota),
        ALLOWANCE,
        &format!("supplier: {}/s", spec.quota),
    );
    axes.hline(
        out,
        spec.rate,
        "#777",
        &format!("bucket: {}/s", theory::num(spec.rate)),
    );
    // The rate factor, 0 at the bottom to 1 at the top.
    let points: Vec<String> = report
        .seconds
        .iter()
        .filter_map(|s| {
            s.factor_min_bp.map(|bp| {
                let y = top + height - f64::from(bp) / 10_000.0 * height;
                format!("{:.1},{y:.1}", axes.x(f64::from(s.t) + 0.5))
            })
        })
        .collect();
    if !points.is_empty() {
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{FACTOR}" stroke-width="2"/>"#,
            points.join(" ")
        );
    }
    let right = axes.x(t_max);
    for pct in [0, 50, 100] {
        let y = top + height - f64::from(pct) / 100.0 * height;
        text(
            out,
            right + 4.0,
            y + 4.0,
            11.0,
            "start",
            FACTOR,
            &format!("{pct} %"),
        );
    }
    if let Some(stop) = report.other_app_stop_s {
        if stop < t_max {
            let x = axes.x(stop);
            let _ = writeln!(
                out,
                r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{:.1}" stroke="#555" stroke-dasharray="4 3"/>"##,
                top + height
            );
            text(
                out,
                x + 4.0,
                top + 14.0,
                11.0,
                "start",
                "#333",
                "other application stops",
            );
        }
    }
    let x = WIDTH - RIGHT + 40.0;
    swatch(out, x, top + 10.0, SERVED, "fleet served (200)");
    swatch(out, x, top + 30.0, REFUSED, "fleet refused (429)");
    swatch(out, x, top + 50.0, OTHER_APP, "other application");
    swatch(out, x, top + 70.0, FACTOR, "bucket rate factor");
}

/// Shaded spans where the fleet was paused after a 429, behind the data; `label` names the
/// first one at its top.
fn pause_bands(out: &mut String, axes: &Axes, pauses: &[(f64, f64)], label: bool) {
    for (i, &(from, to)) in pauses.iter().enumerate() {
        let (x0, x1) = (axes.x(from.max(0.0)), axes.x(to.min(axes.t_max)));
        if x1 <= x0 {
            continue;
        }
        let _ = writeln!(
            out,
            r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{PAUSED}" fill-opacity="0.35"/>"#,
            axes.top,
            x1 - x0,
            axes.height
        );
        if label && i == 0 {
            text(
                out,
                x0 + 4.0,
                axes.top + 14.0,
                11.0,
                "start",
                "#445",
                &format!("paused {:.3} s to {:.3} s", from, to),
            );
        }
    }
}

/// Bucket mode: cumulative arrivals per phase against the upstream's allowance line,
/// `quota + quota·t` (its bucket is full when the replicas fire).
fn cumulative(
    out: &mut String,
    spec: &ChartSpec,
    phases: &[PhaseSeries],
    top: f64,
    height: f64,
    t_max: f64,
) {
    let most = phases.iter().map(|p| p.arrivals.len()).max().unwrap_or(0) as f64;
    let allowed_at_end = theory::allowance(spec.quota, t_max);
    let y_max = nice_ceiling(most.max(allowed_at_end.min(most * 1.5)) * 1.05);
    let axes = Axes::new(top, height, t_max, y_max);
    axes.frame_over_pauses(
        out,
        phases,
        "calls received by the upstream so far, against what it allows",
        "calls (cumulative)",
    );
    let allowance = format!(
        "M{:.1},{:.1} L{:.1},{:.1}",
        axes.x(0.0),
        axes.y(theory::allowance(spec.quota, 0.0)),
        axes.x(t_max),
        axes.y(allowed_at_end)
    );
    clip_path(out, &axes, &allowance, ALLOWANCE, 3.0, "");
    // The shared bucket's own release line, thin: capacity + rate·t.
    let release = format!(
        "M{:.1},{:.1} L{:.1},{:.1}",
        axes.x(0.0),
        axes.y(theory::bucket_release(spec.capacity, spec.rate, 0.0)),
        axes.x(t_max),
        axes.y(theory::bucket_release(spec.capacity, spec.rate, t_max))
    );
    clip_path(out, &axes, &release, "#999", 1.2, DASHED);

    let counted: Vec<Vec<(f64, f64, bool)>> = phases
        .iter()
        .map(|p| {
            p.arrivals
                .iter()
                .enumerate()
                .map(|(i, &(t, served))| (t, (i + 1) as f64, served))
                .collect()
        })
        .collect();
    draw_steps(out, &axes, phases, &counted);
    legends(
        out,
        top,
        phases,
        &format!("allowed: {q} + {q}·t", q = spec.quota),
        &format!("bucket: {} + {}·t", spec.capacity, theory::num(spec.rate)),
    );
}

/// Window mode: a sliding window has no cumulative line (it allows `quota` in every
/// one-second span), so this counts, at each moment, the calls of the last second.
fn trailing(
    out: &mut String,
    spec: &ChartSpec,
    phases: &[PhaseSeries],
    top: f64,
    height: f64,
    t_max: f64,
) {
    let burst_second = theory::bucket_release(spec.capacity, spec.rate, 1.0);
    let counted: Vec<Vec<(f64, f64, bool)>> = phases
        .iter()
        .map(|p| {
            let times: Vec<f64> = p.arrivals.iter().map(|&(t, _)| t).collect();
            p.arrivals
                .iter()
                .zip(theory::trailing_counts(&times))
                .map(|(&(t, served), inside)| (t, inside as f64, served))
                .collect()
        })
        .collect();
    let most = counted
        .iter()
        .flatten()
        .map(|&(_, n, _)| n)
        .fold(0.0, f64::max);
    let y_max = nice_ceiling(most.max(f64::from(spec.quota)).max(burst_second) * 1.1);
    let axes = Axes::new(top, height, t_max, y_max);
    axes.frame_over_pauses(
        out,
        phases,
        "calls received by the upstream in the last second, against its window",
        "calls in the last 1 s",
    );
    let limit = axes.y(f64::from(spec.quota));
    let window = format!(
        "M{:.1},{limit:.1} L{:.1},{limit:.1}",
        axes.x(0.0),
        axes.x(t_max)
    );
    clip_path(out, &axes, &window, ALLOWANCE, 3.0, "");
    axes.hline(out, burst_second, "#999", "");

    // Between arrivals the count also falls, as calls leave the window.
    let mut stepped = Vec::with_capacity(counted.len());
    for phase in phases {
        let mut events: Vec<(f64, f64)> = phase
            .arrivals
            .iter()
            .flat_map(|&(t, _)| [(t, 1.0), (t + 1.0, -1.0)])
            .collect();
        // At one instant, a call leaving goes before one arriving: (t - 1 s, t].
        events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let mut level = 0.0;
        let mut line = Vec::with_capacity(events.len());
        for (t, delta) in events {
            level += delta;
            line.push((t, level, true));
        }
        stepped.push(line);
    }
    draw_steps(out, &axes, phases, &stepped);
    for points in &counted {
        refused_dots(out, &axes, points);
    }
    legends(
        out,
        top,
        phases,
        &format!("window: {} in any 1 s", spec.quota),
        &format!(
            "bucket: {} + {} in 1 s",
            spec.capacity,
            theory::num(spec.rate)
        ),
    );
}

const DASHED: &str = r#" stroke-dasharray="6 4""#;

/// A step line per phase through `(t, level)` points, with refused calls as red dots.
fn draw_steps(
    out: &mut String,
    axes: &Axes,
    phases: &[PhaseSeries],
    points: &[Vec<(f64, f64, bool)>],
) {
    for ((_, line), color) in phases.iter().zip(points).zip(PHASE_COLORS) {
        let mut d = format!("M{:.1},{:.1}", axes.x(0.0), axes.y(0.0));
        let mut level = 0.0;
        for &(t, next, _) in line {
            let _ = write!(
                d,
                " L{:.1},{:.1} L{:.1},{:.1}",
                axes.x(t),
                axes.y(level),
                axes.x(t),
                axes.y(next)
            );
            level = next;
        }
        let _ = write!(d, " L{:.1},{:.1}", axes.x(axes.t_max), axes.y(level));
        clip_path(out, axes, &d, color, 2.0, "");
        refused_dots(out, axes, line);
    }
}

fn refused_dots(out: &mut String, axes: &Axes, points: &[(f64, f64, bool)]) {
    for &(t, level, served) in points {
        if !served {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.6" fill="{REFUSED}"/>"#,
                axes.x(t),
                axes.y(level)
            );
        }
    }
}

fn legends(out: &mut String, top: f64, phases: &[PhaseSeries], allowance: &str, bucket: &str) {
    let x = WIDTH - RIGHT + 20.0;
    legend_line(out, x, top + 10.0, ALLOWANCE, 3.0, "", allowance);
    legend_line(out, x, top + 30.0, "#999", 1.2, DASHED, bucket);
    phase_legends(out, top + 50.0, phases, "refused (429)");
}

/// A line's key per phase from `top`, then the red dot's (`refused`), right of a panel; the
/// dot's y.
fn phase_legends(out: &mut String, top: f64, phases: &[PhaseSeries], refused: &str) -> f64 {
    let x = WIDTH - RIGHT + 20.0;
    for (i, (phase, color)) in phases.iter().zip(PHASE_COLORS).enumerate() {
        legend_line(out, x, top + 20.0 * i as f64, color, 2.0, "", &phase.title);
    }
    let y = top + 20.0 * phases.len() as f64;
    let _ = writeln!(
        out,
        r#"<circle cx="{:.1}" cy="{:.1}" r="2.6" fill="{REFUSED}"/>"#,
        x + 12.0,
        y + 6.0
    );
    text(out, x + 30.0, y + 10.0, 12.0, "start", "#333", refused);
    y
}

struct Axes {
    top: f64,
    height: f64,
    t_max: f64,
    y_max: f64,
}

impl Axes {
    fn new(top: f64, height: f64, t_max: f64, y_max: f64) -> Axes {
        Axes {
            top,
            height,
            t_max,
            y_max,
        }
    }

    fn x(&self, t: f64) -> f64 {
        LEFT + t / self.t_max * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, v: f64) -> f64 {
        self.top + self.height - v / self.y_max * self.height
    }

    fn bottom(&self) -> f64 {
        self.top + self.height
    }

    /// Title, frame, grid and ticks on both axes.
    fn frame(&self, out: &mut String, title: &str, y_label: &str) {
        let (left, right) = (self.x(0.0), self.x(self.t_max));
        text(out, left, self.top - 10.0, 14.0, "start", "#111", title);
        let y_step = nice_step(self.y_max / 5.0);
        let mut v = 0.0;
        while v <= self.y_max + 1e-9 {
            let y = self.y(v);
            let _ = writeln!(
                out,
                r##"<line x1="{left:.1}" y1="{y:.1}" x2="{right:.1}" y2="{y:.1}" stroke="#eee"/>"##
            );
            text(
                out,
                left - 6.0,
                y + 4.0,
                11.0,
                "end",
                "#555",
                &theory::num(v),
            );
            v += y_step;
        }
        let x_step = if self.t_max <= 6.0 {
            0.5
        } else if self.t_max <= 20.0 {
            1.0
        } else {
            5.0
        };
        let mut t = 0.0;
        while t <= self.t_max + 1e-9 {
            let x = self.x(t);
            let _ = writeln!(
                out,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#999"/>"##,
                self.bottom(),
                self.bottom() + 4.0
            );
            text(
                out,
                x,
                self.bottom() + 16.0,
                11.0,
                "middle",
                "#555",
                &format!("{t:.1} s"),
            );
            t += x_step;
        }
        let _ = writeln!(
            out,
            r##"<rect x="{left:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#999"/>"##,
            self.top,
            right - left,
            self.height
        );
        vertical_label(out, 18.0, self.top + self.height / 2.0, y_label);
        text(
            out,
            right,
            self.bottom() + 32.0,
            11.0,
            "end",
            "#555",
            "time since the replicas fired",
        );
    }

    /// The last panel's frame, with every phase's pauses shaded behind the data (unlabelled:
    /// the phases' own panels name them).
    fn frame_over_pauses(
        &self,
        out: &mut String,
        phases: &[PhaseSeries],
        title: &str,
        y_label: &str,
    ) {
        self.frame(out, title, y_label);
        for phase in phases {
            pause_bands(out, self, &phase.pauses, false);
        }
    }

    /// A labelled horizontal reference line, if it is inside the plot.
    fn hline(&self, out: &mut String, v: f64, color: &str, label: &str) {
        if v > self.y_max {
            return;
        }
        let (left, right, y) = (self.x(0.0), self.x(self.t_max), self.y(v));
        let _ = writeln!(
            out,
            r#"<line x1="{left:.1}" y1="{y:.1}" x2="{right:.1}" y2="{y:.1}" stroke="{color}" stroke-width="1.5" stroke-dasharray="5 4"/>"#
        );
        if !label.is_empty() {
            text(out, right + 6.0, y + 4.0, 11.0, "start", color, label);
        }
    }
}

fn clip_path(out: &mut String, axes: &Axes, d: &str, color: &str, width: f64, extra: &str) {
    // Lines that leave the plot are cut at its frame.
    let id = format!("clip{:.0}", axes.top);
    if !out.contains(&format!(r#"id="{id}""#)) {
        let _ = writeln!(
            out,
            r#"<clipPath id="{id}"><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}"/></clipPath>"#,
            axes.x(0.0),
            axes.top,
            axes.x(axes.t_max) - axes.x(0.0),
            axes.height
        );
    }
    let _ = writeln!(
        out,
        r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="{width}"{extra} clip-path="url(#{id})"/>"#
    );
}

fn swatch(out: &mut String, x: f64, y: f64, color: &str, label: &str) {
    rect(out, x, y, 14.0, 12.0, color);
    text(out, x + 20.0, y + 10.0, 12.0, "start", "#333", label);
}

fn legend_line(
    out: &mut String,
    x: f64,
    y: f64,
    color: &str,
    width: f64,
    extra: &str,
    label: &str,
) {
    let _ = writeln!(
        out,
        r#"<line x1="{x:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="{width}"{extra}/>"#,
        y + 6.0,
        x + 24.0,
        y + 6.0
    );
    text(out, x + 30.0, y + 10.0, 12.0, "start", "#333", label);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mode: UpstreamMode) -> ChartSpec {
        ChartSpec {
            heading: "40 calls <test> & co".to_owned(),
            mode,
            quota: 10,
            capacity: 8,
            rate: 9.0,
            per_second: None,
            open_calls: None,
        }
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
        for mode in [UpstreamMode::Bucket, UpstreamMode::Window] {
            let svg = render(&spec(mode), &phases());
            assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
            assert!(svg.contains("40 calls &lt;test&gt; &amp; co"));
            assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
            assert!(svg.contains("phase 1: direct") && svg.contains("phase 2: shared bucket"));
            assert!(svg.contains("refused (429)"));
            // 30 refused calls are dots on the cumulative line, plus one in the legend.
            assert!(svg.matches(&format!(r#"fill="{REFUSED}"/>"#)).count() >= 31);
            assert!(!svg.contains("NaN") && !svg.contains("inf"));
        }
        let bucket = render(&spec(UpstreamMode::Bucket), &phases());
        assert!(bucket.contains("allowed: 10 + 10·t"));
        // The pause: a band in its phase's panel (labelled) and one in the last panel.
        assert!(bucket.contains("paused 0.334 s to 1.334 s"));
        assert!(bucket.contains("fleet paused (Retry-After)"));
        assert_eq!(bucket.matches(&format!(r#"fill="{PAUSED}""#)).count(), 3);
        let window = render(&spec(UpstreamMode::Window), &phases());
        assert!(
            window.contains("window: 10 in any 1 s") && window.contains("bucket: 8 + 9 in 1 s")
        );
    }

    #[test]
    fn the_calls_open_at_once_against_the_limit_and_the_cap() {
        let mut spec = spec(UpstreamMode::Bucket);
        spec.open_calls = Some(OpenCallsSpec {
            supplier_max_open: Some(4),
            max_in_flight: Some(4),
            slow: Some((0.0, 2.0)),
        });
        let mut phases = phases();
        phases[0].open = vec![(0.001, 1), (0.002, 4), (0.6, 0)];
        phases[0].too_many_open = vec![0.003, 0.004];
        phases[1].open = vec![(0.001, 3), (0.5, 2), (1.9, 0)];
        let svg = render(&spec, &phases);
        assert!(svg.contains("calls open at the supplier at once"));
        assert!(svg.contains("supplier's limit: 4"));
        assert!(svg.contains("fleet's cap: 4") && svg.contains("slow spell"));
        assert!(svg.contains("refused for concurrency"));
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        // Without the panel, none of it.
        assert!(!render(&self::spec(UpstreamMode::Bucket), &phases).contains("slow spell"));
    }

    #[test]
    fn an_empty_run_still_renders() {
        let svg = render(&spec(UpstreamMode::Bucket), &[]);
        assert!(svg.ends_with("</svg>\n") && !svg.contains("NaN"));
    }
}
