//! TLS servers for upstream tests: a TLS terminator in front of plain upstreams (the reference
//! backend) and an HTTP/2-only upstream, each on 127.0.0.1 and stopped on drop.

use crate::support::background::Background;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::{der_of, provider, Issued};

/// TLS server config for a terminator / test upstream.
pub fn server_config(issued: &Issued, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    let chain: Vec<_> = CertificateDer::pem_slice_iter(issued.cert_pem.as_bytes())
        .map(|c| c.unwrap())
        .collect();
    let key = PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes()).unwrap();
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    cfg.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    Arc::new(cfg)
}

/// A TLS terminator on 127.0.0.1 in front of plain `upstream` addresses (one port each):
/// accepts TLS, copies bytes both ways. Counts handshakes. Stops on drop.
pub struct Terminator {
    pub addrs: Vec<SocketAddr>,
    pub handshakes: Arc<std::sync::atomic::AtomicUsize>,
    _background: Background,
}

impl Terminator {
    pub fn start(upstreams: &[SocketAddr], cfg: Arc<rustls::ServerConfig>) -> Terminator {
        let listeners: Vec<_> = upstreams
            .iter()
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let addrs = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let handshakes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let ups = upstreams.to_vec();
        let hs = handshakes.clone();
        let background = Background::start(move || async move {
            let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
            for (l, up) in listeners.into_iter().zip(ups) {
                l.set_nonblocking(true).unwrap();
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                let (acceptor, hs) = (acceptor.clone(), hs.clone());
                tokio::spawn(async move {
                    while let Ok((tcp, _)) = l.accept().await {
                        let (acceptor, hs) = (acceptor.clone(), hs.clone());
                        tokio::spawn(async move {
                            let Ok(mut tls) = acceptor.accept(tcp).await else {
                                return;
                            };
                            hs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            let Ok(mut plain) = tokio::net::TcpStream::connect(up).await else {
                                return;
                            };
                            let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                        });
                    }
                });
            }
        });
        Terminator {
            addrs,
            handshakes,
            _background: background,
        }
    }
}

/// A TLS server config that requires client certificates from `client_ca_pem`.
pub fn server_config_mtls(issued: &Issued, client_ca_pem: &str) -> Arc<rustls::ServerConfig> {
    let chain: Vec<_> = CertificateDer::pem_slice_iter(issued.cert_pem.as_bytes())
        .map(|c| c.unwrap())
        .collect();
    let key = PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(der_of(client_ca_pem)))
        .unwrap();
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    Arc::new(cfg)
}

/// An HTTP/2-only upstream (TLS with ALPN h2, or h2c with prior knowledge) on 127.0.0.1: answers
/// every request with `{"proto":"h2","id":<id>,"connection":<n>}`, `n` counting connections.
pub struct H2Upstream {
    pub addr: SocketAddr,
    pub connections: Arc<std::sync::atomic::AtomicUsize>,
    _background: Background,
}

impl H2Upstream {
    pub fn start(tls: Option<Arc<rustls::ServerConfig>>) -> H2Upstream {
        use std::sync::atomic::Ordering;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let conns = connections.clone();
        let background = Background::start(move || async move {
            l.set_nonblocking(true).unwrap();
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
            tokio::spawn(async move {
                while let Ok((tcp, _)) = l.accept().await {
                    let n = conns.fetch_add(1, Ordering::SeqCst) + 1;
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        match acceptor {
                            Some(a) => {
                                if let Ok(s) = a.accept(tcp).await {
                                    serve_h2(s, n).await
                                }
                            }
                            None => serve_h2(tcp, n).await,
                        }
                    });
                }
            });
        });
        H2Upstream {
            addr,
            connections,
            _background: background,
        }
    }
}

async fn serve_h2<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(io: S, n: usize) {
    let Ok(mut conn) = h2::server::handshake(io).await else {
        return;
    };
    while let Some(Ok((req, mut respond))) = conn.accept().await {
        tokio::spawn(async move {
            let mut body = req.into_body();
            let mut got = Vec::new();
            while let Some(Ok(chunk)) = body.data().await {
                let _ = body.flow_control().release_capacity(chunk.len());
                got.extend_from_slice(&chunk);
            }
            let id = serde_json::from_slice::<serde_json::Value>(&got)
                .ok()
                .and_then(|v| v.get("id").cloned());
            let out = serde_json::json!({"proto": "h2", "id": id, "connection": n}).to_string();
            let resp = http::Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(())
                .unwrap();
            if let Ok(mut send) = respond.send_response(resp, false) {
                let _ = send.send_data(bytes::Bytes::from(out), true);
            }
        });
    }
}
