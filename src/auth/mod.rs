//! The OAuth 2.1 resource server at the edge: who is calling (a verified bearer token, never the
//! raw string), whether they may call what their headers claim (required scopes, then the
//! ordered rules), what goes upstream in their name, and which entries of a list they see.
//!
//! Everything here is plain functions over plain data, testable without sockets; the gateway
//! calls [`Auth::admit`] in `request_filter` (after routing, before limits), [`Auth::upstream_edits`]
//! where it strips hop-by-hop headers, and [`filter`] in the response filters. Tokens are never
//! logged, stored or put in metrics: only the verified subject and claims travel on.
//!
//! - [`jwt`]: the key set and the token check (jsonwebtoken does the cryptography);
//! - [`keys`]: the JWKS source, its cache and refresh; [`fetch`]: one bounded HTTP GET;
//! - [`rules`]: per-tool allow/deny; [`filter`]: per-caller lists;
//! - [`answer`]: `WWW-Authenticate`, the JSON-RPC errors, the RFC 9728 metadata; [`metrics`].

pub mod answer;
pub mod fetch;
pub mod filter;
mod forward;
mod identity;
pub mod introspect;
pub mod jwt;
pub mod keys;
pub mod metrics;
pub mod rules;

use std::sync::Arc;

use crate::config::auth::{AuthConfig, RouteAuth};
use crate::config::Config;
use crate::gateway::stages::route::RouteRef;
use crate::mcp::header::bearer_token;
pub use answer::Refusal;
pub use forward::HeaderEdit;
pub use identity::Identity;
use jwt::{Policy, TokenError};
use keys::KeyStore;
use metrics::AuthMetrics;
use rules::{Decision, Rules};

/// The auth stage of one gateway generation (rebuilt on reload; the key store carries over
/// when `auth.jwks` did not change).
pub struct Auth {
    pub config: AuthConfig,
    pub keys: Arc<KeyStore>,
    policy: Policy,
    pub rules: Rules,
    /// `routes[i].auth`, then `default_route.auth` last.
    route_auth: Vec<Option<RouteAuth>>,
    pub metadata_url: String,
    metadata_doc: Vec<u8>,
    metrics: Arc<AuthMetrics>,
    forward: Vec<(http::HeaderName, String)>,
    /// Opaque tokens (not JWTs) go to the introspection endpoint, when configured.
    introspector: Option<introspect::Introspector>,
    /// JWTs that verified, by the SHA-256 of the token, for the key set they verified against.
    verified: std::sync::Mutex<Verified>,
}

/// Verified JWTs: a signature check is the dearest step of a request (tens of µs for RS256), and
/// clients send the same token for minutes. Emptied whenever the key set changes, so a key
/// withdrawn from the JWKS stops verifying at once; entries live until the token's `exp`, at
/// most [`VERIFIED_TTL`]; at most [`VERIFIED_MAX`] of them.
struct Verified {
    keys_at: Option<std::time::Instant>,
    cache: introspect::Cache,
}

const VERIFIED_TTL: std::time::Duration = std::time::Duration::from_secs(300);
const VERIFIED_MAX: usize = 10_000;

impl Auth {
    /// The auth stage for `cfg`, or `None` without an `auth:` section.
    pub fn new(
        cfg: &Config,
        metrics: Arc<AuthMetrics>,
        previous: Option<&Auth>,
    ) -> anyhow::Result<Option<Auth>> {
        let Some(a) = &cfg.auth else { return Ok(None) };
        // Exactly one signature backend is compiled in; make it the process default (a no-op
        // when it already is).
        let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
        let keys = match previous.filter(|p| p.config.jwks == a.jwks) {
            Some(p) => p.keys.clone(),
            None => Arc::new(KeyStore::new(a.jwks.clone(), metrics.clone())?),
        };
        let mut scopes: Vec<String> = a.scopes.clone();
        let route_auth: Vec<Option<RouteAuth>> = cfg
            .routes
            .iter()
            .map(|r| r.auth.clone())
            .chain(std::iter::once(
                cfg.default_route.as_ref().and_then(|d| d.auth.clone()),
            ))
            .collect();
        for r in route_auth.iter().flatten() {
            scopes.extend(r.scopes.iter().cloned());
        }
        for r in &a.rules {
            scopes.extend(r.when.scopes.iter().cloned());
        }
        scopes.sort();
        scopes.dedup();
        let supported = a.scopes_supported.clone().unwrap_or(scopes);
        let servers = if a.authorization_servers.is_empty() {
            vec![a.issuer.clone()]
        } else {
            a.authorization_servers.clone()
        };
        let forward = a
            .forward
            .headers
            .iter()
            .map(|(h, c)| Ok((http::HeaderName::from_bytes(h.as_bytes())?, c.clone())))
            .collect::<anyhow::Result<_>>()?;
        Ok(Some(Auth {
            policy: Policy {
                issuer: a.issuer.clone(),
                audience: a.resource.clone(),
                algorithms: a.algorithms.iter().map(|x| x.0).collect(),
                leeway_secs: a.leeway.as_secs(),
                principal_claim: a.principal_claim.clone(),
            },
            rules: Rules::new(&a.rules, a.default),
            route_auth,
            metadata_url: a
                .metadata_url
                .clone()
                .unwrap_or_else(|| answer::metadata_url_for(&a.resource)),
            metadata_doc: answer::metadata_document(&a.resource, &servers, &supported),
            keys,
            metrics,
            forward,
            verified: std::sync::Mutex::new(Verified {
                keys_at: None,
                cache: introspect::Cache::new(VERIFIED_MAX),
            }),
            introspector: a
                .introspection
                .as_ref()
                .map(introspect::Introspector::new)
                .transpose()?,
            config: a.clone(),
        }))
    }

