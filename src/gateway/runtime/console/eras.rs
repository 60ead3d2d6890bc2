//! The console's eras: which protocol revision each pool speaks and which clients each
//! endpoint serves, and what the protocol bridge holds now (2025-era clients' sessions and the
//! calls waiting for their answers; sessions with 2025-era servers and their paused calls),
//! with what it has done (counts by outcome). Read from the config and the bridge's metrics.

use prometheus::proto::MetricFamily;
use serde_json::{json, Value};

use super::snapshot::sum_by;
use crate::gateway::journey::state::Gateway;

/// Counts of the counter family `name` by its label `by`.
fn by_label(all: &[MetricFamily], name: &str, by: &str) -> Value {
    let counts = sum_by(all, name, |m| {
        let v = m.get_label().iter().find(|l| l.name() == by)?;
        Some(v.value().to_string())
    });
    json!(counts)
}

/// The eras section of the snapshot.
pub(super) fn eras(gw: &Gateway, all: &[MetricFamily]) -> Value {
    let pools: Vec<Value> = gw
        .pools
        .iter()
        .map(|p| {
            let era = gw.config.pools.get(&p.name).map(|c| c.era).unwrap_or_default();
            json!({"pool": p.name, "era": era.legacy_version().unwrap_or(crate::mcp::PROTOCOL_VERSION)})
        })
        .collect();
    let endpoints: Vec<Value> = gw
        .config
        .endpoints()
        .into_iter()
        .map(|e| json!({"endpoint": e, "legacy_clients": gw.config.legacy.bridges(e)}))
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
        },
        "legacy_servers": {
            "sessions_open": b.server_sessions_open.get(),
            "sessions": by_label(all, "mcp_edge_legacy_server_sessions_total", "result"),
            "calls_paused": b.paused.get(),
            "paused_calls": by_label(all, "mcp_edge_legacy_paused_calls_total", "outcome"),
        },
    })
}
