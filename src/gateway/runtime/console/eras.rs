//! The console's eras: which protocol revision each pool speaks and which clients each
//! endpoint serves, and what the protocol bridge holds now (2025-era clients' sessions and the
//! calls waiting for their answers; sessions with 2025-era servers and their paused calls),
//! with what it has done (counts by outcome). Read from the config and the bridge's metrics.

use prometheus::proto::MetricFamily;
use serde_json::{json, Value};

use super::snapshot::sum_by;
use crate::config::pools::PoolLegacyClients;
use crate::gateway::journey::state::Gateway;

/// Counts of the counter family `name` by its label `by`.
fn by_label(all: &[MetricFamily], name: &str, by: &str) -> Value {
    let counts = sum_by(all, name, |m| {
        let v = m.get_label().iter().find(|l| l.name() == by)?;
        Some(v.value().to_string())
    });
    json!(counts)
}

/// How an endpoint serves 2025-era clients: `pass` (through to the pool that serves both eras,
/// pinned), `bridge` (the gateway is the session) or `refuse`.
fn serves(gw: &Gateway, endpoint: &str) -> &'static str {
    use crate::gateway::journey::bridge::pass;
    match gw.config.legacy.bridges(endpoint) {
        false => "refuse",
        true if pass::pool_of(gw, endpoint).is_some() => "pass",
        true => "bridge",
    }
}

/// The eras section of the snapshot.
pub(super) fn eras(gw: &Gateway, all: &[MetricFamily]) -> Value {
    let pools: Vec<Value> = gw
        .pools
        .iter()
        .map(|p| {
            let c = gw.config.pools.get(&p.name);
            let era = c.map(|c| c.era).unwrap_or_default();
            let pass = c.is_some_and(|c| c.legacy_clients == PoolLegacyClients::Pass);
            let found = gw.era_findings.get().and_then(|f| {
                f.iter().find(|(pool, _)| *pool == p.name).map(|(_, f)| f.as_str())
            });
            json!({"pool": p.name, "era": era.legacy_version().unwrap_or(crate::mcp::PROTOCOL_VERSION),
                "legacy_clients": if pass { "pass" } else { "bridge" },
                "checked": gw.era_findings.get().is_some(), "found": found})
        })
        .collect();
    let endpoints: Vec<Value> = gw
        .config
        .endpoints()
        .into_iter()
        .map(|e| json!({"endpoint": e, "legacy_clients": serves(gw, e)}))
        .collect();
    let b = &gw.metrics.bridge;
    json!({
        "pools": pools,
        "endpoints": endpoints,
        "legacy_clients": {
            "sessions_opened": by_label(all, "mcp_edge_legacy_sessions_total", "version"),
            "calls_waiting": b.waiting.get(),
            "streams_open": b.streams.get(),
            "flows": by_label(all, "mcp_edge_legacy_flows_total", "outcome"),
            "answers": by_label(all, "mcp_edge_legacy_answers_total", "path"),
            "passed": by_label(all, "mcp_edge_legacy_passed_total", "kind"),
        },
        "legacy_servers": {
            "sessions_open": b.server_sessions_open.get(),
            "sessions": by_label(all, "mcp_edge_legacy_server_sessions_total", "result"),
            "calls_paused": b.paused.get(),
            "paused_calls": by_label(all, "mcp_edge_legacy_paused_calls_total", "outcome"),
        },
    })
}
