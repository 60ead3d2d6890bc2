//! `https://` targets: rustls (ring) with the public web roots, the CA certificates of
//! `--cacert`, or no verification at all with `--insecure`; ALPN offers `h2` and `http/1.1`, and
//! a target that picks `h2` is driven over HTTP/2 (one multiplexed connection, reopened when it
//! closes), else over a pool of HTTP/1.1 connections as for plain http.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio_rustls::rustls::crypto;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

/// A complete answer (of this client or of [`super::client::Http`] over plain TCP).
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

/// The TLS options of the command line.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsOptions {
    pub insecure: bool,
    pub cacert: Option<PathBuf>,
}

/// The rustls client configuration for `opts`.
pub(crate) fn client_config(opts: &TlsOptions) -> anyhow::Result<ClientConfig> {
    let provider = Arc::new(crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let mut cfg = if opts.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(crate::tls_util::AcceptAnyServerCert(
                provider,
            )))
            .with_no_client_auth()
    } else {
        let roots = crate::tls_util::trust_roots(opts.cacert.as_deref())
            .map_err(|e| anyhow::anyhow!("--cacert {e}"))?;
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

/// The connections to one https target.
pub(super) struct TlsPool {
    connector: TlsConnector,
    server_name: ServerName<'static>,
    addr: SocketAddr,
    h1_idle: Mutex<Vec<http1::SendRequest<Full<Bytes>>>>,
    h2: Mutex<Option<http2::SendRequest<Full<Bytes>>>>,
    /// The absolute URI, for HTTP/2 requests (`:scheme` and `:authority`).
    absolute: Uri,
}

enum Conn {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

impl TlsPool {
    pub(crate) fn new(uri: &Uri, addr: SocketAddr, opts: &TlsOptions) -> anyhow::Result<TlsPool> {
        let host = uri.host().context("target URL has no host")?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(host.to_string())
            .with_context(|| format!("{host:?} is not a TLS server name"))?;
        Ok(TlsPool {
            connector: TlsConnector::from(Arc::new(client_config(opts)?)),
            server_name,
            addr,
            h1_idle: Mutex::new(Vec::new()),
            h2: Mutex::new(None),
            absolute: uri.clone(),
        })
    }

    async fn connect(&self) -> anyhow::Result<Conn> {
        let tcp = tokio::net::TcpStream::connect(self.addr)
            .await
            .with_context(|| format!("connecting to {}", self.addr))?;
        tcp.set_nodelay(true)?;
        let tls = self
            .connector
            .connect(self.server_name.clone(), tcp)
            .await
            .with_context(|| format!("TLS handshake with {}", self.addr))?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(tls);
        if h2 {
            let (sender, conn) = http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Conn::H2(sender))
        } else {
            let (sender, conn) = http1::handshake(io).await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Conn::H1(sender))
        }
    }

    fn idle(&self) -> Option<Conn> {
        if let Some(s) = self.h2.lock().expect("h2 lock").as_ref() {
            if !s.is_closed() {
                return Some(Conn::H2(s.clone()));
            }
        }
        let mut pool = self.h1_idle.lock().expect("pool lock");
        while let Some(s) = pool.pop() {
            if !s.is_closed() {
                return Some(Conn::H1(s));
            }
        }
        None
    }

    /// Send one request (origin-form URI and Host header, as built by the client).
    pub(crate) async fn send(&self, mut req: Request<Full<Bytes>>) -> anyhow::Result<Answer> {
        let conn = match self.idle() {
            Some(c) => c,
            None => {
                let c = self.connect().await?;
                if let Conn::H2(s) = &c {
                    *self.h2.lock().expect("h2 lock") = Some(s.clone());
                }
                c
            }
        };
        let resp = match conn {
            Conn::H2(mut s) => {
                *req.uri_mut() = self.absolute.clone();
                req.headers_mut().remove(http::header::HOST);
                s.ready().await?;
                s.send_request(req).await?
            }
            Conn::H1(mut s) => {
                s.ready().await?;
                let resp = s.send_request(req).await?;
                let (parts, body) = resp.into_parts();
                let body = body.collect().await?.to_bytes();
                if !s.is_closed() {
                    self.h1_idle.lock().expect("pool lock").push(s);
                }
                return Ok(Answer {
                    status: parts.status,
                    headers: parts.headers,
                    body,
                });
            }
        };
        let (parts, body) = resp.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
}
