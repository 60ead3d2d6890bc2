//! The retry of a call a 2025-era server paused: its sealed `requestState` opened and checked
//! (the caller, the request, the expiry: refused with -32602 before any server), sent on to the
//! replica holding the call when it is another, else the server's questions answered with the
//! client's `inputResponses` and the call read on ([`super::back::drive`]); a question left
//! unanswered is asked again.

use pingora::prelude::*;
use pingora::proxy::Session;
use serde_json::{json, Value};

use super::back::{drive, pause, Req};
use crate::gateway::journey::phases::Phases;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::steps::refuse;
use crate::gateway::stages::bridge::servers::PausedState;
use crate::gateway::stages::bridge::Bridge;
use crate::mcp::{codes, Rejection};

/// A retry carrying a state: open it, and resume the call it names (here or on its replica).
pub(super) async fn resume(
    phases: &impl Phases,
    session: &mut Session,
    ctx: &mut RequestCtx,
    bridge: &Bridge,
    req: &Req,
    (state, version): (String, &'static str),
) -> Result<bool> {
    let invalid =
        |msg: String| Rejection::new(200, codes::INVALID_PARAMS, "request-state-refused", msg);
    if !PausedState::is_ours(&state) {
        let rej = invalid("Invalid requestState: this gateway did not issue it; send the request again without requestState and inputResponses".into());
        return refuse(session, ctx, rej, None).await;
    }
    let st = match PausedState::verify(&bridge.sealer, &state, &req.caller, &req.digest()) {
        Ok(s) => s,
        Err(r) => return refuse(session, ctx, invalid(r.message()), None).await,
    };
    if st.replica != bridge.advertise {
        return super::back_hop::send_on(session, ctx, &st.replica).await;
    }
    let Some(mut call) = bridge.paused.take(st.call) else {
        let rej = invalid("Invalid requestState: the paused call is no longer held (it was resumed already, or timed out); send the request again without requestState and inputResponses".into());
        return refuse(session, ctx, rej, None).await;
    };
    let m = &ctx.gw.metrics.bridge;
    m.paused_outcomes.with_label_values(&["resumed"]).inc();
    m.paused.set(bridge.paused.len() as i64);
    let carry = super::back_target::target_headers(phases, session, ctx).await?;
    let to = (call.key.addr, call.path.clone());
    let up = super::back_target::up_to(ctx, to, version, carry);
    let answers = req
        .params
        .get("inputResponses")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut missing = Vec::new();
    for (key, server_id, q) in std::mem::take(&mut call.pending) {
        match answers.get(&key) {
            Some(a) => {
                let msg = json!({"jsonrpc": "2.0", "id": server_id, "result": a});
                up.tell(&call.session_id, &msg)
                    .await
                    .map_err(|e| Error::explain(ErrorType::WriteError, e).into_up())?;
            }
            None => missing.push((key, server_id, q)),
        }
    }
    if !missing.is_empty() {
        call.pending = missing; // asked again, as the spec asks of a server missing answers
        return pause(session, ctx, bridge, req, up, call, &[]).await;
    }
    drive(session, ctx, bridge, req, up, call).await
}
