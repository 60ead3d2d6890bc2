//! One request of a 2025-era session, carried through the fleet as 2026 requests: translated
//! (`_meta` from the session), sent through the pipeline ([`super::hop`]), and, when the fleet
//! answers `input_required`, the multi round-trip flow run *for* the client: each input request
//! is asked on the call's own response stream as a server-initiated request (an SSE event with
//! an id the gateway seals, [`super::waiting::AnswerId`]), the client's answers are collected,
//! and the call is retried with `inputResponses` and the exact `requestState`, on any instance,
//! until the fleet completes it (at most [`MAX_ROUNDS`] rounds). Progress and log notifications
//! of each leg reach the client on the same stream.
//!
//! The answer is plain JSON when nothing needed streaming, an event stream otherwise.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::Session;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::hop::{self, Answer};
use super::session::LegacySession;
use super::waiting::{AnswerId, Event};
use super::{Bridge, Input};
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::steps::refuse;
use crate::gateway::stages::answer::respond;
use crate::mcp::seal::now_ms;
use crate::mcp::{codes, legacy, methods, result_type, sse, sse_event, Rejection};

/// Most rounds of questions one call may take.
const MAX_ROUNDS: usize = 16;

/// The client's request being carried.
pub(super) struct Call {
    method: String,
    params: Option<Value>,
    id: Box<RawValue>,
}

impl Call {
    pub(super) fn new(method: String, mut msg: Value, id: Box<RawValue>) -> Call {
        let params = msg.get_mut("params").map(Value::take);
        Call { method, params, id }
    }

    /// The params of the next leg: the original ones plus the previous round's answers.
    fn params_with(&self, extra: &Map<String, Value>) -> Option<Value> {
        if extra.is_empty() {
            return self.params.clone();
        }
        let mut p = match &self.params {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        p.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        Some(Value::Object(p))
    }
}

/// Send one 2026 request through the pipeline as the session's client.
pub(super) async fn send(
    bridge: &Bridge,
    ctx: &RequestCtx,
    input: &Input,
    method: &str,
    name: Option<&str>,
    body: &[u8],
    mut carry: Vec<(String, String)>,
) -> Result<Answer, Rejection> {
    let config = &ctx.gw.config;
    if let Some(a) = &input.authorization {
        carry.push(("authorization".into(), a.clone()));
    }
    let req = hop::Request {
        path: &input.path,
        method,
        name,
        carry,
        body,
    };
    let bytes = req.to_bytes(bridge.hop);
    let timeout = config
        .legacy
        .answer_timeout
        .max(config.timeouts.upstream_read);
    hop::post(bridge.hop, &bytes, config.timeouts.connect, timeout)
        .await
        .map_err(|e| {
            let msg = format!("The gateway could not carry the request into its pipeline: {e}");
            Rejection::new(502, codes::GATEWAY_UPSTREAM_UNAVAILABLE, "bridge-hop", msg)
        })
}

/// The JSON-RPC response among an answer's messages, and the notifications before it.
fn split(messages: Vec<Value>) -> (Option<Value>, Vec<Value>) {
    let mut response = None;
    let mut notes = Vec::new();
    for m in messages {
        if m.get("result").is_some() || m.get("error").is_some() {
            response = Some(m);
        } else if m.get("method").is_some() && m.get("id").is_none() {
            notes.push(m);
        }
    }
    (response, notes)
}

/// How the answer to the client is going: nothing written yet, or an open event stream.
struct Out<'a> {
    session: &'a mut Session,
    streaming: bool,
}

