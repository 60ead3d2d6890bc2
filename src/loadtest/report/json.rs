//! The JSON report, schema `mcp-edge.loadtest/v1`. Every figure of the run; latencies in ms.
//!
//! Top-level members (all always present):
//! `schema`, `config` (the options), `scenario` (name, max_rounds, flows),
//! `started_at_unix_ms`, `elapsed_s`,
//! `requests` {total, errors, error_rate, rate_per_s},
//! `flows` {started, completed, failed, abandoned, interrupted, by_legs {"N": count}},
//! `latency_ms` {first, retry, plain, flow, bad}: each {count, min, mean, p50, p90, p99, p999, max,
//! curve: [[percentile, ms], ...]},
//! `operations`: [{op, requests, errors, flows_completed, flows_failed, flows_abandoned,
//! latency_ms, flow_latency_ms}],
//! `errors` {total, rate, by_leg {first, retry, plain, bad}, by_kind, by_status, by_code},
//! `bad_requests` {sent, rejected_as_expected, unexpected},
//! `landing` {upstream_header, retry_legs_known, cross_instance, same_instance, retry_legs_unknown,
//! cross_instance_fraction (null when unknown), gateway_steered {elsewhere, same, untracked: count,
//! by the gateway's x-mcp-edge-retry-landing header; empty when it does not steer},
//! instances: [{name, first, retry, plain}]},
//! `timeline`: [{t_s, requests, errors, flows_completed, p99_ms (null when idle)}],
//! `checks`: [{name, passed, reason}], `passed`,
//! `error_groups`: [{kind, status, code, message, count}] (most common first),
//! `content_checks`: [{check, passed, failed, first_failure}],
//! `elicitation` {declined, cancelled},
//! `tasks` (null when no task was followed): {created, completed, cancelled, failed, abandoned,
//! lost, tool_errors, polls_per_task {mean, p50, max}, time_to_completion_ms, requests
//! {"tasks/get"|"tasks/update"|"tasks/cancel": {count, errors, latency_ms}}, landing
//! {"tasks/get"|..|all: {owner, other, unknown, owner_share}}},
//! `stages`: [{stage, start_s, end_s, target, requests,
//! errors, flows_completed, latency_ms}] (empty without --stages),
//! `preflight` (null with --no-preflight): {server_name, server_version, protocol_versions,
//! tool_count, pages, tools, x_mcp_header_tools, discover_error, list_error, auto_excluded},
//! `shard` (null unless --shard): {index, count},
//! `merge` (null unless made by `loadtest merge`): {count, ran, missing, failed: [{index,
//! error}], duplicates, partial, allow_partial},
//! `lossless`: what `loadtest merge` adds up exactly: {encoding, measures (every counter, and
//! every histogram in HdrHistogram's V2 deflate encoding, base64), timeline_windows (each
//! second's histogram)}.

use serde_json::{json, Map, Value};

use super::{percentile_curve, LatencySummary, Report};
use crate::loadtest::measure::LegKind;

/// The schema identifier.
pub(crate) const SCHEMA: &str = "mcp-edge.loadtest/v1";

fn lat(h: &hdrhistogram::Histogram<u64>) -> Value {
    let s = LatencySummary::of(h);
    json!({
        "count": s.count, "min": s.min_ms, "mean": s.mean_ms, "p50": s.p50_ms, "p90": s.p90_ms,
        "p99": s.p99_ms, "p999": s.p999_ms, "max": s.max_ms,
        "curve": percentile_curve(h).into_iter().map(|(p, v)| json!([p, v])).collect::<Vec<_>>(),
    })
}

fn counts<K: ToString, V: Into<Value> + Copy>(m: impl IntoIterator<Item = (K, V)>) -> Value {
    Value::Object(
        m.into_iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect::<Map<_, _>>(),
    )
}

