//! The sessions the gateway holds with 2025-era servers, kept tidy in the background: one left
//! unused for `legacy.server_session_idle` is closed (`DELETE`) within a few seconds of going
//! idle, not only when a new session needs its place; and every one is closed when the gateway
//! stops, so the servers do not keep state for sessions nobody will use again. Best effort and
//! bounded: a server that does not answer a `DELETE` is not waited for.

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::sync::Arc;
use std::time::Duration;

use super::{era_of, gateway_side};
use crate::gateway::journey::live::Live;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::bridge::servers::SessionKey;

/// How long the `DELETE`s of one sweep, or of the gateway's end, may take together.
const DELETES_WITHIN: Duration = Duration::from_secs(2);

/// The background service.
pub(crate) struct Upkeep {
    pub live: Arc<Live>,
}

#[async_trait]
impl BackgroundService for Upkeep {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
            let gw = self.live.load();
            let every = (gw.config.legacy.server_session_idle / 4)
                .clamp(Duration::from_millis(250), Duration::from_secs(15));
            tokio::select! {
                _ = shutdown.changed() => {
                    close(&gw, gw.bridge.servers.drain()).await;
                    return;
                }
                _ = tokio::time::sleep(every) => close(&gw, gw.bridge.servers.idle()).await,
            }
        }
    }
}

/// `DELETE` each session of `gone` at its instance, with the pool's own credential (a caller's
/// token is not kept); at most [`DELETES_WITHIN`] for all of them.
async fn close(gw: &Gateway, gone: Vec<(SessionKey, String)>) {
    if gone.is_empty() {
        return;
    }
    let deletes = gone.into_iter().filter_map(|(key, id)| {
        let p = gw.pools.iter().position(|p| p.name == key.pool)?;
        let i = gw.pools[p]
            .instances
            .iter()
            .position(|i| i.addr == key.addr)?;
        let version = era_of(gw, p)?;
        Some(async move {
            let credential = gw.credentials.for_gateway(p).await.ok().flatten();
            let carry: Vec<(String, String)> = credential
                .iter()
                .filter_map(|(k, v)| Some((k.to_string(), v.to_str().ok()?.to_owned())))
                .collect();
            let (up, _) = gateway_side(gw, (p, i), version, (&carry, None));
            up.delete(&id).await;
        })
    });
    let _ = tokio::time::timeout(DELETES_WITHIN, futures::future::join_all(deletes)).await;
    let open = gw.bridge.servers.len() as i64;
    gw.metrics.bridge.server_sessions_open.set(open);
}
