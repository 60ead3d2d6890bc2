//! `subscriptions/listen` on a federated endpoint: one client stream that carries the
//! notifications of every federated pool. The gateway sends the client's listen request (its
//! body as it is, with its `Authorization`) to one instance of each pool, acknowledges the
//! subscription itself, then forwards each pool's notifications as they arrive (their own
//! acknowledgements left out). A `list_changed` from a pool also makes its catalog refresh at
//! once. The stream ends when every pool's stream ended or the client went away.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::Result;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fetch;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::state::Gateway;
use crate::gateway::transport::upstream_h1::oneshot::Streaming;
use crate::mcp::response::{sse_event, SSE_KEEPALIVE};
use crate::mcp::{meta, methods, sse};

/// How often an idle merged stream sends a keep-alive comment.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// Answer a listen request on endpoint `e` with the merged stream.
pub async fn fan_in(
    session: &mut Session,
    ctx: &mut RequestCtx,
    e: usize,
    body: &[u8],
    auth: super::fetch::Caller,
) -> Result<()> {
    let gw = ctx.gw.clone();
    let pools = gw
        .federation
        .as_ref()
        .map_or_else(Vec::new, |f| f.endpoints[e].pools.clone());
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    let mut tasks = tokio::task::JoinSet::new();
    for p in pools {
        tasks.spawn(pool_stream(
            gw.clone(),
            p,
            Bytes::copy_from_slice(body),
            auth.clone(),
            tx.clone(),
        ));
    }
    drop(tx);
    let mut resp = ResponseHeader::build(200, Some(4))?;
    resp.insert_header(http::header::CONTENT_TYPE, sse::CONTENT_TYPE)?;
    resp.insert_header(http::header::CACHE_CONTROL, "no-cache")?;
    // pingora drops this for HTTP/2 clients; HTTP/1.1 clients get a chunked body.
    resp.insert_header(http::header::TRANSFER_ENCODING, "chunked")?;
    session.write_response_header(Box::new(resp), false).await?;
    let id: Value = ctx
        .progress
        .envelope()
        .and_then(|env| env.id.as_ref())
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or(Value::Null);
    let ack = json!({"jsonrpc": "2.0", "method": methods::NOTIFY_SUBSCRIPTIONS_ACKNOWLEDGED, "params": {"_meta": {meta::SUBSCRIPTION_ID: id}}});
    session
        .write_response_body(
            Some(Bytes::from(sse_event(ack.to_string().as_bytes()))),
            false,
        )
        .await?;
    let mut idle = tokio::time::interval(KEEPALIVE);
    idle.tick().await;
    loop {
        let out = tokio::select! {
            msg = rx.recv() => match msg {
                Some(m) => sse_event(&m),
                None => break, // every pool's stream ended
            },
            _ = idle.tick() => SSE_KEEPALIVE.to_vec(),
        };
        if session
            .write_response_body(Some(Bytes::from(out)), false)
            .await
            .is_err()
        {
            break; // the client went away
        }
    }
    tasks.abort_all();
    session.write_response_body(None, true).await?;
    Ok(())
}

/// Pool `p`'s listen stream, its notifications sent to `tx` as they arrive.
async fn pool_stream(
    gw: Arc<Gateway>,
    p: usize,
    body: Bytes,
    auth: super::fetch::Caller,
    tx: tokio::sync::mpsc::Sender<Vec<u8>>,
) {
    let name = gw.table.pools[p].clone();
    let Some(i) = fetch::instances(&gw, p).into_iter().next() else {
        tracing::warn!("federation: subscriptions/listen: pool {name} has no usable instance; its notifications are not merged");
        return;
    };
    let inst = &gw.pools[p].instances[i];
    let headers = match auth.headers_for(&gw, p).await {
        Ok(h) => h,
        Err(e) => {
            return tracing::warn!(
                "federation: subscriptions/listen: {e}; its notifications are not merged"
            )
        }
    };
    let req = fetch::http_request(
        &gw,
        &inst.name,
        methods::SUBSCRIPTIONS_LISTEN,
        &body,
        &headers,
    );
    let started = async {
        let conn = gw.peers[p].connect(inst.addr, &inst.name).await?;
        Streaming::start(conn, &req).await
    };
    let mut stream = match tokio::time::timeout(gw.federation_catalog().timeout, started).await {
        Ok(Ok(s)) if s.head.status == 200 => s,
        Ok(Ok(s)) => {
            return tracing::warn!(
                "federation: subscriptions/listen to {}: HTTP {}",
                inst.name,
                s.head.status
            )
        }
        Ok(Err(e)) => {
            return tracing::warn!("federation: subscriptions/listen to {}: {e}", inst.name)
        }
        Err(_) => {
            return tracing::warn!(
                "federation: subscriptions/listen to {}: no answer in time",
                inst.name
            )
        }
    };
    let mut parser = sse::Parser::new();
    let mut events = Vec::new();
    while let Ok(Some(chunk)) = stream.next().await {
        parser.feed(&chunk, &mut events);
        for ev in events.drain(..) {
            let method = serde_json::from_slice::<Value>(&ev.data)
                .ok()
                .and_then(|v| v["method"].as_str().map(String::from));
            match method.as_deref() {
                Some(methods::NOTIFY_SUBSCRIPTIONS_ACKNOWLEDGED) => continue,
                Some(m) if m.ends_with("/list_changed") => {
                    gw.catalogs.due_at(&name, Instant::now())
                }
                _ => {}
            }
            if tx.send(ev.data).await.is_err() {
                return;
            }
        }
    }
}
