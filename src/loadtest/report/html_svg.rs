//! The toolkit of the HTML report: escaping ([`esc`]), colours, "nice" axes, number formatting,
//! the plot frame (axes, grid, ticks), polylines and legends. Plain string building; no data of
//! the report.
//! Every label is placed from an estimate of its width ([`text_width`]), so none runs past the
//! edge of its chart.

use std::fmt::Write as _;

/// Escape text for HTML content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

pub(super) const BLUE: &str = "#2563eb";
pub(super) const ORANGE: &str = "#ea580c";
pub(super) const GREEN: &str = "#16a34a";
pub(super) const GREY: &str = "#64748b";
pub(super) const RED: &str = "#dc2626";

/// A "nice" axis step and top for values up to `max` with about `n` ticks.
pub(super) fn nice_axis(max: f64, n: usize) -> (f64, f64) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    (step, (max / step).ceil() * step)
}

pub(super) fn num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}").trim_end_matches(".0").to_string()
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Font sizes (px) of the chart text classes, as the page's CSS sets them (`.chart .tick`,
/// `.chart .axis`, `.chart .val` in html.rs).
pub(super) const TICK_PX: f64 = 11.0;
pub(super) const AXIS_PX: f64 = 12.0;
pub(super) const VAL_PX: f64 = 10.0;
/// The least room (px) between a label and the edge of its chart.
pub(super) const EDGE: f64 = 2.0;

/// A generous estimate of the width (px) of `text` at `px` in the page's sans-serif font (in
/// em, per glyph: narrow punctuation and space 0.35, capitals 0.72, `%`, `m`, `w`, `…` 1, others
/// 0.62; Arial's digits are 0.56).
pub(super) fn text_width(text: &str, px: f64) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            '.' | ',' | ':' | ';' | '!' | '\'' | '|' | ' ' | 'i' | 'j' | 'l' => 0.35,
            '%' | 'm' | 'w' | 'M' | 'W' | '@' | '…' => 1.0,
            c if c.is_uppercase() => 0.72,
            _ => 0.62,
        })
        .sum();
    em * px
}

/// The values of the horizontal grid lines for [0, top] with `step`.
fn ticks(step: f64, top: f64) -> Vec<f64> {
    let mut v = 0.0;
    let mut out = Vec::new();
    while v <= top + step * 1e-6 {
        out.push(v);
        v += step;
    }
    out
}

fn y_label(v: f64, unit: &str) -> String {
    format!("{}{unit}", num(v))
}

/// Plot area geometry.
pub(super) struct Frame {
    pub(super) w: f64,
    pub(super) h: f64,
    pub(super) left: f64,
    pub(super) right: f64,
    pub(super) top: f64,
    pub(super) bottom: f64,
}

