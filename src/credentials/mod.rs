//! Credentials towards the fleet: how the gateway authenticates to each pool's instances
//! (`pools.<name>.credentials`), so that a pool never receives the caller's edge token (no
//! token passthrough, spec §Token Handling) and never a token minted for another audience.
//!
//! - a **static** secret from a file or the environment, in the header the operator names;
//! - **client credentials**: one token per pool from its token endpoint, refreshed ahead of
//!   expiry by one background fetch while requests keep using the valid one ([`cell`]);
//! - **token exchange** (RFC 8693): the verified caller's token exchanged for one whose
//!   audience is the pool, cached per (SHA-256 of the caller's token, audience), bounded.
//!
//! [`Credentials`] is built with each gateway generation (secrets and keys re-read on every
//! reload; token caches kept when a pool's settings did not change). The gateway asks
//! [`Credentials::for_request`] once per request after admission and limits, and
//! [`Credentials::for_gateway`] for its own requests (health checks, federation catalogs).
//! Secrets are [`secret::Secret`]s and tokens sensitive header values: nothing here formats one.
//!
//! A component in one folder, as the gateway's are, but a folder of the crate below the gateway
//! (as `crate::auth` is): the config names its section ([`config`]) and runs its checks
//! ([`check`]), which read the secrets and signing keys ([`secret`], [`assertion`]), and the
//! config never imports the gateway. Its metric families are [`metrics`], registered on the
//! gateway's registry. The one part that is the gateway's, its step in a request (the credential
//! obtained once the pool is final, set on every attempt's head), is
//! `gateway::journey::credentials`, beside the caller's own, `gateway::journey::auth`.

pub(crate) mod assertion;
pub(crate) mod cell;
pub(crate) mod check;
pub(crate) mod config;
pub(crate) mod metrics;
pub(crate) mod secret;
pub(crate) mod token;

use futures::FutureExt;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

use cell::{Cell, Outcome};
use config::{CredentialsConfig, Mode, OAuthClientConfig};
pub(crate) use metrics::CredentialMetrics;
pub(crate) use token::Failure;

/// Exchanged tokens kept per pool by default.
const EXCHANGE_CACHE: u64 = 10_000;
/// An exchanged token not used for this long is dropped (its caller went away).
const EXCHANGE_IDLE: Duration = Duration::from_secs(600);

pub(crate) use crate::mcp::hex::encode as hex;

/// The header and value to set on a request to a pool.
pub(crate) type Credential = (http::HeaderName, http::HeaderValue);

/// One pool's way to authenticate.
pub(crate) struct PoolCredential {
    pub pool: String,
    pub mode: Mode,
    /// The header the credential travels in (`authorization` unless a static secret names another).
    pub header: http::HeaderName,
    cfg: CredentialsConfig,
    kind: Kind,
}

enum Kind {
    Static(http::HeaderValue),
    ClientCredentials {
        client: Arc<token::Client>,
        cell: Arc<Cell>,
    },
    Exchange {
        client: Arc<token::Client>,
        cache: moka::sync::Cache<[u8; 32], Arc<Cell>>,
        /// The client-credentials token of the exchange client, for the gateway's own calls.
        service: Option<Arc<Cell>>,
    },
}

/// Every pool's credential, indexed like the route table's pools.
pub struct Credentials {
    pools: Vec<Option<PoolCredential>>,
    pub metrics: Arc<CredentialMetrics>,
}

