//! An in-test MRTR target for the load tester: a hyper 1 server on 127.0.0.1:0 that serves the
//! reference backend's own create_repo, deploy, charge, onboard and echo (their listing and
//! behaviour come from `mcp_edge::backend::tools`, called in-process; nothing of their contract
//! is restated here) plus `server/discover` and `tools/list`, pretends to be several instances
//! in round robin (naming
//! the one that "served" each request in the `x-mcp-edge-upstream` header and in result `_meta`),
//! and checks every retry leg: the `requestState` it minted echoed exactly, the same tool and
//! arguments, the same principal and a new id. Headers are checked with the shared `mcp::check`.
//!
//! Knobs: `stateful` (each instance only knows the states it minted, like a pool without a
//! shared key), `stall_once` (once, at the Nth request, every request stalls until a deadline),
//! `sse` (answer tools/call as an SSE stream), `header` (set the instance header or not), `meta`
//! (name the instance in result `_meta` or not).
#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcp_edge::backend::state::StatePayload;
use mcp_edge::backend::tools;
use mcp_edge::mcp::{self, codes, header, meta, methods, result_type};
use serde_json::{json, Value};
use tokio::task::JoinSet;

mod answer;

#[derive(Clone)]
pub struct TargetOptions {
    pub instances: Vec<String>,
    pub stateful: bool,
    /// (request number, pause): at that request, every request stalls until the pause is over.
    pub stall_once: Option<(u64, Duration)>,
    pub sse: bool,
    pub header: bool,
    /// Name the instance in result `_meta` too.
    pub meta: bool,
    /// Serve https with this config (its ALPN list decides whether HTTP/2 is offered).
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
}

impl Default for TargetOptions {
    fn default() -> Self {
        TargetOptions {
            instances: vec!["be-a".into(), "be-b".into(), "be-c".into()],
            stateful: false,
            stall_once: None,
            sse: false,
            header: true,
            meta: true,
            tls: None,
        }
    }
}

/// The tools the target serves (listed by tools/list).
pub const TOOLS: [&str; 5] = ["create_repo", "deploy", "charge", "onboard", "echo"];

/// A state the target minted, and what the retry must match.
#[derive(Debug, Clone)]
struct Issued {
    tool: String,
    arguments: Value,
    id: Value,
    principal: String,
    /// What the backend's tool carries to its next round.
    payload: StatePayload,
}

#[derive(Default)]
pub struct TargetStats {
    pub requests: AtomicU64,
    /// Requests that came over HTTP/2 (preflight included).
    pub h2_requests: AtomicU64,
    pub preflight: AtomicU64,
    pub retries_accepted: AtomicU64,
    pub retries_refused: AtomicU64,
    pub completed: AtomicU64,
    pub header_rejections: AtomicU64,
}

struct Shared {
    opts: TargetOptions,
    rr: AtomicU64,
    seq: AtomicU64,
    state_seq: AtomicU64,
    /// One map per instance when stateful, else one shared map.
    states: Vec<Mutex<HashMap<String, Issued>>>,
    stalled: AtomicBool,
    stall_until: Mutex<Option<tokio::time::Instant>>,
    stats: Arc<TargetStats>,
    ledger: mcp_edge::backend::ledger::Ledger,
}

pub struct Target {
    pub addr: SocketAddr,
    pub url: String,
    pub stats: Arc<TargetStats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Target {
    pub async fn start(opts: TargetOptions) -> Target {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let n_maps = if opts.stateful {
            opts.instances.len()
        } else {
            1
        };
        let stats = Arc::new(TargetStats::default());
        let shared = Arc::new(Shared {
            opts,
            rr: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            state_seq: AtomicU64::new(0),
            states: (0..n_maps).map(|_| Mutex::new(HashMap::new())).collect(),
            stalled: AtomicBool::new(false),
            stall_until: Mutex::new(None),
            stats: stats.clone(),
            ledger: mcp_edge::backend::ledger::Ledger::default(),
        });
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    _ = &mut stop_rx => break,
                    acc = listener.accept() => {
                        let Ok((stream, _)) = acc else { continue };
                        let _ = stream.set_nodelay(true);
                        let shared = shared.clone();
                        conns.spawn(async move {
                            let tls = shared.opts.tls.clone();
                            let svc = hyper::service::service_fn(move |req| answer::handle(shared.clone(), req));
                            let Some(cfg) = tls else {
                                let _ = hyper::server::conn::http1::Builder::new()
                                    .serve_connection(TokioIo::new(stream), svc)
                                    .await;
                                return;
                            };
                            let Ok(tls) = tokio_rustls::TlsAcceptor::from(cfg).accept(stream).await else {
                                return;
                            };
                            if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                                    .serve_connection(TokioIo::new(tls), svc)
                                    .await;
                            } else {
                                let _ = hyper::server::conn::http1::Builder::new()
                                    .serve_connection(TokioIo::new(tls), svc)
                                    .await;
                            }
                        });
                        while conns.try_join_next().is_some() {}
                    }
                }
            }
            conns.abort_all();
            while conns.join_next().await.is_some() {}
        });
        Target {
            addr,
            url: format!("http://{addr}{}", mcp::DEFAULT_ENDPOINT),
            stats,
            stop: Some(stop_tx),
            task,
        }
    }

    /// Stop accepting, close every connection, and wait until the server task is gone.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.task.abort();
    }
}
