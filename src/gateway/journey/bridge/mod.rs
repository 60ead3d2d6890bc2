//! The protocol bridge for clients of the 2025 era (`initialize`, `Mcp-Session-Id`, mid-call
//! `elicitation/create`) in front of a 2026-07-28 fleet. Eras are translated at the edge, so
//! every stage behind it sees one protocol:
//!
//! - [`front`] runs first in `request_filter`, before admission. A 2026 request passes on
//!   untouched; a 2025-era one (its head says so: [`crate::mcp::legacy::era_of`]) is the
//!   bridge's to answer, whole.
//! - The gateway *is* the session: `initialize` is answered from the fleet's `server/discover`
//!   ([`initialize`]); the session id is sealed and self-contained ([`session`], in the stages
//!   layer with the rest of the bridge's state, [`Bridge`]), so any replica
//!   serves it; `ping` and the session-scoped settings are answered here, resource
//!   subscriptions kept for the session's standalone stream ([`subscribe`]).
//! - Every other request becomes a 2026 request (the `_meta` from the session, `Mcp-Method` /
//!   `Mcp-Name` from the body, never from the legacy request's headers) sent through this
//!   gateway's own pipeline ([`hop`]), so routes, auth, limits, the check, the cache and
//!   federation apply as to any client.
//! - When the fleet answers `input_required`, [`call`] runs the multi round-trip flow for the
//!   client: it asks each input request on the call's own stream as a server-initiated request,
//!   waits for the client's answers ([`waiting`]; they may reach another replica, which sends
//!   them on: [`answers`]), retries with the answers and the exact `requestState`, and streams
//!   the final result.
//!
//! - On a main endpoint whose pool serves both eras itself (`legacy_clients: pass`), nothing
//!   is translated: [`pass`] sends the client's messages through the pipeline by their body,
//!   each session pinned to the instance that opened it.
//!
//! What it never does: trust a legacy request's `Mcp-*` headers, keep a session in a table, or
//! hold a call past `legacy.answer_timeout`.

use pingora::prelude::*;
use pingora::proxy::Session;
use serde_json::value::{to_raw_value, RawValue};
use serde_json::Value;

use crate::config::Config;
use crate::gateway::journey::phases::Phases;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::steps::{invite_body, refuse};
use crate::gateway::stages::answer::respond;
use crate::gateway::stages::{admission, inspect};
use crate::mcp::legacy::{self, Era};
use crate::mcp::{codes, Rejection};

mod answers;
pub(crate) mod back;
mod back_hop;
mod back_listen;
mod back_resume;
mod back_target;
mod call;
mod carried;
mod hop;
mod initialize;
mod inline;
mod input;
pub(crate) mod inside;
mod leg_head;
mod legs;
mod listen;
mod marks;
mod out;
pub(crate) mod pass;
mod replica;
mod round;
mod stand_in;
mod subscribe;

pub(crate) use crate::gateway::stages::bridge::{session, waiting, Bridge};
pub(crate) use input::{once, Input, HOPPED};
use session::LegacySession;

/// Whether the request may be a 2025-era client's (its head says so, or leaves it open): the
/// only requests [`front`] takes.
pub(crate) fn may_be_legacy(session: &Session) -> bool {
    legacy_era(session).is_some()
}

/// The era of a request that may be a 2025-era client's ([`Era::Legacy`], or
/// [`Era::Unsure`]: its body tells); `None` for a 2026 request.
pub(crate) fn legacy_era(session: &Session) -> Option<Era> {
    let req = session.req_header();
    let era = legacy::era_of(&req.method, &req.headers);
    (era != Era::Modern).then_some(era)
}

