//! What both demos' charts are drawn with, as hand-written SVG: the document around the
//! panels, text and boxes, a panel's frame and what is drawn in it ([`Plot`]), the time axis
//! of counts per 100 ms, and round numbers for the count axis. What each chart shows stays in
//! its demo.

use std::fmt::Write;

/// Both charts count events per 100 ms.
pub const BIN_S: f64 = 0.1;

/// The whole SVG: a white page of `width` x `height` with `heading` on top (at
/// `heading_size` px), then `body`.
pub fn document(width: f64, height: f64, heading: &str, heading_size: f64, body: &str) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Arial, sans-serif">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>"#
    );
    text(&mut svg, 20.0, 30.0, heading_size, "start", "#111", heading);
    svg.push_str(body);
    svg.push_str("</svg>\n");
    svg
}

pub fn text(out: &mut String, x: f64, y: f64, size: f64, anchor: &str, color: &str, content: &str) {
    let _ = writeln!(
        out,
        r#"<text x="{x:.1}" y="{y:.1}" font-size="{size}" fill="{color}" text-anchor="{anchor}">{}</text>"#,
        escape(content)
    );
}

/// An axis's text: a tick's value, or the time axis's name.
fn axis_text(out: &mut String, x: f64, y: f64, anchor: &str, content: &str) {
    text(out, x, y, 11.0, anchor, "#555", content);
}

/// A count axis's label, written upwards, centred on `(x, y)`.
pub fn vertical_label(out: &mut String, x: f64, y: f64, label: &str) {
    let _ = writeln!(
        out,
        r##"<text x="{x}" y="{y:.1}" font-size="11" fill="#555" text-anchor="middle" transform="rotate(-90 {x} {y:.1})">{}</text>"##,
        escape(label)
    );
}

/// A chart's page: its width, and the margins of its panels' plots (the right one holds the
/// legends).
pub struct Page {
    pub width: f64,
    pub left: f64,
    pub right: f64,
}

impl Page {
    /// A panel's plot from `top` down `height`, its time axis to `t_max` and its count axis
    /// to a round number at or above `most`.
    pub fn plot(&self, top: f64, height: f64, t_max: f64, most: f64) -> Plot {
        let (left, right, y_max) = (self.left, self.width - self.right, nice_ceiling(most));
        Plot {
            left,
            right,
            top,
            height,
            t_max,
            y_max,
        }
    }
}

/// A panel's plot area: time from 0 to `t_max` across `left..right`, values from 0 to `y_max`
/// up `top..top + height`.
pub struct Plot {
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub height: f64,
    pub t_max: f64,
    pub y_max: f64,
}

impl Plot {
    pub fn x(&self, t: f64) -> f64 {
        self.left + t / self.t_max * (self.right - self.left)
    }

    pub fn y(&self, v: f64) -> f64 {
        self.top + self.height - v / self.y_max * self.height
    }

    pub fn bottom(&self) -> f64 {
        self.top + self.height
    }

    /// Title, frame, grid and ticks on both axes, the count axis named `y_label` and the time
    /// axis `x_label`.
    pub fn frame(&self, out: &mut String, title: &str, y_label: &str, x_label: &str) {
        let (left, right, bottom) = (self.left, self.right, self.bottom());
        text(out, left, self.top - 10.0, 14.0, "start", "#111", title);
        let y_step = nice_step(self.y_max / 5.0);
        let mut v = 0.0;
        while v <= self.y_max + 1e-9 {
            let y = self.y(v);
            let _ = writeln!(
                out,
                r##"<line x1="{left:.1}" y1="{y:.1}" x2="{right:.1}" y2="{y:.1}" stroke="#eee"/>"##
            );
            axis_text(out, left - 6.0, y + 4.0, "end", &v.to_string());
            v += y_step;
        }
        let t_step = match self.t_max {
            t if t <= 6.0 => 0.5,
            t if t <= 20.0 => 1.0,
            _ => 5.0,
        };
        let mut t = 0.0;
        while t <= self.t_max + 1e-9 {
            let (x, tick) = (self.x(t), bottom + 4.0);
            let _ = writeln!(
                out,
                r##"<line x1="{x:.1}" y1="{bottom:.1}" x2="{x:.1}" y2="{tick:.1}" stroke="#999"/>"##
            );
            axis_text(out, x, bottom + 16.0, "middle", &format!("{t:.1} s"));
            t += t_step;
        }
        let (width, height) = (right - left, self.height);
        let _ = writeln!(
            out,
            r##"<rect x="{left:.1}" y="{:.1}" width="{width:.1}" height="{height:.1}" fill="none" stroke="#999"/>"##,
            self.top
        );
        vertical_label(out, 18.0, self.top + height / 2.0, y_label);
        axis_text(out, right, bottom + 32.0, "end", x_label);
    }

