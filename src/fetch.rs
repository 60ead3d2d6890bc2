//! One bounded HTTP(S) exchange to a URL an operator configured: the GET of a JWKS, the POST of
//! an RFC 7662 introspection ([`crate::auth`]), or a token request ([`crate::credentials`],
//! which also reads refusals: [`send_status`]). Below both components, which share it.
//! Connect, TLS for https (trusting what [`crate::tls_util::trust_roots`] says), send, read at most
//! [`MAX_BODY`] bytes, all within a timeout.
//!
//! Why this is a client of its own, not the one of the gateway's other own calls (health
//! probes, federation: `gateway::transport::upstream_h1::oneshot`): that one lives in the
//! gateway's transport layer, which `auth` must not import (nor `credentials`, whose token
//! requests go through this module); it writes MCP POSTs to an instance the
//! balancer already resolved, over the pool's TLS settings, and reads answers with the upstream
//! leg's pingora-typed parser. Here the peer is any URL an operator configures (its host
//! resolved here, trusting `ca_file` or the system's store), the requests are a GET and form POSTs, and
//! a `Cache-Control` is read. Sharing would mean moving the gateway's HTTP/1.1 reader below both
//! layers: not worth it for two small exchanges. What they do share is the CA-bundle reader
//! ([`crate::tls_util::read_roots`]).

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The largest JWKS accepted.
pub(crate) const MAX_BODY: usize = 1024 * 1024;

/// The TLS client settings for https sources: `ca_file`'s certificates, or the system's
/// ([`crate::tls_util::trust_roots`]).
pub(crate) fn tls_config(ca_file: Option<&Path>) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let roots =
        crate::tls_util::trust_roots(ca_file).map_err(|e| anyhow::anyhow!("ca_file: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

/// What to send.
pub(crate) struct Outgoing {
    pub method: http::Method,
    /// `Authorization` value, if any.
    pub authorization: Option<String>,
    /// A form body (`application/x-www-form-urlencoded`), if any.
    pub form: Option<String>,
}

/// GET `url`; the body and the `Cache-Control` header of a 200 answer.
pub(crate) async fn get(
    url: &str,
    timeout: Duration,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<(Bytes, Option<String>), String> {
    let out = Outgoing {
        method: http::Method::GET,
        authorization: None,
        form: None,
    };
    send(url, timeout, tls, out).await
}

/// Send `out` to `url`; the body and `Cache-Control` of a 200 answer.
pub(crate) async fn send(
    url: &str,
    timeout: Duration,
    tls: &Arc<rustls::ClientConfig>,
    out: Outgoing,
) -> Result<(Bytes, Option<String>), String> {
    match send_status(url, timeout, tls, out).await {
        Ok(a) if a.status == http::StatusCode::OK => Ok((a.body, a.cache_control)),
        Ok(a) => Err(format!("{url}: answered HTTP {}", a.status)),
        Err(SendError::Timeout) => Err(format!("{url}: no answer within {timeout:?}")),
        Err(SendError::Failed(e)) => Err(format!("{url}: {e}")),
    }
}

/// An answer of any status.
pub(crate) struct Answer {
    pub status: http::StatusCode,
    pub body: Bytes,
    pub cache_control: Option<String>,
}

/// Why no answer came.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SendError {
    /// Nothing within the timeout.
    Timeout,
    /// Could not connect, TLS failed, or the exchange broke (the text says which).
    Failed(String),
}

/// Send `out` to `url`; whatever it answers (the body bounded by [`MAX_BODY`]).
pub(crate) async fn send_status(
    url: &str,
    timeout: Duration,
    tls: &Arc<rustls::ClientConfig>,
    out: Outgoing,
) -> Result<Answer, SendError> {
    match tokio::time::timeout(timeout, send_inner(url, tls, out)).await {
        Ok(r) => r.map_err(SendError::Failed),
        Err(_) => Err(SendError::Timeout),
    }
}

async fn send_inner(
    url: &str,
    tls: &Arc<rustls::ClientConfig>,
    out: Outgoing,
) -> Result<Answer, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("not a URL ({e})"))?;
    let https = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err("only http:// and https:// URLs are fetched".into()),
    };
    let host = uri
        .host()
        .ok_or("no host")?
        .trim_matches(['[', ']'])
        .to_string();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    if https {
        let name = ServerName::try_from(host.clone()).map_err(|e| format!("bad host: {e}"))?;
        let stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        exchange(stream, &uri, out).await
    } else {
        exchange(tcp, &uri, out).await
    }
}

async fn exchange<S>(stream: S, uri: &http::Uri, out: Outgoing) -> Result<Answer, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let authority = uri.authority().map_or("", |a| a.as_str());
    let mut req = http::Request::builder()
        .method(out.method)
        .uri(path)
        .header(http::header::HOST, authority)
        .header(
            http::header::ACCEPT,
            "application/jwk-set+json, application/json",
        )
        .header(http::header::USER_AGENT, "mcp-edge-auth");
    if let Some(a) = out.authorization {
        req = req.header(http::header::AUTHORIZATION, a);
    }
    let body = match out.form {
        Some(f) => {
            let form = "application/x-www-form-urlencoded";
            req = req.header(http::header::CONTENT_TYPE, form);
            Full::new(Bytes::from(f))
        }
        None => Full::new(Bytes::new()),
    };
    let req = req.body(body).map_err(|e| e.to_string())?;
    let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let cc = resp
        .headers()
        .get(http::header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("body unreadable or over {MAX_BODY} bytes: {e}"))?
        .to_bytes();
    Ok(Answer {
        status,
        body,
        cache_control: cc,
    })
}

/// `application/x-www-form-urlencoded` of one value.
pub(crate) fn form_encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
