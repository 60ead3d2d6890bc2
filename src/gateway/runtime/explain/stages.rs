//! What each stage of the pipeline says of a request being explained: the proxy's own
//! functions asked without their side effects (limits peeked, the cache only read, nothing
//! forwarded, no credential fetched), each returning a [`Said`].

use serde_json::{json, Value};

use super::{Explaining, Said};
use crate::gateway::balance::stages::Tried;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::state::Gateway;
use crate::gateway::rate_limits::stages::{LimitInput, Verdict};
use crate::gateway::stages::body::{BodyStage, Input, Scope};
use crate::gateway::stages::route::RouteRef;
use crate::mcp::{envelope, Rejection};

/// Admit (`Ok(Some(detail))`: the headers alone doom it, the check decides at once).
pub(super) fn admit(x: &mut Explaining) -> Result<Option<Value>, Rejection> {
    let a = crate::gateway::stages::admission::admit(&x.parts, &x.gw.config, &x.gw.key_headers)?;
    x.ctx.method = a.method.clone();
    x.ctx.name = a.name.clone();
    Ok(a.doomed.then(|| {
        json!({"claimed_method": a.method, "claimed_name": a.name, "headers_alone_doom_it": true})
    }))
}

pub(super) fn route(x: &mut Explaining) -> Said {
    let (gw, path) = (x.gw, x.parts.uri.path().to_string());
    let selected = crate::gateway::journey::steps::select_route(gw, &mut x.ctx, &path);
    let Some((r, route)) = selected.and_then(|r| Some((r, gw.table.get(r)?))) else {
        let (m, n) = (x.ctx.method.as_deref(), x.ctx.name.as_deref());
        let rej = crate::gateway::stages::route::no_route(m, n);
        return Said::Refuse(rej, json!({"routes": gw.table.routes.len()}));
    };
    x.ctx.pool = route.pool;
    x.ctx.route = Some(r);
    Said::Pass(route_detail(gw, r, &x.ctx))
}

pub(super) async fn auth(x: &mut Explaining<'_>) -> Said {
    let Some(auth) = &x.gw.auth else {
        return Said::Skip(json!({"configured": false}));
    };
    let (m, n) = (x.ctx.method.as_deref(), x.ctx.name.as_deref());
    let r = x.ctx.route.expect("route passed");
    match auth
        .admit(&x.parts.headers, x.parts.uri.query(), r, m, n)
        .await
    {
        Ok(identity) => {
            let who = identity.as_deref().map(|i| i.subject.clone());
            x.ctx.identity = identity;
            Said::Pass(json!({"caller": who}))
        }
        Err(refusal) => Said::Refuse(refusal.rejection, json!({})),
    }
}

/// The header↔body check, as the route's sample says (`doomed`: it always runs); the body is
/// parsed whenever the check runs or a body stage covers the request.
pub(super) fn check(x: &mut Explaining, doomed: bool) -> Said {
    let body = x.q.body.as_bytes();
    let route = x.ctx.route.and_then(|r| x.gw.table.get(r));
    let sample = route.map_or(1.0, |r| r.sample);
    let auth_check = x.gw.auth.as_ref().is_some_and(|a| a.needs_body_check());
    x.check = doomed || auth_check || x.ctx.federated.is_some() || sample > 0.0;
    let path = x.parts.uri.path();
    if !x.check && !crate::gateway::journey::pipeline::body::needed(x.gw, path) {
        return Said::Skip(json!({"sample": sample, "sampled_out": true}));
    }
    let env = match envelope::parse(body) {
        Ok(env) => env,
        Err(e) if x.check => return Said::Refuse(e.rejection(), json!({})),
        Err(_) => return Said::Skip(json!({"sample": sample, "sampled_out": true})),
    };
    let said = json!({"body_method": env.method, "body_name": env.name});
    x.env = Some(env);
    if !x.check {
        return Said::Skip(json!({"sample": sample, "sampled_out": true,
                                 "note": "the body is read and parsed for the body stages", "body": said}));
    }
    let env = x.env.as_ref().expect("just set");
    match crate::gateway::stages::validate::validate(&x.parts.headers, env) {
        Err(rej) => Said::Refuse(rej, said),
        Ok(()) => Said::Pass(json!({"sample": sample, "body": said})),
    }
}

