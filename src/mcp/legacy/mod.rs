//! Protocol facts of the 2025 era (revisions 2025-11-25, 2025-06-18, 2025-03-26 over Streamable
//! HTTP) that the gateway bridges to 2026-07-28: which revisions, the session header, how a
//! request head says which era it belongs to, and the pure translations between the two wire
//! shapes (a legacy request into a 2026 request, a 2026 result back into a legacy result, a
//! `server/discover` result into an `initialize` result). No I/O.
//!
//! The rule for intermediaries holds: a legacy request's `Mcp-*` headers are never trusted; a
//! translated request gets its headers from its body, so the stages check and route a request
//! whose headers say exactly what its body says.

use serde_json::{json, Map, Value};

use super::meta;
use super::methods::{self, name_field, NameField};
use super::PROTOCOL_VERSION;

mod raw;
mod wire;
pub use raw::{envelope, name_of_raw, session_meta, to_modern_raw, Envelope, Params, Spans};
pub use wire::legacy_result;

/// The 2025-era revisions the gateway speaks to legacy clients, newest first.
pub const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// The newest 2025-era revision: what the gateway asks for when it opens a legacy session.
pub const LATEST: &str = VERSIONS[0];

/// `Mcp-Session-Id`: the 2025 era's session header (2026-07-28 has no session).
pub const SESSION_ID: &str = "mcp-session-id";
/// [`SESSION_ID`] as a typed name.
pub(crate) const SESSION_ID_NAME: http::HeaderName = http::HeaderName::from_static(SESSION_ID);

/// Which era a request head belongs to, before its body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// A 2026-07-28 request (it claims `Mcp-Method`, or a 2026 version): the stages' business.
    Modern,
    /// A 2025-era request: it carries a session, or claims a 2025 revision, or is a `GET` or
    /// `DELETE` on a session.
    Legacy,
    /// No session, no `Mcp-Method`, no version: `initialize` (legacy) or a header-less 2026
    /// notification; only the body tells.
    Unsure,
}

/// The era of a request head (`method`: the HTTP method).
pub fn era_of(method: &http::Method, headers: &http::HeaderMap) -> Era {
    let version = headers
        .get(super::header::typed::PROTOCOL_VERSION)
        .map(|v| v.as_bytes().trim_ascii());
    // A request that says it speaks a 2025 revision is one, whatever else it carries (some
    // 2025-era clients also send `Mcp-Method`).
    if version.is_some_and(|v| VERSIONS.iter().any(|l| l.as_bytes() == v)) {
        return Era::Legacy;
    }
    // A POST claiming `Mcp-Method` otherwise is a 2026 request, whatever session id it carries
    // (a 2026 server ignores one); unless it claims `initialize` with no version at all: the
    // 2026 revision has no `initialize`, and a 2025-era client that sends the new headers before
    // it knows a version (the TypeScript SDK inside mcp-remote 0.15 does) starts its session.
    // Claimed with a 2026 version, it is a 2026 client's, answered as a 2026 server answers a
    // removed method (404, -32601).
    let post = method == http::Method::POST;
    if let Some(m) = headers.get(super::header::typed::METHOD).filter(|_| post) {
        let initialize = m.as_bytes().trim_ascii() == super::methods::INITIALIZE.as_bytes();
        return match initialize && version.is_none() {
            true => Era::Legacy,
            false => Era::Modern,
        };
    }
    if headers.contains_key(SESSION_ID_NAME) {
        return Era::Legacy;
    }
    match version {
        _ if !post => Era::Modern,
        Some(_) => Era::Modern,
        None => Era::Unsure,
    }
}

/// The revision to answer an `initialize` asking for `requested`: that one when bridged,
/// otherwise the newest (the client then decides whether it can go on, as the 2025 spec says).
pub fn negotiate(requested: Option<&str>) -> &'static str {
    VERSIONS
        .iter()
        .find(|v| Some(**v) == requested)
        .copied()
        .unwrap_or(VERSIONS[0])
}

/// Methods of the 2025 era the gateway answers itself, for a session, without a 2026 request.
/// (`resources/subscribe` and `resources/unsubscribe` have none either: the bridge keeps the
/// URIs for the session's listen request, `resourceSubscriptions`.)
pub fn answered_at_edge(method: &str) -> Option<Value> {
    match method {
        // `ping` and the log level of 2025 have no 2026 request: log levels are per request
        // in `_meta`.
        "ping" | "logging/setLevel" => Some(json!({})),
        _ => None,
    }
}

