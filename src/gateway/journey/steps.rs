//! The steps of `request_filter` and `request_body_filter` that talk to the client session:
//! refusing (with or without reading some body for the id), reading a body before any upstream
//! is chosen (for the pipeline's body segment, `journey::pipeline::body`), inviting the body
//! with `100 Continue`, and the client connection's keep-alive policy. The decisions they act on are
//! made by the stage modules (admission, inspect, answer, ...); these functions only carry them
//! out on a pingora [`Session`].

use pingora::prelude::*;
use pingora::proxy::Session;
use serde_json::value::RawValue;

use crate::mcp::Rejection;

use crate::gateway::journey::request::{Progress, RequestCtx};
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::answer::{self, refused_error, respond};
use crate::gateway::stages::inspect::{self, Read};
use crate::gateway::stages::pipeline;

/// Refuse a request before any upstream is involved.
pub(crate) async fn refuse(
    session: &mut Session,
    ctx: &mut RequestCtx,
    rej: Rejection,
    id: Option<Box<RawValue>>,
) -> Result<bool> {
    retry_hint(ctx, &rej);
    if !ctx.progress.body_read() {
        // The rest of the body is not worth draining: close the connection after answering.
        ctx.progress = Progress::Abandoned;
        session.set_keepalive(None);
    }
    respond(
        session,
        rej.status,
        rej.body(id.as_deref()),
        &ctx.extra_headers,
    )
    .await?;
    ctx.answer = Some((rej, id));
    Ok(true)
}

/// How much body a refusal decided on the headers reads to find the request id.
const ID_PREFIX_MAX: usize = 4096;

/// Refuse a request decided on its headers, echoing its id: from the envelope when the body was
/// already read, otherwise from a small body (at most [`ID_PREFIX_MAX`] bytes are read; a larger
/// body, or one never invited with `100 Continue`, is answered without its id and the
/// connection closed).
pub(crate) async fn refuse_with_id(
    session: &mut Session,
    ctx: &mut RequestCtx,
    rej: Rejection,
) -> Result<bool> {
    let id = match &mut ctx.progress {
        Progress::Checked(env) => env.id.take(),
        _ if ctx.expects_continue => None,
        _ => match inspect::read_whole(session, ID_PREFIX_MAX).await {
            Ok(body) => {
                ctx.body_len = body.len();
                ctx.progress = Progress::Drained;
                inspect::id_of(&body)
            }
            Err(_) => None,
        },
    };
    refuse(session, ctx, rej, id).await
}

