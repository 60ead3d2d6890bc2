//! `pools.<name>.credentials`: how the gateway authenticates to a pool's instances — a static
//! secret, OAuth client credentials, or RFC 8693 token exchange on behalf of the caller. Only
//! the schema and its checks live here, in the component's own folder (`crate::config` names
//! this section in a pool; the secrets themselves are read by [`super::secret`] and
//! [`super::assertion`]; a check reads them too, so a missing or empty one is refused at
//! `check` and reload time, and never printed).

use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

use crate::values::humantime_serde_compat;

/// Exactly one way to authenticate to the pool's instances.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CredentialsConfig {
    /// A secret (an API key or a bearer token) sent on every request.
    #[serde(default, rename = "static")]
    pub fixed: Option<StaticCredential>,
    /// A token for the pool's audience from an OAuth token endpoint (client credentials grant).
    #[serde(default)]
    pub client_credentials: Option<OAuthClientConfig>,
    /// The verified caller's token exchanged (RFC 8693) for one whose audience is the pool.
    #[serde(default)]
    pub token_exchange: Option<OAuthClientConfig>,
}

/// Where a secret is read from: exactly one of `file` or `env`. Re-read on every reload.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SecretSource {
    /// A file holding the secret (surrounding whitespace and a final newline are ignored).
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// An environment variable holding the secret.
    #[serde(default)]
    pub env: Option<String>,
}

/// `credentials.static`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StaticCredential {
    /// Where the secret is.
    pub secret: SecretSource,
    /// The request header that carries it (default `authorization`).
    #[serde(default = "d_authorization")]
    pub header: String,
    /// Written before the secret, with a space: default `Bearer` for `authorization`, nothing
    /// for other headers (`x-api-key: <secret>`). `""` sends the secret alone.
    #[serde(default)]
    pub scheme: Option<String>,
}

/// A signed JWT client assertion (RFC 7523, `private_key_jwt`) instead of a client secret.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PrivateKeyJwt {
    /// A PEM private key (PKCS#8, or PKCS#1 for RSA).
    pub key_file: PathBuf,
    /// RS256 (default), RS384, RS512, PS256, ES256, ES384 or EdDSA; it must fit the key.
    #[serde(default = "d_rs256")]
    pub algorithm: String,
    /// The `kid` header of the assertion, when the server needs it to pick the key.
    #[serde(default)]
    pub kid: Option<String>,
}

/// `credentials.client_credentials` and `credentials.token_exchange`: the token endpoint, how
/// the gateway authenticates to it, and what the token is for.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OAuthClientConfig {
    /// The authorization server's token endpoint (`https://`, or `http://` on loopback).
    pub token_url: String,
    pub client_id: String,
    /// HTTP Basic client authentication with this secret (`client_secret_basic`)…
    #[serde(default)]
    pub client_secret: Option<SecretSource>,
    /// …or a signed client assertion (`private_key_jwt`).
    #[serde(default)]
    pub private_key_jwt: Option<PrivateKeyJwt>,
    /// `audience` of the token request: the pool's logical name at the authorization server.
    #[serde(default)]
    pub audience: Option<String>,
    /// `resource` of the token request (RFC 8707): the pool's canonical URI.
    #[serde(default)]
    pub resource: Option<String>,
    /// Scopes asked for (for token exchange: at most the caller's; narrower is better).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// A token is used until this long before it expires, then replaced.
    #[serde(default = "d_refresh_before", with = "humantime_serde_compat")]
    pub refresh_before: Duration,
    /// One token request, connect to answer.
    #[serde(default = "d_timeout", with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// PEM certificates trusted for an `https://` token endpoint besides the Mozilla roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Token exchange only: exchanged tokens kept at once (by caller token hash and audience).
    #[serde(default)]
    pub cache_size: Option<u64>,
    /// Token exchange only: the gateway's own requests to the pool (health checks, federation
    /// catalog), which have no caller, use a client-credentials token of this same client
    /// for the same audience. `false`: they go without a credential.
    #[serde(default = "d_true")]
    pub service_token: bool,
}

fn d_authorization() -> String {
    "authorization".into()
}
fn d_rs256() -> String {
    "RS256".into()
}
fn d_refresh_before() -> Duration {
    Duration::from_secs(30)
}
fn d_timeout() -> Duration {
    Duration::from_secs(5)
}
fn d_true() -> bool {
    true
}

/// Which mode a pool uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Static,
    ClientCredentials,
    TokenExchange,
}

impl Mode {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Mode::Static => "static",
            Mode::ClientCredentials => "client_credentials",
            Mode::TokenExchange => "token_exchange",
        }
    }
}

impl CredentialsConfig {
    /// The one mode set (validation refuses none or several).
    pub(crate) fn mode(&self) -> Option<Mode> {
        match (&self.fixed, &self.client_credentials, &self.token_exchange) {
            (Some(_), None, None) => Some(Mode::Static),
            (None, Some(_), None) => Some(Mode::ClientCredentials),
            (None, None, Some(_)) => Some(Mode::TokenExchange),
            _ => None,
        }
    }

    /// What `mcp-edge check` prints: the mode, header and endpoint, never a secret.
    pub(crate) fn describe(&self) -> String {
        let src = |s: &SecretSource| match (&s.file, &s.env) {
            (Some(f), _) => format!("file {}", f.display()),
            (_, Some(e)) => format!("env ${e}"),
            _ => "-".into(),
        };
        if let Some(s) = &self.fixed {
            return format!("static secret ({}) in {}", src(&s.secret), s.header);
        }
        let (mode, o) = match (&self.client_credentials, &self.token_exchange) {
            (Some(o), _) => ("client credentials", o),
            (_, Some(o)) => ("token exchange for the caller", o),
            _ => return "none".into(),
        };
        let auth = match (&o.client_secret, &o.private_key_jwt) {
            (Some(s), _) => format!("client_secret ({})", src(s)),
            (_, Some(k)) => format!("private_key_jwt {} ({})", k.key_file.display(), k.algorithm),
            _ => "-".into(),
        };
        let target = [("audience", &o.audience), ("resource", &o.resource)]
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "{mode} from {} as {} by {auth}; {target}; scopes [{}]",
            o.token_url,
            o.client_id,
            o.scopes.join(" ")
        )
    }
}
