//! A pool of 2025-era servers (`era: 2025-11-25`, ...) served to 2026 clients: the forward
//! step for such a pool, in place of the direct leg, once the request passed every stage.
//!
//! - The gateway holds a session with each instance per caller ([`ServerSessions`]), opened on
//!   first use, opened again when the server says it is gone (404: the request that found it
//!   gone was not run, so it is sent once more).
//! - `server/discover` is answered from the session's `initialize` result; every other request
//!   goes over the session without the 2026 `_meta`, and its result comes back in the 2026 shape
//!   (`resultType`, and `ttlMs: 0` / `cacheScope: private` on cacheable results: a 2025 server
//!   says nothing about caching).
//! - **Mid-call questions.** When the server sends a request on the call's stream
//!   (`elicitation/create`, `sampling/createMessage`, `roots/list`), the call is paused
//!   ([`PausedCalls`]: its upstream stream is kept open) and the client gets `input_required`
//!   with that question and a sealed `requestState` naming the replica and the call
//!   ([`PausedState`]). The retry (any replica: one that does not hold the call sends it on to
//!   the one that does) answers the server's request with the client's response and reads on.
//!   A question for a capability the call's `_meta` did not declare is answered to the server
//!   with an error and never reaches the client. A call not resumed in `legacy.answer_timeout`
//!   is cancelled at the server and its slot freed.

use pingora::prelude::*;
use pingora::proxy::Session;
use serde_json::{json, Map, Value};

use crate::gateway::journey::legacy_up::wire::Up;
use crate::gateway::journey::legacy_up::{discover_result, final_of, session as up_session};
use crate::gateway::journey::phases::Phases;
use crate::gateway::journey::request::{Progress, RequestCtx};
use crate::gateway::journey::steps::refuse;
use crate::gateway::stages::answer::respond;
use crate::gateway::stages::bridge::servers::{PausedCall, PausedState, SessionKey};
use crate::gateway::stages::bridge::Bridge;
use crate::mcp::seal::now_ms;
use crate::mcp::{codes, legacy, meta, methods, result_type, sse_event, Rejection};

/// The 2025-era revision of the request's pool, when it is a legacy pool and the body is in
/// hand (legacy pools always read it: the request is rewritten).
pub(crate) fn takes(ctx: &RequestCtx) -> Option<&'static str> {
    // A 2025-era client's own message passed through needs no translation.
    if ctx.pass.is_some() || !matches!(ctx.progress, Progress::Checked(_) | Progress::Unchecked) {
        return None;
    }
    let name = &ctx.gw.pools[ctx.pool].name;
    ctx.gw.config.pools.get(name)?.era.legacy_version()
}

/// The request as the leg reads it.
pub(super) struct Req {
    pub(super) method: String,
    pub(super) id: Value,
    pub(super) params: Map<String, Value>,
    pub(super) caller: String,
}

impl Req {
    fn of(ctx: &RequestCtx, caller: String) -> Option<Req> {
        let msg: Value = serde_json::from_slice(&ctx.in_hand).ok()?;
        let method = msg.get("method")?.as_str()?.to_owned();
        let params = msg
            .get("params")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Some(Req {
            id: msg.get("id").cloned().unwrap_or(Value::Null),
            method,
            params,
            caller,
        })
    }

    /// The digest of what is called with what (the name or URI and the arguments), which a
    /// paused call's state is bound to: worked out only for a call that pauses or resumes.
    pub(super) fn digest(&self) -> String {
        let p = &self.params;
        let name = p.get("name").or_else(|| p.get("uri"));
        let name = name.and_then(Value::as_str).unwrap_or("");
        let args = p.get("arguments").unwrap_or(&Value::Null);
        crate::mcp::state_seal::arguments_digest(&self.method, name, args)
    }

    /// What the client declared it can be asked, in this request's `_meta`.
    fn capabilities(&self) -> Value {
        let m = self.params.get("_meta");
        m.and_then(|m| m.get(meta::CLIENT_CAPABILITIES))
            .cloned()
            .unwrap_or(json!({}))
    }

    /// The 2025-era body: the params without the 2026 `_meta` keys, the MRTR members dropped,
    /// and `upstream_id` as its id (unique on the session, which several clients of one caller
    /// may share: a server routes answers by id).
    fn legacy_body(&self, upstream_id: &Value) -> Vec<u8> {
        let mut p = self.params.clone();
        p.remove("requestState");
        p.remove("inputResponses");
        if let Some(Value::Object(m)) = p.get_mut("_meta") {
            m.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
            if m.is_empty() {
                p.remove("_meta");
            }
        }
        serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": upstream_id, "method": self.method, "params": p}),
        )
        .expect("JSON")
    }
}

