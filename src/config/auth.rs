//! `auth:` in `gateway.yaml`: the OAuth 2.1 resource server settings (who may call at all),
//! the per-tool rules (who may call what), what is passed upstream, and per-route overrides
//! (`routes[].auth`). Only the schema and its checks live here; [`crate::auth`] does the work.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

pub(crate) use super::auth_keys::{AlgName, IntrospectionConfig, JwksConfig};
use super::{humantime_serde_compat, ConfigError, ErrAt, Match, Pos};

/// The MCP listener acts as an OAuth 2.1 resource server (spec §Authorization).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// This resource's canonical URI (RFC 8707), e.g. `https://mcp.example.com/mcp`. A token's
    /// `aud` must contain it; it is the `resource` of the Protected Resource Metadata.
    pub resource: String,
    /// The token issuer, compared exactly with `iss`.
    pub issuer: String,
    /// Where the issuer's signing keys come from.
    pub jwks: JwksConfig,
    /// RFC 7662 introspection for opaque (non-JWT) access tokens.
    #[serde(default)]
    pub introspection: Option<IntrospectionConfig>,
    /// Accepted signature algorithms. `none` and HMAC (`HS*`) are never accepted.
    #[serde(default = "super::auth_keys::default_algorithms")]
    pub algorithms: Vec<AlgName>,
    /// Clock skew allowed on `exp` and `nbf`.
    #[serde(default = "d_leeway", with = "humantime_serde_compat")]
    pub leeway: Duration,
    /// Scopes every request needs (also advertised in `WWW-Authenticate: … scope=`).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The claim that names the caller (`principal` in limits, hashing and forwarded headers).
    #[serde(default = "d_principal_claim")]
    pub principal_claim: String,
    /// Authorization servers listed in the metadata (default: the issuer).
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// `scopes_supported` in the metadata (default: every scope named in this section).
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// Where clients find the metadata (`resource_metadata` in `WWW-Authenticate`). Default:
    /// the resource's origin + `/.well-known/oauth-protected-resource` + its path (RFC 9728).
    #[serde(default)]
    pub metadata_url: Option<String>,
    /// Ordered allow/deny rules on method and name; the first that applies decides.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// What happens when no rule applies.
    #[serde(default)]
    pub default: Effect,
    #[serde(default)]
    pub forward: ForwardConfig,
    /// Per-caller filtering of `tools/list`, `prompts/list` and `resources/list` results.
    #[serde(default)]
    pub list_filter: ListFilterConfig,
}

/// Allow or deny.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    #[default]
    Allow,
    Deny,
}

/// One authorization rule: when a request matches `match` and its token satisfies `when`,
/// `effect` decides.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Names the rule in refusals, metrics and logs.
    pub name: String,
    /// `Mcp-Method` and `Mcp-Name` patterns, as in routes.
    #[serde(rename = "match", default)]
    pub matcher: Match,
    #[serde(default)]
    pub effect: Effect,
    /// Conditions on the token (all must hold; empty = always).
    #[serde(default)]
    pub when: When,
}

impl PartialEq for Match {
    fn eq(&self, o: &Match) -> bool {
        self.method == o.method && self.name == o.name
    }
}

/// Conditions on a verified token.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// Scopes the token must all carry.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Claims that must hold: `claim: value` or `claim: [v1, v2]` (any of them). A claim that is
    /// an array matches when it contains one of the values.
    #[serde(default)]
    pub claims: BTreeMap<String, OneOrMany>,
}

/// A string or a list of strings.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub(crate) fn values(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// What goes upstream. The token itself does not, by default (spec: no token passthrough).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ForwardConfig {
    /// Pools that are the token's audience too and get `Authorization` as the client sent it.
    #[serde(default)]
    pub token_to_pools: Vec<String>,
    /// Request headers set from the verified token: header name → claim name (`principal` is
    /// the principal claim; `scope` the scopes, space-separated). Client-sent values of these
    /// headers are always removed.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ListFilterConfig {
    /// Filter list results by the rules (on by default when there are rules).
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// Largest list response the gateway buffers to filter; a larger one is replaced by a
    /// JSON-RPC error (the caller never sees an unfiltered list).
    #[serde(default = "d_list_max")]
    pub max_bytes: usize,
}

impl Default for ListFilterConfig {
    fn default() -> Self {
        ListFilterConfig {
            enabled: true,
            max_bytes: d_list_max(),
        }
    }
}

/// `routes[].auth` / `default_route.auth`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouteAuth {
    /// `false`: requests on this route need no token (a token that is sent is still verified).
    #[serde(default = "d_true")]
    pub required: bool,
    /// Scopes needed on this route, besides `auth.scopes`.
    #[serde(default)]
    pub scopes: Vec<String>,
}

fn d_true() -> bool {
    true
}
fn d_leeway() -> Duration {
    Duration::from_secs(30)
}
fn d_principal_claim() -> String {
    "sub".into()
}
fn d_list_max() -> usize {
    4 * 1024 * 1024
}

