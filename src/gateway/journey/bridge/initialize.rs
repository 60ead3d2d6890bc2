//! `initialize` of a 2025-era client, answered by the gateway: the revision negotiated among
//! those it bridges, the capabilities, `serverInfo` and instructions of the fleet behind this
//! endpoint (its `server/discover`, asked through the pipeline as this client, so auth and a
//! federated endpoint's merged answer apply), and a new sealed session id carrying the client's
//! capabilities and info for every later request.

use pingora::prelude::*;
use pingora::proxy::Session;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::legs::send;
use super::session::LegacySession;
use super::{Bridge, Input};
use crate::gateway::journey::phases::Phases;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::steps::refuse;
use crate::gateway::stages::answer::respond;
use crate::mcp::legacy::{self, SESSION_ID};
use crate::mcp::methods::DISCOVER;
use crate::mcp::{codes, result_body, Rejection};

/// Answer `msg`, an `initialize` with `id`.
pub(super) async fn run(
    phases: &dyn Phases,
    session: &mut Session,
    ctx: &mut RequestCtx,
    bridge: &Bridge,
    input: &Input,
    msg: &Value,
    id: Option<Box<RawValue>>,
) -> Result<bool> {
    let Some(id) = id else {
        let rej = Rejection::new(
            400,
            codes::INVALID_REQUEST,
            "invalid-request",
            "initialize must be a request (with an id)",
        );
        return refuse(session, ctx, rej, None).await;
    };
    let params = msg.get("params");
    let requested = params
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    let version = legacy::negotiate(requested);
    let capabilities = params
        .and_then(|p| p.get("capabilities"))
        .filter(|c| c.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let info = params
        .and_then(|p| p.get("clientInfo"))
        .cloned()
        .unwrap_or(Value::Null);
    let via = (phases, bridge, input);
    let discover = match discover(via, session, ctx, (&capabilities, &info), &id).await? {
        Ok(d) => d,
        Err(answered) => return Ok(answered),
    };
    let ttl = ctx.gw.config.legacy.session_ttl.as_millis() as u64;
    let s = LegacySession::open(
        version,
        capabilities,
        info,
        input.caller.clone(),
        &input.path,
        ttl,
    );
    let Some(sid) = s.seal(&bridge.sealer) else {
        let rej = Rejection::new(400, codes::INVALID_PARAMS, "session-too-large", "initialize: the client's capabilities and clientInfo are too large to carry in a session id");
        return refuse(session, ctx, rej, Some(id)).await;
    };
    let result = legacy::initialize_result(version, &discover);
    ctx.gw
        .metrics
        .bridge
        .sessions
        .with_label_values(&[version])
        .inc();
    respond(
        session,
        200,
        result_body(&id, &result),
        &[(SESSION_ID, sid)],
    )
    .await?;
    Ok(true)
}

/// The fleet's `server/discover` result, asked through the pipeline as this client;
/// `Err(answered)`: the fleet refused (auth, a limit) and the client got that answer.
async fn discover(
    (phases, bridge, input): (&dyn Phases, &Bridge, &Input),
    session: &mut Session,
    ctx: &mut RequestCtx,
    (capabilities, info): (&Value, &Value),
    id: &RawValue,
) -> Result<std::result::Result<Value, bool>> {
    let body = legacy::to_modern(DISCOVER, None, 1, capabilities, info, None);
    let via = (phases, bridge, &*ctx, input);
    let ans = match send(via, session, (DISCOVER, None), body).await? {
        Ok(a) => a,
        Err(rej) => {
            return refuse(session, ctx, rej, Some(id.to_owned()))
                .await
                .map(Err)
        }
    };
    let response = ans
        .messages()
        .into_iter()
        .rfind(|m| m.get("result").is_some() || m.get("error").is_some());
    match response {
        Some(mut r) if r.get("result").is_some() => Ok(Ok(r["result"].take())),
        Some(mut r) => {
            // The fleet refused discovery (auth, a limit): the client gets that error.
            r["id"] = serde_json::from_str(id.get()).unwrap_or(Value::Null);
            let body = serde_json::to_vec(&r).expect("a JSON value serializes");
            respond(session, ans.status, body, &ans.pass).await?;
            Ok(Err(true))
        }
        None => {
            let msg = format!("initialize: the fleet's server/discover answered HTTP {} without a JSON-RPC response", ans.status);
            let status = if matches!(ans.status, 401 | 403) {
                ans.status
            } else {
                502
            };
            ctx.extra_headers.extend(ans.pass.iter().cloned());
            let code = codes::GATEWAY_UPSTREAM_FAILED;
            let rej = Rejection::new(status, code, "bridge-discover", msg);
            refuse(session, ctx, rej, Some(id.to_owned()))
                .await
                .map(Err)
        }
    }
}
