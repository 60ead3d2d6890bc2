//! A 2025-era client's answer to a question the bridge asked it (a JSON-RPC response POSTed
//! with its session id): opened ([`AnswerId`]), checked against the session that presents it,
//! and handed to the waiting call here, or sent on to the replica that holds the call's stream
//! (the replica named in the id: the answer's POST, as it came, over plain HTTP; that replica
//! checks it again and never sends it further). 202 when the call has it. A cancellation names
//! no replica: one that ends no call here is sent on to every replica of `legacy.replicas`.

use pingora::prelude::*;
use pingora::proxy::Session;
use serde_json::value::RawValue;
use serde_json::Value;

use super::session::LegacySession;
use super::waiting::{AnswerId, Event, Undelivered};
use super::{Bridge, Input, HOPPED};
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::steps::refuse;
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
    let aid = match checked(bridge, input, s, &id) {
        Ok(a) => a,
        Err(rej) => return refuse(session, ctx, rej, None).await,
    };
    let m = &ctx.gw.metrics.bridge.answers;
    if aid.replica != bridge.advertise {
        m.with_label_values(&["forwarded"]).inc();
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
    let rej = match bridge.waiting.deliver(aid.call, &s.nonce, event) {
        Ok(()) => {
            m.with_label_values(&["local"]).inc();
            return accepted(session).await;
        }
        Err(Undelivered::OtherSession) => refused(
            "answer-other-session",
            "This response answers a request sent on another session".into(),
        ),
        Err(Undelivered::NotWaiting) => refused(
            "answer-not-waiting",
            "No call waits for this response (it was answered, timed out or was cancelled)".into(),
        ),
    };
    refuse(session, ctx, rej, None).await
}

/// An answer the gateway does not take (400 / -31015).
fn refused(reason: &'static str, msg: String) -> Rejection {
    Rejection::new(400, codes::GATEWAY_SESSION_REQUIRED, reason, msg)
}

/// The answer id, opened and checked: the gateway's, of this session, still awaited, and (when
/// another replica sent it on) held here.
fn checked(
    bridge: &Bridge,
    input: &Input,
    s: &LegacySession,
    id: &RawValue,
) -> std::result::Result<AnswerId, Rejection> {
    let aid = id_of(bridge, id).map_err(|why| {
        let msg = format!("This response answers no request the gateway sent: {why}");
        refused("answer-unknown", msg)
    })?;
    if aid.session != s.nonce {
        let msg = "This response answers a request sent on another session";
        return Err(refused("answer-other-session", msg.into()));
    }
    if aid.expired() {
        let msg =
            "This response came after the call stopped waiting for it (legacy.answer_timeout)";
        return Err(refused("answer-late", msg.into()));
    }
    if aid.replica != bridge.advertise && input.hopped {
        let msg = format!("This answer was sent on to {}, which does not hold its call (check legacy.advertise on every replica)", bridge.advertise);
        return Err(refused("answer-misrouted", msg));
    }
    Ok(aid)
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
    let body = serde_json::to_vec(&msg).expect("a JSON value serializes");
    let headers = [
        ("content-type", Some("application/json")),
        (SESSION_ID, input.session_id.as_deref()),
        ("authorization", input.authorization.as_deref()),
    ];
    let headers = headers.into_iter().filter_map(|(k, v)| Some((k, v?)));
    let t = &ctx.gw.config.timeouts;
    let sent = super::replica::send_on(
        session,
        (replica, HOPPED),
        (&input.path, headers),
        &body,
        (t.connect, t.upstream_read),
    )
    .await?;
    match sent {
        Ok(answered) => Ok(answered),
        Err(e) => {
            let msg = format!("The replica holding this call: {e}");
            let code = codes::GATEWAY_UPSTREAM_UNAVAILABLE;
            refuse(
                session,
                ctx,
                Rejection::new(502, code, "answer-hop", msg),
                None,
            )
            .await
        }
    }
}

/// A `notifications/cancelled` that ended `here` calls on this replica: when none, and the
/// client sent it here itself, it goes on to every other replica of `legacy.replicas` (in the
/// background; each checks the session again and sends it no further).
pub(super) fn cancel_elsewhere(bridge: &Bridge, input: &Input, here: usize, msg: &Value) {
    let m = &bridge.cancels;
    if here > 0 {
        m.with_label_values(&["local"]).inc();
        return;
    }
    match super::replica::tell_others(bridge, input, msg) {
        Some(sending) => {
            m.with_label_values(&["sent"]).inc();
            tokio::spawn(sending);
        }
        None => m.with_label_values(&["unheld"]).inc(),
    }
}
