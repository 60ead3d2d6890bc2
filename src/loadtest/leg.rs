//! One leg on the wire: send a request, classify the answer (complete, input required, failed)
//! and say why it failed in the upstream's own words (JSON-RPC `error.message`, the tool's text
//! when `isError`, the start of a body that is not JSON, the transport error).

use bytes::Bytes;
use http::HeaderValue;
use serde_json::Value;

use super::client::Answer;
use super::ctx::Ctx;
use super::measure::LegError;
use super::reply::{
    error_message, instance_from_meta, json_payload, parse_reply, result_text, result_value, Reply,
    ReplyProblem,
};
use super::tally::clip;
use super::template::FlowTemplate;
use crate::mcp::codes;

/// The answer to one leg as the flow sees it.
pub(super) enum Outcome {
    /// A final result; `result` is the parsed result object when asked for.
    Complete {
        result: Option<Value>,
    },
    InputRequired {
        input_requests: Option<String>,
        request_state: Option<String>,
    },
    Failed {
        result: Option<Value>,
    },
    /// The call created a task (Tasks extension), to be followed by [`super::task_flow`].
    Task {
        task_id: String,
    },
}

/// How to read a leg's answer.
#[derive(Clone, Copy, Default)]
pub(super) struct LegMode {
    /// A deliberately mismatched request: a 400 / -32020 refusal is the expected answer.
    pub bad: bool,
    /// Keep the parsed result object (the flow has content checks).
    pub want_result: bool,
    /// The flow declined or cancelled an elicitation: a tool result with `isError` is the
    /// expected end, not an error.
    pub tool_error_ok: bool,
}

fn err(
    kind: &'static str,
    status: Option<u16>,
    code: Option<i64>,
    message: Option<String>,
) -> Option<LegError> {
    Some(LegError {
        kind,
        status,
        code,
        message,
    })
}

/// Send one request within the run's timeout: the answer and the instance its header names, or
/// the `timeout` / `transport` error (shared by MRTR legs and task requests).
pub(super) async fn exchange(
    ctx: &Ctx,
    req: http::Request<http_body_util::Full<Bytes>>,
) -> Result<(Answer, Option<Bytes>), LegError> {
    let failure = |kind, message| LegError {
        kind,
        status: None,
        code: None,
        message: Some(message),
    };
    let ans = match tokio::time::timeout(ctx.timeout, ctx.http.send(req)).await {
        Err(_) => {
            let msg = format!("no answer within {:?}", ctx.timeout);
            return Err(failure("timeout", msg));
        }
        Ok(Err(e)) => return Err(failure("transport", format!("{e:#}"))),
        Ok(Ok(a)) => a,
    };
    let instance = ans
        .headers
        .get(&ctx.upstream_header)
        .map(|v| Bytes::copy_from_slice(v.as_bytes()));
    Ok((ans, instance))
}

/// Where the gateway says it steered a retry leg (its `x-mcp-edge-retry-landing` header), as
/// one of the values it sends (`other` for anything else).
fn steered(ans: &Answer) -> Option<&'static str> {
    let v = ans.headers.get(crate::mcp::header::RETRY_LANDING)?;
    Some(match v.as_bytes() {
        b"elsewhere" => "elsewhere",
        b"same" => "same",
        b"untracked" => "untracked",
        _ => "other",
    })
}

/// One leg's answer as the flow records it.
pub(super) struct Sent {
    pub outcome: Outcome,
    pub error: Option<LegError>,
    /// The instance that served it.
    pub instance: Option<Bytes>,
    /// The gateway's retry-landing header ([`steered`]).
    pub steered: Option<&'static str>,
}

