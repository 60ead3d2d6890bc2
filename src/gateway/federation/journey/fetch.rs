//! The gateway's own requests to a federated pool: one JSON-RPC request (`server/discover` or a
//! page of a list) to one usable instance, over the pool's TLS settings, answered in JSON or
//! SSE; every page of a list; a whole catalog.

use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

use crate::gateway::federation::stages::catalog::{Discover, Kind, List, PoolCatalog};
use crate::gateway::journey::state::Gateway;
use crate::gateway::transport::upstream_h1::oneshot::mcp_post;
use crate::mcp::{caching, meta, methods, sse, PROTOCOL_VERSION};

/// The largest answer read from one request.
const MAX_ANSWER: usize = 8 * 1024 * 1024;

/// The request of `method` (with `cursor`) the gateway sends, as a whole HTTP/1.1 request.
fn request(
    gw: &Gateway,
    host: &str,
    method: &str,
    cursor: Option<&str>,
    headers: &[(String, String)],
) -> Vec<u8> {
    let mut params = Map::new();
    if let Some(c) = cursor {
        params.insert("cursor".into(), Value::String(c.into()));
    }
    params.insert(
        "_meta".into(),
        json!({ meta::PROTOCOL_VERSION: PROTOCOL_VERSION, meta::CLIENT_CAPABILITIES: {} }),
    );
    let body =
        json!({"jsonrpc": "2.0", "id": "mcp-edge-catalog", "method": method, "params": params});
    let body = serde_json::to_vec(&body).expect("a JSON value serializes");
    http_request(gw, host, method, &body, headers)
}