impl Out<'_> {
    async fn open(&mut self) -> Result<()> {
        if self.streaming {
            return Ok(());
        }
        let mut resp = ResponseHeader::build(200, Some(4))?;
        resp.insert_header(http::header::CONTENT_TYPE, sse::CONTENT_TYPE)?;
        resp.insert_header(http::header::CACHE_CONTROL, "no-cache")?;
        resp.insert_header(http::header::TRANSFER_ENCODING, "chunked")?;
        self.session
            .write_response_header(Box::new(resp), false)
            .await?;
        self.streaming = true;
        Ok(())
    }

    async fn event(&mut self, message: &[u8]) -> Result<()> {
        self.open().await?;
        let ev = Bytes::from(sse_event(message));
        self.session.write_response_body(Some(ev), false).await
    }

    /// The final message: an event that ends the stream, or the whole JSON answer.
    async fn last(
        &mut self,
        status: u16,
        message: Vec<u8>,
        pass: &[(&'static str, String)],
    ) -> Result<bool> {
        if self.streaming {
            let ev = Bytes::from(sse_event(&message));
            self.session.write_response_body(Some(ev), true).await?;
        } else {
            respond(self.session, status, message, pass).await?;
        }
        Ok(true)
    }
}

/// Carry `call` of session `s` to its final answer.
pub(super) async fn run(
    session: &mut Session,
    ctx: &mut RequestCtx,
    bridge: &Bridge,
    input: &Input,
    s: &LegacySession,
    call: Call,
) -> Result<bool> {
    ctx.name = legacy::name_of(&call.method, call.params.as_ref());
    let mut out = Out {
        session,
        streaming: false,
    };
    let mut extra = Map::new();
    let mut refreshed = false;
    let mut leg = 0;
    while leg < MAX_ROUNDS as u64 {
        leg += 1;
        let params = call.params_with(&extra);
        let body = legacy::to_modern(
            &call.method,
            params.as_ref(),
            leg,
            &s.capabilities,
            &s.client_info,
        );
        let carry = param_headers(bridge, input, &call, ctx.name.as_deref());
        let ans = match send(
            bridge,
            ctx,
            input,
            &call.method,
            ctx.name.as_deref(),
            &body,
            carry,
        )
        .await
        {
            Ok(a) => a,
            Err(rej) => return fail(out, ctx, rej, &call.id).await,
        };
        let (response, notes) = split(ans.messages());
        if let Some(r) = response.as_ref().and_then(|r| r.get("result")) {
            if call.method == methods::TOOLS_LIST {
                bridge.params.learn(&input.path, r);
            }
        }
        if !refreshed && needs_marks(bridge, input, &call, response.as_ref()) {
            // The fleet wants an `Mcp-Param-*` header of a tool not seen in a list yet: read
            // the list, as a 2026 client would, and send the call once more.
            refreshed = true;
            learn_tools(bridge, ctx, input, s).await;
            leg -= 1;
            continue;
        }
        if !notes.is_empty() {
            for n in &notes {
                out.event(n.to_string().as_bytes()).await?;
            }
        }
        let Some(response) = response else {
            return pass_through(out, ctx, &ans, &call.id).await;
        };
        let result = response.get("result");
        let asks = result
            .and_then(|r| r.get("resultType"))
            .and_then(Value::as_str)
            == Some(result_type::INPUT_REQUIRED);
        if !asks {
            let status = if response.get("error").is_some() {
                ans.status
            } else {
                200
            };
            let message = relabel(response, &call.id);
            return out.last(status, message, &ans.pass).await;
        }
        let result = result.expect("asks is read from the result");
        extra = match next_round(&mut out, bridge, ctx, s, &call, result).await? {
            Ok(extra) => extra,
            Err(rej) => {
                let outcome = match rej.reason {
                    "answer-timeout" => "timed_out",
                    "cancelled" => "cancelled",
                    "answer-refused" => "refused",
                    _ => "error",
                };
                flow_ended(ctx, &Map::new(), outcome);
                return fail(out, ctx, rej, &call.id).await;
            }
        };
    }
    let msg = format!(
        "The server asked for input {MAX_ROUNDS} times in one call; the gateway stopped it"
    );
    let rej = Rejection::new(502, codes::GATEWAY_UPSTREAM_FAILED, "too-many-rounds", msg);
    fail(out, ctx, rej, &call.id).await
}

/// Count a call that needed input (it carried answers or a state) by how it ended.
fn flow_ended(ctx: &RequestCtx, extra: &Map<String, Value>, outcome: &str) {
    if outcome != "completed" || !extra.is_empty() {
        ctx.gw
            .metrics
            .bridge
            .flows
            .with_label_values(&[outcome])
            .inc();
    }
}

/// The `Mcp-Param-*` headers of a `tools/call` ([`super::params`]).
fn param_headers(
    bridge: &Bridge,
    input: &Input,
    call: &Call,
    name: Option<&str>,
) -> Vec<(String, String)> {
    match (call.method.as_str(), name) {
        (methods::TOOLS_CALL, Some(n)) => {
            let args = call.params.as_ref().and_then(|p| p.get("arguments"));
            bridge.params.headers(&input.path, n, args)
        }
        _ => Vec::new(),
    }
}

/// A `tools/call` refused with -32020 for a tool whose marks the bridge has not seen.
fn needs_marks(bridge: &Bridge, input: &Input, call: &Call, response: Option<&Value>) -> bool {
    let code = response
        .and_then(|r| r.pointer("/error/code"))
        .and_then(Value::as_i64);
    let name = call
        .params
        .as_ref()
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str);
    call.method == methods::TOOLS_CALL
        && code == Some(i64::from(codes::HEADER_MISMATCH))
        && name.is_some_and(|n| !bridge.params.knows(&input.path, n))
}

