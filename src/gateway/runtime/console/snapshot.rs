//! The console's snapshot: one JSON document of cumulative counts and current state, read from
//! the metrics registry, the pools and the recent-refusal ring.

use prometheus::proto::MetricFamily;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::UNIX_EPOCH;

use crate::gateway::journey::live::Live;
use crate::gateway::journey::state::Gateway;
use crate::gateway::telemetry::history;

/// The label value `name` of one sample.
fn label<'a>(m: &'a prometheus::proto::Metric, name: &str) -> &'a str {
    m.get_label()
        .iter()
        .find(|l| l.name() == name)
        .map_or("", |l| l.value())
}

fn family<'a>(all: &'a [MetricFamily], name: &str) -> Option<&'a MetricFamily> {
    all.iter().find(|f| f.name() == name)
}

/// Counter samples of `name`, summed by the labels `by` picks (`by` returns `None` to skip).
pub(super) fn sum_by(
    all: &[MetricFamily],
    name: &str,
    by: impl Fn(&prometheus::proto::Metric) -> Option<String>,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for m in family(all, name)
        .map(|f| f.get_metric())
        .unwrap_or_default()
    {
        if let Some(k) = by(m) {
            *out.entry(k).or_insert(0.0) += m.get_counter().get_value();
        }
    }
    out
}

/// Whose fault a `requests_total` sample is (`ok` when neither), by its status class and code
/// labels ([`history::side_of_sample`]).
fn side(status: &str, code: &str) -> &'static str {
    history::side_of_sample(status, code).map_or("ok", |s| s.label())
}

/// The request-duration histogram summed over its labels: `[[le, cumulative count], ...]`.
fn latency(all: &[MetricFamily]) -> Value {
    let mut buckets: BTreeMap<u64, (f64, u64)> = BTreeMap::new();
    for m in family(all, "mcp_edge_request_duration_seconds")
        .map(|f| f.get_metric())
        .unwrap_or_default()
    {
        for b in m.get_histogram().get_bucket() {
            let e = buckets
                .entry((b.upper_bound() * 1e6) as u64)
                .or_insert((b.upper_bound(), 0));
            e.1 += b.cumulative_count();
        }
    }
    Value::from(
        buckets
            .values()
            .map(|(le, n)| json!([le, n]))
            .collect::<Vec<_>>(),
    )
}

fn totals(all: &[MetricFamily]) -> Value {
    let sides = sum_by(all, "mcp_edge_requests_total", |m| {
        Some(side(label(m, "status"), label(m, "code")).to_string())
    });
    let spoofs = sum_by(all, "mcp_edge_header_checks_total", |m| {
        (label(m, "result") == "rejected").then(String::new)
    });
    // `+ 0.0`: a float sum of nothing is -0.0 in Rust, which the page would show as `-0` (the
    // tasks card did, before a task was routed).
    let one = |name: &str| {
        sum_by(all, name, |_| Some(String::new()))
            .values()
            .sum::<f64>()
            + 0.0
    };
    json!({
        "requests": sides.values().sum::<f64>() + 0.0,
        "by_side": sides,
        "spoofs_refused": spoofs.values().sum::<f64>() + 0.0,
        "retry_legs": one("mcp_edge_mrtr_retry_legs_total"),
        "input_required": one("mcp_edge_mrtr_input_required_total"),
        "cache_hits": one("mcp_edge_cache_hits_total"),
        "cache_misses": one("mcp_edge_cache_misses_total"),
        "tasks_routed": one("mcp_edge_task_routing_total"),
    })
}

