//! Explain: what the gateway would do with one request, stage by stage, in the order the proxy
//! runs them (admit → route → auth → limits → check → cache → balance), without forwarding it.
//!
//! Each stage is the proxy's own function, asked without its side effects: limits are peeked
//! ([`crate::gateway::stages::limit::Limit::peek`]: no token spent, no key added), the cache is only read
//! ([`crate::gateway::journey::cache::would_hit`]), the header↔body check counts no metric, nothing reaches an
//! instance. Auth verifies the token for real (it may fetch the JWKS or introspect, as a request
//! would), and the balancer's pick is a sample: round robin moves on by one, least-loaded draws
//! at random. The answer names the caller by its verified subject, never by its token, and
//! repeats no header value.
//!
//! The document may name the client's address (`client_ip`) for limits keyed on it.
//!
//! Asked by `POST /-/explain` on the admin listener, the console's form, and
//! `mcp-edge explain --config gateway.yaml --request req.json` (offline: a gateway built from
//! the config, health unknown so every instance counts as up).

use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::balance::Tried;
use crate::gateway::stages::limit::{LimitInput, Verdict};
use crate::gateway::stages::route::RouteRef;
use crate::mcp::{envelope, Rejection};

/// A request to explain: `{"headers": {...}, "body": "<the body as a string>", "path": "/mcp"}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub body: String,
    /// The request path (default: the gateway's `endpoint`).
    #[serde(default)]
    pub path: Option<String>,
    /// The client's address, for limits keyed on `client_ip` (default: none, its own bucket).
    #[serde(default)]
    pub client_ip: Option<std::net::IpAddr>,
}

/// The stages walked so far and, once one decides, the verdict.
struct Walk {
    steps: Vec<Value>,
}

impl Walk {
    fn pass(&mut self, step: &str, detail: Value) {
        self.steps
            .push(json!({"step": step, "outcome": "pass", "detail": detail}));
    }

    /// The stage refuses: the answer the client would get.
    fn refuse(mut self, step: &str, rej: &Rejection, detail: Value) -> Value {
        self.steps
            .push(json!({"step": step, "outcome": "refuse", "detail": detail}));
        json!({
            "verdict": "refused",
            "decided_by": step,
            "answer": {"status": rej.status, "code": rej.code, "reason": rej.reason, "message": rej.message},
            "steps": self.steps,
        })
    }

    fn done(self, verdict: &str, decided_by: &str, extra: Value) -> Value {
        let mut v = json!({"verdict": verdict, "decided_by": decided_by, "steps": self.steps});
        if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
            m.extend(e);
        }
        v
    }
}

/// The request head as the proxy would see it (`Err`: a header that no HTTP parser accepts).
fn head(gw: &Gateway, q: &Question) -> Result<http::request::Parts, String> {
    let path = q.path.as_deref().unwrap_or(gw.config.endpoint.as_str());
    let mut b = http::Request::builder()
        .method(http::Method::POST)
        .uri(path);
    for (k, v) in &q.headers {
        b = b.header(k.as_str(), v.as_str());
    }
    // Every HTTP/1.1 client sends one; a question that leaves it out means the listener's.
    if !q.headers.keys().any(|k| k.eq_ignore_ascii_case("host")) {
        b = b.header(http::header::HOST, gw.config.listen.mcp.to_string());
    }
    let (parts, ()) = b
        .body(())
        .map_err(|e| format!("the request head does not parse: {e}"))?
        .into_parts();
    Ok(parts)
}

