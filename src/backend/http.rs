//! The HTTP side of one backend instance: the validation ladder and the method dispatch.
//!
//! One endpoint, `POST /mcp`. Checks run in this order (digest §3.2), first failure wins:
//! path (404) → `Origin` / `Host` (403) → HTTP method (405, `Allow: POST`) → `Content-Type`
//! (415) → body size (413) → envelope (400, -32700/-32600) → headers against body, version,
//! `_meta` (400, -32020/-32022/-32602, via [`crate::mcp::check`]) → notification (202) →
//! unknown method (404/-32601) → client capability (400/-32021) → `Mcp-Param-*` (400/-32020)
//! → handler. Errors raised by a handler (unknown tool, bad arguments, rejected
//! `requestState`) go in band with HTTP 200, as the TypeScript SDK does.

use bytes::Bytes;
use futures::channel::mpsc;
use futures::SinkExt;
use http::{header as h, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

use super::state::{principal_of, request_digest, StateCodec, StateError};
use super::tools::{self, Call, Ledger, Outcome, Special, LIST_TTL_MS};
use crate::mcp::header::{self, Claim};
use crate::mcp::methods::*;
use crate::mcp::response::SSE_KEEPALIVE;
use crate::mcp::{
    check_request, codes, envelope, error_body, meta, result_body, result_type, sse_event, Claims,
    Envelope, Rejection, VersionPolicy, DEFAULT_ENDPOINT, PROTOCOL_VERSION,
};

/// The one protocol version this server implements.
pub const POLICY: VersionPolicy = VersionPolicy::Exactly(&[PROTOCOL_VERSION]);

/// How long a client may take to send its body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Interval of SSE keep-alive comments on listen streams.
const KEEPALIVE: Duration = Duration::from_secs(15);

pub type SseRx = mpsc::Receiver<Result<Frame<Bytes>, Infallible>>;
type SseTx = mpsc::Sender<Result<Frame<Bytes>, Infallible>>;
/// Response body: a buffered JSON answer, or an SSE stream fed by a task.
pub type Body = Either<Full<Bytes>, StreamBody<SseRx>>;

/// A list-changed event, fanned out to the listen streams of every instance of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Tools,
    Prompts,
    Resources,
}

/// What the instances of one pool share.
pub struct Shared {
    pub codec: StateCodec,
    pub ledger: Ledger,
    /// Extra allowed `Origin` values (`*` = any); localhost origins are always allowed.
    pub origins: Vec<String>,
    /// Allowed `Host` names (without port); `None` = not checked.
    pub hosts: Option<Vec<String>>,
    pub changes: broadcast::Sender<Change>,
    pub shutdown: watch::Receiver<bool>,
    pub body_limit: usize,
}

/// One instance: its id and the `_meta` every result carries.
pub struct Instance {
    pub id: String,
    pub shared: Arc<Shared>,
    meta: Value,
}

impl Instance {
    pub fn new(id: String, shared: Arc<Shared>) -> Self {
        let meta = json!({
            meta::SERVER_INFO: {"name": "mcp-edge-backend", "version": env!("CARGO_PKG_VERSION")},
            meta::EDGE_INSTANCE: id,
        });
        Instance { id, shared, meta }
    }
}

pub async fn handle(
    inst: Arc<Instance>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    Ok(serve(&inst, req).await)
}