fn routes(gw: &Gateway, all: &[MetricFamily]) -> Value {
    let total = sum_by(all, "mcp_edge_requests_total", |m| {
        Some(label(m, "route").to_string())
    });
    let errors = sum_by(all, "mcp_edge_requests_total", |m| {
        (side(label(m, "status"), label(m, "code")) != "ok").then(|| label(m, "route").to_string())
    });
    let table = gw.table.routes.iter().chain(gw.table.default.iter());
    let rows: Vec<Value> = table
        .map(|r| json!({"name": r.name, "pool": gw.table.pools[r.pool],
            "method": r.method.as_ref().map(|p| p.to_string()), "match_name": r.mcp_name.as_ref().map(|p| p.to_string()),
            "requests": total.get(&r.name).copied().unwrap_or(0.0), "errors": errors.get(&r.name).copied().unwrap_or(0.0)}))
        .collect();
    let decisions = |d: &str| {
        sum_by(all, "mcp_edge_rate_limit_decisions_total", |m| {
            (label(m, "decision") == d).then(|| label(m, "limit").to_string())
        })
    };
    let (allowed, limited, dry) = (
        decisions("allowed"),
        decisions("limited"),
        decisions("dry_run_limited"),
    );
    let limits: Vec<Value> = gw
        .limits
        .iter()
        .map(|l| json!({"name": l.name, "allowed": allowed.get(&l.name), "limited": limited.get(&l.name), "dry_run_limited": dry.get(&l.name)}))
        .collect();
    json!({"routes": rows, "limits": limits})
}

fn pools(gw: &Gateway, all: &[MetricFamily]) -> Value {
    let key = |m: &prometheus::proto::Metric| {
        Some(format!("{}\u{0}{}", label(m, "pool"), label(m, "upstream")))
    };
    let sent = sum_by(all, "mcp_edge_upstream_requests_total", key);
    let failed = sum_by(all, "mcp_edge_upstream_errors_total", key);
    let now = crate::gateway::balance::stages::load::now_ns();
    let list: Vec<Value> = gw.pools.iter().enumerate().map(|(pi, p)| {
        let instances: Vec<Value> = p.instances.iter().enumerate().map(|(i, inst)| {
            let k = format!("{}\u{0}{}", p.name, inst.name);
            json!({
                "name": inst.name,
                "usable": p.health.usable(i),
                "checks_pass": p.health.checks_pass(i),
                "ejected_for_s": p.health.ejected_for(i).map(|d| d.as_secs_f64()),
                "outlier": p.health.outlier_for(i).is_some(),
                "in_flight": p.loads[i].in_flight(),
                "latency_ms": p.loads[i].latency_ns() / 1e6,
                "weight": p.effective_weight(i, now),
                "requests": sent.get(&k).copied().unwrap_or(0.0),
                "errors": failed.get(&k).copied().unwrap_or(0.0),
            })
        }).collect();
        json!({"name": p.name, "balance": p.balance.label(), "health_interval_s": p.health.check.interval.as_secs_f64(),
               "concurrency": pool_limit(gw, pi), "instances": instances})
    }).collect();
    Value::from(list)
}

/// A pool's concurrency limit as it stands, with its tools' (`null` without one).
fn pool_limit(gw: &Gateway, pool: usize) -> Value {
    let Some(ls) = gw.pool_limits.get(pool).filter(|l| l.pool.is_some()) else {
        return Value::Null;
    };
    let one = |l: &crate::gateway::concurrency::stages::pool::PoolLimit| {
        let (limit, first_leg_limit, in_flight) = l.now();
        let (min_rtt, probing) = l.measured();
        json!({"tool": l.tool, "adaptive": l.config.adaptive, "limit": limit,
               "first_leg_limit": first_leg_limit, "in_flight": in_flight,
               "min_rtt_ms": min_rtt.map(|d| d.as_secs_f64() * 1e3),
               "probing": probing, "min": l.config.min, "max": l.config.max})
    };
    let mut v = one(ls.pool.as_deref().expect("filtered"));
    let mut tools: Vec<_> = ls.tools.values().map(|l| one(l)).collect();
    tools.sort_by(|a, b| a["tool"].as_str().cmp(&b["tool"].as_str()));
    v["tools"] = Value::from(tools);
    v
}

