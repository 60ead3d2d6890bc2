//! `subscriptions/listen` on a federated endpoint: one client stream that carries the
//! notifications of every federated pool. The gateway sends the client's listen request (its
//! body as it is, with its `Authorization`) to one instance of each pool, acknowledges the
//! subscription itself once every pool's stream is open (or failed, within the catalog's
//! timeout), then forwards each pool's notifications as they arrive (their own
//! acknowledgements left out). A `list_changed` from a pool also makes its catalog refresh at
//! once. A pool of 2025-era servers takes part through the gateway's session with one of its
//! instances (the server's standalone stream). The stream ends when every pool's stream ended
//! or the client went away.

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
use crate::gateway::transport::upstream_h1::oneshot::{Stream, Streaming};
use crate::mcp::response::{sse_event, SSE_KEEPALIVE};
use crate::mcp::{meta, methods, sse};

/// Said by a pool's task once its stream is open (dropped unsaid when it failed).
type Subscribed = tokio::sync::oneshot::Sender<()>;

/// How often an idle merged stream sends a keep-alive comment.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// Answer a listen request on endpoint `e` with the merged stream.
pub(crate) async fn fan_in(
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
    let mut ready = Vec::new();
    for p in pools {
        let (subscribed, said) = tokio::sync::oneshot::channel();
        ready.push(said);
        tasks.spawn(pool_stream(
            gw.clone(),
            p,
            Bytes::copy_from_slice(body),
            auth.clone(),
            (tx.clone(), subscribed),
        ));
    }
    drop(tx);
    // The acknowledgement says the subscription holds: it goes once every pool's stream is
    // open (or failed), within the catalog's timeout, so a change right after it is not lost.
    let timeout = gw.federation_catalog().timeout;
    let _ = tokio::time::timeout(timeout, futures::future::join_all(ready)).await;
    open(session, ctx).await?;
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

/// The merged stream's head and its first event, the acknowledgement carrying the request's id
/// as the subscription's.
async fn open(session: &mut Session, ctx: &RequestCtx) -> Result<()> {
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
    let event = Bytes::from(sse_event(ack.to_string().as_bytes()));
    session.write_response_body(Some(event), false).await
}

/// Pool `p`'s listen stream, its notifications sent to `tx` as they arrive.
async fn pool_stream(
    gw: Arc<Gateway>,
    p: usize,
    body: Bytes,
    auth: super::fetch::Caller,
    (tx, subscribed): (tokio::sync::mpsc::Sender<Vec<u8>>, Subscribed),
) {
    if let Some(version) = crate::gateway::journey::legacy_up::era_of(&gw, p) {
        return legacy_pool_stream(&gw, (p, version), &body, &auth, (tx, subscribed)).await;
    }
    let mut stream = match start(&gw, p, &body, &auth).await {
        Ok(s) => {
            let _ = subscribed.send(());
            s
        }
        Err(why) => {
            return tracing::warn!(
                "federation: subscriptions/listen: {why}; its notifications are not merged"
            )
        }
    };
    let name = &gw.table.pools[p];
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
                Some(m) if m.ends_with("/list_changed") => gw.catalogs.due_at(name, Instant::now()),
                _ => {}
            }
            if tx.send(ev.data).await.is_err() {
                return;
            }
        }
    }
}

/// A pool of 2025-era servers has no listen request: the gateway's session with its first
/// usable instance holds the server's standalone stream, and its list changes go to `tx` as a
/// 2026 listen stream carries them (the kinds the client asked for, under its request's id).
async fn legacy_pool_stream(
    gw: &Gateway,
    (p, version): (usize, &'static str),
    body: &[u8],
    auth: &super::fetch::Caller,
    (tx, subscribed): (tokio::sync::mpsc::Sender<Vec<u8>>, Subscribed),
) {
    use crate::gateway::journey::legacy_up::{gateway_side, session};
    let name = &gw.table.pools[p];
    let why = |e: String| {
        tracing::warn!(
            "federation: subscriptions/listen: pool {name}: {e}; its notifications are not merged"
        )
    };
    let Some(i) = fetch::instances(gw, p).into_iter().next() else {
        return why("no usable instance".into());
    };
    let headers = match auth.headers_for(gw, p).await {
        Ok(h) => h,
        Err(e) => return why(e.to_string()),
    };
    let subject = auth.identity.as_deref().map(|id| id.subject.as_str());
    let (up, key) = gateway_side(gw, (p, i), version, (&headers, subject));
    let notes = match session::get(&gw.bridge, &up, &key, gw).await {
        Ok(s) => s.notes,
        Err(rej) => return why(rej.message.to_string()),
    };
    let Some(mut rx) = notes.map(|n| n.subscribe()) else {
        return why("the session has no standalone stream".into());
    };
    let _ = subscribed.send(());
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let params = request.get("params").and_then(Value::as_object);
    let wants = params.map_or([false; 3], crate::mcp::legacy::listen_wants);
    let sub = request.get("id").cloned().unwrap_or(Value::Null);
    while let Some(m) = crate::gateway::journey::legacy_up::next_listen(&mut rx, wants, &sub).await
    {
        if tx.send(m.to_string().into_bytes()).await.is_err() {
            return;
        }
    }
}

/// Pool `p`'s listen request sent to its first usable instance, the answer's head read in the
/// catalog's timeout; why not, for the log.
async fn start(
    gw: &Gateway,
    p: usize,
    body: &[u8],
    auth: &super::fetch::Caller,
) -> std::result::Result<Streaming<Box<dyn Stream>>, String> {
    let name = &gw.table.pools[p];
    let Some(i) = fetch::instances(gw, p).into_iter().next() else {
        return Err(format!("pool {name} has no usable instance"));
    };
    let inst = &gw.pools[p].instances[i];
    let headers = auth.headers_for(gw, p).await.map_err(|e| e.to_string())?;
    let listen = methods::SUBSCRIPTIONS_LISTEN;
    let req = fetch::http_request(gw, &inst.name, listen, body, &headers);
    let started = async {
        let conn = gw.peers[p].connect(inst.addr, &inst.name).await?;
        Streaming::start(conn, &req).await
    };
    match tokio::time::timeout(gw.federation_catalog().timeout, started).await {
        Ok(Ok(s)) if s.head.status == 200 => Ok(s),
        Ok(Ok(s)) => Err(format!("{}: HTTP {}", inst.name, s.head.status)),
        Ok(Err(e)) => Err(format!("{}: {e}", inst.name)),
        Err(_) => Err(format!("{}: no answer in time", inst.name)),
    }
}