/// `resources/subscribe` (`Some(true)`) and `resources/unsubscribe` (`Some(false)`): a 2025
/// session's resource subscriptions, which a 2026 fleet takes as a listen request's
/// `resourceSubscriptions`.
pub fn subscribes(method: &str) -> Option<bool> {
    match method {
        "resources/subscribe" => Some(true),
        "resources/unsubscribe" => Some(false),
        _ => None,
    }
}

/// A legacy request turned into the body of a 2026 request: the same method and params, with
/// the per-request `_meta` (protocol version, the session's client capabilities and info) the
/// 2026 revision requires, and `id` as its JSON-RPC id.
pub fn to_modern(
    method: &str,
    params: Option<&Value>,
    id: u64,
    capabilities: &Value,
    client_info: &Value,
    log_level: Option<&str>,
) -> Vec<u8> {
    let body = wire::ModernBody {
        id,
        method,
        params,
        capabilities,
        client_info,
        log_level,
    };
    serde_json::to_vec(&body).expect("a JSON value serializes")
}

/// The `Mcp-Name` a 2026 request of `method` must carry, read from its params (`None`: the
/// method has none, or the params lack it; the gateway's check then answers as for any client).
pub fn name_of(method: &str, params: Option<&Value>) -> Option<String> {
    let field = match name_field(method)? {
        NameField::Name => "name",
        NameField::Uri => "uri",
        NameField::TaskId => "taskId",
    };
    params?.get(field)?.as_str().map(str::to_owned)
}

/// A 2026 result as a legacy client expects it: without the 2026-only `resultType`, `ttlMs`
/// and `cacheScope` members.
pub fn to_legacy_result(mut result: Value) -> Value {
    if let Some(r) = result.as_object_mut() {
        r.remove("resultType");
        r.remove("ttlMs");
        r.remove("cacheScope");
    }
    result
}

/// A 2026 error as a legacy client should read it: a missing client capability (-32021) is
/// declared at `initialize` in the 2025 era, not in each request's `_meta` as the 2026
/// message says; its `data` (the capabilities required) stays.
pub fn to_legacy_error(error: &mut Value) {
    use super::codes;
    if error.get("code").and_then(Value::as_i64)
        != Some(codes::MISSING_REQUIRED_CLIENT_CAPABILITY as i64)
    {
        return;
    }
    let required = error.pointer("/data/requiredCapabilities").cloned();
    let caps = required.as_ref().and_then(Value::as_object).map_or_else(
        || "a client capability".to_string(),
        |m| m.keys().cloned().collect::<Vec<_>>().join(", "),
    );
    error["message"] = json!(format!(
        "This request needs the client capability {caps}, which this session did not declare: declare it in initialize's capabilities and open a new session"
    ));
}

/// The params of the 2026 `subscriptions/listen` that serves a 2025-era client's standalone
/// stream: every list change (a 2025 server sends them all on that stream), and the resources
/// the session's client subscribed to (`uris`, the 2025 `resources/subscribe`).
pub fn standalone_listen_params(uris: &[String]) -> Value {
    let mut n = json!({
        "toolsListChanged": true,
        "promptsListChanged": true,
        "resourcesListChanged": true,
    });
    if !uris.is_empty() {
        n["resourceSubscriptions"] = json!(uris);
    }
    json!({ "notifications": n })
}

/// A message of a 2026 listen stream as a 2025-era standalone stream sends it: list changes and
/// resource updates without the 2026 subscription id; `None` for what a 2025 client has no use
/// for (the acknowledgement, anything else).
pub fn to_standalone(mut message: Value) -> Option<Value> {
    use super::caching::RESOURCES_UPDATED;
    use super::methods::{NOTIFY_PROMPTS_CHANGED, NOTIFY_RESOURCES_CHANGED, NOTIFY_TOOLS_CHANGED};
    let method = message.get("method").and_then(Value::as_str)?;
    let relayed = [
        NOTIFY_TOOLS_CHANGED,
        NOTIFY_PROMPTS_CHANGED,
        NOTIFY_RESOURCES_CHANGED,
        RESOURCES_UPDATED,
    ];
    if !relayed.contains(&method) || message.get("id").is_some() {
        return None;
    }
    let params = message.get_mut("params").and_then(Value::as_object_mut);
    if let Some(p) = params {
        let empty = match p.get_mut("_meta").and_then(Value::as_object_mut) {
            Some(m) => {
                m.remove(meta::SUBSCRIPTION_ID);
                m.is_empty()
            }
            None => false,
        };
        if empty {
            p.remove("_meta");
        }
    }
    Some(message)
}

