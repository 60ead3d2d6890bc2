//! Failure stage: what happens when an instance cannot be reached or a request fails on the
//! way (pingora's `fail_to_connect` and `fail_to_proxy`). A connect failure is counted against
//! the instance, noted in its health and may be retried on another instance; any other failure
//! gets the gateway's own answer ([`crate::gateway::stages::answer`]) with the request id when it can be read,
//! blamed on the side that caused it.

use pingora::proxy::{FailToProxy, Session};
use pingora::{Error, ErrorType};

use crate::gateway::cache::journey as cache;
use crate::gateway::journey::request::Progress;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::stages::answer::{self, respond, Refusal};
use crate::gateway::stages::inspect;
use crate::gateway::transport::upstream_tls;

/// A request that never reached its instance: count it, note it in the instance's health, and
/// let pingora try another instance while `retries.connect_failure` allows.
pub(crate) fn connect_failed(ctx: &mut RequestCtx, mut e: Box<Error>) -> Box<Error> {
    let gw = ctx.gw.clone();
    let pool = &gw.pools[ctx.pool];
    if let Some(idx) = ctx.instance {
        if let Some(why) = upstream_tls::handshake_failure(&e) {
            let inst = &pool.instances[idx].name;
            tracing::warn!("pool {}: instance {inst}: {why}", pool.name);
        }
        gw.metrics
            .upstream_errors
            .with_label_values(&[&pool.name, &pool.instances[idx].name, "connect"])
            .inc();
        gw.note_health(ctx.pool, idx, pool.health.on_connect_failure(idx));
    }
    let tried = ctx.tried.count() as usize;
    // A passed-through session lives on its instance: never another one.
    let pinned = ctx.pass.as_ref().is_some_and(|p| p.instance.is_some());
    if !pinned && tried <= gw.config.retries.connect_failure && tried < pool.instances.len() {
        e.set_retry(true);
    }
    e
}

/// Answer a refusal found mid-body, or an upstream failure, with a JSON-RPC error body (or, when
/// the response head is already out, cut the response short).
pub(crate) async fn answer(session: &mut Session, e: &Error, ctx: &mut RequestCtx) -> FailToProxy {
    // The edge cache: a failed refetch may be answered with a stale entry (stale_if_error).
    if cache::serve_stale(session, ctx, e).await {
        return FailToProxy {
            error_code: 200,
            can_reuse_downstream: false,
        };
    }
    let downstream = answer::is_downstream(e);
    let drained_id = drain_for_id(session, ctx, downstream).await;
    let (rej, id) = match ctx.answer.take() {
        Some(refusal) => refusal,
        None => upstream_refusal(ctx, e, downstream, drained_id),
    };
    if downstream
        && matches!(
            e.etype(),
            ErrorType::ReadError | ErrorType::WriteError | ErrorType::ConnectionClosed
        )
    {
        // The client is gone; nothing can be written.
        ctx.answer = Some((rej, id));
        return FailToProxy {
            error_code: 0,
            can_reuse_downstream: false,
        };
    }
    if session.response_written().is_some() {
        // The response head is out (the failure came mid-body): no answer can follow it, and
        // the client must see the response cut short (HTTP/1.1: the connection closes before
        // the last chunk; h2: the stream is reset), not an error body appended to it and ended
        // as if whole.
        session.as_downstream_mut().shutdown().await;
        ctx.answer = Some((rej, id));
        return FailToProxy {
            error_code: 0,
            can_reuse_downstream: false,
        };
    }
    // pingora does not reuse a client connection after an error once an upstream was
    // chosen; say so in the answer (`Connection: close`) so the client does not send its next
    // request into a closing connection.
    session.set_keepalive(None);
    let status = rej.status;
    if let Err(err) = respond(session, status, rej.body(id.as_deref()), &ctx.extra_headers).await {
        tracing::debug!("could not send the error response: {err}");
    }
    ctx.answer = Some((rej, id));
    FailToProxy {
        error_code: status,
        can_reuse_downstream: false,
    }
}

/// The upstream failed before the body was read (e.g. it could not be reached): read it now,
/// bounded, to echo the request id and keep the client connection usable.
async fn drain_for_id(
    session: &mut Session,
    ctx: &mut RequestCtx,
    downstream: bool,
) -> Option<Box<serde_json::value::RawValue>> {
    if ctx.answer.is_some() || ctx.progress.body_read() || downstream {
        return None;
    }
    let limit = ctx.gw.config.limits.max_body_bytes;
    let body = inspect::read_whole(session, limit).await.ok()?;
    ctx.body_len = body.len();
    ctx.progress = Progress::Drained;
    inspect::id_of(&body)
}

/// The answer for an upstream failure (blamed on the upstream, its TLS handshake, or the
/// client when `downstream`), counted on the instance it came from.
fn upstream_refusal(
    ctx: &RequestCtx,
    e: &Error,
    downstream: bool,
    drained_id: Option<Box<serde_json::value::RawValue>>,
) -> Refusal {
    let id = drained_id
        .or_else(|| ctx.progress.envelope().and_then(|e| e.id.clone()))
        .or_else(|| unchecked_id(ctx));
    let rej = match upstream_tls::handshake_failure(e) {
        Some(why) => answer::upstream_tls_failure(&ctx.destination(), &why),
        None => answer::upstream_failure(e.etype(), downstream, &ctx.destination()),
    };
    let rej = match pinned_gone(ctx, e) {
        Some(gone) => gone,
        None => rej,
    };
    if let (Some(idx), false) = (ctx.instance, downstream) {
        let pool = &ctx.gw.pools[ctx.pool];
        let inst = &pool.instances[idx].name;
        ctx.gw
            .metrics
            .upstream_errors
            .with_label_values(&[&pool.name, inst, rej.reason])
            .inc();
    }
    (rej, id)
}

/// A passed-through session whose instance could not be reached: `404`, so its 2025-era client
/// opens a new session (the instance's failure is still counted on it).
fn pinned_gone(ctx: &RequestCtx, e: &Error) -> Option<crate::mcp::Rejection> {
    use crate::gateway::stages::bridge::pass;
    let s = ctx.pass.as_ref()?.session.as_ref()?;
    if !pass::unreachable(e.etype().clone()) {
        return None;
    }
    let labels = [s.pool.as_str(), "gone"];
    ctx.gw
        .metrics
        .bridge
        .passed
        .with_label_values(&labels)
        .inc();
    Some(pass::gone(&s.pool, &s.instance, "it does not answer"))
}

/// The id of a sampled-out body read whole (it was not parsed for the check).
fn unchecked_id(ctx: &RequestCtx) -> Option<Box<serde_json::value::RawValue>> {
    if !matches!(ctx.progress, Progress::Unchecked) {
        return None;
    }
    inspect::id_of(&ctx.in_hand)
}
