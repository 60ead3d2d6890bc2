//! `subscriptions/listen` from a 2026 client to a pool of 2025-era servers: the gateway's
//! session with the instance holds the server's standalone stream (`legacy_up::session`), and
//! its list changes reach every client listening through that session, as a 2026 listen stream
//! carries them (`mcp::legacy::to_listen`: the ones the client asked for, under its
//! subscription id). The stream ends when the session's stream ends (the final result says
//! the subscription is over: the client listens again) or when the client leaves.

use bytes::Bytes;
use pingora::prelude::*;
use pingora::proxy::Session;
use serde_json::json;
use std::time::Duration;

use super::back::Req;
use super::out::Out;
use crate::gateway::journey::legacy_up::{next_listen, session as up_session, wire::Up};
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::steps::refuse;
use crate::gateway::stages::bridge::servers::SessionKey;
use crate::gateway::stages::bridge::Bridge;
use crate::mcp::response::SSE_KEEPALIVE;
use crate::mcp::{codes, legacy, meta, result_type, Rejection};

/// How often an idle listen stream carries a comment line.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// Answer `req`, a listen request, from the session of `key` on instance `up`.
pub(super) async fn relay(
    session: &mut Session,
    ctx: &mut RequestCtx,
    bridge: &Bridge,
    req: &Req,
    (up, key): (Up, SessionKey),
) -> Result<bool> {
    let gw = ctx.gw.clone();
    let s = match up_session::get(bridge, &up, &key, &gw).await {
        Ok(s) => s,
        Err(rej) => return refuse(session, ctx, rej, None).await,
    };
    let Some(notes) = s.notes else {
        let msg = "This 2025-era server's session has no standalone stream to listen to";
        let rej = Rejection::new(404, codes::METHOD_NOT_FOUND, "no-listen-stream", msg);
        return refuse(session, ctx, rej, None).await;
    };
    let mut rx = notes.subscribe();
    ctx.count_delivery();
    let (wants, sub) = (legacy::listen_wants(&req.params), req.id.clone());
    let mut out = Out {
        session,
        streaming: false,
    };
    out.event(legacy::listen_ack(wants, &sub).to_string().as_bytes())
        .await?;
    let mut beat = tokio::time::interval(KEEPALIVE);
    beat.tick().await;
    loop {
        tokio::select! {
            n = next_listen(&mut rx, wants, &sub) => match n {
                Some(m) => out.event(m.to_string().as_bytes()).await?,
                None => {
                    let end = json!({"jsonrpc": "2.0", "id": sub, "result": {
                        "resultType": result_type::COMPLETE, "_meta": {meta::SUBSCRIPTION_ID: sub}}});
                    return out.last(200, end.to_string().into_bytes(), &[]).await;
                }
            },
            _ = beat.tick() => {
                let comment = Bytes::from_static(SSE_KEEPALIVE);
                out.session.write_response_body(Some(comment), false).await?;
            }
            // The client closed its side.
            _ = out.session.downstream_session.read_body_or_idle(true) => return Ok(true),
        }
    }
}