/// Who calls, for sessions and states (`session::server_side_caller`).
fn caller_of(session: &Session, ctx: &RequestCtx) -> String {
    let subject = ctx.identity.as_deref().map(|id| id.subject.as_str());
    let auth = session
        .req_header()
        .headers
        .get(http::header::AUTHORIZATION);
    let auth = auth.map(|a| a.as_bytes());
    crate::gateway::stages::bridge::session::server_side_caller(subject, auth)
}

/// Forward the request to the legacy pool (balanced and headed by the proxy's `phases`);
/// `Ok(true)`: the client got its answer.
pub(crate) async fn forward(
    phases: &impl Phases,
    session: &mut Session,
    ctx: &mut RequestCtx,
    version: &'static str,
) -> Result<bool> {
    let gw = ctx.gw.clone();
    let bridge = &gw.bridge;
    let Some(req) = Req::of(ctx, caller_of(session, ctx)) else {
        let rej = Rejection::new(
            400,
            codes::INVALID_REQUEST,
            "invalid-request",
            "The request is not a JSON-RPC request",
        );
        return refuse(session, ctx, rej, None).await;
    };
    // The gateway is the 2026 server here: it answers what the 2026 revision removed, and a
    // version it does not speak, before the session (a 2025-era server would run them).
    let headers = &session.req_header().headers;
    let claimed = headers.get(crate::mcp::header::PROTOCOL_VERSION);
    let asked = claimed
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .map(str::to_owned);
    let asked = asked.or_else(|| {
        let meta = req.params.get("_meta")?;
        Some(meta.get(meta::PROTOCOL_VERSION)?.as_str()?.to_owned())
    });
    if let Some(rej) = legacy::refused_as_2026(&req.method, asked.as_deref()) {
        let id = serde_json::value::to_raw_value(&req.id).ok();
        return refuse(session, ctx, rej, id).await;
    }
    if let Some(state) = req.params.get("requestState").and_then(Value::as_str) {
        let to = (state.to_owned(), version);
        return super::back_resume::resume(phases, session, ctx, bridge, &req, to).await;
    }
    let up = match super::back_target::target(phases, session, ctx, version).await {
        Ok(up) => up,
        Err(e) => return Err(e),
    };
    let key = SessionKey {
        pool: gw.pools[ctx.pool].name.clone(),
        addr: up.addr,
        caller: req.caller.clone(),
    };
    if req.method == methods::DISCOVER {
        let s = match up_session::get(bridge, &up, &key, &gw).await {
            Ok(s) => s,
            Err(rej) => return refuse(session, ctx, rej, None).await,
        };
        return answer(session, &req, discover_result(&s.init), &[]).await;
    }
    if req.method == methods::SUBSCRIPTIONS_LISTEN {
        return super::back_listen::relay(session, ctx, bridge, &req, (up, key)).await;
    }
    let upstream_id = json!(format!("mcp-edge-{:x}", rand::random::<u64>()));
    let (messages, s) =
        match up_session::send(bridge, &up, &key, &gw, &req.legacy_body(&upstream_id)).await {
            Ok(m) => m,
            Err(rej) => return refuse(session, ctx, rej, None).await,
        };
    ctx.count_delivery();
    let call = PausedCall {
        stream: messages,
        key,
        session_id: s.id,
        side: s.side,
        path: up.path.clone(),
        upstream_id,
        pending: Vec::new(),
        backlog: Vec::new(),
        rounds: 0,
    };
    drive(session, ctx, bridge, &req, up, call).await
}

/// Read the call's stream on: to its response (answered), or to a question (paused).
pub(super) async fn drive(
    session: &mut Session,
    ctx: &mut RequestCtx,
    bridge: &Bridge,
    req: &Req,
    up: Up,
    mut call: PausedCall,
) -> Result<bool> {
    let caps = req.capabilities();
    let mut notes = Vec::new();
    loop {
        let next = match call.backlog.pop() {
            Some(m) => Some(m),
            None => next_message(&mut call)
                .await
                .map_err(|e| Error::explain(ErrorType::ReadError, e).into_up())?,
        };
        let Some(m) = next else {
            if call.stream.status != 200 {
                let body = call.stream.rest().await;
                respond(session, call.stream.status, body, &[]).await?;
                return Ok(true);
            }
            let rej = Rejection::new(
                502,
                codes::GATEWAY_UPSTREAM_FAILED,
                "legacy-no-response",
                "The 2025-era server ended its answer without a response",
            );
            return refuse(session, ctx, rej, None).await;
        };
        let has_id = m.get("id").is_some_and(|i| !i.is_null());
        match (m.get("method").and_then(Value::as_str), has_id) {
            (None, true) => return answer(session, req, final_of(&req.method, m), &notes).await,
            (Some(_), false) => notes.push(m),
            (Some(method), true) if legacy::declared(&caps, method) => {
                let key = format!("q{}", call.rounds);
                call.rounds += 1;
                let question = json!({"method": method, "params": m.get("params").cloned().unwrap_or(json!({}))});
                call.pending.push((key, m["id"].clone(), question));
                return pause(session, ctx, bridge, req, up, call, &notes).await;
            }
            (Some(method), true) => {
                // Never reaches the client: it did not declare the capability in this call.
                let msg = format!("The client did not declare the capability {method} needs");
                let err = json!({"jsonrpc": "2.0", "id": m["id"], "error": {"code": codes::METHOD_NOT_FOUND, "message": msg}});
                let _ = up.tell(&call.session_id, &err).await;
            }
            (None, false) => {}
        }
    }
}

