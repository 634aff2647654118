//! The pattern's "rate-limited flow" chart, as a hand-written SVG: writes per 100 ms against
//! time for each phase (stored, duplicate and refused stacked, and phase 4's answered
//! queries), with the quota line. Phase 4's panels, and the strip of its queries' waits
//! under each, are in `priority`.

pub mod priority;

use std::fmt::Write;

use demo_support::svg::{
    bin_count, bin_of, document, nice_ceiling, text, time_axis_end, vertical_label, BIN_S as BIN,
};

use crate::db::Verdict;
use crate::phases::Point;

pub struct Panel {
    pub title: String,
    pub points: Vec<Point>,
    /// A moment to mark (the kill), in seconds after the start.
    pub mark: Option<(f64, String)>,
    /// Phase 4: the queries' waits, in a strip under the panel.
    pub waits: Option<priority::Waits>,
}

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 190.0;
const HEIGHT: f64 = 200.0;

const STORED: &str = "#2e9d5b";
const DUPLICATE: &str = "#e0a800";
const REFUSED: &str = "#d64541";
const ANSWERED: &str = "#7b4fc9";
const QUOTA: &str = "#1f6fb2";
/// Between a panel's bottom and the next one's (or its waits strip's) top.
const GAP: f64 = 70.0;

/// `per_bin_quota`: writes the quota allows per 100 ms.
pub fn render(heading: &str, per_bin_quota: f64, panels: &[Panel]) -> String {
    let last = panels
        .iter()
        .flat_map(|p| p.points.iter().map(|pt| pt.t))
        .fold(0.0_f64, f64::max);
    // A common time axis, so the phases compare at a glance.
    let t_max = time_axis_end(last);
    let queries = panels
        .iter()
        .any(|p| p.points.iter().any(|pt| pt.verdict == Verdict::Answered));
    let mut body = String::new();
    let mut y = 60.0;
    for (i, panel) in panels.iter().enumerate() {
        draw(&mut body, panel, y, t_max, per_bin_quota);
        if i == 0 {
            legend(&mut body, y, queries);
        }
        y += HEIGHT + GAP;
        if let Some(waits) = &panel.waits {
            priority::draw_waits(
                &mut body,
                waits,
                y - GAP + 45.0,
                (LEFT, WIDTH - RIGHT),
                t_max,
            );
            y += priority::HEIGHT + GAP - 20.0;
        }
    }
    document(WIDTH, y, heading, 16.0, &body)
}

fn draw(out: &mut String, panel: &Panel, top: f64, t_max: f64, quota: f64) {
    let bins = bin_count(t_max);
    let mut counts = vec![[0u32; 4]; bins];
    for p in &panel.points {
        let bin = bin_of(p.t, bins);
        let slot = match p.verdict {
            Verdict::Stored => 0,
            Verdict::Duplicate => 1,
            Verdict::Refused => 2,
            Verdict::Answered => 3,
        };
        counts[bin][slot] += 1;
    }
    let busiest = counts
        .iter()
        .map(|c| c.iter().sum::<u32>())
        .max()
        .unwrap_or(0);
    let y_max = nice_ceiling(f64::from(busiest).max(quota) * 1.1);
    let x = |t: f64| LEFT + t / t_max * (WIDTH - LEFT - RIGHT);
    let y = |v: f64| top + HEIGHT - v / y_max * HEIGHT;

    text(out, LEFT, top - 10.0, 14.0, "start", "#111", &panel.title);
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{top}" width="{:.1}" height="{HEIGHT}" fill="none" stroke="#999"/>"##,
        WIDTH - LEFT - RIGHT
    );
    // Ticks: every 0.5 s, and five on the count axis.
    let mut t = 0.0;
    while t <= t_max + 1e-9 {
        text(
            out,
            x(t),
            top + HEIGHT + 15.0,
            11.0,
            "middle",
            "#555",
            &format!("{t:.1}"),
        );
        t += 0.5;
    }
    text(
        out,
        x(t_max),
        top + HEIGHT + 30.0,
        11.0,
        "end",
        "#555",
        "seconds after the start",
    );
    for i in 0..=5 {
        let v = y_max * f64::from(i) / 5.0;
        text(
            out,
            LEFT - 6.0,
            y(v) + 4.0,
            11.0,
            "end",
            "#555",
            &format!("{v:.0}"),
        );
    }
    vertical_label(out, 18.0, top + HEIGHT / 2.0, "writes per 100 ms");
    let w = (x(BIN) - x(0.0) - 1.0).max(0.5);
    for (i, c) in counts.iter().enumerate() {
        let mut level = 0.0;
        for (n, color) in c.iter().zip([STORED, DUPLICATE, REFUSED, ANSWERED]) {
            if *n > 0 {
                let next = level + f64::from(*n);
                let _ = writeln!(
                    out,
                    r#"<rect x="{:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{color}"/>"#,
                    x(i as f64 * BIN) + 0.5,
                    y(next),
                    y(level) - y(next)
                );
                level = next;
            }
        }
    }
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" y1="{q:.1}" x2="{:.1}" y2="{q:.1}" stroke="{QUOTA}" stroke-width="2" stroke-dasharray="6 4"/>"#,
        x(t_max),
        q = y(quota)
    );
    text(
        out,
        x(t_max) + 6.0,
        y(quota) + 4.0,
        11.0,
        "start",
        QUOTA,
        &format!("quota: {quota:.0} per 100 ms"),
    );
    if let Some((at, label)) = &panel.mark {
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{1:.1}" stroke="#111" stroke-width="1.5"/>"##,
            x(*at),
            top + HEIGHT
        );
        text(out, x(*at) + 4.0, top + 14.0, 11.0, "start", "#111", label);
    }
}

/// The colors' key, right of the first panel; the queries' only when there are some.
fn legend(out: &mut String, top: f64, queries: bool) {
    let lx = WIDTH - RIGHT + 20.0;
    let mut keys = vec![
        (STORED, "stored (201)"),
        (DUPLICATE, "duplicate, ignored (200)"),
        (REFUSED, "refused (429)"),
    ];
    if queries {
        keys.push((ANSWERED, "query answered (200)"));
    }
    for (i, (color, label)) in keys.iter().enumerate() {
        let ly = top + 30.0 + 20.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{lx:.1}" y="{ly:.1}" width="12" height="12" fill="{color}"/>"#
        );
        text(out, lx + 18.0, ly + 10.0, 11.0, "start", "#333", label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_bars_and_the_quota_line() {
        let points = vec![
            Point {
                t: 0.01,
                verdict: Verdict::Stored,
            },
            Point {
                t: 0.02,
                verdict: Verdict::Refused,
            },
            Point {
                t: 0.5,
                verdict: Verdict::Duplicate,
            },
        ];
        let svg = render(
            "a <test> & co",
            200.0,
            &[Panel {
                title: "phase".to_owned(),
                points,
                mark: Some((0.3, "kill".to_owned())),
                waits: None,
            }],
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a &lt;test&gt; &amp; co"));
        assert!(svg.contains(STORED) && svg.contains(REFUSED) && svg.contains(DUPLICATE));
        assert!(svg.contains("quota: 200 per 100 ms"));
    }
}
