//! What federation does right after the body check: answer (a merged list, `server/discover`,
//! `subscriptions/listen`), refuse a name no pool serves, route `completion/complete` by its
//! `ref`, and put the server's own name back into a prefixed call's body.

use super::answer;
use crate::gateway::federation::stages::Federated;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::stages::answer::Verdict;
use crate::gateway::stages::route::RouteRef;
use crate::mcp::{codes, methods, Rejection};

/// Whether federation must act on this request's body (answer it, refuse an unknown name,
/// rename) but `plan` would leave it on pingora's pipe unread (past 64 KiB on a TLS or h2 pool).
pub(crate) fn needs_body_first(
    ctx: &RequestCtx,
    plan: crate::gateway::stages::inspect::Plan,
) -> bool {
    use crate::gateway::stages::inspect::Plan;
    let acts = |f: &Federated| f.answer || f.refuse.is_some() || f.rename.is_some();
    ctx.federated.as_deref().is_some_and(acts) && matches!(plan, Plan::Hold | Plan::Stream)
}

/// After the body check, on a federated endpoint: a merged answer, or the server's name put
/// back into a prefixed call, or `completion/complete` routed by its `ref`, or a refusal.
pub(crate) async fn on_checked(
    session: &mut pingora::proxy::Session,
    ctx: &mut RequestCtx,
    body: &bytes::Bytes,
) -> pingora::Result<Verdict> {
    let Some(f) = ctx.federated.clone() else {
        return Ok(Verdict::Next);
    };
    if let Some(rej) = f.refuse {
        return Ok(Verdict::Refuse(rej));
    }
    if f.answer {
        return answer::respond(session, ctx, f.endpoint, body).await;
    }
    if ctx.method.as_deref() == Some(methods::COMPLETION_COMPLETE) {
        route_completion(ctx, &f, body);
    }
    let Some(server_name) = ctx.federated.as_ref().and_then(|f| f.rename.clone()) else {
        return Ok(Verdict::Next);
    };
    let path: &[&str] = match ctx.method.as_deref() {
        Some(methods::COMPLETION_COMPLETE) => &["params", "ref", "name"],
        _ => &["params", "name"],
    };
    if !crate::gateway::journey::direct::leg_for(session, ctx) {
        // Validation keeps prefixed endpoints on plain HTTP/1.1 pools; an upgrade request
        // would leave on pingora's pipe with the client's bytes.
        let rej = Rejection::new(
            400,
            codes::INVALID_REQUEST,
            "not-renamable",
            "A call to a prefixed name cannot be a protocol upgrade",
        );
        return Ok(Verdict::Refuse(rej));
    }
    match crate::mcp::rewrite::replace_string(body, path, &server_name) {
        Some(new) => {
            ctx.body_len = new.len();
            ctx.in_hand = bytes::Bytes::from(new);
            Ok(Verdict::Next)
        }
        None => {
            let rej = Rejection::new(
                400,
                codes::INVALID_PARAMS,
                "unnamed",
                "The request names no tool or prompt in its body",
            );
            Ok(Verdict::Refuse(rej))
        }
    }
}

/// `completion/complete` names its target in `params.ref` (no `Mcp-Name`): route it there.
fn route_completion(ctx: &mut RequestCtx, f: &Federated, body: &[u8]) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    let r = &v["params"]["ref"];
    let gw = ctx.gw.clone();
    let Some(fed) = gw.federation.as_ref() else {
        return;
    };
    let ep = &fed.endpoints[f.endpoint];
    let view = ep.view(&gw.catalogs, &gw.table.pools, fed.catalog.keep_stale);
    let target = match (r["type"].as_str(), r["name"].as_str(), r["uri"].as_str()) {
        (Some("ref/prompt"), Some(n), _) => view
            .prompt(n)
            .map(|t| (t.pool, (t.name != n).then(|| t.name.clone()))),
        (Some("ref/resource"), _, Some(u)) => view.resource(u).map(|p| (p, None)),
        _ => None,
    };
    if let Some((pool, rename)) = target {
        ctx.pool = pool;
        ctx.route = Some(RouteRef::Learned(pool));
        if let Some(fc) = ctx.federated.as_mut() {
            fc.rename = rename;
        }
    }
}
