//! Phase 4's part of the chart: a panel per run (the bulk load's writes and the queries
//! answered, per 100 ms), each with a strip under it of every query's wait for its tokens
//! against the time it was due, on one scale for both runs, with the target line.

use std::fmt::Write;

use demo_support::svg::{nice_ceiling, text, vertical_label};

use crate::chart::Panel;
use crate::phases::priority::PrioritySummary;

/// The strip's height.
pub const HEIGHT: f64 = 110.0;

const WAIT: &str = "#7b4fc9";
const TARGET: &str = "#d64541";

/// The queries' waits of one run.
pub struct Waits {
    /// (seconds after the start the query was due, its wait in ms).
    pub points: Vec<(f64, f64)>,
    /// The p99 target, ms (2 ms over the measured round trip's p99).
    pub target_ms: f64,
    pub p99_ms: f64,
    /// The strip's top, ms: the same for every run, so they compare at a glance.
    pub y_max_ms: f64,
}

/// A panel per run.
pub fn panels(p: &PrioritySummary) -> Vec<Panel> {
    let y_max_ms = nice_ceiling(
        p.runs
            .iter()
            .flat_map(|r| r.waits.iter().map(|w| w.1))
            .chain(p.runs.iter().map(|r| r.interactive.target_p99_ms))
            .fold(1.0_f64, f64::max)
            * 1.1,
    );
    p.runs
        .iter()
        .map(|r| {
            let (i, b) = (&r.interactive, &r.bulk);
            Panel {
                title: format!(
                    "phase 4, {}: bulk finished at {:.2} s (ideal {:.2} s), {} refused; \
                     queries' wait p99 {:.2} ms (round trip p99 {:.2} ms)",
                    r.label,
                    b.finish_s,
                    b.ideal_s,
                    b.refused + i.refused,
                    i.wait_p99_ms,
                    i.round_trip_p99_ms
                ),
                points: r.points.clone(),
                mark: None,
                waits: Some(Waits {
                    points: r.waits.clone(),
                    target_ms: i.target_p99_ms,
                    p99_ms: i.wait_p99_ms,
                    y_max_ms,
                }),
            }
        })
        .collect()
}

/// The strip at `top`, between `left` and `right`, on the panels' time axis to `t_max`.
pub fn draw_waits(out: &mut String, w: &Waits, top: f64, (left, right): (f64, f64), t_max: f64) {
    let x = |t: f64| left + t / t_max * (right - left);
    let y = |ms: f64| top + HEIGHT - ms.min(w.y_max_ms) / w.y_max_ms * HEIGHT;
    let _ = writeln!(
        out,
        r##"<rect x="{left}" y="{top}" width="{:.1}" height="{HEIGHT}" fill="none" stroke="#999"/>"##,
        right - left
    );
    for i in 0..=2 {
        let v = w.y_max_ms * f64::from(i) / 2.0;
        text(
            out,
            left - 6.0,
            y(v) + 4.0,
            11.0,
            "end",
            "#555",
            &format!("{v:.1}"),
        );
    }
    vertical_label(out, 18.0, top + HEIGHT / 2.0, "query wait, ms");
    for (t, ms) in &w.points {
        let _ = writeln!(
            out,
            r#"<circle cx="{:.1}" cy="{:.1}" r="2" fill="{WAIT}"/>"#,
            x(*t),
            y(*ms)
        );
    }
    let _ = writeln!(
        out,
        r#"<line x1="{left}" y1="{q:.1}" x2="{right:.1}" y2="{q:.1}" stroke="{TARGET}" stroke-width="1.5" stroke-dasharray="4 3"/>"#,
        q = y(w.target_ms)
    );
    let label = format!("target p99 {:.2} ms", w.target_ms);
    text(
        out,
        right + 6.0,
        y(w.target_ms) + 4.0,
        11.0,
        "start",
        TARGET,
        &label,
    );
    let p99 = format!("measured p99 {:.2} ms", w.p99_ms);
    text(
        out,
        right + 6.0,
        top + HEIGHT - 4.0,
        11.0,
        "start",
        WAIT,
        &p99,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_every_wait_and_the_target() {
        let waits = Waits {
            points: vec![(0.1, 0.3), (0.2, 3.5), (0.3, 40.0)],
            target_ms: 2.4,
            p99_ms: 3.5,
            y_max_ms: 5.0,
        };
        let mut out = String::new();
        draw_waits(&mut out, &waits, 100.0, (70.0, 810.0), 1.0);
        assert_eq!(out.matches("<circle").count(), 3);
        assert!(out.contains("target p99 2.40 ms") && out.contains("measured p99 3.50 ms"));
        // A wait off the scale sits at its top, not above the strip.
        assert!(out.contains(r#"cy="100.0""#), "{out}");
    }
}
