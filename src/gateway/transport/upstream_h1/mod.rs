//! The gateway's own HTTP/1.1 client for plain (non-TLS) HTTP/1.1 pools: the direct leg
//! (`journey::direct`) sends every request it takes on it, and the gateway's own calls
//! (health checks, federation catalogs) use its [`oneshot`] requests.
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
//! Requests the direct leg does not take (TLS and h2/h2c pools, protocol upgrades, bodies
//! streamed unchecked) go through pingora's proxy pipe with pingora's own client. The session
//! speaks pingora's custom client `Session` trait, so the direct leg drives it with the same
//! calls pingora's pipe would. The connection is in [`conn`], the session (the response side) in
//! [`session`], the request's writer in [`write`], the wire format in [`wire`].

mod conn;
pub(crate) mod oneshot;
mod session;
pub mod wire;
mod write;

use pingora::upstreams::peer::Peer;
use pingora::{Error, ErrorType, Result};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

pub(crate) use conn::Conn;
pub(crate) use session::H1Session;

/// Idle connections to one peer, each with the time after which it is not reused (the peer's
/// idle timeout from its release), oldest first.
type Stack<C> = Vec<(C, Option<Instant>)>;

/// A connection the pool can keep: it says whether it is still open when taken again.
pub(crate) trait Keepable {
    /// Whether an idle connection may carry another request (`false`: it is dropped).
    fn still_open(&self) -> bool;
}

impl Keepable for Arc<Conn> {
    fn still_open(&self) -> bool {
        Conn::still_open(self)
    }
}

/// The bridge's hops into the gateway's own listener.
impl Keepable for TcpStream {
    fn still_open(&self) -> bool {
        oneshot::Stream::still_open(self)
    }
}

/// The gateway's own connections to an instance, plain or TLS. One the server closes just as
/// it is taken is found when a request is sent on it (`oneshot::Streaming::resume`).
impl Keepable for Box<dyn oneshot::Stream> {
    fn still_open(&self) -> bool {
        (**self).still_open()
    }
}

/// How often the whole pool is swept for connections idle past their timeout (those to peers no
/// longer asked for, e.g. an instance removed by a reload, would otherwise stay open).
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Idle upstream connections by peer (pingora's reuse hash: address, TLS and ALPN settings),
/// most recently released on top. The direct leg keeps its [`Conn`]s here; the gateway's own
/// requests (`oneshot`) keep theirs in a pool of their kind.
pub(crate) struct Pool<C = Arc<Conn>> {
    idle: Mutex<Idle<C>>,
    per_peer: usize,
}

struct Idle<C> {
    by_peer: HashMap<u64, Stack<C>>,
    swept: Instant,
}

fn expired(deadline: &Option<Instant>, now: Instant) -> bool {
    deadline.is_some_and(|d| now > d)
}

impl<C> Pool<C> {
    pub(crate) fn new(per_peer: usize) -> Pool<C> {
        Pool {
            idle: Mutex::new(Idle {
                by_peer: HashMap::new(),
                swept: Instant::now(),
            }),
            per_peer: per_peer.max(1),
        }
    }

    /// Keep `conn` for the next request to `key`, until `idle_timeout` from now.
    pub(crate) fn put(&self, key: u64, conn: C, idle_timeout: Option<Duration>) {
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

    #[cfg(test)]
    /// Idle connections held (for tests and metrics).
    pub(crate) fn idle_count(&self) -> usize {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.by_peer.values().map(Vec::len).sum()
    }
}

impl<C: Keepable> Pool<C> {
    /// The most recently released live connection to `key`, if any; stale ones are dropped.
    pub(crate) fn take(&self, key: u64) -> Option<C> {
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

#[cfg(test)]
mod oneshot_tests;
#[cfg(test)]
mod tests;