/// Read the endpoint's whole `tools/list` (at most 20 pages) as this client, learning marks.
async fn learn_tools(bridge: &Bridge, ctx: &RequestCtx, input: &Input, s: &LegacySession) {
    let mut cursor: Option<Value> = None;
    for page in 0..20u64 {
        let params = cursor.take().map(|c| json!({"cursor": c}));
        let body = legacy::to_modern(
            methods::TOOLS_LIST,
            params.as_ref(),
            page + 1,
            &s.capabilities,
            &s.client_info,
        );
        let Ok(ans) = send(
            bridge,
            ctx,
            input,
            methods::TOOLS_LIST,
            None,
            &body,
            Vec::new(),
        )
        .await
        else {
            return;
        };
        let (response, _) = split(ans.messages());
        let Some(result) = response.and_then(|mut r| r.get_mut("result").map(Value::take)) else {
            return;
        };
        bridge.params.learn(&input.path, &result);
        match result.get("nextCursor") {
            Some(c) if !c.is_null() => cursor = Some(c.clone()),
            _ => return,
        }
    }
}

/// One round: ask the client every input request, wait for all answers; the members the retry
/// adds to the params (`inputResponses`, `requestState`).
async fn next_round(
    out: &mut Out<'_>,
    bridge: &Bridge,
    ctx: &RequestCtx,
    s: &LegacySession,
    call: &Call,
    result: &Value,
) -> Result<Result<Map<String, Value>, Rejection>> {
    let mut extra = Map::new();
    if let Some(state) = result.get("requestState") {
        extra.insert("requestState".into(), state.clone());
    }
    let questions = match result.get("inputRequests") {
        Some(Value::Object(q)) if !q.is_empty() => q,
        _ => return Ok(Ok(extra)), // only a state: retry at once (the spec's load shedding)
    };
    let settings = &ctx.gw.config.legacy;
    let Some(mut reg) =
        bridge
            .waiting
            .register(&s.nonce, call.id.get().to_owned(), settings.max_waiting)
    else {
        let msg =
            "The gateway has too many calls waiting for their clients' answers; try again later";
        return Ok(Err(Rejection::new(
            503,
            codes::GATEWAY_INPUT_NOT_GIVEN,
            "too-many-waiting",
            msg,
        )));
    };
    let gauge = &ctx.gw.metrics.bridge.waiting;
    gauge.set(bridge.waiting.len() as i64);
    let expires_at_ms = now_ms().saturating_add(settings.answer_timeout.as_millis() as u64);
    for (key, q) in questions {
        let method = q.get("method").and_then(Value::as_str).unwrap_or_default();
        if !legacy::declared(&s.capabilities, method) {
            let msg = format!("The server asked {method:?}, a capability this client did not declare at initialize");
            return Ok(Err(Rejection::new(
                400,
                codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
                "capability-missing",
                msg,
            )));
        }
        let id = AnswerId {
            replica: bridge.advertise.clone(),
            call: reg.id,
            key: key.clone(),
            session: s.nonce.clone(),
            expires_at_ms,
        };
        let ask = json!({"jsonrpc": "2.0", "id": id.seal(&bridge.sealer), "method": method, "params": q.get("params").cloned().unwrap_or(json!({}))});
        out.event(ask.to_string().as_bytes()).await?;
    }
    let mut answers = Map::new();
    let deadline = tokio::time::sleep(settings.answer_timeout);
    tokio::pin!(deadline);
    while answers.len() < questions.len() {
        let event = tokio::select! {
            e = reg.rx.recv() => e,
            _ = &mut deadline => {
                let msg = format!("The client did not answer the server's questions within {:?} (legacy.answer_timeout)", settings.answer_timeout);
                return Ok(Err(Rejection::new(504, codes::GATEWAY_INPUT_NOT_GIVEN, "answer-timeout", msg)));
            }
        };
        match event {
            Some(Event::Answer { key, answer: Ok(v) }) if questions.contains_key(&key) => {
                answers.insert(key, v);
            }
            Some(Event::Answer { answer: Err(e), .. }) => {
                let msg = format!("The client answered the server's request with an error: {e}");
                return Ok(Err(Rejection::new(
                    400,
                    codes::GATEWAY_INPUT_NOT_GIVEN,
                    "answer-refused",
                    msg,
                )));
            }
            Some(Event::Answer { .. }) => {}
            Some(Event::Cancelled) | None => {
                let msg = "The client cancelled the call";
                return Ok(Err(Rejection::new(
                    400,
                    codes::GATEWAY_INPUT_NOT_GIVEN,
                    "cancelled",
                    msg,
                )));
            }
        }
    }
    drop(reg);
    gauge.set(bridge.waiting.len() as i64);
    extra.insert("inputResponses".into(), Value::Object(answers));
    Ok(Ok(extra))
}

