//! The route step on a federated endpoint: an explicit route first, then the pool the catalog
//! says serves the name the request claims; lists, `server/discover` and `subscriptions/listen`
//! for the gateway to answer; a name no pool serves refused (after the body check).

use std::time::Instant;

use crate::gateway::federation::stages::catalog::Kind;
use crate::gateway::federation::stages::view::View;
use crate::gateway::federation::stages::{Endpoint, Federated, Federation};
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::route::RouteRef;
use crate::mcp::{codes, methods, Rejection};

/// What the route step does with a request on a federated endpoint.
#[derive(Debug)]
pub(crate) enum Decision {
    /// Forward to `route`'s pool; `rename`: the server's name for a prefixed one.
    Go {
        route: RouteRef,
        rename: Option<String>,
    },
    /// The gateway answers (a merged list, `server/discover`), after the body check.
    Answer,
    /// A name the endpoint does not serve: refused without an upstream once the body passed
    /// the header check.
    Unknown(Rejection),
}

/// The route of a request on federated endpoint `e`: an explicit route first; then, for the
/// methods that name their target, the pool the catalog says serves it.
pub(crate) fn route(
    gw: &Gateway,
    fed: &Federation,
    e: usize,
    method: Option<&str>,
    name: Option<&str>,
) -> Decision {
    let ep = &fed.endpoints[e];
    let explicit = gw.table.index.first_match(&gw.table.routes, method, name);
    let explicit = explicit.map(RouteRef::Index);
    let m = method.unwrap_or("");
    let go = |route| Decision::Go {
        route,
        rename: None,
    };
    let named = matches!(
        m,
        methods::TOOLS_CALL | methods::PROMPTS_GET | methods::RESOURCES_READ
    );
    match (named, name) {
        (true, Some(n)) => {
            let view = ep.view(&gw.catalogs, &gw.table.pools, fed.catalog.keep_stale);
            match (explicit, target(&view, ep, m, n)) {
                (Some(route), t) => Decision::Go {
                    route,
                    rename: t.and_then(|t| t.1),
                },
                (None, Some((pool, rename))) => Decision::Go {
                    route: RouteRef::Learned(pool),
                    rename,
                },
                // Answered after the body check, as a server would: a header that disagrees
                // with the body is the first thing wrong with such a request.
                (None, None) => Decision::Unknown(not_served(gw, ep, m, n)),
            }
        }
        _ if answered_here(m) => explicit.map_or(Decision::Answer, go),
        _ => go(explicit.unwrap_or_else(|| unnamed_route(gw, ep, m, name))),
    }
}

/// The methods a federated endpoint answers itself (merging the pools' answers).
fn answered_here(method: &str) -> bool {
    Kind::of_method(method).is_some()
        || method == methods::DISCOVER
        || method == methods::SUBSCRIPTIONS_LISTEN
}

/// The pool serving what a named method names, and the server's own name if it differs.
fn target(view: &View, ep: &Endpoint, method: &str, n: &str) -> Option<(usize, Option<String>)> {
    let renamed = |t: &crate::gateway::federation::stages::view::Target| {
        (t.pool, (t.name != n).then(|| t.name.clone()))
    };
    match method {
        methods::TOOLS_CALL => view.tool(n).map(renamed),
        methods::PROMPTS_GET => view.prompt(n).map(renamed),
        _ if ep.config.resources.allows(n) => view.resource(n).map(|p| (p, None)),
        _ => None,
    }
}

/// Where a method that names no catalog entry goes: a task to the pool whose instance its id
/// names; anything else to the default route, else the endpoint's first pool.
fn unnamed_route(gw: &Gateway, ep: &Endpoint, method: &str, name: Option<&str>) -> RouteRef {
    let first = RouteRef::Learned(ep.pools[0]);
    if crate::mcp::tasks::is_task_method(method) {
        let hint = name.and_then(crate::mcp::tasks::parse_owner_hint);
        let owner = hint.and_then(|h| {
            ep.pools
                .iter()
                .find(|p| gw.pools[**p].owner_of(h).is_some())
        });
        return owner.map_or(first, |p| RouteRef::Learned(*p));
    }
    gw.table
        .default
        .as_ref()
        .map_or(first, |_| RouteRef::Default)
}

/// Record a routed decision on the request; the route it takes.
pub(crate) fn enter(ctx: &mut RequestCtx, endpoint: usize, decision: Decision) -> RouteRef {
    let (route, answer, rename) = match decision {
        Decision::Go { route, rename } => (route, false, rename),
        // Limits and auth see the endpoint's first pool's learned route.
        Decision::Answer => {
            let first = ctx
                .gw
                .federation
                .as_ref()
                .map_or(0, |f| f.endpoints[endpoint].pools[0]);
            (RouteRef::Learned(first), true, None)
        }
        Decision::Unknown(rej) => {
            let first = ctx
                .gw
                .federation
                .as_ref()
                .map_or(0, |f| f.endpoints[endpoint].pools[0]);
            let refuse = Some(rej);
            ctx.federated = Some(Box::new(Federated {
                endpoint,
                refuse,
                ..Default::default()
            }));
            return RouteRef::Learned(first);
        }
    };
    ctx.federated = Some(Box::new(Federated {
        endpoint,
        refuse: None,
        answer,
        rename,
    }));
    route
}

/// A name no pool of the endpoint serves: the error a server gives (-32602), or 503 while a
/// pool's catalog is not known yet (the name may be that pool's).
fn not_served(gw: &Gateway, ep: &Endpoint, method: &str, name: &str) -> Rejection {
    let keep = gw
        .federation
        .as_ref()
        .map_or(Default::default(), |f| f.catalog.keep_stale);
    let unknown_pools: Vec<&str> = ep
        .pools
        .iter()
        .filter(|p| {
            !gw.catalogs
                .get(&gw.table.pools[**p])
                .routes(Instant::now(), keep)
        })
        .map(|p| gw.table.pools[*p].as_str())
        .collect();
    if unknown_pools.is_empty() {
        return unknown(method, name);
    }
    let msg = format!(
        "{name:?} is not in the catalog of endpoint {}, and the catalog of pool(s) {} is not loaded (they cannot be reached); try again later",
        ep.config.path,
        unknown_pools.join(", ")
    );
    Rejection::new(
        503,
        codes::GATEWAY_UPSTREAM_UNAVAILABLE,
        "catalog-unavailable",
        msg,
    )
}

fn unknown(method: &str, name: &str) -> Rejection {
    let what = match method {
        methods::PROMPTS_GET => "prompt",
        methods::RESOURCES_READ => "resource",
        _ => "tool",
    };
    let msg = format!("Unknown {what}: {name:?} is not served by this endpoint");
    Rejection::new(200, codes::INVALID_PARAMS, "unknown-name", msg)
}
