//! `federation:`: endpoints that put several different pools behind one path. The gateway
//! learns what each pool serves (its catalog), routes calls by name to the pool that serves
//! them, and answers the list methods itself by merging the pools' lists.

use serde::Deserialize;
use std::time::Duration;

use super::{humantime_serde_compat, Pattern};

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FederationConfig {
    /// The federated endpoints, each a path and the pools it merges.
    pub endpoints: Vec<FederatedEndpoint>,
    /// How the catalogs are kept fresh.
    #[serde(default)]
    pub catalog: CatalogConfig,
}

/// One federated endpoint: a path, the pools behind it, and what it exposes.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FederatedEndpoint {
    /// The path clients POST to (may be `endpoint` itself: that endpoint is then federated).
    pub path: String,
    /// The pools merged here, in priority order (first: highest).
    pub pools: Vec<String>,
    /// What happens when two pools serve the same tool or prompt name.
    #[serde(default)]
    pub collisions: Collisions,
    /// With `collisions: prefix`: what goes between the pool's name and the server's name.
    #[serde(default = "d_separator")]
    pub separator: String,
    /// Which tools the endpoint exposes (by the name clients see).
    #[serde(default)]
    pub tools: Expose,
    /// Which prompts the endpoint exposes (by the name clients see).
    #[serde(default)]
    pub prompts: Expose,
    /// Which resources the endpoint exposes (by URI, also for resource templates).
    #[serde(default)]
    pub resources: Expose,
    /// The `instructions` of the endpoint's own `server/discover` answer.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Entries per page of a merged list.
    #[serde(default = "d_page_size")]
    pub page_size: usize,
}

/// The collision policy of an endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Collisions {
    /// Every tool and prompt is named `<pool><separator><name>`; the gateway names it back in
    /// calls. Names never collide and never depend on what the other pools serve.
    #[default]
    Prefix,
    /// Names stay as the servers name them; on a collision the pool listed first serves it.
    Priority,
    /// Names stay as the servers name them; a name two pools serve is exposed by neither.
    Refuse,
}

impl Collisions {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Collisions::Prefix => "prefix",
            Collisions::Priority => "priority",
            Collisions::Refuse => "refuse",
        }
    }
}

/// Include and exclude patterns (exact, `prefix*` or glob); empty `include` includes all.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expose {
    #[serde(default)]
    pub include: Vec<Pattern>,
    #[serde(default)]
    pub exclude: Vec<Pattern>,
}

impl Expose {
    /// Whether the endpoint exposes `name`.
    pub(crate) fn allows(&self, name: &str) -> bool {
        let included = self.include.is_empty() || self.include.iter().any(|p| p.matches(name));
        included && !self.exclude.iter().any(|p| p.matches(name))
    }
}

/// When catalogs are refreshed, and how long a pool that cannot be reached keeps its last one.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// The soonest a catalog is fetched again (a list with a shorter `ttlMs`, or `0`, waits this
    /// long; lists answered to clients are fetched per answer when not fresh).
    #[serde(default = "d_floor", with = "humantime_serde_compat")]
    pub refresh_floor: Duration,
    /// The latest a catalog is fetched again, whatever its `ttlMs`.
    #[serde(default = "d_ceiling", with = "humantime_serde_compat")]
    pub refresh_ceiling: Duration,
    /// How long a pool that cannot be reached keeps routing by its last catalog (marked stale).
    #[serde(default = "d_keep_stale", with = "humantime_serde_compat")]
    pub keep_stale: Duration,
    /// The time one catalog request may take.
    #[serde(default = "d_timeout", with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// The most pages read of one list.
    #[serde(default = "d_max_pages")]
    pub max_pages: usize,
}

impl Default for CatalogConfig {
    fn default() -> Self {
        CatalogConfig {
            refresh_floor: d_floor(),
            refresh_ceiling: d_ceiling(),
            keep_stale: d_keep_stale(),
            timeout: d_timeout(),
            max_pages: d_max_pages(),
        }
    }
}

