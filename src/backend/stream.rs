//! The answers that are SSE streams: tools that report progress or log (their notifications
//! before the final result), list-changed triggers, and `subscriptions/listen` streams fed by
//! the pool's change broadcast.

use bytes::Bytes;
use futures::channel::mpsc;
use futures::SinkExt;
use http::Response;
use hyper::body::Frame;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

use super::instance::{Change, Instance};
use super::respond::{in_band, send_frame, sse_response, Body, KEEPALIVE};
use super::tools::Special;
use crate::mcp::caching::RESOURCES_UPDATED;
use crate::mcp::methods::*;
use crate::mcp::mrtr::RESULT_TYPE;
use crate::mcp::response::SSE_KEEPALIVE;
use crate::mcp::{codes, meta, result_body, result_type};

// ---------------------------------------------------------------------------------------------
// Special tools: progress, logging, list-changed triggers

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

pub(super) async fn special(
    inst: &Arc<Instance>,
    params: &Map<String, Value>,
    id: &RawValue,
    s: Special,
) -> Response<Body> {
    let meta_obj = params.get("_meta");
    match s {
        Special::TriggerTools | Special::TriggerPrompts => {
            let (change, what) = if s == Special::TriggerTools {
                (Change::Tools, "tool")
            } else {
                (Change::Prompts, "prompt")
            };
            let listeners = inst.shared.changes.send(change).unwrap_or(0);
            inst.ok(id, json!({"content": [{"type": "text", "text": format!("Announced a {what} list change to {listeners} listen stream(s)")}]}))
        }
        Special::Progress => {
            let done = json!({"content": [{"type": "text", "text": "Progress tool completed"}]});
            let Some(token) = meta_obj
                .and_then(|m| m.get(meta::PROGRESS_TOKEN))
                .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
                .cloned()
            else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                return inst.ok(id, done);
            };
            let final_body = result_body(id, &inst.finish(result_type::COMPLETE, done));
            let (mut tx, rx) = mpsc::channel(4);
            tokio::spawn(async move {
                for (i, p) in [0, 50, 100].into_iter().enumerate() {
                    let n = json!({"jsonrpc": "2.0", "method": NOTIFY_PROGRESS,
                        "params": {"progressToken": token, "progress": p, "total": 100, "message": format!("{p}% done")}});
                    if !send_frame(&mut tx, n.to_string().as_bytes()).await {
                        return; // the client went away: stop working for it
                    }
                    if i < 2 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                send_frame(&mut tx, &final_body).await;
            });
            sse_response(rx)
        }
        Special::Logging => {
            let done = json!({"content": [{"type": "text", "text": "Logging tool completed"}]});
            let Some(level) = meta_obj.and_then(|m| m.get(meta::LOG_LEVEL)) else {
                return inst.ok(id, done);
            };
            let Some(rank) = level
                .as_str()
                .and_then(|l| LOG_LEVELS.iter().position(|x| *x == l))
            else {
                return in_band(
                    id,
                    codes::INVALID_PARAMS,
                    &format!(
                        "Invalid log level {level} in _meta[\"{}\"]; use one of {}",
                        meta::LOG_LEVEL,
                        LOG_LEVELS.join(", ")
                    ),
                    None,
                );
            };
            let final_body = result_body(id, &inst.finish(result_type::COMPLETE, done));
            let (mut tx, rx) = mpsc::channel(4);
            tokio::spawn(async move {
                // This tool logs at info level: send only when the client asked for info or lower.
                if rank <= 1 {
                    let msgs = [
                        "test_logging_tool started",
                        "test_logging_tool working",
                        "test_logging_tool finished",
                    ];
                    for msg in msgs {
                        let n = json!({"jsonrpc": "2.0", "method": NOTIFY_MESSAGE,
                            "params": {"level": "info", "logger": "test_logging_tool", "data": msg}});
                        if !send_frame(&mut tx, n.to_string().as_bytes()).await {
                            return;
                        }
                    }
                }
                send_frame(&mut tx, &final_body).await;
            });
            sse_response(rx)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// subscriptions/listen

/// Most resource URIs one listen request subscribes to; past it the rest are not honoured.
const MAX_RESOURCE_SUBSCRIPTIONS: usize = 64;

/// What a listen request asked for (`params.notifications`) and this server honours: the list
/// changes, and the resources it has among `resourceSubscriptions`.
struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Vec<String>,
}

impl Filter {
    fn read(params: &Map<String, Value>) -> Filter {
        let filter = params.get("notifications").and_then(Value::as_object);
        let wants = |k: &str| filter.and_then(|f| f.get(k)).and_then(Value::as_bool) == Some(true);
        let uris = filter
            .and_then(|f| f.get("resourceSubscriptions"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|u| super::tools::read_resource(u).is_some())
            .take(MAX_RESOURCE_SUBSCRIPTIONS)
            .map(str::to_owned)
            .collect();
        Filter {
            tools: wants("toolsListChanged"),
            prompts: wants("promptsListChanged"),
            resources: wants("resourcesListChanged"),
            uris,
        }
    }

    /// The subset honoured, as the acknowledgement carries it.
    fn honoured(&self) -> Map<String, Value> {
        let mut honoured = Map::new();
        for (k, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                honoured.insert(k.into(), Value::Bool(true));
            }
        }
        if !self.uris.is_empty() {
            honoured.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        honoured
    }

    /// The notification `change` makes on this stream (method and params), if it asked for it.
    fn notification(&self, change: &Change, sub_meta: &Value) -> Option<Value> {
        let method = match change {
            Change::Tools if self.tools => NOTIFY_TOOLS_CHANGED,
            Change::Prompts if self.prompts => NOTIFY_PROMPTS_CHANGED,
            Change::Resource(uri) if self.uris.iter().any(|u| **u == **uri) => {
                return Some(json!({"jsonrpc": "2.0", "method": RESOURCES_UPDATED,
                    "params": {"uri": &**uri, "_meta": sub_meta}}));
            }
            _ => return None,
        };
        Some(json!({"jsonrpc": "2.0", "method": method, "params": {"_meta": sub_meta}}))
    }
}

pub(super) fn listen(
    inst: &Arc<Instance>,
    params: &Map<String, Value>,
    id: &RawValue,
) -> Response<Body> {
    let filter = Filter::read(params);
    let honoured = filter.honoured();
    let sub_id: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
    let sub_meta = json!({ meta::SUBSCRIPTION_ID: sub_id });
    let ack = json!({"jsonrpc": "2.0", "method": NOTIFY_SUBSCRIPTIONS_ACKNOWLEDGED,
        "params": {"_meta": sub_meta, "notifications": honoured}});
    let end = result_body(
        id,
        &json!({ RESULT_TYPE: result_type::COMPLETE, "_meta": sub_meta }),
    );
    let mut changes = inst.shared.changes.subscribe();
    let mut shutdown = inst.shared.shutdown.clone();
    let (mut tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        if !send_frame(&mut tx, ack.to_string().as_bytes()).await {
            return;
        }
        loop {
            if *shutdown.borrow_and_update() {
                send_frame(&mut tx, &end).await;
                return;
            }
            tokio::select! {
                ch = changes.recv() => {
                    let n = match ch {
                        Ok(change) => match filter.notification(&change, &sub_meta) {
                            Some(n) => n,
                            None => continue,
                        },
                        Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(broadcast::error::RecvError::Closed) => { send_frame(&mut tx, &end).await; return; }
                    };
                    if !send_frame(&mut tx, n.to_string().as_bytes()).await { return; }
                }
                r = shutdown.changed() => {
                    if r.is_err() { send_frame(&mut tx, &end).await; return; }
                }
                _ = tokio::time::sleep(KEEPALIVE) => {
                    if tx.send(Ok(Frame::data(Bytes::from_static(SSE_KEEPALIVE)))).await.is_err() { return; }
                }
            }
        }
    });
    sse_response(rx)
}