/// The call's next message: from its own stream, or a request the server sent on the
/// session's standalone stream meanwhile (taken by the call of that session reading now).
async fn next_message(call: &mut PausedCall) -> Result<Option<Value>, String> {
    let Some(side) = call.side.clone() else {
        return call.stream.next().await;
    };
    let mut rx = side.lock().await;
    tokio::select! {
        m = call.stream.next() => m,
        Some(r) = rx.recv() => Ok(Some(r)),
    }
}

/// Park the call and answer the client `input_required` with its pending questions.
pub(super) async fn pause(
    session: &mut Session,
    ctx: &mut RequestCtx,
    bridge: &Bridge,
    req: &Req,
    up: Up,
    call: PausedCall,
    notes: &[Value],
) -> Result<bool> {
    let settings = &ctx.gw.config.legacy;
    let questions: Map<String, Value> = call
        .pending
        .iter()
        .map(|(k, _, q)| (k.clone(), q.clone()))
        .collect();
    let (sid, upstream_id) = (call.session_id.clone(), call.upstream_id.clone());
    let metrics = ctx.gw.metrics.bridge.paused.clone();
    let id = match bridge.paused.park(call, settings.max_waiting) {
        Ok(id) => id,
        Err(call) => {
            let reason = "the gateway cannot hold more paused calls";
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call.upstream_id, "reason": reason}});
            let _ = up.tell(&call.session_id, &cancel).await;
            let rej = Rejection::new(
                503,
                codes::GATEWAY_OVERLOADED,
                "too-many-paused",
                "The gateway holds too many paused calls; try again later",
            );
            return refuse(session, ctx, rej, None).await;
        }
    };
    metrics.set(bridge.paused.len() as i64);
    let timeout = settings.answer_timeout;
    let expires_at_ms = now_ms().saturating_add(timeout.as_millis() as u64);
    let state = PausedState {
        replica: bridge.advertise.clone(),
        call: id,
        caller: req.caller.clone(),
        digest: req.digest(),
        expires_at_ms,
    };
    let paused = bridge.paused.clone();
    let outcomes = ctx.gw.metrics.bridge.paused_outcomes.clone();
    tokio::spawn(async move {
        tokio::time::sleep(timeout).await;
        if paused.take(id).is_some() {
            outcomes.with_label_values(&["timed_out"]).inc();
            metrics.set(paused.len() as i64);
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": upstream_id, "reason": "the client did not answer in time"}});
            let _ = up.tell(&sid, &cancel).await;
        }
    });
    let result = json!({"resultType": result_type::INPUT_REQUIRED, "inputRequests": questions, "requestState": state.seal(&bridge.sealer)});
    answer(
        session,
        req,
        json!({"jsonrpc": "2.0", "id": req.id, "result": result}),
        notes,
    )
    .await
}

/// Answer the client: its id on the message; the notifications first (then as a stream).
pub(super) async fn answer(
    session: &mut Session,
    req: &Req,
    mut message: Value,
    notes: &[Value],
) -> Result<bool> {
    message["jsonrpc"] = json!("2.0");
    message["id"] = req.id.clone();
    let body = serde_json::to_vec(&message).expect("JSON");
    if notes.is_empty() {
        respond(session, legacy::status_of(&message), body, &[]).await?;
        return Ok(true);
    }
    let mut resp = pingora::http::ResponseHeader::build(200, Some(3))?;
    resp.insert_header(http::header::CONTENT_TYPE, crate::mcp::sse::CONTENT_TYPE)?;
    resp.insert_header(http::header::TRANSFER_ENCODING, "chunked")?;
    session.write_response_header(Box::new(resp), false).await?;
    for n in notes {
        session
            .write_response_body(Some(sse_event(n.to_string().as_bytes()).into()), false)
            .await?;
    }
    session
        .write_response_body(Some(sse_event(&body).into()), true)
        .await?;
    Ok(true)
}
