//! Connecting to a pool's instances: TLS (`pools.<name>.tls`: SNI, CA bundle, verification,
//! client certificate) and the HTTP version (`pools.<name>.http`), as a template each
//! request's pingora peer is made from; the TLS variant of the active health check; and the
//! words for a failed upstream handshake.
//!
//! Files are read when the gateway is built (at start and on every reload), so a rotated CA or
//! client certificate applies to new connections after a reload; a bad file refuses the config
//! naming the pool and the file. pingora keeps idle upstream connections for reuse per peer;
//! each pool gets its own `group_key`, so two pools that reach one address with different
//! trust never share a connection.

use pingora::upstreams::peer::HttpPeer;
use pingora::utils::tls::{parse_x509, CertKey, WrappedX509};
use rustls::pki_types::ServerName;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::tls::UpstreamHttp;
use crate::config::PoolConfig;
use crate::gateway::transport::tls::{read_chain, read_key, read_roots};
use crate::gateway::transport::upstream_h1::oneshot::{Stream, Streaming};
use crate::gateway::transport::upstream_h1::Pool;

/// How to reach one pool's instances.
#[derive(Clone)]
pub(crate) struct PoolPeers {
    tls: Option<TlsPeer>,
    http: UpstreamHttp,
    group: u64,
    /// The idle connections of the gateway's own keep-alive requests to the pool's instances
    /// ([`PoolPeers::start`]); a reload builds a new pool, so none outlives a trust change.
    kept: Arc<Pool<Box<dyn Stream>>>,
}

/// Idle connections kept per instance for the gateway's own requests.
const KEPT_PER_INSTANCE: usize = 256;

#[derive(Clone)]
struct TlsPeer {
    sni: Option<String>,
    ca: Option<Arc<[WrappedX509]>>,
    verify: bool,
    client: Option<Arc<CertKey>>,
    /// The same trust for the health check's own TLS connections.
    probe: Arc<rustls::ClientConfig>,
}

