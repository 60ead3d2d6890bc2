//! The concurrency step of the journey: the in-flight limits of `stages::concurrency` applied
//! to one request, its slots kept in the request's context until it is finished.

use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::concurrency::{admit, refusal, ConcurrencyInput};
use crate::mcp::Rejection;

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
