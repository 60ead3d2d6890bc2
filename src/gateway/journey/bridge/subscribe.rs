//! `resources/subscribe` and `resources/unsubscribe` of a 2025-era session: a 2026 fleet has no
//! such requests, it takes the URIs in a listen request's `resourceSubscriptions`. So the
//! bridge keeps them for the session ([`crate::gateway::stages::bridge::subscribed`]), the
//! session's standalone stream opens its listen again with them, and each resource update the
//! fleet sends reaches the client as `notifications/resources/updated` on that stream.
//!
//! The answer waits until the change is live: until the stream here asks the fleet for it, and
//! every other replica of `legacy.replicas` (one of them may hold the stream) was told and
//! answered; bounded by the connect timeout and `timeouts.upstream_read`. So a client that
//! subscribes and then changes the resource hears of the change.

use pingora::prelude::*;
use pingora::proxy::Session;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::session::LegacySession;
use super::{Bridge, Input};
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::steps::refuse;
use crate::gateway::stages::bridge::subscribed::Subscribed;
use crate::mcp::{codes, Rejection};

/// Subscribe session `s` to `params.uri` of `msg` (`on`) or unsubscribe it; `{}` once live.
pub(super) async fn run(
    session: &mut Session,
    ctx: &mut RequestCtx,
    (bridge, input): (&Bridge, &Input),
    s: &LegacySession,
    (msg, id, on): (&Value, Box<RawValue>, bool),
) -> Result<bool> {
    let counted = &ctx.gw.metrics.bridge.subscriptions;
    let Some(uri) = msg.pointer("/params/uri").and_then(Value::as_str) else {
        counted.with_label_values(&["refused"]).inc();
        let msg = "Invalid params: params.uri (a string: the resource's URI) is required";
        let rej = Rejection::new(400, codes::INVALID_PARAMS, "invalid-params", msg);
        return refuse(session, ctx, rej, Some(id)).await;
    };
    let changed = match bridge.subscribed.change(s, uri, on) {
        Ok(c) => c,
        Err(rej) => {
            counted.with_label_values(&["refused"]).inc();
            return refuse(session, ctx, rej, Some(id)).await;
        }
    };
    counted
        .with_label_values(&[if on { "subscribe" } else { "unsubscribe" }])
        .inc();
    let t = &ctx.gw.config.timeouts;
    let here = Subscribed::live(changed, t.connect + t.upstream_read);
    match super::replica::tell_others(bridge, input, msg) {
        Some(elsewhere) => drop(tokio::join!(here, elsewhere)),
        None => here.await,
    }
    let body = crate::mcp::result_body(&id, &json!({}));
    crate::gateway::stages::answer::respond(session, 200, body, &[]).await?;
    Ok(true)
}
