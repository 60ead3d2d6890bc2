//! A retry whose sealed state names a paused call held by another replica: sent on to that
//! replica as it came (plus a header that stops it going further), whose answer is the
//! client's.

use pingora::prelude::*;
use pingora::proxy::Session;

use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::steps::refuse;
use crate::mcp::{codes, Rejection};

/// The header a replica sets on a retry it sends on to the replica holding the paused call.
const STATE_HOP: &str = "mcp-edge-state-hop";

/// Send the retry on to the replica holding its paused call; its answer is the client's.
pub(super) async fn send_on(
    session: &mut Session,
    ctx: &mut RequestCtx,
    replica: &str,
) -> Result<bool> {
    let refused = |msg: String| {
        let code = codes::GATEWAY_UPSTREAM_UNAVAILABLE;
        Rejection::new(502, code, "state-hop", msg)
    };
    if session.req_header().headers.contains_key(STATE_HOP) {
        let msg = format!("The paused call this requestState names is held by {replica}, not by this replica it was sent on to (check legacy.advertise on every replica)");
        return refuse(session, ctx, refused(msg), None).await;
    }
    let head = session.req_header().clone();
    let path = head.uri.path();
    let headers = head
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)));
    let t = &ctx.gw.config.timeouts;
    let read = ctx.gw.config.legacy.answer_timeout.max(t.upstream_read);
    let body = ctx.in_hand.clone();
    let sent = super::replica::send_on(
        session,
        (replica, STATE_HOP),
        (path, headers),
        &body,
        (t.connect, read),
    )
    .await?;
    match sent {
        Ok(answered) => Ok(answered),
        Err(e) => {
            let msg = format!("The replica holding the paused call: {e}");
            refuse(session, ctx, refused(msg), None).await
        }
    }
}
