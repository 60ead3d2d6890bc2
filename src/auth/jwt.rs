//! JWT access tokens: the key set they are checked against and the one check, as a plain
//! function of (token, keys, policy, now). Signatures and claim timing are jsonwebtoken's; this
//! file decides which algorithms and keys may be tried at all (never `none`, never HMAC: a
//! token signed with HS256 using the public key as the secret is refused before any key is
//! touched) and turns every failure into a bounded reason.

use base64::Engine as _;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::Identity;

/// One usable public key of a JWKS.
pub(crate) struct Key {
    pub kid: Option<String>,
    family: AlgorithmFamily,
    /// The key's own `alg`, when the JWKS names one (then only that algorithm may use it).
    alg: Option<Algorithm>,
    key: DecodingKey,
}

/// The public keys in use, parsed once per fetch.
#[derive(Default)]
pub(crate) struct KeySet {
    pub keys: Vec<Key>,
    /// Entries that were skipped (symmetric, private-only, unsupported or malformed).
    pub skipped: usize,
}

impl KeySet {
    /// Parse a JWKS document. Symmetric (`oct`) keys are skipped: they could only verify HMAC.
    pub(crate) fn parse(json: &[u8]) -> Result<KeySet, String> {
        let set: Value = serde_json::from_slice(json).map_err(|e| format!("not JSON: {e}"))?;
        let Some(items) = set.get("keys").and_then(Value::as_array) else {
            return Err("no \"keys\" array (a JWKS is {\"keys\": [...]})".into());
        };
        let mut out = KeySet::default();
        for item in items {
            // One bad entry must not take the good ones down with it.
            let parsed: Option<JwkSet> =
                serde_json::from_value(serde_json::json!({ "keys": [item] })).ok();
            let Some(jwk) = parsed.and_then(|mut s| s.keys.pop()) else {
                out.skipped += 1;
                continue;
            };
            let family = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa,
                AlgorithmParameters::EllipticCurve(_) => AlgorithmFamily::Ec,
                AlgorithmParameters::OctetKeyPair(_) => AlgorithmFamily::Ed,
                // Symmetric keys (and kinds jsonwebtoken may add later) are never used.
                _ => {
                    out.skipped += 1;
                    continue;
                }
            };
            let alg = jwk
                .common
                .key_algorithm
                .and_then(|a| a.to_string().parse::<Algorithm>().ok());
            match DecodingKey::from_jwk(&jwk) {
                Ok(key) => out.keys.push(Key {
                    kid: jwk.common.key_id.clone(),
                    family,
                    alg,
                    key,
                }),
                Err(_) => out.skipped += 1,
            }
        }
        Ok(out)
    }

    pub(crate) fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }
}

/// What a token must satisfy besides its signature.
pub(crate) struct Policy {
    pub issuer: String,
    /// The resource's canonical URI; `aud` must contain it.
    pub audience: String,
    pub algorithms: Vec<Algorithm>,
    pub leeway_secs: u64,
    pub principal_claim: String,
}

/// Why a token was refused. `reason()` is a bounded metric label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TokenError {
    Malformed,
    /// `alg` is `none`, HMAC, or not in `auth.algorithms`.
    Algorithm(String),
    /// No key in the set has this `kid` (or fits the algorithm).
    UnknownKey,
    Signature,
    Expired,
    NotYetValid,
    Issuer,
    Audience,
    /// A required claim (`exp`, `iss`, `aud`, the principal claim) is missing.
    MissingClaim(String),
    /// Introspection says the (opaque) token is not active.
    Inactive,
}

impl TokenError {
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            TokenError::Malformed => "malformed",
            TokenError::Algorithm(_) => "bad_algorithm",
            TokenError::UnknownKey => "unknown_key",
            TokenError::Signature => "bad_signature",
            TokenError::Expired => "expired",
            TokenError::NotYetValid => "not_yet_valid",
            TokenError::Issuer => "bad_issuer",
            TokenError::Audience => "bad_audience",
            TokenError::MissingClaim(_) => "missing_claim",
            TokenError::Inactive => "inactive",
        }
    }

    /// For `error_description` and the JSON-RPC message: says what, never echoes the token.
    pub(crate) fn describe(&self) -> String {
        match self {
            TokenError::Malformed => "The access token is not a well-formed JWT".into(),
            TokenError::Algorithm(a) => format!("The token's algorithm {a} is not accepted"),
            TokenError::UnknownKey => {
                "The token was signed with a key the issuer's key set does not contain".into()
            }
            TokenError::Signature => "The token's signature is invalid".into(),
            TokenError::Expired => "The token has expired".into(),
            TokenError::NotYetValid => "The token is not valid yet (nbf)".into(),
            TokenError::Issuer => "The token was issued by another issuer".into(),
            TokenError::Audience => "The token was not issued for this resource (aud)".into(),
            TokenError::MissingClaim(c) => format!("The token lacks the required claim {c}"),
            TokenError::Inactive => {
                "The token is not active (revoked, expired or unknown to the issuer)".into()
            }
        }
    }
}

/// The `alg` and `kid` of a token's header, read without trusting anything else in it.
fn header_of(token: &str) -> Result<(String, Option<String>), TokenError> {
    let mut parts = token.split('.');
    let (Some(h), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(h)
        .map_err(|_| TokenError::Malformed)?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| TokenError::Malformed)?;
    let alg = v
        .get("alg")
        .and_then(Value::as_str)
        .ok_or(TokenError::Malformed)?;
    let kid = v.get("kid").and_then(Value::as_str).map(str::to_owned);
    Ok((alg.to_string(), kid))
}

