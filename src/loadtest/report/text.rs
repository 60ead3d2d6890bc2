//! The final summary table, aligned, latencies in ms.

use std::fmt::Write as _;

use super::table::{f, lat_row, table, LAT_HEADER};
use super::{LatencySummary, Report};
use crate::loadtest::measure::LegKind;

/// Error groups listed in the summary.
const MAX_GROUP_ROWS: usize = 10;

/// The summary: one section after another, each only when it has something to say.
pub(crate) fn render(r: &Report) -> String {
    let mut out = String::new();
    headline(&mut out, r);
    latency(&mut out, r);
    per_operation(&mut out, r);
    landing(&mut out, r);
    out.push_str(&super::tasks::text(r));
    errors(&mut out, r);
    error_groups(&mut out, r);
    content_checks(&mut out, r);
    stages(&mut out, r);
    checks(&mut out, r);
    out
}

/// The target, scenario and mode; totals of requests, errors and flows; discovery, what the auto
/// scenario left out, and the bad requests sent.
fn headline(out: &mut String, r: &Report) {
    let m = &r.measures;
    let _ = writeln!(
        out,
        "mcp-edge loadtest · {} · scenario {} · {}",
        r.target_display(),
        r.scenario.name,
        r.mode_display()
    );
    let _ = writeln!(
        out,
        "  {:.1}s · {} requests · {:.0} req/s · {} errors ({:.3}%)",
        r.elapsed.as_secs_f64(),
        r.requests(),
        r.request_rate(),
        r.errors(),
        r.error_rate() * 100.0
    );
    let _ = writeln!(
        out,
        "  flows: {} completed · {} failed · {} abandoned · {} interrupted",
        m.flows_completed,
        m.flows_failed,
        m.flows_abandoned,
        r.flows_interrupted()
    );
    if let Some(d) = &r.discovery {
        for line in d.summary().lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    if !r.excluded.is_empty() {
        let ex: Vec<String> = r
            .excluded
            .iter()
            .map(|(n, w)| format!("{n} ({w})"))
            .collect();
        let _ = writeln!(out, "  auto scenario left out: {}", ex.join(", "));
    }
    if m.bad_sent > 0 {
        let _ = writeln!(
            out,
            "  bad requests: {} sent · {} rejected as expected (400/-32020)",
            m.bad_sent, m.bad_rejected
        );
    }
    out.push('\n');
}

/// The latency table: one row per kind of leg sent, whole flows, and the bad requests.
fn latency(out: &mut String, r: &Report) {
    let m = &r.measures;
    let _ = writeln!(out, "Latency (ms)");
    let mut rows = vec![LAT_HEADER.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    for k in [LegKind::First, LegKind::Retry, LegKind::Plain] {
        let l = m.leg(k);
        if l.requests > 0 {
            rows.push(lat_row(
                &format!("{} legs", k.name()),
                &r.latency(k),
                Some(l.errors),
            ));
        }
    }
    rows.push(lat_row("whole flows", &r.flow_latency(), None));
    if m.bad_sent > 0 {
        rows.push(lat_row(
            "bad requests",
            &r.latency(LegKind::Bad),
            Some(m.leg(LegKind::Bad).errors),
        ));
    }
    out.push_str(&table(&rows, 1));
    out.push('\n');
}

/// The latency table by operation, with the flows each completed.
fn per_operation(out: &mut String, r: &Report) {
    let _ = writeln!(out, "Per operation (all legs, ms)");
    let mut rows = vec![LAT_HEADER.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    rows[0].push("flows ok".into());
    for o in r.operations() {
        let mut row = lat_row(
            &o.label,
            &LatencySummary::of(&o.legs.hist),
            Some(o.legs.errors),
        );
        row.push(o.completed.to_string());
        rows.push(row);
    }
    out.push_str(&table(&rows, 1));
    out.push('\n');
}

/// Where retry legs landed (relative to their first leg) and the legs per instance.
fn landing(out: &mut String, r: &Report) {
    let l = &r.measures.landing;
    let _ = writeln!(out, "Landing");
    match l.cross_fraction() {
        Some(frac) => {
            let _ = writeln!(
                out,
                "  {:.1}% of retry legs served by a different instance than leg 1 ({} of {})",
                frac * 100.0,
                l.cross,
                l.retry_known
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  no retry leg with a known instance (header {:?})",
                r.args.upstream_header
            );
        }
    }
    if l.retry_unknown > 0 {
        let _ = writeln!(
            out,
            "  {} retry legs without a known instance",
            l.retry_unknown
        );
    }
    if let Some(s) = steered_line(l) {
        let _ = writeln!(out, "  {s}");
    }
    if !l.instances.is_empty() {
        let mut rows = vec![["instance", "first legs", "retry legs", "plain"]
            .map(String::from)
            .to_vec()];
        for (name, c) in &l.instances {
            rows.push(vec![
                name.clone(),
                c.first.to_string(),
                c.retry.to_string(),
                c.plain.to_string(),
            ]);
        }
        out.push_str(&table(&rows, 1));
    }
}

/// The errors counted by leg, kind, HTTP status and JSON-RPC code (when there were any).
fn errors(out: &mut String, r: &Report) {
    if r.errors() == 0 {
        return;
    }
    let m = &r.measures;
    out.push('\n');
    let _ = writeln!(out, "Errors");
    let by_leg: Vec<String> = LegKind::ALL
        .iter()
        .filter(|k| m.leg(**k).errors > 0)
        .map(|k| format!("{} {}", k.name(), m.leg(*k).errors))
        .collect();
    if !by_leg.is_empty() {
        let _ = writeln!(out, "  by leg:    {}", by_leg.join(" · "));
    }
    let kinds: Vec<String> = m
        .errors_by_kind
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(out, "  by kind:   {}", kinds.join(" · "));
    if !m.errors_by_status.is_empty() {
        let s: Vec<String> = m
            .errors_by_status
            .iter()
            .map(|(k, v)| format!("{k} ×{v}"))
            .collect();
        let _ = writeln!(out, "  by status: {}", s.join(" · "));
    }
    if !m.errors_by_code.is_empty() {
        let s: Vec<String> = m
            .errors_by_code
            .iter()
            .map(|(k, v)| format!("{k} ×{v}"))
            .collect();
        let _ = writeln!(out, "  by code:   {}", s.join(" · "));
    }
}

/// The most common error messages (at most [`MAX_GROUP_ROWS`] of them).
fn error_groups(out: &mut String, r: &Report) {
    let groups = r.measures.tally.error_groups();
    if groups.is_empty() {
        return;
    }
    out.push('\n');
    let _ = writeln!(out, "Errors by message (most common first)");
    for (k, n) in groups.iter().take(MAX_GROUP_ROWS) {
        let _ = writeln!(out, "  {n:>7} × {}", super::error_label(k));
    }
    if groups.len() > MAX_GROUP_ROWS {
        let _ = writeln!(
            out,
            "  … {} more groups (see the JSON report)",
            groups.len() - MAX_GROUP_ROWS
        );
    }
}

/// The content checks' table, and the elicitations declined or cancelled on purpose.
fn content_checks(out: &mut String, r: &Report) {
    let t = &r.measures.tally;
    if !t.checks.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "Content checks");
        let mut rows = vec![["check", "passed", "failed", "first failure"]
            .map(String::from)
            .to_vec()];
        for (label, c) in &t.checks {
            rows.push(vec![
                label.clone(),
                c.passed.to_string(),
                c.failed.to_string(),
                c.sample.clone().unwrap_or_default(),
            ]);
        }
        out.push_str(&table(&rows, 1));
    }
    if t.declined + t.cancelled > 0 {
        let _ = writeln!(
            out,
            "  elicitations answered on purpose: {} declined · {} cancelled flows",
            t.declined, t.cancelled
        );
    }
}

/// One row per stage of a staged run: its span, target rate, counts and latency.
fn stages(out: &mut String, r: &Report) {
    let Some(stages) = &r.args.stages else {
        return;
    };
    out.push('\n');
    let _ = writeln!(out, "Stages");
    let mut rows = vec![[
        "stage", "span", "target", "requests", "errors", "flows ok", "p50", "p99",
    ]
    .map(String::from)
    .to_vec()];
    for (i, st) in stages.0.iter().enumerate() {
        let (a, b) = stages.span(i);
        let t = r.measures.tally.stages.get(i);
        let lat = t.map(|t| LatencySummary::of(&t.hist)).unwrap_or_default();
        let dash = |v: f64| {
            if lat.count == 0 {
                "-".to_string()
            } else {
                f(v)
            }
        };
        rows.push(vec![
            (i + 1).to_string(),
            format!("{:.0}-{:.0}s", a.as_secs_f64(), b.as_secs_f64()),
            f(st.target),
            t.map_or(0, |t| t.requests).to_string(),
            t.map_or(0, |t| t.errors).to_string(),
            t.map_or(0, |t| t.flows_completed).to_string(),
            dash(lat.p50_ms),
            dash(lat.p99_ms),
        ]);
    }
    out.push_str(&table(&rows, 2));
}

/// The pass/fail line of each check the run's arguments asked for.
fn checks(out: &mut String, r: &Report) {
    let checks = r.check_results(&r.args);
    if checks.is_empty() {
        return;
    }
    out.push('\n');
    let _ = writeln!(out, "Checks");
    for (name, ok, why) in checks {
        let _ = writeln!(out, "  {} {name}: {why}", if ok { "PASS" } else { "FAIL" });
    }
}

/// What the gateway said about steering retry legs (`mrtr.retry_landing: elsewhere`), when it
/// said anything.
pub(crate) fn steered_line(l: &crate::loadtest::stats::Landing) -> Option<String> {
    if l.steered_total() == 0 {
        return None;
    }
    let n = |k: &str| l.steered.get(k).copied().unwrap_or(0);
    let mut s = format!(
        "the gateway steers retry legs away from their previous instance (mrtr.retry_landing: elsewhere): {} elsewhere, {} on the same instance (no other eligible), {} untracked by the gateway",
        n("elsewhere"),
        n("same"),
        n("untracked")
    );
    if n("other") > 0 {
        s.push_str(&format!(", {} with an unknown value", n("other")));
    }
    Some(s)
}