impl Credentials {
    /// Build for `pools` (the route table's order: each pool's name and credentials settings).
    /// `previous`: the generation before a reload, whose token caches are kept for pools whose
    /// credentials settings did not change.
    pub(crate) fn build<'a>(
        pools: impl ExactSizeIterator<Item = (&'a str, Option<&'a CredentialsConfig>)>,
        metrics: Arc<CredentialMetrics>,
        previous: Option<&Credentials>,
    ) -> anyhow::Result<Credentials> {
        let mut out = Vec::with_capacity(pools.len());
        for (name, cfg) in pools {
            let Some(cfg) = cfg else {
                out.push(None);
                continue;
            };
            let old = previous
                .and_then(|p| p.by_name(name))
                .filter(|o| &o.cfg == cfg);
            let built = PoolCredential::build(name, cfg, old)
                .map_err(|e| anyhow::anyhow!("pools.{name}.credentials: {e}"))?;
            out.push(Some(built));
        }
        Ok(Credentials {
            pools: out,
            metrics,
        })
    }

    fn by_name(&self, name: &str) -> Option<&PoolCredential> {
        self.pools.iter().flatten().find(|p| p.pool == name)
    }

    /// Pool `p`'s credential settings, if it has any.
    pub(crate) fn pool(&self, p: usize) -> Option<&PoolCredential> {
        self.pools.get(p).and_then(Option::as_ref)
    }

    /// The credential for a request forwarded to pool `p` on behalf of a caller whose verified
    /// bearer token is `caller` (`None`: no token). `Ok(None)`: the pool has none, or (token
    /// exchange) there is no caller to act for.
    pub(crate) async fn for_request(
        &self,
        p: usize,
        caller: Option<&str>,
    ) -> Result<Option<Credential>, Failure> {
        let Some(pc) = self.pool(p) else {
            return Ok(None);
        };
        let got = match &pc.kind {
            Kind::Static(v) => return Ok(Some((pc.header.clone(), v.clone()))),
            Kind::ClientCredentials { client, cell } => {
                self.client_credentials(pc, client, cell).await
            }
            Kind::Exchange { client, cache, .. } => {
                let Some(subject) = caller else {
                    return Ok(None);
                };
                let key = exchange_key(
                    subject,
                    client.cfg.audience.as_deref(),
                    client.cfg.resource.as_deref(),
                );
                let cell = cache.get_with(key, Default::default);
                let client = client.clone();
                let subject = subject.to_string();
                let fetch = move || async move { client.exchange(&subject).await }.boxed();
                self.counted(pc, &cell, fetch).await
            }
        };
        got.map(|v| Some((pc.header.clone(), v)))
    }

    /// The credential for the gateway's own requests to pool `p` (no caller): the static secret,
    /// the client credentials token, or for token exchange the exchange client's own
    /// client-credentials token (`service_token: true`, the default).
    pub(crate) async fn for_gateway(&self, p: usize) -> Result<Option<Credential>, Failure> {
        let Some(pc) = self.pool(p) else {
            return Ok(None);
        };
        let got = match &pc.kind {
            Kind::Static(v) => return Ok(Some((pc.header.clone(), v.clone()))),
            Kind::ClientCredentials { client, cell } => {
                self.client_credentials(pc, client, cell).await
            }
            Kind::Exchange {
                client,
                service: Some(cell),
                ..
            } => self.client_credentials(pc, client, cell).await,
            Kind::Exchange { service: None, .. } => return Ok(None),
        };
        got.map(|v| Some((pc.header.clone(), v)))
    }

    async fn client_credentials(
        &self,
        pc: &PoolCredential,
        client: &Arc<token::Client>,
        cell: &Arc<Cell>,
    ) -> Result<http::HeaderValue, Failure> {
        let client = client.clone();
        let fetch = move || async move { client.client_credentials().await }.boxed();
        self.counted(pc, cell, fetch).await
    }

    /// Get from `cell`, counting the outcome and every fetch; a fetch that fails is logged
    /// (once per fetch, never with a credential).
    async fn counted<F>(
        &self,
        pc: &PoolCredential,
        cell: &Arc<Cell>,
        fetch: F,
    ) -> Result<http::HeaderValue, Failure>
    where
        F: FnOnce() -> futures::future::BoxFuture<'static, Result<token::Token, Failure>>,
    {
        let m = self.metrics.clone();
        let (pool, mode) = (pc.pool.clone(), pc.mode.label());
        let fetched = move |r: &Result<token::Token, Failure>| {
            let result = match r {
                Ok(_) => "ok",
                Err(f) => {
                    tracing::warn!("pool {pool}: {mode} token request failed: {}", f.describe());
                    f.reason()
                }
            };
            m.fetches.with_label_values(&[&pool, mode, result]).inc();
        };
        let (r, outcome) = cell.get(fetch, fetched).await;
        let labels = [pc.pool.as_str(), mode, outcome.label()];
        self.metrics.cache.with_label_values(&labels).inc();
        if let Err(f) = &r {
            let labels = [pc.pool.as_str(), mode, f.reason()];
            self.metrics.failures.with_label_values(&labels).inc();
        }
        debug_assert!(outcome != Outcome::Hit || r.is_ok());
        r
    }
}

