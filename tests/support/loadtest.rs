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
                            let svc = hyper::service::service_fn(move |req| handle(shared.clone(), req));
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

fn json_response(
    status: StatusCode,
    body: Vec<u8>,
    instance: &str,
    opts: &TargetOptions,
    sse: bool,
) -> Response<Full<Bytes>> {
    let (ct, body) = if sse {
        let mut b = b": stream\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\nevent: message\ndata: ".to_vec();
        b.extend_from_slice(&body);
        b.extend_from_slice(b"\n\n");
        ("text/event-stream", b)
    } else {
        ("application/json", body)
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static(ct));
    if opts.header {
        r.headers_mut().insert(
            header::DEFAULT_UPSTREAM_HEADER,
            HeaderValue::from_str(instance).unwrap(),
        );
    }
    r
}

fn error(id: &Value, code: i32, message: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
    .unwrap()
}

fn result(id: &Value, mut result: Value, instance: &str, opts: &TargetOptions) -> Vec<u8> {
    if opts.meta {
        result["_meta"] = json!({ meta::EDGE_INSTANCE: instance });
    }
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap()
}

async fn handle(
    s: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let n = s.seq.fetch_add(1, SeqCst) + 1;
    if req.version() == http::Version::HTTP_2 {
        s.stats.h2_requests.fetch_add(1, SeqCst);
    }
    let idx = (s.rr.fetch_add(1, SeqCst) % s.opts.instances.len() as u64) as usize;
    let instance = s.opts.instances[idx].clone();
    // A global pause: once, from request N on, every request waits until it is over.
    if let Some((at, pause)) = s.opts.stall_once {
        if n == at && !s.stalled.swap(true, SeqCst) {
            *s.stall_until.lock().unwrap() = Some(tokio::time::Instant::now() + pause);
        }
        let until = *s.stall_until.lock().unwrap();
        if let Some(u) = until {
            tokio::time::sleep_until(u).await;
        }
    }
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    // The load tester's preflight (ids "preflight-N") is counted apart from the load.
    if String::from_utf8_lossy(&body).contains(r#""id":"preflight-"#) {
        s.stats.preflight.fetch_add(1, SeqCst);
    } else {
        s.stats.requests.fetch_add(1, SeqCst);
    }
    let env = match mcp::envelope::parse(&body) {
        Ok(e) => e,
        Err(e) => {
            let rej = e.rejection();
            return Ok(json_response(
                StatusCode::from_u16(rej.status).unwrap(),
                rej.body(e.id()),
                &instance,
                &s.opts,
                false,
            ));
        }
    };
    let claims = mcp::Claims::read(&parts.headers);
    if let Err(rej) = mcp::check_request(
        &claims,
        &env,
        mcp::VersionPolicy::Exactly(&[mcp::PROTOCOL_VERSION]),
    ) {
        s.stats.header_rejections.fetch_add(1, SeqCst);
        return Ok(json_response(
            StatusCode::from_u16(rej.status).unwrap(),
            rej.body(env.id.as_deref()),
            &instance,
            &s.opts,
            false,
        ));
    }
    let v: Value = serde_json::from_slice(&body).unwrap();
    let id = v["id"].clone();
    let Some(principal) = header::bearer_token(&parts.headers).map(str::to_owned) else {
        return Ok(json_response(
            StatusCode::UNAUTHORIZED,
            error(&id, codes::INVALID_REQUEST, "no bearer"),
            &instance,
            &s.opts,
            false,
        ));
    };
    let ok = |body| {
        Ok(json_response(
            StatusCode::OK,
            body,
            &instance,
            &s.opts,
            false,
        ))
    };
    let method = env.method.as_deref().unwrap_or_default();
    match method {
        methods::DISCOVER => {
            return ok(result(
                &id,
                json!({"resultType": result_type::COMPLETE, "supportedVersions": [mcp::PROTOCOL_VERSION],
                "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public"}),
                &instance,
                &s.opts,
            ))
        }
        methods::TOOLS_LIST => {
            return ok(result(
                &id,
                json!({"resultType": result_type::COMPLETE, "tools": TOOLS.iter().filter_map(|t| tools::tool(t)).map(|t| json!({"name": t.name, "inputSchema": serde_json::from_str::<Value>(t.schema).unwrap()})).collect::<Vec<_>>(), "ttlMs": 0, "cacheScope": "public"}),
                &instance,
                &s.opts,
            ))
        }
        methods::TOOLS_CALL => {}
        _ => {
            return Ok(json_response(
                StatusCode::NOT_FOUND,
                error(&id, codes::METHOD_NOT_FOUND, "no such method"),
                &instance,
                &s.opts,
                false,
            ))
        }
    }
    let p = &v["params"];
    let tool = p["name"].as_str().unwrap_or_default().to_string();
    let args = p["arguments"].clone();
    let Some(t) = tools::tool(&tool).filter(|t| TOOLS.contains(&t.name)) else {
        return ok(error(&id, codes::INVALID_PARAMS, "unknown tool"));
    };
    // Mcp-Param-* headers the tool declares must mirror their arguments.
    for (arg, suffix) in t.param_headers {
        let want = args[*arg].as_str();
        let got = parts
            .headers
            .get(format!(
                "{}{}",
                header::PARAM_PREFIX,
                suffix.to_ascii_lowercase()
            ))
            .and_then(|h| h.to_str().ok());
        if want.is_some() && got != want {
            let body = error(
                &id,
                codes::HEADER_MISMATCH,
                &format!("Mcp-Param-{suffix} missing or wrong"),
            );
            return Ok(json_response(
                StatusCode::BAD_REQUEST,
                body,
                &instance,
                &s.opts,
                false,
            ));
        }
    }
    let map = if s.opts.stateful { idx } else { 0 };
    let mut state = None;
    if let Some(st) = p.get("requestState") {
        let issued = st
            .as_str()
            .and_then(|k| s.states[map].lock().unwrap().remove(k));
        let valid = issued.as_ref().is_some_and(|i| {
            i.tool == tool && i.arguments == args && i.id != id && i.principal == principal
        });
        if !valid {
            s.stats.retries_refused.fetch_add(1, SeqCst);
            return ok(error(
                &id,
                codes::INVALID_PARAMS,
                "Invalid or expired requestState",
            ));
        }
        s.stats.retries_accepted.fetch_add(1, SeqCst);
        state = issued.map(|i| i.payload);
    }
    // The tool itself is the reference backend's: the target only plays the fleet around it.
    let no_map = serde_json::Map::new();
    let caps = p["_meta"][meta::CLIENT_CAPABILITIES]
        .as_object()
        .unwrap_or(&no_map);
    let answers = match (&state, p["inputResponses"].as_object()) {
        (Some(_), Some(a)) => a.clone(),
        _ => serde_json::Map::new(),
    };
    let call = tools::Call {
        name: t.name,
        args: args.as_object().unwrap_or(&no_map),
        caps,
        answers: &answers,
        state: state.as_ref(),
    };
    let outcome = match (t.run)(&call).unwrap_or_else(|e| e) {
        // charge and charge_count: the backend's own ledger, in this process's memory.
        tools::Outcome::Ledger(op) => match tools::settle(op, &s.ledger).await {
            Ok(r) => tools::Outcome::Complete(r),
            Err(e) => tools::Outcome::Error(codes::INTERNAL_ERROR, e),
        },
        other => other,
    };
    let res = match outcome {
        tools::Outcome::Complete(mut r) => {
            s.stats.completed.fetch_add(1, SeqCst);
            r["resultType"] = json!(result_type::COMPLETE);
            r
        }
        tools::Outcome::Ask { requests, data } => {
            let k = format!("st-{}-{}/+\"=", s.state_seq.fetch_add(1, SeqCst), instance);
            let payload = StatePayload {
                principal: principal.clone(),
                expires_at_ms: u64::MAX,
                method: methods::TOOLS_CALL.into(),
                digest: String::new(),
                round: call.round() + 1,
                nonce: k.clone(),
                data,
                issuer: instance.clone(),
            };
            let issued = Issued {
                tool: tool.clone(),
                arguments: args.clone(),
                id: id.clone(),
                principal,
                payload,
            };
            s.states[map].lock().unwrap().insert(k.clone(), issued);
            json!({"resultType": result_type::INPUT_REQUIRED, "inputRequests": requests, "requestState": k})
        }
        tools::Outcome::Error(code, msg) => return ok(error(&id, code, &msg)),
        other => {
            return ok(error(
                &id,
                codes::INTERNAL_ERROR,
                &format!("the target does not serve {other:?}"),
            ))
        }
    };
    Ok(json_response(
        StatusCode::OK,
        result(&id, res, &instance, &s.opts),
        &instance,
        &s.opts,
        s.opts.sse,
    ))
}
