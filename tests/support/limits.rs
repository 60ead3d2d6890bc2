//! Support for the rate-limit tests: a keep-alive client, a real `redis-server` on an ephemeral
//! loopback port (no persistence; killed when dropped), and `mcp-edge serve` processes.
#![allow(dead_code)]

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::http::{read_reply, Reply};
use super::programs;
use crate::support::{call, call_headers, eventually, free_port, post_bytes};

/// One client connection, reopened when the gateway closes it.
pub struct Client {
    addr: SocketAddr,
    conn: Option<BufReader<TcpStream>>,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Client {
        Client { addr, conn: None }
    }

    /// A tools/call of `tool` as `user`: the reply, or the I/O error (after one reconnect).
    pub fn call(&mut self, tool: &str, user: &str) -> std::io::Result<Reply> {
        let mut h = call_headers(tool);
        h.push(("Authorization", format!("Bearer {user}")));
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let req = post_bytes(&h, call(1, tool).as_bytes());
        let mut last = None;
        for _ in 0..2 {
            if self.conn.is_none() {
                let s = TcpStream::connect(self.addr)?;
                s.set_read_timeout(Some(Duration::from_secs(10)))?;
                s.set_nodelay(true)?;
                self.conn = Some(BufReader::new(s));
            }
            let conn = self.conn.as_mut().unwrap();
            let sent = conn.get_mut().write_all(&req);
            match sent.and_then(|()| read_reply(conn)) {
                Ok(r) => {
                    if r.header("connection")
                        .is_some_and(|v| v.eq_ignore_ascii_case("close"))
                    {
                        self.conn = None;
                    }
                    return Ok(r);
                }
                Err(e) => {
                    self.conn = None;
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap())
    }
}

/// Kills its child when dropped.
pub struct Proc(pub Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `redis-server` of its own, on a loopback port, without persistence.
pub struct Redis {
    pub port: u16,
    proc: Option<Proc>,
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok()
        && std::io::Read::read_exact(&mut s, &mut buf).is_ok()
        && &buf == b"+PONG\r\n"
}

impl Redis {
    /// A fresh redis-server, or `None` when it is not installed (the test then returns: see
    /// `support::programs::have`, which says so loudly, or fails under MCP_EDGE_REQUIRE_PEERS=1).
    pub fn start() -> Option<Redis> {
        if !programs::have(programs::REDIS_SERVER) {
            return None;
        }
        let mut r = Redis {
            port: free_port(),
            proc: None,
        };
        r.restart();
        Some(r)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Start (again) on the same port.
    pub fn restart(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting redis-server: {e}"));
        self.proc = Some(Proc(child));
        let port = self.port;
        assert!(
            eventually(Duration::from_secs(10), || ping(port)),
            "redis-server on {port} did not start"
        );
    }

    /// SIGKILL: the port refuses connections until `restart`.
    pub fn kill(&mut self) {
        self.proc = None;
        let port = self.port;
        assert!(eventually(Duration::from_secs(5), || TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_err()));
    }

    /// SIGSTOP / SIGCONT: the port accepts but nothing answers (a hung Redis).
    pub fn pause(&self, stop: bool) {
        let pid = self.proc.as_ref().unwrap().0.id();
        let sig = if stop { "STOP" } else { "CONT" };
        assert!(programs::signal(pid, sig), "kill -s {sig} {pid} failed");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(p) = &self.proc {
            // A stopped process must be continued to die cleanly on SIGKILL's reaping.
            programs::signal(p.0.id(), "CONT");
        }
    }
}

/// An `mcp-edge serve` process with its own config file.
pub struct Gateway {
    pub mcp: SocketAddr,
    pub admin: SocketAddr,
    _proc: Proc,
    file: std::path::PathBuf,
}

impl Gateway {
    /// Serve `body` (pools, routes, limits, redis...) on fresh loopback ports.
    pub fn start(body: &str) -> Gateway {
        let (mcp, admin) = (free_port(), free_port());
        let file =
            std::env::temp_dir().join(format!("mcp-edge-limits-{}-{mcp}.yaml", std::process::id()));
        std::fs::write(
            &file,
            format!("listen: {{mcp: 127.0.0.1:{mcp}, admin: 127.0.0.1:{admin}}}\n{body}"),
        )
        .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
            .args(["serve", "--config"])
            .arg(&file)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let g = Gateway {
            mcp: format!("127.0.0.1:{mcp}").parse().unwrap(),
            admin: format!("127.0.0.1:{admin}").parse().unwrap(),
            _proc: Proc(child),
            file,
        };
        let up = || {
            [g.mcp, g.admin]
                .iter()
                .all(|a| TcpStream::connect(a).is_ok())
        };
        assert!(
            eventually(Duration::from_secs(20), up),
            "gateway did not start"
        );
        g
    }

    /// The config file it serves (a test may rewrite it and ask for a reload).
    pub fn file(&self) -> &std::path::Path {
        &self.file
    }

    pub fn metrics(&self) -> String {
        let r = crate::support::http::raw(self.admin, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        String::from_utf8(r.body).unwrap()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

/// The sum of a metric's samples whose line contains every one of `parts`.
pub fn metric(text: &str, name: &str, parts: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Run `f` until `deadline`, pacing calls `every` apart.
pub fn paced(for_: Duration, every: Duration, mut f: impl FnMut()) {
    let start = Instant::now();
    let mut next = start;
    while Instant::now() < start + for_ {
        f();
        next += every;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
}
