//! The pattern's "rate-limited flow" chart, as SVG: a panel per phase (phase 4: per run) of
//! writes per 100 ms (stored, duplicate and refused stacked, and phase 4's answered queries)
//! against the quota line, and under each of phase 4's a strip of every query's wait for its
//! tokens against the target.

use demo_support::svg::{binned, document, swatches, text, time_axis_end, Page, BIN_S as BIN};

use crate::db::{Verdict, RU_PER_WRITE};
use crate::phases::priority::PrioritySummary;
use crate::phases::{Point, RATE_RU};
use crate::report::Summary;

struct Panel {
    title: String,
    points: Vec<Point>,
    /// A moment to mark (the kill), in seconds after the start.
    mark: Option<(f64, String)>,
    /// Phase 4: the queries' waits, in a strip under the panel.
    waits: Option<Waits>,
}

/// The queries' waits of one run.
struct Waits {
    /// (seconds after the start the query was due, its wait in ms).
    points: Vec<(f64, f64)>,
    /// The p99 target, ms (2 ms over the measured round trip's p99), and the measured p99.
    target_ms: f64,
    p99_ms: f64,
    /// The strip's top, ms (rounded up): the same for every run, so they compare at a glance.
    y_max_ms: f64,
}

const PAGE: Page = Page {
    width: 1000.0,
    left: 70.0,
    right: 190.0,
};
/// Where the legends start, right of the plots.
const LEGEND_X: f64 = 830.0;
const HEIGHT: f64 = 200.0;
/// The waits strip's height.
const STRIP: f64 = 110.0;
/// Between a panel's bottom and the next one's (or its waits strip's) top.
const GAP: f64 = 70.0;
const TIME: &str = "seconds after the start";

const STORED: &str = "#2e9d5b";
const DUPLICATE: &str = "#e0a800";
const REFUSED: &str = "#d64541";
const ANSWERED: &str = "#7b4fc9";
const QUOTA: &str = "#1f6fb2";

pub fn render(summary: &Summary) -> String {
    let mut panels = Vec::new();
    if let Some(r) = &summary.retry {
        panels.push(Panel {
            title: format!(
                "{}: {} sent, {} refused, all stored after {:.2} s",
                r.title, r.writes.sent, r.writes.refused, r.writes.finish_s
            ),
            points: r.points.clone(),
            mark: None,
            waits: None,
        });
    }
    for b in [&summary.backlog, &summary.kill].into_iter().flatten() {
        panels.push(Panel {
            title: format!(
                "{}: {} sent, {} refused, {} duplicates, finished at {:.2} s (predicted {:.2} s)",
                b.title,
                b.writes.sent,
                b.writes.refused,
                b.writes.duplicates,
                b.writes.finish_s,
                b.predicted_s
            ),
            points: b.points.clone(),
            mark: b
                .kill
                .as_ref()
                .map(|k| (k.at_s, format!("worker {} SIGKILLed", k.worker))),
            waits: None,
        });
    }
    if let Some(p) = &summary.priority {
        panels.extend(priority_panels(p));
    }
    let heading = format!(
        "Rate-limited flow: {} records of {RU_PER_WRITE} RU into {RATE_RU} RU/s, writes per 100 ms",
        summary.records
    );
    draw(
        &heading,
        RATE_RU as f64 / RU_PER_WRITE as f64 * BIN,
        &panels,
    )
}

