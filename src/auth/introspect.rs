//! Opaque access tokens, through RFC 7662 introspection at the authorization server. The answer
//! is judged by the same policy as a JWT's claims (`active`, `iss`, `aud` ∋ resource, `exp`,
//! `nbf`, the principal claim) and cached, bounded, under a SHA-256 of the token (the token
//! itself is never stored): active answers for `cache_ttl` (never past `exp`), refusals for
//! `negative_ttl`. Past `cache_size` entries, expired ones are dropped, then arbitrary ones.

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::jwt::{Policy, TokenError};
use super::Identity;
use crate::config::auth::IntrospectionConfig;
use crate::fetch::{self, form_encode};

/// Why an opaque token was not accepted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum IntrospectError {
    Token(TokenError),
    /// The endpoint could not be asked (the server's fault, not the client's).
    Unavailable(String),
}

/// Judge an introspection answer at `now` (Unix seconds).
pub(crate) fn judge(resp: &Value, policy: &Policy, now: u64) -> Result<Identity, TokenError> {
    let Some(obj) = resp.as_object() else {
        return Err(TokenError::Malformed);
    };
    if obj.get("active") != Some(&Value::Bool(true)) {
        return Err(TokenError::Inactive);
    }
    if let Some(iss) = obj.get("iss") {
        if iss.as_str() != Some(policy.issuer.as_str()) {
            return Err(TokenError::Issuer);
        }
    }
    let aud_ok = match obj.get("aud") {
        Some(Value::String(a)) => *a == policy.audience,
        Some(Value::Array(a)) => a
            .iter()
            .any(|v| v.as_str() == Some(policy.audience.as_str())),
        _ => false,
    };
    if !aud_ok {
        return Err(TokenError::Audience);
    }
    let leeway = policy.leeway_secs;
    if let Some(exp) = obj.get("exp").and_then(Value::as_u64) {
        if exp + leeway < now {
            return Err(TokenError::Expired);
        }
    }
    if let Some(nbf) = obj.get("nbf").and_then(Value::as_u64) {
        if nbf > now + leeway {
            return Err(TokenError::NotYetValid);
        }
    }
    let subject = match obj.get(&policy.principal_claim) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(v @ Value::Number(_)) => v.to_string(),
        _ => return Err(TokenError::MissingClaim(policy.principal_claim.clone())),
    };
    Ok(Identity::new(subject, obj.clone()))
}

type Verdict = Result<Arc<Identity>, TokenError>;

/// The bounded answer cache.
pub(crate) struct Cache {
    map: HashMap<[u8; 32], (Instant, Verdict)>,
    max: usize,
}

impl Cache {
    pub(crate) fn new(max: usize) -> Cache {
        Cache {
            map: HashMap::new(),
            max: max.max(1),
        }
    }

    pub(crate) fn key(token: &str) -> [u8; 32] {
        Sha256::digest(token.as_bytes()).into()
    }

    pub(crate) fn get(&mut self, key: &[u8; 32], now: Instant) -> Option<Verdict> {
        match self.map.get(key) {
            Some((until, v)) if *until > now => Some(v.clone()),
            Some(_) => {
                self.map.remove(key);
                None
            }
            None => None,
        }
    }