/// The cache key of an exchanged token: the caller's token and the audience, hashed (the
/// token itself is never kept).
fn exchange_key(subject: &str, audience: Option<&str>, resource: Option<&str>) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in [Some(subject), audience, resource] {
        let part = part.unwrap_or("");
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().into()
}

impl PoolCredential {
    fn build(
        name: &str,
        cfg: &CredentialsConfig,
        old: Option<&PoolCredential>,
    ) -> Result<PoolCredential, String> {
        let mode = cfg.mode().ok_or("give exactly one mode")?;
        let auth = http::header::AUTHORIZATION;
        let client = |o: &OAuthClientConfig| token::Client::new(o).map(Arc::new);
        let (header, kind) = match mode {
            Mode::Static => {
                let s = cfg.fixed.as_ref().ok_or("static")?;
                let secret = secret::read(&s.secret)?;
                let header =
                    http::HeaderName::from_bytes(s.header.as_bytes()).map_err(|e| e.to_string())?;
                let default_scheme = if header == auth { "Bearer" } else { "" };
                let scheme = s.scheme.as_deref().unwrap_or(default_scheme);
                let text = match scheme {
                    "" => secret.expose().to_string(),
                    s => format!("{s} {}", secret.expose()),
                };
                let mut v = http::HeaderValue::from_str(&text)
                    .map_err(|_| "the secret holds characters a header cannot carry".to_string())?;
                v.set_sensitive(true);
                (header, Kind::Static(v))
            }
            Mode::ClientCredentials => {
                let o = cfg
                    .client_credentials
                    .as_ref()
                    .ok_or("client_credentials")?;
                let cell = match old.map(|o| &o.kind) {
                    Some(Kind::ClientCredentials { cell, .. }) => cell.clone(),
                    _ => Default::default(),
                };
                (
                    auth,
                    Kind::ClientCredentials {
                        client: client(o)?,
                        cell,
                    },
                )
            }
            Mode::TokenExchange => {
                let o = cfg.token_exchange.as_ref().ok_or("token_exchange")?;
                let (cache, service) = match old.map(|o| &o.kind) {
                    Some(Kind::Exchange { cache, service, .. }) => (cache.clone(), service.clone()),
                    _ => {
                        let cache = moka::sync::Cache::builder()
                            .max_capacity(o.cache_size.unwrap_or(EXCHANGE_CACHE))
                            .time_to_idle(EXCHANGE_IDLE)
                            .build();
                        (cache, o.service_token.then(Default::default))
                    }
                };
                (
                    auth,
                    Kind::Exchange {
                        client: client(o)?,
                        cache,
                        service,
                    },
                )
            }
        };
        Ok(PoolCredential {
            pool: name.to_string(),
            mode,
            header,
            cfg: cfg.clone(),
            kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchange_keys_separate_callers_and_audiences() {
        let a = exchange_key("token-a", Some("tools"), None);
        assert_ne!(a, exchange_key("token-b", Some("tools"), None));
        assert_ne!(a, exchange_key("token-a", Some("other"), None));
        assert_ne!(
            exchange_key("ab", Some("c"), None),
            exchange_key("a", Some("bc"), None)
        );
        assert_eq!(a, exchange_key("token-a", Some("tools"), None));
    }
}
