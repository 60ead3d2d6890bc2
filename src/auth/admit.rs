//! Admission of one request: the token's shape on the wire, then who it stands for (an opaque
//! token through introspection, a JWT through the key set and the cache of verified JWTs), then
//! [`Auth::authorize`]: the required scopes and the ordered rules.

use std::sync::Arc;

use super::answer::{self, Refusal};
use super::identity::Identity;
use super::introspect;
use super::jwt::{self, TokenError};
use super::rules::Decision;
use super::{Auth, RouteRef, VERIFIED_MAX, VERIFIED_TTL};
use crate::mcp::header::bearer_token;

impl Auth {
    /// Authenticate and authorize a request on what its headers claim. `Ok(None)`: no token on
    /// a route that does not require one.
    pub(crate) async fn admit(
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
        self.refuse_ambiguous(headers, query)?;
        let Some(token) = bearer_token(headers) else {
            if settings.is_some_and(|s| !s.required) {
                // No token where none is required: the scopes cannot apply, the rules still do.
                self.authorize(&Identity::anonymous(), &[], method, name)?;
                return Ok(None);
            }
            self.metrics.count("unauthorized", "missing", "");
            return Err(answer::missing_token(&required, &self.metadata_url));
        };
        let id = self.identity_of(token, &required).await?;
        self.authorize(&id, &required, method, name)?;
        Ok(Some(id))
    }

    /// Who a request's token stands for, without a route's scopes or rules: the protocol bridge
    /// binds a 2025-era session to it, so a refreshed token of the same caller keeps the
    /// session. `Ok(None)`: no token (the pipeline's admission decides whether one is needed).
    pub(crate) async fn identify(
        &self,
        headers: &http::HeaderMap,
    ) -> Result<Option<Arc<Identity>>, Refusal> {
        self.refuse_ambiguous(headers, None)?;
        let Some(token) = bearer_token(headers) else {
            return Ok(None);
        };
        let required: Vec<&str> = self.config.scopes.iter().map(String::as_str).collect();
        self.identity_of(token, &required).await.map(Some)
    }

    /// Who `token` stands for: an opaque token through introspection (when configured), a JWT
    /// through the key set; refused as the scopes in `required` say when it is not valid.
    async fn identity_of(&self, token: &str, required: &[&str]) -> Result<Arc<Identity>, Refusal> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        match (jwt::is_jwt(token), &self.introspector) {
            (false, Some(intro)) => self.introspected(intro, token, required, now).await,
            _ => self.verified_jwt(token, required, now).await,
        }
    }

    /// Refuse a token sent where it must not be (the query string) or sent more than once.
    fn refuse_ambiguous(
        &self,
        headers: &http::HeaderMap,
        query: Option<&str>,
    ) -> Result<(), Refusal> {
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
        Ok(())
    }

    /// The caller an opaque token stands for, as the introspection endpoint (or its cache) says.
    async fn introspected(
        &self,
        intro: &introspect::Introspector,
        token: &str,
        required: &[&str],
        now: u64,
    ) -> Result<Arc<Identity>, Refusal> {
        match intro.check(token, &self.policy, now).await {
            Ok(id) => Ok(id),
            Err(introspect::IntrospectError::Token(e)) => Err(self.invalid_token(&e, required)),
            Err(introspect::IntrospectError::Unavailable(why)) => {
                tracing::warn!("auth: introspection failed: {why}");
                self.metrics
                    .count("unavailable", "introspection_unavailable", "");
                Err(answer::unavailable(
                    "auth-introspection-unavailable",
                    "The gateway could not reach the token introspection endpoint; retry later",
                ))
            }
        }
    }

    /// The caller a JWT stands for: from the cache of verified JWTs for the current key set, or
    /// verified against it (and then cached).
    async fn verified_jwt(
        &self,
        token: &str,
        required: &[&str],
        now: u64,
    ) -> Result<Arc<Identity>, Refusal> {
        self.keys.ensure_refresher();
        let kid = jwt::kid_of(token);
        let loaded = self.keys.keys_for(kid.as_deref()).await;
        if loaded.set.keys.is_empty() {
            self.metrics.count("unavailable", "keys_unavailable", "");
            return Err(answer::keys_unavailable());
        }
        let key = introspect::Cache::key(token);
        if let Some(id) = self.cached_jwt(&key, loaded.at) {
            // Still within its exp (entries never outlive it).
            return Ok(id);
        }
        match jwt::verify(token, &loaded.set, &self.policy, now) {
            Ok(id) => {
                let id = Arc::new(id);
                self.remember_jwt(key, &id, loaded.at, now);
                Ok(id)
            }
            Err(e) => Err(self.invalid_token(&e, required)),
        }
    }

    /// The caller of the JWT whose hash is `key`, if it verified before; the cache is emptied
    /// first when the key set (loaded at `keys_at`) is not the one it was filled against.
    fn cached_jwt(&self, key: &[u8; 32], keys_at: std::time::Instant) -> Option<Arc<Identity>> {
        let mut v = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if v.keys_at != Some(keys_at) {
            v.keys_at = Some(keys_at);
            v.cache = introspect::Cache::new(VERIFIED_MAX);
        }
        v.cache.get(key, std::time::Instant::now())?.ok()
    }

    /// Cache a JWT that verified against the key set loaded at `keys_at`, until its exp (at most
    /// [`VERIFIED_TTL`]), unless the key set changed meanwhile.
    fn remember_jwt(
        &self,
        key: [u8; 32],
        id: &Arc<Identity>,
        keys_at: std::time::Instant,
        now: u64,
    ) {
        let left = id.exp().map_or(0, |e| e.saturating_sub(now));
        let ttl = VERIFIED_TTL.min(std::time::Duration::from_secs(left));
        let at = std::time::Instant::now();
        let mut v = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if v.keys_at == Some(keys_at) && !ttl.is_zero() {
            v.cache.put(key, at + ttl, Ok(id.clone()), at);
        }
    }

    /// The refusal of a token that did not check out (counted by its reason).
    fn invalid_token(&self, e: &TokenError, required: &[&str]) -> Refusal {
        self.metrics.count("unauthorized", e.reason(), "");
        answer::invalid_token(log_reason(e), &e.describe(), required, &self.metadata_url)
    }

    /// Whether `id` may make the call its headers claim: every required scope, then the rules.
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
