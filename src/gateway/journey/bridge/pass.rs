//! Pass-through with affinity: a 2025-era client of an endpoint whose `initialize` route leads
//! to a pool with `legacy_clients: pass` is served by the instances themselves (they serve both
//! eras). Nothing is translated; the gateway routes, limits and checks each request by its
//! **body** (a legacy request's `Mcp-*` headers are removed, never read: the rule for
//! intermediaries) and pins the session to the instance that opened it:
//!
//! - `initialize` walks the pipeline like any request and goes to the instance the balancer
//!   picks; the session id in its answer is sealed, with that instance, into the one the client
//!   sees, on the response's head ([`crate::gateway::stages::bridge::pass::answer_head`]);
//! - a follow-up request or notification walks the pipeline too, then goes to that instance
//!   with the instance's own session id;
//! - an answer to the instance's question, the standalone `GET` stream and `DELETE` go straight
//!   to that instance (nothing to route or limit; the session was verified for this caller);
//! - a session whose instance is gone gets `404` ([`gone`]), so the client opens a new one.

use bytes::Bytes;
use pingora::proxy::Session;
use pingora::Result;

use super::{Bridge, Input};
use crate::gateway::journey::direct;
use crate::gateway::journey::request::{Progress, RequestCtx};
use crate::gateway::journey::state::Gateway;
use crate::gateway::journey::steps::refuse;
use crate::gateway::stages::bridge::pass::{gone, is_pinned, not_found, Pass, PassSession};
use crate::gateway::stages::inspect;
use crate::gateway::stages::pipeline::{index_of, Step};
use crate::mcp::legacy::SESSION_ID;
use crate::mcp::{codes, envelope, header, methods, Rejection};

/// The pool that serves 2025-era clients itself on `path`: on the main endpoint, the pool
/// [`crate::config::Config::passing_pool`] names (a federated endpoint merges several pools:
/// its clients are bridged).
pub(crate) fn pool_of(gw: &Gateway, path: &str) -> Option<usize> {
    if path != gw.config.endpoint {
        return None;
    }
    let name = gw.config.passing_pool()?;
    gw.pools.iter().position(|p| p.name == name)
}

/// Whether this 2025-era message is passed through: it presents a pinned session, or no session
/// on an endpoint that passes (`initialize`, or a server that keeps no sessions).
pub(crate) fn takes(gw: &Gateway, input: &Input) -> bool {
    match input.session_id.as_deref() {
        Some(id) => is_pinned(id),
        None => pool_of(gw, &input.path).is_some(),
    }
}

/// Set the message on its way through the pipeline (`Ok(None)`), or refuse it (`Ok(Some)`).
/// `body`: a POST's, read whole; `None` for `GET` and `DELETE`.
pub(crate) async fn enter(
    session: &mut Session,
    ctx: &mut RequestCtx,
    bridge: &Bridge,
    input: &Input,
    body: Option<Bytes>,
) -> Result<Option<bool>> {
    let gw = ctx.gw.clone();
    let pass = match pinned(&gw, bridge, input) {
        Ok(p) => p,
        Err(rej) => return refuse(session, ctx, rej, None).await.map(Some),
    };
    let req = session.req_header_mut();
    // The claims are the body's, never the legacy request's headers.
    let claimed: Vec<String> = req
        .headers
        .keys()
        .map(|k| k.as_str())
        .filter(|k| is_claim(k))
        .map(str::to_owned)
        .collect();
    for name in claimed {
        req.remove_header(&name);
    }
    if let Some(s) = &pass.session {
        req.insert_header(SESSION_ID, s.upstream.as_str())?;
    }
    let kind = match body {
        None if req.method == http::Method::GET => {
            ctx.method = Some("legacy-stream".into());
            "stream"
        }
        None => "end",
        Some(body) => match claim(req, ctx, body) {
            Ok(kind) => kind,
            Err((rej, id)) => return refuse(session, ctx, rej, id).await.map(Some),
        },
    };
    ctx.pool = pass.pool;
    if ctx.in_hand.len() > inspect::PREREAD_MAX && !direct::leg_for(session, ctx) {
        // pingora's pipe replays at most its retry buffer of a body read before it.
        let msg = format!("A 2025-era request over {} bytes cannot be passed to pool {} (its instances are reached over TLS or HTTP/2)", inspect::PREREAD_MAX, gw.pools[pass.pool].name);
        let rej = Rejection::new(413, codes::INVALID_REQUEST, "too-large", msg);
        let id = inspect::id_of(&ctx.in_hand);
        return refuse(session, ctx, rej, id).await.map(Some);
    }
    let walks = matches!(kind, "initialize" | "request" | "notification");
    let pool = &gw.pools[pass.pool].name;
    gw.metrics
        .bridge
        .passed
        .with_label_values(&[pool, kind])
        .inc();
    let stream = kind == "stream";
    ctx.pass = Some(Box::new(Pass {
        walks,
        stream,
        ..pass
    }));
    Ok(None)
}