/// The fleet's response with the client's id (a 2026 result loses its 2026-only members).
fn relabel(mut response: Value, id: &RawValue) -> Vec<u8> {
    if let Some(r) = response.get_mut("result") {
        *r = legacy::to_legacy_result(r.take());
    }
    response["id"] = serde_json::from_str(id.get()).unwrap_or(Value::Null);
    serde_json::to_vec(&response).expect("a JSON value serializes")
}

/// An answer that is not a JSON-RPC response (a 401 with `WWW-Authenticate`, a proxy's 502):
/// its status, the headers a client acts on, and its body, as they are.
async fn pass_through(
    out: Out<'_>,
    ctx: &mut RequestCtx,
    ans: &Answer,
    id: &RawValue,
) -> Result<bool> {
    if out.streaming || ans.status == 200 {
        let msg = format!(
            "The fleet's answer carried no JSON-RPC response (HTTP {})",
            ans.status
        );
        let rej = Rejection::new(
            502,
            codes::GATEWAY_UPSTREAM_FAILED,
            "bridge-no-response",
            msg,
        );
        return fail(out, ctx, rej, id).await;
    }
    let mut resp = ResponseHeader::build(ans.status, Some(4))?;
    if let Some(ct) = &ans.content_type {
        resp.insert_header(http::header::CONTENT_TYPE, ct.as_str())?;
    }
    resp.insert_header(http::header::CONTENT_LENGTH, ans.body.len().to_string())?;
    for (k, v) in &ans.pass {
        resp.insert_header(*k, v.as_str())?;
    }
    out.session
        .write_response_header(Box::new(resp), false)
        .await?;
    out.session
        .write_response_body(Some(Bytes::from(ans.body.clone())), true)
        .await?;
    Ok(true)
}

/// End the call with the gateway's error: an event on an open stream, or the refusal.
async fn fail(
    mut out: Out<'_>,
    ctx: &mut RequestCtx,
    rej: Rejection,
    id: &RawValue,
) -> Result<bool> {
    if out.streaming {
        let body = rej.body(Some(id));
        ctx.answer = Some((rej, None));
        return out.last(200, body, &[]).await;
    }
    refuse(out.session, ctx, rej, Some(id.to_owned())).await
}
