//! tools/call and prompts/get: the multi round-trip flow (MRTR) around a tool or prompt.
//!
//! Reads the arguments, checks declared client capabilities and `Mcp-Param-*` headers,
//! verifies a returned `requestState`, runs the tool ([`super::tools`]) and answers
//! `complete`, `input_required` (minting the next sealed state) or an error.

use http::{HeaderMap, Response, StatusCode};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::sync::Arc;

use super::instance::{Change, Instance};
use super::respond::{in_band, json_response, missing_caps, reject, Body};
use super::state::{request_digest, StateCodec, StateError, StatePayload};
use super::tasks::serve as tasks;
use super::tools::{self, Call, Outcome, TaskSupport};
use crate::mcp::caching::param_matches;
use crate::mcp::header::{self, Claim};
use crate::mcp::mrtr::{INPUT_REQUESTS, INPUT_RESPONSES, REQUEST_STATE};
use crate::mcp::{codes, result_body, result_type, Rejection};

// ---------------------------------------------------------------------------------------------
// tools/call and prompts/get

pub(super) struct Flow<'a> {
    pub(super) method: &'static str,
    pub(super) name: &'a str,
    pub(super) needs: &'static [&'static str],
    pub(super) sealed: bool,
    pub(super) pinned: &'static [&'static str],
    pub(super) param_headers: &'static [(&'static str, &'static str)],
    pub(super) task: TaskSupport,
    pub(super) run: fn(&Call) -> Result<Outcome, Outcome>,
}

/// One tools/call or prompts/get leg: its arguments and capabilities checked, the returned
/// `requestState` verified, the tool or prompt run, and its outcome answered.
pub(super) async fn mrtr(
    inst: &Arc<Instance>,
    headers: &HeaderMap,
    params: &Map<String, Value>,
    caps: &Map<String, Value>,
    id: &RawValue,
    flow: Flow<'_>,
) -> Response<Body> {
    let empty = Map::new();
    let args = match arguments(params, &empty) {
        Ok(args) => args,
        Err(msg) => return in_band(id, codes::INVALID_PARAMS, &msg, None),
    };
    let with_tasks = tasks::client_has_tasks(caps);
    if let Err(rej) = check_capabilities(headers, args, caps, with_tasks, &flow) {
        return reject(&rej, Some(id));
    }
    let answers = match input_responses(params, &empty) {
        Ok(answers) => answers,
        Err(msg) => return in_band(id, codes::INVALID_PARAMS, &msg, None),
    };
    let principal = inst.shared.principal(headers);
    let args_value = Value::Object(args.clone());
    let digest = request_digest(flow.method, flow.name, &args_value);
    let state = match request_state(inst, params, &principal, &digest, args, &flow) {
        Ok(state) => state,
        Err(msg) => return in_band(id, codes::INVALID_PARAMS, &msg, None),
    };
    let visible = if flow.sealed && state.is_none() {
        &empty
    } else {
        answers
    };
    let call = Call {
        name: flow.name,
        args,
        caps,
        answers: visible,
        state: state.as_ref(),
    };
    let outcome = (flow.run)(&call).unwrap_or_else(|e| e);
    let leg = Leg {
        inst,
        params,
        id,
        principal: &principal,
        digest: &digest,
        round: call.round() + 1,
        with_tasks,
    };
    answer(leg, &flow, outcome).await
}

/// `params.arguments` (absent or null: none); `Err` is the message of the in-band refusal of
/// one that is no object.
fn arguments<'a>(
    params: &'a Map<String, Value>,
    empty: &'a Map<String, Value>,
) -> Result<&'a Map<String, Value>, Cow<'static, str>> {
    match params.get("arguments") {
        None | Some(Value::Null) => Ok(empty),
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err("params.arguments must be an object".into()),
    }
}

/// What the flow needs of the client: the tasks capability when tasks are required, the
/// declared capabilities, and `Mcp-Param-*` headers that agree with the arguments.
fn check_capabilities(
    headers: &HeaderMap,
    args: &Map<String, Value>,
    caps: &Map<String, Value>,
    with_tasks: bool,
    flow: &Flow<'_>,
) -> Result<(), Rejection> {
    if flow.task == TaskSupport::Required && !with_tasks {
        return Err(missing_caps(tasks::required()));
    }
    if let Some(required) = tools::missing_capabilities(flow.needs, caps) {
        return Err(missing_caps(required));
    }
    check_param_headers(headers, args, flow.param_headers)
}

/// `params.inputResponses` (absent: none), each answer an object; `Err` is the message of the
/// in-band refusal.
fn input_responses<'a>(
    params: &'a Map<String, Value>,
    empty: &'a Map<String, Value>,
) -> Result<&'a Map<String, Value>, Cow<'static, str>> {
    match params.get(INPUT_RESPONSES) {
        None => Ok(empty),
        Some(Value::Object(m)) => {
            if let Some((k, _)) = m.iter().find(|(_, v)| !v.is_object()) {
                return Err(format!("inputResponses.{k} must be an object (the client's result for that input request)").into());
            }
            Ok(m)
        }
        Some(_) => Err(
            "params.inputResponses must be an object mapping each inputRequests key to its answer"
                .into(),
        ),
    }
}

