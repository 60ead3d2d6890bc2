//! `auth.jwks`, `auth.introspection` and `auth.algorithms`: where the keys and the answers that
//! verify a token come from, and which signature algorithms may be used at all.

use serde::{Deserialize, Deserializer};
use std::path::PathBuf;
use std::time::Duration;

use super::humantime_serde_compat;

/// A JWKS from a file or from a URL (exactly one).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JwksConfig {
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// `http://` or `https://` URL of the issuer's JWKS.
    #[serde(default)]
    pub url: Option<String>,
    /// How long a fetched set is used when the response has no `Cache-Control: max-age`; a file
    /// is checked for changes this often.
    #[serde(default = "d_refresh", with = "humantime_serde_compat")]
    pub refresh: Duration,
    /// Floor for `max-age` (a key set is never fetched more often than this on schedule).
    #[serde(default = "d_min_refresh", with = "humantime_serde_compat")]
    pub min_refresh: Duration,
    /// A token naming an unknown `kid` triggers a re-fetch at most this often (so tokens with
    /// invented key ids cannot flood the issuer).
    #[serde(default = "d_unknown_kid", with = "humantime_serde_compat")]
    pub unknown_kid_interval: Duration,
    /// Timeout of one fetch.
    #[serde(default = "d_fetch_timeout", with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// PEM certificates trusted for an `https://` URL besides the Mozilla roots (a private CA).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

/// The authorization server's introspection endpoint (RFC 7662), used for tokens that are not
/// JWTs. Answers are cached, bounded, by a hash of the token (never the token).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionConfig {
    /// `http://` or `https://` URL of the endpoint.
    pub url: String,
    /// Client credentials for HTTP Basic authentication at the endpoint.
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The secret read from a file instead (trailing whitespace trimmed).
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    #[serde(default = "d_fetch_timeout", with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// How long an active answer is reused (never past the token's `exp`).
    #[serde(default = "d_intro_ttl", with = "humantime_serde_compat")]
    pub cache_ttl: Duration,
    /// How long an inactive (refused) answer is reused.
    #[serde(default = "d_intro_negative", with = "humantime_serde_compat")]
    pub negative_ttl: Duration,
    /// Most answers cached at once.
    #[serde(default = "d_intro_size")]
    pub cache_size: usize,
    /// PEM certificates trusted for an `https://` URL besides the Mozilla roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

fn d_intro_ttl() -> Duration {
    Duration::from_secs(60)
}
fn d_intro_negative() -> Duration {
    Duration::from_secs(10)
}
fn d_intro_size() -> usize {
    10_000
}

/// A JWS algorithm name, restricted to asymmetric ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlgName(pub jsonwebtoken::Algorithm);

impl<'de> Deserialize<'de> for AlgName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use jsonwebtoken::Algorithm::*;
        let s = String::deserialize(d)?;
        let alg = match s.as_str() {
            "RS256" => RS256,
            "RS384" => RS384,
            "RS512" => RS512,
            "PS256" => PS256,
            "PS384" => PS384,
            "PS512" => PS512,
            "ES256" => ES256,
            "ES384" => ES384,
            "EdDSA" => EdDSA,
            "HS256" | "HS384" | "HS512" | "none" => {
                return Err(serde::de::Error::custom(format!(
                    "algorithms: {s} is never accepted (a resource server verifies with public keys only); use RS256, ES256 or EdDSA"
                )))
            }
            _ => {
                return Err(serde::de::Error::custom(format!(
                    "algorithms: unknown algorithm {s:?}; use RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384 or EdDSA"
                )))
            }
        };
        Ok(AlgName(alg))
    }
}

pub(super) fn default_algorithms() -> Vec<AlgName> {
    use jsonwebtoken::Algorithm::*;
    [RS256, ES256, EdDSA].into_iter().map(AlgName).collect()
}

fn d_refresh() -> Duration {
    Duration::from_secs(300)
}
fn d_min_refresh() -> Duration {
    Duration::from_secs(30)
}
fn d_unknown_kid() -> Duration {
    Duration::from_secs(10)
}
fn d_fetch_timeout() -> Duration {
    Duration::from_secs(5)
}