/// The host part of `host:port` (brackets of an IPv6 literal removed).
fn host_of(instance: &str) -> &str {
    let host = instance.rsplit_once(':').map_or(instance, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

impl PoolPeers {
    /// Read the pool's TLS files; the error names the pool and the file.
    pub(crate) fn build(name: &str, cfg: &PoolConfig) -> anyhow::Result<PoolPeers> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        name.hash(&mut h);
        let tls = match &cfg.tls {
            None => None,
            Some(t) => {
                let err = |e: String| anyhow::anyhow!("pools.{name}.tls: {e}");
                let roots = match &t.ca_file {
                    Some(f) => Some(read_roots(f).map_err(err)?),
                    None => None,
                };
                let ca = match &t.ca_file {
                    Some(f) => {
                        let chain = read_chain(f).map_err(err)?;
                        let list: Vec<WrappedX509> = chain
                            .into_iter()
                            .map(|c| WrappedX509::new(c.to_vec(), parse_x509))
                            .collect();
                        Some(Arc::from(list.into_boxed_slice()))
                    }
                    None => None,
                };
                let client = match (&t.client_cert, &t.client_key) {
                    (Some(c), Some(k)) => {
                        let chain = read_chain(c).map_err(err)?;
                        let key = read_key(k).map_err(err)?;
                        // The same check as for listeners: the key must belong to the cert.
                        rustls::sign::CertifiedKey::from_der(
                            chain.clone(),
                            key.clone_key(),
                            &rustls::crypto::ring::default_provider(),
                        )
                        .map_err(|e| {
                            err(format!(
                                "{} and {}: the key does not belong to the certificate ({e})",
                                c.display(),
                                k.display()
                            ))
                        })?;
                        let certs = chain.iter().map(|c| c.to_vec()).collect();
                        Some(Arc::new(CertKey::new(certs, key.secret_der().to_vec())))
                    }
                    _ => None,
                };
                let probe = probe_config(roots, t.verify).map_err(err)?;
                Some(TlsPeer {
                    sni: t.sni.clone(),
                    ca,
                    verify: t.verify,
                    client,
                    probe,
                })
            }
        };
        Ok(PoolPeers {
            tls,
            http: cfg.http,
            group: h.finish(),
            kept: Arc::new(Pool::new(KEPT_PER_INSTANCE)),
        })
    }

    /// The peer for one instance (timeouts are set by the caller).
    pub(crate) fn peer(&self, addr: SocketAddr, instance: &str) -> HttpPeer {
        let mut peer = match &self.tls {
            None => HttpPeer::new(addr, false, String::new()),
            Some(t) => {
                let sni = t
                    .sni
                    .clone()
                    .unwrap_or_else(|| host_of(instance).to_string());
                let mut p = HttpPeer::new(addr, true, sni);
                p.options.verify_cert = t.verify;
                p.options.verify_hostname = t.verify;
                p.options.ca = t.ca.clone();
                p.client_cert_key = t.client.clone();
                p
            }
        };
        match self.http {
            UpstreamHttp::H1 => {}
            UpstreamHttp::H2 => peer.options.set_http_version(2, 2),
            UpstreamHttp::Auto => peer.options.set_http_version(2, 1),
        }
        if self.http != UpstreamHttp::H1 {
            peer.options.max_h2_streams = 100;
        }
        peer.group_key = self.group;
        peer
    }

    /// Plain HTTP/1.1: the pools the gateway's own upstream leg serves (`upstream_h1`).
    pub(crate) fn is_plain_h1(&self) -> bool {
        self.tls.is_none() && self.http == UpstreamHttp::H1
    }
}

impl PoolPeers {
    /// One whole HTTP/1.1 exchange with an instance, over TLS for TLS pools (the gateway's own
    /// calls: the federation catalog). `request` carries `Connection: close`.
    pub(crate) async fn exchange(
        &self,
        addr: SocketAddr,
        instance: &str,
        request: &[u8],
        max: usize,
    ) -> Result<(pingora::http::ResponseHeader, Vec<u8>), String> {
        let stream = self.connect(addr, instance).await?;
        crate::gateway::transport::upstream_h1::oneshot::exchange(stream, request, max).await
    }

    /// Send `request` (a keep-alive HTTP/1.1 request) to an instance on an idle connection of
    /// the gateway's own when one is kept, else on a new one (`connect` bounds making it), and
    /// read the answer's head. A kept connection the instance closed while idle is replaced
    /// (nothing came back: the request was never read). The connection is kept again, idle at
    /// most `idle`, once its answer is read to the end. Also says whether the connection was a
    /// kept one.
    pub(crate) async fn start(
        &self,
        (addr, instance): (SocketAddr, &str),
        request: &[u8],
        (connect, idle): (std::time::Duration, std::time::Duration),
    ) -> Result<(Streaming<Box<dyn Stream>>, bool), String> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (addr, instance).hash(&mut h);
        let key = h.finish();
        while let Some(conn) = self.kept.take(key) {
            if let Some(s) = Streaming::resume(conn, request).await? {
                return Ok((s.keep_in(&self.kept, key, idle), true));
            }
        }
        let conn = tokio::time::timeout(connect, self.connect(addr, instance))
            .await
            .map_err(|_| format!("connecting to {addr} timed out"))??;
        let s = Streaming::start(conn, request).await?;
        Ok((s.keep_in(&self.kept, key, idle), false))
    }

    /// A connection of the gateway's own to an instance, over TLS for TLS pools.
    pub(crate) async fn connect(
        &self,
        addr: SocketAddr,
        instance: &str,
    ) -> Result<Box<dyn Stream>, String> {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {instance}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let Some(t) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let sni = t
            .sni
            .clone()
            .unwrap_or_else(|| host_of(instance).to_string());
        let name = ServerName::try_from(sni).map_err(|e| format!("{instance}: bad name: {e}"))?;
        let connector = tokio_rustls::TlsConnector::from(t.probe.clone());
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS with {instance}: {e}"))?;
        Ok(Box::new(tls))
    }
}

fn probe_config(
    roots: Option<rustls::RootCertStore>,
    verify: bool,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let mut cfg = if !verify {
        b.dangerous()
            .with_custom_certificate_verifier(Arc::new(crate::tls_util::AcceptAnyServerCert(
                provider,
            )))
            .with_no_client_auth()
    } else {
        let roots = match roots {
            Some(r) => r,
            None => crate::tls_util::trust_roots(None)?,
        };
        b.with_root_certificates(roots).with_no_client_auth()
    };
    // The check speaks HTTP/1.1.
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// For a failed TLS handshake with an instance: the reason, in words (`None` for other errors).
pub(crate) fn handshake_failure(e: &pingora::Error) -> Option<String> {
    use pingora::ErrorType::*;
    match e.etype() {
        TLSHandshakeFailure | TLSHandshakeTimedout | InvalidCert | HandshakeError
        | TLSWantX509Lookup => {
            // pingora flattens the rustls error into its context text ("TLS connect() failed:
            // ... cause: invalid peer certificate: UnknownIssuer, SNI: x"); the last cause is
            // the reason.
            let text = e
                .context
                .as_ref()
                .map_or(e.etype().as_str(), |c| c.as_str());
            let why = text.rsplit_once("cause: ").map_or(text, |(_, r)| r);
            let why = why.split(", SNI:").next().unwrap_or(why).trim();
            Some(format!("TLS handshake failed: {why}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_instances() {
        assert_eq!(host_of("backend.internal:7443"), "backend.internal");
        assert_eq!(host_of("127.0.0.1:7443"), "127.0.0.1");
        assert_eq!(host_of("[::1]:7443"), "::1");
    }
}