fn d_separator() -> String {
    "__".into()
}
fn d_page_size() -> usize {
    100
}
fn d_floor() -> Duration {
    Duration::from_secs(5)
}
fn d_ceiling() -> Duration {
    Duration::from_secs(300)
}
fn d_keep_stale() -> Duration {
    Duration::from_secs(600)
}
fn d_timeout() -> Duration {
    Duration::from_secs(5)
}
fn d_max_pages() -> usize {
    100
}

impl FederationConfig {
    /// Cross-key checks; `err(path, message)` places the message at the key.
    pub(super) fn validate(
        &self,
        cfg: &super::Config,
        err: &dyn Fn(&str, String) -> super::ConfigError,
    ) -> Result<(), super::ConfigError> {
        let c = &self.catalog;
        if c.refresh_floor.is_zero() || c.refresh_floor > c.refresh_ceiling {
            return Err(err("federation.catalog.refresh_floor", format!(
                "federation.catalog.refresh_floor: must be above 0 and at most refresh_ceiling ({:?}), got {:?}",
                c.refresh_ceiling, c.refresh_floor
            )));
        }
        if c.timeout.is_zero() || c.max_pages == 0 {
            return Err(err(
                "federation.catalog",
                "federation.catalog: timeout and max_pages must be above 0".into(),
            ));
        }
        if self.endpoints.is_empty() {
            return Err(err("federation.endpoints", "federation.endpoints: list at least one endpoint (path and pools), or remove federation".into()));
        }
        let mut paths = std::collections::HashSet::new();
        for (i, e) in self.endpoints.iter().enumerate() {
            let at = format!("federation.endpoints[{i}]");
            if !e.path.starts_with('/') || !paths.insert(e.path.as_str()) {
                return Err(err(&format!("{at}.path"), format!(
                    "{at}.path: {:?} must be a path starting with '/' that no other federated endpoint uses",
                    e.path
                )));
            }
            if e.pools.is_empty() {
                return Err(err(
                    &format!("{at}.pools"),
                    format!("{at}.pools: list the pools this endpoint merges"),
                ));
            }
            let mut seen = std::collections::HashSet::new();
            for (j, p) in e.pools.iter().enumerate() {
                let key = format!("{at}.pools[{j}]");
                let Some(pool) = cfg.pools.get(p) else {
                    let known: Vec<&str> = cfg.pools.keys().map(String::as_str).collect();
                    return Err(err(
                        &key,
                        format!("{key}: no pool named {p:?} (pools: {})", known.join(", ")),
                    ));
                };
                if !seen.insert(p.as_str()) {
                    return Err(err(&key, format!("{key}: pool {p:?} is listed twice")));
                }
                if pool.http == super::tls::UpstreamHttp::H2 {
                    return Err(err(&key, format!(
                        "{key}: pool {p:?} speaks only h2; the catalog is read over HTTP/1.1 (set pools.{p}.http: auto or h1)"
                    )));
                }
                let plain = pool.tls.is_none()
                    && pool.http == super::tls::UpstreamHttp::H1
                    && cfg.connections.upstream_leg == super::UpstreamLeg::Direct;
                if e.collisions == Collisions::Prefix && !plain {
                    return Err(err(&format!("{at}.collisions"), format!(
                        "{at}.collisions: prefix renames tools in the request body, which the gateway does on plain HTTP/1.1 pools on the direct leg only (connections.upstream_leg: direct), and pool {p:?} uses TLS or h2 or another leg; use collisions: priority or refuse"
                    )));
                }
            }
            let name_char = |ch: char| ch.is_ascii_alphanumeric() || "_-.".contains(ch);
            if e.collisions == Collisions::Prefix
                && (e.separator.is_empty() || !e.separator.chars().all(name_char))
            {
                return Err(err(&format!("{at}.separator"), format!(
                    "{at}.separator: {:?} must be one or more of A-Z a-z 0-9 _ - . (the characters of a tool name)",
                    e.separator
                )));
            }
            if e.page_size == 0 {
                return Err(err(
                    &format!("{at}.page_size"),
                    format!("{at}.page_size: must be at least 1"),
                ));
            }
        }
        Ok(())
    }
}

