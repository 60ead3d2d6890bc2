//! `routes:`, `default_route:` and `validation:`: the ordered route table (what a route matches,
//! its pool, its share of body-checked requests, its auth and cache settings) and route labels.

use serde::{Deserialize, Deserializer};

use super::{auth, CacheConfig};
use crate::config::Pattern;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// A label for logs, metrics and `check` (default `route-N`).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(rename = "match", default)]
    pub matcher: Match,
    pub pool: String,
    #[serde(default)]
    pub validation: Option<Validation>,
    /// Per-route auth settings (needs `auth`).
    #[serde(default)]
    pub auth: Option<auth::RouteAuth>,
    /// The route's edge cache (absent: on, with the defaults of [`CacheConfig`]).
    #[serde(default)]
    pub cache: Option<CacheConfig>,
}

/// What a route matches: `Mcp-Method` and `Mcp-Name` patterns (exact, `prefix*` or glob with
/// `*` and `?`). An absent pattern matches anything; a `name` pattern never matches a request
/// whose method carries no `Mcp-Name`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Match {
    #[serde(default)]
    pub method: Option<Pattern>,
    #[serde(default)]
    pub name: Option<Pattern>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DefaultRoute {
    pub pool: String,
    #[serde(default)]
    pub validation: Option<Validation>,
    /// Per-route auth settings (needs `auth`).
    #[serde(default)]
    pub auth: Option<auth::RouteAuth>,
    /// The default route's edge cache (absent: on, with the defaults of [`CacheConfig`]).
    #[serde(default)]
    pub cache: Option<CacheConfig>,
}

#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Validation {
    /// The share of requests whose headers are checked against the body (0.0 to 1.0). The rest
    /// take the header-only fast path: routed on the claimed headers, body forwarded unread.
    #[serde(default = "default_sample", deserialize_with = "de_sample")]
    pub sample: f64,
}

impl Default for Validation {
    fn default() -> Self {
        Validation { sample: 1.0 }
    }
}

fn default_sample() -> f64 {
    1.0
}

fn de_sample<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "validation.sample must be between 0.0 (never check) and 1.0 (check every request), got {v}"
        )))
    }
}

/// The label of route `i`.
pub(crate) fn route_name(r: &RouteConfig, i: usize) -> String {
    r.name.clone().unwrap_or_else(|| format!("route-{}", i + 1))
}

/// Which route a request took: one of the ordered routes (`routes[i]`), the default, or the
/// route a federated endpoint learned for a pool (by pool index). Named here, below every
/// component that keeps something per route (the gateway's stages, `auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteRef {
    Index(usize),
    Default,
    Learned(usize),
}

impl super::Config {
    /// The pool the main endpoint passes 2025-era clients through to: the pool of the route
    /// `initialize` takes (the first route whose method matches it with no name to match, else
    /// the default route), when it says `legacy_clients: pass`. None when a federated endpoint
    /// takes the main path (it merges several pools: its 2025-era clients are bridged).
    pub(crate) fn passing_pool(&self) -> Option<&str> {
        let federated = self.federation.iter().flat_map(|f| &f.endpoints);
        if federated.into_iter().any(|e| e.path == self.endpoint) {
            return None;
        }
        let first = self.routes.iter().find(|r| {
            r.matcher.name.is_none()
                && r.matcher
                    .method
                    .as_ref()
                    .is_none_or(|m| m.matches(crate::mcp::methods::INITIALIZE))
        });
        let pool = match first {
            Some(r) => r.pool.as_str(),
            None => self.default_route.as_ref()?.pool.as_str(),
        };
        let passes = self.pools.get(pool)?.legacy_clients == super::pools::PoolLegacyClients::Pass;
        passes.then_some(pool)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;

    fn config(extra: &str) -> Config {
        let text = format!(
            "pools:\n  dual: {{instances: [127.0.0.1:1], legacy_clients: pass}}\n  other: {{instances: [127.0.0.1:2]}}\n{extra}"
        );
        Config::parse(&text, "g.yaml").unwrap()
    }

    #[test]
    fn the_main_endpoint_passes_to_the_pool_initialize_routes_to_when_it_says_pass() {
        let c = config("default_route: {pool: dual}\n");
        assert_eq!(c.passing_pool(), Some("dual"));
        let c = config("default_route: {pool: other}\n");
        assert_eq!(c.passing_pool(), None);
        // The first route whose method matches initialize with no name decides.
        let c = config(
            "routes:\n  - {match: {method: tools/call, name: x}, pool: other}\n  - {match: {method: \"*\"}, pool: dual}\ndefault_route: {pool: other}\n",
        );
        assert_eq!(c.passing_pool(), Some("dual"));
        let c = config("routes:\n  - {match: {method: initialize}, pool: other}\ndefault_route: {pool: dual}\n");
        assert_eq!(c.passing_pool(), None);
        // A federated endpoint on the main path merges pools: its legacy clients are bridged.
        let c = config(
            "default_route: {pool: dual}\nfederation:\n  endpoints:\n    - {path: /mcp, pools: [dual, other]}\n",
        );
        assert_eq!(c.passing_pool(), None);
    }
}
