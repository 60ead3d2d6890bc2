//! The gateway's own answers on a federated endpoint: the merged lists and `server/discover`.
//!
//! Each pool's part is taken from the catalog only while that pool said it is fresh for
//! anyone (`cacheScope: public`, `ttlMs` not run out); otherwise it is fetched again for this
//! answer, concurrently across pools, with the caller's credentials as a forwarded call would
//! carry them (`fetch::Caller`) — so federation never
//! serves what a server said must not be reused. A pool that cannot be reached contributes its
//! last known list (within `catalog.keep_stale`) or nothing; either way the answer then says
//! `ttlMs: 0` and names the pool in `_meta["io.mcp-edge/unavailable"]`, so no client keeps a
//! partial list.

use pingora::proxy::Session;
use pingora::Result;
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

use super::fetch;
use crate::gateway::federation::stages::catalog::{Discover, Kind, List, PoolCatalog};
use crate::gateway::federation::stages::cursor;
use crate::gateway::federation::stages::view::{self, Contribution};
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::answer::Verdict;
use crate::gateway::stages::route::RouteRef;
use crate::mcp::{caching, codes, meta, methods, result_type, Rejection, PROTOCOL_VERSION};

/// The versions a federated endpoint answers itself (its merged lists are in this revision's
/// form, whatever the servers behind it also speak).
const SERVER_POLICY: crate::mcp::VersionPolicy =
    crate::mcp::VersionPolicy::Exactly(&[PROTOCOL_VERSION]);

/// One pool's part of an answer.
struct Part {
    pool: usize,
    list: List,
    /// How much longer this part is fresh (0: fetched with `ttlMs: 0`, stale, or missing).
    remaining: Duration,
    /// The pool could not be asked: `list` is its last known one, or empty.
    unavailable: bool,
}

impl Part {
    fn of(pool: usize, list: List, remaining: Duration) -> Part {
        Part {
            pool,
            list,
            remaining,
            unavailable: false,
        }
    }
}

/// What the caller's request asks for (`params.cursor`), read from the checked body.
fn cursor_of(body: &[u8]) -> Result<Option<String>, Rejection> {
    #[derive(serde::Deserialize)]
    struct Req {
        #[serde(default)]
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(default)]
        cursor: Option<Value>,
    }
    let req: Req = serde_json::from_slice(body).map_err(|e| invalid(format!("params: {e}")))?;
    match req.params.and_then(|p| p.cursor) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(c)) => Ok(Some(c)),
        Some(_) => Err(invalid(
            "Invalid cursor: params.cursor must be a string".into(),
        )),
    }
}

fn invalid(msg: String) -> Rejection {
    Rejection::new(200, codes::INVALID_PARAMS, "invalid-cursor", msg)
}

/// Answer a list, `server/discover` or `subscriptions/listen` on endpoint `e`; `body` is the
/// checked request body.
pub(crate) async fn respond(
    session: &mut Session,
    ctx: &mut RequestCtx,
    e: usize,
    body: &[u8],
) -> Result<Verdict> {
    let gw = ctx.gw.clone();
    let method = ctx.method.clone().unwrap_or_default();
    let auth = fetch::Caller {
        authorization: session
            .req_header()
            .headers
            .get(http::header::AUTHORIZATION)
            .cloned(),
        identity: ctx.identity.clone(),
    };
    // The gateway answers as the server here, so it refuses what a server refuses: a version
    // it does not implement (the request's headers were already checked against its body, under
    // the gateway's looser rule that leaves version negotiation to the upstream).
    let claims = crate::mcp::Claims::read(&session.req_header().headers);
    if let Some(env) = ctx.progress.envelope() {
        if let Err(rej) = crate::mcp::check_request(&claims, env, SERVER_POLICY) {
            return Ok(Verdict::Refuse(rej));
        }
    }
    if method == methods::SUBSCRIPTIONS_LISTEN {
        super::listen::fan_in(session, ctx, e, body, auth).await?;
        return Ok(Verdict::Answered);
    }
    let result = match Kind::of_method(&method) {
        Some(kind) => match cursor_of(body) {
            Ok(c) => list(&gw, ctx, e, kind, c.as_deref(), &auth).await,
            Err(rej) => Err(rej),
        },
        None => Ok(discover(&gw, e, &auth).await),
    };
    let result = match result {
        Ok(result) => result,
        Err(rej) => return Ok(Verdict::Refuse(rej)),
    };
    let id = ctx.progress.take_id();
    let raw = id.as_deref().map_or("null", |i| i.get());
    let raw = serde_json::value::RawValue::from_string(raw.to_string()).expect("an id is JSON");
    let out = crate::mcp::response::result_body(&raw, &result);
    crate::gateway::stages::answer::respond(session, 200, out, &ctx.extra_headers).await?;
    Ok(Verdict::Answered)
}

