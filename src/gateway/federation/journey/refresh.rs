//! Keeping the catalogs current: a background loop that fetches each federated pool's catalog
//! when it is due — when its shortest list's `ttlMs` runs out (within `catalog.refresh_floor`
//! and `refresh_ceiling`), at once after a reload or a `notifications/*/list_changed` from the
//! pool — and keeps the last one, marked stale, when the pool cannot be reached. Pools that pin
//! their definitions are kept current the same way, federated or not.

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::pins::PinPolicy;
use crate::gateway::federation::stages::catalog::{Kind, List, State};
use crate::gateway::journey::live::Live;
use crate::gateway::journey::state::Gateway;

/// The background service.
pub(crate) struct CatalogRefresh {
    pub live: Arc<Live>,
}

#[async_trait]
impl BackgroundService for CatalogRefresh {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
            let gw = self.live.load();
            refresh_due(&gw).await;
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
    }
}

/// Refresh every federated pool that is due, concurrently; and every pool that pins its
/// definitions (`pools.<name>.pins`), so the gateway knows what it serves before anyone lists it
/// (a call of a tool changed since the last list the gateway read is then held all the same).
pub(crate) async fn refresh_due(gw: &Gateway) {
    let mut pools = gw.federation.as_ref().map_or_else(Vec::new, |f| f.pools());
    let pinning = (0..gw.pin_policies.len()).filter(|p| gw.pin_policies[*p] != PinPolicy::Off);
    pools.extend(pinning);
    pools.sort_unstable();
    pools.dedup();
    let now = Instant::now();
    let due: Vec<usize> = pools
        .into_iter()
        .filter(|p| gw.catalogs.is_due(&gw.table.pools[*p], now))
        .collect();
    if due.is_empty() {
        return;
    }
    futures::future::join_all(due.into_iter().map(|p| refresh_pool(gw, p))).await;
    publish(gw);
}

/// Fetch pool `p`'s catalog once and store it (or mark the old one as failing).
pub(crate) async fn refresh_pool(gw: &Gateway, p: usize) {
    let name = &gw.table.pools[p];
    let c = gw.federation_catalog();
    let previous = gw.catalogs.get(name);
    match super::fetch::catalog(gw, p, &previous).await {
        Ok(cat) => {
            learn_params(gw, p, &cat);
            let next = cat.next_refresh(c.refresh_floor, c.refresh_ceiling);
            gw.catalogs.schedule(name, Instant::now() + next);
            gw.metrics
                .federation
                .refreshes
                .with_label_values(&[name, "ok"])
                .inc();
            gw.catalogs.put(name, cat);
        }
        Err(why) => {
            let mut cat = (*previous).clone();
            let since = cat.failing.as_ref().map_or(Instant::now(), |(_, s)| *s);
            if cat.failing.is_none() {
                tracing::warn!("federation: the catalog of pool {name} could not be refreshed (its last one, if any, stays in use for up to {:?}): {why}", c.keep_stale);
            }
            cat.failing = Some((why, since));
            // Try again soon, but not in a tight loop.
            gw.catalogs.schedule(name, Instant::now() + c.refresh_floor);
            gw.metrics
                .federation
                .refreshes
                .with_label_values(&[name, "failed"])
                .inc();
            gw.catalogs.put(name, cat);
        }
    }
}

/// Store a public list fetched for an answer: the routing catalog learns it too.
pub(crate) fn store_list(gw: &Gateway, p: usize, kind: Kind, list: List) {
    let name = &gw.table.pools[p];
    let mut cat = (*gw.catalogs.get(name)).clone();
    if cat.loaded.is_none() {
        return; // only a whole refresh makes a catalog known
    }
    cat.set_list(kind, Some(list));
    learn_params(gw, p, &cat);
    gw.catalogs.put(name, cat);
}

/// The `x-mcp-header` arguments of a pool's tools, for the `Mcp-Param-*` check of its calls
/// (the tools/list answers that teach it on other endpoints never pass through here).
fn learn_params(
    gw: &Gateway,
    p: usize,
    cat: &crate::gateway::federation::stages::catalog::PoolCatalog,
) {
    if let Some(tools) = cat.list(Kind::Tools) {
        let pool: Arc<str> = gw.table.pools[p].as_str().into();
        gw.cache.shared.params.learn_tools(&pool, &tools.items);
    }
    // Pinned definitions: what the pool serves now is judged before anyone lists or calls it.
    for kind in [Kind::Tools, Kind::Prompts] {
        if let Some(list) = cat.list(kind) {
            let (name, policy) = (&gw.table.pools[p], gw.pin_policies[p]);
            gw.pins.observe(name, policy, kind, &list.items);
        }
    }
}

/// The catalog gauges and the collision report: after a refresh, and before each scrape (a
/// stale catalog expires with time, not with an event).
pub(crate) fn publish(gw: &Gateway) {
    let Some(fed) = gw.federation.as_ref() else {
        return;
    };
    let m = &gw.metrics.federation;
    let keep = fed.catalog.keep_stale;
    let now = Instant::now();
    for p in fed.pools() {
        let name = &gw.table.pools[p];
        let cat = gw.catalogs.get(name);
        let state = cat.state(now, keep);
        for s in State::ALL {
            m.state
                .with_label_values(&[name, s.label()])
                .set(i64::from(s == state));
        }
        for k in Kind::ALL {
            let n = cat.list(k).map_or(0, |l| l.items.len());
            m.entries
                .with_label_values(&[name, k.label()])
                .set(n as i64);
        }
    }
    for ep in &fed.endpoints {
        let view = ep.view(&gw.catalogs, &gw.table.pools, keep);
        let before = m.collisions.with_label_values(&[&ep.config.path]).get();
        if before != view.collisions.len() as i64 {
            for c in &view.collisions {
                match &c.served_by {
                    Some(p) => tracing::warn!("federation: endpoint {}: {} {:?} is served by pools {}; pool {p} serves it (collisions: {})", ep.config.path, c.kind, c.name, c.pools.join(" and "), ep.config.collisions.label()),
                    None => tracing::warn!("federation: endpoint {}: {} {:?} is served by pools {}; refused, neither exposes it (collisions: refuse)", ep.config.path, c.kind, c.name, c.pools.join(" and ")),
                }
            }
        }
        m.collisions
            .with_label_values(&[&ep.config.path])
            .set(view.collisions.len() as i64);
    }
}