    /// A dashed horizontal line at `v`, if it is inside the plot, with `label` right of it.
    pub fn hline(&self, out: &mut String, v: f64, color: &str, label: &str) {
        if v > self.y_max {
            return;
        }
        let (left, right, y) = (self.left, self.right, self.y(v));
        let _ = writeln!(
            out,
            r#"<line x1="{left:.1}" y1="{y:.1}" x2="{right:.1}" y2="{y:.1}" stroke="{color}" stroke-width="1.5" stroke-dasharray="5 4"/>"#
        );
        if !label.is_empty() {
            text(out, right + 6.0, y + 4.0, 11.0, "start", color, label);
        }
    }

    /// A shaded span from `from` to `to` seconds, full height, behind what follows.
    pub fn band(&self, out: &mut String, (from, to): (f64, f64), color: &str, opacity: f64) {
        let (x0, x1) = (self.x(from.max(0.0)), self.x(to.min(self.t_max)));
        if x1 > x0 {
            let _ = writeln!(
                out,
                r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}" fill-opacity="{opacity}"/>"#,
                self.top,
                x1 - x0,
                self.height
            );
        }
    }

    /// A line through `(t, v)` points (with `steps`, a step up or down at each, from 0 at
    /// the start to the end of the plot), cut at the frame; `style` is its stroke's attributes.
    pub fn line(
        &self,
        out: &mut String,
        points: &[(f64, f64)],
        steps: bool,
        color: &str,
        style: &str,
    ) {
        let mut d = String::new();
        let mut to = |t: f64, v: f64| {
            let op = if d.is_empty() { "M" } else { " L" };
            let _ = write!(d, "{op}{:.1},{:.1}", self.x(t), self.y(v));
        };
        let mut level = 0.0;
        if steps {
            to(0.0, 0.0);
        }
        for &(t, v) in points {
            if steps {
                to(t, level);
            }
            to(t, v);
            level = v;
        }
        if steps {
            to(self.t_max, level);
        }
        let id = format!("clip{:.0}", self.top);
        if !out.contains(&format!(r#"id="{id}""#)) {
            let (width, height) = (self.right - self.left, self.height);
            let _ = writeln!(
                out,
                r#"<clipPath id="{id}"><rect x="{:.1}" y="{:.1}" width="{width:.1}" height="{height:.1}"/></clipPath>"#,
                self.left, self.top
            );
        }
        let _ = writeln!(
            out,
            r#"<path d="{d}" fill="none" stroke="{color}"{style} clip-path="url(#{id})"/>"#
        );
    }

    pub fn dot(&self, out: &mut String, t: f64, v: f64, radius: f64, color: &str) {
        circle(out, (self.x(t), self.y(v)), radius, color);
    }

    /// Counts per bin of [`BIN_S`] ([`binned`]) as bars, each bin's stacked in `colors`' order.
    pub fn bars<const N: usize>(&self, out: &mut String, counts: &[[u32; N]], colors: &[&str]) {
        for (i, c) in counts.iter().enumerate() {
            self.stacked(out, i as f64 * BIN_S, BIN_S, c, colors);
        }
    }

    /// A small label at the top of the plot, just right of `t` (a moment the chart marks).
    pub fn note(&self, out: &mut String, t: f64, color: &str, label: &str) {
        let (x, y) = (self.x(t.max(0.0)) + 4.0, self.top + 14.0);
        text(out, x, y, 11.0, "start", color, label);
    }

    /// A full-height line at `t`; `style`: its stroke's attributes.
    pub fn vline(&self, out: &mut String, t: f64, style: &str) {
        let (x, top, bottom) = (self.x(t), self.top, self.bottom());
        let _ = writeln!(
            out,
            r#"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{bottom:.1}"{style}/>"#
        );
    }

    /// Bars of `width` seconds from `t`, one per count, stacked in `colors`' order.
    pub fn stacked(&self, out: &mut String, t: f64, width: f64, counts: &[u32], colors: &[&str]) {
        let w = (self.x(width) - self.x(0.0) - 2.0).max(1.0);
        let mut level = 0.0;
        for (&n, color) in counts.iter().zip(colors) {
            if n > 0 {
                let next = level + f64::from(n);
                let y = self.y(next);
                rect(out, self.x(t) + 1.0, y, w, self.y(level) - y, color);
                level = next;
            }
        }
    }
}

