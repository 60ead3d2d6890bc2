//! Explain a 2025-era request (`initialize`, or a request on a session): what the protocol
//! bridge does with it, and for a request it carries into the pipeline, the 2026 request it
//! becomes, walked through the stages like any other. The session id is verified as the bridge
//! verifies it (sealed, this caller's, unexpired, not ended); nothing is sent, no session is
//! minted.

use serde_json::{json, Value};
use std::sync::Arc;

use super::Question;
use crate::gateway::journey::bridge::{self as bridge_steps, Input};
use crate::gateway::journey::state::Gateway;
use crate::mcp::legacy::{self, Era};
use crate::mcp::{header, methods, Rejection};

/// `Some`: the bridge's explanation of a 2025-era request on a bridged endpoint; `None`: a
/// 2026 request (or one the stages refuse as a 2026-only server: the walk says so).
pub(super) async fn explain(
    gw: &Arc<Gateway>,
    q: &Question,
    parts: &http::request::Parts,
) -> Option<Value> {
    let path = parts.uri.path();
    let era = legacy::era_of(&parts.method, &parts.headers);
    let bridged = bridge_steps::addressed(&gw.config, path) && gw.config.legacy.bridges(path);
    if era == Era::Modern || !bridged {
        return None;
    }
    let msg: Value = serde_json::from_str(&q.body).ok()?;
    let method = msg.get("method").and_then(Value::as_str);
    if era == Era::Unsure && method != Some(methods::INITIALIZE) {
        return None;
    }
    let version = parts.headers.get(header::PROTOCOL_VERSION);
    let version = version.and_then(|v| v.to_str().ok()).unwrap_or("2025 era");
    let said = |verdict: &str, detail: Value| json!({"era": version, "verdict": verdict, "bridge": detail, "steps": [], "stages": []});
    if let Some(passed) = passed(gw, q, parts, &msg).await {
        return Some(said("passed", passed));
    }
    if method == Some(methods::INITIALIZE) {
        let detail = json!({"answers": "initialize, from the fleet's server/discover, with a sealed session id (nothing is stored)"});
        return Some(said("answered", detail));
    }
    let session = match verify(gw, q, parts).await {
        Ok(s) => s,
        Err(rej) => {
            return Some(refused(
                said("refused", json!({"session": "refused"})),
                &rej,
            ))
        }
    };
    let Some(method) = method.filter(|_| msg.get("id").is_some_and(|i| !i.is_null())) else {
        let detail = json!({"session": "valid", "answers": "a notification or a response to the bridge's question: 202, or handed to the call waiting for it"});
        return Some(said("answered", detail));
    };
    if legacy::subscribes(method).is_some() {
        let detail = json!({"session": "valid", "answers": method,
            "keeps": "the URI for the session's standalone stream, whose listen request asks the fleet for it (resourceSubscriptions); the other replicas of legacy.replicas are told"});
        return Some(said("answered", detail));
    }
    if legacy::answered_at_edge(method).is_some() {
        return Some(said(
            "answered",
            json!({"session": "valid", "answers": method}),
        ));
    }
    let params = msg.get("params");
    let name = legacy::name_of(method, params);
    let level = gw.bridge.levels.get(&session);
    let (caps, info) = (&session.capabilities, &session.client_info);
    let body = legacy::to_modern(method, params, 1, caps, info, level.as_deref());
    let modern = modern_question(q, parts, method, name.as_deref(), body);
    let mut walk = Box::pin(super::explain(gw, &modern)).await;
    walk["era"] = json!(version);
    walk["bridge"] = json!({"session": "valid", "becomes": {"method": method, "name": name},
        "input_required": "asked of the client on the call's own stream, then retried with its answers"});
    Some(walk)
}

/// What pass-through does with the message, on an endpoint that passes 2025-era clients to a
/// pool of both eras (`None`: the bridge's).
async fn passed(
    gw: &Gateway,
    q: &Question,
    parts: &http::request::Parts,
    msg: &Value,
) -> Option<Value> {
    use crate::gateway::journey::bridge::pass;
    use crate::gateway::stages::bridge::pass::PassSession;
    let (path, ip) = (parts.uri.path(), q.client_ip);
    let once = match bridge_steps::once(&parts.headers) {
        Ok(once) => once,
        Err(rej) => return Some(json!({"refused": rej.message})),
    };
    let input = match Input::read(&parts.headers, once, path, ip, gw.auth.as_ref()).await {
        Ok(i) => i,
        Err(refusal) => return Some(json!({"refused": refusal.rejection.message})),
    };
    if !pass::takes(gw, &input) {
        return None;
    }
    let method = msg.get("method").and_then(Value::as_str);
    let name = method.and_then(|m| legacy::name_of(m, msg.get("params")));
    let session = match input.session_id.as_deref() {
        None => {
            json!("none yet: the balancer picks the instance, whose session id is sealed with it")
        }
        Some(id) => match PassSession::verify(&gw.bridge.sealer, id, &input.caller, path) {
            Ok(s) => json!({"pool": s.pool, "instance": s.instance}),
            Err(r) => json!({"refused": r.message()}),
        },
    };
    let pool = pass::pool_of(gw, path).map(|p| gw.pools[p].name.clone());
    Some(json!({"passes_to": pool, "session": session,
        "claims": {"method": method, "name": name, "from": "the body (the request's Mcp-* headers are removed, never read)"},
        "stages": if method.is_some() { "routed, authenticated, limited and policed on the claims, as any request" } else { "none: an answer, the standalone stream or DELETE goes straight to the session's instance" }}))
}

/// The session of the question, verified as the bridge verifies it (with auth on, bound to who
/// the token stands for).
async fn verify(
    gw: &Gateway,
    q: &Question,
    parts: &http::request::Parts,
) -> Result<std::sync::Arc<crate::gateway::stages::bridge::session::LegacySession>, Rejection> {
    let (path, ip) = (parts.uri.path(), q.client_ip);
    let once = bridge_steps::once(&parts.headers)?;
    let input = Input::read(&parts.headers, once, path, ip, gw.auth.as_ref())
        .await
        .map_err(|refusal| refusal.rejection)?;
    bridge_steps::verify(&gw.bridge, &input)
}

/// The 2026 request the bridge sends through the pipeline for `method` (its `Mcp-*` headers
/// from the body, never from the legacy request's, and the caller's `Authorization`).
fn modern_question(
    q: &Question,
    parts: &http::request::Parts,
    method: &str,
    name: Option<&str>,
    body: Vec<u8>,
) -> Question {
    let mut headers = std::collections::BTreeMap::new();
    headers.insert("Content-Type".into(), "application/json".into());
    headers.insert(
        "Accept".into(),
        "application/json, text/event-stream".into(),
    );
    headers.insert(
        header::PROTOCOL_VERSION.into(),
        crate::mcp::PROTOCOL_VERSION.into(),
    );
    headers.insert(header::METHOD.into(), method.into());
    if let Some(n) = name {
        headers.insert(header::NAME.into(), header::encode_value(n).into_owned());
    }
    if let Some(a) = parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
    {
        headers.insert("Authorization".into(), a.into());
    }
    Question {
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        path: Some(parts.uri.path().to_owned()),
        client_ip: q.client_ip,
    }
}

/// The refusal as the client would get it.
fn refused(mut v: Value, rej: &Rejection) -> Value {
    v["answer"] = json!({"status": rej.status, "code": rej.code, "reason": rej.reason,
        "message": rej.message});
    v
}
