//! A retry whose sealed state names a paused call held by another replica: sent on to that
//! replica as it came (plus a header that stops it going further), whose answer is the
//! client's.

use pingora::prelude::*;
use pingora::proxy::Session;

use super::hop;
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
    let target = replica
        .strip_prefix("http://")
        .and_then(|a| std::net::ToSocketAddrs::to_socket_addrs(a).ok()?.next());
    let hopped = session.req_header().headers.contains_key(STATE_HOP);
    let Some(target) = target.filter(|_| !hopped) else {
        let msg = format!("The paused call this requestState names is held by {replica}, which cannot be reached from here (check legacy.advertise)");
        return refuse(
            session,
            ctx,
            Rejection::new(502, codes::GATEWAY_UPSTREAM_UNAVAILABLE, "state-hop", msg),
            None,
        )
        .await;
    };
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {target}\r\n{STATE_HOP}: 1\r\n",
        session.req_header().uri.path()
    );
    for (k, v) in session.req_header().headers.iter() {
        if !matches!(
            k.as_str(),
            "host" | "content-length" | "connection" | "transfer-encoding" | "expect"
        ) {
            head.push_str(&format!("{k}: {}\r\n", v.to_str().unwrap_or("")));
        }
    }
    head.push_str(&format!(
        "Connection: close\r\nContent-Length: {}\r\n\r\n",
        ctx.in_hand.len()
    ));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&ctx.in_hand);
    let t = &ctx.gw.config.timeouts;
    match hop::post(
        target,
        &bytes,
        t.connect,
        ctx.gw.config.legacy.answer_timeout.max(t.upstream_read),
    )
    .await
    {
        Ok(ans) => {
            let ct = ans
                .content_type
                .clone()
                .unwrap_or_else(|| "application/json".into());
            let mut resp = pingora::http::ResponseHeader::build(ans.status, Some(2))?;
            resp.insert_header(http::header::CONTENT_TYPE, ct)?;
            resp.insert_header(http::header::CONTENT_LENGTH, ans.body.len().to_string())?;
            session.write_response_header(Box::new(resp), false).await?;
            session
                .write_response_body(Some(bytes::Bytes::from(ans.body)), true)
                .await?;
            Ok(true)
        }
        Err(e) => {
            let msg = format!(
                "The replica holding the paused call ({replica}) could not be reached: {e}"
            );
            refuse(
                session,
                ctx,
                Rejection::new(502, codes::GATEWAY_UPSTREAM_UNAVAILABLE, "state-hop", msg),
                None,
            )
            .await
        }
    }
}