pub(crate) fn render(r: &Report) -> Value {
    let m = &r.measures;
    let l = &m.landing;
    let mut latency = Map::new();
    for k in [LegKind::First, LegKind::Retry, LegKind::Plain] {
        latency.insert(k.name().into(), lat(&m.leg(k).hist));
    }
    latency.insert("flow".into(), lat(&m.flows_hist));
    latency.insert("bad".into(), lat(&m.leg(LegKind::Bad).hist));
    let checks: Vec<Value> = r
        .check_results(&r.args)
        .into_iter()
        .map(|(name, passed, reason)| json!({"name": name, "passed": passed, "reason": reason}))
        .collect();
    let passed = checks.iter().all(|c| c["passed"] == true);
    json!({
        "schema": SCHEMA,
        "config": serde_json::to_value(&r.args).unwrap_or(Value::Null),
        "scenario": serde_json::to_value(&r.scenario).unwrap_or(Value::Null),
        "started_at_unix_ms": r.started_unix_ms,
        "elapsed_s": r.elapsed.as_secs_f64(),
        "requests": {
            "total": r.requests(), "errors": r.errors(), "error_rate": r.error_rate(), "rate_per_s": r.request_rate(),
        },
        "flows": {
            "started": m.flows_started, "completed": m.flows_completed, "failed": m.flows_failed,
            "abandoned": m.flows_abandoned, "interrupted": r.flows_interrupted(),
            "by_legs": counts(m.rounds.iter().map(|(k, v)| (k, *v))),
        },
        "latency_ms": latency,
        "operations": r.operations().iter().map(|o| json!({
            "op": o.label, "requests": o.legs.requests, "errors": o.legs.errors,
            "flows_completed": o.completed, "flows_failed": o.failed, "flows_abandoned": o.abandoned,
            "latency_ms": lat(&o.legs.hist), "flow_latency_ms": lat(&o.flows),
        })).collect::<Vec<_>>(),
        "errors": {
            "total": r.errors(), "rate": r.error_rate(),
            "by_leg": counts(LegKind::ALL.iter().map(|k| (k.name(), m.leg(*k).errors))),
            "by_kind": counts(m.errors_by_kind.iter().map(|(k, v)| (k, *v))),
            "by_status": counts(m.errors_by_status.iter().map(|(k, v)| (k, *v))),
            "by_code": counts(m.errors_by_code.iter().map(|(k, v)| (k, *v))),
        },
        "bad_requests": {
            "sent": m.bad_sent, "rejected_as_expected": m.bad_rejected, "unexpected": m.bad_sent - m.bad_rejected,
        },
        "landing": {
            "upstream_header": r.args.upstream_header,
            "retry_legs_known": l.retry_known, "cross_instance": l.cross, "same_instance": l.retry_known - l.cross,
            "retry_legs_unknown": l.retry_unknown, "cross_instance_fraction": l.cross_fraction(),
            "gateway_steered": l.steered,
            "instances": l.instances.iter().map(|(name, c)| json!({
                "name": name, "first": c.first, "retry": c.retry, "plain": c.plain,
            })).collect::<Vec<_>>(),
        },
        "timeline": m.timeline.iter().enumerate().map(|(t, b)| json!({
            "t_s": t, "requests": b.requests, "errors": b.errors, "flows_completed": b.flows_completed,
            "p99_ms": r.p99_timeline_us.get(t).copied().flatten().map(|v| v as f64 / 1000.0),
        })).collect::<Vec<_>>(),
        "checks": checks,
        "passed": passed,
        "error_groups": m.tally.error_groups().iter().map(|(k, n)| json!({
            "kind": k.kind, "status": k.status, "code": k.code, "message": k.message, "count": n,
        })).collect::<Vec<_>>(),
        "content_checks": m.tally.checks.iter().map(|(l, c)| json!({
            "check": l, "passed": c.passed, "failed": c.failed, "first_failure": c.sample,
        })).collect::<Vec<_>>(),
        "elicitation": {"declined": m.tally.declined, "cancelled": m.tally.cancelled},
        "tasks": super::tasks::json(r, lat),
        "stages": r.args.stages.iter().flat_map(|s| s.0.iter().enumerate().map(|(i, st)| {
            let (a, b) = s.span(i);
            let t = m.tally.stages.get(i).cloned().unwrap_or_default();
            json!({"stage": i + 1, "start_s": a.as_secs_f64(), "end_s": b.as_secs_f64(), "target": st.target,
                "requests": t.requests, "errors": t.errors, "flows_completed": t.flows_completed,
                "latency_ms": lat(&t.hist)})
        })).collect::<Vec<_>>(),
        "shard": r.args.shard,
        "merge": r.merge,
        "lossless": {
            "encoding": crate::loadtest::wire::ENCODING,
            "measures": serde_json::to_value(m).unwrap_or(Value::Null),
            "timeline_windows": r.windows,
        },
        "preflight": r.discovery.as_ref().map(|d| {
            let mut v = d.to_json();
            v["auto_excluded"] = json!(r.excluded.iter().map(|(n, w)| json!({"tool": n, "reason": w})).collect::<Vec<_>>());
            v
        }),
    })
}