/// Events `(t, slot)` counted per bin of [`BIN_S`] up to `t_max`, a count per slot; and the
/// busiest bin's total.
pub fn binned<const N: usize>(
    t_max: f64,
    events: impl IntoIterator<Item = (f64, usize)>,
) -> (Vec<[u32; N]>, u32) {
    let bins = bin_count(t_max);
    let mut counts = vec![[0u32; N]; bins];
    for (t, slot) in events {
        if let Some(n) = counts[bin_of(t, bins)].get_mut(slot) {
            *n += 1;
        }
    }
    let busiest = counts.iter().map(|c| c.iter().sum()).max().unwrap_or(0);
    (counts, busiest)
}

/// Colours' keys from `(x, y)` down, 20 px apart.
pub fn swatches(out: &mut String, (x, y): (f64, f64), keys: &[(&str, &str)]) {
    for (i, (color, label)) in keys.iter().enumerate() {
        swatch(out, x, y + 20.0 * i as f64, color, label);
    }
}

/// A colour's key: a box and its label.
pub fn swatch(out: &mut String, x: f64, y: f64, color: &str, label: &str) {
    rect(out, x, y, 14.0, 12.0, color);
    text(out, x + 20.0, y + 10.0, 12.0, "start", "#333", label);
}

/// A line's key: a short line in its `style` and its label.
pub fn legend_line(out: &mut String, (x, y): (f64, f64), color: &str, style: &str, label: &str) {
    let (y, end) = (y + 6.0, x + 24.0);
    let _ = writeln!(
        out,
        r#"<line x1="{x:.1}" y1="{y:.1}" x2="{end:.1}" y2="{y:.1}" stroke="{color}"{style}/>"#
    );
    text(out, x + 30.0, y + 4.0, 12.0, "start", "#333", label);
}

pub fn circle(out: &mut String, (x, y): (f64, f64), radius: f64, color: &str) {
    let _ = writeln!(
        out,
        r#"<circle cx="{x:.1}" cy="{y:.1}" r="{radius}" fill="{color}"/>"#
    );
}

pub fn rect(out: &mut String, x: f64, y: f64, w: f64, h: f64, color: &str) {
    let _ = writeln!(
        out,
        r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{color}"/>"#
    );
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Where the time axis ends for events up to `last` seconds: whole half-seconds, at least
/// one second, with a bin of room after the last event.
pub fn time_axis_end(last: f64) -> f64 {
    (((last + BIN_S) / 0.5).ceil() * 0.5).max(1.0)
}

/// How many bins of [`BIN_S`] a time axis ending at `t_max` holds (at least one).
pub fn bin_count(t_max: f64) -> usize {
    ((t_max / BIN_S).round() as usize).max(1)
}

/// The bin an event at `t` seconds falls in, of `bins`: an early one in the first, a late one
/// in the last.
pub fn bin_of(t: f64, bins: usize) -> usize {
    ((t / BIN_S).floor().max(0.0) as usize).min(bins.saturating_sub(1))
}

/// 1, 2 or 5 times a power of ten, at least `raw` (and at least 1).
pub fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&step| step >= raw)
        .unwrap_or(10.0 * power)
        .max(1.0)
}

/// The axis top: a whole number of nice steps (about five) at or above `v`.
pub fn nice_ceiling(v: f64) -> f64 {
    let step = nice_step(v / 5.0);
    ((v / step).ceil() * step).max(step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_well_formed_and_escaped() {
        let svg = document(100.0, 50.0, "a <test> & \"co\"", 16.0, "<g/>\n");
        assert!(svg.starts_with("<svg ") && svg.ends_with("<g/>\n</svg>\n"));
        assert!(svg.contains(r#"width="100" height="50""#));
        assert!(svg.contains("a &lt;test&gt; &amp; &quot;co&quot;"));
        assert!(svg.contains(r#"font-size="16""#));
    }

    #[test]
    fn the_time_axis() {
        assert_eq!(time_axis_end(0.0), 1.0);
        assert_eq!(time_axis_end(3.556), 4.0);
        assert_eq!(time_axis_end(3.95), 4.5);
        assert_eq!(bin_count(4.0), 40);
        assert_eq!(bin_count(0.0), 1);
        assert_eq!(bin_of(-0.01, 40), 0);
        assert_eq!(bin_of(0.15, 40), 1);
        assert_eq!(bin_of(9.0, 40), 39);
    }

    #[test]
    fn nice_numbers() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(11.0), 20.0);
        assert_eq!(nice_ceiling(44.0), 50.0);
        assert_eq!(nice_ceiling(11.0), 15.0);
        assert_eq!(nice_ceiling(220.0), 250.0);
        assert_eq!(nice_ceiling(2_200.0), 2_500.0);
    }
}