/// Phase 4: a panel per run, with the queries' waits on one scale for both.
fn priority_panels(p: &PrioritySummary) -> Vec<Panel> {
    let runs = p.runs.iter();
    // Rounded up by the strip's plot.
    let y_max_ms = runs
        .clone()
        .flat_map(|r| r.waits.iter().map(|w| w.1))
        .chain(runs.clone().map(|r| r.interactive.target_p99_ms))
        .fold(1.0_f64, f64::max)
        * 1.1;
    runs.map(|r| {
        let (i, b) = (&r.interactive, &r.bulk.writes);
        Panel {
            title: format!(
                "phase 4, {}: bulk finished at {:.2} s (ideal {:.2} s), {} refused; \
                 queries' wait p99 {:.2} ms (round trip p99 {:.2} ms)",
                r.label,
                b.finish_s,
                r.bulk.ideal_s,
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

/// `quota`: writes the quota allows per 100 ms. A common time axis, so the phases compare at
/// a glance.
fn draw(heading: &str, quota: f64, panels: &[Panel]) -> String {
    let points = || panels.iter().flat_map(|p| &p.points);
    let t_max = time_axis_end(points().map(|pt| pt.t).fold(0.0_f64, f64::max));
    let queries = points().any(|pt| pt.verdict == Verdict::Answered);
    let mut body = String::new();
    let mut y = 60.0;
    for (i, panel) in panels.iter().enumerate() {
        bars(&mut body, panel, y, t_max, quota);
        if i == 0 {
            legend(&mut body, y, queries);
        }
        y += HEIGHT + GAP;
        if let Some(waits) = &panel.waits {
            waits_strip(&mut body, waits, y - GAP + 45.0, t_max);
            y += STRIP + GAP - 20.0;
        }
    }
    document(PAGE.width, y, heading, 16.0, &body)
}

fn bars(out: &mut String, panel: &Panel, top: f64, t_max: f64, quota: f64) {
    // The verdict's place in the stack: stored, duplicate, refused, answered.
    let events = panel.points.iter().map(|p| (p.t, p.verdict as usize));
    let (counts, busiest) = binned::<4>(t_max, events);
    let plot = PAGE.plot(top, HEIGHT, t_max, f64::from(busiest).max(quota) * 1.1);
    plot.frame(out, &panel.title, "writes per 100 ms", TIME);
    plot.bars(out, &counts, &[STORED, DUPLICATE, REFUSED, ANSWERED]);
    plot.hline(out, quota, QUOTA, &format!("quota: {quota:.0} per 100 ms"));
    if let Some((at, label)) = &panel.mark {
        plot.vline(out, *at, r##" stroke="#111" stroke-width="1.5""##);
        plot.note(out, *at, "#111", label);
    }
}

/// The colors' key, right of the first panel; the queries' only when there are some.
fn legend(out: &mut String, top: f64, queries: bool) {
    let mut keys = vec![
        (STORED, "stored (201)"),
        (DUPLICATE, "duplicate, ignored (200)"),
        (REFUSED, "refused (429)"),
    ];
    if queries {
        keys.push((ANSWERED, "query answered (200)"));
    }
    swatches(out, (LEGEND_X, top + 30.0), &keys);
}

/// Every query's wait (a wait off the scale at its top), the target and the measured p99.
fn waits_strip(out: &mut String, w: &Waits, top: f64, t_max: f64) {
    let plot = PAGE.plot(top, STRIP, t_max, w.y_max_ms);
    plot.frame(out, "", "query wait, ms", "");
    for &(t, ms) in &w.points {
        plot.dot(out, t, ms.min(plot.y_max), 2.0, ANSWERED);
    }
    plot.hline(
        out,
        w.target_ms,
        REFUSED,
        &format!("target p99 {:.2} ms", w.target_ms),
    );
    let (x, y) = (plot.right + 6.0, plot.bottom() - 4.0);
    let p99 = format!("measured p99 {:.2} ms", w.p99_ms);
    text(out, x, y, 11.0, "start", ANSWERED, &p99);
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
        let svg = draw(
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
        assert!(svg.contains("quota: 200 per 100 ms") && svg.contains(">kill</text>"));
    }

    #[test]
    fn draws_every_wait_and_the_target() {
        let waits = Waits {
            points: vec![(0.1, 0.3), (0.2, 3.5), (0.3, 40.0)],
            target_ms: 2.4,
            p99_ms: 3.5,
            y_max_ms: 5.0,
        };
        let mut out = String::new();
        waits_strip(&mut out, &waits, 100.0, 1.0);
        assert_eq!(out.matches("<circle").count(), 3);
        assert!(out.contains("target p99 2.40 ms") && out.contains("measured p99 3.50 ms"));
        // A wait off the scale sits at its top, not above the strip.
        assert!(out.contains(r#"cy="100.0""#), "{out}");
    }
}
