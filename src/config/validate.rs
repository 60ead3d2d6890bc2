//! Validation after parsing: the checks that span keys or sections (dangling pool and route
//! references, duplicate names, sample shares, TLS, auth, Redis), each failing with the file,
//! the line and column of the offending key or value ([`Positions`]), the key and the fix.

use std::net::ToSocketAddrs;

use super::{
    concurrency, connections, flows, redis, route_name, tls, Balance, Config, ConfigError, ErrAt,
    HashKey, HealthCheckKind, KeyPart, Positions,
};

impl Config {
    /// Every check, in order; the first that fails answers.
    pub(super) fn validate(&self, pos: &Positions, file: &str) -> Result<(), ConfigError> {
        let err = |path: &str, message: String| ConfigError::at(file, pos.near(path), message);
        self.check_top(&err)?;
        for (name, pool) in &self.pools {
            self.check_pool(name, pool, &err)?;
        }
        if self.timeouts.request_head.is_zero() {
            return Err(err(
                "timeouts.request_head",
                "timeouts.request_head: must be above 0s (0s would refuse every request); \
                 use e.g. `request_head: 10s`"
                    .into(),
            ));
        }
        self.check_caches(&err)?;
        self.check_routes(&err)?;
        let route_names: Vec<String> = self
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| route_name(r, i))
            .chain(std::iter::once("default".to_string()))
            .collect();
        self.check_rate_limits(&route_names, &err)?;
        if let Err((_, message)) = redis::validate(self.redis.as_ref(), &self.rate_limits) {
            let path = path_of(&message).to_string();
            return Err(err(&path, message));
        }
        tls::check_listeners(&self.listen.tls, self.listen.mcp, self.listen.admin)
            .and_then(|()| {
                self.pools
                    .iter()
                    .try_for_each(|(n, p)| tls::check_pool(n, p.tls.as_ref(), p.http))
            })
            .map_err(|(key, msg)| err(&key, format!("{key}: {msg}")))?;
        self.validate_auth(pos, file)?;
        concurrency::validate(&self.concurrency_limits, &route_names, pos, file)?;
        flows::validate(&self.flows, &self.tracing, pos, file)?;
        connections::validate(&self.connections, pos, file)?;
        super::legacy::validate(&self.legacy, pos, file)?;
        super::policy::validate(&self.argument_policy, pos, file)?;
        super::pins::validate(&self.pins, pos, file)?;
        super::audit::validate(&self.audit, pos, file)?;
        if let Some(f) = &self.federation {
            f.validate(self, &err)?;
        }
        if self.limits.max_body_bytes == 0 {
            return Err(err(
                "limits.max_body_bytes",
                "limits.max_body_bytes: must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// The top-level keys: `endpoint` is a path, `threads` at least 1, at least one pool.
    fn check_top(&self, err: &ErrAt) -> Result<(), ConfigError> {
        if !self.endpoint.starts_with('/') {
            return Err(err(
                "endpoint",
                format!(
                    "endpoint: {:?} must be a path starting with '/', e.g. /mcp",
                    self.endpoint
                ),
            ));
        }
        if self.threads == 0 {
            return Err(err("threads", "threads: must be at least 1".into()));
        }
        if self.pools.is_empty() {
            return Err(err(
                "pools",
                "pools: define at least one pool with instances".into(),
            ));
        }
        Ok(())
    }

    /// One pool: instances that resolve, health timing, `hash_key` and the balancing keys,
    /// credentials.
    fn check_pool(
        &self,
        name: &str,
        pool: &super::PoolConfig,
        err: &ErrAt,
    ) -> Result<(), ConfigError> {
        if pool.instances.is_empty() {
            return Err(err(
                &format!("pools.{name}.instances"),
                format!("pools.{name}.instances: list at least one instance as host:port"),
            ));
        }
        for (j, inst) in pool.instances.iter().enumerate() {
            if inst
                .to_socket_addrs()
                .map(|mut a| a.next().is_none())
                .unwrap_or(true)
            {
                return Err(err(&format!("pools.{name}.instances[{j}]"), format!(
                    "pools.{name}.instances: {inst:?} is not a host:port that resolves (write e.g. 127.0.0.1:7001 or backend:7001)"
                )));
            }
        }
        let h = &pool.health;
        if h.check != HealthCheckKind::Off && (h.interval.is_zero() || h.timeout.is_zero()) {
            return Err(err(
                &format!(
                    "pools.{name}.health.{}",
                    if h.interval.is_zero() {
                        "interval"
                    } else {
                        "timeout"
                    }
                ),
                format!(
                    "pools.{name}.health: interval and timeout must be above 0s (0s would \
                     probe without pause); use e.g. `interval: 2s`, or `check: off`"
                ),
            ));
        }
        if pool.hash_key.is_some() && pool.balance != Balance::Hash {
            return Err(err(
                &format!("pools.{name}.hash_key"),
                format!(
                "pools.{name}.hash_key: only used with `balance: hash`; add it or remove hash_key"
            ),
            ));
        }
        super::pools::check_balance(name, pool).map_err(|(key, msg)| err(&key, msg))?;
        super::balance::check(name, pool).map_err(|(key, msg)| err(&key, msg))?;
        if pool.mrtr.retry_landing == super::RetryLanding::Elsewhere && !self.flows.enabled {
            return Err(err(
                &format!("pools.{name}.mrtr.retry_landing"),
                format!(
                    "pools.{name}.mrtr.retry_landing: `elsewhere` finds a retry leg's previous instance in the flows the gateway follows, and flows.enabled is false; turn flows on (remove `enabled: false`) or set retry_landing: any"
                ),
            ));
        }
        self.check_credentials(name, pool)
            .map_err(|(key, msg)| err(&key, msg))?;
        let plain = pool.tls.is_none()
            && pool.http == super::tls::UpstreamHttp::H1
            && self.connections.upstream_leg == super::UpstreamLeg::Direct;
        super::mrtr::check(
            name,
            &pool.mrtr,
            pool.era.legacy_version(),
            plain,
            self.redis.is_some(),
        )
        .map_err(|(key, msg)| err(&key, msg))?;
        if let Some(c) = &pool.concurrency {
            super::adaptive::check(name, c).map_err(|(key, msg)| err(&key, msg))?;
        }
        Ok(())
    }

    /// The `cache` settings of every route and of the default route.
    fn check_caches(&self, err: &ErrAt) -> Result<(), ConfigError> {
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
            if let Some(Err((key, _, message))) = c.map(|c| c.check(&at)) {
                return Err(err(&format!("{at}.cache.{key}"), message));
            }
        }
        Ok(())
    }

    /// Routes and the default route: a validation share no lower than the global one, and a
    /// pool that exists.
    fn check_routes(&self, err: &ErrAt) -> Result<(), ConfigError> {
        let known = || self.pools.keys().cloned().collect::<Vec<_>>().join(", ");
        for (i, r) in self.routes.iter().enumerate() {
            if let Some(v) = r.validation.filter(|v| v.sample < self.validation.sample) {
                return Err(err(
                    &format!("routes[{i}].validation.sample"),
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
                return Err(err(&format!("routes[{i}].pool"), format!(
                    "routes[{i}].pool: no pool named {:?}; defined pools: {}. Add it under pools: or use one of those",
                    r.pool,
                    known()
                )));
            }
        }
        if let Some(d) = &self.default_route {
            if let Some(v) = d.validation.filter(|v| v.sample < self.validation.sample) {
                return Err(err(
                    "default_route.validation.sample",
                    format!(
                        "default_route.validation.sample: {} is below validation.sample {}; a \
                         route may only raise the share of checked requests",
                        v.sample, self.validation.sample
                    ),
                ));
            }
            if !self.pools.contains_key(&d.pool) {
                return Err(err(
                    "default_route.pool",
                    format!(
                        "default_route.pool: no pool named {:?}; defined pools: {}",
                        d.pool,
                        known()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `rate_limits`: a route they match exists (`route_names`), `max_keys` at least 1, unique
    /// names.
    fn check_rate_limits(&self, route_names: &[String], err: &ErrAt) -> Result<(), ConfigError> {
        for (i, l) in self.rate_limits.iter().enumerate() {
            if let Some(r) = &l.matcher.route {
                if !route_names.contains(r) {
                    return Err(err(
                        &format!("rate_limits[{i}].match.route"),
                        format!(
                            "rate_limits[{i}].match.route: no route named {r:?}; routes: {}",
                            route_names.join(", ")
                        ),
                    ));
                }
            }
            if l.max_keys == 0 {
                return Err(err(
                    &format!("rate_limits[{i}].max_keys"),
                    format!("rate_limits[{i}].max_keys: must be at least 1"),
                ));
            }
            if self.rate_limits[..i].iter().any(|o| o.name == l.name) {
                return Err(err(
                    &format!("rate_limits[{i}].name"),
                    format!(
                        "rate_limits[{i}].name: {:?} is used twice; limit names must be unique",
                        l.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The `auth:` section, and the keys elsewhere that need it.
    fn validate_auth(&self, pos: &Positions, file: &str) -> Result<(), ConfigError> {
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
                a.validate(&pools, |path| pos.near(path), file)
            }
            None if needs_auth => Err(ConfigError::at(
                file,
                self.first_auth_use().and_then(|p| pos.near(&p)),
                "claim:<name> keys and routes[].auth need an auth: section (claims come from verified tokens)",
            )),
            None => Ok(()),
        }
    }

    /// The path of the first key that needs `auth:` (a claim key, or a route's auth settings).
    fn first_auth_use(&self) -> Option<String> {
        let claim = |k: &KeyPart| matches!(k, KeyPart::Claim(_));
        let limit = self.rate_limits.iter().enumerate().find_map(|(i, l)| {
            let j = l.key.iter().position(claim)?;
            Some(format!("rate_limits[{i}].key[{j}]"))
        });
        let pool = || {
            self.pools
                .iter()
                .find(|(_, p)| matches!(p.hash_key, Some(HashKey::Claim(_))))
                .map(|(n, _)| format!("pools.{n}.hash_key"))
        };
        let route = || {
            let i = self.routes.iter().position(|r| r.auth.is_some())?;
            Some(format!("routes[{i}].auth"))
        };
        let default = || {
            self.default_route
                .as_ref()
                .filter(|d| d.auth.is_some())
                .map(|_| "default_route.auth".to_string())
        };
        limit.or_else(pool).or_else(route).or_else(default)
    }
}

impl Config {
    /// `pools.<name>.credentials`: its own checks, and no pool both has credentials and gets
    /// the caller's token (`auth.forward.token_to_pools`).
    fn check_credentials(
        &self,
        name: &str,
        pool: &super::PoolConfig,
    ) -> Result<(), (String, String)> {
        let Some(c) = &pool.credentials else {
            return Ok(());
        };
        crate::credentials::check::check(name, c, self.auth.is_some())?;
        let forwarded = self
            .auth
            .as_ref()
            .and_then(|a| a.forward.token_to_pools.iter().position(|p| p == name));
        if let Some(j) = forwarded {
            return Err((format!("auth.forward.token_to_pools[{j}]"), format!(
                "auth.forward.token_to_pools: pool {name:?} has credentials: of its own, and a pool with credentials never receives the caller's token; remove {name:?} from token_to_pools (or its credentials:)"
            )));
        }
        Ok(())
    }
}

/// The key path an error message starts with (`redis.url: ...` -> `redis.url`): the checks
/// that return only a message write their key first.
fn path_of(message: &str) -> &str {
    message.split_once(": ").map_or(message, |(p, _)| p)
}
