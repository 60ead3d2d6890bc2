//! A scripted MCP upstream for the cache tests: a real HTTP/1.1 server on 127.0.0.1 whose
//! answer to each JSON-RPC request is decided by the test (a closure from the request body to a
//! [`Script`] step), which records every request it receives, and whose `subscriptions/listen`
//! streams carry whatever notifications the test pushes.
#![allow(dead_code)]

use super::background::Background;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the upstream answers one request.
pub enum Script {
    /// `{"jsonrpc":"2.0","id":<id>,"result":…}` after the delay.
    Result(Value, Duration),
    /// A JSON-RPC error with this code.
    Error(i64),
    /// An SSE stream that carries the notifications pushed with [`Scripted::notify`].
    Listen,
}

type Answer = dyn Fn(&Value) -> Script + Send + Sync;

/// The request bodies and, in the same order, their headers.
type Logs = (Arc<Mutex<Vec<Value>>>, Arc<Mutex<Vec<http::HeaderMap>>>);

pub struct Scripted {
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<Value>>>,
    /// The request headers, in the order of `log`.
    heads: Arc<Mutex<Vec<http::HeaderMap>>>,
    events: tokio::sync::broadcast::Sender<String>,
    _background: Background,
}

type BoxBody = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

impl Scripted {
    pub fn start(answer: impl Fn(&Value) -> Script + Send + Sync + 'static) -> Scripted {
        let answer: Arc<Answer> = Arc::new(answer);
        let log = Arc::new(Mutex::new(Vec::new()));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (events, _) = tokio::sync::broadcast::channel(64);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (log2, ev2, heads2) = (log.clone(), events.clone(), heads.clone());
        let background = Background::start(move || async move {
            l.set_nonblocking(true).unwrap();
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            tokio::spawn(async move {
                while let Ok((stream, _)) = l.accept().await {
                    let (log, ev, answer) = (log2.clone(), ev2.clone(), answer.clone());
                    let heads = heads2.clone();
                    tokio::spawn(async move {
                        let svc = service_fn(move |req| {
                            let logs = (log.clone(), heads.clone());
                            handle(req, logs, ev.clone(), answer.clone())
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
            });
        });
        Scripted {
            addr,
            log,
            heads,
            events,
            _background: background,
        }
    }

    /// Every request body received, in order.
    pub fn seen(&self) -> Vec<Value> {
        self.log.lock().unwrap().clone()
    }

    /// The headers of every received request of `method`, in order.
    pub fn headers_of(&self, method: &str) -> Vec<http::HeaderMap> {
        let log = self.log.lock().unwrap();
        let heads = self.heads.lock().unwrap();
        let both = log.iter().zip(heads.iter());
        both.filter(|(v, _)| v["method"] == method)
            .map(|(_, h)| h.clone())
            .collect()
    }

    /// How many received requests `pred` picks.
    pub fn count(&self, pred: impl Fn(&Value) -> bool) -> usize {
        self.log.lock().unwrap().iter().filter(|v| pred(v)).count()
    }

    pub fn count_method(&self, method: &str) -> usize {
        self.count(|v| v["method"] == method)
    }

    /// Send a notification on every open listen stream.
    pub fn notify(&self, notification: Value) {
        let _ = self.events.send(notification.to_string());
    }
}

fn full(b: impl Into<Bytes>) -> BoxBody {
    Full::new(b.into()).map_err(|never| match never {}).boxed()
}

async fn handle(
    req: hyper::Request<hyper::body::Incoming>,
    (log, heads): Logs,
    events: tokio::sync::broadcast::Sender<String>,
    answer: Arc<Answer>,
) -> Result<hyper::Response<BoxBody>, std::io::Error> {
    let health = req
        .headers()
        .get("user-agent")
        .is_some_and(|v| v.as_bytes() == b"mcp-edge-health");
    let head = req.headers().clone();
    let body = req
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    if health {
        return Ok(hyper::Response::new(full(Bytes::new())));
    }
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    // Subscribed before the request is logged: once a test sees a listen request in the log,
    // what it pushes reaches that stream.
    let mut rx = events.subscribe();
    {
        let mut log = log.lock().unwrap();
        heads.lock().unwrap().push(head);
        log.push(v.clone());
    }
    let id = v.get("id").cloned().unwrap_or(Value::Null);
    let json = |out: Value| {
        hyper::Response::builder()
            .header("content-type", "application/json")
            .header("x-upstream-says", "scripted")
            .body(full(out.to_string()))
            .unwrap()
    };
    Ok(match answer(&v) {
        Script::Result(result, delay) => {
            tokio::time::sleep(delay).await;
            json(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        Script::Error(code) => json(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": code, "message": "scripted error"}})),
        Script::Listen => {
            let (tx, out) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(8);
            tokio::spawn(async move {
                let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {}});
                if tx
                    .send(Ok(Frame::data(Bytes::from(format!("data: {ack}\n\n")))))
                    .await
                    .is_err()
                {
                    return;
                }
                while let Ok(ev) = rx.recv().await {
                    // Split each event in two chunks: the gateway must see across chunks.
                    let text = format!("event: message\ndata: {ev}\n\n");
                    let (a, b) = text.split_at(text.len() / 2);
                    for part in [a.to_string(), b.to_string()] {
                        if tx.send(Ok(Frame::data(Bytes::from(part)))).await.is_err() {
                            return;
                        }
                    }
                }
            });
            let stream =
                futures::stream::unfold(
                    out,
                    |mut rx| async move { rx.recv().await.map(|f| (f, rx)) },
                );
            hyper::Response::builder()
                .header("content-type", "text/event-stream")
                .body(StreamBody::new(stream).boxed())
                .unwrap()
        }
    })
}

/// A cacheable list or read result.
pub fn cacheable(items: Value, ttl: Value, scope: &str) -> Value {
    let mut r = items;
    r["resultType"] = json!("complete");
    r["ttlMs"] = ttl;
    r["cacheScope"] = json!(scope);
    r
}
