//! The HTML report's sections for what the load tester learned beyond latencies: the preflight,
//! the error distribution with the upstream's messages, the content checks and the ramp stages.

use std::fmt::Write as _;

use super::html_svg::esc;
use super::{error_label, LatencySummary, Report};

fn row(o: &mut String, cells: &[String]) {
    o.push_str("<tr>");
    for (i, c) in cells.iter().enumerate() {
        let style = if i == 0 {
            r#" style="text-align:left;white-space:normal""#
        } else {
            ""
        };
        let _ = write!(o, "<td{style}>{}</td>", esc(c));
    }
    o.push_str("</tr>");
}

fn head(o: &mut String, cells: &[&str]) {
    o.push_str("<table><tr>");
    for c in cells {
        let _ = write!(o, "<th>{}</th>", esc(c));
    }
    o.push_str("</tr>");
}

/// Every extra section, in page order.
pub(crate) fn sections(r: &Report) -> String {
    let m = &r.measures;
    let mut o = String::new();
    if let Some(d) = &r.discovery {
        o.push_str(r#"<section><h2>Preflight</h2><p class="note">"#);
        for line in d.summary().lines() {
            let _ = write!(o, "{}<br>", esc(line));
        }
        if !r.excluded.is_empty() {
            let ex: Vec<String> = r
                .excluded
                .iter()
                .map(|(n, w)| format!("{n} ({w})"))
                .collect();
            let _ = write!(o, "auto scenario left out: {}", esc(&ex.join(", ")));
        }
        o.push_str("</p></section>");
    }
    let groups = m.tally.error_groups();
    if !groups.is_empty() {
        o.push_str(r#"<section><h2>Errors by message</h2>"#);
        head(&mut o, &["error (kind, status, code, message)", "count"]);
        for (k, n) in &groups {
            row(&mut o, &[error_label(k), n.to_string()]);
        }
        o.push_str("</table></section>");
    }
    if !m.tally.checks.is_empty() {
        o.push_str(r#"<section><h2>Content checks</h2>"#);
        head(&mut o, &["check", "passed", "failed", "first failure"]);
        for (l, c) in &m.tally.checks {
            row(
                &mut o,
                &[
                    l.clone(),
                    c.passed.to_string(),
                    c.failed.to_string(),
                    c.sample.clone().unwrap_or_default(),
                ],
            );
        }
        o.push_str("</table></section>");
    }
    if let Some(stages) = &r.args.stages {
        o.push_str(r#"<section><h2>Stages</h2>"#);
        head(
            &mut o,
            &[
                "stage", "span (s)", "target", "requests", "errors", "flows ok", "p50 ms", "p99 ms",
            ],
        );
        for (i, st) in stages.0.iter().enumerate() {
            let (a, b) = stages.span(i);
            let t = m.tally.stages.get(i).cloned().unwrap_or_default();
            let lat = LatencySummary::of(&t.hist);
            row(
                &mut o,
                &[
                    (i + 1).to_string(),
                    format!("{:.0}-{:.0}", a.as_secs_f64(), b.as_secs_f64()),
                    format!("{}", st.target),
                    t.requests.to_string(),
                    t.errors.to_string(),
                    t.flows_completed.to_string(),
                    format!("{:.2}", lat.p50_ms),
                    format!("{:.2}", lat.p99_ms),
                ],
            );
        }
        o.push_str("</table></section>");
    }
    o
}