impl AuthConfig {
    /// The lines `mcp-edge check` prints.
    pub(crate) fn describe(&self) -> String {
        let jwks = match (&self.jwks.file, &self.jwks.url) {
            (Some(f), _) => format!("file {}", f.display()),
            (_, Some(u)) => u.clone(),
            _ => "-".into(),
        };
        let algs: Vec<String> = self
            .algorithms
            .iter()
            .map(|a| format!("{:?}", a.0))
            .collect();
        let mut out = format!(
            "auth      resource {}   issuer {}\n          keys {jwks} ({})   scopes [{}]   principal {}\n",
            self.resource,
            self.issuer,
            algs.join(", "),
            self.scopes.join(" "),
            self.principal_claim
        );
        for r in &self.rules {
            let m = |p: &Option<crate::config::Pattern>| {
                p.as_ref().map_or("*".to_string(), |p| p.to_string())
            };
            out.push_str(&format!(
                "          rule {:<20} {:?} {} {} when scopes [{}] claims {:?}\n",
                r.name,
                r.effect,
                m(&r.matcher.method),
                m(&r.matcher.name),
                r.when.scopes.join(" "),
                r.when.claims.keys().collect::<Vec<_>>()
            ));
        }
        out.push_str(&format!(
            "          default {:?}; token forwarded to [{}]; identity headers [{}]\n",
            self.default,
            self.forward.token_to_pools.join(", "),
            self.forward
                .headers
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out
    }

    /// Checks serde cannot make. `at` finds where a path (`auth.jwks.url`) is written.
    pub(crate) fn validate(
        &self,
        pools: &[&str],
        at: impl Fn(&str) -> Option<Pos>,
        file: &str,
    ) -> Result<(), ConfigError> {
        let err = |path: &str, message: String| ConfigError::at(file, at(path), message);
        self.check_issuer(&err)?;
        self.check_introspection(&err)?;
        self.check_tokens(&err)?;
        self.check_forward(pools, &err)?;
        if self.list_filter.max_bytes == 0 {
            return Err(err(
                "auth.list_filter.max_bytes",
                "auth.list_filter.max_bytes: must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// The resource URI, the issuer, and exactly one source of its keys.
    fn check_issuer(&self, err: &ErrAt) -> Result<(), ConfigError> {
        if !absolute(&self.resource) || self.resource.contains('#') {
            return Err(err("auth.resource", format!(
                "auth.resource: {:?} must be this resource's absolute canonical URI without a fragment, e.g. https://mcp.example.com/mcp",
                self.resource
            )));
        }
        if self.issuer.is_empty() {
            return Err(err(
                "auth.issuer",
                "auth.issuer: name the token issuer (compared exactly with iss)".into(),
            ));
        }
        match (&self.jwks.file, &self.jwks.url) {
            (Some(_), None) => {}
            (None, Some(u)) if absolute(u) => {}
            (None, Some(u)) => {
                return Err(err("auth.jwks.url",
                    format!("auth.jwks.url: {u:?} is not an http:// or https:// URL"),
                ))
            }
            _ => {
                return Err(err("auth.jwks",
                    "auth.jwks: give exactly one of file: (a JWKS file) or url: (the issuer's jwks_uri)"
                        .into(),
                ))
            }
        }
        Ok(())
    }

    /// The introspection endpoint, when configured: a URL, one secret, a cache.
    fn check_introspection(&self, err: &ErrAt) -> Result<(), ConfigError> {
        let Some(i) = &self.introspection else {
            return Ok(());
        };
        if !absolute(&i.url) {
            return Err(err(
                "auth.introspection.url",
                format!(
                    "auth.introspection.url: {:?} is not an http:// or https:// URL",
                    i.url
                ),
            ));
        }
        if i.client_secret.is_some() && i.client_secret_file.is_some() {
            return Err(err(
                "auth.introspection.client_secret",
                "auth.introspection: give client_secret or client_secret_file, not both".into(),
            ));
        }
        if i.cache_size == 0 {
            return Err(err(
                "auth.introspection.cache_size",
                "auth.introspection.cache_size: must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// What a token must be: signed with a listed algorithm, naming its principal; and rule
    /// names that are unique.
    fn check_tokens(&self, err: &ErrAt) -> Result<(), ConfigError> {
        if self.algorithms.is_empty() {
            return Err(err(
                "auth.algorithms",
                "auth.algorithms: list at least one, e.g. [RS256, ES256, EdDSA]".into(),
            ));
        }
        if self.principal_claim.is_empty() {
            return Err(err(
                "auth.principal_claim",
                "auth.principal_claim: name a claim, e.g. sub or client_id".into(),
            ));
        }
        for (i, r) in self.rules.iter().enumerate() {
            if self.rules[..i].iter().any(|o| o.name == r.name) {
                return Err(err(&format!("auth.rules[{i}].name"), format!(
                    "auth.rules[{i}].name: {:?} is used twice; rule names must be unique (they name refusals)",
                    r.name
                )));
            }
        }
        Ok(())
    }

    /// `auth.forward`: pools that exist (`pools`), valid header names other than Authorization.
    fn check_forward(&self, pools: &[&str], err: &ErrAt) -> Result<(), ConfigError> {
        for (j, p) in self.forward.token_to_pools.iter().enumerate() {
            if !pools.contains(&p.as_str()) {
                return Err(err(
                    &format!("auth.forward.token_to_pools[{j}]"),
                    format!(
                        "auth.forward.token_to_pools: no pool named {p:?}; defined pools: {}",
                        pools.join(", ")
                    ),
                ));
            }
        }
        for h in self.forward.headers.keys() {
            if http::HeaderName::from_bytes(h.as_bytes()).is_err() {
                return Err(err(
                    &format!("auth.forward.headers.{h}"),
                    format!("auth.forward.headers: {h:?} is not a valid header name"),
                ));
            }
            if h.eq_ignore_ascii_case("authorization") {
                return Err(err(&format!("auth.forward.headers.{h}"), "auth.forward.headers: Authorization cannot carry a claim; use token_to_pools to forward the token".into()));
            }
        }
        Ok(())
    }
}

/// Whether `u` is an absolute http:// or https:// URL.
fn absolute(u: &str) -> bool {
    (u.starts_with("https://") || u.starts_with("http://")) && u.len() > 8
}
