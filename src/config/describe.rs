//! The resolved configuration as `mcp-edge check` prints it: listeners, pools, the route table
//! (first match wins), caches, limits and timeouts.

use std::fmt::Write as _;

use super::{cache, redis, route_name, Balance, Config, HashKey, HealthCheckKind};
use crate::config::Pattern;

/// `*` for a pattern that matches anything.
fn pat(p: &Option<Pattern>) -> String {
    p.as_ref().map_or("*".to_string(), |p| p.to_string())
}

impl Config {
    /// The route table as `mcp-edge check` prints it.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        self.describe_listeners(&mut out);
        self.describe_pools(&mut out);
        self.describe_routes(&mut out);
        if let Some(f) = &self.federation {
            out.push_str(&f.describe());
        }
        self.describe_caches(&mut out);
        out.push_str(&super::policy::describe(&self.argument_policy));
        out.push_str(&super::audit::describe(&self.audit));
        self.describe_limits(&mut out);
        let passing = self.passing_pool().map(|p| (self.endpoint.as_str(), p));
        out.push_str(&super::legacy::describe(
            &self.legacy,
            self.endpoints(),
            passing,
        ));
        self.describe_timeouts(&mut out);
        out
    }

    /// Every MCP endpoint path: the main one and the federated ones.
    pub(crate) fn endpoints(&self) -> Vec<&str> {
        let fed = self.federation.iter().flat_map(|f| &f.endpoints);
        std::iter::once(self.endpoint.as_str())
            .chain(fed.map(|e| e.path.as_str()))
            .collect()
    }

    /// Listeners, threads, auth, origins and the upstream header.
    fn describe_listeners(&self, out: &mut String) {
        let admin = self
            .listen
            .admin
            .map_or("off".to_string(), |a| a.to_string());
        let _ = writeln!(
            out,
            "listen    mcp {} (POST {})   admin {admin}",
            self.listen.mcp, self.endpoint
        );
        let _ = writeln!(
            out,
            "threads   {} (work stealing {})",
            self.threads,
            if self.work_stealing { "on" } else { "off" }
        );
        if let Some(a) = &self.auth {
            out.push_str(&a.describe());
        }
        let origins: Vec<String> = self.origins.allow.iter().map(|p| p.to_string()).collect();
        let _ = writeln!(
            out,
            "origins   requests with an Origin header must match: {}",
            origins.join(" ")
        );
        let _ = writeln!(
            out,
            "upstream header  {}",
            self.upstream_header.as_deref().unwrap_or("off")
        );
    }

    /// Each pool: its balancing, instances, health checks, credentials, weights and slow start.
    fn describe_pools(&self, out: &mut String) {
        let _ = writeln!(out, "\npools");
        for (name, p) in &self.pools {
            let mut policy = match p.balance {
                Balance::Hash => {
                    format!("hash on {}", p.hash_key.clone().unwrap_or(HashKey::McpName))
                }
                other => other.label().to_string(),
            };
            if let Some(b) = p.load_bound {
                policy.push_str(&format!(", bound {b}"));
            }
            let _ = writeln!(out, "  {name:<12} {policy:<32} {}", p.instances.join(", "));
            if let Some(v) = p.era.legacy_version() {
                let _ = writeln!(out, "  {:<12} era: {v} (the gateway holds its sessions and turns its mid-call questions into input_required)", "");
            }
            if p.legacy_clients == super::pools::PoolLegacyClients::Pass {
                let _ = writeln!(out, "  {:<12} 2025-era clients: passed through (the instances serve both eras; each session pinned to the instance that opened it)", "");
            }
            let h = &p.health;
            let check = match h.check {
                HealthCheckKind::Mcp => format!("server/discover every {:?}", h.interval),
                HealthCheckKind::Tcp => format!("TCP connect every {:?}", h.interval),
                HealthCheckKind::Off => "no active checks".to_string(),
            };
            let _ = writeln!(
                out,
                "  {:<12} health: {check}; eject after {} failures",
                "", p.ejection.consecutive_failures
            );
            if let Some(o) = &p.outliers {
                let base = match o.baseline {
                    0.5 => "median".to_string(),
                    0.0 => "fastest".to_string(),
                    b => format!("q{b}"),
                };
                let _ = writeln!(
                    out,
                    "  {:<12} outliers: eject above {}x the pool's {base} latency (and {:?} over it) per {:?} window, {:?} doubling to {:?}, at most {}% out",
                    "", o.latency_ratio, o.min_gap, o.interval, o.base_ejection, o.max_ejection, o.max_ejected_percent
                );
            }
            if let Some(c) = &p.credentials {
                let _ = writeln!(out, "  {:<12} credentials: {}", "", c.describe());
            }
            if !p.weights.is_empty() || !p.slow_start.is_zero() {
                let w: Vec<String> = p.weights.iter().map(|(i, w)| format!("{i}={w}")).collect();
                let w = match w.is_empty() {
                    true => "equal weights".to_string(),
                    false => format!("weights {}", w.join(" ")),
                };
                let ramp = match p.slow_start.is_zero() {
                    true => "no slow start".to_string(),
                    false => format!("slow start over {:?}", p.slow_start),
                };
                let _ = writeln!(out, "  {:<12} {w}; {ramp}", "");
            }
        }
    }

    /// The route table (first match wins), then the default route.
    fn describe_routes(&self, out: &mut String) {
        let _ = writeln!(out, "\nroutes (first match wins)");
        let _ = writeln!(
            out,
            "  {:<4} {:<16} {:<20} {:<24} {:<12} check",
            "#", "route", "method", "name", "pool"
        );
        for (i, r) in self.routes.iter().enumerate() {
            let sample = r.validation.unwrap_or(self.validation).sample;
            let _ = writeln!(
                out,
                "  {:<4} {:<16} {:<20} {:<24} {:<12} {}",
                i + 1,
                route_name(r, i),
                pat(&r.matcher.method),
                pat(&r.matcher.name),
                r.pool,
                describe_sample(sample)
            );
        }
        match &self.default_route {
            Some(d) => {
                let sample = d.validation.unwrap_or(self.validation).sample;
                let _ = writeln!(
                    out,
                    "  {:<4} {:<16} {:<20} {:<24} {:<12} {}",
                    "-",
                    "default",
                    "*",
                    "*",
                    d.pool,
                    describe_sample(sample)
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "  -    (no default route: unmatched requests get 404 / -32601)"
                );
            }
        }
    }

    /// The cache settings of each route and of the default route.
    fn describe_caches(&self, out: &mut String) {
        let caches = self
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| (route_name(r, i), r.cache));
        let caches = caches.chain(
            self.default_route
                .iter()
                .map(|d| ("default".to_string(), d.cache)),
        );
        for (name, c) in caches {
            let _ = writeln!(out, "{}", cache::describe(&name, &c.unwrap_or_default()));
        }
    }

    /// Body and header limits, retries, rate limits and Redis.
    fn describe_limits(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\nlimits    body {} bytes, headers {} bytes",
            self.limits.max_body_bytes, self.limits.max_header_bytes
        );
        let _ = writeln!(
            out,
            "retries   a request that could not connect is tried on up to {} other instances",
            self.retries.connect_failure
        );
        if !self.rate_limits.is_empty() {
            let _ = writeln!(
                out,
                "\nrate limits (checked in order; the first that refuses answers 429)"
            );
            for l in &self.rate_limits {
                let key: Vec<String> = l.key.iter().map(|k| k.to_string()).collect();
                let key = if key.is_empty() {
                    "one bucket".to_string()
                } else {
                    key.join("+")
                };
                let m = &l.matcher;
                let scope = format!(
                    "route {} method {} name {}",
                    m.route.as_deref().unwrap_or("*"),
                    pat(&m.method),
                    pat(&m.name)
                );
                let burst = l.burst.map_or(String::new(), |b| format!(" burst {b}"));
                let dry = if l.dry_run { " (dry run)" } else { "" };
                let _ = writeln!(
                    out,
                    "  {:<16} {}{burst} per {key}; {scope}{dry}; {}",
                    l.name,
                    l.rate,
                    redis::describe_scope(l, self.redis.as_ref())
                );
            }
        }
        if let Some(r) = &self.redis {
            let _ = writeln!(out, "{}", redis::describe(r));
        }
    }

    /// Connect, read, write and idle timeouts, and shutdown timing.
    fn describe_timeouts(&self, out: &mut String) {
        let t = &self.timeouts;
        let _ = writeln!(
            out,
            "timeouts  connect {:?}, upstream read {:?}, upstream write {:?}, client body {:?}, idle {:?}",
            t.connect, t.upstream_read, t.upstream_write, t.downstream_read, t.upstream_idle
        );
        let _ = writeln!(
            out,
            "          client write {:?}; shutdown: grace {:?}, wind down {:?}",
            t.downstream_write, self.shutdown.grace_period, self.shutdown.wind_down
        );
    }
}

/// How often a route's requests are checked against their bodies.
fn describe_sample(s: f64) -> String {
    if s >= 1.0 {
        "every request".into()
    } else if s <= 0.0 {
        "off (header-only)".into()
    } else {
        format!("{:.0}% sampled", s * 100.0)
    }
}
