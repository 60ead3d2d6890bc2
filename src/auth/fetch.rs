//! One bounded HTTP GET for a JWKS (or, later, an introspection endpoint): connect, send, read at
//! most [`MAX_BODY`] bytes, all within a timeout. Plain `http://` only; `https://` URLs are
//! refused with a message saying so (see the README).

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use std::time::Duration;

/// The largest JWKS accepted.
pub const MAX_BODY: usize = 1024 * 1024;

/// GET `url`; the body and the `Cache-Control` header of a 200 answer.
pub async fn get(url: &str, timeout: Duration) -> Result<(Bytes, Option<String>), String> {
    match tokio::time::timeout(timeout, get_inner(url)).await {
        Ok(r) => r,
        Err(_) => Err(format!("{url}: no answer within {timeout:?}")),
    }
}

async fn get_inner(url: &str) -> Result<(Bytes, Option<String>), String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{url}: not a URL ({e})"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(format!(
                "{url}: https JWKS URLs are not supported yet; serve the JWKS over http on a trusted network or use auth.jwks.file"
            ))
        }
        _ => return Err(format!("{url}: only http:// URLs are fetched")),
    }
    let host = uri.host().ok_or_else(|| format!("{url}: no host"))?;
    let port = uri.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| format!("{url}: cannot connect: {e}"))?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let authority = uri.authority().map_or(host, |a| a.as_str());
    let req = http::Request::get(path)
        .header(http::header::HOST, authority)
        .header(
            http::header::ACCEPT,
            "application/jwk-set+json, application/json",
        )
        .header(http::header::USER_AGENT, "mcp-edge-auth")
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("{url}: {e}"))?;
    let resp = send
        .send_request(req)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if resp.status() != http::StatusCode::OK {
        return Err(format!("{url}: answered HTTP {}", resp.status()));
    }
    let cc = resp
        .headers()
        .get(http::header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("{url}: body unreadable or over {MAX_BODY} bytes: {e}"))?
        .to_bytes();
    Ok((body, cc))
}
