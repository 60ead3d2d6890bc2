//! The HTTP/1.1 client of the load tester: connection reuse, one request in, status + headers +
//! whole body out, over its own pool of `hyper::client::conn::http1` connections (or
//! [`super::tls`]'s for https).

use std::net::SocketAddr;
use std::sync::Mutex;

use anyhow::{bail, Context as _};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

pub(crate) use super::tls::Answer;
use super::tls::{TlsOptions, TlsPool};

enum Inner {
    Direct(Mutex<Vec<SendRequest<Full<Bytes>>>>),
    Tls(TlsPool),
}

/// A client bound to one target URL.
pub struct Http {
    inner: Inner,
    addr: SocketAddr,
    host: HeaderValue,
    /// The origin-form path.
    uri: Uri,
}

impl Http {
    /// Resolve a plain `http://` target once and prepare the client.
    pub async fn new(target: &str) -> anyhow::Result<Http> {
        Http::connect(target, &TlsOptions::default()).await
    }

    /// Resolve the target once and prepare the client: `http://`, or `https://` with `tls`.
    pub(crate) async fn connect(target: &str, tls: &TlsOptions) -> anyhow::Result<Http> {
        let uri: Uri = target
            .parse()
            .with_context(|| format!("invalid target URL {target:?}"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(s) => bail!("target scheme {s:?} is not supported (http or https)"),
            None => bail!("target {target:?} needs a scheme, e.g. http://127.0.0.1:8080/mcp"),
        };
        let authority = uri.authority().context("target URL has no host")?.clone();
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let addr = tokio::net::lookup_host((authority.host(), port))
            .await
            .with_context(|| format!("resolving {}", authority.host()))?
            .next()
            .with_context(|| format!("{} resolves to no address", authority.host()))?;
        let host = HeaderValue::from_str(authority.as_str())?;
        if https {
            let path = uri.path_and_query().map_or("/", |p| p.as_str()).parse()?;
            return Ok(Http {
                inner: Inner::Tls(TlsPool::new(&uri, addr, tls)?),
                addr,
                host,
                uri: path,
            });
        }
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        Ok(Http {
            inner: Inner::Direct(Mutex::new(Vec::new())),
            addr,
            host,
            uri: path.parse()?,
        })
    }

    /// A POST of `body` with `headers` to the target.
    pub fn request(&self, mut headers: HeaderMap, body: Vec<u8>) -> Request<Full<Bytes>> {
        headers.insert(http::header::HOST, self.host.clone());
        let mut req = Request::new(Full::new(Bytes::from(body)));
        *req.method_mut() = http::Method::POST;
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = headers;
        req
    }

    /// Send one request and read the whole answer.
    pub(crate) async fn send(&self, req: Request<Full<Bytes>>) -> anyhow::Result<Answer> {
        match &self.inner {
            Inner::Tls(pool) => pool.send(req).await,
            Inner::Direct(idle) => {
                let mut sender = match self.take_idle(idle) {
                    Some(s) => s,
                    None => self.open().await?,
                };
                sender.ready().await?;
                let resp = sender.send_request(req).await?;
                let (parts, body) = resp.into_parts();
                let body = body.collect().await?.to_bytes();
                if !sender.is_closed() {
                    idle.lock().expect("pool lock").push(sender);
                }
                Ok(Answer {
                    status: parts.status,
                    headers: parts.headers,
                    body,
                })
            }
        }
    }

    fn take_idle(
        &self,
        idle: &Mutex<Vec<SendRequest<Full<Bytes>>>>,
    ) -> Option<SendRequest<Full<Bytes>>> {
        let mut pool = idle.lock().expect("pool lock");
        while let Some(s) = pool.pop() {
            if !s.is_closed() {
                return Some(s);
            }
        }
        None
    }

    async fn open(&self) -> anyhow::Result<SendRequest<Full<Bytes>>> {
        let stream = tokio::net::TcpStream::connect(self.addr)
            .await
            .with_context(|| format!("connecting to {}", self.addr))?;
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            // The connection ends when the peer closes it or the sender is dropped.
            let _ = conn.await;
        });
        Ok(sender)
    }
}