/// The bridge's turn, first in `request_filter`, for a request of `era` ([`legacy_era`]: never
/// [`Era::Modern`]):
/// `Some` when it answered a 2025-era request (whole), `None` for a 2026 request (or legacy
/// clients refused here: the stages then answer as a 2026-only server does).
pub(crate) async fn front(
    phases: &dyn Phases,
    session: &mut Session,
    ctx: &mut RequestCtx,
    era: Era,
) -> Result<Option<bool>> {
    let gw = ctx.gw.clone();
    let bridge = &gw.bridge;
    let req = session.req_header();
    let path = req.uri.path();
    if !addressed(&gw.config, path) || !gw.config.legacy.bridges(path) {
        return Ok(None);
    }
    ctx.method = Some("legacy".into());
    let once = match input::head_ok(req, &gw.config) {
        Ok(once) => once,
        Err(rej) => return refuse(session, ctx, rej, None).await.map(Some),
    };
    // With auth on, a token auth refuses is answered here, as the pipeline would (its
    // challenge included).
    let ip = super::request::client_ip(&gw, session);
    let input = match Input::read(&req.headers, once, path, ip, gw.auth.as_ref()).await {
        Ok(input) => input,
        Err(refusal) => {
            if let Some(c) = refusal.challenge {
                ctx.extra_headers.push(("www-authenticate", c));
            }
            return refuse(session, ctx, refusal.rejection, None)
                .await
                .map(Some);
        }
    };
    let req = session.req_header();
    let passes = pass::takes(&gw, &input);
    match req.method {
        http::Method::POST if era == Era::Unsure => {
            headless(phases, session, ctx, bridge, input).await
        }
        http::Method::POST => {
            let body = match read(session, ctx, passes).await? {
                Ok(b) => b,
                Err(answered) => return Ok(Some(answered)),
            };
            if passes {
                return pass::enter(session, ctx, bridge, &input, Some(body)).await;
            }
            post(phases, session, ctx, bridge, input, &body)
                .await
                .map(Some)
        }
        http::Method::GET | http::Method::DELETE if passes => {
            pass::enter(session, ctx, bridge, &input, None).await
        }
        http::Method::GET | http::Method::DELETE => {
            let s = match verify(bridge, &input) {
                Ok(s) => s,
                Err(rej) => return refuse(session, ctx, rej, None).await.map(Some),
            };
            on_session(session, ctx, (bridge, &input), &s)
                .await
                .map(Some)
        }
        _ => {
            let rej = Rejection::new(
                405,
                codes::INVALID_REQUEST,
                "method-not-allowed",
                "Method not allowed: a 2025-era session takes POST, GET and DELETE",
            );
            refuse(session, ctx, rej, None).await.map(Some)
        }
    }
}

/// The request is addressed to an MCP endpoint of this gateway.
pub(crate) fn addressed(config: &Config, path: &str) -> bool {
    path == config.endpoint
        || config
            .federation
            .iter()
            .flat_map(|f| &f.endpoints)
            .any(|e| e.path == path)
}

/// The session the request presents, verified; the legacy server's answers otherwise.
pub(crate) fn verify(
    bridge: &Bridge,
    input: &Input,
) -> Result<std::sync::Arc<LegacySession>, Rejection> {
    let Some(id) = input.session_id.as_deref() else {
        let msg = "Bad Request: no session id (Mcp-Session-Id); send initialize first";
        return Err(Rejection::new(
            400,
            codes::GATEWAY_SESSION_REQUIRED,
            "session-missing",
            msg,
        ));
    };
    let binding = (input.caller.as_str(), input.path.as_str());
    bridge
        .opened
        .verify(&bridge.sealer, id, binding)
        .and_then(|s| match bridge.ended.has(&s) {
            true => Err(session::Refused::Ended),
            false => Ok(s),
        })
        .map_err(|r| r.rejection())
}

/// `GET` (the standalone stream, [`listen`]) and `DELETE` (the session's waiting calls on this
/// replica end) on a verified session.
async fn on_session(
    session: &mut Session,
    ctx: &mut RequestCtx,
    (bridge, input): (&Bridge, &Input),
    s: &LegacySession,
) -> Result<bool> {
    if session.req_header().method == http::Method::GET {
        return listen::stream(session, ctx, (bridge, input), s).await;
    }
    bridge.waiting.cancel(&s.nonce, None);
    bridge.subscribed.end(s);
    bridge.ended.end(s);
    respond(session, 200, Vec::new(), &[]).await?;
    Ok(true)
}

/// Read the body whole (bounded), after `100 Continue` when asked; `Err(answered)`: refused.
/// With `replay`, pingora's retry buffer keeps it too: a request that may go on through
/// pingora's pipe (to a pool passed through, or a headless request settled as a 2026 one)
/// needs it there; a call the bridge carries hands its body to each leg itself.
async fn read(
    session: &mut Session,
    ctx: &mut RequestCtx,
    replay: bool,
) -> Result<std::result::Result<bytes::Bytes, bool>> {
    ctx.expects_continue = session
        .req_header()
        .headers
        .get(http::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    invite_body(session, ctx).await?;
    if replay {
        session.enable_retry_buffering();
    }
    let max = ctx.gw.config.limits.max_body_bytes;
    match inspect::read_whole(session, max).await {
        Ok(b) => {
            ctx.body_len = b.len();
            ctx.progress = crate::gateway::journey::request::Progress::Drained;
            Ok(Ok(b))
        }
        Err(rej) => refuse(session, ctx, rej, None).await.map(Err),
    }
}

/// A POST with no session, no `Mcp-Method` and no version: a 2025-era `initialize` is the
/// bridge's; anything else is a 2026 request missing its headers, admitted and checked as the
/// stages would (`None`: a notification that passes goes on through the pipeline).
async fn headless(
    phases: &dyn Phases,
    session: &mut Session,
    ctx: &mut RequestCtx,
    bridge: &Bridge,
    input: Input,
) -> Result<Option<bool>> {
    use crate::gateway::stages::pipeline::{index_of, Step};
    let gw = ctx.gw.clone();
    let admitted = admission::admit(session.req_header(), &gw.config, &gw.key_headers);
    ctx.ran.mark(index_of(Step::Admit));
    if let Err(rej) = admitted {
        return refuse(session, ctx, rej, None).await.map(Some);
    }
    let body = match read(session, ctx, true).await? {
        Ok(b) => b,
        Err(answered) => return Ok(Some(answered)),
    };
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<&'a str>,
    }
    let initialize = serde_json::from_slice::<Method>(&body)
        .is_ok_and(|m| m.method == Some(crate::mcp::methods::INITIALIZE));
    if initialize {
        ctx.ran = Default::default();
        if pass::takes(&ctx.gw, &input) {
            return pass::enter(session, ctx, bridge, &input, Some(body)).await;
        }
        return post(phases, session, ctx, bridge, input, &body)
            .await
            .map(Some);
    }
    ctx.method = None;
    crate::gateway::journey::steps::settle_read(session, ctx, body).await
}

