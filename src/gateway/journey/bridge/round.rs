//! One round of questions the fleet's `input_required` asks a 2025-era client: each input
//! request sent on the call's stream as a server-initiated request with a sealed answer id
//! ([`AnswerId`]), then every answer awaited (bounded by `legacy.answer_timeout`; a refusal,
//! a cancellation or the time running out ends the call).

use pingora::prelude::*;
use serde_json::{json, Map, Value};

use super::call::Call;
use super::out::Out;
use super::session::LegacySession;
use super::waiting::{AnswerId, Event};
use super::Bridge;
use crate::gateway::journey::request::RequestCtx;
use crate::mcp::seal::now_ms;
use crate::mcp::{codes, legacy, Rejection};

/// One round: ask the client every input request, wait for all answers; the members the retry
/// adds to the params (`inputResponses`, `requestState`).
pub(super) async fn next_round(
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
    let Some(mut reg) = bridge.waiting.register(
        &s.nonce,
        call.id.get().to_owned(),
        settings.max_waiting,
        Some(ctx.gw.metrics.bridge.waiting.clone()),
    ) else {
        let msg =
            "The gateway has too many calls waiting for their clients' answers; try again later";
        return Ok(Err(Rejection::new(
            503,
            codes::GATEWAY_INPUT_NOT_GIVEN,
            "too-many-waiting",
            msg,
        )));
    };
    if let Some(rej) = undeclared(s, questions) {
        return Ok(Err(rej));
    }
    ask(out, bridge, s, reg.id, questions, settings.answer_timeout).await?;
    let answers = match collect(&mut reg.rx, questions, settings.answer_timeout).await {
        Ok(a) => a,
        Err(rej) => return Ok(Err(rej)),
    };
    extra.insert("inputResponses".into(), Value::Object(answers));
    Ok(Ok(extra))
}

/// A question for a capability the client did not declare at `initialize` (none is asked then).
fn undeclared(s: &LegacySession, questions: &Map<String, Value>) -> Option<Rejection> {
    let method = questions
        .values()
        .map(|q| q.get("method").and_then(Value::as_str).unwrap_or_default())
        .find(|m| !legacy::declared(&s.capabilities, m))?;
    let msg = format!(
        "The server asked {method:?}, a capability this client did not declare at initialize"
    );
    let code = codes::MISSING_REQUIRED_CLIENT_CAPABILITY;
    Some(Rejection::new(400, code, "capability-missing", msg))
}

/// Send each question on the call's stream, with a sealed id naming this replica and the call.
async fn ask(
    out: &mut Out<'_>,
    bridge: &Bridge,
    s: &LegacySession,
    call: u64,
    questions: &Map<String, Value>,
    timeout: std::time::Duration,
) -> Result<()> {
    let expires_at_ms = now_ms().saturating_add(timeout.as_millis() as u64);
    for (key, q) in questions {
        let id = AnswerId {
            replica: bridge.advertise.clone(),
            call,
            key: key.clone(),
            session: s.nonce.clone(),
            expires_at_ms,
        };
        let params = q.get("params").cloned().unwrap_or(json!({}));
        let ask = json!({"jsonrpc": "2.0", "id": id.seal(&bridge.sealer), "method": q["method"], "params": params});
        out.event(ask.to_string().as_bytes()).await?;
    }
    Ok(())
}

/// Every answer, within `timeout`; a refusal, a cancellation or the time running out ends it.
async fn collect(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
    questions: &Map<String, Value>,
    timeout: std::time::Duration,
) -> std::result::Result<Map<String, Value>, Rejection> {
    let ended = |status, reason, msg: String| {
        Rejection::new(status, codes::GATEWAY_INPUT_NOT_GIVEN, reason, msg)
    };
    let mut answers = Map::new();
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    while answers.len() < questions.len() {
        let event = tokio::select! {
            e = rx.recv() => e,
            _ = &mut deadline => {
                let msg = format!("The client did not answer the server's questions within {timeout:?} (legacy.answer_timeout)");
                return Err(ended(504, "answer-timeout", msg));
            }
        };
        match event {
            Some(Event::Answer { key, answer: Ok(v) }) if questions.contains_key(&key) => {
                answers.insert(key, v);
            }
            Some(Event::Answer { answer: Err(e), .. }) => {
                let msg = format!("The client answered the server's request with an error: {e}");
                return Err(ended(400, "answer-refused", msg));
            }
            Some(Event::Answer { .. }) => {}
            Some(Event::Cancelled) | None => {
                return Err(ended(
                    400,
                    "cancelled",
                    "The client cancelled the call".into(),
                ));
            }
        }
    }
    Ok(answers)
}
