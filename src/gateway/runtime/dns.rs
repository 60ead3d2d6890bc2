//! DNS refresh: instance host names are resolved again every `dns_refresh`, off the runtime
//! (a blocking thread), and the gateway is rebuilt when an address changed, exactly as a reload
//! would (state carries over; an instance whose address changed starts with fresh health).
//! A name that stops resolving keeps its last address (and its health checks decide), so a
//! DNS outage never empties a pool.

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use crate::gateway::journey::state::Gateway;

use crate::gateway::journey::live::Live;

/// The pools whose instances resolve to other addresses now: `(pool, instance, old, new)`.
pub fn changes(gw: &Gateway) -> Vec<(String, String, SocketAddr, SocketAddr)> {
    let mut out = Vec::new();
    for pool in &gw.pools {
        for inst in &pool.instances {
            let now = inst.name.to_socket_addrs().ok().and_then(|mut a| a.next());
            if let Some(now) = now.filter(|a| *a != inst.addr) {
                out.push((pool.name.clone(), inst.name.clone(), inst.addr, now));
            }
        }
    }
    out
}

/// The background service that refreshes resolutions.
pub(crate) struct DnsRefresh {
    pub live: Arc<Live>,
}

#[async_trait]
impl BackgroundService for DnsRefresh {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
            let every = self.live.load().config.dns_refresh;
            let wait = if every.is_zero() {
                Duration::from_secs(1)
            } else {
                every
            };
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            if every.is_zero() {
                continue;
            }
            let live = self.live.clone();
            let _ = tokio::task::spawn_blocking(move || refresh(&live)).await;
        }
    }
}

/// Resolve again and rebuild the gateway if an address changed.
pub fn refresh(live: &Live) {
    let gw = live.load();
    let changed = changes(&gw);
    if changed.is_empty() {
        return;
    }
    for (pool, inst, old, new) in &changed {
        tracing::info!("pool {pool}: instance {inst} now resolves to {new} (was {old})");
    }
    if let Err(e) = live.replace(gw.config.clone()) {
        tracing::error!(
            "DNS refresh: could not rebuild the gateway, keeping the old addresses: {e:#}"
        );
    }
}