/// A POSTed JSON-RPC message of the 2025 era: `initialize`, or a request, notification or
/// response of a session.
async fn post(
    phases: &dyn Phases,
    session: &mut Session,
    ctx: &mut RequestCtx,
    bridge: &Bridge,
    input: Input,
    body: &bytes::Bytes,
) -> Result<bool> {
    if let Some(call) = call::Call::carried(body) {
        ctx.method = Some(call.method.clone());
        let s = match verify(bridge, &input) {
            Ok(s) => s,
            Err(rej) => return refuse(session, ctx, rej, Some(call.id)).await,
        };
        return call::run(phases, session, ctx, bridge, &input, &s, call).await;
    }
    let msg: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(Value::Array(_)) => {
            let rej = Rejection::new(400, codes::INVALID_REQUEST, "batch", "JSON-RPC batches are not supported (removed in 2025-06-18): send one message a request");
            return refuse(session, ctx, rej, None).await;
        }
        _ => {
            let rej = Rejection::new(
                400,
                codes::PARSE_ERROR,
                "parse-error",
                "Parse error: the body is not a JSON-RPC message",
            );
            return refuse(session, ctx, rej, None).await;
        }
    };
    let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
    let id = msg
        .get("id")
        .filter(|i| !i.is_null())
        .and_then(|i| to_raw_value(i).ok());
    ctx.method = method.clone().or(Some("legacy-response".into()));
    if method.as_deref() == Some(crate::mcp::methods::INITIALIZE) {
        return initialize::run(phases, session, ctx, bridge, &input, &msg, id).await;
    }
    let s = match verify(bridge, &input) {
        Ok(s) => s,
        Err(rej) => return refuse(session, ctx, rej, id).await,
    };
    match (method, id) {
        (None, Some(id)) => answers::deliver(session, ctx, bridge, &input, &s, msg, id).await,
        (Some(m), None) => notified(session, (bridge, &input), &s, &m, &msg).await,
        (Some(m), Some(id)) if legacy::subscribes(&m).is_some() => {
            let on = legacy::subscribes(&m) == Some(true);
            subscribe::run(session, ctx, (bridge, &input), &s, (&msg, id, on)).await
        }
        (Some(m), Some(id)) => match legacy::answered_at_edge(&m) {
            Some(result) if m == "logging/setLevel" => {
                // Remembered here and sent in each later request's `_meta`.
                if let Some(level) = msg.pointer("/params/level").and_then(Value::as_str) {
                    bridge.levels.set(&s, level);
                }
                reply(session, &id, &result).await
            }
            Some(result) => reply(session, &id, &result).await,
            None => {
                call::run(
                    phases,
                    session,
                    ctx,
                    bridge,
                    &input,
                    &s,
                    call::Call::new(m, msg, id),
                )
                .await
            }
        },
        (None, None) => {
            let rej = Rejection::new(
                400,
                codes::INVALID_REQUEST,
                "invalid-request",
                "Invalid Request: neither a method nor an id",
            );
            refuse(session, ctx, rej, None).await
        }
    }
}

/// A client notification: `notifications/cancelled` ends the call it names (on this replica,
/// else on the replica holding it: [`answers::cancel_elsewhere`]); the others (`initialized`,
/// `roots/list_changed`) need nothing. 202 either way.
async fn notified(
    session: &mut Session,
    (bridge, input): (&Bridge, &Input),
    s: &LegacySession,
    method: &str,
    msg: &Value,
) -> Result<bool> {
    if method == "notifications/cancelled" {
        if let Some(r) = msg.pointer("/params/requestId") {
            let here = bridge.waiting.cancel(&s.nonce, Some(&r.to_string()));
            answers::cancel_elsewhere(bridge, input, here, msg);
        }
    }
    answers::accepted(session).await
}

/// A JSON-RPC result for `id`, as JSON.
async fn reply(session: &mut Session, id: &RawValue, result: &Value) -> Result<bool> {
    respond(session, 200, crate::mcp::result_body(id, result), &[]).await?;
    Ok(true)
}
