//! The session a request to a 2025-era pool goes over: the one held for its instance and caller,
//! or a new one (`initialize`); a request the server answers 404 (its session is gone, the
//! request was not run) is sent once more on a new session. Sessions dropped to make room are
//! closed with `DELETE`, in the background.

use std::sync::Arc;

use super::wire::Up;
use crate::gateway::federation::stages::catalog::Store;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::bridge::messages::Messages;
use crate::gateway::stages::bridge::servers::{Notes, ServerSession, SessionKey, SideRequests};
use crate::gateway::stages::bridge::Bridge;
use crate::mcp::{codes, Rejection};
use serde_json::Value;

fn unavailable(up: &Up, e: String) -> Rejection {
    let msg = format!(
        "The 2025-era instance {} could not open a session: {e}",
        up.addr
    );
    Rejection::new(
        502,
        codes::GATEWAY_UPSTREAM_UNAVAILABLE,
        "legacy-session",
        msg,
    )
}

/// The session of `key`: held, or opened now.
pub(crate) async fn get(
    bridge: &Bridge,
    up: &Up,
    key: &SessionKey,
    gw: &Gateway,
) -> Result<ServerSession, Rejection> {
    if let Some(s) = bridge.servers.get(key) {
        return Ok(s);
    }
    open_once(bridge, up, key, gw, ("opened", None)).await
}

/// Open the session of `key` unless another request did meanwhile: one `initialize` per key
/// at a time, so concurrent first requests of a caller share one session (a server may bind
/// state to it) instead of each opening one and all but the last being dropped unused. `gone`:
/// the session a request found dropped by the server, opened again only if it is still the
/// one held.
async fn open_once(
    bridge: &Bridge,
    up: &Up,
    key: &SessionKey,
    gw: &Gateway,
    (how, gone): (&str, Option<&str>),
) -> Result<ServerSession, Rejection> {
    let turn = bridge.servers.turn(key);
    let _turn = turn.lock().await;
    if let Some(s) = bridge.servers.get(key) {
        if gone != Some(s.id.as_str()) {
            return Ok(s);
        }
        bridge.servers.forget(key, &s.id);
    }
    let opened = open(bridge, up, key, gw, how).await;
    bridge.servers.opened(key);
    opened
}

async fn open(
    bridge: &Bridge,
    up: &Up,
    key: &SessionKey,
    gw: &Gateway,
    how: &str,
) -> Result<ServerSession, Rejection> {
    let m = &gw.metrics.bridge.server_sessions;
    match up.initialize().await {
        Ok((id, init)) => {
            m.with_label_values(&[how]).inc();
            let changes = (gw.catalogs.clone(), key.pool.clone());
            let (notes, _) = tokio::sync::broadcast::channel(16);
            let (side, open) = listen(up.clone(), id.clone(), changes, notes.clone());
            // What the server says from now on reaches the listeners: its standalone stream is
            // open (or refused) before the session serves a request, within a bound for a
            // server that holds the stream's head back.
            let _ = tokio::time::timeout(STREAM_OPEN_WAIT, open).await;
            for (old_key, old) in
                bridge
                    .servers
                    .put(key.clone(), id.clone(), init, (Some(side), Some(notes)))
            {
                let mut old_up = up.clone();
                old_up.addr = old_key.addr;
                tokio::spawn(async move { old_up.delete(&old).await });
            }
            gw.metrics
                .bridge
                .server_sessions_open
                .set(bridge.servers.len() as i64);
            bridge
                .servers
                .get(key)
                .ok_or_else(|| unavailable(up, "the session was dropped at once".into()))
        }
        Err(e) => {
            m.with_label_values(&["failed"]).inc();
            Err(unavailable(up, e))
        }
    }
}

/// Read the session's standalone stream in the background (the receiver says when its answer's
/// head came, or that none will): the requests the server sends
/// there go to the session's calls; its notifications go to the 2026 clients listening
/// (`notes`), and a `notifications/*/list_changed` also makes the pool's catalog due now (the
/// federation catalog and the pins read it again at once, as for a 2026 pool's listen stream).
/// The task ends with the stream or when the session is dropped (nobody receives any more).
fn listen(
    up: Up,
    sid: String,
    (catalogs, pool): (Arc<Store>, String),
    notes: Notes,
) -> (SideRequests, tokio::sync::oneshot::Receiver<()>) {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let (opened, open) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let answer = up.listen(&sid).await;
        let _ = opened.send(());
        let Ok(mut m) = answer else {
            return;
        };
        if m.status != 200 {
            return; // no standalone stream (405): the server asks on the calls' streams only
        }
        while let Ok(Some(v)) = m.next().await {
            let method = v.get("method").and_then(Value::as_str);
            let request = method.is_some() && v.get("id").is_some_and(|i| !i.is_null());
            if request {
                if tx.send(v).await.is_err() {
                    return;
                }
            } else if let Some(m) = method {
                if m.ends_with("/list_changed") {
                    catalogs.due_at(&pool, std::time::Instant::now());
                }
                // No listener is fine: nothing is kept for later.
                let _ = notes.send(v);
            }
        }
    });
    (Arc::new(tokio::sync::Mutex::new(rx)), open)
}

/// The longest a new session waits for its standalone stream's answer before serving.
const STREAM_OPEN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// POST `body` over the session of `key`: the answer's messages and the session used.
pub(crate) async fn send(
    bridge: &Bridge,
    up: &Up,
    key: &SessionKey,
    gw: &Gateway,
    body: &[u8],
) -> Result<(Messages, ServerSession), Rejection> {
    let s = get(bridge, up, key, gw).await?;
    let sid = s.id.clone();
    let fail = |e: String| {
        let msg = format!("The 2025-era instance {} failed: {e}", up.addr);
        Rejection::new(
            502,
            codes::GATEWAY_UPSTREAM_UNAVAILABLE,
            "legacy-upstream",
            msg,
        )
    };
    let m = up.post(Some(&sid), body).await.map_err(fail)?;
    if m.status != 404 {
        return Ok((m, s));
    }
    // The server dropped the session (restarted, expired): the request was not run. Requests
    // that found it gone at once open one new session between them.
    let s = open_once(bridge, up, key, gw, ("reopened", Some(&sid))).await?;
    gw.metrics
        .bridge
        .server_sessions_open
        .set(bridge.servers.len() as i64);
    let m = up.post(Some(&s.id), body).await.map_err(fail)?;
    Ok((m, s))
}
