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
//! - [`keys`]: the JWKS source, its cache and refresh (fetched with [`crate::fetch`]);
//! - [`rules`]: per-tool allow/deny; [`filter`]: per-caller lists;
//! - [`answer`]: `WWW-Authenticate`, the JSON-RPC errors, the RFC 9728 metadata; [`metrics`].

mod admit;
pub(crate) mod answer;
pub(crate) mod filter;
mod forward;
mod identity;
pub(crate) mod introspect;
pub(crate) mod jwt;
pub(crate) mod keys;
pub(crate) mod metrics;
pub(crate) mod rules;

use std::sync::Arc;

use crate::config::auth::{AuthConfig, RouteAuth};
use crate::config::Config;
use crate::config::RouteRef;
pub(crate) use forward::HeaderEdit;
pub(crate) use identity::Identity;
use jwt::Policy;
use keys::KeyStore;
use metrics::AuthMetrics;
use rules::Rules;

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
    pub(crate) fn new(
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
    pub(crate) fn metadata(&self, path: &str, endpoint: &str) -> Option<&[u8]> {
        answer::is_metadata_path(path, endpoint).then_some(self.metadata_doc.as_slice())
    }

    /// Whether every request must be checked against its body: always. Rules, route scopes and
    /// `required: false` routes are all decided on the claimed method and name, so a
    /// sampled-out request could claim an open route while its body calls a guarded tool.
    pub(crate) fn needs_body_check(&self) -> bool {
        true
    }

    /// Whether the list result of `method` is filtered for callers.
    pub(crate) fn filters(&self, method: Option<&str>) -> bool {
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
    pub(crate) fn may_see(
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

#[cfg(test)]
mod tests;