    fn route_settings(&self, route: RouteRef) -> Option<&RouteAuth> {
        let i = match route {
            RouteRef::Index(i) => i,
            RouteRef::Default => self.route_auth.len() - 1,
            // A route a federated endpoint learned has no route-level settings of its own.
            RouteRef::Learned(_) => return None,
        };
        self.route_auth.get(i).and_then(Option::as_ref)
    }

    /// The metadata document, when `path` is one of its well-known URIs.
    pub fn metadata(&self, path: &str, endpoint: &str) -> Option<&[u8]> {
        answer::is_metadata_path(path, endpoint).then_some(self.metadata_doc.as_slice())
    }

    /// Whether every request must be checked against its body: always. Rules, route scopes and
    /// `required: false` routes are all decided on the claimed method and name, so a
    /// sampled-out request could claim an open route while its body calls a guarded tool.
    pub fn needs_body_check(&self) -> bool {
        true
    }

    /// Authenticate and authorize a request on what its headers claim. `Ok(None)`: no token on
    /// a route that does not require one.
    pub async fn admit(
        &self,
        headers: &http::HeaderMap,
        query: Option<&str>,
        route: RouteRef,
        method: Option<&str>,
        name: Option<&str>,
    ) -> Result<Option<Arc<Identity>>, Refusal> {
        let settings = self.route_settings(route);
        let mut required: Vec<&str> = self.config.scopes.iter().map(String::as_str).collect();
        if let Some(s) = settings {
            required.extend(s.scopes.iter().map(String::as_str));
        }
        let md = self.metadata_url.as_str();
        if answer::query_has_token(query) {
            self.metrics.count("bad_request", "token_in_query", "");
            return Err(answer::token_in_query(md));
        }
        if headers.get_all(http::header::AUTHORIZATION).iter().count() > 1 {
            // RFC 6750 §2: one method, once. Two headers could be read differently upstream.
            self.metrics.count("bad_request", "several_tokens", "");
            return Err(answer::several_tokens(md));
        }
        let Some(token) = bearer_token(headers) else {
            if settings.is_some_and(|s| !s.required) {
                // No token where none is required: the scopes cannot apply, the rules still do.
                self.authorize(&Identity::anonymous(), &[], method, name)?;
                return Ok(None);
            }
            self.metrics.count("unauthorized", "missing", "");
            return Err(answer::missing_token(&required, md));
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if let (false, Some(intro)) = (jwt::is_jwt(token), &self.introspector) {
            let id = match intro.check(token, &self.policy, now).await {
                Ok(id) => id,
                Err(introspect::IntrospectError::Token(e)) => {
                    self.metrics.count("unauthorized", e.reason(), "");
                    return Err(answer::invalid_token(
                        log_reason(&e),
                        &e.describe(),
                        &required,
                        md,
                    ));
                }
                Err(introspect::IntrospectError::Unavailable(why)) => {
                    tracing::warn!("auth: introspection failed: {why}");
                    self.metrics
                        .count("unavailable", "introspection_unavailable", "");
                    return Err(answer::unavailable(
                        "auth-introspection-unavailable",
                        "The gateway could not reach the token introspection endpoint; retry later",
                    ));
                }
            };
            self.authorize(&id, &required, method, name)?;
            return Ok(Some(id));
        }
        self.keys.ensure_refresher();
        let kid = jwt::kid_of(token);
        let loaded = self.keys.keys_for(kid.as_deref()).await;
        if loaded.set.keys.is_empty() {
            self.metrics.count("unavailable", "keys_unavailable", "");
            return Err(answer::keys_unavailable());
        }
        let key = introspect::Cache::key(token);
        let cached = {
            let mut v = self.verified.lock().unwrap_or_else(|p| p.into_inner());
            if v.keys_at != Some(loaded.at) {
                v.keys_at = Some(loaded.at);
                v.cache = introspect::Cache::new(VERIFIED_MAX);
            }
            v.cache.get(&key, std::time::Instant::now())
        };
        if let Some(Ok(id)) = cached {
            // Still within its exp (entries never outlive it).
            self.authorize(&id, &required, method, name)?;
            return Ok(Some(id));
        }
        let id = match jwt::verify(token, &loaded.set, &self.policy, now) {
            Ok(id) => {
                let id = Arc::new(id);
                let left = id.exp().map_or(0, |e| e.saturating_sub(now));
                let ttl = VERIFIED_TTL.min(std::time::Duration::from_secs(left));
                let at = std::time::Instant::now();
                let mut v = self.verified.lock().unwrap_or_else(|p| p.into_inner());
                if v.keys_at == Some(loaded.at) && !ttl.is_zero() {
                    v.cache.put(key, at + ttl, Ok(id.clone()), at);
                }
                id
            }
            Err(e) => {
                self.metrics.count("unauthorized", e.reason(), "");
                return Err(answer::invalid_token(
                    log_reason(&e),
                    &e.describe(),
                    &required,
                    md,
                ));
            }
        };
        self.authorize(&id, &required, method, name)?;
        Ok(Some(id))
    }

    fn authorize(
        &self,
        id: &Identity,
        required: &[&str],
        method: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), Refusal> {
        let md = self.metadata_url.as_str();
        if required.iter().any(|s| !id.has_scope(s)) {
            self.metrics.count("forbidden", "insufficient_scope", "");
            let msg = format!(
                "The token lacks a required scope; needed: {}",
                required.join(" ")
            );
            return Err(answer::insufficient_scope(
                "auth-insufficient-scope",
                msg,
                None,
                required,
                md,
            ));
        }
        match self.rules.decide(method, name, id) {
            Decision::Allow(rule) => {
                self.metrics.count("allowed", "ok", rule.unwrap_or(""));
                Ok(())
            }
            Decision::Deny { rule, scopes } => {
                let label = rule.unwrap_or("default");
                self.metrics.count("forbidden", "rule_denied", label);
                let what = match name {
                    Some(n) => format!("{} {n:?}", method.unwrap_or("")),
                    None => method.unwrap_or("this request").to_string(),
                };
                let msg = match rule {
                    Some(r) => format!("Rule {r:?} of auth.rules denies {what} to this caller"),
                    None => format!("No rule of auth.rules allows {what} (auth.default: deny)"),
                };
                let mut hint: Vec<&str> = required.to_vec();
                hint.extend(scopes);
                Err(answer::insufficient_scope(
                    "auth-rule-denied",
                    msg,
                    Some(label),
                    &hint,
                    md,
                ))
            }
        }
    }

    /// Whether the list result of `method` is filtered for callers.
    pub fn filters(&self, method: Option<&str>) -> bool {
        let Some((_, _, call)) = method.and_then(filter::list_shape) else {
            return false;
        };
        let route_scopes = self
            .route_auth
            .iter()
            .flatten()
            .any(|r| !r.scopes.is_empty());
        self.config.list_filter.enabled && (route_scopes || self.rules.covers(call))
    }

    /// Whether `id` may see an entry of a list: a `call_method` of `name`, on the route it would
    /// take (`None`: no route), would be allowed.
    pub fn may_see(
        &self,
        id: &Identity,
        route: Option<RouteRef>,
        call_method: &str,
        name: &str,
    ) -> bool {
        let Some(route) = route else { return false };
        let scopes_ok = self
            .route_settings(route)
            .is_none_or(|r| r.scopes.iter().all(|s| id.has_scope(s)));
        scopes_ok
            && self
                .rules
                .decide(Some(call_method), Some(name), id)
                .allowed()
    }
}

/// The access-log reason of an invalid token.
fn log_reason(e: &TokenError) -> &'static str {
    match e {
        TokenError::Malformed => "auth-token-malformed",
        TokenError::Algorithm(_) => "auth-token-bad-algorithm",
        TokenError::UnknownKey => "auth-token-unknown-key",
        TokenError::Signature => "auth-token-bad-signature",
        TokenError::Expired => "auth-token-expired",
        TokenError::NotYetValid => "auth-token-not-yet-valid",
        TokenError::Issuer => "auth-token-bad-issuer",
        TokenError::Audience => "auth-token-bad-audience",
        TokenError::MissingClaim(_) => "auth-token-missing-claim",
        TokenError::Inactive => "auth-token-inactive",
    }
}

#[cfg(test)]
mod tests;
