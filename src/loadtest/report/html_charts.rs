//! The charts of the HTML report, each an inline SVG built from the report's data: latency
//! percentile curves per leg kind, throughput and errors over time, p99 over time, and the
//! instance distribution of first vs retry legs.

use std::fmt::Write as _;

use super::html_svg::esc;
use super::html_svg::*;
use super::{percentile_curve, Report};
use crate::loadtest::measure::{InstanceCounts, LegKind};

/// A named, coloured series of points.
type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);
/// A named, coloured count per instance.
type InstanceKind = (&'static str, &'static str, fn(&InstanceCounts) -> u64);

/// Latency percentile curves: x is the number of nines (log of 1/(1-p)), y is ms.
pub(super) fn percentile_chart(r: &Report) -> String {
    let m = &r.measures;
    let series: Vec<Series> = [
        (
            "first legs",
            BLUE,
            percentile_curve(&m.leg(LegKind::First).hist),
        ),
        (
            "retry legs",
            ORANGE,
            percentile_curve(&m.leg(LegKind::Retry).hist),
        ),
        ("whole flows", GREEN, percentile_curve(&m.flows_hist)),
        (
            "plain requests",
            GREY,
            percentile_curve(&m.leg(LegKind::Plain).hist),
        ),
    ]
    .into_iter()
    .filter(|(_, _, c)| !c.is_empty())
    .collect();
    if series.is_empty() {
        return r#"<p class="empty">No latency recorded.</p>"#.into();
    }
    const MAX_NINES: f64 = 5.0;
    let nines = |p: f64| {
        if p >= 100.0 {
            MAX_NINES
        } else {
            (-(1.0 - p / 100.0).log10()).min(MAX_NINES)
        }
    };
    let top_ms = series
        .iter()
        .flat_map(|(_, _, c)| c.iter().map(|(_, v)| *v))
        .fold(0.0, f64::max);
    let (step, top) = nice_axis(top_ms, 5);
    let mut f = Frame::new(760.0, 300.0);
    f.fit_y_labels(step, top, " ms");
    let mut out = String::new();
    f.open(&mut out, "Latency by percentile");
    f.y_grid(&mut out, step, top, " ms");
    for (i, label) in ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
        .iter()
        .enumerate()
    {
        f.x_label(&mut out, i as f64 / MAX_NINES, label);
    }
    f.axis_title(&mut out, "percentile");
    for (_, color, curve) in &series {
        // The last point (100 %, max) is drawn at the right edge.
        let pts: Vec<(f64, f64)> = curve
            .iter()
            .map(|(p, v)| (f.x(nines(*p) / MAX_NINES), f.y(v / top)))
            .collect();
        polyline(&mut out, &pts, color, 2.2);
    }
    out.push_str("</svg>");
    let items: Vec<(&str, &str)> = series.iter().map(|(n, c, _)| (*n, *c)).collect();
    out + &legend(&items)
}

/// Requests per second (area) and errors per second (bars) over time.
pub(super) fn throughput_chart(r: &Report) -> String {
    // The last bucket covers only part of a second: scale it, or drop it when it is a sliver.
    let mut tl = r.measures.timeline.clone();
    let partial = r.elapsed.as_secs_f64() - r.elapsed.as_secs_f64().floor();
    if tl.len() > 1 && tl.len() as u64 > r.elapsed.as_secs() {
        if partial >= 0.25 {
            let last = tl.last_mut().expect("non-empty");
            last.requests = (last.requests as f64 / partial).round() as u64;
            last.errors = (last.errors as f64 / partial).round() as u64;
        } else {
            tl.pop();
        }
    }
    if tl.is_empty() {
        return r#"<p class="empty">No request completed.</p>"#.into();
    }
    let n = tl.len().max(2);
    let top_v = tl.iter().map(|b| b.requests).max().unwrap_or(0) as f64;
    let (step, top) = nice_axis(top_v, 4);
    let mut f = Frame::new(760.0, 240.0);
    f.fit_y_labels(step, top, "");
    let mut out = String::new();
    f.open(&mut out, "Throughput and errors over time");
    f.y_grid(&mut out, step, top, "");
    let xs = seconds_axis(
        &f,
        &mut out,
        n,
        "seconds since start (requests answered per second)",
    );
    let pts: Vec<(f64, f64)> = tl
        .iter()
        .enumerate()
        .map(|(i, b)| (f.x(xs(i as f64)), f.y(b.requests as f64 / top)))
        .collect();
    let mut area = format!("{:.1},{:.1} ", f.x(0.0), f.y(0.0));
    for (x, y) in &pts {
        let _ = write!(area, "{x:.1},{y:.1} ");
    }
    let _ = write!(
        area,
        "{:.1},{:.1}",
        pts.last().map_or(f.x(0.0), |p| p.0),
        f.y(0.0)
    );
    let _ = write!(
        out,
        r#"<polygon points="{area}" fill="{BLUE}" fill-opacity="0.12"/>"#
    );
    polyline(&mut out, &pts, BLUE, 2.0);
    let bw = (f.pw() / n as f64 * 0.6).clamp(2.0, 18.0);
    for (i, b) in tl.iter().enumerate().filter(|(_, b)| b.errors > 0) {
        let x = f.x(xs(i as f64)) - bw / 2.0;
        let y = f.y(b.errors as f64 / top);
        let h = (f.y(0.0) - y).max(2.0);
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{bw:.1}" height="{h:.1}" fill="{RED}" opacity="0.85"><title>{e} errors at {i}s</title></rect>"#,
            y = f.y(0.0) - h,
            e = b.errors
        );
    }
    out.push_str("</svg>");
    out + &legend(&[("requests / s", BLUE), ("errors / s", RED)])
}

