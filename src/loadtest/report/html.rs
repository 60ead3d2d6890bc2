//! The HTML report: one self-contained page (inline CSS and SVG generated here, no script, no
//! font or image from anywhere, no URL at all). Charts: latency percentile curves per leg kind,
//! throughput and errors over time, p99 over time, and the instance distribution of first vs
//! retry legs; then the tables of the summary.

use std::fmt::Write as _;

use super::{percentile_curve, LatencySummary, Report};
use crate::loadtest::measure::{InstanceCounts, LegKind};

const BLUE: &str = "#2563eb";
const ORANGE: &str = "#ea580c";
const GREEN: &str = "#16a34a";
const GREY: &str = "#64748b";
const RED: &str = "#dc2626";

/// Escape text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
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

/// A "nice" axis step and top for values up to `max` with about `n` ticks.
fn nice_axis(max: f64, n: usize) -> (f64, f64) {
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

fn num(v: f64) -> String {
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
struct Frame {
    w: f64,
    h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

impl Frame {
    fn new(w: f64, h: f64) -> Self {
        Frame {
            w,
            h,
            left: 56.0,
            right: 16.0,
            top: 14.0,
            bottom: 40.0,
        }
    }
    fn pw(&self) -> f64 {
        self.w - self.left - self.right
    }
    fn ph(&self) -> f64 {
        self.h - self.top - self.bottom
    }
    fn x(&self, f: f64) -> f64 {
        self.left + f.clamp(0.0, 1.0) * self.pw()
    }
    fn y(&self, f: f64) -> f64 {
        self.top + (1.0 - f.clamp(0.0, 1.0)) * self.ph()
    }
    fn open(&self, out: &mut String, label: &str) {
        let _ = write!(
            out,
            r#"<svg viewBox="0 0 {w} {h}" role="img" aria-label="{label}" class="chart">"#,
            w = self.w,
            h = self.h,
            label = esc(label)
        );
    }
    /// Horizontal grid lines and y labels for [0, top] with `step`.
    fn y_grid(&self, out: &mut String, step: f64, top: f64, unit: &str) {
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
    fn x_label(&self, out: &mut String, f: f64, label: &str) {
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
    fn axis_title(&self, out: &mut String, text: &str) {
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{y}" class="axis" text-anchor="middle">{t}</text>"#,
            x = self.left + self.pw() / 2.0,
            y = self.h - 6.0,
            t = esc(text)
        );
    }
}

fn polyline(out: &mut String, pts: &[(f64, f64)], color: &str, width: f64) {
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

fn legend(items: &[(&str, &str)]) -> String {
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

/// A named, coloured series of points.
type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);
/// A named, coloured count per instance.
type InstanceKind = (&'static str, &'static str, fn(&InstanceCounts) -> u64);

/// Latency percentile curves: x is the number of nines (log of 1/(1-p)), y is ms.
fn percentile_chart(r: &Report) -> String {
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
    let f = Frame::new(760.0, 300.0);
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
fn throughput_chart(r: &Report) -> String {
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
    let f = Frame::new(760.0, 240.0);
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
fn p99_chart(r: &Report) -> String {
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
    let f = Frame::new(760.0, 200.0);
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
fn instance_chart(r: &Report) -> String {
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
    f.left = 130.0;
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
        let _ = write!(
            out,
            r#"<text x="{x}" y="{y:.1}" class="tick" text-anchor="end">{n}</text>"#,
            x = f.left - 8.0,
            y = gy + group_h / 2.0 - 3.0,
            n = esc(name)
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

fn lat_cells(s: &LatencySummary) -> String {
    if s.count == 0 {
        return "<td>-</td>".repeat(6);
    }
    [s.mean_ms, s.p50_ms, s.p90_ms, s.p99_ms, s.p999_ms, s.max_ms]
        .iter()
        .map(|v| format!("<td>{}</td>", num(*v)))
        .collect()
}

const LAT_HEAD: &str =
    "<th>count</th><th>errors</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th>";

fn card(out: &mut String, label: &str, value: &str, sub: &str, class: &str) {
    let _ = write!(
        out,
        r#"<div class="card {class}"><div class="label">{}</div><div class="value">{}</div><div class="sub">{}</div></div>"#,
        esc(label),
        esc(value),
        esc(sub)
    );
}

const CSS: &str = r#"
:root{--fg:#0f172a;--muted:#64748b;--line:#e2e8f0;--bg:#f8fafc;--card:#fff}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
main{max-width:1080px;margin:0 auto;padding:28px 24px 48px}
header h1{font-size:22px;margin:0 0 4px}
header .meta{color:var(--muted)}
.badge{display:inline-block;padding:2px 10px;border-radius:999px;font-weight:600;font-size:12px;margin-left:8px;vertical-align:middle}
.badge.pass{background:#dcfce7;color:#166534}.badge.fail{background:#fee2e2;color:#991b1b}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:12px;margin:20px 0}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.card .label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.card .value{font-size:24px;font-weight:650;margin-top:2px}
.card .sub{color:var(--muted);font-size:12px}
.card.bad .value{color:#b91c1c}.card.good .value{color:#15803d}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;margin:16px 0}
section h2{font-size:16px;margin:0 0 4px}
section p.note{color:var(--muted);margin:0 0 10px;font-size:13px}
.chart{width:100%;height:auto;display:block}
.chart .grid{stroke:#e2e8f0;stroke-width:1}.chart .grid.light{stroke:#f1f5f9}
.chart .tick{fill:#64748b;font-size:11px}.chart .axis{fill:#475569;font-size:12px}.chart .val{fill:#334155;font-size:10px}
.legend{display:flex;gap:16px;flex-wrap:wrap;color:#334155;font-size:12px;margin-top:6px}
.legend i{display:inline-block;width:12px;height:12px;border-radius:3px;margin-right:6px;vertical-align:-2px}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:6px 10px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
th{color:var(--muted);font-weight:600;font-size:12px}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:16px}
@media (max-width:800px){.grid2{grid-template-columns:1fr}}
.checks li{margin:4px 0}.ok{color:#15803d;font-weight:600}.ko{color:#b91c1c;font-weight:600}
.empty{color:var(--muted)}
footer{color:var(--muted);font-size:12px;margin-top:24px}
code{background:#f1f5f9;padding:1px 5px;border-radius:4px}
"#;

pub fn render(r: &Report) -> String {
    let m = &r.measures;
    let mut o = String::with_capacity(64 * 1024);
    o.push_str("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    o.push_str(r#"<meta name="viewport" content="width=device-width,initial-scale=1">"#);
    let _ = write!(
        o,
        "<title>mcp-edge loadtest · {}</title><style>{CSS}</style></head><body><main>",
        esc(&r.scenario.name)
    );

    let checks = r.check_results(&r.args);
    let badge = match (checks.is_empty(), checks.iter().all(|c| c.1)) {
        (true, _) => String::new(),
        (false, true) => r#"<span class="badge pass">checks passed</span>"#.into(),
        (false, false) => r#"<span class="badge fail">checks failed</span>"#.into(),
    };
    let _ = write!(
        o,
        r#"<header><h1>MRTR load test{badge}</h1><div class="meta">target <code>{}</code> · scenario <b>{}</b> · {} · {:.1} s · started at unix ms {}</div></header>"#,
        esc(&r.target_display()),
        esc(&r.scenario.name),
        esc(&r.mode_display()),
        r.elapsed.as_secs_f64(),
        r.started_unix_ms
    );

    o.push_str(r#"<div class="cards">"#);
    card(
        &mut o,
        "requests / s",
        &format!("{:.0}", r.request_rate()),
        &format!("{} requests", r.requests()),
        "",
    );
    card(
        &mut o,
        "flows completed",
        &m.flows_completed.to_string(),
        &format!(
            "{} failed · {} abandoned",
            m.flows_failed, m.flows_abandoned
        ),
        "",
    );
    let er_class = if r.errors() == 0 { "good" } else { "bad" };
    card(
        &mut o,
        "error rate",
        &format!("{:.2}%", r.error_rate() * 100.0),
        &format!("{} errors", r.errors()),
        er_class,
    );
    let (cross, cross_sub) = match r.cross_instance_fraction() {
        Some(f) => (
            format!("{:.1}%", f * 100.0),
            format!(
                "{} of {} retry legs",
                m.landing.cross, m.landing.retry_known
            ),
        ),
        None => ("-".into(), "no instance named".into()),
    };
    card(&mut o, "retries elsewhere", &cross, &cross_sub, "");
    for (label, s) in [
        ("p99 retry leg", r.latency(LegKind::Retry)),
        ("p99 whole flow", r.flow_latency()),
    ] {
        if s.count > 0 {
            card(
                &mut o,
                label,
                &format!("{} ms", num(s.p99_ms)),
                &format!("p50 {} ms", num(s.p50_ms)),
                "",
            );
        }
    }
    o.push_str("</div>");

    if !checks.is_empty() {
        o.push_str(r#"<section><h2>Checks</h2><ul class="checks">"#);
        for (name, ok, why) in &checks {
            let (c, t) = if *ok { ("ok", "PASS") } else { ("ko", "FAIL") };
            let _ = write!(
                o,
                r#"<li><span class="{c}">{t}</span> <code>{}</code> {}</li>"#,
                esc(name),
                esc(why)
            );
        }
        o.push_str("</ul></section>");
    }

    o.push_str(&super::html_extra::sections(r));

    o.push_str(r#"<section><h2>Latency by percentile</h2><p class="note">Each leg of an MRTR flow is a separate request; a whole flow runs from the (intended) start of leg 1 to the complete answer. The x axis stretches the tail: each step is one more nine.</p>"#);
    o.push_str(&percentile_chart(r));
    o.push_str("</section>");

    o.push_str(r#"<section><h2>Throughput and errors over time</h2>"#);
    o.push_str(&throughput_chart(r));
    let p99 = p99_chart(r);
    if !p99.is_empty() {
        o.push_str(r#"<h2 style="margin-top:14px">p99 over time</h2>"#);
        o.push_str(&p99);
    }
    o.push_str("</section>");

    let _ = write!(
        o,
        r#"<section><h2>Where the legs landed</h2><p class="note">Instance named by the <code>{}</code> response header (else result <code>_meta</code>). A stateless pool completes retry legs wherever they land.</p>"#,
        esc(&r.args.upstream_header)
    );
    o.push_str(&instance_chart(r));
    o.push_str("</section>");

    o.push_str(r#"<section><h2>Latency (ms)</h2><table><tr><th>leg kind</th>"#);
    o.push_str(LAT_HEAD);
    o.push_str("</tr>");
    for k in [LegKind::First, LegKind::Retry, LegKind::Plain, LegKind::Bad] {
        let l = m.leg(k);
        if l.requests > 0 {
            let _ = write!(
                o,
                "<tr><td>{} legs</td><td>{}</td><td>{}</td>{}</tr>",
                k.name(),
                l.requests,
                l.errors,
                lat_cells(&r.latency(k))
            );
        }
    }
    let fl = r.flow_latency();
    let _ = write!(
        o,
        "<tr><td>whole flows</td><td>{}</td><td></td>{}</tr></table></section>",
        fl.count,
        lat_cells(&fl)
    );

    o.push_str(r#"<section><h2>Per operation (all legs, ms)</h2><table><tr><th>operation</th>"#);
    o.push_str(LAT_HEAD);
    o.push_str("<th>flows ok</th></tr>");
    for op in r.operations() {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td>{}<td>{}</td></tr>",
            esc(&op.label),
            op.legs.requests,
            op.legs.errors,
            lat_cells(&LatencySummary::of(&op.legs.hist)),
            op.completed
        );
    }
    o.push_str("</table></section>");

    o.push_str(r#"<div class="grid2"><section><h2>Errors</h2>"#);
    if r.errors() == 0 {
        o.push_str(r#"<p class="empty">None.</p>"#);
    } else {
        o.push_str("<table><tr><th>by</th><th>value</th><th>count</th></tr>");
        for (k, v) in &m.errors_by_kind {
            let _ = write!(o, "<tr><td>kind</td><td>{}</td><td>{v}</td></tr>", esc(k));
        }
        for (k, v) in &m.errors_by_status {
            let _ = write!(o, "<tr><td>HTTP status</td><td>{k}</td><td>{v}</td></tr>");
        }
        for (k, v) in &m.errors_by_code {
            let _ = write!(o, "<tr><td>JSON-RPC code</td><td>{k}</td><td>{v}</td></tr>");
        }
        for k in LegKind::ALL {
            if m.leg(k).errors > 0 {
                let _ = write!(
                    o,
                    "<tr><td>leg</td><td>{}</td><td>{}</td></tr>",
                    k.name(),
                    m.leg(k).errors
                );
            }
        }
        o.push_str("</table>");
    }
    o.push_str(
        r#"</section><section><h2>Flows</h2><table><tr><th>outcome</th><th>count</th></tr>"#,
    );
    for (k, v) in [
        ("started", m.flows_started),
        ("completed", m.flows_completed),
        ("failed", m.flows_failed),
        ("abandoned (round bound)", m.flows_abandoned),
        ("interrupted (end of run)", r.flows_interrupted()),
    ] {
        let _ = write!(o, "<tr><td>{k}</td><td>{v}</td></tr>");
    }
    for (legs, n) in &m.rounds {
        let _ = write!(
            o,
            "<tr><td>completed in {legs} leg{}</td><td>{n}</td></tr>",
            if *legs == 1 { "" } else { "s" }
        );
    }
    if m.bad_sent > 0 {
        let _ = write!(
            o,
            "<tr><td>bad requests sent</td><td>{}</td></tr><tr><td>rejected as expected (400 / -32020)</td><td>{}</td></tr>",
            m.bad_sent, m.bad_rejected
        );
    }
    o.push_str("</table></section></div>");

    let _ = write!(
        o,
        "<footer>mcp-edge loadtest · report schema {} · {} principals · timeout {:.1} s · max {} legs per flow</footer>",
        super::json::SCHEMA,
        r.args.principal_tokens().len(),
        r.args.timeout.as_secs_f64(),
        r.scenario.max_rounds
    );
    o.push_str("</main></body></html>\n");
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
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }
}
