//! What both demos' charts are drawn with, as hand-written SVG: the document around the
//! panels, text and boxes, the time axis of counts per 100 ms, and round numbers for the
//! count axis. What each chart shows stays in its demo.

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

/// A count axis's label, written upwards, centred on `(x, y)`.
pub fn vertical_label(out: &mut String, x: f64, y: f64, label: &str) {
    let _ = writeln!(
        out,
        r##"<text x="{x}" y="{y:.1}" font-size="11" fill="#555" text-anchor="middle" transform="rotate(-90 {x} {y:.1})">{}</text>"##,
        escape(label)
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
