//! Federation: one endpoint in front of several *different* MCP servers, each its own pool.
//!
//! The gateway learns what each pool serves from the pool itself ([`catalog`], [`fetch`],
//! refreshed by [`refresh`] when lists run out of freshness, on `list_changed`, on reload),
//! and from that one fact it does three things:
//! - **routes** `tools/call`, `prompts/get` and `resources/read` (by URI, also through a
//!   pool's URI templates) to the pool that serves the name, by hash lookup in the endpoint's
//!   [`view::View`] — after the explicit routes of `gateway.yaml`, which still come first;
//! - **answers** `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`
//!   and `server/discover` itself, merging the pools' results ([`answer`]): a pool's list is
//!   served from the catalog only while the pool's own `ttlMs`/`cacheScope` allow it, and
//!   fetched again for the answer otherwise; the merged result carries the smallest remaining
//!   freshness and `private` when any part was private or the list was filtered per caller;
//! - **merges** `subscriptions/listen`: one client stream carrying every pool's notifications
//!   ([`listen`]);
//! - **names** entries under the endpoint's collision policy (`prefix`, `priority`,
//!   `refuse`); with `prefix`, a call's `Mcp-Name` and body name are set back to the server's
//!   name after the header↔body check ([`crate::mcp::rewrite`]), the one body edit the gateway
//!   makes.
//!
//! Stage order: admission finds the endpoint by path; [`route`] decides in `request_filter`'s
//! route step; [`on_checked`] runs right after the body check (answer, rename or re-route).

pub mod answer;
pub mod catalog;
mod cursor;
pub mod fetch;
mod listen;
pub mod refresh;
pub mod report;
pub mod view;

use arc_swap::ArcSwap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::config::federation::CatalogConfig;
use crate::config::{Config, FederatedEndpoint};
use crate::mcp::{codes, methods, Rejection};

use super::route::{RouteRef, RouteTable};
use super::Gateway;
use catalog::{Kind, Store};
use view::{Contribution, View};

/// The federated endpoints of one gateway generation.
pub struct Federation {
    pub endpoints: Vec<Endpoint>,
    pub catalog: CatalogConfig,
}

/// One federated endpoint: its config, its pools (gateway indices, in priority order) and its
/// routing view, rebuilt when the catalogs change.
pub struct Endpoint {
    pub config: FederatedEndpoint,
    pub pools: Vec<usize>,
    view: ArcSwap<View>,
}

impl Federation {
    pub fn build(config: &Config, table: &RouteTable) -> Option<Federation> {
        let f = config.federation.as_ref()?;
        let index = |p: &String| {
            table
                .pools
                .iter()
                .position(|n| n == p)
                .expect("validated pool reference")
        };
        let endpoints = f
            .endpoints
            .iter()
            .map(|e| Endpoint {
                pools: e.pools.iter().map(index).collect(),
                config: e.clone(),
                view: ArcSwap::from_pointee(View::unbuilt()),
            })
            .collect();
        Some(Federation {
            endpoints,
            catalog: f.catalog.clone(),
        })
    }

    /// The federated endpoint at `path`.
    pub fn endpoint_of(&self, path: &str) -> Option<usize> {
        self.endpoints.iter().position(|e| e.config.path == path)
    }

