//! Validation after parsing: the checks that span keys or sections (dangling pool and route
//! references, duplicate names, sample shares, TLS, auth, Redis), each failing with the file,
//! the line, the key and the fix.

use std::net::ToSocketAddrs;

use super::{
    concurrency, flows, redis, route_name, tls, Balance, Config, ConfigError, HashKey,
    HealthCheckKind, KeyPart,
};

impl Config {
    pub(super) fn validate(&self, text: &str, file: &str) -> Result<(), ConfigError> {
        let err = |line: Option<usize>, message: String| ConfigError {
            file: file.to_string(),
            line,
            message,
        };
        if !self.endpoint.starts_with('/') {
            return Err(err(
                line_of(text, "endpoint", &self.endpoint),
                format!(
                    "endpoint: {:?} must be a path starting with '/', e.g. /mcp",
                    self.endpoint
                ),
            ));
        }
        if self.threads == 0 {
            return Err(err(
                line_of(text, "threads", "0"),
                "threads: must be at least 1".into(),
            ));
        }
        if self.pools.is_empty() {
            return Err(err(
                line_of(text, "pools", ""),
                "pools: define at least one pool with instances".into(),
            ));
        }
        for (name, pool) in &self.pools {
            if pool.instances.is_empty() {
                return Err(err(
                    line_of(text, name, ""),
                    format!("pools.{name}.instances: list at least one instance as host:port"),
                ));
            }
            for inst in &pool.instances {
                if inst
                    .to_socket_addrs()
                    .map(|mut a| a.next().is_none())
                    .unwrap_or(true)
                {
                    return Err(err(line_of(text, "", inst), format!(
                        "pools.{name}.instances: {inst:?} is not a host:port that resolves (write e.g. 127.0.0.1:7001 or backend:7001)"
                    )));
                }
            }
            let h = &pool.health;
            if h.check != HealthCheckKind::Off && (h.interval.is_zero() || h.timeout.is_zero()) {
                return Err(err(
                    line_of(text, "interval", "0"),
                    format!(
                        "pools.{name}.health: interval and timeout must be above 0s (0s would \
                         probe without pause); use e.g. `interval: 2s`, or `check: off`"
                    ),
                ));
            }
            if pool.hash_key.is_some() && pool.balance != Balance::Hash {
                return Err(err(line_of(text, "hash_key", ""), format!(
                    "pools.{name}.hash_key: only used with `balance: hash`; add it or remove hash_key"
                )));
            }
        }
        let known = || self.pools.keys().cloned().collect::<Vec<_>>().join(", ");
        let caches = self
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| (format!("routes[{i}]"), r.cache));
        let caches = caches.chain(
            self.default_route
                .iter()
                .map(|d| ("default_route".to_string(), d.cache)),
        );
        for (at, c) in caches {
            if let Some(Err((key, value, message))) = c.map(|c| c.check(&at)) {
                return Err(err(line_of(text, key, &value), message));
            }
        }
        for (i, r) in self.routes.iter().enumerate() {
            if let Some(v) = r.validation.filter(|v| v.sample < self.validation.sample) {
                return Err(err(
                    line_of(text, "sample", &v.sample.to_string()),
                    format!(
                        "routes[{i}].validation.sample: {} is below validation.sample {}. A \
                         client picks its route by what its headers claim, so a route checked \
                         less often would let a spoofer choose the weaker check; a route may \
                         only raise the share. Lower validation.sample instead",
                        v.sample, self.validation.sample
                    ),
                ));
            }
            if !self.pools.contains_key(&r.pool) {
                return Err(err(line_of(text, "pool", &r.pool), format!(
                    "routes[{i}].pool: no pool named {:?}; defined pools: {}. Add it under pools: or use one of those",
                    r.pool,
                    known()
                )));
            }
        }
        if let Some(d) = &self.default_route {
            if let Some(v) = d.validation.filter(|v| v.sample < self.validation.sample) {
                return Err(err(
                    line_of(text, "sample", &v.sample.to_string()),
                    format!(
                        "default_route.validation.sample: {} is below validation.sample {}; a \
                         route may only raise the share of checked requests",
                        v.sample, self.validation.sample
                    ),
                ));
            }
            if !self.pools.contains_key(&d.pool) {
                return Err(err(
                    line_of(text, "pool", &d.pool),
                    format!(
                        "default_route.pool: no pool named {:?}; defined pools: {}",
                        d.pool,
                        known()
                    ),
                ));
            }
        }
        let route_names: Vec<String> = self
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| route_name(r, i))
            .chain(std::iter::once("default".to_string()))
            .collect();
        for (i, l) in self.rate_limits.iter().enumerate() {
            if let Some(r) = &l.matcher.route {
                if !route_names.contains(r) {
                    return Err(err(
                        line_of(text, "route", r),
                        format!(
                            "rate_limits[{i}].match.route: no route named {r:?}; routes: {}",
                            route_names.join(", ")
                        ),
                    ));
                }
            }
            if l.max_keys == 0 {
                return Err(err(
                    line_of(text, "max_keys", ""),
                    format!("rate_limits[{i}].max_keys: must be at least 1"),
                ));
            }
            if self.rate_limits[..i].iter().any(|o| o.name == l.name) {
                return Err(err(
                    line_of(text, "name", &l.name),
                    format!(
                        "rate_limits[{i}].name: {:?} is used twice; limit names must be unique",
                        l.name
                    ),
                ));
            }
        }
        if let Err((key, message)) = redis::validate(self.redis.as_ref(), &self.rate_limits) {
            return Err(err(line_of(text, key, ""), message));
        }
        tls::check_listeners(&self.listen.tls, self.listen.mcp, self.listen.admin)
            .and_then(|()| {
                self.pools
                    .iter()
                    .try_for_each(|(n, p)| tls::check_pool(n, p.tls.as_ref(), p.http))
            })
            .map_err(|(key, msg)| {
                let leaf = tls::leaf_key(&key);
                err(line_of(text, leaf, ""), format!("{key}: {msg}"))
            })?;
        self.validate_auth(text, file)?;
        concurrency::validate(&self.concurrency_limits, &route_names, text, file)?;
        flows::validate(&self.flows, &self.tracing, text, file)?;
        if self.limits.max_body_bytes == 0 {
            return Err(err(
                line_of(text, "max_body_bytes", ""),
                "limits.max_body_bytes: must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// The `auth:` section, and the keys elsewhere that need it.
    fn validate_auth(&self, text: &str, file: &str) -> Result<(), ConfigError> {
        let needs_auth = self
            .rate_limits
            .iter()
            .any(|l| l.key.iter().any(|k| matches!(k, KeyPart::Claim(_))))
            || self
                .pools
                .values()
                .any(|p| matches!(p.hash_key, Some(HashKey::Claim(_))))
            || self.routes.iter().any(|r| r.auth.is_some())
            || self
                .default_route
                .as_ref()
                .is_some_and(|d| d.auth.is_some());
        match &self.auth {
            Some(a) => {
                let pools: Vec<&str> = self.pools.keys().map(String::as_str).collect();
                a.validate(&pools, |k, v| line_of(text, k, v), file)
            }
            None if needs_auth => Err(ConfigError {
                file: file.to_string(),
                line: line_of(text, "", "claim:").or_else(|| line_of(text, "auth", "")),
                message: "claim:<name> keys and routes[].auth need an auth: section (claims come from verified tokens)".into(),
            }),
            None => Ok(()),
        }
    }
}

/// The 1-based line of the first `key: …value…` (or list item containing `value`) in `text`.
/// Used for errors found after parsing (a dangling pool reference), where the YAML parser can no
/// longer say where a value came from.
pub(crate) fn line_of(text: &str, key: &str, value: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let t = l.trim_start().trim_start_matches("- ");
            // The key starts the line, or sits inside a flow mapping (`{ sample: 0.1 }`).
            let key_ok = key.is_empty()
                || t.starts_with(&format!("{key}:"))
                || [" ", "{", ","]
                    .iter()
                    .any(|p| l.contains(&format!("{p}{key}:")));
            key_ok && (value.is_empty() || l.contains(value))
        })
        .map(|i| i + 1)
}