/// Walk `q` through the stages of `gw`.
pub async fn explain(gw: &Arc<Gateway>, q: &Question) -> Value {
    let mut walk = Walk { steps: Vec::new() };
    let parts = match head(gw, q) {
        Ok(p) => p,
        Err(e) => return json!({"verdict": "invalid", "error": e, "steps": []}),
    };
    let headers = &parts.headers;
    let admitted =
        match crate::gateway::stages::admission::admit(&parts, &gw.config, &gw.key_headers) {
            Ok(a) => a,
            Err(rej) => return walk.refuse("admit", &rej, json!({})),
        };
    let mut ctx = RequestCtx::new(gw.clone());
    ctx.method = admitted.method.clone();
    ctx.name = admitted.name.clone();
    walk.pass(
        "admit",
        json!({"claimed_method": admitted.method, "claimed_name": admitted.name,
               "headers_alone_doom_it": admitted.doomed}),
    );
    if admitted.doomed {
        // The proxy reads the body to answer with its id: the check says why.
        return check_only(walk, headers, q.body.as_bytes());
    }
    let Some(route_ref) =
        crate::gateway::journey::steps::select_route(gw, &mut ctx, parts.uri.path())
    else {
        let rej =
            crate::gateway::stages::route::no_route(ctx.method.as_deref(), ctx.name.as_deref());
        return walk.refuse("route", &rej, json!({"routes": gw.table.routes.len()}));
    };
    let Some(route) = gw.table.get(route_ref) else {
        let rej =
            crate::gateway::stages::route::no_route(ctx.method.as_deref(), ctx.name.as_deref());
        return walk.refuse("route", &rej, json!({}));
    };
    ctx.pool = route.pool;
    walk.pass("route", route_detail(gw, route_ref, &ctx));
    if let Some(auth) = &gw.auth {
        let (m, n) = (ctx.method.as_deref(), ctx.name.as_deref());
        match auth
            .admit(headers, parts.uri.query(), route_ref, m, n)
            .await
        {
            Ok(identity) => {
                let who = identity.as_deref().map(|i| i.subject.clone());
                walk.pass("auth", json!({"caller": who}));
                ctx.identity = identity;
            }
            Err(refusal) => return walk.refuse("auth", &refusal.rejection, json!({})),
        }
    } else {
        walk.pass("auth", json!({"configured": false}));
    }
    if let Some((rej, detail)) = limits(gw, &ctx, headers, &route.name, q.client_ip, &mut walk) {
        return walk.refuse("limits", &rej, detail);
    }
    let sample = route.sample;
    checked(
        gw,
        &ctx,
        route_ref,
        sample,
        headers,
        q.body.as_bytes(),
        walk,
    )
}

/// From the header↔body check on: the check, an answer by a federated endpoint or the cache,
/// or the balancer's pick.
fn checked(
    gw: &Gateway,
    ctx: &RequestCtx,
    route_ref: RouteRef,
    sample: f64,
    headers: &http::HeaderMap,
    body: &[u8],
    mut walk: Walk,
) -> Value {
    let env = match envelope::parse(body) {
        Ok(env) => env,
        Err(e) => return walk.refuse("check", &e.rejection(), json!({})),
    };
    let said = json!({"body_method": env.method, "body_name": env.name});
    if let Err(rej) = crate::gateway::stages::validate::validate(headers, &env) {
        return walk.refuse("check", &rej, said);
    }
    walk.pass("check", json!({"sample": sample, "body": said}));
    let method = env.method.as_deref().unwrap_or("");
    let answered_here = crate::mcp::lists::Kind::of_method(method).is_some()
        || method == crate::mcp::methods::DISCOVER;
    if ctx.federated.is_some() && answered_here {
        return walk.done(
            "answered",
            "federation",
            json!({"by": "the federated endpoint's merged list"}),
        );
    }
    match crate::gateway::journey::cache::would_hit(gw, route_ref, ctx.pool, method, headers, body)
    {
        Some(true) => {
            return walk.done(
                "answered",
                "cache",
                json!({"by": "the edge cache (a fresh entry)"}),
            )
        }
        Some(false) => walk.pass("cache", json!({"hit": false})),
        None => walk.pass("cache", json!({"cached": false})),
    }
    balance(gw, ctx, headers, walk)
}

/// A request the headers alone doom: the check on the body gives the answer.
fn check_only(walk: Walk, headers: &http::HeaderMap, body: &[u8]) -> Value {
    let env = match envelope::parse(body) {
        Ok(env) => env,
        Err(e) => return walk.refuse("check", &e.rejection(), json!({})),
    };
    match crate::gateway::stages::validate::validate(headers, &env) {
        Err(rej) => walk.refuse(
            "check",
            &rej,
            json!({"body_method": env.method, "body_name": env.name}),
        ),
        Ok(()) => walk.done(
            "forwarded",
            "check",
            json!({"note": "a notification without MCP headers passes"}),
        ),
    }
}