/// Send one leg and classify the answer.
pub(super) async fn send_leg(
    ctx: &Ctx,
    tpl: &FlowTemplate,
    principal: &HeaderValue,
    id: u64,
    body: Vec<u8>,
    mode: LegMode,
) -> Sent {
    let mut headers = if mode.bad {
        tpl.bad_headers.clone()
    } else {
        tpl.headers.clone()
    };
    if !ctx.user_authorization {
        headers.insert(http::header::AUTHORIZATION, principal.clone());
    }
    let req = ctx.http.request(headers, body);
    let (ans, mut instance) = match exchange(ctx, req).await {
        Ok(got) => got,
        Err(e) => {
            return Sent {
                outcome: Outcome::Failed { result: None },
                error: Some(e),
                instance: None,
                steered: None,
            }
        }
    };
    let payload = json_payload(
        &ans.body,
        ans.headers
            .get(http::header::CONTENT_TYPE)
            .map(|v| v.as_bytes()),
    );
    let reply = parse_reply(&payload, id);
    if instance.is_none() {
        let meta = match &reply {
            Ok(Reply::Complete { meta, .. })
            | Ok(Reply::InputRequired { meta, .. })
            | Ok(Reply::Task { meta, .. }) => *meta,
            _ => None,
        };
        instance = meta.and_then(instance_from_meta).map(Bytes::from);
    }
    let (outcome, error) = classify(&ans, &payload, reply, mode);
    Sent {
        outcome,
        error,
        instance,
        steered: steered(&ans),
    }
}

/// What an answer means for the flow: the outcome, and the error when the leg failed. A bad
/// request expects its refusal; any other leg fails on an HTTP error status, else its reply
/// says ([`read_reply`]).
fn classify(
    ans: &Answer,
    payload: &[u8],
    reply: Result<Reply<'_>, ReplyProblem>,
    mode: LegMode,
) -> (Outcome, Option<LegError>) {
    let status = ans.status.as_u16();
    let failed = Outcome::Failed { result: None };
    let message = || error_message(payload);
    if mode.bad {
        // Expected: 400 with -32020. The id may be absent from a gateway's rejection.
        let code = match &reply {
            Ok(Reply::Error { code }) => Some(*code),
            _ => None,
        };
        let e = match (status, code) {
            (400, Some(c)) if c == i64::from(codes::HEADER_MISMATCH) => None,
            (200..=299, _) => err("bad_not_rejected", Some(status), code, message()),
            _ => err("bad_wrong_rejection", Some(status), code, message()),
        };
        return (failed, e);
    }
    if !ans.status.is_success() {
        let code = match reply {
            Ok(Reply::Error { code }) => Some(code),
            _ => None,
        };
        let msg = message()
            .or_else(|| (!ans.body.is_empty()).then(|| clip(&String::from_utf8_lossy(&ans.body))));
        return (failed, err("http_status", Some(status), code, msg));
    }
    read_reply(payload, reply, status, mode)
}

/// The outcome of a reply with a success status: its result, input requests or task, or the
/// error it carries.
fn read_reply(
    payload: &[u8],
    reply: Result<Reply<'_>, ReplyProblem>,
    status: u16,
    mode: LegMode,
) -> (Outcome, Option<LegError>) {
    let failed = Outcome::Failed { result: None };
    match reply {
        Err(p) => {
            let msg = format!("{:?}: {}", p, clip(&String::from_utf8_lossy(payload)));
            (failed, err(p.kind(), Some(status), None, Some(msg)))
        }
        Ok(Reply::Error { code }) => (
            failed,
            err(
                "jsonrpc_error",
                Some(status),
                Some(code),
                error_message(payload),
            ),
        ),
        Ok(Reply::Complete { is_error: true, .. }) => tool_error(payload, status, mode),
        Ok(Reply::Complete {
            is_error: false, ..
        }) => {
            let result = if mode.want_result {
                result_value(payload)
            } else {
                None
            };
            (Outcome::Complete { result }, None)
        }
        Ok(Reply::Task { task_id, .. }) => (
            Outcome::Task {
                task_id: task_id.into_owned(),
            },
            None,
        ),
        Ok(Reply::InputRequired {
            input_requests,
            request_state,
            ..
        }) => (
            Outcome::InputRequired {
                input_requests: input_requests.map(str::to_owned),
                request_state: request_state.map(str::to_owned),
            },
            None,
        ),
    }
}

/// A tool result with `isError`: the expected end after a decline or cancel, else a failed
/// flow with the tool's text as the error.
fn tool_error(payload: &[u8], status: u16, mode: LegMode) -> (Outcome, Option<LegError>) {
    let result = result_value(payload);
    if mode.tool_error_ok {
        return (Outcome::Complete { result: None }, None);
    }
    let text = result.as_ref().and_then(result_text);
    let result = if mode.want_result { result } else { None };
    (
        Outcome::Failed { result },
        err("tool_error", Some(status), None, text),
    )
}