/// The returned `requestState`, verified for this caller and request (absent: a first leg);
/// `Err` is the message of the in-band refusal.
fn request_state(
    inst: &Instance,
    params: &Map<String, Value>,
    principal: &str,
    digest: &str,
    args: &Map<String, Value>,
    flow: &Flow<'_>,
) -> Result<Option<StatePayload>, Cow<'static, str>> {
    let codec = &inst.shared.codec;
    match params.get(REQUEST_STATE) {
        None => Ok(None),
        Some(Value::String(s)) => match codec.verify(s, principal, flow.method, digest) {
            Ok(p) => Ok(Some(p)),
            Err(e) => {
                let msg = explain_pinned(codec, s, &e, flow.pinned, args).unwrap_or_else(|| e.message());
                tracing::debug!(tool = flow.name, "requestState refused: {msg}");
                Err(msg.into())
            }
        },
        Some(_) => Err("params.requestState must be the string from the previous input_required result, echoed byte for byte".into()),
    }
}

/// What answering a leg's outcome needs of the leg.
struct Leg<'a> {
    inst: &'a Arc<Instance>,
    params: &'a Map<String, Value>,
    id: &'a RawValue,
    principal: &'a str,
    digest: &'a str,
    /// The round a next `requestState` is minted for.
    round: u32,
    /// The client declared the tasks capability.
    with_tasks: bool,
}

/// Answer a tool's outcome: a result, `input_required` with the next sealed state, an error, a
/// stream, a task (started, or run inline for a client without tasks), or a ledger operation.
async fn answer(leg: Leg<'_>, flow: &Flow<'_>, outcome: Outcome) -> Response<Body> {
    let Leg { inst, id, .. } = leg;
    match outcome {
        Outcome::Complete(result) => inst.ok(id, result),
        Outcome::Ask { requests, data } => {
            let token = inst.shared.codec.mint(
                leg.principal,
                flow.method,
                leg.digest,
                leg.round,
                data,
                &inst.id,
            );
            let result = json!({ INPUT_REQUESTS: requests, REQUEST_STATE: token });
            json_response(
                StatusCode::OK,
                result_body(id, &inst.finish(result_type::INPUT_REQUIRED, result)),
            )
        }
        Outcome::Error(code, msg) => in_band(id, code, &msg, None),
        Outcome::NeedCapabilities(required) => reject(&missing_caps(required), Some(id)),
        Outcome::Special(s) => super::stream::special(inst, leg.params, id, s).await,
        Outcome::Task(job) if leg.with_tasks && flow.task != TaskSupport::Forbidden => {
            tasks::start(inst, leg.principal, flow.name, job, id)
        }
        Outcome::Task(job) => tasks::inline(inst, job, id).await,
        Outcome::Ledger(op) => match tools::settle(op, &inst.shared.ledger).await {
            Ok((result, updated)) => {
                if let Some(uri) = updated {
                    // No listener is no error: the change is only announced.
                    let _ = inst.shared.changes.send(Change::Resource(uri.into()));
                }
                inst.ok(id, result)
            }
            Err(msg) => in_band(id, codes::INTERNAL_ERROR, &msg, None),
        },
    }
}

/// A clearer message when a retry changed an argument that the state pins.
fn explain_pinned(
    codec: &StateCodec,
    state: &str,
    err: &StateError,
    pinned: &[&str],
    args: &Map<String, Value>,
) -> Option<String> {
    if *err != StateError::OtherRequest || pinned.is_empty() {
        return None;
    }
    let p = codec.open(state).ok()?;
    pinned.iter().find_map(|k| {
        let sealed = p.data.get(*k)?;
        let now = args.get(*k).unwrap_or(&Value::Null);
        (sealed != now).then(|| {
            format!(
                "Invalid requestState: it was issued for {k} {sealed} but this retry has arguments.{k} {now}; the {k} cannot change between rounds. Retry with {k} {sealed}, or start over without requestState"
            )
        })
    })
}

/// `Mcp-Param-*` headers against the arguments marked `x-mcp-header`.
fn check_param_headers(
    headers: &HeaderMap,
    args: &Map<String, Value>,
    pairs: &[(&str, &str)],
) -> Result<(), Rejection> {
    for (arg, suffix) in pairs {
        let name = format!("{}{}", header::PARAM_PREFIX, suffix.to_ascii_lowercase());
        let shown = format!("Mcp-Param-{suffix}");
        let data = json!({ "header": shown });
        let want = args.get(*arg).filter(|v| !v.is_null());
        match (header::claim(headers, &name, true), want) {
            (Claim::Invalid(p), _) => {
                return Err(Rejection::header_mismatch("mcp-param-invalid", format!("The {shown} header {}", p.describe())).with_data(data))
            }
            (Claim::Absent, Some(_)) => {
                return Err(Rejection::header_mismatch(
                    "mcp-param-missing",
                    format!("The {shown} header is required because arguments.{arg} is present (x-mcp-header); send it with the same value"),
                )
                .with_data(data))
            }
            (Claim::Present(hv), None) => {
                return Err(Rejection::header_mismatch(
                    "mcp-param-mismatch",
                    format!("The {shown} header {:?} is present but arguments.{arg} is absent; send both or neither", hv.as_ref()),
                )
                .with_data(data))
            }
            (Claim::Present(hv), Some(v)) if !param_matches(&hv, v) => {
                return Err(Rejection::header_mismatch(
                    "mcp-param-mismatch",
                    format!("The {shown} header {:?} does not match arguments.{arg} {v}", hv.as_ref()),
                )
                .with_data(data))
            }
            _ => {}
        }
    }
    Ok(())
}
