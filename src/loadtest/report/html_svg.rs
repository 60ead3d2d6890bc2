//! The SVG toolkit of the HTML report: colours, "nice" axes, number formatting, the plot frame
//! (axes, grid, ticks), polylines and legends. Plain string building; no data of the report.

use std::fmt::Write as _;

use super::html::esc;

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
    /// Horizontal grid lines and y labels for [0, top] with `step`.
    pub(super) fn y_grid(&self, out: &mut String, step: f64, top: f64, unit: &str) {
        let mut v = 0.0;
        while v <= top + step * 1e-6 {
            let y = self.y(v / top);
            let _ = write!(
                out,
                r#"<line x1="{x1}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{tx}" y="{ty:.1}" class="tick" text-anchor="end">{label}</text>"#,
                x1 = self.left,
                x2 = self.w - self.right,
                tx = self.left - 6.0,
                ty = y + 4.0,
                label = esc(&format!("{}{unit}", num(v)))
            );
            v += step;
        }
    }
    pub(super) fn x_label(&self, out: &mut String, f: f64, label: &str) {
        let x = self.x(f);
        let _ = write!(
            out,
            r#"<line x1="{x:.1}" x2="{x:.1}" y1="{y1}" y2="{y2}" class="grid light"/><text x="{x:.1}" y="{ty}" class="tick" text-anchor="middle">{label}</text>"#,
            y1 = self.top,
            y2 = self.top + self.ph(),
            ty = self.top + self.ph() + 16.0,
            label = esc(label)
        );
    }
    pub(super) fn axis_title(&self, out: &mut String, text: &str) {
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{y}" class="axis" text-anchor="middle">{t}</text>"#,
            x = self.left + self.pw() / 2.0,
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
    fn nice_axes() {
        assert_eq!(nice_axis(9.3, 5), (2.0, 10.0));
        assert_eq!(nice_axis(230.0, 4), (100.0, 300.0));
        assert_eq!(nice_axis(0.0, 4), (0.25, 1.0));
    }
}
