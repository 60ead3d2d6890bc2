//! tools/call and prompts/get: the multi round-trip flow (MRTR) around a tool or prompt.
//!
//! Reads the arguments, checks declared client capabilities and `Mcp-Param-*` headers,
//! verifies a returned `requestState`, runs the tool ([`super::tools`]) and answers
//! `complete`, `input_required` (minting the next sealed state) or an error.

use http::{HeaderMap, Response, StatusCode};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::sync::Arc;

use super::http::{in_band, json_response, reject, Body, Instance};
use super::state::{request_digest, StateCodec, StateError};
use super::tasks::serve as tasks;
use super::tools::{self, Call, Outcome, TaskSupport};
use crate::mcp::caching::param_matches;
use crate::mcp::header::{self, Claim};
use crate::mcp::mrtr::{INPUT_REQUESTS, INPUT_RESPONSES, REQUEST_STATE};
use crate::mcp::{codes, meta, result_body, result_type, Rejection};

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

pub(super) fn missing_caps(required: Value) -> Rejection {
    let names: Vec<&str> = required
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    Rejection::new(
        400,
        codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "capability-missing",
        format!(
            "This request needs the client capabilit{} {} in params._meta[\"{}\"]; declare {} and retry",
            if names.len() == 1 { "y" } else { "ies" },
            names.join(", "),
            meta::CLIENT_CAPABILITIES,
            required
        ),
    )
    .with_data(json!({ "requiredCapabilities": required }))
}

pub(super) async fn mrtr(
    inst: &Arc<Instance>,
    headers: &HeaderMap,
    params: &Map<String, Value>,
    caps: &Map<String, Value>,
    id: &RawValue,
    flow: Flow<'_>,
) -> Response<Body> {
    let shared = &inst.shared;
    let empty = Map::new();
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => {
            return in_band(
                id,
                codes::INVALID_PARAMS,
                "params.arguments must be an object",
                None,
            )
        }
    };
    let with_tasks = tasks::client_has_tasks(caps);
    if flow.task == TaskSupport::Required && !with_tasks {
        return reject(&missing_caps(tasks::required()), Some(id));
    }
    if let Some(required) = tools::missing_capabilities(flow.needs, caps) {
        return reject(&missing_caps(required), Some(id));
    }
    if let Err(rej) = check_param_headers(headers, args, flow.param_headers) {
        return reject(&rej, Some(id));
    }
    let answers = match params.get(INPUT_RESPONSES) {
        None => &empty,
        Some(Value::Object(m)) => {
            if let Some((k, _)) = m.iter().find(|(_, v)| !v.is_object()) {
                return in_band(
                    id,
                    codes::INVALID_PARAMS,
                    &format!("inputResponses.{k} must be an object (the client's result for that input request)"),
                    None,
                );
            }
            m
        }
        Some(_) => return in_band(
            id,
            codes::INVALID_PARAMS,
            "params.inputResponses must be an object mapping each inputRequests key to its answer",
            None,
        ),
    };
    let principal = inst.shared.principal(headers);
    let args_value = Value::Object(args.clone());
    let digest = request_digest(flow.method, flow.name, &args_value);
    let state = match params.get(REQUEST_STATE) {
        None => None,
        Some(Value::String(s)) => match shared.codec.verify(s, &principal, flow.method, &digest) {
            Ok(p) => Some(p),
            Err(e) => {
                let msg = explain_pinned(&shared.codec, s, &e, flow.pinned, args).unwrap_or_else(|| e.message());
                tracing::debug!(tool = flow.name, "requestState refused: {msg}");
                return in_band(id, codes::INVALID_PARAMS, &msg, None);
            }
        },
        Some(_) => {
            return in_band(id, codes::INVALID_PARAMS, "params.requestState must be the string from the previous input_required result, echoed byte for byte", None)
        }
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
    match outcome {
        Outcome::Complete(result) => inst.ok(id, result),
        Outcome::Ask { requests, data } => {
            let round = call.round() + 1;
            let token = shared
                .codec
                .mint(&principal, flow.method, &digest, round, data, &inst.id);
            let result = json!({ INPUT_REQUESTS: requests, REQUEST_STATE: token });
            json_response(
                StatusCode::OK,
                result_body(id, &inst.finish(result_type::INPUT_REQUIRED, result)),
            )
        }
        Outcome::Error(code, msg) => in_band(id, code, &msg, None),
        Outcome::NeedCapabilities(required) => reject(&missing_caps(required), Some(id)),
        Outcome::Special(s) => super::stream::special(inst, params, id, s).await,
        Outcome::Task(job) if with_tasks && flow.task != TaskSupport::Forbidden => {
            tasks::start(inst, &principal, flow.name, job, id)
        }
        Outcome::Task(job) => tasks::inline(inst, flow.name, job, id).await,
        Outcome::Ledger(op) => match tools::settle(op, &shared.ledger).await {
            Ok(result) => inst.ok(id, result),
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