/// Each pool's part of the list of `kind`, concurrently.
async fn parts(
    gw: &Gateway,
    pools: &[usize],
    kind: Option<Kind>,
    auth: &fetch::Caller,
) -> Vec<Part> {
    let asks = pools.iter().map(|p| part(gw, *p, kind, auth));
    futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Pool `p`'s part (`kind` `None`: its `server/discover`); `None` when it has no such list.
async fn part(gw: &Gateway, p: usize, kind: Option<Kind>, auth: &fetch::Caller) -> Option<Part> {
    let name = &gw.table.pools[p];
    let cat = gw.catalogs.get(name);
    let now = Instant::now();
    let known = known(&cat, kind)?;
    let count = |source: &str| {
        let parts = &gw.metrics.federation.parts;
        parts.with_label_values(&[name, label(kind), source]).inc();
    };
    if let Some(rem) = known.as_ref().and_then(|l| l.fresh_for(now)) {
        count("catalog");
        let list = known.expect("checked above");
        return Some(Part::of(p, list, rem));
    }
    let fetched = match kind {
        Some(k) => fetch::list(gw, p, k, auth).await,
        None => fetch::discover(gw, p, auth).await.map(|d| d.freshness),
    };
    match fetched {
        Ok(l) => {
            count("fetched");
            if let (Some(k), false) = (kind, l.private) {
                super::refresh::store_list(gw, p, k, l.clone());
            }
            let remaining = l.ttl;
            Some(Part::of(p, l, remaining))
        }
        Err(why) => {
            tracing::warn!(
                "federation: {} of pool {name} could not be fetched for an answer: {why}",
                kind.map_or(methods::DISCOVER, Kind::method)
            );
            count("unavailable");
            // What the catalog still routes stands in, while `keep_stale` allows.
            let keep = gw.federation_catalog().keep_stale;
            let list = known.filter(|_| cat.routes(now, keep)).unwrap_or(List {
                items: Default::default(),
                ttl: Duration::ZERO,
                private: false,
                at: now,
            });
            let mut part = Part::of(p, list, Duration::ZERO);
            part.unavailable = true;
            Some(part)
        }
    }
}

/// What the catalog knows of pool's list `kind` (`None` inside: nothing yet); `None` when the
/// pool's `server/discover` says it has no such capability.
fn known(cat: &PoolCatalog, kind: Option<Kind>) -> Option<Option<List>> {
    match kind {
        Some(k) => {
            let lacks = |d: &Discover| !d.capabilities.contains_key(k.capability());
            if cat.discover.as_ref().is_some_and(lacks) {
                return None;
            }
            Some(cat.list(k).cloned())
        }
        None => Some(cat.discover.as_ref().map(|d| d.freshness.clone())),
    }
}

fn label(kind: Option<Kind>) -> &'static str {
    kind.map_or("discover", Kind::label)
}

/// The smallest remaining freshness, any private part, and the pools that could not be asked.
fn aggregate(gw: &Gateway, parts: &[Part]) -> (Duration, bool, Vec<String>) {
    let ttl = parts
        .iter()
        .map(|p| p.remaining)
        .min()
        .unwrap_or(Duration::ZERO);
    let private = parts.iter().any(|p| p.list.private);
    let down = parts
        .iter()
        .filter(|p| p.unavailable)
        .map(|p| gw.table.pools[p.pool].clone())
        .collect();
    (ttl, private, down)
}

fn hints(result: &mut Map<String, Value>, ttl: Duration, private: bool, down: Vec<String>) {
    result.insert(caching::TTL_MS.into(), json!(ttl.as_millis() as u64));
    result.insert(
        caching::CACHE_SCOPE.into(),
        json!(if private {
            caching::SCOPE_PRIVATE
        } else {
            caching::SCOPE_PUBLIC
        }),
    );
    result.insert(
        crate::mcp::mrtr::RESULT_TYPE.into(),
        json!(result_type::COMPLETE),
    );
    if !down.is_empty() {
        result.insert("_meta".into(), json!({ "io.mcp-edge/unavailable": down }));
    }
}