/// A POST of `body` (a JSON-RPC `method` request) to an instance at the gateway's endpoint
/// path, with `headers` (the caller's, for a pool).
pub(crate) fn http_request(
    gw: &Gateway,
    host: &str,
    method: &str,
    body: &[u8],
    headers: &[(String, String)],
) -> Vec<u8> {
    let mut extra: Vec<(&str, &str)> = vec![("User-Agent", "mcp-edge-federation")];
    extra.extend(headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    mcp_post((&gw.config.endpoint, host), method, &extra, body, false)
}

/// On whose behalf the gateway asks a pool (nobody, for the catalog refresh): the caller's
/// credentials as the pool would receive them on a forwarded call — the auth stage's edits for
/// that pool applied, so a token goes only to the pools marked as its audience and the
/// identity headers are the gateway's — and the pool's own credential (`credentials:`) in
/// place of the caller's token: exchanged for the caller's, or the gateway's own for nobody.
#[derive(Clone, Default)]
pub(crate) struct Caller {
    pub authorization: Option<http::HeaderValue>,
    pub identity: Option<std::sync::Arc<crate::auth::Identity>>,
}

impl Caller {
    /// The headers for a request to pool `p`; `Err` when the pool's credential could not be
    /// obtained.
    pub(crate) async fn headers_for(
        &self,
        gw: &Gateway,
        p: usize,
    ) -> Result<Vec<(String, String)>, String> {
        let mut out = self.auth_headers(gw, p);
        if gw.credentials.pool(p).is_none() {
            return Ok(out);
        }
        out.retain(|(k, _)| !k.eq_ignore_ascii_case("authorization"));
        let caller = match (&self.identity, &self.authorization) {
            (Some(_), Some(v)) => v.to_str().ok().and_then(|v| {
                let (scheme, token) = v.split_once(' ')?;
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then(|| token.trim().to_string())
            }),
            _ => None,
        };
        let got = match &caller {
            Some(token) => gw.credentials.for_request(p, Some(token)).await,
            None => gw.credentials.for_gateway(p).await,
        };
        let pool = &gw.table.pools[p];
        let got = got.map_err(|f| format!("pool {pool}: no credential: {}", f.describe()))?;
        if let Some((h, v)) = got {
            out.retain(|(k, _)| !h.as_str().eq_ignore_ascii_case(k));
            let v = v
                .to_str()
                .map_err(|_| format!("pool {pool}: the credential is not text"))?;
            out.push((h.to_string(), v.to_string()));
        }
        Ok(out)
    }

    fn auth_headers(&self, gw: &Gateway, p: usize) -> Vec<(String, String)> {
        use crate::auth::HeaderEdit;
        let text = |v: &http::HeaderValue| v.to_str().ok().map(String::from);
        let auth = self.authorization.as_ref().and_then(text);
        let mut out: Vec<(String, String)> = auth
            .map(|a| ("authorization".into(), a))
            .into_iter()
            .collect();
        let Some(rules) = gw.auth.as_ref() else {
            return out;
        };
        for edit in rules.upstream_edits(self.identity.as_deref(), &gw.table.pools[p]) {
            match edit {
                HeaderEdit::Remove(h) => out.retain(|(k, _)| !h.as_str().eq_ignore_ascii_case(k)),
                HeaderEdit::Set(h, v) => out.extend(text(&v).map(|v| (h.to_string(), v))),
            }
        }
        out
    }
}

/// The usable instances of pool `p`, starting at a different one each time.
pub(crate) fn instances(gw: &Gateway, p: usize) -> Vec<usize> {
    let pool = &gw.pools[p];
    let mut usable: Vec<usize> = (0..pool.instances.len())
        .filter(|i| pool.health.usable(*i))
        .collect();
    if !usable.is_empty() {
        let start = next_start() as usize % usable.len();
        usable.rotate_left(start);
    }
    usable
}

/// The JSON-RPC response in an answer body ([`sse::response_of`]: JSON, or the last response
/// event of an SSE stream), parsed.
fn response_of(content_type: &[u8], body: &[u8]) -> Result<Value, String> {
    let payload = sse::response_of(Some(content_type), body)
        .ok_or("the event stream carried no JSON-RPC response")?;
    serde_json::from_slice(&payload).map_err(|e| format!("the answer is not JSON: {e}"))
}

/// Send `method` to a usable instance of pool `p` (another one if the first cannot be reached)
/// and return its result object. `auth`: the caller's `Authorization`, for lists fetched on
/// a caller's behalf.
pub(crate) async fn call(
    gw: &Gateway,
    p: usize,
    method: &str,
    cursor: Option<&str>,
    caller: &Caller,
) -> Result<Map<String, Value>, String> {
    let pool = &gw.pools[p];
    let timeout = gw.federation_catalog().timeout;
    let mut last = format!("pool {} has no usable instance", pool.name);
    let headers = caller.headers_for(gw, p).await?;
    for i in instances(gw, p).into_iter().take(2) {
        let inst = &pool.instances[i];
        if let Some(version) = crate::gateway::journey::legacy_up::era_of(gw, p) {
            // A 2025-era pool: over the gateway's session with the instance.
            let call = crate::gateway::journey::legacy_up::catalog_call(
                gw,
                (p, i),
                version,
                (method, cursor),
                (
                    &headers,
                    caller.identity.as_deref().map(|id| id.subject.as_str()),
                ),
            );
            match tokio::time::timeout(timeout, call).await {
                Ok(r @ Ok(_)) => return r,
                Ok(Err(e)) => last = e,
                Err(_) => last = format!("{}: no answer within {timeout:?}", inst.name),
            }
            continue;
        }
        let req = request(gw, &inst.name, method, cursor, &headers);
        let exchange = gw.peers[p].exchange(inst.addr, &inst.name, &req, MAX_ANSWER);
        let (head, body) = match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                last = e;
                continue;
            }
            Err(_) => {
                last = format!("{}: no answer within {timeout:?}", inst.name);
                continue;
            }
        };
        let ct = head
            .headers
            .get(http::header::CONTENT_TYPE)
            .map_or(&b""[..], |v| v.as_bytes());
        let answer = response_of(ct, &body)
            .map_err(|e| format!("{} {method}: HTTP {}: {e}", inst.name, head.status.as_u16()))?;
        if let Some(err) = answer.get("error") {
            return Err(format!("{} {method}: {err}", inst.name));
        }
        return match answer.get("result") {
            Some(Value::Object(r)) => Ok(r.clone()),
            _ => Err(format!(
                "{} {method}: the result is not an object",
                inst.name
            )),
        };
    }
    Err(last)
}

