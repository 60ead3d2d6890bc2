//! The runner of the pipeline: carries one request through the one list of stages
//! ([`crate::gateway::stages::pipeline::STAGES`]) in its order, each stage where what it needs
//! is in hand. pingora's phases call three segments of it, in `request_filter`:
//!
//! 1. [`on_head`]: the stages that need the claims or the verified identity (admit, route,
//!    auth, limits), before the body is invited;
//! 2. [`body::on_body`]: the body is read as its plan says, then the stages that need it
//!    (the check, the body stages, federation and the cache), at the one point it is in hand:
//!    here, or for a body held chunk by chunk on pingora's pipe at its end
//!    ([`body::hold_chunk`], from `request_body_filter`);
//! 3. [`on_pool`]: the stages that need the final pool (its credential); the balancer runs
//!    where an instance is chosen ([`crate::gateway::journey::forward::choose`], on both legs).
//!
//! Every stage the request goes through is marked in [`RequestCtx::ran`], in list order, so
//! `explain` can be held to the same walk (the agreement test in `tests`).

pub(crate) mod body;

use pingora::proxy::Session;
use pingora::Result;

use crate::config::pins::PinPolicy;
use crate::gateway::concurrency::journey as concurrency;
use crate::gateway::journey::request::{Progress, RequestCtx};
use crate::gateway::journey::state::Gateway;
use crate::gateway::journey::steps::{
    invite_body, refuse, refuse_with_id, select_route, settle_doomed,
};
use crate::gateway::journey::{auth, credentials, pins};
use crate::gateway::rate_limits::journey as limit;
use crate::gateway::stages::pipeline::{Run, Step, STAGES};
use crate::gateway::stages::{admission, route};

pub(crate) use body::{hold_chunk, on_body};

/// The head stages, in list order, on what the headers claim; `Some(answered)`: the request is
/// over (refused, or a notification without MCP headers failed its check).
pub(crate) async fn on_head(
    session: &mut Session,
    ctx: &mut RequestCtx,
    gw: &Gateway,
) -> Result<Option<bool>> {
    for (i, stage) in STAGES.iter().enumerate() {
        if !stage.needs.on_head() {
            continue;
        }
        let answered = match stage.run {
            Run::Step(Step::Admit) => admit(session, ctx, gw).await?,
            Run::Step(Step::Route) => on_route(session, ctx, gw).await?,
            Run::Step(Step::Auth) if gw.auth.is_some() => on_auth(session, ctx, gw).await?,
            Run::Step(Step::Limits) => on_limits(session, ctx, gw).await?,
            Run::Step(Step::Pins) if pins::policy(gw, ctx.pool) != PinPolicy::Off => {
                match pins::on_head(gw, ctx) {
                    Ok(()) => None,
                    Err(rej) => Some(refuse_with_id(session, ctx, rej).await?),
                }
            }
            _ => continue,
        };
        ctx.ran.mark(i);
        if answered.is_some() {
            return Ok(answered);
        }
    }
    Ok(None)
}

/// Admit: what the head alone decides. A head that dooms the request reads the body for its id
/// (a notification without MCP headers passes, checked).
async fn admit(session: &mut Session, ctx: &mut RequestCtx, gw: &Gateway) -> Result<Option<bool>> {
    let admitted = match admission::admit(session.req_header(), &gw.config, &gw.key_headers) {
        Ok(a) => a,
        Err(rej) => return refuse(session, ctx, rej, None).await.map(Some),
    };
    ctx.method = admitted.method;
    ctx.name = admitted.name;
    ctx.expects_continue = admitted.expects_continue;
    ctx.content_length = admitted.content_length;
    // (A head-less body the 2025-era bridge read and settled is not read again.)
    if admitted.doomed && !matches!(ctx.progress, Progress::Checked(_)) {
        invite_body(session, ctx).await?;
        return settle_doomed(session, ctx).await;
    }
    Ok(None)
}

/// Route on the claims: by the route table, or on a federated endpoint by what the catalog
/// says each pool serves (`federation::journey::route`).
async fn on_route(
    session: &mut Session,
    ctx: &mut RequestCtx,
    gw: &Gateway,
) -> Result<Option<bool>> {
    let selected = select_route(gw, ctx, session.req_header().uri.path());
    let Some((route_ref, route)) = selected.and_then(|r| Some((r, gw.table.get(r)?))) else {
        let rej = route::no_route(ctx.method.as_deref(), ctx.name.as_deref());
        return refuse_with_id(session, ctx, rej).await.map(Some);
    };
    ctx.pool = route.pool;
    ctx.route = Some(route_ref);
    // A passed-through session stays in its pool whatever route its follow-ups take.
    if let Some(p) = &ctx.pass {
        ctx.pool = p.pool;
    }
    Ok(None)
}

