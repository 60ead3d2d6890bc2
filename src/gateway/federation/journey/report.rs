//! The admin listener's `GET /catalog`: each federated pool's catalog (state, age, the last
//! refresh error, its names) and each endpoint's view (what it exposes, its collisions).

use serde_json::{json, Map, Value};
use std::time::Instant;

use crate::gateway::federation::stages::catalog::Kind;
use crate::gateway::journey::state::Gateway;

/// The report, as JSON text.
pub(crate) fn catalog_json(gw: &Gateway) -> String {
    let Some(fed) = gw.federation.as_ref() else {
        return "{\"federation\":null,\"why\":\"no federation: section in the config\"}\n".into();
    };
    let now = Instant::now();
    let keep = fed.catalog.keep_stale;
    let mut pools = Map::new();
    for p in fed.pools() {
        let name = &gw.table.pools[p];
        let cat = gw.catalogs.get(name);
        let mut entry = Map::new();
        entry.insert("state".into(), json!(cat.state(now, keep).label()));
        entry.insert(
            "loaded_ms_ago".into(),
            json!(cat
                .loaded
                .map(|at| now.saturating_duration_since(at).as_millis() as u64)),
        );
        entry.insert(
            "error".into(),
            json!(cat.failing.as_ref().map(|(why, _)| why)),
        );
        for k in Kind::ALL {
            let names: Option<Vec<&str>> = cat.list(k).map(|l| {
                l.items
                    .iter()
                    .filter_map(|i| i.get(k.field()).and_then(Value::as_str))
                    .collect()
            });
            let hints = cat.list(k).map(|l| json!({"ttlMs": l.ttl.as_millis() as u64, "cacheScope": if l.private { "private" } else { "public" }}));
            entry.insert(k.member().into(), json!({"names": names, "hints": hints}));
        }
        pools.insert(name.clone(), Value::Object(entry));
    }
    let endpoints: Vec<Value> = fed
        .endpoints
        .iter()
        .map(|ep| {
            let view = ep.view(&gw.catalogs, &gw.table.pools, keep);
            let [tools, prompts, resources, templates] = view.counts();
            json!({
                "path": ep.config.path,
                "pools": ep.config.pools,
                "collisions_policy": ep.config.collisions.label(),
                "routes": {"tools": tools, "prompts": prompts, "resources": resources, "resourceTemplates": templates},
                "collisions": view.collisions,
            })
        })
        .collect();
    let mut out = serde_json::to_string_pretty(&json!({"pools": pools, "endpoints": endpoints}))
        .expect("JSON serializes");
    out.push('\n');
    out
}