/// Spreads the gateway's own requests over a pool's instances.
fn next_start() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// `ttlMs` and `cacheScope` of one result (a missing or negative `ttlMs` counts as 0).
fn hints(result: &Map<String, Value>) -> (Duration, bool) {
    let ttl = result
        .get(caching::TTL_MS)
        .and_then(Value::as_i64)
        .unwrap_or(0)
        .max(0) as u64;
    let private =
        result.get(caching::CACHE_SCOPE).and_then(Value::as_str) != Some(caching::SCOPE_PUBLIC);
    (Duration::from_millis(ttl), private)
}

/// Every page of pool `p`'s list of `kind`.
pub(crate) async fn list(
    gw: &Gateway,
    p: usize,
    kind: Kind,
    caller: &Caller,
) -> Result<List, String> {
    let at = Instant::now();
    let max_pages = gw.federation_catalog().max_pages;
    let (mut items, mut ttl, mut private) = (Vec::new(), Duration::MAX, false);
    let mut cursor: Option<String> = None;
    for _ in 0..max_pages {
        let mut page = call(gw, p, kind.method(), cursor.as_deref(), caller).await?;
        let (t, pr) = hints(&page);
        ttl = ttl.min(t);
        private |= pr;
        match page.remove(kind.member()) {
            Some(Value::Array(a)) => items.extend(a),
            _ => {
                return Err(format!(
                    "pool {}: the {} result has no {} array",
                    gw.pools[p].name,
                    kind.method(),
                    kind.member()
                ))
            }
        }
        cursor = match page.get(caching::NEXT_CURSOR) {
            Some(Value::String(c)) if !c.is_empty() => Some(c.clone()),
            _ => {
                return Ok(List {
                    items: items.into(),
                    ttl,
                    private,
                    at,
                })
            }
        };
    }
    Err(format!(
        "pool {}: {} has more than {max_pages} pages (federation.catalog.max_pages)",
        gw.pools[p].name,
        kind.method()
    ))
}

/// Pool `p`'s `server/discover` result.
pub(crate) async fn discover(gw: &Gateway, p: usize, caller: &Caller) -> Result<Discover, String> {
    let at = Instant::now();
    let r = call(gw, p, methods::DISCOVER, None, caller).await?;
    let (ttl, private) = hints(&r);
    let capabilities = match r.get("capabilities") {
        Some(Value::Object(c)) => c.clone(),
        _ => {
            return Err(format!(
                "pool {}: server/discover has no capabilities object",
                gw.pools[p].name
            ))
        }
    };
    let versions = crate::mcp::discover::versions_in(&r);
    let instructions = r
        .get("instructions")
        .and_then(Value::as_str)
        .map(String::from);
    // The result as the merged answer reads it, kept as the one item of its freshness.
    let item = json!({"supportedVersions": versions, "capabilities": capabilities, "instructions": instructions});
    Ok(Discover {
        capabilities,
        freshness: List {
            items: vec![item].into(),
            ttl,
            private,
            at,
        },
    })
}

/// A whole catalog: `server/discover`, then each list its capabilities announce, concurrently.
pub(crate) async fn catalog(
    gw: &Gateway,
    p: usize,
    previous: &PoolCatalog,
) -> Result<PoolCatalog, String> {
    let d = discover(gw, p, &Caller::default()).await?;
    let wanted: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| d.capabilities.contains_key(k.capability()))
        .collect();
    let nobody = Caller::default();
    let fetched = futures::future::join_all(wanted.iter().map(|k| list(gw, p, *k, &nobody))).await;
    let mut cat = previous.clone();
    cat.discover = Some(d);
    cat.loaded = Some(Instant::now());
    cat.failing = None;
    for k in Kind::ALL {
        cat.set_list(k, None);
    }
    for (k, got) in wanted.into_iter().zip(fetched) {
        // A server with resources but no templates may refuse templates/list: an empty list.
        match got {
            Ok(l) => cat.set_list(k, Some(l)),
            Err(_) if k == Kind::Templates => {}
            Err(e) => return Err(e),
        }
    }
    Ok(cat)
}
