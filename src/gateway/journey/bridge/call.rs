//! One request of a 2025-era session, carried through the fleet as 2026 requests: translated
//! (`_meta` from the session), sent through the pipeline ([`super::hop`]), and, when the fleet
//! answers `input_required`, the multi round-trip flow run *for* the client: each input request
//! is asked on the call's own response stream as a server-initiated request (an SSE event with
//! an id the gateway seals, [`super::waiting::AnswerId`]), the client's answers are collected,
//! and the call is retried with `inputResponses` and the exact `requestState`, on any instance,
//! until the fleet completes it (at most [`MAX_ROUNDS`] rounds). Progress and log notifications
//! of each leg reach the client on the same stream as they arrive, while the leg runs.
//!
//! The answer is plain JSON when nothing needed streaming, an event stream otherwise.

use pingora::prelude::*;
use pingora::proxy::Session;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::hop::Answer;
use super::legs::{carried, carry_leg};
use super::out::Out;
use super::session::LegacySession;
use super::{Bridge, Input};
use crate::gateway::journey::phases::Phases;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::steps::refuse;
use crate::gateway::stages::answer::respond_as;
use crate::mcp::{codes, legacy, methods, result_type, sse, Rejection};

/// Most rounds of questions one call may take.
const MAX_ROUNDS: usize = 16;

pub(super) use super::carried::Call;

/// The JSON-RPC response among an answer's messages, and the notifications before it.
pub(super) fn split(messages: Vec<Value>) -> (Option<Value>, Vec<Value>) {
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

/// Carry `call` of session `s` to its final answer.
pub(super) async fn run(
    phases: &dyn Phases,
    session: &mut Session,
    ctx: &mut RequestCtx,
    bridge: &Bridge,
    input: &Input,
    s: &LegacySession,
    mut call: Call,
) -> Result<bool> {
    // The call's `Mcp-Name` is the request's name from here on (read there by each leg).
    ctx.name = call.name.take();
    let mut out = Out {
        session,
        streaming: false,
    };
    let mut extra = Map::new();
    let mut refreshed = false;
    let mut leg = 0;
    while leg < MAX_ROUNDS as u64 {
        leg += 1;
        let via = (phases, bridge, &*ctx, input);
        let sent = send_leg(&mut out, via, (s, &call), &extra, leg).await?;
        let ans = match sent {
            Ok(a) => a,
            Err(rej) => return fail(out, ctx, rej, &call.id).await,
        };
        if let Some(body) = completed(&ans, &call.id) {
            if leg > 1 || refreshed {
                flow_ended(ctx, &extra, "completed");
            }
            return out.last(200, body, &ans.pass).await;
        }
        let (response, notes) = split(ans.messages());
        if !refreshed && super::marks::needs_marks(bridge, input, &call, response.as_ref()) {
            // The fleet wants an `Mcp-Param-*` header of a tool not seen in a list yet: read
            // the list, as a 2026 client would, and send the call once more.
            refreshed = true;
            let via = (phases, bridge, &*ctx, input);
            super::marks::learn_tools(via, out.session, s).await?;
            leg -= 1;
            continue;
        }
        for n in &notes {
            out.event(n.to_string().as_bytes()).await?;
        }
        let Some(response) = response else {
            return pass_through(out, ctx, &ans, &call.id).await;
        };
        let Some(result) = asks(&response) else {
            let asked = (leg > 1 || refreshed).then_some(&extra);
            return finish(out, ctx, response, (&ans, asked), &call.id).await;
        };
        extra = match super::round::next_round(&mut out, bridge, ctx, s, &call, result).await? {
            Ok(extra) => extra,
            Err(rej) => {
                flow_ended(ctx, &Map::new(), outcome_of(rej.reason));
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

/// One leg of the call as a 2026 request (the previous round's answers in `extra`): the
/// notifications of an event stream reach the client as they arrive, and the answer returned
/// holds the rest (the response); a `tools/list` result teaches the bridge its tools'
/// `x-mcp-header` marks.
async fn send_leg(
    out: &mut Out<'_>,
    (phases, bridge, ctx, input): (&dyn Phases, &Bridge, &RequestCtx, &Input),
    (s, call): (&LegacySession, &Call),
    extra: &Map<String, Value>,
    leg: u64,
) -> Result<Result<Answer, Rejection>> {
    let level = bridge.levels.get(s);
    let body = match call.to_modern(s, extra, leg, level.as_deref()) {
        Ok(body) => body,
        Err(rej) => return Ok(Err(rej)),
    };
    let name = ctx.name.as_deref();
    let carry = carried(
        input,
        super::marks::param_headers(bridge, input, call, name),
    );
    let to = (&call.method[..], name);
    let via = (phases, bridge, ctx, input);
    let ans = carry_leg(via, out, to, (body, carry), true).await?;
    if let Ok(ans) = &ans {
        if call.method == methods::TOOLS_LIST {
            let (response, _) = split(ans.messages());
            if let Some(r) = response.as_ref().and_then(|r| r.get("result")) {
                bridge.params.learn(&input.path, r);
            }
        }
    }
    Ok(ans)
}

/// The answer as the client's, when it is one JSON-RPC response with a `complete` result (most
/// answers: written from the bytes, no value tree); `None`: the value path reads it.
fn completed(ans: &Answer, id: &RawValue) -> Option<Vec<u8>> {
    let ct = ans.content_type.as_deref();
    let stream = ct.is_some_and(|c| sse::is_event_stream(c.as_bytes()));
    if stream {
        return None;
    }
    legacy::legacy_result(&ans.body, id)
}

/// The `input_required` result of a response, if it is one.
fn asks(response: &Value) -> Option<&Value> {
    let result = response.get("result")?;
    let kind = result.get("resultType").and_then(Value::as_str);
    (kind == Some(result_type::INPUT_REQUIRED)).then_some(result)
}

/// The final answer, counted as a flow's end when the call asked (`asked`: its last answers).
async fn finish(
    mut out: Out<'_>,
    ctx: &RequestCtx,
    response: Value,
    (ans, asked): (&Answer, Option<&Map<String, Value>>),
    id: &RawValue,
) -> Result<bool> {
    let failed = response.get("error").is_some();
    let status = if failed { ans.status } else { 200 };
    if let Some(extra) = asked {
        let done = status == 200 && !failed;
        flow_ended(ctx, extra, if done { "completed" } else { "error" });
    }
    out.last(status, relabel(response, id), &ans.pass).await
}

/// The metric label of a round that ended the call.
fn outcome_of(reason: &str) -> &'static str {
    match reason {
        "answer-timeout" => "timed_out",
        "cancelled" => "cancelled",
        "answer-refused" => "refused",
        _ => "error",
    }
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

/// The fleet's response with the client's id (a 2026 result loses its 2026-only members).
fn relabel(mut response: Value, id: &RawValue) -> Vec<u8> {
    if let Some(r) = response.get_mut("result") {
        *r = legacy::to_legacy_result(r.take());
    }
    if let Some(e) = response.get_mut("error") {
        legacy::to_legacy_error(e);
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
    let (ct, body) = (ans.content_type.as_deref(), ans.body.clone());
    respond_as(out.session, ans.status, ct, body, &ans.pass).await?;
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
