//! The rate-limit step of the journey: the limits of [`super::stages`] asked about one
//! request, on what its headers claim, before its body is read.

use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::state::Gateway;
use crate::gateway::rate_limits::stages::{refusal, LimitInput};
use crate::mcp::Rejection;

/// The rate-limit step of `request_filter`: the refusal (429) and its `Retry-After` value when
/// the request is over a limit, on what its headers claim.
pub(crate) async fn over_limit(
    gw: &Gateway,
    session: &pingora::proxy::Session,
    ctx: &RequestCtx,
    route: &str,
) -> Option<(Rejection, String)> {
    if gw.limits.is_empty() {
        return None;
    }
    let input = LimitInput {
        route,
        method: ctx.method.as_deref(),
        name: ctx.name.as_deref(),
        headers: &session.req_header().headers,
        client_ip: crate::gateway::journey::request::client_ip(gw, session),
        identity: ctx.identity.as_deref(),
    };
    let (limit, wait) = gw.limited(&input).await?;
    Some(refusal(&limit.name, wait))
}
