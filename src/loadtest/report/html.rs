//! The HTML report: one self-contained page (inline CSS and SVG, no script, no font or image
//! from anywhere, no URL at all). This file owns the page (summary cards, tables, CSS); the
//! charts are [`super::html_charts`] (drawn with [`super::html_svg`]), the sections beyond
//! latencies [`super::html_findings`].

use std::fmt::Write as _;

use super::html_charts::{instance_chart, p99_chart, percentile_chart, throughput_chart};
use super::html_svg::{esc, num};
use super::{LatencySummary, Report};
use crate::loadtest::measure::LegKind;

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

/// When the run started, for people: `2026-12-02 02:22:32 UTC`, and the RFC 3339 form for the
/// `datetime` attribute. UTC only: the standard library cannot tell the local offset, and the
/// page may be read in another time zone than the one it was made in anyway.
pub(crate) fn started_at(unix_ms: u64) -> (String, String) {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(unix_ms);
    let rfc3339 = humantime::format_rfc3339_seconds(t).to_string();
    let human = rfc3339.replacen('T', " ", 1).replace('Z', " UTC");
    (human, rfc3339)
}

/// The page's title line: badge, target, scenario, mode, duration and start time.
fn header(o: &mut String, r: &Report, checks: &[(&str, bool, String)]) {
    let badge = match (checks.is_empty(), checks.iter().all(|c| c.1)) {
        (true, _) => String::new(),
        (false, true) => r#"<span class="badge pass">checks passed</span>"#.into(),
        (false, false) => r#"<span class="badge fail">checks failed</span>"#.into(),
    };
    let (human, rfc3339) = started_at(r.started_unix_ms);
    let _ = write!(
        o,
        r#"<header><h1>MRTR load test{badge}</h1><div class="meta">target <code>{}</code> · scenario <b>{}</b> · {} · {:.1} s · started <time datetime="{rfc3339}" title="unix ms {}">{human}</time></div></header>"#,
        esc(&r.target_display()),
        esc(&r.scenario.name),
        esc(&r.mode_display()),
        r.elapsed.as_secs_f64(),
        r.started_unix_ms
    );
}

/// The page: head, title line, summary cards, checks, the extra sections, charts, tables, footer.
pub(crate) fn render(r: &Report) -> String {
    let mut o = String::with_capacity(64 * 1024);
    head(&mut o, r);
    let checks = r.check_results(&r.args);
    header(&mut o, r, &checks);
    cards(&mut o, r);
    checks_section(&mut o, &checks);
    o.push_str(&super::html_findings::sections(r));
    charts(&mut o, r);
    latency_table(&mut o, r);
    operations_table(&mut o, r);
    o.push_str(&super::tasks::html(r, LAT_HEAD, lat_cells));
    o.push_str(r#"<div class="grid2">"#);
    errors_table(&mut o, r);
    flows_table(&mut o, r);
    o.push_str("</div>");
    footer(&mut o, r);
    o
}

/// The document's start: doctype, `<head>` (title, inline CSS), and the opening of `<main>`.
fn head(o: &mut String, r: &Report) {
    o.push_str("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    o.push_str(r#"<meta name="viewport" content="width=device-width,initial-scale=1">"#);
    let _ = write!(
        o,
        "<title>mcp-edge loadtest · {}</title><style>{CSS}</style></head><body><main>",
        esc(&r.scenario.name)
    );
}

/// The summary cards: request rate, flows, error rate, retries elsewhere, p99s.
fn cards(o: &mut String, r: &Report) {
    let m = &r.measures;
    o.push_str(r#"<div class="cards">"#);
    card(
        o,
        "requests / s",
        &format!("{:.0}", r.request_rate()),
        &format!("{} requests", r.requests()),
        "",
    );
    card(
        o,
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
        o,
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
    card(o, "retries elsewhere", &cross, &cross_sub, "");
    for (label, s) in [
        ("p99 retry leg", r.latency(LegKind::Retry)),
        ("p99 whole flow", r.flow_latency()),
    ] {
        if s.count > 0 {
            card(
                o,
                label,
                &format!("{} ms", num(s.p99_ms)),
                &format!("p50 {} ms", num(s.p50_ms)),
                "",
            );
        }
    }
    o.push_str("</div>");
}

/// The checks asked for, each PASS or FAIL with its reason (nothing when none were asked for).
fn checks_section(o: &mut String, checks: &[(&str, bool, String)]) {
    if checks.is_empty() {
        return;
    }
    o.push_str(r#"<section><h2>Checks</h2><ul class="checks">"#);
    for (name, ok, why) in checks {
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

/// The chart sections: latency by percentile, throughput (and p99) over time, where legs landed.
fn charts(o: &mut String, r: &Report) {
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
}

/// The latency table: one row per kind of leg sent, then whole flows.
fn latency_table(o: &mut String, r: &Report) {
    o.push_str(r#"<section><h2>Latency (ms)</h2><table><tr><th>leg kind</th>"#);
    o.push_str(LAT_HEAD);
    o.push_str("</tr>");
    for k in [LegKind::First, LegKind::Retry, LegKind::Plain, LegKind::Bad] {
        let l = r.measures.leg(k);
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
}

/// The latency table by operation, with the flows each completed.
fn operations_table(o: &mut String, r: &Report) {
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
}

/// The errors section: counts by kind, HTTP status, JSON-RPC code and leg (or "None.").
fn errors_table(o: &mut String, r: &Report) {
    let m = &r.measures;
    o.push_str(r#"<section><h2>Errors</h2>"#);
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
    o.push_str("</section>");
}

/// The flows section: outcomes, legs per completed flow, bad requests.
fn flows_table(o: &mut String, r: &Report) {
    let m = &r.measures;
    o.push_str(r#"<section><h2>Flows</h2><table><tr><th>outcome</th><th>count</th></tr>"#);
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
    o.push_str("</table></section>");
}

/// The footer: report schema, principals, timeout, round bound; and the end of the document.
fn footer(o: &mut String, r: &Report) {
    let _ = write!(
        o,
        "<footer>mcp-edge loadtest · report schema {} · {} principals · timeout {:.1} s · max {} legs per flow</footer>",
        super::json::SCHEMA,
        r.args.principal_tokens().len(),
        r.args.timeout.as_secs_f64(),
        r.scenario.max_rounds
    );
    o.push_str("</main></body></html>\n");
}