/// Whether a token is a JWT (three parts, a readable header naming `alg`).
pub(crate) fn is_jwt(token: &str) -> bool {
    header_of(token).is_ok()
}

/// The `kid` a token names, if it is a JWT at all (to decide whether to re-fetch the keys).
pub(crate) fn kid_of(token: &str) -> Option<String> {
    header_of(token).ok().and_then(|(_, k)| k)
}

/// Verify a token against the keys and the policy, at `now` (Unix seconds).
pub(crate) fn verify(
    token: &str,
    keys: &KeySet,
    policy: &Policy,
    now: u64,
) -> Result<Identity, TokenError> {
    let (alg_name, kid) = header_of(token)?;
    let alg: Algorithm = alg_name
        .parse()
        .map_err(|_| TokenError::Algorithm(alg_name.clone()))?;
    if !policy.algorithms.contains(&alg) || alg.family() == AlgorithmFamily::Hmac {
        return Err(TokenError::Algorithm(alg_name));
    }
    let candidates: Vec<&Key> = keys
        .keys
        .iter()
        .filter(|k| k.family == alg.family() && k.alg.is_none_or(|a| a == alg))
        .filter(|k| kid.is_none() || k.kid == kid)
        .collect();
    if candidates.is_empty() {
        return Err(TokenError::UnknownKey);
    }
    let mut v = Validation::new(alg);
    v.leeway = policy.leeway_secs;
    v.validate_nbf = true;
    v.set_issuer(&[&policy.issuer]);
    v.set_audience(&[&policy.audience]);
    v.set_required_spec_claims(&["exp", "iss", "aud"]);
    let mut last = TokenError::Signature;
    for k in candidates {
        match jsonwebtoken::decode::<Map<String, Value>>(token, &k.key, &v) {
            Ok(data) => return identity(data.claims, policy, now),
            Err(e) => {
                use jsonwebtoken::errors::ErrorKind as K;
                last = match e.kind() {
                    K::InvalidSignature => TokenError::Signature,
                    K::ExpiredSignature => TokenError::Expired,
                    K::ImmatureSignature => TokenError::NotYetValid,
                    K::InvalidIssuer => TokenError::Issuer,
                    K::InvalidAudience => TokenError::Audience,
                    K::MissingRequiredClaim(c) => TokenError::MissingClaim(c.clone()),
                    K::InvalidAlgorithm | K::InvalidAlgorithmName => {
                        TokenError::Algorithm(alg_name.clone())
                    }
                    _ => TokenError::Malformed,
                };
                if last != TokenError::Signature {
                    // The signature held: the claims decided, no other key would change that.
                    return Err(last);
                }
            }
        }
    }
    Err(last)
}

fn identity(claims: Map<String, Value>, policy: &Policy, now: u64) -> Result<Identity, TokenError> {
    // jsonwebtoken checked exp/nbf against its own clock; `now` keeps this function testable
    // for the one check it does not make: `exp` must be a number (a string `exp` is refused).
    match claims.get("exp") {
        Some(Value::Number(n))
            if n.as_f64()
                .is_some_and(|e| e + policy.leeway_secs as f64 >= now as f64) => {}
        Some(Value::Number(_)) => return Err(TokenError::Expired),
        _ => return Err(TokenError::MissingClaim("exp".into())),
    }
    let subject = match claims.get(&policy.principal_claim) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(v @ Value::Number(_)) => v.to_string(),
        _ => return Err(TokenError::MissingClaim(policy.principal_claim.clone())),
    };
    Ok(Identity::new(subject, claims))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_reading_refuses_garbage() {
        assert_eq!(header_of("abc"), Err(TokenError::Malformed));
        assert_eq!(header_of("a.b.c.d"), Err(TokenError::Malformed));
        assert_eq!(header_of("!!.b.c"), Err(TokenError::Malformed));
        let h = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"alg":"none","kid":"k1"}"#);
        assert_eq!(
            header_of(&format!("{h}.e30.")),
            Ok(("none".into(), Some("k1".into())))
        );
    }

    #[test]
    fn none_and_hmac_are_refused_before_any_key() {
        let policy = Policy {
            issuer: "i".into(),
            audience: "a".into(),
            algorithms: vec![Algorithm::RS256, Algorithm::HS256],
            leeway_secs: 0,
            principal_claim: "sub".into(),
        };
        let keys = KeySet::default();
        for alg in ["none", "HS256", "HS512"] {
            let h = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(format!(r#"{{"alg":"{alg}"}}"#));
            let t = format!("{h}.e30.c2ln");
            assert_eq!(
                verify(&t, &keys, &policy, 0),
                Err(TokenError::Algorithm(alg.into()))
            );
        }
    }

    #[test]
    fn symmetric_and_broken_keys_are_skipped() {
        let set = br#"{"keys":[{"kty":"oct","k":"c2VjcmV0"},{"kty":"RSA","n":"!!","e":"AQAB"},{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"ed"}]}"#;
        let k = KeySet::parse(set).unwrap();
        assert_eq!(k.keys.len(), 1);
        assert!(k.has_kid("ed"));
        assert_eq!(k.skipped, 2);
        assert!(KeySet::parse(b"{}").is_err());
        assert!(KeySet::parse(b"nope").is_err());
    }
}