/// The headers alone doom the request: read the body to echo its id and answer, unless it is a
/// notification that passes without MCP headers (`None`: carry on routing it, already checked).
/// The retry buffer keeps such a small body forwardable.
pub(crate) async fn settle_doomed(
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<Option<bool>> {
    let gw = ctx.gw.clone();
    session.enable_retry_buffering();
    let body = match inspect::read_whole(session, gw.config.limits.max_body_bytes).await {
        Ok(b) => b,
        Err(rej) => return refuse(session, ctx, rej, None).await.map(Some),
    };
    settle_read(session, ctx, body).await
}

/// [`settle_doomed`] for a body already read (with the retry buffer on): the 2025-era bridge
/// reads a head-less request's body to tell `initialize` from the rest, which settle here.
pub(crate) async fn settle_read(
    session: &mut Session,
    ctx: &mut RequestCtx,
    body: bytes::Bytes,
) -> Result<Option<bool>> {
    let gw = ctx.gw.clone();
    ctx.body_len = body.len();
    ctx.progress = Progress::Drained;
    ctx.in_hand = body.clone();
    let headers = &session.req_header().headers;
    ctx.check = true;
    ctx.ran.mark(pipeline::index_of(pipeline::Step::Check));
    match inspect::inspect_and_validate(&gw.metrics, headers, &body) {
        Err((rej, id)) => refuse(session, ctx, rej, id).await.map(Some),
        Ok(env) if session.as_ref().retry_buffer_truncated() => {
            let rej = Rejection::header_mismatch(
                "mcp-method-missing",
                "A notification larger than 64 KiB must carry the Mcp-Method header",
            );
            refuse(session, ctx, rej, env.id).await.map(Some)
        }
        Ok(env) => {
            ctx.progress = Progress::Checked(env);
            Ok(None)
        }
    }
}

/// Client connections: an idle keep-alive connection closes after `timeouts.client_idle`
/// (pingora keeps HTTP/1.1 connections forever by default), and pipelined plain HTTP/1.1
/// requests are served in order (without this, pingora answers the first with
/// `Connection: keep-alive`, then closes and drops the second).
pub(crate) fn keep_alive_policy(session: &mut Session, gw: &Gateway) {
    if session.get_keepalive() == Some(0) {
        let idle = gw.config.timeouts.client_idle.as_secs().max(1);
        session.set_keepalive(Some(idle));
    }
    // Plain HTTP/1.1 only: TLS clients that want concurrency use h2, and over TLS pingora's
    // pipelining path is less exercised. Over TLS, pipelined bytes close the connection after
    // the first answer (pingora's default).
    let tls = session.digest().is_some_and(|d| d.ssl_digest.is_some());
    if let pingora::protocols::http::ServerSession::H1(h1) = session.as_downstream_mut() {
        h1.set_pipelining_enabled(!tls);
    }
}

/// Headers an answer's status calls for: `Allow` on 405, `Retry-After` on 503.
pub(crate) fn retry_hint(ctx: &mut RequestCtx, rej: &Rejection) {
    match rej.status {
        405 => ctx.extra_headers.push(("allow", "POST".to_string())),
        503 if !ctx.extra_headers.iter().any(|(k, _)| *k == "retry-after") => {
            ctx.extra_headers.push(("retry-after", "1".to_string()))
        }
        _ => {}
    }
}

/// Send `100 Continue` if the client waits for it (once, just before the body is read).
pub(crate) async fn invite_body(session: &mut Session, ctx: &mut RequestCtx) -> Result<()> {
    if std::mem::take(&mut ctx.expects_continue) {
        session.write_continue_response().await?;
    }
    Ok(())
}

/// Read a (bounded) body before any upstream is chosen, in size, time and the gateway's body
/// budget, into pingora's retry buffer too when `replay` (pingora's pipe sends what it holds);
/// `Err(answered)` when it was refused instead.
pub(crate) async fn read_in_hand(
    session: &mut Session,
    ctx: &mut RequestCtx,
    stop_after: Option<usize>,
    replay: bool,
) -> Result<std::result::Result<Read, bool>> {
    let gw = ctx.gw.clone();
    let (limit, deadline) = (
        gw.config.limits.max_body_bytes,
        gw.config.timeouts.request_body,
    );
    if replay {
        session.enable_retry_buffering();
    }
    let budget = (&gw.held, gw.config.limits.max_held_bytes);
    let read = inspect::read_whole_held(session, limit, &mut ctx.held, budget, stop_after);
    let rej = match tokio::time::timeout(deadline, read).await {
        Ok(Ok(read)) => {
            if let Read::Whole(body) = &read {
                ctx.body_len = body.len();
            }
            return Ok(Ok(read));
        }
        Ok(Err(rej)) => rej,
        Err(_) => answer::body_timeout(deadline),
    };
    refuse(session, ctx, rej, None).await.map(Err)
}

/// Record the gateway's refusal of a request whose upstream request is under way, and the error
/// that cuts the upstream request off before its body is complete.
pub(crate) fn cut_off(
    ctx: &mut RequestCtx,
    rej: Rejection,
    id: Option<Box<RawValue>>,
) -> Box<Error> {
    retry_hint(ctx, &rej);
    ctx.progress = match id {
        // The id was read, so was the whole body.
        Some(_) => Progress::Drained,
        None => Progress::Abandoned,
    };
    ctx.answer = Some((rej, id));
    refused_error()
}

/// The route a request takes on its claims (`None`: no route, no default).
pub(crate) fn select_route(
    gw: &Gateway,
    ctx: &mut RequestCtx,
    path: &str,
) -> Option<crate::gateway::stages::route::RouteRef> {
    let (method, name) = (ctx.method.as_deref(), ctx.name.as_deref());
    let Some((fed, e)) = gw
        .federation
        .as_ref()
        .and_then(|f| Some((f, f.endpoint_of(path)?)))
    else {
        return gw.table.select_ref(method, name);
    };
    let decision = crate::gateway::federation::journey::route(gw, fed, e, method, name);
    Some(crate::gateway::federation::journey::enter(ctx, e, decision))
}
