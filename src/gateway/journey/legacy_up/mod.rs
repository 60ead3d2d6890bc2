//! The gateway as a 2025-era client of a legacy pool (a pool with `era: 2025-...`): its sessions
//! with the instances ([`session`]: one per instance and caller, opened, reopened, closed), the
//! wire ([`wire`]), and the translations of what comes back into the 2026 shape. Used by the
//! forward step of such a pool (`super::bridge::back`) and by the federation catalog, which
//! reads a legacy pool's lists over the same sessions ([`catalog_call`]); idle sessions and,
//! at the end, all of them are closed in the background ([`upkeep`]). Never answers a client
//! itself (no import of the steps that do).

use serde_json::{json, Map, Value};

use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::bridge::servers::SessionKey;
use crate::mcp::{caching, meta, methods, result_type, PROTOCOL_VERSION};

pub(crate) mod session;
pub(crate) mod upkeep;
pub(crate) mod wire;

use wire::Up;

/// The 2025-era revision of pool `p`, when it is a legacy pool.
pub(crate) fn era_of(gw: &Gateway, p: usize) -> Option<&'static str> {
    gw.config.pools.get(&gw.pools[p].name)?.era.legacy_version()
}

/// The instance of pool `p` at `addr` as the pool lists it (TLS's server name), and the pool's
/// way to it.
pub(crate) fn way_to(
    gw: &Gateway,
    p: usize,
    addr: std::net::SocketAddr,
) -> (String, crate::gateway::transport::upstream_tls::PoolPeers) {
    let name = gw.pools[p]
        .instances
        .iter()
        .find(|i| i.addr == addr)
        .map_or_else(|| addr.to_string(), |i| i.name.clone());
    (name, gw.peers[p].clone())
}

/// The server's final response in the 2026 shape, with the client's id set by the caller.
pub(crate) fn final_of(method: &str, mut m: Value) -> Value {
    if let Some(Value::Object(r)) = m.get_mut("result") {
        r.entry("resultType")
            .or_insert(json!(result_type::COMPLETE));
        if caching::is_cacheable(method) {
            r.entry("ttlMs").or_insert(json!(0));
            r.entry("cacheScope").or_insert(json!("private"));
        }
    }
    m
}

/// `server/discover` from the session's `initialize` result.
pub(crate) fn discover_result(init: &Value) -> Value {
    let mut meta = Map::new();
    if let Some(i) = init.get("serverInfo") {
        meta.insert(meta::SERVER_INFO.into(), i.clone());
    }
    let mut r = json!({"resultType": result_type::COMPLETE, "supportedVersions": [PROTOCOL_VERSION],
        "capabilities": init.get("capabilities").cloned().unwrap_or(json!({})), "ttlMs": 0, "cacheScope": "private", "_meta": meta});
    if let Some(i) = init.get("instructions") {
        r["instructions"] = i.clone();
    }
    json!({"result": r})
}

/// How the gateway's own requests (the catalog's, a federated listen stream's) reach instance
/// `i` of legacy pool `p` with `headers` (the pool's credential or the caller's token), and the
/// session they go over: the caller's (`subject`, the one `auth` verified) as its calls' go
/// over, else the one those headers name.
pub(crate) fn gateway_side(
    gw: &Gateway,
    (p, i): (usize, usize),
    version: &'static str,
    (headers, subject): (&[(String, String)], Option<&str>),
) -> (Up, SessionKey) {
    let t = &gw.config.timeouts;
    let carry: Vec<(String, String)> = headers
        .iter()
        .filter(|(k, _)| !k.to_ascii_lowercase().starts_with("mcp-"))
        .cloned()
        .collect();
    let auth = carry
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| v.as_bytes());
    let caller = crate::gateway::stages::bridge::session::server_side_caller(subject, auth);
    let inst = &gw.pools[p].instances[i];
    let addr = inst.addr;
    let up = Up {
        addr,
        instance: inst.name.clone(),
        peers: gw.peers[p].clone(),
        path: gw.config.endpoint.clone(),
        version,
        carry,
        connect: t.connect,
        read: t.upstream_read,
        idle: t.upstream_idle,
        counted: gw.metrics.bridge.connections.clone(),
    };
    let key = SessionKey {
        pool: gw.pools[p].name.clone(),
        addr,
        caller,
    };
    (up, key)
}

/// The federation catalog's request to instance `i` of legacy pool `p` (`server/discover` or a
/// page of a list), over the session of the caller (its headers and verified subject): the result object in
/// the 2026 shape, so a 2025-era pool joins a federated endpoint like any other.
pub(crate) async fn catalog_call(
    gw: &Gateway,
    (p, i): (usize, usize),
    version: &'static str,
    (method, cursor): (&str, Option<&str>),
    caller: (&[(String, String)], Option<&str>),
) -> Result<Map<String, Value>, String> {
    let (up, key) = gateway_side(gw, (p, i), version, caller);
    let addr = up.addr;
    let bridge = &gw.bridge;
    let message = if method == methods::DISCOVER {
        let s = session::get(bridge, &up, &key, gw)
            .await
            .map_err(|r| r.message.to_string())?;
        discover_result(&s.init)
    } else {
        let params = cursor.map_or_else(|| json!({}), |c| json!({"cursor": c}));
        // Each in-flight request of a session needs its own id: a server routes answers by it.
        let id = format!("mcp-edge-catalog-{:x}", rand::random::<u64>());
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (mut m, _) = session::send(bridge, &up, &key, gw, body.to_string().as_bytes())
            .await
            .map_err(|r| r.message.to_string())?;
        loop {
            match m.next().await? {
                Some(v) if v.get("result").is_some() || v.get("error").is_some() => {
                    break final_of(method, v)
                }
                Some(_) => continue,
                None => {
                    return Err(format!(
                        "{addr} {method}: HTTP {} without a response",
                        m.status
                    ))
                }
            }
        }
    };
    if let Some(e) = message.get("error") {
        return Err(format!("{addr} {method}: {e}"));
    }
    match message.get("result") {
        Some(Value::Object(r)) => Ok(r.clone()),
        _ => Err(format!("{addr} {method}: the result is not an object")),
    }
}

/// The next notification a 2026 listen stream carries from a legacy session's standalone stream
/// (`rx`): the kinds the client asked for (`wants`), under its subscription id (`sub`), in the
/// 2026 shape; `None` when the session's stream ended. Notifications missed while the reader
/// lagged are skipped. Loses nothing when dropped unfinished (a `select!` arm).
pub(crate) async fn next_listen(
    rx: &mut tokio::sync::broadcast::Receiver<Value>,
    wants: [bool; 3],
    sub: &Value,
) -> Option<Value> {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match rx.recv().await {
            Ok(note) => {
                if let Some(m) = crate::mcp::legacy::to_listen(&note, wants, sub) {
                    return Some(m);
                }
            }
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return None,
        }
    }
}
