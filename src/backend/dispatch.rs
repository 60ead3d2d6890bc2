//! The method dispatch of the reference backend: which answer each JSON-RPC method gets once
//! the request passed the ladder of [`super::http`]. Lists, resources, completion and
//! discovery are answered here; tools/call and prompts/get go to [`super::mrtr`], listen
//! streams to [`super::stream`].

use http::HeaderMap;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::sync::Arc;

use super::instance::Instance;
use super::mrtr::{mrtr, Flow};
use super::respond::{in_band, reject, Body};
use super::tools::{self, TaskSupport, LIST_TTL_MS};
use crate::mcp::methods::*;
use crate::mcp::tasks;
use crate::mcp::{codes, meta, Envelope, Rejection, PROTOCOL_VERSION};
use ::http::Response;

/// Answer one request that passed the ladder, by its method.
pub(super) async fn dispatch(
    inst: &Arc<Instance>,
    headers: &HeaderMap,
    env: &Envelope,
    params: Map<String, Value>,
    id: &RawValue,
) -> Response<Body> {
    let method = env.method.as_deref().unwrap_or_default();
    let empty = Map::new();
    let caps = params
        .get("_meta")
        .and_then(|m| m.get(meta::CLIENT_CAPABILITIES))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    match method {
        DISCOVER => inst.ok(id, discover_result()),
        TOOLS_LIST | PROMPTS_LIST | RESOURCES_LIST | RESOURCES_TEMPLATES_LIST => list(inst, method, &params, id),
        RESOURCES_READ => read_resource(inst, env, id).await,
        COMPLETION_COMPLETE => complete(inst, &params, id),
        TOOLS_CALL => {
            let flow = match tool_flow(env) {
                Ok(flow) => flow,
                Err(msg) => return in_band(id, codes::INVALID_PARAMS, &msg, None),
            };
            mrtr(inst, headers, &params, caps, id, flow).await
        }
        PROMPTS_GET => {
            let flow = match prompt_flow(env) {
                Ok(flow) => flow,
                Err(msg) => return in_band(id, codes::INVALID_PARAMS, &msg, None),
            };
            mrtr(inst, headers, &params, caps, id, flow).await
        }
        tasks::GET | tasks::UPDATE | tasks::CANCEL => {
            let principal = inst.shared.principal(headers);
            super::tasks::serve::handle(inst, method, env.task_id.as_deref(), &principal, &params, caps, id)
        }
        SUBSCRIPTIONS_LISTEN => super::stream::listen(inst, &params, id),
        _ => reject(
            &Rejection::new(
                404,
                codes::METHOD_NOT_FOUND,
                "method-not-found",
                format!("Method not found: {method:?}. This server speaks MCP {PROTOCOL_VERSION} only (no initialize, ping or sessions); server/discover lists what it supports"),
            ),
            Some(id),
        ),
    }
}

/// tools/list, prompts/list, resources/list, resources/templates/list: every item in one page.
fn list(
    inst: &Arc<Instance>,
    method: &str,
    params: &Map<String, Value>,
    id: &RawValue,
) -> Response<Body> {
    if params.contains_key("cursor") {
        return in_band(id, codes::INVALID_PARAMS, "Invalid cursor: this server returns every list in one page and never issues cursors; send the request without params.cursor", None);
    }
    let (key, items) = match method {
        TOOLS_LIST => ("tools", tools::tools_json().clone()),
        PROMPTS_LIST => ("prompts", tools::prompts_json().clone()),
        RESOURCES_LIST => ("resources", tools::resources_json()),
        _ => ("resourceTemplates", tools::templates_json()),
    };
    inst.ok(
        id,
        json!({ key: items, "ttlMs": LIST_TTL_MS, "cacheScope": "public" }),
    )
}