/// A body stage: its own explanation (no side effects) and its verdict.
pub(super) fn body_stage(x: &mut Explaining, i: usize, b: &BodyStage) -> Said {
    let Some(state) = &x.gw.stage_states[i] else {
        return Said::Skip(json!({"configured": false}));
    };
    let scope = || Scope {
        path: x.parts.uri.path(),
    };
    if !(b.covers)(state, &scope()) {
        return Said::Skip(json!({"covers": false}));
    }
    let Some(env) = &x.env else {
        // Sampled out and the body does not parse: the proxy refuses it for the stage.
        return match envelope::parse(x.q.body.as_bytes()) {
            Err(e) => Said::Refuse(e.rejection(), json!({})),
            Ok(_) => unreachable!("check parsed every body a body stage covers"),
        };
    };
    let body = x.q.body.as_bytes();
    let input = Input::new(scope(), env, body, x.ctx.identity.as_deref());
    let detail = (b.explain)(state, &input);
    match (b.run)(state, &input) {
        Ok(()) => Said::Pass(detail),
        Err(rej) => Said::Refuse(rej, detail),
    }
}

pub(super) fn federation(x: &Explaining) -> Said {
    let (Some(env), true, false, Some(_)) = (&x.env, x.check, x.doomed, &x.ctx.federated) else {
        return Said::Skip(json!({"federated": false}));
    };
    let method = env.method.as_deref().unwrap_or("");
    let answered_here = crate::mcp::lists::Kind::of_method(method).is_some()
        || method == crate::mcp::methods::DISCOVER;
    match answered_here {
        true => Said::Answered(json!({"by": "the federated endpoint's merged list"})),
        false => Said::Pass(json!({"answered_here": false})),
    }
}

/// Whether the pool seals `requestState`, and on a retry whether its state would be accepted
/// for this caller and these arguments, or why not (opened with the pool's keys, nothing
/// recorded: explain does not spend a one-time state; Redis is not asked).
pub(super) fn seal(x: &Explaining) -> Said {
    use crate::mcp::state_seal::{self, rewrite, Binding, Refused};
    let Some(seal) = x.gw.seals.get(x.ctx.pool).and_then(Option::as_ref) else {
        return Said::Skip(json!({"sealing": false}));
    };
    let retry = x.env.as_ref().is_some_and(|e| e.has_request_state);
    let (Some(method), Some(name), true) = (x.ctx.method.as_deref(), x.ctx.name.as_deref(), retry)
    else {
        return Said::Pass(json!({"sealing": true, "retry": false}));
    };
    let body = x.q.body.as_bytes();
    let subject = x.ctx.identity.as_ref().map(|i| i.subject.as_str());
    let authorization = x.parts.headers.get(http::header::AUTHORIZATION);
    let caller = crate::gateway::stages::seal::caller(
        subject,
        authorization.map(|a| a.as_bytes()),
        x.q.client_ip,
    );
    let arguments = crate::gateway::journey::seal::arguments(body);
    let digest = state_seal::arguments_digest(method, name, &arguments);
    let to = Binding {
        caller: &caller,
        method,
        name,
        arguments: &digest,
    };
    let one_time = format!("{:?}", seal.config.one_time).to_lowercase();
    let opened = match rewrite::request_state(body) {
        None => Err(Refused::NotSealed),
        Some((token, _, _)) => match seal.verify(&token, &to) {
            Ok(_) if seal.used_here(&token) => Err(Refused::Used),
            other => other,
        },
    };
    match opened {
        Ok((_, expires_ms)) => Said::Pass(json!({"sealing": true, "retry": true,
            "state": "accepted", "expires_in_ms": expires_ms.saturating_sub(crate::mcp::seal::now_ms()),
            "one_time": one_time})),
        Err(why) => {
            let detail = json!({"sealing": true, "retry": true, "state": "refused",
                "reason": why.reason()});
            let rej = Rejection::new(
                200,
                crate::mcp::codes::INVALID_PARAMS,
                why.reason(),
                why.message(),
            );
            Said::Refuse(rej, detail)
        }
    }
}

pub(super) fn cache(x: &Explaining) -> Said {
    let (Some(env), true, false, Some(r)) = (&x.env, x.check, x.doomed, x.ctx.route) else {
        return Said::Skip(json!({"checked": false}));
    };
    let method = env.method.as_deref().unwrap_or("");
    let (headers, body) = (&x.parts.headers, x.q.body.as_bytes());
    let gw: &Gateway = x.gw;
    match crate::gateway::cache::journey::would_hit(gw, r, x.ctx.pool, method, headers, body) {
        Some(true) => Said::Answered(json!({"by": "the edge cache (a fresh entry)"})),
        Some(false) => Said::Pass(json!({"hit": false})),
        None => Said::Pass(json!({"cached": false})),
    }
}