fn tools(all: &[MetricFamily]) -> Value {
    let calls = |errors: bool| {
        sum_by(all, "mcp_edge_requests_total", |m| {
            let call = label(m, "method") == "tools/call";
            let bad = side(label(m, "status"), label(m, "code")) != "ok";
            (call && (!errors || bad)).then(|| label(m, "name").to_string())
        })
    };
    let (all_calls, bad) = (calls(false), calls(true));
    let retry = sum_by(all, "mcp_edge_mrtr_retry_legs_total", |m| {
        Some(label(m, "name").to_string())
    });
    let asked = sum_by(all, "mcp_edge_mrtr_input_required_total", |m| {
        Some(label(m, "name").to_string())
    });
    let mut rows: Vec<(&String, &f64)> = all_calls.iter().collect();
    rows.sort_by(|a, b| b.1.total_cmp(a.1));
    Value::from(rows.into_iter().take(20).map(|(n, c)| json!({"name": n, "calls": c,
        "errors": bad.get(n).copied().unwrap_or(0.0), "retry_legs": retry.get(n).copied().unwrap_or(0.0),
        "input_required": asked.get(n).copied().unwrap_or(0.0)})).collect::<Vec<_>>())
}

fn config(gw: &Gateway, live: &Live) -> Value {
    let reload = live.last_reload().map(|(at, r)| {
        json!({
            "at_unix_ms": at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
            "ok": r.is_ok(),
            "error": r.err(),
        })
    });
    let now = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    // The listeners with their certificates and expiry (the files as they are now).
    let (listeners, warnings) = crate::gateway::transport::listeners::describe(&gw.config, now, 14)
        .unwrap_or_else(|e| (format!("listeners: {e}\n"), Vec::new()));
    json!({"resolved": format!("{}\n{listeners}", gw.config.describe()), "certificate_warnings": warnings, "last_reload": reload})
}

/// The pipeline's stages, in order, from its one list: what each needs and whether it is on
/// for this gateway (a body stage without its config is off).
pub(crate) fn stages(gw: &Gateway) -> Value {
    use crate::gateway::stages::pipeline::{Run, STAGES};
    let list = STAGES.iter().zip(&gw.stage_states).map(|(s, state)| {
        let (kind, on) = match s.run {
            Run::Step(_) => ("step", true),
            Run::Body(_) => ("body stage", state.is_some()),
        };
        json!({"stage": s.name(), "needs": s.needs.label(), "kind": kind, "on": on})
    });
    Value::Array(list.collect())
}

/// The changed definitions of the pinning pools (held or flagged), pinned against served.
fn pins(gw: &Gateway) -> Value {
    let policy = |p: &str| {
        let i = gw.table.pools.iter().position(|n| n == p);
        i.map(|i| gw.pin_policies[i]).unwrap_or_default()
    };
    let rows = gw.pins.report(policy);
    let changed = rows
        .into_iter()
        .filter(|r| matches!(r.status, "changed" | "unpinned"));
    serde_json::to_value(changed.collect::<Vec<_>>()).unwrap_or(Value::Null)
}

/// The whole snapshot.
pub(crate) fn snapshot(live: &Live) -> String {
    let gw = live.load();
    gw.publish_pools();
    let all = gw.metrics.registry.gather();
    let catalog: Value = match &gw.federation {
        Some(_) => serde_json::from_str(
            &crate::gateway::federation::journey::report::catalog_json(&gw),
        )
        .unwrap_or(Value::Null),
        None => Value::Null,
    };
    let v = json!({
        "at_unix_ms": std::time::SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
        "version": env!("CARGO_PKG_VERSION"),
        "endpoint": gw.config.endpoint,
        "totals": totals(&all),
        "latency_buckets": latency(&all),
        "routes": routes(&gw, &all),
        "pools": pools(&gw, &all),
        "tools": tools(&all),
        "refusals": gw.metrics.recent.snapshot(),
        "catalog": catalog,
        "config": config(&gw, live),
        "stages": stages(&gw),
        "pins": pins(&gw),
        "eras": super::eras::eras(&gw, &all),
    });
    v.to_string()
}