fn route_detail(gw: &Gateway, r: RouteRef, ctx: &RequestCtx) -> Value {
    let route = gw.table.get(r);
    let why = match r {
        RouteRef::Index(i) => {
            format!("routes[{i}] is the first whose method and name patterns match the claims")
        }
        RouteRef::Default => "no route matches the claims: the default route".to_string(),
        RouteRef::Learned(_) => {
            "the federated endpoint's catalog says this pool serves the name".to_string()
        }
    };
    let pat = |p: Option<&crate::config::Pattern>| p.map_or("*".to_string(), |p| p.to_string());
    json!({
        "route": route.map(|r| r.name.clone()),
        "pool": gw.pools[ctx.pool].name,
        "match": route.map(|r| json!({"method": pat(r.method.as_ref()), "name": pat(r.mcp_name.as_ref())})),
        "why": why,
        "federated": ctx.federated.is_some(),
    })
}

/// Every rate limit, in order, as it stands now; the first that would refuse answers.
fn limits(
    gw: &Gateway,
    ctx: &RequestCtx,
    headers: &http::HeaderMap,
    route: &str,
    client_ip: Option<std::net::IpAddr>,
    walk: &mut Walk,
) -> Option<(Rejection, Value)> {
    let input = LimitInput {
        route,
        method: ctx.method.as_deref(),
        name: ctx.name.as_deref(),
        headers,
        client_ip,
        identity: ctx.identity.as_deref(),
    };
    let mut seen = Vec::new();
    for l in &gw.limits {
        let state = match l.peek(&input) {
            None if l.scope() == crate::config::Scope::Global => {
                json!("applies if it matches; buckets in Redis are not peeked")
            }
            None => json!("does not apply"),
            Some(Verdict::Allowed) => json!("allowed"),
            Some(Verdict::DryRunLimited) => json!("over (dry run: counted, not refused)"),
            Some(Verdict::Limited(wait)) => {
                let secs = crate::gateway::stages::limit::retry_after_secs(wait);
                seen.push(json!({"limit": l.name, "state": format!("over: refused, retry after {secs}s")}));
                let (rej, _) = crate::gateway::stages::limit::refusal(&l.name, wait);
                return Some((rej, json!({"limits": seen, "retry_after_s": secs})));
            }
            Some(Verdict::NotApplicable) => json!("does not apply"),
        };
        seen.push(json!({"limit": l.name, "state": state}));
    }
    walk.pass(
        "limits",
        json!({"limits": seen, "concurrency_limits": gw.concurrency.len()}),
    );
    None
}

/// The instance the balancer would pick, and why.
fn balance(gw: &Gateway, ctx: &RequestCtx, headers: &http::HeaderMap, mut walk: Walk) -> Value {
    let pool = &gw.pools[ctx.pool];
    let picked = pool.pick_request(
        ctx.method.as_deref(),
        ctx.name.as_deref(),
        headers,
        ctx.identity.as_deref(),
        Tried::default(),
    );
    let cfg = &gw.config.pools[&pool.name];
    let key = (pool.balance == crate::config::Balance::Hash).then(|| {
        let k = cfg
            .hash_key
            .clone()
            .unwrap_or(crate::config::HashKey::McpName);
        let present = crate::gateway::stages::balance::shard_key_for(
            &k,
            ctx.name.as_deref(),
            headers,
            ctx.identity.as_deref(),
        )
        .is_some();
        json!({"hash_key": k.to_string(), "present": present,
               "value": (k == crate::config::HashKey::McpName).then(|| ctx.name.clone()).flatten()})
    });
    let detail = json!({
        "pool": pool.name,
        "balance": pool.balance.label(),
        "hash": key,
        "task_routing": picked.task.map(|t| t.label()),
        "moved_off_home": picked.moved,
        "instance": picked.index.map(|i| pool.instances[i].name.clone()),
        "usable": picked.index.map(|i| pool.health.usable(i)),
        // The pool's credential is not fetched by explain (no token endpoint is asked).
        "pool_credentials": cfg.credentials.is_some(),
    });
    match picked.index {
        Some(_) => {
            walk.pass("balance", detail);
            walk.done("forwarded", "balance", json!({}))
        }
        None => {
            let rej = Rejection::new(
                502,
                crate::mcp::codes::GATEWAY_UPSTREAM_UNAVAILABLE,
                "upstream-unavailable",
                format!("pool {} has no instance to send it to", pool.name),
            );
            walk.refuse("balance", &rej, detail)
        }
    }
}