impl Frame {
    pub(super) fn new(w: f64, h: f64) -> Self {
        Frame {
            w,
            h,
            left: 56.0,
            right: 16.0,
            top: 14.0,
            bottom: 40.0,
        }
    }
    pub(super) fn pw(&self) -> f64 {
        self.w - self.left - self.right
    }
    pub(super) fn ph(&self) -> f64 {
        self.h - self.top - self.bottom
    }
    pub(super) fn x(&self, f: f64) -> f64 {
        self.left + f.clamp(0.0, 1.0) * self.pw()
    }
    pub(super) fn y(&self, f: f64) -> f64 {
        self.top + (1.0 - f.clamp(0.0, 1.0)) * self.ph()
    }
    pub(super) fn open(&self, out: &mut String, label: &str) {
        let _ = write!(
            out,
            r#"<svg viewBox="0 0 {w} {h}" role="img" aria-label="{label}" class="chart">"#,
            w = self.w,
            h = self.h,
            label = esc(label)
        );
    }
    /// Widen the left margin until the y labels of [`Frame::y_grid`] (same `step`, `top`,
    /// `unit`) fit left of the plot.
    pub(super) fn fit_y_labels(&mut self, step: f64, top: f64, unit: &str) {
        let widest = ticks(step, top)
            .into_iter()
            .map(|v| text_width(&y_label(v, unit), TICK_PX))
            .fold(0.0, f64::max);
        self.left = self.left.max(widest + 6.0 + EDGE);
    }
    /// Horizontal grid lines and y labels for [0, top] with `step`.
    pub(super) fn y_grid(&self, out: &mut String, step: f64, top: f64, unit: &str) {
        for v in ticks(step, top) {
            let y = self.y(v / top);
            let _ = write!(
                out,
                r#"<line x1="{x1}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{tx}" y="{ty:.1}" class="tick" text-anchor="end">{label}</text>"#,
                x1 = self.left,
                x2 = self.w - self.right,
                tx = self.left - 6.0,
                ty = y + 4.0,
                label = esc(&y_label(v, unit))
            );
        }
    }
    /// Where a label `width` wide that belongs at `x` is drawn: centred on `x` when that fits in
    /// the chart, else ending (or starting) at `x`, pulled in from the edge if need be.
    pub(super) fn fit_x(&self, x: f64, width: f64) -> (f64, &'static str) {
        if x + width / 2.0 > self.w - EDGE {
            (x.min(self.w - EDGE), "end")
        } else if x - width / 2.0 < EDGE {
            (x.max(EDGE), "start")
        } else {
            (x, "middle")
        }
    }
    pub(super) fn x_label(&self, out: &mut String, f: f64, label: &str) {
        let x = self.x(f);
        let (tx, anchor) = self.fit_x(x, text_width(label, TICK_PX));
        let _ = write!(
            out,
            r#"<line x1="{x:.1}" x2="{x:.1}" y1="{y1}" y2="{y2}" class="grid light"/><text x="{tx:.1}" y="{ty}" class="tick" text-anchor="{anchor}">{label}</text>"#,
            y1 = self.top,
            y2 = self.top + self.ph(),
            ty = self.top + self.ph() + 16.0,
            label = esc(label)
        );
    }
    pub(super) fn axis_title(&self, out: &mut String, text: &str) {
        let (x, anchor) = self.fit_x(self.left + self.pw() / 2.0, text_width(text, AXIS_PX));
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{y}" class="axis" text-anchor="{anchor}">{t}</text>"#,
            y = self.h - 6.0,
            t = esc(text)
        );
    }
}

pub(super) fn polyline(out: &mut String, pts: &[(f64, f64)], color: &str, width: f64) {
    if pts.is_empty() {
        return;
    }
    let d: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    let _ = write!(
        out,
        r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="{width}" stroke-linejoin="round"/>"#,
        d.join(" ")
    );
}

pub(super) fn legend(items: &[(&str, &str)]) -> String {
    let mut o = String::from(r#"<div class="legend">"#);
    for (name, color) in items {
        let _ = write!(
            o,
            r#"<span><i style="background:{color}"></i>{}</span>"#,
            esc(name)
        );
    }
    o.push_str("</div>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }

    #[test]
    fn nice_axes() {
        assert_eq!(nice_axis(9.3, 5), (2.0, 10.0));
        assert_eq!(nice_axis(230.0, 4), (100.0, 300.0));
        assert_eq!(nice_axis(0.0, 4), (0.25, 1.0));
    }

    #[test]
    fn a_label_at_either_edge_is_anchored_inside() {
        let f = Frame::new(760.0, 300.0);
        let w = text_width("99.999%", TICK_PX);
        assert!(w > 30.0 && w < 60.0, "{w}");
        assert_eq!(f.fit_x(f.x(1.0), w), (744.0, "end"));
        assert_eq!(f.fit_x(f.x(0.5), w), (f.x(0.5), "middle"));
        assert_eq!(f.fit_x(1.0, w), (EDGE, "start"));
    }
}