/// The merged list of `kind` for this caller, one page of it.
async fn list(
    gw: &Gateway,
    ctx: &RequestCtx,
    e: usize,
    kind: Kind,
    cursor: Option<&str>,
    auth: &fetch::Caller,
) -> Result<Value, Rejection> {
    let fed = gw.federation.as_ref().expect("a federated endpoint");
    let ep = &fed.endpoints[e];
    let mut parts = parts(gw, &ep.pools, Some(kind), auth).await;
    for p in &mut parts {
        // Pinned definitions: a hold pool's changed entries are left out of its part.
        if let Some(kept) =
            crate::gateway::journey::pins::filter_part(gw, p.pool, kind, &p.list.items)
        {
            p.list.items = std::sync::Arc::new(kept);
        }
    }
    let contributions: Vec<Contribution> = parts
        .iter()
        .map(|p| Contribution {
            pool: p.pool,
            pool_name: &gw.table.pools[p.pool],
            items: &p.list.items,
        })
        .collect();
    let (mut merged, _) = view::merge(&ep.config, kind, &contributions);
    let (ttl, mut private, down) = aggregate(gw, &parts);
    if let (true, Some(auth_rules)) = (ctx.list_filter.is_some(), gw.auth.as_ref()) {
        let call = kind.call();
        let anonymous = crate::auth::Identity::anonymous();
        let who = ctx.identity.as_deref().unwrap_or(&anonymous);
        merged.retain(|m| {
            let explicit =
                gw.table
                    .index
                    .first_match(&gw.table.routes, Some(call), Some(&m.exposed));
            let route = explicit.map_or(RouteRef::Learned(m.target.pool), RouteRef::Index);
            auth_rules.may_see(who, Some(route), call, &m.exposed)
        });
        // Filtered for this caller: only this caller may reuse it.
        private = true;
    }
    let digest = cursor::digest(merged.iter().map(|m| m.exposed.as_str()));
    let offset = match cursor {
        None => 0,
        Some(c) => cursor::open(c, &ep.config.path, kind.method(), &digest, merged.len())
            .map_err(|why| invalid(format!("Invalid cursor: {why}")))?,
    };
    let total = merged.len();
    let end = (offset + ep.config.page_size).min(total);
    let page: Vec<Value> = merged.drain(offset..end).map(|m| m.item).collect();
    let mut result = Map::new();
    result.insert(kind.member().into(), Value::Array(page));
    if end < total {
        let next = cursor::make(&ep.config.path, kind.method(), end, &digest);
        result.insert(caching::NEXT_CURSOR.into(), json!(next));
    }
    hints(&mut result, ttl, private, down);
    gw.metrics
        .federation
        .answers
        .with_label_values(&[&ep.config.path, kind.method()])
        .inc();
    Ok(Value::Object(result))
}

/// The endpoint's own `server/discover`: the versions every pool supports, the capabilities
/// the merged endpoint offers, the gateway's `serverInfo` and the endpoint's instructions.
async fn discover(gw: &Gateway, e: usize, auth: &fetch::Caller) -> Value {
    let fed = gw.federation.as_ref().expect("a federated endpoint");
    let ep = &fed.endpoints[e];
    let parts = parts(gw, &ep.pools, None, auth).await;
    let (ttl, private, down) = aggregate(gw, &parts);
    let found: Vec<&Value> = parts.iter().filter_map(|p| p.list.items.first()).collect();
    let mut versions: Option<Vec<String>> = None;
    let mut caps = Map::new();
    for d in &found {
        let theirs = crate::mcp::discover::supported_versions(d);
        versions = Some(match versions {
            None => theirs,
            Some(v) => v.into_iter().filter(|x| theirs.contains(x)).collect(),
        });
        for (k, v) in d["capabilities"].as_object().into_iter().flatten() {
            merge_capability(&mut caps, k, v);
        }
    }
    let instructions = ep.config.instructions.clone().unwrap_or_else(|| {
        format!(
            "One endpoint for the MCP servers of pools {}, merged by mcp-edge.",
            ep.config.pools.join(", ")
        )
    });
    let mut result = Map::new();
    result.insert(
        "supportedVersions".into(),
        // The versions every pool supports, of those the endpoint itself answers in.
        json!(versions
            .unwrap_or_else(|| vec![PROTOCOL_VERSION.to_string()])
            .into_iter()
            .filter(|v| SERVER_POLICY.accepts(v))
            .collect::<Vec<_>>()),
    );
    result.insert("capabilities".into(), Value::Object(caps));
    result.insert("instructions".into(), json!(instructions));
    hints(&mut result, ttl, private, down);
    let info = json!({"name": "mcp-edge", "version": env!("CARGO_PKG_VERSION"), "title": format!("mcp-edge federated endpoint {}", ep.config.path)});
    let m = result.entry("_meta").or_insert_with(|| json!({}));
    m[meta::SERVER_INFO] = info;
    gw.metrics
        .federation
        .answers
        .with_label_values(&[&ep.config.path, methods::DISCOVER])
        .inc();
    Value::Object(result)
}

/// The merged endpoint offers a capability when any pool does. `listChanged` is not promised:
/// the gateway answers lists itself and does not forward one pool's change notices as the
/// endpoint's. Extensions are the union of the pools'.
fn merge_capability(caps: &mut Map<String, Value>, k: &str, v: &Value) {
    match k {
        "tools" | "prompts" | "resources" => {
            caps.entry(k).or_insert_with(|| json!({}));
        }
        "extensions" => {
            let ext = caps.entry(k).or_insert_with(|| json!({}));
            for (name, val) in v.as_object().into_iter().flatten() {
                ext[name.as_str()] = val.clone();
            }
        }
        _ => {
            caps.entry(k).or_insert_with(|| v.clone());
        }
    }
}