/// Auth: who is calling, and may they call what the headers claim.
async fn on_auth(
    session: &mut Session,
    ctx: &mut RequestCtx,
    gw: &Gateway,
) -> Result<Option<bool>> {
    let route_ref = ctx.route.expect("route runs before auth");
    if let Err(rej) = auth::admit(session, ctx, gw, route_ref).await {
        return refuse_with_id(session, ctx, rej).await.map(Some);
    }
    ctx.list_filter = auth::list_filter(gw, ctx.method.as_deref());
    Ok(None)
}

/// Limit, on the same claims (a spoofed claim is caught by the check that follows), then take a
/// concurrency slot of every limit covering the request, or shed it (503).
async fn on_limits(
    session: &mut Session,
    ctx: &mut RequestCtx,
    gw: &Gateway,
) -> Result<Option<bool>> {
    let Some(route) = ctx.route.and_then(|r| gw.table.get(r)) else {
        return Ok(None);
    };
    let over = match limit::over_limit(gw, session, ctx, &route.name).await {
        Some(refused) => Some(refused),
        None => concurrency::take_slots(gw, ctx, &route.name).await,
    };
    if let Some((rej, retry_after)) = over {
        ctx.extra_headers.push(("retry-after", retry_after));
        return refuse_with_id(session, ctx, rej).await.map(Some);
    }
    Ok(None)
}

/// The stages that need the final pool and run before an instance is chosen: the pool's
/// concurrency limit (a slot, or 503 + -31018), the pool's own credential (a secret, or a token from its token endpoint); the caller's token never goes to
/// such a pool. (`balance` is marked where it runs, in `forward::choose`.)
pub(crate) async fn on_pool(
    session: &mut Session,
    ctx: &mut RequestCtx,
    gw: &Gateway,
) -> Result<Option<bool>> {
    for (i, stage) in STAGES.iter().enumerate() {
        match stage.run {
            Run::Step(Step::Capacity) if concurrency::pool_limit(gw, ctx).is_some() => {
                ctx.ran.mark(i);
                if let Some((rej, retry_after)) = concurrency::take_pool_slot(gw, ctx).await {
                    ctx.extra_headers.push(("retry-after", retry_after));
                    return refuse_with_id(session, ctx, rej).await.map(Some);
                }
            }
            Run::Step(Step::Credentials) if gw.credentials.pool(ctx.pool).is_some() => {
                ctx.ran.mark(i);
                if let Err(rej) = credentials::obtain(session, ctx, gw).await {
                    return refuse_with_id(session, ctx, rej).await.map(Some);
                }
            }
            _ => continue,
        }
    }
    Ok(None)
}

/// Tests only: the stages each finished request went through, by its `x-test-trace` header,
/// for the agreement test to compare with `explain` (recorded by the proxy's `logging`).
#[cfg(test)]
pub(crate) mod trace {
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    /// A traced request's id, its stages and the proxy's phases it went through.
    type Seen = Vec<(String, Vec<&'static str>, Vec<&'static str>)>;
    static SEEN: (Mutex<Seen>, Condvar) = (Mutex::new(Vec::new()), Condvar::new());

    pub(crate) fn record(
        headers: &http::HeaderMap,
        ran: crate::gateway::stages::pipeline::Ran,
        phases: &[&'static str],
    ) {
        let Some(id) = headers.get("x-test-trace").and_then(|v| v.to_str().ok()) else {
            return;
        };
        let seen = (id.to_string(), ran.names(), phases.to_vec());
        SEEN.0.lock().unwrap().push(seen);
        SEEN.1.notify_all();
    }

    /// The stages of the request traced `id`, once it finished (waits up to 10 s).
    pub(crate) fn stages_of(id: &str) -> Vec<&'static str> {
        finished(id).1
    }

    /// The proxy's phases of the request traced `id`, once it finished, each run of one phase
    /// named once (a body's chunks each pass `response_body_filter`).
    pub(crate) fn phases_of(id: &str) -> Vec<&'static str> {
        let mut phases = finished(id).2;
        phases.dedup();
        phases
    }

    fn finished(id: &str) -> (String, Vec<&'static str>, Vec<&'static str>) {
        let seen = SEEN.0.lock().unwrap();
        let (seen, _) = SEEN
            .1
            .wait_timeout_while(seen, Duration::from_secs(10), |s| {
                !s.iter().any(|(k, _, _)| k == id)
            })
            .unwrap();
        let found = seen.iter().find(|(k, _, _)| k == id);
        found
            .unwrap_or_else(|| panic!("request {id} never finished"))
            .clone()
    }
}

#[cfg(test)]
mod phase_tests;
#[cfg(test)]
mod tests;
