//! The gateway's own HTTP/1.1 upstream leg, plugged into pingora through its custom connector
//! (`pingora::connectors::http::custom`), for plain (non-TLS) HTTP/1.1 pools.
//!
//! What it does differently from pingora's HTTP/1.1 client, and why (the profile in
//! docs/benchmarks-history.md):
//! - **one write per request**: the request head is held until the first body bytes (or the end
//!   of the request), then both go out in one `writev`; pingora flushes the head on its own, so
//!   every request with a body costs the gateway a second `sendto` and the upstream a second read;
//! - **its own keep-alive pool** ([`Pool`]): a released connection is pushed on a stack, no task
//!   is spawned to watch it and no `getpeername` runs when it is taken again; a connection the
//!   upstream closed while idle is found when it is taken (a read that does not block), and one
//!   idle past the peer's idle timeout is dropped then;
//! - **small buffers**: a response is read through one 4 KiB buffer that grows only for a head
//!   or chunk that needs more (pingora reads into 64 KiB), which matters for long SSE streams.
//!
//! pingora keeps the rest of the request's journey: the `ProxyHttp` phases, the retry buffer and
//! retries, the response pipe to the client. TLS and h2/h2c pools keep pingora's own client.
//! The connection is in [`conn`], the session (the response side) in [`session`], the request's
//! writer in [`write`], the wire format (request head, response framing) in [`wire`].

mod conn;
pub mod oneshot;
mod session;
pub mod wire;
mod write;

use async_trait::async_trait;
use pingora::connectors::http::custom::{Connection, Connector};
use pingora::proxy::{HttpProxy, ProcessCustomSession, ProxyHttp, ProxyServiceBuilder};
use pingora::server::configuration::ServerConf;
use pingora::services::listening::Service;
use pingora::upstreams::peer::{HttpPeer, Peer};
use pingora::{Error, ErrorType, Result};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

pub use conn::Conn;
pub use session::H1Session;

/// The ALPN value that sends a peer to this leg (a marker only: these peers speak plain HTTP/1.1
/// over TCP, no ALPN is negotiated).
pub const ALPN_MARK: &[u8] = b"mcp-edge-h1";

/// Route `peer` (a plain HTTP/1.1 peer) through this leg.
pub fn use_for(peer: &mut HttpPeer) {
    peer.options.alpn = pingora::protocols::ALPN::Custom(pingora::protocols::tls::CustomALPN::new(
        ALPN_MARK.to_vec(),
    ));
}

/// Idle connections to one peer, each with the time after which it is not reused (the peer's
/// idle timeout from its release), oldest first.
type Stack = Vec<(Arc<Conn>, Option<Instant>)>;

/// How often the whole pool is swept for connections idle past their timeout (those to peers no
/// longer asked for, e.g. an instance removed by a reload, would otherwise stay open).
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Idle upstream connections by peer (pingora's reuse hash: address, TLS and ALPN settings),
/// most recently released on top.
pub struct Pool {
    idle: Mutex<Idle>,
    per_peer: usize,
}

struct Idle {
    by_peer: HashMap<u64, Stack>,
    swept: Instant,
}

fn expired(deadline: &Option<Instant>, now: Instant) -> bool {
    deadline.is_some_and(|d| now > d)
}

impl Pool {
    pub fn new(per_peer: usize) -> Pool {
        Pool {
            idle: Mutex::new(Idle {
                by_peer: HashMap::new(),
                swept: Instant::now(),
            }),
            per_peer: per_peer.max(1),
        }
    }

    /// The most recently released live connection to `key`, if any; stale ones are dropped.
    pub(crate) fn take(&self, key: u64) -> Option<Arc<Conn>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let stack = idle.by_peer.get_mut(&key)?;
        let now = Instant::now();
        while let Some((conn, deadline)) = stack.pop() {
            if !expired(&deadline, now) && conn.still_open() {
                return Some(conn);
            }
        }
        None
    }

    /// Keep `conn` for the next request to `key`, until `idle_timeout` from now.
    pub(crate) fn put(&self, key: u64, conn: Arc<Conn>, idle_timeout: Option<Duration>) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if now.duration_since(idle.swept) >= SWEEP_EVERY {
            idle.swept = now;
            idle.by_peer.retain(|_, stack| {
                stack.retain(|(_, d)| !expired(d, now));
                !stack.is_empty()
            });
        }
        let stack = idle.by_peer.entry(key).or_default();
        // The oldest connections are at the bottom: make room there when the stack is full.
        if stack.len() >= self.per_peer {
            stack.remove(0);
        }
        stack.push((conn, idle_timeout.map(|t| now + t)));
    }

    /// Idle connections held (for tests and metrics).
    pub fn idle_count(&self) -> usize {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.by_peer.values().map(Vec::len).sum()
    }
}

