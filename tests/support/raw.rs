//! A raw upstream for the upstream-leg tests (tests/gateway/upstream_leg.rs and direct_leg.rs):
//! every byte of each answer is the test's, each request as the upstream read it is recorded
//! (how many bytes its first read returned, the whole, head and body), and accepted and closed
//! connections are counted. Plus a gateway in front of it with active health checks off, so
//! every request the upstream sees is the test's. Everything on 127.0.0.1.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::background::AcceptLoop;
use super::upstream::config;

/// One request as the upstream read it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Bytes the first `read` returned.
    pub first_read: usize,
    /// Bytes of the whole request (head and body).
    pub whole: usize,
    /// The request head, lower-cased.
    pub head: String,
    pub body: Vec<u8>,
}

/// Read one request (Content-Length framing); `None` when the connection ended first.
pub fn read_request(s: &mut TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256 * 1024];
    let mut first_read = 0;
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        if first_read == 0 {
            first_read = n;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or(0);
        if buf.len() >= end + 4 + len {
            return Some(Seen {
                first_read,
                whole: end + 4 + len,
                head,
                body: buf[end + 4..end + 4 + len].to_vec(),
            });
        }
    }
}

/// A raw upstream: for each request on a connection, `answer(request number, stream)` writes
/// the response; it returns whether to keep the connection.
pub struct Raw {
    pub server: AcceptLoop,
    seen: Arc<Mutex<Vec<Seen>>>,
    pub accepted: Arc<AtomicUsize>,
    /// Connections the upstream has closed (counted after the close).
    pub closed: Arc<AtomicUsize>,
}

impl Raw {
    pub fn start(answer: impl Fn(usize, &mut TcpStream) -> bool + Send + 'static) -> Raw {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let (log, count, gone) = (seen.clone(), accepted.clone(), closed.clone());
        let server = AcceptLoop::start(move |mut s| {
            count.fetch_add(1, Ordering::SeqCst);
            while let Some(req) = read_request(&mut s) {
                let n = {
                    let mut l = log.lock().unwrap();
                    l.push(req);
                    l.len()
                };
                if !answer(n, &mut s) {
                    break;
                }
            }
            drop(s);
            gone.fetch_add(1, Ordering::SeqCst);
        });
        Raw {
            server,
            seen,
            accepted,
            closed,
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

pub fn gateway(up: &Raw, extra: &str) -> mcp_edge::gateway::RunningGateway {
    mcp_edge::gateway::RunningGateway::start(gateway_config(up, extra)).unwrap()
}

pub fn gateway_config(up: &Raw, extra: &str) -> mcp_edge::config::Config {
    config(
        // No active health checks: every request the upstream sees is the test's.
        &[(
            "default",
            &[up.server.addr],
            "balance: round_robin\n    health: {check: off}",
        )],
        &format!("default_route: {{pool: default}}\n{extra}"),
    )
}

pub fn ok_json(s: &mut TcpStream, id: usize) {
    let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#);
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
}

/// Hold the request on `s` without answering, and count it in `closed` when the gateway closes
/// the connection (within 20 s): what a test of cancellation watches for.
pub fn hold_until_closed(s: &mut TcpStream, closed: &std::sync::atomic::AtomicUsize) {
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut b = [0u8; 64];
    if matches!(std::io::Read::read(s, &mut b), Ok(0)) {
        closed.fetch_add(1, Ordering::SeqCst);
    }
}

/// The setting that sends every request through pingora's proxy pipe and client.
pub const IN_PINGORAS_PIPE: &str = "connections: { upstream_leg: pingora }\n";

/// Whether the other end of the loopback connection `s` has read every byte sent on it: none
/// left in this socket's send queue, none waiting in the peer socket's receive queue (Linux,
/// from /proc/net/tcp). What a test waits for instead of sleeping when it needs bytes it sent
/// to have reached the gateway's own buffers (a request pipelined during a stream).
pub fn peer_has_read(s: &TcpStream) -> bool {
    let (Ok(std::net::SocketAddr::V4(me)), Ok(std::net::SocketAddr::V4(peer))) =
        (s.local_addr(), s.peer_addr())
    else {
        panic!("peer_has_read reads IPv4 sockets only");
    };
    // /proc/net/tcp: "sl local rem st tx_queue:rx_queue …", addresses as %08X:%04X of the
    // address in host byte order.
    let hex = |a: std::net::SocketAddrV4| {
        format!(
            "{:08X}:{:04X}",
            u32::from_ne_bytes(a.ip().octets()),
            a.port()
        )
    };
    let (me, peer) = (hex(me), hex(peer));
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let queues = |local: &str, remote: &str| {
        table.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (tx, rx) = f.get(4)?.split_once(':')?;
            (f.get(1) == Some(&local) && f.get(2) == Some(&remote)).then(|| {
                (
                    u64::from_str_radix(tx, 16).unwrap(),
                    u64::from_str_radix(rx, 16).unwrap(),
                )
            })
        })
    };
    matches!(queues(&me, &peer), Some((0, _))) && matches!(queues(&peer, &me), Some((_, 0)))
}
