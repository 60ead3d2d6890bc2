//! Each pool's era, checked against its instances when a gateway generation starts (at start
//! and after each reload), so a pool that does not speak what its config says is reported then,
//! not at its first call. The first instance of every pool that declares a 2025-era `era:` or
//! `legacy_clients: pass` is asked both ways, with the pool's own credential: `server/discover`
//! (2026-07-28) and a 2025-era `initialize` (its session, if it opens one, is closed again at
//! once). A 2026 pool is asked `server/discover` by its health checks, which report an instance
//! that fails it. Findings are logged as warnings and shown on the console's Pools page:
//!
//! - a pool with a 2025-era `era:` whose instance answers only `server/discover`;
//! - an instance that answers neither (an HTTP answer, but no MCP server at the endpoint path);
//! - `legacy_clients: pass` on a pool whose instance keeps no 2025-era sessions (it answers
//!   `initialize` without a session id, so it cannot ask a 2025-era client mid-call), or does
//!   not answer `initialize` at all.
//!
//! An instance that cannot be reached, or that wants a token the pool has no credential for,
//! says nothing about its era: health checks and the first calls report those.

use std::time::Duration;

use crate::config::pools::PoolLegacyClients;
use crate::gateway::journey::legacy_up;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::health;

/// How long each question may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Ask the first instance of every pool that needs it, concurrently; log and keep what does not
/// fit the config.
pub(crate) async fn check(gw: &Gateway) {
    let asked = (0..gw.pools.len())
        .filter(|p| asks(gw, *p))
        .map(|p| async move { (p, finding(gw, p).await) });
    let mut found = Vec::new();
    for (p, f) in futures::future::join_all(asked).await {
        if let Some(f) = f {
            let pool = &gw.pools[p].name;
            tracing::warn!("pool {pool}: {f}");
            found.push((pool.clone(), f));
        }
    }
    let _ = gw.era_findings.set(found);
}

/// Whether pool `p` is asked: it declares something of the 2025 era.
fn asks(gw: &Gateway, p: usize) -> bool {
    let pool = &gw.pools[p];
    let Some(cfg) = gw.config.pools.get(&pool.name) else {
        return false;
    };
    let legacy =
        cfg.era.legacy_version().is_some() || cfg.legacy_clients == PoolLegacyClients::Pass;
    !pool.instances.is_empty() && legacy
}

/// What pool `p`'s first instance says against its config (`None`: it fits, or it cannot tell).
async fn finding(gw: &Gateway, p: usize) -> Option<String> {
    let pool = &gw.pools[p];
    let cfg = gw.config.pools.get(&pool.name)?;
    let credential = gw.credentials.for_gateway(p).await.ok()?;
    let inst = &pool.instances[0];
    let at = (inst.addr, inst.name.as_str());
    let endpoint = gw.config.endpoint.as_str();
    let discover =
        health::discover_status(&gw.peers[p], at, endpoint, credential.as_ref(), TIMEOUT).await;
    let declared = cfg.era.legacy_version();
    let version = declared.unwrap_or(crate::mcp::legacy::LATEST);
    let carry: Vec<(String, String)> = credential
        .iter()
        .filter_map(|(k, v)| Some((k.to_string(), v.to_str().ok()?.to_owned())))
        .collect();
    let (up, _) = legacy_up::gateway_side(gw, (p, 0), version, (&carry, None));
    let initialize = tokio::time::timeout(TIMEOUT, up.answers_initialize())
        .await
        .unwrap_or_else(|_| Err("no answer".into()));
    let pass = cfg.legacy_clients == PoolLegacyClients::Pass;
    judge(
        &inst.name,
        (declared, pass),
        discover,
        initialize.ok(),
        endpoint,
    )
}

/// The finding for what an instance answered: `discover`, the HTTP status of its
/// `server/discover` (`None`: unreachable); `sessions`, whether it answered `initialize`
/// (`Some`) and with a session id (`Some(true)`).
fn judge(
    instance: &str,
    (declared, pass): (Option<&str>, bool),
    discover: Option<u16>,
    sessions: Option<bool>,
    endpoint: &str,
) -> Option<String> {
    let modern = discover == Some(200);
    let answered = |s: Option<u16>| s.is_some_and(|s| s != 401 && s != 403);
    let era = match (declared, modern, sessions) {
        (None, false, Some(_)) => Some(format!(
            "instance {instance} answers a 2025-era initialize but not server/discover: it is a 2025-era server; add `era: 2025-11-25` (or the revision it speaks) to the pool"
        )),
        (Some(v), true, None) => Some(format!(
            "the pool says `era: {v}`, but instance {instance} serves 2026-07-28 (server/discover) and answers no 2025-era initialize; remove `era:`"
        )),
        (Some(v), _, Some(false)) => Some(format!(
            "the pool says `era: {v}`, but instance {instance} answers initialize without a session id; the gateway needs the server's sessions to carry its mid-call questions"
        )),
        (_, false, None) if answered(discover) => Some(format!(
            "instance {instance} answers neither server/discover (HTTP {}) nor a 2025-era initialize: is its MCP endpoint at {endpoint}?",
            discover.unwrap_or_default()
        )),
        _ => None,
    };
    let passing = match (pass, sessions) {
        (true, Some(false)) => Some(format!(
            "`legacy_clients: pass`, but instance {instance} keeps no 2025-era sessions (initialize answered without a session id): it cannot ask a 2025-era client mid-call; the bridge (the default) serves them better"
        )),
        (true, None) if modern => Some(format!(
            "`legacy_clients: pass`, but instance {instance} answers no 2025-era initialize: 2025-era clients passed to it will fail; remove it (the bridge serves them)"
        )),
        _ => None,
    };
    match (era, passing) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::judge;

    fn said(declared: Option<&str>, pass: bool, d: Option<u16>, s: Option<bool>) -> String {
        judge("i:1", (declared, pass), d, s, "/mcp").unwrap_or_default()
    }

    #[test]
    fn a_pool_that_does_not_speak_its_declared_era_is_named_with_the_fix() {
        // Fits: a 2026 server; a 2025-era one declared so; both eras with sessions, passed.
        assert_eq!(said(None, false, Some(200), None), "");
        assert_eq!(said(Some("2025-11-25"), false, Some(400), Some(true)), "");
        assert_eq!(said(None, true, Some(200), Some(true)), "");
        // Cannot tell: unreachable, or a token is wanted.
        assert_eq!(said(None, false, None, None), "");
        assert_eq!(said(Some("2025-11-25"), false, Some(401), None), "");
        assert!(said(None, false, Some(404), Some(true)).contains("add `era: 2025-11-25`"));
        assert!(said(Some("2025-06-18"), false, Some(200), None).contains("remove `era:`"));
        assert!(said(Some("2025-11-25"), false, None, Some(false)).contains("without a session id"));
        assert!(said(None, false, Some(404), None)
            .contains("answers neither server/discover (HTTP 404)"));
        assert!(said(None, true, Some(200), Some(false)).contains("keeps no 2025-era sessions"));
        assert!(said(None, true, Some(200), None).contains("answers no 2025-era initialize"));
    }
}