    /// Every pool some endpoint federates, once each.
    pub fn pools(&self) -> Vec<usize> {
        let mut all: Vec<usize> = self
            .endpoints
            .iter()
            .flat_map(|e| e.pools.iter().copied())
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

impl Endpoint {
    /// The routing view, rebuilt first if the catalogs changed since it was built.
    pub fn view(
        &self,
        store: &Store,
        pool_names: &[String],
        keep_stale: std::time::Duration,
    ) -> Arc<View> {
        let version = store.version.load(Ordering::Acquire);
        let current = self.view.load_full();
        let now = Instant::now();
        if current.version == version && current.until.is_none_or(|t| now < t) {
            return current;
        }
        let cats: Vec<_> = self
            .pools
            .iter()
            .map(|p| (*p, store.get(&pool_names[*p])))
            .collect();
        let by_kind: Vec<(Kind, Vec<Contribution>)> = Kind::ALL
            .into_iter()
            .map(|k| {
                let parts = cats
                    .iter()
                    .filter(|(_, c)| c.routes(now, keep_stale))
                    .filter_map(|(p, c)| {
                        let items = &c.list(k)?.items;
                        Some(Contribution {
                            pool: *p,
                            pool_name: &pool_names[*p],
                            items,
                        })
                    })
                    .collect();
                (k, parts)
            })
            .collect();
        let mut built = View::build(&self.config, &by_kind, version);
        // A stale catalog routes until it expires: the view is rebuilt then.
        built.until = cats
            .iter()
            .filter(|(_, c)| c.failing.is_some())
            .filter_map(|(_, c)| Some(c.loaded? + keep_stale))
            .filter(|t| *t > now)
            .min();
        let built = Arc::new(built);
        self.view.store(built.clone());
        built
    }
}

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
pub fn enter(ctx: &mut super::RequestCtx, endpoint: usize, decision: Decision) -> RouteRef {
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

/// A request on a federated endpoint: which endpoint, whether the gateway answers it, and the
/// server's own name when the client called a prefixed one.
#[derive(Debug, Clone, Default)]
pub struct Federated {
    pub endpoint: usize,
    pub answer: bool,
    pub rename: Option<String>,
    /// The answer to a name the endpoint does not serve, given after the body check.
    pub refuse: Option<Rejection>,
}

/// The federation's metrics (registered once, carried over reloads with the registry).
pub struct FederationMetrics {
    /// Catalog refreshes by pool and result.
    pub refreshes: prometheus::IntCounterVec,
    /// 1 for each pool's current catalog state.
    pub state: prometheus::IntGaugeVec,
    /// Entries in each pool's catalog, by kind.
    pub entries: prometheus::IntGaugeVec,
    /// Names two or more pools of an endpoint serve.
    pub collisions: prometheus::IntGaugeVec,
    /// Merged answers by endpoint and method.
    pub answers: prometheus::IntCounterVec,
    /// Where each pool's part of a merged answer came from: catalog, fetched or unavailable.
    pub parts: prometheus::IntCounterVec,
}

impl FederationMetrics {
    pub fn register(r: &prometheus::Registry) -> prometheus::Result<FederationMetrics> {
        use prometheus::{IntCounterVec, IntGaugeVec, Opts};
        let counter = |n: &str, h: &str, l: &[&str]| -> prometheus::Result<IntCounterVec> {
            let c = IntCounterVec::new(Opts::new(n, h), l)?;
            r.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let gauge = |n: &str, h: &str, l: &[&str]| -> prometheus::Result<IntGaugeVec> {
            let g = IntGaugeVec::new(Opts::new(n, h), l)?;
            r.register(Box::new(g.clone()))?;
            Ok(g)
        };
        Ok(FederationMetrics {
            refreshes: counter("catalog_refreshes_total", "Federation catalog refreshes by pool and result (ok, failed).", &["pool", "result"])?,
            state: gauge("catalog_state", "1 for the state each federated pool's catalog is in: unknown (never loaded), fresh, stale (refresh failing, last catalog in use) or expired (refresh failing past catalog.keep_stale).", &["pool", "state"])?,
            entries: gauge("catalog_entries", "Entries in each federated pool's catalog, by list (tools, prompts, resources, resourceTemplates).", &["pool", "list"])?,
            collisions: gauge("federation_collisions", "Names or URIs two or more pools of a federated endpoint serve.", &["endpoint"])?,
            answers: counter("federation_answers_total", "Merged answers (lists, server/discover) by federated endpoint and method.", &["endpoint", "method"])?,
            parts: counter("federation_parts_total", "Each pool's part of a merged answer, by where it came from: catalog (fresh by the pool's own ttlMs and cacheScope), fetched (asked again for this answer) or unavailable.", &["pool", "list", "source"])?,
        })
    }
}

/// Whether federation must act on this request's body (answer it, refuse an unknown name,
/// rename) but `plan` would leave it on pingora's pipe unread (past 64 KiB on a TLS or h2 pool).
pub fn needs_body_first(ctx: &super::RequestCtx, plan: super::inspect::Plan) -> bool {
    use super::inspect::Plan;
    let acts = |f: &Federated| f.answer || f.refuse.is_some() || f.rename.is_some();
    ctx.federated.as_ref().is_some_and(acts) && matches!(plan, Plan::Hold | Plan::Stream)
}

/// After the body check, on a federated endpoint (`Some`: answered): a merged answer, or the
/// server's name put back into a prefixed call, or `completion/complete` routed by its `ref`.
pub async fn on_checked(
    session: &mut pingora::proxy::Session,
    ctx: &mut super::RequestCtx,
    body: &bytes::Bytes,
) -> pingora::Result<Option<bool>> {
    let Some(f) = ctx.federated.clone() else {
        return Ok(None);
    };
    if let Some(rej) = f.refuse {
        let id = ctx.progress.envelope().and_then(|e| e.id.clone());
        return super::refuse(session, ctx, rej, id).await.map(Some);
    }
    if f.answer {
        return answer::respond(session, ctx, f.endpoint, body)
            .await
            .map(Some);
    }
    if ctx.method.as_deref() == Some(methods::COMPLETION_COMPLETE) {
        route_completion(ctx, &f, body);
    }
    let Some(server_name) = ctx.federated.as_ref().and_then(|f| f.rename.clone()) else {
        return Ok(None);
    };
    let path: &[&str] = match ctx.method.as_deref() {
        Some(methods::COMPLETION_COMPLETE) => &["params", "ref", "name"],
        _ => &["params", "name"],
    };
    if !super::direct::leg_for(session, ctx) {
        // Validation keeps prefixed endpoints on plain HTTP/1.1 pools; an upgrade request
        // would leave on pingora's pipe with the client's bytes.
        let rej = Rejection::new(
            400,
            codes::INVALID_REQUEST,
            "not-renamable",
            "A call to a prefixed name cannot be a protocol upgrade",
        );
        let id = ctx.progress.envelope().and_then(|e| e.id.clone());
        return super::refuse(session, ctx, rej, id).await.map(Some);
    }
    match crate::mcp::rewrite::replace_string(body, path, &server_name) {
        Some(new) => {
            ctx.body_len = new.len();
            ctx.in_hand = bytes::Bytes::from(new);
            Ok(None)
        }
        None => {
            let rej = Rejection::new(
                400,
                codes::INVALID_PARAMS,
                "unnamed",
                "The request names no tool or prompt in its body",
            );
            let id = ctx.progress.envelope().and_then(|e| e.id.clone());
            super::refuse(session, ctx, rej, id).await.map(Some)
        }
    }
}

/// `completion/complete` names its target in `params.ref` (no `Mcp-Name`): route it there.
fn route_completion(ctx: &mut super::RequestCtx, f: &Federated, body: &[u8]) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    let r = &v["params"]["ref"];
    let gw = ctx.gw.clone();
    let Some(fed) = gw.federation.as_ref() else {
        return;
    };
    let ep = &fed.endpoints[f.endpoint];
    let view = ep.view(&gw.catalogs, &gw.table.pools, fed.catalog.keep_stale);
    let target = match (r["type"].as_str(), r["name"].as_str(), r["uri"].as_str()) {
        (Some("ref/prompt"), Some(n), _) => view
            .prompt(n)
            .map(|t| (t.pool, (t.name != n).then(|| t.name.clone()))),
        (Some("ref/resource"), _, Some(u)) => view.resource(u).map(|p| (p, None)),
        _ => None,
    };
    if let Some((pool, rename)) = target {
        ctx.pool = pool;
        ctx.route = Some(RouteRef::Learned(pool));
        if let Some(fc) = ctx.federated.as_mut() {
            fc.rename = rename;
        }
    }
}
