//! A 2025-era client's answer to a question the bridge asked it (a JSON-RPC response POSTed
//! with its session id): opened ([`AnswerId`]), checked against the session that presents it,
//! and handed to the waiting call here, or sent on to the replica that holds the call's stream
//! (the replica named in the id: the answer's POST, as it came, over plain HTTP; that replica
//! checks it again and never sends it further). 202 when the call has it.

use pingora::prelude::*;
use pingora::proxy::Session;
use serde_json::value::RawValue;
use serde_json::Value;
use std::net::SocketAddr;

use super::hop;
use super::session::LegacySession;
use super::waiting::{AnswerId, Event, Undelivered};
use super::{Bridge, Input, HOPPED};
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::steps::refuse;
use crate::gateway::stages::answer::respond;
use crate::mcp::legacy::SESSION_ID;
use crate::mcp::{codes, Rejection};

/// Deliver `msg`, the client's response with `id`.
pub(super) async fn deliver(
    session: &mut Session,
    ctx: &mut RequestCtx,
    bridge: &Bridge,
    input: &Input,
    s: &LegacySession,
    msg: Value,
    id: Box<RawValue>,
) -> Result<bool> {
    let refused = |reason: &'static str, msg: String| {
        Rejection::new(400, codes::GATEWAY_SESSION_REQUIRED, reason, msg)
    };
    let aid = match id_of(bridge, &id) {
        Ok(a) => a,
        Err(why) => {
            let rej = refused(
                "answer-unknown",
                format!("This response answers no request the gateway sent: {why}"),
            );
            return refuse(session, ctx, rej, None).await;
        }
    };
    if aid.session != s.nonce {
        let rej = refused(
            "answer-other-session",
            "This response answers a request sent on another session".into(),
        );
        return refuse(session, ctx, rej, None).await;
    }
    if aid.expired() {
        let rej = refused(
            "answer-late",
            "This response came after the call stopped waiting for it (legacy.answer_timeout)"
                .into(),
        );
        return refuse(session, ctx, rej, None).await;
    }
    if aid.replica != bridge.advertise {
        if input.hopped {
            let msg = format!("This answer was sent on to {}, which does not hold its call (check legacy.advertise on every replica)", bridge.advertise);
            return refuse(session, ctx, refused("answer-misrouted", msg), None).await;
        }
        ctx.gw
            .metrics
            .bridge
            .answers
            .with_label_values(&["forwarded"])
            .inc();
        return send_on(session, ctx, input, &aid.replica, msg).await;
    }
    let answer = match (msg.get("result"), msg.get("error")) {
        (Some(r), _) => Ok(r.clone()),
        (None, Some(e)) => Err(e.clone()),
        (None, None) => Err(Value::Null),
    };
    let event = Event::Answer {
        key: aid.key,
        answer,
    };
    match bridge.waiting.deliver(aid.call, &s.nonce, event) {
        Ok(()) => {
            ctx.gw
                .metrics
                .bridge
                .answers
                .with_label_values(&["local"])
                .inc();
            accepted(session).await
        }
        Err(Undelivered::OtherSession) => {
            let rej = refused(
                "answer-other-session",
                "This response answers a request sent on another session".into(),
            );
            refuse(session, ctx, rej, None).await
        }
        Err(Undelivered::NotWaiting) => {
            let rej = refused(
                "answer-not-waiting",
                "No call waits for this response (it was answered, timed out or was cancelled)"
                    .into(),
            );
            refuse(session, ctx, rej, None).await
        }
    }
}

fn id_of(bridge: &Bridge, id: &RawValue) -> Result<AnswerId, String> {
    let text: String = serde_json::from_str(id.get())
        .map_err(|_| "its id is not one the gateway gives".to_string())?;
    AnswerId::open(&bridge.sealer, &text).map_err(|e| e.describe("id"))
}

pub(super) async fn accepted(session: &mut Session) -> Result<bool> {
    let mut resp = pingora::http::ResponseHeader::build(202, Some(1))?;
    resp.insert_header(http::header::CONTENT_LENGTH, "0")?;
    session.write_response_header(Box::new(resp), true).await?;
    Ok(true)
}

/// Send the answer on to `replica`, which holds its call; its status is the client's.
async fn send_on(
    session: &mut Session,
    ctx: &mut RequestCtx,
    input: &Input,
    replica: &str,
    msg: Value,
) -> Result<bool> {
    let target: Option<SocketAddr> = replica
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .or_else(|| {
            replica
                .strip_prefix("http://")
                .and_then(|a| std::net::ToSocketAddrs::to_socket_addrs(a).ok()?.next())
        });
    let Some(target) = target else {
        let rej = Rejection::new(
            502,
            codes::GATEWAY_UPSTREAM_UNAVAILABLE,
            "answer-hop",
            format!("The replica holding this call ({replica}) cannot be addressed"),
        );
        return refuse(session, ctx, rej, None).await;
    };
    let body = serde_json::to_vec(&msg).expect("a JSON value serializes");
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {target}\r\nContent-Type: application/json\r\n{HOPPED}: 1\r\n",
        input.path
    );
    for (k, v) in [
        (SESSION_ID, input.session_id.as_deref()),
        ("authorization", input.authorization.as_deref()),
    ] {
        if let Some(v) = v {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    head.push_str(&format!(
        "Connection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    ));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&body);
    let timeouts = &ctx.gw.config.timeouts;
    match hop::post(target, &bytes, timeouts.connect, timeouts.upstream_read).await {
        Ok(ans) => {
            respond(session, ans.status, ans.body, &[]).await?;
            Ok(true)
        }
        Err(e) => {
            let rej = Rejection::new(
                502,
                codes::GATEWAY_UPSTREAM_UNAVAILABLE,
                "answer-hop",
                format!("The replica holding this call ({replica}) could not be reached: {e}"),
            );
            refuse(session, ctx, rej, None).await
        }
    }
}
