//! The chart's panel of calls open at once: the supplier's own count over each phase, a step
//! at every change, against its limit and the fleet's cap, with the slow spell shaded behind
//! and each refusal for concurrency a dot on the limit.

use std::fmt::Write;

use demo_support::svg::{nice_ceiling, text};

use super::{
    clip_path, phase_legends, swatch, Axes, PhaseSeries, PHASE_COLORS, REFUSED, RIGHT, SERVED,
    WIDTH,
};

/// What the panel is drawn against.
pub struct OpenCallsSpec {
    /// The supplier's limit on calls open at once.
    pub supplier_max_open: Option<u32>,
    /// The fleet's cap on calls in flight (the bucket phase's).
    pub max_in_flight: Option<u64>,
    /// The slow spell, in seconds from each phase's start.
    pub slow: Option<(f64, f64)>,
}

const SLOW: &str = "#f0b429";

pub fn panel(
    out: &mut String,
    spec: &OpenCallsSpec,
    phases: &[PhaseSeries],
    top: f64,
    height: f64,
    t_max: f64,
) {
    let most = phases
        .iter()
        .flat_map(|p| p.open.iter().map(|&(_, n)| n))
        .max()
        .unwrap_or(0);
    let limit = spec.supplier_max_open.map_or(0.0, f64::from);
    let cap = spec.max_in_flight.map_or(0.0, |n| n as f64);
    let y_max = nice_ceiling(f64::from(most).max(limit).max(cap).max(1.0) * 1.25);
    let axes = Axes::new(top, height, t_max, y_max);
    axes.frame(
        out,
        "calls open at the supplier at once (its own count), against its limit and the fleet's cap",
        "calls open",
    );
    if let Some((from, until)) = spec.slow {
        let (x0, x1) = (
            axes.x(from.clamp(0.0, t_max)),
            axes.x(until.clamp(0.0, t_max)),
        );
        if x1 > x0 {
            let _ = writeln!(
                out,
                r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{height:.1}" fill="{SLOW}" fill-opacity="0.18"/>"#,
                axes.top,
                x1 - x0,
            );
            text(
                out,
                x0 + 4.0,
                top + 14.0,
                11.0,
                "start",
                "#7a5b00",
                "slow spell",
            );
        }
    }
    // Labelled inside the plot, at its right end, so that they never meet the legends.
    let right = axes.x(t_max) - 4.0;
    if let Some(limit) = spec.supplier_max_open {
        axes.hline(out, f64::from(limit), REFUSED, "");
        let y = axes.y(f64::from(limit)) - 4.0;
        text(
            out,
            right,
            y,
            11.0,
            "end",
            REFUSED,
            &format!("supplier's limit: {limit}"),
        );
    }
    if let Some(cap) = spec.max_in_flight {
        axes.hline(out, cap as f64, SERVED, "");
        // Under its line, so that a cap equal to the limit keeps both labels apart.
        let y = axes.y(cap as f64) + 14.0;
        text(
            out,
            right,
            y,
            11.0,
            "end",
            SERVED,
            &format!("fleet's cap: {cap}"),
        );
    }
    for (phase, color) in phases.iter().zip(PHASE_COLORS) {
        let mut d = format!("M{:.1},{:.1}", axes.x(0.0), axes.y(0.0));
        let mut level = 0.0;
        for &(t, open) in &phase.open {
            let next = f64::from(open);
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
        let _ = write!(d, " L{:.1},{:.1}", axes.x(t_max), axes.y(level));
        clip_path(out, &axes, &d, color, 2.0, "");
        for &t in &phase.too_many_open {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.6" fill="{REFUSED}"/>"#,
                axes.x(t),
                axes.y(limit)
            );
        }
    }
    let y = phase_legends(out, top + 40.0, phases, "refused for concurrency");
    let x = WIDTH - RIGHT + 20.0;
    if spec.slow.is_some() {
        swatch(out, x, y + 20.0, SLOW, "slow spell");
    }
}