impl FederationConfig {
    /// What `mcp-edge check` prints about federation.
    pub(crate) fn describe(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::from("\nfederated endpoints (routes learned from each pool's catalog; explicit routes first)\n");
        for e in &self.endpoints {
            let names = match e.collisions {
                Collisions::Prefix => {
                    format!("tools and prompts named <pool>{}<name>", e.separator)
                }
                Collisions::Priority => {
                    "names as served; on a collision the pool listed first serves it".into()
                }
                Collisions::Refuse => {
                    "names as served; a name two pools serve is exposed by neither".into()
                }
            };
            let _ = writeln!(
                out,
                "  POST {:<14} pools {}  ({names})",
                e.path,
                e.pools.join(", ")
            );
            for (what, x) in [
                ("tools", &e.tools),
                ("prompts", &e.prompts),
                ("resources", &e.resources),
            ] {
                if x.include.is_empty() && x.exclude.is_empty() {
                    continue;
                }
                let list = |v: &[super::Pattern]| {
                    v.iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                let include = if x.include.is_empty() {
                    "*".to_string()
                } else {
                    list(&x.include)
                };
                let exclude = if x.exclude.is_empty() {
                    String::new()
                } else {
                    format!(", except {}", list(&x.exclude))
                };
                let _ = writeln!(
                    out,
                    "  {:<19} exposes {what} {include}{exclude}; calls to others are refused",
                    ""
                );
            }
            let _ = writeln!(out, "  {:<19} lists, server/discover and subscriptions/listen answered by the gateway, merged, {} per page", "", e.page_size);
        }
        let c = &self.catalog;
        let _ = writeln!(
            out,
            "  catalogs: refreshed when their ttlMs runs out (between {:?} and {:?}), on list_changed and on reload; a pool that cannot be reached routes by its last catalog for {:?}",
            c.refresh_floor, c.refresh_ceiling, c.keep_stale
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn err(federation: &str) -> String {
        let y = format!("pools:\n  a: {{instances: [127.0.0.1:1]}}\n  b: {{instances: [127.0.0.1:2], tls: {{verify: false}}}}\nfederation:\n{federation}");
        Config::parse(&y, "f.yaml").unwrap_err().to_string()
    }

    #[test]
    fn mistakes_name_the_key_line_and_fix() {
        let e = err("  endpoints:\n    - {path: /mcp, pools: [a, nope]}\n");
        assert!(
            e.starts_with("f.yaml:6:31:")
                && e.contains("pools[1]: no pool named \"nope\" (pools: a, b)"),
            "{e}"
        );
        let e =
            err("  endpoints:\n    - {path: /mcp, pools: [a]}\n    - {path: /mcp, pools: [a]}\n");
        assert!(
            e.contains("endpoints[1].path") && e.contains("that no other federated endpoint uses"),
            "{e}"
        );
        let e = err("  endpoints:\n    - {path: /mcp, pools: [a, b]}\n");
        assert!(
            e.contains("collisions: prefix renames tools")
                && e.contains("use collisions: priority or refuse"),
            "{e}"
        );
        let e = err("  endpoints:\n    - {path: /mcp, pools: [a], separator: \"::\"}\n");
        assert!(e.contains("separator"), "{e}");
        let e = err("  catalog: {refresh_floor: 10m, refresh_ceiling: 1m}\n  endpoints:\n    - {path: /mcp, pools: [a]}\n");
        assert!(e.contains("refresh_floor"), "{e}");
        let ok = "pools:\n  a: {instances: [127.0.0.1:1]}\n  b: {instances: [127.0.0.1:2], tls: {verify: false}}\nfederation:\n  endpoints:\n    - {path: /mcp, pools: [a, b], collisions: priority}\n";
        Config::parse(ok, "f.yaml").unwrap();
    }
}