/// The x axis of a chart over `n` one-second buckets (labels every ~tenth, and its title);
/// returns where second `i` sits, from 0 to 1.
fn seconds_axis(f: &Frame, out: &mut String, n: usize, title: &str) -> impl Fn(f64) -> f64 {
    let xs = move |i: f64| i / (n - 1) as f64;
    for i in (0..n).step_by((n / 10).max(1)) {
        f.x_label(out, xs(i as f64), &format!("{i}s"));
    }
    f.axis_title(out, title);
    xs
}

/// p99 of each second.
pub(super) fn p99_chart(r: &Report) -> String {
    let pts: Vec<(usize, f64)> = r
        .p99_timeline_us
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|v| (i, v as f64 / 1000.0)))
        .collect();
    if pts.is_empty() {
        return String::new();
    }
    let n = r.p99_timeline_us.len().max(2);
    let (step, top) = nice_axis(pts.iter().map(|p| p.1).fold(0.0, f64::max), 4);
    let mut f = Frame::new(760.0, 200.0);
    f.fit_y_labels(step, top, " ms");
    let mut out = String::new();
    f.open(&mut out, "p99 latency over time");
    f.y_grid(&mut out, step, top, " ms");
    let xs = seconds_axis(
        &f,
        &mut out,
        n,
        "seconds since start (p99 of the legs answered in each second)",
    );
    let line: Vec<(f64, f64)> = pts
        .iter()
        .map(|(i, v)| (f.x(xs(*i as f64)), f.y(v / top)))
        .collect();
    polyline(&mut out, &line, ORANGE, 2.0);
    for (x, y) in &line {
        let _ = write!(
            out,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="2.5" fill="{ORANGE}"/>"#
        );
    }
    out.push_str("</svg>");
    out
}

/// Grouped horizontal bars: first, retry and plain legs per instance.
pub(super) fn instance_chart(r: &Report) -> String {
    let inst = &r.measures.landing.instances;
    if inst.is_empty() {
        return format!(
            r#"<p class="empty">No instance was named (response header <code>{}</code> or result <code>_meta</code>).</p>"#,
            esc(&r.args.upstream_header)
        );
    }
    let any_plain = inst.values().any(|c| c.plain > 0);
    let mut kinds: Vec<InstanceKind> = vec![
        ("first legs", BLUE, |c| c.first),
        ("retry legs", ORANGE, |c| c.retry),
    ];
    if any_plain {
        kinds.push(("plain requests", GREY, |c| c.plain));
    }
    let max = inst
        .values()
        .flat_map(|c| kinds.iter().map(move |k| (k.2)(c)))
        .max()
        .unwrap_or(1) as f64;
    let (step, top) = nice_axis(max, 4);
    let bar_h = 12.0;
    let group_h = bar_h * kinds.len() as f64 + 14.0;
    let mut f = Frame::new(760.0, 30.0 + group_h * inst.len() as f64 + 30.0);
    make_room(&mut f, inst.keys(), max as u64);
    let mut out = String::new();
    f.open(&mut out, "Legs per instance");
    let mut v = 0.0;
    while v <= top + step * 1e-6 {
        f.x_label(&mut out, v / top, &num(v));
        v += step;
    }
    f.axis_title(&mut out, "legs served");
    for (gi, (name, c)) in inst.iter().enumerate() {
        let gy = f.top + 6.0 + gi as f64 * group_h;
        let shown = shorten(name, f.left - 8.0 - EDGE, TICK_PX);
        let _ = write!(
            out,
            r#"<g><title>{full}</title><text x="{x:.1}" y="{y:.1}" class="tick" text-anchor="end">{n}</text></g>"#,
            full = esc(name),
            x = f.left - 8.0,
            y = gy + group_h / 2.0 - 3.0,
            n = esc(&shown)
        );
        for (ki, (kname, color, get)) in kinds.iter().enumerate() {
            let val = get(c);
            let y = gy + ki as f64 * bar_h;
            let w = (f.x(val as f64 / top) - f.left).max(if val > 0 { 1.0 } else { 0.0 });
            let _ = write!(
                out,
                r#"<rect x="{x}" y="{y:.1}" width="{w:.1}" height="{h}" fill="{color}" rx="2"><title>{t}</title></rect><text x="{tx:.1}" y="{ty:.1}" class="val">{val}</text>"#,
                x = f.left,
                h = bar_h - 2.0,
                t = esc(&format!("{name}: {val} {kname}")),
                tx = f.left + w + 4.0,
                ty = y + bar_h - 3.5
            );
        }
    }
    out.push_str("</svg>");
    let items: Vec<(&str, &str)> = kinds.iter().map(|k| (k.0, k.1)).collect();
    out + &legend(&items)
}

/// Margins of the instance chart: the instance names on the left (up to a third of the width;
/// longer names are shortened), the largest count right of its bar.
fn make_room<'a>(f: &mut Frame, names: impl Iterator<Item = &'a String>, max: u64) {
    let widest = names.map(|n| text_width(n, TICK_PX)).fold(0.0, f64::max);
    f.left = (widest + 8.0 + EDGE).clamp(130.0, f.w / 3.0);
    f.right = f
        .right
        .max(text_width(&max.to_string(), VAL_PX) + 4.0 + EDGE);
}

/// `text`, or as much of its start as fits in `room` px followed by "…".
fn shorten(text: &str, room: f64, px: f64) -> String {
    if text_width(text, px) <= room {
        return text.to_string();
    }
    let mut out: String = text.chars().collect();
    while !out.is_empty() && text_width(&format!("{out}…"), px) > room {
        out.pop();
    }
    out + "…"
}
