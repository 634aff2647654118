//! The dashboard's charts as SVG geometry (pure): samples in, path data and band spans out, in
//! a `WIDTH` x `HEIGHT` view box whose x axis is the window that ends now.

use serde::Serialize;

use crate::dashboard::ring::Sample;

/// The view box of every chart.
pub(crate) const WIDTH: f64 = 120.0;
pub(crate) const HEIGHT: f64 = 30.0;

/// The span of time a chart shows: `[to_ms - window_ms, to_ms]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    pub(crate) to_ms: u64,
    pub(crate) window_ms: u64,
}

impl Frame {
    /// The x of an instant (left of the box before the window).
    fn x(self, at_ms: u64) -> f64 {
        let from = self.to_ms.saturating_sub(self.window_ms);
        let window = self.window_ms.max(1) as f64;
        (at_ms as f64 - from as f64) / window * WIDTH
    }
}

/// The y of `value` on a scale of 0 to `max` (clamped to the box).
fn y(value: f64, max: f64) -> f64 {
    let share = if max > 0.0 { value / max } else { 0.0 };
    HEIGHT - share.clamp(0.0, 1.0) * HEIGHT
}

/// A number for path data: one decimal, no `-0.0`.
fn n(v: f64) -> String {
    let text = format!("{v:.1}");
    if text == "-0.0" {
        "0.0".to_owned()
    } else {
        text
    }
}

/// A line through the points on a scale of 0 to `max`; a point without a value breaks it.
pub(crate) fn line(frame: Frame, points: &[(u64, Option<f64>)], max: f64) -> String {
    let mut d = String::new();
    let mut pen_down = false;
    for &(at, value) in points {
        let Some(value) = value else {
            pen_down = false;
            continue;
        };
        if !d.is_empty() {
            d.push(' ');
        }
        d.push(if pen_down { 'L' } else { 'M' });
        d.push_str(&format!("{} {}", n(frame.x(at)), n(y(value, max))));
        pen_down = true;
    }
    d
}

/// A bar per point above 0, `step_ms` wide, on a scale of 0 to `max`.
pub(crate) fn bars(frame: Frame, points: &[(u64, f64)], max: f64, step_ms: u64) -> String {
    let mut d = String::new();
    for &(at, value) in points {
        if value <= 0.0 {
            continue;
        }
        if !d.is_empty() {
            d.push(' ');
        }
        let (x0, x1) = (frame.x(at), frame.x(at.saturating_add(step_ms)));
        d.push_str(&format!(
            "M{} {}V{}H{}V{}Z",
            n(x0),
            n(HEIGHT),
            n(y(value, max)),
            n(x1),
            n(HEIGHT)
        ));
    }
    d
}

/// The spans `[x0, x1]` where the flag holds: a run of samples with it, each standing for
/// `step_ms` from its instant (a run ends at `to_ms` at the latest).
pub(crate) fn bands(frame: Frame, points: &[(u64, bool)], step_ms: u64) -> Vec<[f64; 2]> {
    let mut spans = Vec::new();
    let mut open: Option<u64> = None;
    let mut last = 0;
    for &(at, on) in points {
        match (on, open) {
            (true, None) => open = Some(at),
            (false, Some(start)) => {
                spans.push((start, at));
                open = None;
            }
            _ => {}
        }
        last = at;
    }
    if let Some(start) = open {
        spans.push((
            start,
            last.saturating_add(step_ms).min(frame.to_ms.max(last)),
        ));
    }
    spans
        .into_iter()
        .map(|(from, to)| {
            let x0 = frame.x(from).max(0.0);
            let x1 = frame.x(to).min(WIDTH);
            [round(x0), round(x1.max(x0))]
        })
        .collect()
}

fn round(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// One chart: its path, the top of its scale and latest value, for the labels, and the
/// limit it is held to, drawn as a line (calls in flight: the cap, which a scale grown past it
/// would otherwise hide).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Chart {
    pub(crate) d: String,
    pub(crate) max: f64,
    pub(crate) last: Option<f64>,
    /// The limit's value and its y in the view box.
    pub(crate) cap: Option<[f64; 2]>,
}

impl Chart {
    /// The chart of `points` as a [`line()`] on a scale of 0 to `max`, with no limit drawn.
    fn line(frame: Frame, points: &[(u64, Option<f64>)], max: f64) -> Chart {
        Chart {
            d: line(frame, points, max),
            max,
            last: points.last().and_then(|p| p.1),
            cap: None,
        }
    }
}

