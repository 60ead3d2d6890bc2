//! Gateway test upstreams and config builders: a recording upstream, `config(...)` YAML for a
//! gateway in front of them, `call`/`eventually`/`free_port` helpers. Everything listens on
//! 127.0.0.1 and stops when dropped. Re-exported at `support::`.

pub use super::http::{post, raw, read_reply, Reply};

use super::background::Background;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;

/// A free loopback port for a listener the test cannot bind itself (a gateway's, a backend
/// process's). Handed out below the kernel's ephemeral range (32768+ on Linux), from a
/// process-wide cursor that starts at a pid-derived offset, each checked bindable: a port
/// released here is never given to a concurrent test's `bind(:0)` upstream or to an outgoing
/// connection. (With ephemeral ports, a gateway could find its port taken by another test's
/// upstream, and the readiness probe would then connect to that upstream.)
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::OnceLock;
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: OnceLock<AtomicU32> = OnceLock::new();
    let next = NEXT.get_or_init(|| AtomicU32::new(std::process::id().wrapping_mul(7_919) % SPAN));
    for _ in 0..SPAN {
        let port = (LOW + next.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {LOW}..{}", LOW + SPAN);
}

/// What an upstream instance received, one entry per complete request.
#[derive(Debug, Clone)]
pub struct Received {
    pub instance: usize,
    /// The gateway's side of the upstream connection (reuse shows as a repeated port).
    pub peer: SocketAddr,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

#[derive(Default)]
pub struct Log {
    pub received: Vec<Received>,
    /// SSE streams whose client went away before the end: (instance, events sent).
    pub cancelled_streams: Vec<(usize, usize)>,
    /// The head of each active health check received (kept out of `received`).
    pub health_checks: Vec<http::HeaderMap>,
}

/// N recording upstream instances. Each answers a POST with JSON describing what it got:
/// `{"instance":i,"len":n,"sha256":"…","id":<raw id>}`. Request headers steer it:
/// `x-test-sse: N` streams N events 200 ms apart; `x-test-status: 202` answers that status with
/// no body; `x-test-close: 1` drops the connection without answering. [`Upstreams::set_delay`]
/// makes one instance answer later (a slow instance).
pub struct Upstreams {
    pub addrs: Vec<SocketAddr>,
    pub log: Arc<Mutex<Log>>,
    /// Milliseconds each instance waits before answering a request it logs.
    delays: Arc<Vec<std::sync::atomic::AtomicU64>>,
    _background: Background,
}

impl Upstreams {
    pub fn start(n: usize) -> Upstreams {
        let log = Arc::new(Mutex::new(Log::default()));
        let listeners: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let addrs = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let log2 = log.clone();
        let delays: Arc<Vec<std::sync::atomic::AtomicU64>> =
            Arc::new((0..n).map(|_| Default::default()).collect());
        let delays2 = delays.clone();
        let background = Background::start(move || async move {
            for (i, l) in listeners.into_iter().enumerate() {
                l.set_nonblocking(true).unwrap();
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                let log = log2.clone();
                let delays = delays2.clone();
                tokio::spawn(async move {
                    loop {
                        let Ok((stream, peer)) = l.accept().await else {
                            return;
                        };
                        let log = log.clone();
                        let delays = delays.clone();
                        tokio::spawn(async move {
                            let svc = service_fn(move |req| {
                                let ms = delays[i].load(std::sync::atomic::Ordering::Relaxed);
                                handle(i, peer, req, log.clone(), ms)
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        });
                    }
                });
            }
        });
        Upstreams {
            addrs,
            log,
            delays,
            _background: background,
        }
    }

    /// Instance `i` answers each request it logs `delay` later (from the next request on).
    pub fn set_delay(&self, i: usize, delay: Duration) {
        let ms = delay.as_millis() as u64;
        self.delays[i].store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn received(&self) -> Vec<Received> {
        self.log.lock().unwrap().received.clone()
    }

    pub fn count(&self) -> usize {
        self.log.lock().unwrap().received.len()
    }

    pub fn instance_names(&self) -> Vec<String> {
        self.addrs.iter().map(|a| a.to_string()).collect()
    }
}

type BoxBody = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

async fn handle(
    i: usize,
    peer: SocketAddr,
    req: hyper::Request<hyper::body::Incoming>,
    log: Arc<Mutex<Log>>,
    delay_ms: u64,
) -> Result<hyper::Response<BoxBody>, std::io::Error> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    let hv = |k: &str| {
        parts
            .headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    if hv("user-agent").as_deref() == Some("mcp-edge-health") {
        // The gateway's active health check: answer it, but keep it out of the traffic log.
        log.lock()
            .unwrap()
            .health_checks
            .push(parts.headers.clone());
        return Ok(hyper::Response::builder()
            .status(200)
            .body(empty())
            .unwrap());
    }
    log.lock().unwrap().received.push(Received {
        instance: i,
        peer,
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    if delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    }
    if hv("x-test-close").is_some() {
        return Err(std::io::Error::other("closing on purpose"));
    }
    if let Some(status) = hv("x-test-status") {
        let status: u16 = status.parse().unwrap();
        return Ok(hyper::Response::builder()
            .status(status)
            .body(empty())
            .unwrap());
    }
    if let Some(n) = hv("x-test-sse") {
        let n: usize = n.parse().unwrap();
        // Optional: pad each event to `x-test-sse-bytes` and send one every `x-test-sse-ms`.
        let pad: usize = hv("x-test-sse-bytes").map_or(0, |v| v.parse().unwrap());
        let every: u64 = hv("x-test-sse-ms").map_or(200, |v| v.parse().unwrap());
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(1);
        tokio::spawn(async move {
            for k in 0..n {
                let padding = "x".repeat(pad);
                let ev = format!(": keep-alive\n\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progress\":{k},\"message\":\"{padding}\"}}}}\n\n");
                if tx.send(Ok(Frame::data(Bytes::from(ev)))).await.is_err() {
                    log.lock().unwrap().cancelled_streams.push((i, k));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(every)).await;
            }
        });
        let stream =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
        let body = StreamBody::new(stream).boxed();
        return Ok(hyper::Response::builder()
            .header("content-type", "text/event-stream")
            .header("x-accel-buffering", "no")
            .body(body)
            .unwrap());
    }
    let id = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("id").cloned());
    let out = serde_json::json!({
        "instance": i,
        "len": body.len(),
        "sha256": hex(&Sha256::digest(&body)),
        "id": id,
    });
    Ok(hyper::Response::builder()
        .header("content-type", "application/json")
        .header("x-upstream-says", "hello")
        .body(
            Full::new(Bytes::from(out.to_string()))
                .map_err(|never| match never {})
                .boxed(),
        )
        .unwrap())
}

fn empty() -> BoxBody {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

pub use mcp_edge::mcp::hex::encode as hex;

/// A gateway config on free ports in front of `pools` (name → instances), plus extra YAML.
pub fn config(pools: &[(&str, &[SocketAddr], &str)], extra: &str) -> Config {
    let mut y = format!(
        // Work stealing: tests start and stop many gateways in one process (see config docs).
        "work_stealing: true\nlisten:\n  mcp: 127.0.0.1:{}\n  admin: 127.0.0.1:{}\npools:\n",
        free_port(),
        free_port()
    );
    for (name, addrs, balance) in pools {
        let list: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
        y.push_str(&format!(
            "  {name}:\n    instances: [{}]\n    {balance}\n",
            list.join(", ")
        ));
    }
    y.push_str(extra);
    Config::parse(&y, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"))
}

/// A gateway with one round-robin pool `default` as the default route.
pub fn simple_gateway(up: &Upstreams, extra: &str) -> RunningGateway {
    let cfg = config(
        &[("default", &up.addrs, "balance: round_robin")],
        &format!("default_route: {{pool: default}}\n{extra}"),
    );
    RunningGateway::start(cfg).unwrap()
}

/// Build a POST /mcp request with these headers (plus Host and Content-Length).
pub fn post_bytes(headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n",
        body.len()
    )
    .into_bytes();
    for (k, v) in headers {
        req.extend_from_slice(k.as_bytes());
        req.extend_from_slice(b": ");
        req.extend_from_slice(v.as_bytes());
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body);
    req
}

pub const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// A tools/call body.
pub fn call(id: u64, name: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{},"arguments":{{}},{META}}}}}"#,
        serde_json::json!(name)
    )
}

/// A request body for a method without a name (`tools/list`, `server/discover`, ...).
pub fn plain(id: u64, method: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{META}}}}}"#)
}

/// The good headers for such a request.
pub fn plain_headers(method: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ]
}

/// The good headers for a tools/call of `name`.
pub fn call_headers(name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("Content-Type", "application/json".into()),
        ("Accept", "application/json, text/event-stream".into()),
        ("MCP-Protocol-Version", "2026-07-28".into()),
        ("Mcp-Method", "tools/call".into()),
        (
            "Mcp-Name",
            mcp_edge::mcp::header::encode_value(name).into_owned(),
        ),
    ]
}

pub fn refs<'a>(h: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    h.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Poll until `f` is true or the deadline passes.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}