    pub(crate) fn put(&mut self, key: [u8; 32], until: Instant, v: Verdict, now: Instant) {
        if self.map.len() >= self.max && !self.map.contains_key(&key) {
            self.map.retain(|_, (u, _)| *u > now);
            while self.map.len() >= self.max {
                let Some(k) = self.map.keys().next().copied() else {
                    break;
                };
                self.map.remove(&k);
            }
        }
        self.map.insert(key, (until, v));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// The introspection client of one gateway generation.
pub(crate) struct Introspector {
    cfg: IntrospectionConfig,
    tls: Arc<rustls::ClientConfig>,
    authorization: Option<String>,
    cache: Mutex<Cache>,
}

impl Introspector {
    pub(crate) fn new(cfg: &IntrospectionConfig) -> anyhow::Result<Introspector> {
        let secret = match (&cfg.client_secret, &cfg.client_secret_file) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(f)) => Some(
                std::fs::read_to_string(f)
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "auth.introspection.client_secret_file: {}: {e}",
                            f.display()
                        )
                    })?
                    .trim_end()
                    .to_string(),
            ),
            (None, None) => None,
        };
        let authorization = cfg.client_id.as_ref().map(|id| {
            let pair = format!(
                "{}:{}",
                form_encode(id),
                form_encode(secret.as_deref().unwrap_or(""))
            );
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        });
        Ok(Introspector {
            tls: fetch::tls_config(cfg.ca_file.as_deref())?,
            authorization,
            cache: Mutex::new(Cache::new(cfg.cache_size)),
            cfg: cfg.clone(),
        })
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The caller an opaque token stands for, from the cache or the endpoint.
    pub(crate) async fn check(
        &self,
        token: &str,
        policy: &Policy,
        now_unix: u64,
    ) -> Result<Arc<Identity>, IntrospectError> {
        let key = Cache::key(token);
        if let Some(v) = self.cache().get(&key, Instant::now()) {
            return v.map_err(IntrospectError::Token);
        }
        let out = fetch::Outgoing {
            method: http::Method::POST,
            authorization: self.authorization.clone(),
            form: Some(format!(
                "token={}&token_type_hint=access_token",
                form_encode(token)
            )),
        };
        let (body, _) = fetch::send(&self.cfg.url, self.cfg.timeout, &self.tls, out)
            .await
            .map_err(IntrospectError::Unavailable)?;
        let resp: Value = serde_json::from_slice(&body).map_err(|e| {
            IntrospectError::Unavailable(format!("{}: not JSON: {e}", self.cfg.url))
        })?;
        let verdict = judge(&resp, policy, now_unix).map(Arc::new);
        let now = Instant::now();
        let ttl = match &verdict {
            Ok(_) => {
                let left = resp
                    .get("exp")
                    .and_then(Value::as_u64)
                    .map_or(self.cfg.cache_ttl, |e| {
                        Duration::from_secs(e.saturating_sub(now_unix))
                    });
                self.cfg.cache_ttl.min(left)
            }
            Err(_) => self.cfg.negative_ttl,
        };
        self.cache().put(key, now + ttl, verdict.clone(), now);
        verdict.map_err(IntrospectError::Token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy() -> Policy {
        Policy {
            issuer: "https://i".into(),
            audience: "https://r/mcp".into(),
            algorithms: vec![],
            leeway_secs: 5,
            principal_claim: "sub".into(),
        }
    }

    #[test]
    fn answers_are_judged_like_claims() {
        let p = policy();
        let ok = json!({"active": true, "iss": "https://i", "aud": ["x", "https://r/mcp"], "sub": "u", "scope": "a b", "exp": 1000});
        let id = judge(&ok, &p, 900).unwrap();
        assert_eq!(id.subject, "u");
        assert!(id.has_scope("b"));
        assert_eq!(
            judge(&json!({"active": false}), &p, 900),
            Err(TokenError::Inactive)
        );
        let mut v = ok.clone();
        v["aud"] = json!("https://other");
        assert_eq!(judge(&v, &p, 900), Err(TokenError::Audience));
        let mut v = ok.clone();
        v.as_object_mut().unwrap().remove("aud");
        assert_eq!(
            judge(&v, &p, 900),
            Err(TokenError::Audience),
            "an answer without aud is refused"
        );
        assert_eq!(judge(&ok, &p, 2000), Err(TokenError::Expired));
        let mut v = ok.clone();
        v["iss"] = json!("https://evil");
        assert_eq!(judge(&v, &p, 900), Err(TokenError::Issuer));
    }

    #[test]
    fn the_cache_is_bounded_and_expires() {
        let mut c = Cache::new(3);
        let now = Instant::now();
        for i in 0..10 {
            let k = Cache::key(&format!("t{i}"));
            c.put(
                k,
                now + Duration::from_secs(60),
                Err(TokenError::Inactive),
                now,
            );
            assert!(c.len() <= 3);
        }
        let k = Cache::key("t9");
        assert!(c.get(&k, now).is_some());
        assert!(
            c.get(&k, now + Duration::from_secs(61)).is_none(),
            "expired"
        );
        assert_eq!(form_encode("a b+c/="), "a%20b%2Bc%2F%3D");
    }
}
