//! The Tasks section of the reports (text, JSON, HTML), present when the run followed tasks:
//! how the tasks ended, polls per task, time to completion, latency per request kind
//! (`tasks/get`, `tasks/update`, `tasks/cancel`) and where the task requests landed (the share
//! answered by the instance that created the task, named like every leg by the instance
//! header or result `_meta`).

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::html_svg::esc;
use super::{LatencySummary, Report};
use crate::loadtest::task_measure::{TaskLanding, TaskMeasures, TaskReq};

/// The outcome counts, in report order.
fn outcomes(t: &TaskMeasures) -> [(&'static str, u64); 7] {
    [
        ("created", t.created),
        ("completed", t.completed),
        ("cancelled", t.cancelled),
        ("failed", t.failed),
        ("abandoned", t.abandoned),
        ("lost", t.errors),
        ("tool errors", t.tool_errors),
    ]
}

fn share(l: &TaskLanding) -> String {
    match l.owner_share() {
        Some(s) => format!("{:.1}% ({} of {})", s * 100.0, l.owner, l.owner + l.other),
        None => "-".into(),
    }
}

/// Polls per ended task: mean, p50, max.
fn polls(t: &TaskMeasures) -> (f64, u64, u64) {
    let h = &t.polls;
    if h.is_empty() {
        return (0.0, 0, 0);
    }
    (h.mean(), h.value_at_quantile(0.5), h.max())
}

/// The rows of the latency table: time to completion, then each request kind.
fn lat_rows(t: &TaskMeasures) -> Vec<(String, LatencySummary, Option<u64>)> {
    let mut rows = vec![(
        "time to completion".to_string(),
        LatencySummary::of(&t.time_to_complete),
        None,
    )];
    for k in TaskReq::ALL {
        let s = t.req(k);
        if s.requests > 0 {
            rows.push((
                k.method().into(),
                LatencySummary::of(&s.hist),
                Some(s.errors),
            ));
        }
    }
    rows
}

/// The text section (empty when no task was followed).
pub(crate) fn text(r: &Report) -> String {
    let t = &r.measures.tasks;
    if t.created == 0 {
        return String::new();
    }
    let mut out = String::from("\nTasks\n");
    let line: Vec<String> = outcomes(t)
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    let _ = writeln!(out, "  {}", line.join(" · "));
    let (mean, p50, max) = polls(t);
    let _ = writeln!(
        out,
        "  polls per task: mean {mean:.1} · p50 {p50} · max {max}"
    );
    let mut rows = vec![super::table::LAT_HEADER
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
    for (name, s, errors) in lat_rows(t) {
        rows.push(super::table::lat_row(&name, &s, errors));
    }
    out.push_str(&super::table::table(&rows, 1));
    let all = t.landing_all();
    let _ = writeln!(
        out,
        "  landing: task requests answered by the task's owner: {}{}",
        share(&all),
        if all.unknown > 0 {
            format!(" · {} without a known instance", all.unknown)
        } else {
            String::new()
        }
    );
    let by: Vec<String> = TaskReq::ALL
        .iter()
        .filter(|k| t.req(**k).requests > 0)
        .map(|k| format!("{} {}", k.method(), share(&t.landing(*k))))
        .collect();
    let _ = writeln!(out, "    {}", by.join(" · "));
    out
}

fn landing_json(l: &TaskLanding) -> Value {
    json!({
        "owner": l.owner, "other": l.other, "unknown": l.unknown,
        "owner_share": l.owner_share(),
    })
}

/// The JSON member `tasks` (null when no task was followed).
pub(crate) fn json(r: &Report, lat: impl Fn(&hdrhistogram::Histogram<u64>) -> Value) -> Value {
    let t = &r.measures.tasks;
    if t.created == 0 {
        return Value::Null;
    }
    let (mean, p50, max) = polls(t);
    let mut requests = serde_json::Map::new();
    let mut landing = serde_json::Map::new();
    for k in TaskReq::ALL {
        let s = t.req(k);
        requests.insert(
            k.method().into(),
            json!({"count": s.requests, "errors": s.errors, "latency_ms": lat(&s.hist)}),
        );
        landing.insert(k.method().into(), landing_json(&t.landing(k)));
    }
    landing.insert("all".into(), landing_json(&t.landing_all()));
    json!({
        "created": t.created, "completed": t.completed, "cancelled": t.cancelled,
        "failed": t.failed, "abandoned": t.abandoned, "lost": t.errors,
        "tool_errors": t.tool_errors,
        "polls_per_task": {"mean": mean, "p50": p50, "max": max},
        "time_to_completion_ms": lat(&t.time_to_complete),
        "requests": requests,
        "landing": landing,
    })
}

/// The HTML section (empty when no task was followed).
pub(crate) fn html(
    r: &Report,
    lat_head: &str,
    lat_cells: impl Fn(&LatencySummary) -> String,
) -> String {
    let t = &r.measures.tasks;
    if t.created == 0 {
        return String::new();
    }
    let mut o = String::from(
        r#"<section><h2>Tasks</h2><p class="note">Tasks-extension flows: the call's task polled with tasks/get (with backoff), its input answered with tasks/update, a share cancelled with tasks/cancel. Landing: the instance that answered each task request against the one that created the task.</p><table><tr>"#,
    );
    for (k, _) in outcomes(t) {
        let _ = write!(o, "<th>{}</th>", esc(k));
    }
    o.push_str("</tr><tr>");
    for (_, v) in outcomes(t) {
        let _ = write!(o, "<td>{v}</td>");
    }
    let (mean, p50, max) = polls(t);
    let _ = write!(
        o,
        "</tr></table><p>polls per task: mean {mean:.1} · p50 {p50} · max {max}</p><table><tr><th></th>{lat_head}</tr>"
    );
    for (name, s, errors) in lat_rows(t) {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
            esc(&name),
            s.count,
            errors.map_or(String::new(), |e| e.to_string()),
            lat_cells(&s)
        );
    }
    o.push_str("</table><table><tr><th>landing</th><th>on the owner</th><th>elsewhere</th><th>unknown</th><th>owner share</th></tr>");
    let mut rows: Vec<(String, TaskLanding)> = TaskReq::ALL
        .iter()
        .filter(|k| t.req(**k).requests > 0)
        .map(|k| (k.method().to_string(), t.landing(*k)))
        .collect();
    rows.push(("all task requests".into(), t.landing_all()));
    for (name, l) in rows {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&name),
            l.owner,
            l.other,
            l.unknown,
            esc(&share(&l))
        );
    }
    o.push_str("</table></section>");
    o
}
