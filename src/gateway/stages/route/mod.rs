//! Route stage: match the claimed `Mcp-Method` / `Mcp-Name` against the ordered route table.
//!
//! Runs before the body is read, on what the headers *claim*; the validate stage later proves
//! the claim against the body (or the route's sample skips that proof). Matching allocates
//! nothing; exact routes are found by [`RouteIndex`] in constant time.

/// Patterns are config values (`config::pattern`); this path stays for existing callers.
pub(crate) use crate::config::Pattern;

pub(crate) mod index;

use crate::config::{route_name, Config, Validation};
use index::RouteIndex;

/// One resolved route.
#[derive(Debug, Clone)]
pub struct Route {
    pub name: String,
    pub method: Option<Pattern>,
    pub mcp_name: Option<Pattern>,
    /// Index of the pool in [`RouteTable::pools`].
    pub pool: usize,
    /// Share of requests whose headers are checked against the body.
    pub sample: f64,
}

impl Route {
    /// Whether the route's conditions hold for the claims (absent condition: anything).
    pub(crate) fn matches(&self, method: Option<&str>, name: Option<&str>) -> bool {
        let ok = |p: &Option<Pattern>, v: Option<&str>| match (p, v) {
            (None, _) => true,
            (Some(p), Some(v)) => p.matches(v),
            (Some(_), None) => false,
        };
        ok(&self.method, method) && ok(&self.mcp_name, name)
    }
}

/// The ordered routes plus the default.
#[derive(Debug, Clone)]
pub struct RouteTable {
    pub routes: Vec<Route>,
    pub default: Option<Route>,
    /// Pool names, indexed by [`Route::pool`].
    pub pools: Vec<String>,
    /// Finds the first match among `routes` (built from them in [`RouteTable::from_config`]).
    pub index: RouteIndex,
    /// One learned route per pool, indexed like `pools`: where a federated endpoint sends a
    /// call its catalog routes ([`crate::gateway::federation::stages`]). Never matched by claims alone.
    pub learned: Vec<Route>,
}

impl RouteTable {
    pub fn from_config(cfg: &Config) -> RouteTable {
        let pools: Vec<String> = cfg.pools.keys().cloned().collect();
        let pool_index = |name: &str| {
            pools
                .iter()
                .position(|p| p == name)
                .expect("validated pool reference")
        };
        let sample = |v: Option<Validation>| v.unwrap_or(cfg.validation).sample;
        let routes: Vec<Route> = cfg
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| Route {
                name: route_name(r, i),
                method: r.matcher.method.clone(),
                mcp_name: r.matcher.name.clone(),
                pool: pool_index(&r.pool),
                sample: sample(r.validation),
            })
            .collect();
        let default = cfg.default_route.as_ref().map(|d| Route {
            name: "default".into(),
            method: None,
            mcp_name: None,
            pool: pool_index(&d.pool),
            sample: sample(d.validation),
        });
        let learned = pools
            .iter()
            .enumerate()
            .map(|(i, p)| Route {
                name: format!("federated:{p}"),
                method: None,
                mcp_name: None,
                pool: i,
                // A federated call is always checked: the catalog routes on the name the body
                // must carry, and a prefixed name is rewritten in it.
                sample: 1.0,
            })
            .collect();
        RouteTable {
            index: RouteIndex::new(&routes),
            routes,
            default,
            pools,
            learned,
        }
    }

    /// The route for a request claiming `method` and (for the methods that carry one) `name`.
    pub fn select(&self, method: Option<&str>, name: Option<&str>) -> Option<&Route> {
        self.select_ref(method, name).and_then(|r| self.get(r))
    }

    /// Like [`RouteTable::select`], as a small handle a request can carry.
    ///
    /// (See [`no_route`] for the answer when there is none.)
    pub(crate) fn select_ref(&self, method: Option<&str>, name: Option<&str>) -> Option<RouteRef> {
        match self.index.first_match(&self.routes, method, name) {
            Some(i) => Some(RouteRef::Index(i)),
            None => self.default.as_ref().map(|_| RouteRef::Default),
        }
    }

    pub(crate) fn get(&self, r: RouteRef) -> Option<&Route> {
        match r {
            RouteRef::Index(i) => self.routes.get(i),
            RouteRef::Default => self.default.as_ref(),
            RouteRef::Learned(p) => self.learned.get(p),
        }
    }
}

pub use crate::config::RouteRef;

/// The 404 answer for a request that matches no route (and there is no `default_route`).
pub(crate) fn no_route(method: Option<&str>, name: Option<&str>) -> crate::mcp::Rejection {
    let msg = format!(
        "No route for method {:?}{}: this gateway has no default_route",
        method.unwrap_or(""),
        name.map(|n| format!(" name {n:?}")).unwrap_or_default()
    );
    crate::mcp::Rejection::new(404, crate::mcp::codes::METHOD_NOT_FOUND, "no-route", msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(yaml: &str) -> RouteTable {
        RouteTable::from_config(&Config::parse(yaml, "t").unwrap())
    }

    #[test]
    fn first_match_wins_then_default() {
        let t = table(
            "pools:\n  a: {instances: [127.0.0.1:1]}\n  b: {instances: [127.0.0.1:2]}\n  c: {instances: [127.0.0.1:3]}\n\
             routes:\n  - {match: {method: tools/call, name: deploy_*}, pool: a}\n  - {match: {method: tools/*}, pool: b}\n\
             default_route: {pool: c}\n",
        );
        let pool =
            |m: Option<&str>, n: Option<&str>| t.select(m, n).map(|r| t.pools[r.pool].as_str());
        assert_eq!(pool(Some("tools/call"), Some("deploy_x")), Some("a"));
        assert_eq!(pool(Some("tools/call"), Some("lookup")), Some("b"));
        assert_eq!(pool(Some("tools/list"), None), Some("b"));
        assert_eq!(pool(Some("server/discover"), None), Some("c"));
        assert_eq!(pool(None, None), Some("c"));
    }

    #[test]
    fn without_default_nothing_matches() {
        let t = table("pools:\n  a: {instances: [127.0.0.1:1]}\nroutes:\n  - {match: {method: tools/call}, pool: a}\n");
        assert!(t.select(Some("tools/list"), None).is_none());
        assert!(t.select(Some("tools/call"), Some("x")).is_some());
    }
}