/// A quota's charts: tokens (0 to the capacity), wait p99 (ms), 429s (per the fleet's period)
/// and, under a cap, calls in flight (0 to the cap) over the window, and the spans where it
/// was paused, cut, or both at once (a band of its own, so that no two bands overlap into a
/// colour the legend lacks).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Charts {
    pub(crate) tokens: Chart,
    pub(crate) wait_p99: Chart,
    pub(crate) r429: Chart,
    /// None when no sample had a cap on calls in flight.
    pub(crate) in_flight: Option<Chart>,
    pub(crate) paused: Vec<[f64; 2]>,
    pub(crate) cut: Vec<[f64; 2]>,
    pub(crate) paused_and_cut: Vec<[f64; 2]>,
}

/// The charts of one quota's samples (oldest first).
pub(crate) fn charts<'a>(
    frame: Frame,
    capacity: u64,
    samples: impl Iterator<Item = &'a Sample> + Clone,
    step_ms: u64,
) -> Charts {
    let tokens: Vec<(u64, Option<f64>)> = samples
        .clone()
        .map(|s| (s.at_ms, s.tokens.map(|t| t as f64)))
        .collect();
    let waits: Vec<(u64, Option<f64>)> = samples
        .clone()
        .map(|s| (s.at_ms, s.wait_p99_ms.map(|w| w as f64)))
        .collect();
    let r429: Vec<(u64, f64)> = samples
        .clone()
        .filter_map(|s| Some((s.at_ms, s.responses_429? as f64)))
        .collect();
    let in_flight: Vec<(u64, Option<f64>)> = samples
        .clone()
        .map(|s| (s.at_ms, s.in_flight.map(|n| n as f64)))
        .collect();
    let top = |values: &mut dyn Iterator<Item = f64>| values.fold(1.0f64, f64::max);
    // The cap is the top of the scale; more held than the cap (a cap lowered, processes that
    // disagree) still shows, above the cap's line.
    let in_flight_max = top(&mut samples
        .clone()
        .filter_map(|s| s.max_in_flight.map(|cap| cap as f64))
        .chain(in_flight.iter().filter_map(|p| p.1)));
    let wait_max = top(&mut waits.iter().filter_map(|p| p.1));
    let r429_max = top(&mut r429.iter().map(|p| p.1));
    // The cap as last reported: the line is where calls are held to now.
    let cap = samples.clone().filter_map(|s| s.max_in_flight).last();
    let capacity = capacity as f64;
    let flags = |paused: bool, cut: bool| -> Vec<(u64, bool)> {
        samples
            .clone()
            .map(|s| {
                (
                    s.at_ms,
                    (s.paused_ms > 0, s.factor_bp < 10_000) == (paused, cut),
                )
            })
            .collect()
    };
    Charts {
        tokens: Chart::line(frame, &tokens, capacity),
        wait_p99: Chart::line(frame, &waits, wait_max),
        r429: Chart {
            d: bars(frame, &r429, r429_max, step_ms),
            max: r429_max,
            last: samples
                .clone()
                .last()
                .and_then(|s| s.responses_429)
                .map(|r| r as f64),
            cap: None,
        },
        in_flight: in_flight.iter().any(|p| p.1.is_some()).then(|| Chart {
            cap: cap.map(|cap| [cap as f64, round(y(cap as f64, in_flight_max))]),
            ..Chart::line(frame, &in_flight, in_flight_max)
        }),
        paused: bands(frame, &flags(true, false), step_ms),
        cut: bands(frame, &flags(false, true), step_ms),
        paused_and_cut: bands(frame, &flags(true, true), step_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window of 120 s ending at 120 s: one unit of x per second.
    const FRAME: Frame = Frame {
        to_ms: 120_000,
        window_ms: 120_000,
    };

    #[test]
    fn a_line_spans_the_window_and_breaks_where_a_value_is_missing() {
        let points = [
            (0, Some(10.0)),
            (60_000, Some(5.0)),
            (70_000, None),
            (100_000, Some(0.0)),
            (120_000, Some(20.0)),
        ];
        assert_eq!(
            line(FRAME, &points, 10.0),
            "M0.0 0.0 L60.0 15.0 M100.0 30.0 L120.0 0.0"
        );
        assert_eq!(line(FRAME, &[], 10.0), "");
        // A zero scale draws at the bottom.
        assert_eq!(line(FRAME, &[(60_000, Some(3.0))], 0.0), "M60.0 30.0");
    }

    #[test]
    fn bars_stand_on_the_bottom_one_step_wide() {
        let points = [(10_000, 0.0), (20_000, 2.0), (30_000, 4.0)];
        assert_eq!(
            bars(FRAME, &points, 4.0, 1000),
            "M20.0 30.0V15.0H21.0V30.0Z M30.0 30.0V0.0H31.0V30.0Z"
        );
    }

    #[test]
    fn bands_cover_the_runs_of_a_flag() {
        let points = [
            (1_000, false),
            (2_000, true),
            (3_000, true),
            (4_000, false),
            (119_000, true),
        ];
        assert_eq!(
            bands(FRAME, &points, 1000),
            vec![[2.0, 4.0], [119.0, 120.0]]
        );
        // A run that started before the window is cut at its left edge.
        let late = Frame {
            to_ms: 180_000,
            window_ms: 120_000,
        };
        assert_eq!(
            bands(late, &[(50_000, true), (70_000, false)], 1000),
            vec![[0.0, 10.0]]
        );
        assert!(bands(FRAME, &[(5_000, false)], 1000).is_empty());
    }

    #[test]
    fn a_quotas_charts_come_from_its_samples() {
        let sample = |at_ms, tokens, paused_ms, r429| Sample {
            at_ms,
            tokens: Some(tokens),
            paused_ms,
            factor_bp: 10_000,
            wait_p99_ms: Some(5),
            responses_429: Some(r429),
            grants_per_s: Some(1.0),
            in_flight: None,
            max_in_flight: None,
        };
        let samples = [sample(118_000, 10, 0, 0), sample(119_000, 0, 900, 2)];
        let charts = charts(FRAME, 10, samples.iter(), 1000);
        assert_eq!(charts.tokens.d, "M118.0 0.0 L119.0 30.0");
        assert_eq!((charts.tokens.max, charts.tokens.last), (10.0, Some(0.0)));
        assert_eq!(charts.wait_p99.d, "M118.0 0.0 L119.0 0.0");
        assert_eq!(charts.r429.d, "M119.0 30.0V0.0H120.0V30.0Z");
        assert_eq!(charts.r429.last, Some(2.0));
        assert_eq!(charts.paused, vec![[119.0, 120.0]]);
        assert!(charts.cut.is_empty() && charts.paused_and_cut.is_empty());
        assert_eq!(charts.in_flight, None, "no cap, no chart");
    }

    #[test]
    fn calls_in_flight_are_charted_against_the_cap() {
        let sample = |at_ms, in_flight| Sample {
            at_ms,
            tokens: Some(1),
            paused_ms: 0,
            factor_bp: 10_000,
            wait_p99_ms: None,
            responses_429: None,
            grants_per_s: None,
            in_flight,
            max_in_flight: Some(4),
        };
        let samples = [
            sample(117_000, Some(4)),
            sample(118_000, Some(1)),
            sample(119_000, None),
        ];
        let chart = charts(FRAME, 10, samples.iter(), 1000).in_flight.unwrap();
        assert_eq!(chart.d, "M117.0 0.0 L118.0 22.5");
        assert_eq!((chart.max, chart.last), (4.0, None));
        assert_eq!(chart.cap, Some([4.0, 0.0]), "the cap at the top");
        // Above the cap, the scale grows to what was held, and the cap's line shows below it.
        let over = [sample(118_000, Some(6))];
        let chart = charts(FRAME, 10, over.iter(), 1000).in_flight.unwrap();
        assert_eq!((chart.max, chart.cap), (6.0, Some([4.0, 10.0])));
    }

    #[test]
    fn a_pause_during_a_cut_is_a_band_of_its_own() {
        let sample = |at_ms, paused_ms, factor_bp| Sample {
            at_ms,
            tokens: Some(1),
            paused_ms,
            factor_bp,
            wait_p99_ms: None,
            responses_429: None,
            grants_per_s: None,
            in_flight: None,
            max_in_flight: None,
        };
        let samples = [
            sample(100_000, 500, 10_000),
            sample(101_000, 500, 5_000),
            sample(102_000, 0, 5_000),
            sample(103_000, 0, 10_000),
        ];
        let charts = charts(FRAME, 10, samples.iter(), 1000);
        assert_eq!(charts.paused, vec![[100.0, 101.0]]);
        assert_eq!(charts.paused_and_cut, vec![[101.0, 102.0]]);
        assert_eq!(charts.cut, vec![[102.0, 103.0]]);
    }
}