/// Pins: whether a call would be held (the book is read, nothing pinned or approved).
pub(super) fn pins(x: &mut Explaining) -> Said {
    let policy = crate::gateway::journey::pins::policy(x.gw, x.ctx.pool);
    if policy == crate::config::pins::PinPolicy::Off {
        return Said::Skip(json!({"pins": "off"}));
    }
    match crate::gateway::journey::pins::on_head(x.gw, &mut x.ctx) {
        Ok(()) => Said::Pass(json!({"pins": policy.label(), "held": false})),
        Err(rej) => Said::Refuse(rej, json!({"pins": policy.label(), "held": true})),
    }
}

/// The pool's concurrency limit as it stands: would this request's leg get a slot now.
pub(super) fn capacity(x: &Explaining) -> Said {
    use crate::gateway::concurrency::journey::{leg_of, pool_limit};
    let Some(l) = pool_limit(x.gw, &x.ctx) else {
        return Said::Skip(json!({"pool_limit": false}));
    };
    let leg = leg_of(x.ctx.method.as_deref(), x.env.as_ref(), x.q.body.as_bytes());
    let (limit, first, in_flight) = l.now();
    let (min_rtt, probing) = l.measured();
    let detail = json!({
        "pool": l.pool, "tool": l.tool, "adaptive": l.config.adaptive, "limit": limit,
        "first_leg_limit": first, "in_flight": in_flight, "leg": leg.label(),
        "min_rtt_ms": min_rtt.map(|d| d.as_secs_f64() * 1000.0), "probing": probing,
    });
    if l.would_admit(leg) || leg == crate::gateway::concurrency::stages::pool::Leg::Started {
        // A started leg that finds no slot waits for one (`priority_wait`) before it is shed.
        return Said::Pass(detail);
    }
    let shed = crate::gateway::concurrency::stages::pool::PoolShed {
        pool: l.pool.clone(),
        tool: l.tool.clone(),
        limit,
        in_flight,
        leg,
        retry_after: l.config.retry_after,
    };
    Said::Refuse(
        crate::gateway::concurrency::stages::pool::refusal(&shed).0,
        detail,
    )
}

/// The pool's credential is not fetched by explain (no token endpoint is asked).
pub(super) fn credentials(x: &Explaining) -> Said {
    match x.gw.credentials.pool(x.ctx.pool).is_some() {
        true => Said::Pass(json!({"pool_credentials": true, "fetched": false})),
        false => Said::Skip(json!({"pool_credentials": false})),
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
pub(super) fn limits(x: &Explaining) -> Said {
    let (gw, ctx) = (x.gw, &x.ctx);
    let route = ctx
        .route
        .and_then(|r| gw.table.get(r))
        .map_or("", |r| r.name.as_str());
    let input = LimitInput {
        route,
        method: ctx.method.as_deref(),
        name: ctx.name.as_deref(),
        headers: &x.parts.headers,
        client_ip: x.q.client_ip,
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
                let secs = crate::gateway::rate_limits::stages::retry_after_secs(wait);
                seen.push(json!({"limit": l.name, "state": format!("over: refused, retry after {secs}s")}));
                let (rej, _) = crate::gateway::rate_limits::stages::refusal(&l.name, wait);
                return Said::Refuse(rej, json!({"limits": seen, "retry_after_s": secs}));
            }
            Some(Verdict::NotApplicable) => json!("does not apply"),
        };
        seen.push(json!({"limit": l.name, "state": state}));
    }
    Said::Pass(json!({"limits": seen, "concurrency_limits": gw.concurrency.len()}))
}

/// The instances of `pool` no request goes to now, with the reason (`instance`, `why`).
fn skipped(pool: &crate::gateway::balance::stages::Pool) -> Vec<Value> {
    (0..pool.instances.len())
        .filter_map(|i| {
            let why = pool.health.unusable(i)?;
            Some(json!({"instance": pool.instances[i].name, "why": why.to_string()}))
        })
        .collect()
}

/// The instance the balancer would pick, and why.
pub(super) fn balance(x: &Explaining) -> Said {
    let (gw, ctx, headers) = (x.gw, &x.ctx, &x.parts.headers);
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
        let present = crate::gateway::balance::stages::shard_key_for(
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
        // The instances the balancer passed over, and why (down, ejected, latency outlier).
        "skipped": skipped(pool),
        "outliers": cfg.outliers.is_some(),
        // The pool's credential is not fetched by explain (no token endpoint is asked).
        "pool_credentials": cfg.credentials.is_some(),
    });
    match picked.index {
        Some(_) => Said::Pass(detail),
        None => {
            let rej = Rejection::new(
                502,
                crate::mcp::codes::GATEWAY_UPSTREAM_UNAVAILABLE,
                "upstream-unavailable",
                format!("pool {} has no instance to send it to", pool.name),
            );
            Said::Refuse(rej, detail)
        }
    }
}
