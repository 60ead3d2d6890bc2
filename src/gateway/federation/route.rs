//! The route step on a federated endpoint: an explicit route first, then the pool the catalog
//! says serves the name the request claims; lists, `server/discover` and `subscriptions/listen`
//! for the gateway to answer; a name no pool serves refused (after the body check).

use std::time::Instant;

use super::catalog::Kind;
use super::{Endpoint, Federated};
use crate::gateway::route::RouteRef;
use crate::gateway::{Gateway, RequestCtx};
use crate::mcp::{codes, methods, Rejection};

/// What the route step does with a request on a federated endpoint.
#[derive(Debug)]
pub enum Decision {
    /// Forward to `route`'s pool; `rename`: the server's name for a prefixed one.
    Go {
        route: RouteRef,
        rename: Option<String>,
    },
    /// The gateway answers (a merged list, `server/discover`), after the body check.
    Answer,
    /// Refused without an upstream.
    Refuse(Rejection),
    /// A name the endpoint does not serve: refused without an upstream once the body passed
    /// the header check.
    Unknown(Rejection),
}

/// The route of a request on federated endpoint `e`: an explicit route first; then, for the
/// methods that name their target, the pool the catalog says serves it.
pub fn route(gw: &Gateway, e: usize, method: Option<&str>, name: Option<&str>) -> Decision {
    let Some(fed) = gw.federation.as_ref() else {
        return Decision::Refuse(unknown("", ""));
    };
    let ep = &fed.endpoints[e];
    let view = ep.view(&gw.catalogs, &gw.table.pools, fed.catalog.keep_stale);
    let first = RouteRef::Learned(ep.pools[0]);
    let explicit = gw
        .table
        .index
        .first_match(&gw.table.routes, method, name)
        .map(RouteRef::Index);
    let m = method.unwrap_or("");
    let target = match (m, name) {
        (methods::TOOLS_CALL, Some(n)) => view
            .tool(n)
            .map(|t| (t.pool, (t.name != n).then(|| t.name.clone()))),
        (methods::PROMPTS_GET, Some(n)) => view
            .prompt(n)
            .map(|t| (t.pool, (t.name != n).then(|| t.name.clone()))),
        (methods::RESOURCES_READ, Some(uri)) if ep.config.resources.allows(uri) => {
            view.resource(uri).map(|p| (p, None))
        }
        (methods::RESOURCES_READ, Some(_)) => None,
        _ if Kind::of_method(m).is_some()
            || m == methods::DISCOVER
            || m == methods::SUBSCRIPTIONS_LISTEN =>
        {
            return match explicit {
                Some(r) => Decision::Go {
                    route: r,
                    rename: None,
                },
                None => Decision::Answer,
            };
        }
        (t, Some(id)) if crate::mcp::tasks::is_task_method(t) => {
            let hint = crate::mcp::tasks::parse_owner_hint(id);
            let owner = hint.and_then(|h| {
                ep.pools
                    .iter()
                    .find(|p| gw.pools[**p].owner_of(h).is_some())
            });
            let route = explicit
                .or(owner.map(|p| RouteRef::Learned(*p)))
                .unwrap_or(first);
            return Decision::Go {
                route,
                rename: None,
            };
        }
        _ => {
            let route = explicit
                .or(gw.table.default.as_ref().map(|_| RouteRef::Default))
                .unwrap_or(first);
            return Decision::Go {
                route,
                rename: None,
            };
        }
    };
    match (explicit, target) {
        (Some(r), t) => Decision::Go {
            route: r,
            rename: t.and_then(|t| t.1),
        },
        (None, Some((pool, rename))) => Decision::Go {
            route: RouteRef::Learned(pool),
            rename,
        },
        // Answered after the body check, as a server would: a header that disagrees with the
        // body is the first thing wrong with such a request.
        (None, None) => Decision::Unknown(not_served(gw, ep, m, name.unwrap_or(""))),
    }
}

/// Record a routed decision on the request; the route it takes.
pub fn enter(ctx: &mut RequestCtx, endpoint: usize, decision: Decision) -> RouteRef {
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
            ctx.federated = Some(Federated {
                endpoint,
                refuse,
                ..Default::default()
            });
            return RouteRef::Learned(first);
        }
        Decision::Refuse(_) => unreachable!("refusals are answered before"),
    };
    ctx.federated = Some(Federated {
        endpoint,
        refuse: None,
        answer,
        rename,
    });
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