/// The message's claims from its body, written on the head for the stages; the body is kept in
/// hand for the instance. Its kind (a metric label).
fn claim(
    req: &mut pingora::http::RequestHeader,
    ctx: &mut RequestCtx,
    body: Bytes,
) -> std::result::Result<&'static str, (Rejection, Option<Box<serde_json::value::RawValue>>)> {
    ctx.in_hand = body.clone();
    let env = match envelope::parse(&body) {
        Ok(env) => env,
        Err(e) if is_answer(&body) => {
            drop(e);
            ctx.progress = Progress::Unchecked;
            ctx.method = Some("legacy-answer".into());
            return Ok("answer");
        }
        Err(e) => {
            let rej = e.rejection();
            return Err((rej, inspect::id_of(&body)));
        }
    };
    if env.protocol_version.is_some()
        || env.has_client_capabilities
        || env.has_request_state
        || env.has_input_responses
    {
        // An instance of both eras may take such a body for a 2026 request (the SDKs classify
        // by the body's `_meta` claim) that never met the 2026 checks or the seal: refused.
        let msg = "A 2025-era request (no Mcp-Method header) carries 2026-07-28 claims in its body (_meta protocolVersion or clientCapabilities, requestState, inputResponses); send it as a 2026-07-28 request, with its Mcp-Method header";
        let rej = Rejection::new(400, codes::INVALID_REQUEST, "mixed-eras", msg);
        return Err((rej, env.id));
    }
    let method = env.method.clone().unwrap_or_default();
    let set = |req: &mut pingora::http::RequestHeader, n: &'static str, v: &str| {
        let v = header::encode_value(v).into_owned();
        req.insert_header(n, v).map_err(|_| {
            let msg = format!("The {n} of this request cannot be carried in a header");
            (
                Rejection::new(400, codes::INVALID_REQUEST, "invalid-request", msg),
                None,
            )
        })
    };
    set(req, header::METHOD, &method)?;
    if let Some(name) = env.mcp_name().map(str::to_owned) {
        set(req, header::NAME, &name)?;
    }
    let kind = match (method.as_str(), env.is_notification()) {
        (methods::INITIALIZE, _) => "initialize",
        (_, true) => "notification",
        _ => "request",
    };
    ctx.check = true;
    ctx.ran.mark(index_of(Step::Check));
    ctx.progress = Progress::Checked(env);
    Ok(kind)
}

/// A header a reader could take for a claim or the session id (any spelling a folding reader
/// reads as one): the gateway writes the claims from the body and the instance's session id.
fn is_claim(name: &str) -> bool {
    let folded = name.replace('_', "-");
    [header::METHOD, header::NAME, SESSION_ID]
        .iter()
        .any(|t| header::folds_to(name, t))
        || folded.starts_with(header::PARAM_PREFIX)
}

/// A JSON-RPC response (a client's answer to the instance's question): an object with an id and
/// a result or an error, and no method.
fn is_answer(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Answer {
        method: Option<serde::de::IgnoredAny>,
        id: Option<serde::de::IgnoredAny>,
        result: Option<serde::de::IgnoredAny>,
        error: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Answer>(body).is_ok_and(|a| {
        a.method.is_none() && a.id.is_some() && (a.result.is_some() || a.error.is_some())
    })
}

/// The pass of this message: its pinned session opened for this caller and found in this
/// generation's pools, or the endpoint's pool for a message without a session.
fn pinned(gw: &Gateway, bridge: &Bridge, input: &Input) -> std::result::Result<Pass, Rejection> {
    let ttl_ms = gw.config.legacy.session_ttl.as_millis() as u64;
    let mut pass = Pass {
        pool: 0,
        instance: None,
        session: None,
        caller: input.caller.clone(),
        path: input.path.clone(),
        ttl_ms,
        walks: true,
        stream: false,
    };
    let Some(id) = input.session_id.as_deref() else {
        pass.pool = pool_of(gw, &input.path).ok_or_else(|| not_found("no pool passes here"))?;
        return Ok(pass);
    };
    let s = PassSession::verify(&bridge.sealer, id, &input.caller, &input.path)
        .map_err(|r| r.rejection())?;
    let pool = gw.pools.iter().position(|p| p.name == s.pool);
    let instance = pool.and_then(|p| {
        let instances = &gw.pools[p].instances;
        instances.iter().position(|i| i.name == s.instance)
    });
    let (Some(pool), Some(instance)) = (pool, instance) else {
        return Err(gone(&s.pool, &s.instance, "no longer in the pool"));
    };
    pass.pool = pool;
    pass.instance = Some(instance);
    pass.session = Some(s);
    Ok(pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_claim_or_the_session_id_is_the_gateways_to_write() {
        for name in [
            "mcp-method",
            "Mcp_Method",
            "mcp-name",
            "MCP_NAME",
            "mcp-session-id",
            "Mcp_Session_Id",
            "mcp-param-region",
            "mcp_param_region",
        ] {
            assert!(is_claim(name), "{name}");
        }
        for name in [
            "mcp-protocol-version",
            "authorization",
            "mcp-names",
            "x-mcp-name",
        ] {
            assert!(!is_claim(name), "{name}");
        }
    }

    #[test]
    fn an_answer_is_a_response_with_an_id_and_no_method() {
        assert!(is_answer(
            br#"{"jsonrpc":"2.0","id":"q1","result":{"action":"accept"}}"#
        ));
        assert!(is_answer(
            br#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}"#
        ));
        assert!(!is_answer(
            br#"{"jsonrpc":"2.0","id":3,"method":"ping","result":{}}"#
        ));
        assert!(!is_answer(br#"{"jsonrpc":"2.0","result":{}}"#));
        assert!(!is_answer(br#"{"jsonrpc":"2.0","id":3}"#));
        assert!(!is_answer(b"[1,2]") && !is_answer(b"not json"));
    }
}