/// resources/read: a static resource, or a cart's charges counted in the ledger.
async fn read_resource(inst: &Arc<Instance>, env: &Envelope, id: &RawValue) -> Response<Body> {
    let Some(uri) = env.uri.as_deref() else {
        return in_band(
            id,
            codes::INVALID_PARAMS,
            "params.uri is required (a string)",
            None,
        );
    };
    let read = match tools::read_resource(uri) {
        Some(tools::Read::Ready(r)) => Some(r),
        Some(tools::Read::Charges(cart)) => match inst.shared.ledger.count(&cart).await {
            Ok(n) => Some(tools::charges_result(uri, &cart, n)),
            Err(msg) => return in_band(id, codes::INTERNAL_ERROR, &msg, None),
        },
        None => None,
    };
    match read {
        Some(r) => inst.ok(id, json!({"contents": r.contents, "ttlMs": r.ttl_ms, "cacheScope": r.scope})),
        None => in_band(
            id,
            codes::INVALID_PARAMS,
            &format!("Resource not found: {uri}. resources/list and resources/templates/list show what this server has"),
            Some(&json!({ "uri": uri })),
        ),
    }
}

/// completion/complete: values for an argument of a prompt or resource template.
fn complete(inst: &Arc<Instance>, params: &Map<String, Value>, id: &RawValue) -> Response<Body> {
    let value = params
        .get("argument")
        .and_then(|a| a.get("value"))
        .and_then(Value::as_str);
    let ref_ok = params
        .get("ref")
        .and_then(|r| r.get("type"))
        .and_then(Value::as_str)
        .is_some();
    match (value, ref_ok) {
        (Some(v), true) => inst.ok(id, json!({ "completion": tools::complete_argument(v) })),
        _ => in_band(id, codes::INVALID_PARAMS, "completion/complete needs params.ref {type, name|uri} and params.argument {name, value}", None),
    }
}

/// The MRTR flow of the tool a tools/call names; `Err` is the message of the in-band refusal
/// when it names none.
fn tool_flow(env: &Envelope) -> Result<Flow<'_>, Cow<'static, str>> {
    let Some(name) = env.name.as_deref() else {
        return Err("params.name is required (the tool name, a string)".into());
    };
    let Some(tool) = tools::tool(name) else {
        return Err(
            format!("Unknown tool {name:?}: tools/list shows the tools of this server").into(),
        );
    };
    Ok(Flow {
        method: TOOLS_CALL,
        name,
        needs: tool.needs,
        sealed: tool.sealed,
        pinned: tool.pinned,
        param_headers: tool.param_headers,
        task: tool.task,
        run: tool.run,
    })
}

/// The MRTR flow of the prompt a prompts/get names; `Err` is the message of the in-band
/// refusal when it names none.
fn prompt_flow(env: &Envelope) -> Result<Flow<'_>, Cow<'static, str>> {
    let Some(name) = env.name.as_deref() else {
        return Err("params.name is required (the prompt name, a string)".into());
    };
    let Some(p) = tools::prompt(name) else {
        return Err(format!(
            "Unknown prompt {name:?}: prompts/list shows the prompts of this server"
        )
        .into());
    };
    Ok(Flow {
        method: PROMPTS_GET,
        name,
        needs: p.needs,
        sealed: p.sealed,
        pinned: &[],
        param_headers: &[],
        task: TaskSupport::Forbidden,
        run: p.run,
    })
}

/// The server/discover result: versions, capabilities, instructions.
fn discover_result() -> Value {
    json!({
        "supportedVersions": [PROTOCOL_VERSION],
        "capabilities": {
            "tools": {"listChanged": true},
            "prompts": {"listChanged": true},
            "resources": {"listChanged": true, "subscribe": true},
            "completions": {},
            "logging": {},
            "extensions": { tasks::EXTENSION: {} },
        },
        "instructions": "mcp-edge reference backend: stateless MRTR tools (create_repo, deploy, charge, onboard, summarize, list_workspace, echo). Any instance completes any retry.",
        "ttlMs": LIST_TTL_MS,
        "cacheScope": "public",
    })
}