/// The methods of the 2025 era that the 2026-07-28 revision removed: a 2026 server answers
/// them 404 / -32601, so the gateway does for a pool of 2025-era servers (which would run them).
pub const REMOVED_IN_2026: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// What a 2026-07-28 server answers itself, before a 2026 request reaches a 2025-era server
/// behind the gateway: a removed method (404, -32601), or a protocol version it does not speak
/// (400, -32022, with the supported versions). `None`: the request goes on.
pub fn refused_as_2026(method: &str, version: Option<&str>) -> Option<super::Rejection> {
    if REMOVED_IN_2026.contains(&method) {
        let msg = format!("Method not found: {method} is not a 2026-07-28 method");
        let rej =
            super::Rejection::new(404, super::codes::METHOD_NOT_FOUND, "method-not-found", msg);
        return Some(rej);
    }
    match version {
        Some(v) if v != PROTOCOL_VERSION => Some(super::Rejection::unsupported_version(
            &[PROTOCOL_VERSION],
            v,
        )),
        _ => None,
    }
}

/// The HTTP status a 2026 server gives a JSON-RPC `message` it answers: 404 for "method not
/// found" (as the 2026 revision asks), 200 otherwise.
pub fn status_of(message: &Value) -> u16 {
    let code = message.pointer("/error/code").and_then(Value::as_i64);
    match code == Some(i64::from(super::codes::METHOD_NOT_FOUND)) {
        true => 404,
        false => 200,
    }
}

/// The list changes a 2026 `subscriptions/listen` asks for (`params.notifications`), in the
/// order tools, prompts, resources.
pub fn listen_wants(params: &Map<String, Value>) -> [bool; 3] {
    let asked = params.get("notifications").and_then(Value::as_object);
    let on = |k: &str| asked.and_then(|a| a.get(k)).and_then(Value::as_bool) == Some(true);
    [
        on("toolsListChanged"),
        on("promptsListChanged"),
        on("resourcesListChanged"),
    ]
}

/// The acknowledgement of a listen request `sub` (its id) honouring `wants`.
pub fn listen_ack(wants: [bool; 3], sub: &Value) -> Value {
    let keys = [
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    ];
    let honoured: Map<String, Value> = keys
        .iter()
        .zip(wants)
        .filter(|(_, on)| *on)
        .map(|(k, _)| (k.to_string(), Value::Bool(true)))
        .collect();
    json!({"jsonrpc": "2.0", "method": super::methods::NOTIFY_SUBSCRIPTIONS_ACKNOWLEDGED,
        "params": {"_meta": {meta::SUBSCRIPTION_ID: sub}, "notifications": honoured}})
}

/// A 2025-era server's standalone-stream notification as a 2026 listen stream carries it: a
/// list change the listener asked for, under its subscription id; `None` for anything else.
pub fn to_listen(note: &Value, wants: [bool; 3], sub: &Value) -> Option<Value> {
    use super::methods::{NOTIFY_PROMPTS_CHANGED, NOTIFY_RESOURCES_CHANGED, NOTIFY_TOOLS_CHANGED};
    let method = note.get("method").and_then(Value::as_str)?;
    let kinds = [
        NOTIFY_TOOLS_CHANGED,
        NOTIFY_PROMPTS_CHANGED,
        NOTIFY_RESOURCES_CHANGED,
    ];
    let i = kinds.iter().position(|k| *k == method)?;
    if !wants[i] || note.get("id").is_some() {
        return None;
    }
    Some(
        json!({"jsonrpc": "2.0", "method": method, "params": {"_meta": {meta::SUBSCRIPTION_ID: sub}}}),
    )
}

/// The `initialize` result for a legacy client, from the fleet's `server/discover` result.
pub fn initialize_result(version: &str, discover: &Value) -> Value {
    let capabilities = discover
        .get("capabilities")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let server_info = super::discover::server_info(discover)
        .cloned()
        .unwrap_or_else(|| json!({"name": "mcp-edge", "version": env!("CARGO_PKG_VERSION")}));
    let mut out = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info,
    });
    if let Some(i) = discover.get("instructions").filter(|i| i.is_string()) {
        out["instructions"] = i.clone();
    }
    out
}

/// Whether a client that declared `capabilities` may be asked `method` (an MRTR input
/// request: elicitation, sampling, roots).
pub fn declared(capabilities: &Value, method: &str) -> bool {
    let key = match method {
        methods::ELICITATION_CREATE => "elicitation",
        methods::SAMPLING_CREATE_MESSAGE => "sampling",
        methods::ROOTS_LIST => "roots",
        _ => return false,
    };
    capabilities.get(key).is_some_and(Value::is_object)
}

#[cfg(test)]
mod tests;