// ---------------------------------------------------------------------------------------------
// Responses

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Either::Left(Full::new(body.into())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(h::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    full(status, "application/json", body)
}

fn reject(rej: &Rejection, id: Option<&RawValue>) -> Response<Body> {
    tracing::debug!(
        reason = rej.reason,
        status = rej.status,
        code = rej.code,
        "rejected: {}",
        rej.message
    );
    let status = StatusCode::from_u16(rej.status).unwrap_or(StatusCode::BAD_REQUEST);
    json_response(status, rej.body(id))
}

/// An in-band JSON-RPC error (HTTP 200).
fn in_band(id: &RawValue, code: i32, message: &str, data: Option<&Value>) -> Response<Body> {
    json_response(StatusCode::OK, error_body(Some(id), code, message, data))
}

fn sse_response(rx: SseRx) -> Response<Body> {
    let mut r = Response::new(Either::Right(StreamBody::new(rx)));
    let hs = r.headers_mut();
    hs.insert(
        h::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    hs.insert(h::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    hs.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

async fn send_frame(tx: &mut SseTx, message: &[u8]) -> bool {
    tx.send(Ok(Frame::data(Bytes::from(sse_event(message)))))
        .await
        .is_ok()
}

impl Instance {
    /// Add `resultType` and the instance `_meta` to a result object.
    fn finish(&self, kind: &str, mut result: Value) -> Value {
        if let Value::Object(m) = &mut result {
            m.insert("resultType".into(), Value::String(kind.into()));
            m.insert("_meta".into(), self.meta.clone());
        }
        result
    }

    fn ok(&self, id: &RawValue, result: Value) -> Response<Body> {
        json_response(
            StatusCode::OK,
            result_body(id, &self.finish(result_type::COMPLETE, result)),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// The ladder

async fn serve(inst: &Arc<Instance>, req: Request<Incoming>) -> Response<Body> {
    let shared = &inst.shared;
    if req.uri().path() != DEFAULT_ENDPOINT {
        return full(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            format!(
                "Not found: {}. The MCP endpoint of this server is POST {DEFAULT_ENDPOINT}.\n",
                req.uri().path()
            ),
        );
    }
    if let Some(r) = check_origin_and_host(req.headers(), shared) {
        return r;
    }
    if req.method() != Method::POST {
        let msg = format!(
            "HTTP method {} is not allowed: MCP 2026-07-28 uses POST {DEFAULT_ENDPOINT} only (no GET stream, no DELETE session)",
            req.method()
        );
        let mut r = json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            error_body(None, codes::INVALID_REQUEST, &msg, None),
        );
        r.headers_mut()
            .insert(h::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    if !is_json(req.headers()) {
        let msg = "Unsupported Content-Type: send the JSON-RPC message with Content-Type: application/json";
        return json_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            error_body(None, codes::INVALID_REQUEST, msg, None),
        );
    }
    let limit = shared.body_limit;
    let too_large = || {
        let msg =
            format!("Request body too large: the limit is {limit} bytes; send smaller arguments");
        json_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            error_body(None, codes::INVALID_REQUEST, &msg, None),
        )
    };
    let declared = req
        .headers()
        .get(h::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large();
    }
    let (parts, body) = req.into_parts();
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, limit).collect()).await
    {
        Ok(Ok(c)) => c.to_bytes(),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return too_large()
        }
        Ok(Err(_)) => {
            let msg = "The request body could not be read (the connection broke mid-body); send the request again";
            return json_response(
                StatusCode::BAD_REQUEST,
                error_body(None, codes::INVALID_REQUEST, msg, None),
            );
        }
        Err(_) => {
            let msg = format!(
                "The request body did not arrive within {}s; send it again",
                BODY_TIMEOUT.as_secs()
            );
            return json_response(
                StatusCode::REQUEST_TIMEOUT,
                error_body(None, codes::INVALID_REQUEST, &msg, None),
            );
        }
    };
    let env = match envelope::parse(&bytes) {
        Ok(env) => env,
        Err(e) => return reject(&e.rejection(), e.id()),
    };
    let claims = Claims::read(&parts.headers);
    if let Err(rej) = check_request(&claims, &env, POLICY) {
        return reject(&rej, env.id.as_deref());
    }
    let Some(id) = env.id.as_deref() else {
        // A notification: nothing in this revision needs one from a client over HTTP.
        let mut r = Response::new(Either::Left(Full::new(Bytes::new())));
        *r.status_mut() = StatusCode::ACCEPTED;
        return r;
    };
    dispatch(inst, &parts.headers, &env, &bytes, id).await
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(v) = headers.get(h::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let media = v.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/json")
}

fn is_loopback_name(host: &str) -> bool {
    matches!(
        host.to_ascii_lowercase().as_str(),
        "localhost" | "127.0.0.1" | "[::1]" | "::1"
    )
}

/// Split `host[:port]` (with `[v6]` literals) and return the host.
fn host_part(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.find(']').map_or(authority, |i| &authority[..=i]);
    }
    authority
        .rsplit_once(':')
        .filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
        .map_or(authority, |(h, _)| h)
}

/// 403 when `Origin` is present and not allowed, or `Host` names a host this server does not
/// answer to (DNS rebinding).
fn check_origin_and_host(headers: &HeaderMap, shared: &Shared) -> Option<Response<Body>> {
    let forbidden = |msg: String| {
        tracing::debug!("forbidden: {msg}");
        Some(json_response(
            StatusCode::FORBIDDEN,
            error_body(None, codes::INVALID_REQUEST, &msg, None),
        ))
    };
    if let Some(origin) = headers.get(h::ORIGIN) {
        let o = origin.to_str().unwrap_or("");
        let allowed = shared
            .origins
            .iter()
            .any(|a| a == "*" || a.eq_ignore_ascii_case(o))
            || o.split_once("://").is_some_and(|(scheme, rest)| {
                matches!(scheme, "http" | "https")
                    && is_loopback_name(host_part(rest.trim_end_matches('/')))
            });
        if !allowed {
            return forbidden(format!(
                "Origin {o:?} is not allowed to call this MCP server; start it with --allow-origin {o} if this page should have access"
            ));
        }
    }
    if let (Some(allowed), Some(host)) = (&shared.hosts, headers.get(h::HOST)) {
        let name = host_part(host.to_str().unwrap_or("").trim());
        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(name)) {
            return forbidden(format!(
                "Host {name:?} is not a name this server answers to (DNS rebinding protection); start it with --allow-host {name} to serve it"
            ));
        }
    }
    None
}

#[derive(Deserialize)]
struct Body0 {
    #[serde(default)]
    params: Map<String, Value>,
}

async fn dispatch(
    inst: &Arc<Instance>,
    headers: &HeaderMap,
    env: &Envelope,
    bytes: &[u8],
    id: &RawValue,
) -> Response<Body> {
    let method = env.method.as_deref().unwrap_or_default();
    let params = match serde_json::from_slice::<Body0>(bytes) {
        Ok(b) => b.params,
        Err(e) => {
            return in_band(
                id,
                codes::INVALID_PARAMS,
                &format!("params could not be read: {e}"),
                None,
            )
        }
    };
    let empty = Map::new();
    let caps = params
        .get("_meta")
        .and_then(|m| m.get(meta::CLIENT_CAPABILITIES))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    match method {
        DISCOVER => inst.ok(id, discover_result()),
        TOOLS_LIST | PROMPTS_LIST | RESOURCES_LIST | RESOURCES_TEMPLATES_LIST => {
            if params.contains_key("cursor") {
                return in_band(id, codes::INVALID_PARAMS, "Invalid cursor: this server returns every list in one page and never issues cursors; send the request without params.cursor", None);
            }
            let (key, items) = match method {
                TOOLS_LIST => ("tools", tools::tools_json().clone()),
                PROMPTS_LIST => ("prompts", tools::prompts_json().clone()),
                RESOURCES_LIST => ("resources", tools::resources_json()),
                _ => ("resourceTemplates", tools::templates_json()),
            };
            inst.ok(id, json!({ key: items, "ttlMs": LIST_TTL_MS, "cacheScope": "public" }))
        }
        RESOURCES_READ => {
            let Some(uri) = env.uri.as_deref() else {
                return in_band(id, codes::INVALID_PARAMS, "params.uri is required (a string)", None);
            };
            match tools::read_resource(uri, &inst.shared.ledger) {
                Some(r) => inst.ok(id, json!({"contents": r.contents, "ttlMs": r.ttl_ms, "cacheScope": r.scope})),
                None => in_band(
                    id,
                    codes::INVALID_PARAMS,
                    &format!("Resource not found: {uri}. resources/list and resources/templates/list show what this server has"),
                    Some(&json!({ "uri": uri })),
                ),
            }
        }
        COMPLETION_COMPLETE => {
            let value = params.get("argument").and_then(|a| a.get("value")).and_then(Value::as_str);
            let ref_ok = params.get("ref").and_then(|r| r.get("type")).and_then(Value::as_str).is_some();
            match (value, ref_ok) {
                (Some(v), true) => inst.ok(id, json!({ "completion": tools::complete_argument(v) })),
                _ => in_band(id, codes::INVALID_PARAMS, "completion/complete needs params.ref {type, name|uri} and params.argument {name, value}", None),
            }
        }
        TOOLS_CALL => {
            let Some(name) = env.name.as_deref() else {
                return in_band(id, codes::INVALID_PARAMS, "params.name is required (the tool name, a string)", None);
            };
            let Some(tool) = tools::tool(name) else {
                return in_band(id, codes::INVALID_PARAMS, &format!("Unknown tool {name:?}: tools/list shows the tools of this server"), None);
            };
            let flow = Flow {
                method: TOOLS_CALL,
                name,
                needs: tool.needs,
                sealed: tool.sealed,
                pinned: tool.pinned,
                param_headers: tool.param_headers,
                run: tool.run,
            };
            mrtr(inst, headers, &params, caps, id, flow).await
        }
        PROMPTS_GET => {
            let Some(name) = env.name.as_deref() else {
                return in_band(id, codes::INVALID_PARAMS, "params.name is required (the prompt name, a string)", None);
            };
            let Some(p) = tools::prompt(name) else {
                return in_band(id, codes::INVALID_PARAMS, &format!("Unknown prompt {name:?}: prompts/list shows the prompts of this server"), None);
            };
            let flow = Flow { method: PROMPTS_GET, name, needs: p.needs, sealed: p.sealed, pinned: &[], param_headers: &[], run: p.run };
            mrtr(inst, headers, &params, caps, id, flow).await
        }
        SUBSCRIPTIONS_LISTEN => listen(inst, &params, id),
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

fn discover_result() -> Value {
    json!({
        "supportedVersions": [PROTOCOL_VERSION],
        "capabilities": {
            "tools": {"listChanged": true},
            "prompts": {"listChanged": true},
            "resources": {"listChanged": true},
            "completions": {},
            "logging": {},
        },
        "instructions": "mcp-edge reference backend: stateless MRTR tools (create_repo, deploy, charge, onboard, summarize, list_workspace, echo). Any instance completes any retry.",
        "ttlMs": LIST_TTL_MS,
        "cacheScope": "public",
    })
}

// ---------------------------------------------------------------------------------------------
// tools/call and prompts/get

struct Flow<'a> {
    method: &'static str,
    name: &'a str,
    needs: &'static [&'static str],
    sealed: bool,
    pinned: &'static [&'static str],
    param_headers: &'static [(&'static str, &'static str)],
    run: fn(&Call) -> Result<Outcome, Outcome>,
}

fn missing_caps(required: Value) -> Rejection {
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

async fn mrtr(
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
    if let Some(required) = tools::missing_capabilities(flow.needs, caps) {
        return reject(&missing_caps(required), Some(id));
    }
    if let Err(rej) = check_param_headers(headers, args, flow.param_headers) {
        return reject(&rej, Some(id));
    }
    let answers = match params.get("inputResponses") {
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
    let principal = principal_of(header::bearer_token(headers));
    let args_value = Value::Object(args.clone());
    let digest = request_digest(flow.method, flow.name, &args_value);
    let state = match params.get("requestState") {
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
        ledger: &shared.ledger,
    };
    let outcome = (flow.run)(&call).unwrap_or_else(|e| e);
    match outcome {
        Outcome::Complete(result) => inst.ok(id, result),
        Outcome::Ask { requests, data } => {
            let round = call.round() + 1;
            let token = shared
                .codec
                .mint(&principal, flow.method, &digest, round, data, &inst.id);
            let result = json!({"inputRequests": requests, "requestState": token});
            json_response(
                StatusCode::OK,
                result_body(id, &inst.finish(result_type::INPUT_REQUIRED, result)),
            )
        }
        Outcome::Error(code, msg) => in_band(id, code, &msg, None),
        Outcome::NeedCapabilities(required) => reject(&missing_caps(required), Some(id)),
        Outcome::Special(s) => special(inst, params, id, s).await,
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

fn param_matches(header_value: &str, arg: &Value) -> bool {
    match arg {
        Value::String(s) => s == header_value,
        Value::Bool(b) => header_value == if *b { "true" } else { "false" },
        Value::Number(n) => match (n.as_f64(), header_value.parse::<f64>()) {
            (Some(a), Ok(b)) => a == b,
            _ => false,
        },
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Special tools: progress, logging, list-changed triggers

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

async fn special(
    inst: &Arc<Instance>,
    params: &Map<String, Value>,
    id: &RawValue,
    s: Special,
) -> Response<Body> {
    let meta_obj = params.get("_meta");
    match s {
        Special::TriggerTools | Special::TriggerPrompts => {
            let (change, what) = if s == Special::TriggerTools {
                (Change::Tools, "tool")
            } else {
                (Change::Prompts, "prompt")
            };
            let listeners = inst.shared.changes.send(change).unwrap_or(0);
            inst.ok(id, json!({"content": [{"type": "text", "text": format!("Announced a {what} list change to {listeners} listen stream(s)")}]}))
        }
        Special::Progress => {
            let done = json!({"content": [{"type": "text", "text": "Progress tool completed"}]});
            let Some(token) = meta_obj
                .and_then(|m| m.get(meta::PROGRESS_TOKEN))
                .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
                .cloned()
            else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                return inst.ok(id, done);
            };
            let final_body = result_body(id, &inst.finish(result_type::COMPLETE, done));
            let (mut tx, rx) = mpsc::channel(4);
            tokio::spawn(async move {
                for (i, p) in [0, 50, 100].into_iter().enumerate() {
                    let n = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": p, "total": 100, "message": format!("{p}% done")}});
                    if !send_frame(&mut tx, n.to_string().as_bytes()).await {
                        return; // the client went away: stop working for it
                    }
                    if i < 2 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                send_frame(&mut tx, &final_body).await;
            });
            sse_response(rx)
        }
        Special::Logging => {
            let done = json!({"content": [{"type": "text", "text": "Logging tool completed"}]});
            let Some(level) = meta_obj.and_then(|m| m.get(meta::LOG_LEVEL)) else {
                return inst.ok(id, done);
            };
            let Some(rank) = level
                .as_str()
                .and_then(|l| LOG_LEVELS.iter().position(|x| *x == l))
            else {
                return in_band(
                    id,
                    codes::INVALID_PARAMS,
                    &format!(
                        "Invalid log level {level} in _meta[\"{}\"]; use one of {}",
                        meta::LOG_LEVEL,
                        LOG_LEVELS.join(", ")
                    ),
                    None,
                );
            };
            let final_body = result_body(id, &inst.finish(result_type::COMPLETE, done));
            let (mut tx, rx) = mpsc::channel(4);
            tokio::spawn(async move {
                // This tool logs at info level: send only when the client asked for info or lower.
                if rank <= 1 {
                    for msg in ["test_logging_tool started", "test_logging_tool finished"] {
                        let n = json!({"jsonrpc": "2.0", "method": "notifications/message",
                            "params": {"level": "info", "logger": "test_logging_tool", "data": msg}});
                        if !send_frame(&mut tx, n.to_string().as_bytes()).await {
                            return;
                        }
                    }
                }
                send_frame(&mut tx, &final_body).await;
            });
            sse_response(rx)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// subscriptions/listen

fn listen(inst: &Arc<Instance>, params: &Map<String, Value>, id: &RawValue) -> Response<Body> {
    let filter = params.get("notifications").and_then(Value::as_object);
    let wants = |k: &str| {
        filter
            .and_then(|f| f.get(k))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let (tools_on, prompts_on, resources_on) = (
        wants("toolsListChanged"),
        wants("promptsListChanged"),
        wants("resourcesListChanged"),
    );
    let mut honoured = Map::new();
    for (k, on) in [
        ("toolsListChanged", tools_on),
        ("promptsListChanged", prompts_on),
        ("resourcesListChanged", resources_on),
    ] {
        if on {
            honoured.insert(k.into(), Value::Bool(true));
        }
    }
    let sub_id: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
    let sub_meta = json!({ meta::SUBSCRIPTION_ID: sub_id });
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": sub_meta, "notifications": honoured}});
    let end = result_body(
        id,
        &json!({"resultType": result_type::COMPLETE, "_meta": sub_meta}),
    );
    let mut changes = inst.shared.changes.subscribe();
    let mut shutdown = inst.shared.shutdown.clone();
    let (mut tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        if !send_frame(&mut tx, ack.to_string().as_bytes()).await {
            return;
        }
        loop {
            if *shutdown.borrow_and_update() {
                send_frame(&mut tx, &end).await;
                return;
            }
            tokio::select! {
                ch = changes.recv() => {
                    let method = match ch {
                        Ok(Change::Tools) if tools_on => "notifications/tools/list_changed",
                        Ok(Change::Prompts) if prompts_on => "notifications/prompts/list_changed",
                        Ok(Change::Resources) if resources_on => "notifications/resources/list_changed",
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(broadcast::error::RecvError::Closed) => { send_frame(&mut tx, &end).await; return; }
                    };
                    let n = json!({"jsonrpc": "2.0", "method": method, "params": {"_meta": sub_meta}});
                    if !send_frame(&mut tx, n.to_string().as_bytes()).await { return; }
                }
                r = shutdown.changed() => {
                    if r.is_err() { send_frame(&mut tx, &end).await; return; }
                }
                _ = tokio::time::sleep(KEEPALIVE) => {
                    if tx.send(Ok(Frame::data(Bytes::from_static(SSE_KEEPALIVE)))).await.is_err() { return; }
                }
            }
        }
    });
    sse_response(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_parts() {
        assert_eq!(host_part("127.0.0.1:7001"), "127.0.0.1");
        assert_eq!(host_part("[::1]:80"), "[::1]");
        assert_eq!(host_part("localhost"), "localhost");
        assert_eq!(host_part("evil.example.com"), "evil.example.com");
    }

    #[test]
    fn params_compare_by_type() {
        assert!(param_matches("prod", &json!("prod")));
        assert!(!param_matches("Prod", &json!("prod")));
        assert!(param_matches("42", &json!(42.0)));
        assert!(param_matches("true", &json!(true)));
        assert!(!param_matches("1", &json!(true)));
    }
}
