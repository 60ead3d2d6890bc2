//! The concurrency steps of the journey: the in-flight limits of [`super::stages`] applied
//! to one request on its head, and its pool's limit once the pool is final (a leg of a call
//! already started before new calls), its slots kept in the request's context until it is
//! finished.

use std::sync::Arc;

use crate::gateway::concurrency::stages::pool::{self, Leg, PoolLimit};
use crate::gateway::concurrency::stages::{admit, refusal, ConcurrencyInput};
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::state::Gateway;
use crate::mcp::mrtr::{INPUT_RESPONSES, REQUEST_STATE};
use crate::mcp::{Envelope, Rejection};

/// The concurrency step of `request_filter`: take a slot of every limit covering the request
/// (held in the context until it is finished), or the refusal (503) and its `Retry-After`.
pub(crate) async fn take_slots(
    gw: &Gateway,
    ctx: &mut RequestCtx,
    route: &str,
) -> Option<(Rejection, String)> {
    if gw.concurrency.is_empty() {
        return None;
    }
    let input = ConcurrencyInput {
        route,
        method: ctx.method.as_deref(),
        name: ctx.name.as_deref(),
    };
    match admit(&gw.concurrency, &gw.metrics.concurrency, &input).await {
        Ok(slots) => {
            ctx.slots = Some(slots);
            None
        }
        Err(shed) => Some(refusal(&shed)),
    }
}

/// The limit the request takes in its pool (`pools.<name>.concurrency`): its tool's own, or
/// the pool's; `None` when the pool has none.
pub(crate) fn pool_limit<'g>(gw: &'g Gateway, ctx: &RequestCtx) -> Option<&'g Arc<PoolLimit>> {
    gw.pool_limits
        .get(ctx.pool)?
        .for_request(ctx.method.as_deref(), ctx.name.as_deref())
}

/// Whether a request continues a call already started (a retry leg carrying `inputResponses`
/// or `requestState`, or a `tasks/*` request) or starts one. The parsed body says it when it was
/// parsed; a body not parsed (a sampled-out route) is searched for the two member names, which
/// at worst gives a new call that mentions them a started leg's priority.
pub(crate) fn leg_of(method: Option<&str>, env: Option<&Envelope>, body: &[u8]) -> Leg {
    let started = method.is_some_and(|m| m.starts_with("tasks/"))
        || match env {
            Some(e) => e.is_retry_leg(),
            None => [INPUT_RESPONSES, REQUEST_STATE]
                .iter()
                .any(|k| memchr::memmem::find(body, format!("\"{k}\"").as_bytes()).is_some()),
        };
    if started {
        Leg::Started
    } else {
        Leg::First
    }
}

/// The pool step: a slot of the pool's limit, kept with the request's other slots until it is
/// finished, or the refusal (503, -31018) and its `Retry-After`.
pub(crate) async fn take_pool_slot(
    gw: &Gateway,
    ctx: &mut RequestCtx,
) -> Option<(Rejection, String)> {
    let limit = pool_limit(gw, ctx)?.clone();
    let leg = leg_of(ctx.method.as_deref(), ctx.progress.envelope(), &ctx.in_hand);
    match limit.admit(leg).await {
        Ok(permit) => {
            ctx.slots.get_or_insert_with(Default::default).1 = Some(permit);
            None
        }
        Err(shed) => Some(pool::refusal(&shed)),
    }
}