/// The custom connector pingora calls for peers marked by [`use_for`].
#[derive(Clone)]
pub struct OwnH1 {
    pool: Arc<Pool>,
}

impl OwnH1 {
    pub fn new(per_peer: usize) -> OwnH1 {
        OwnH1 {
            pool: Arc::new(Pool::new(per_peer)),
        }
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }
}

impl Default for OwnH1 {
    fn default() -> Self {
        OwnH1::new(128)
    }
}

/// pingora's proxy app with this leg as its custom connector, ready to be wrapped in the
/// gateway's own apps (`parked`, `head_deadline`). The direct leg shares `leg`'s pool.
pub fn proxy<SV>(inner: SV, conf: &Arc<ServerConf>, leg: OwnH1) -> HttpProxy<SV, OwnH1>
where
    SV: ProxyHttp + Send + Sync + 'static,
    SV::CTX: Send + Sync + 'static,
{
    // Downstream custom protocols are not used (no listener sets `force_custom`).
    let on_custom: ProcessCustomSession<SV, OwnH1> = Arc::new(|_, _, _| Box::pin(async { None }));
    let service = ProxyServiceBuilder::new(conf, inner)
        .custom(leg, on_custom)
        .build();
    take_app(service)
}

/// The app out of a pingora `Service`. pingora 0.9 builds an `HttpProxy` with a custom connector
/// only inside a `Service` (its constructor is private) and lends the app out by reference only.
fn take_app<A>(service: Service<A>) -> A {
    let service = std::mem::ManuallyDrop::new(service);
    let app = service
        .app_logic()
        .expect("a service built by ProxyServiceBuilder holds its app");
    // SAFETY: `service` is owned here and never used or dropped again (ManuallyDrop), so the
    // bitwise copy is the app's only owner: nothing reads it through the service or drops it
    // twice. The service's other fields (its name, an empty listener list) are leaked, once per
    // proxy built (at start and at each upgrade).
    unsafe { std::ptr::read(app) }
}

/// Connect to `peer` within its connection timeout.
pub(crate) async fn connect<P: Peer>(peer: &P) -> Result<Conn> {
    let addr = match peer.address() {
        pingora::protocols::l4::socket::SocketAddr::Inet(a) => *a,
        #[cfg(unix)]
        pingora::protocols::l4::socket::SocketAddr::Unix(_) => {
            return Error::e_explain(ErrorType::ConnectError, "unix sockets are not supported");
        }
    };
    let limit = peer
        .total_connection_timeout()
        .or(peer.connection_timeout());
    let attempt = TcpStream::connect(addr);
    let stream = match limit {
        Some(t) => match tokio::time::timeout(t, attempt).await {
            Ok(r) => r,
            Err(_) => {
                return Error::e_explain(
                    ErrorType::ConnectTimedout,
                    format!("connecting to {addr} took longer than {t:?}"),
                )
            }
        },
        None => attempt.await,
    }
    .map_err(|e| connect_error(addr, e))?;
    stream
        .set_nodelay(true)
        .map_err(|e| Error::because(ErrorType::SocketError, "setting TCP_NODELAY", e))?;
    Conn::new(stream, addr)
}

fn connect_error(addr: SocketAddr, e: std::io::Error) -> Box<Error> {
    let kind = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => ErrorType::ConnectRefused,
        std::io::ErrorKind::TimedOut => ErrorType::ConnectTimedout,
        _ => ErrorType::ConnectError,
    };
    Error::because(kind, format!("connecting to {addr}"), e)
}

#[async_trait]
impl Connector for OwnH1 {
    type Session = H1Session;

    async fn get_http_session<P: Peer + Send + Sync + 'static>(
        &self,
        peer: &P,
    ) -> Result<(Connection<H1Session>, bool)> {
        if let Some(conn) = self.pool.take(peer.reuse_hash()) {
            return Ok((Connection::Session(H1Session::new(conn, true)), true));
        }
        let conn = connect(peer).await?;
        Ok((
            Connection::Session(H1Session::new(Arc::new(conn), false)),
            false,
        ))
    }

    async fn reused_http_session<P: Peer + Send + Sync + 'static>(
        &self,
        peer: &P,
    ) -> Option<H1Session> {
        self.pool
            .take(peer.reuse_hash())
            .map(|c| H1Session::new(c, true))
    }

    async fn release_http_session<P: Peer + Send + Sync + 'static>(
        &self,
        session: H1Session,
        peer: &P,
        idle_timeout: Option<Duration>,
    ) {
        if let Some(conn) = session.into_reusable() {
            self.pool.put(peer.reuse_hash(), conn, idle_timeout);
        }
    }
}

#[cfg(test)]
mod tests;
