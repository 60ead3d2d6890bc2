//! A deliberately naive MRTR server, for the seal tests: its `requestState` is base64 of plain
//! JSON (`{"env":"staging","step":"confirm"}`, as the revision's introductory articles show)
//! and it checks nothing: not who sends it back, not the arguments, not its age, not whether it
//! was used before. `deploy {env}` (and `undeploy`) ask for a confirmation first, then "deploy"
//! whatever env the state names. `deploy_sse` answers the same as an event stream (a progress
//! notification first). It counts every call and keeps the states it was sent back. It lists
//! its tools and answers `server/discover`, so it can stand in a federated endpoint.

use super::background::Background;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// What the server saw.
#[derive(Default, Debug)]
pub struct Seen {
    /// Every tools/call received.
    pub calls: usize,
    /// The `requestState` of every retry, as received.
    pub states: Vec<String>,
}

pub struct NaiveMrtr {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Seen>>,
    _background: Background,
}

impl NaiveMrtr {
    pub fn start() -> NaiveMrtr {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let s = seen.clone();
        let background = Background::start(move || async move {
            l.set_nonblocking(true).unwrap();
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            tokio::spawn(async move {
                while let Ok((stream, _)) = l.accept().await {
                    let s = s.clone();
                    tokio::spawn(async move {
                        let svc = service_fn(move |req| handle(req, s.clone()));
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
            });
        });
        NaiveMrtr {
            addr,
            seen,
            _background: background,
        }
    }

    pub fn calls(&self) -> usize {
        self.seen.lock().unwrap().calls
    }

    /// The states the server was sent back, as it received them.
    pub fn states(&self) -> Vec<String> {
        self.seen.lock().unwrap().states.clone()
    }
}

/// The naive state: base64 of JSON naming the env.
pub fn naive_state(env: &str) -> String {
    STANDARD.encode(json!({"env": env, "step": "confirm"}).to_string())
}

async fn handle(
    req: hyper::Request<hyper::body::Incoming>,
    seen: Arc<Mutex<Seen>>,
) -> Result<hyper::Response<Full<Bytes>>, hyper::Error> {
    let body = req.into_body().collect().await?.to_bytes();
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (id, p) = (v["id"].clone(), &v["params"]);
    let name = p["name"].as_str().unwrap_or("").to_string();
    let result = if v["method"] == "server/discover" {
        json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "ttlMs": 60_000, "cacheScope": "public"})
    } else if v["method"] == "tools/list" {
        let schema = json!({"type": "object", "properties": {"env": {"type": "string"}}});
        let tools: Vec<Value> = ["deploy", "undeploy", "deploy_sse"]
            .iter()
            .map(|n| json!({"name": n, "inputSchema": schema}))
            .collect();
        json!({"resultType": "complete", "tools": tools, "ttlMs": 60_000, "cacheScope": "public"})
    } else {
        seen.lock().unwrap().calls += 1;
        match p["requestState"].as_str() {
            None => json!({
                "resultType": "input_required",
                "inputRequests": {"confirm": {"method": "elicitation/create",
                    "params": {"message": "Really?", "requestedSchema": {"type": "object"}}}},
                "requestState": naive_state(p["arguments"]["env"].as_str().unwrap_or("")),
            }),
            Some(state) => {
                seen.lock().unwrap().states.push(state.to_string());
                // Naive: the state says what to do; nothing about it is checked.
                let decoded = STANDARD.decode(state).unwrap_or_default();
                let s: Value = serde_json::from_slice(&decoded).unwrap_or(Value::Null);
                let env = s["env"].as_str().unwrap_or("?");
                json!({"resultType": "complete",
                    "content": [{"type": "text", "text": format!("{name}: {env}")}]})
            }
        }
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    let resp = hyper::Response::builder().status(200);
    Ok(if name == "deploy_sse" {
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1}});
        let text =
            format!("event: message\ndata: {progress}\n\nevent: message\ndata: {answer}\n\n");
        resp.header("content-type", "text/event-stream")
            .body(Full::new(Bytes::from(text)))
            .unwrap()
    } else {
        resp.header("content-type", "application/json")
            .body(Full::new(Bytes::from(answer)))
            .unwrap()
    })
}
