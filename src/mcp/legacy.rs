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

/// The 2025-era revisions the gateway speaks to legacy clients, newest first.
pub const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// The newest 2025-era revision: what the gateway asks for when it opens a legacy session.
pub const LATEST: &str = VERSIONS[0];

/// `Mcp-Session-Id`: the 2025 era's session header (2026-07-28 has no session).
pub const SESSION_ID: &str = "mcp-session-id";

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
        .get(super::header::PROTOCOL_VERSION)
        .map(|v| v.as_bytes().trim_ascii());
    // A request that says it speaks a 2025 revision is one, whatever else it carries (some
    // 2025-era clients also send `Mcp-Method`).
    if version.is_some_and(|v| VERSIONS.iter().any(|l| l.as_bytes() == v)) {
        return Era::Legacy;
    }
    // A POST claiming `Mcp-Method` otherwise is a 2026 request, whatever session id it carries
    // (a 2026 server ignores one); unless it claims `initialize`, which the 2026 revision does
    // not have: a 2025-era client that sends the new headers before it knows a version (the
    // TypeScript SDK inside mcp-remote 0.15 does) starts its session.
    let post = method == http::Method::POST;
    if let Some(m) = headers.get(super::header::METHOD).filter(|_| post) {
        return match m.as_bytes().trim_ascii() == super::methods::INITIALIZE.as_bytes() {
            true => Era::Legacy,
            false => Era::Modern,
        };
    }
    if headers.contains_key(SESSION_ID) {
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
pub fn answered_at_edge(method: &str) -> Option<Value> {
    match method {
        // `ping` and the session-scoped settings of 2025 have no 2026 request: log levels are
        // per request in `_meta`, subscriptions are `subscriptions/listen`.
        "ping" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => {
            Some(json!({}))
        }
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
    let mut params = match params {
        Some(Value::Object(p)) => p.clone(),
        _ => Map::new(),
    };
    let m = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    let m = m.as_object_mut().expect("made an object above");
    m.insert(meta::PROTOCOL_VERSION.into(), PROTOCOL_VERSION.into());
    m.insert(meta::CLIENT_CAPABILITIES.into(), capabilities.clone());
    if !client_info.is_null() {
        m.insert(meta::CLIENT_INFO.into(), client_info.clone());
    }
    if let Some(l) = log_level {
        m.insert(meta::LOG_LEVEL.into(), l.into());
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
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

/// The params of the 2026 `subscriptions/listen` that serves a 2025-era client's standalone
/// stream: every list change (a 2025 server sends them all on that stream; a 2025 client's
/// resource subscriptions are not carried, the gateway keeps no session state for them).
pub fn standalone_listen_params() -> Value {
    json!({"notifications": {
        "toolsListChanged": true,
        "promptsListChanged": true,
        "resourcesListChanged": true,
    }})
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
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderValue, Method};

    #[test]
    fn a_listen_stream_becomes_a_standalone_stream_of_list_changes() {
        let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {"_meta": {meta::SUBSCRIPTION_ID: 1}}});
        assert_eq!(to_standalone(ack), None);
        let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {meta::SUBSCRIPTION_ID: 1}}});
        assert_eq!(
            to_standalone(changed),
            Some(
                json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}})
            )
        );
        let updated = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a", "_meta": {meta::SUBSCRIPTION_ID: 1, "x": 2}}});
        assert_eq!(
            to_standalone(updated).unwrap()["params"],
            json!({"uri": "file:///a", "_meta": {"x": 2}})
        );
        let log = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}});
        assert_eq!(to_standalone(log), None);
        let done = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}});
        assert_eq!(to_standalone(done), None);
    }

    fn head(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn the_head_tells_the_era_or_says_it_cannot() {
        let post = Method::POST;
        assert_eq!(
            era_of(&post, &head(&[("mcp-session-id", "x")])),
            Era::Legacy
        );
        assert_eq!(
            era_of(&Method::GET, &head(&[("mcp-session-id", "x")])),
            Era::Legacy
        );
        assert_eq!(era_of(&Method::GET, &head(&[])), Era::Modern);
        assert_eq!(
            era_of(&post, &head(&[("mcp-protocol-version", " 2025-06-18")])),
            Era::Legacy
        );
        assert_eq!(
            era_of(&post, &head(&[("mcp-protocol-version", "2026-07-28")])),
            Era::Modern
        );
        assert_eq!(
            era_of(&post, &head(&[("mcp-method", "tools/list")])),
            Era::Modern
        );
        assert_eq!(era_of(&post, &head(&[])), Era::Unsure);
        // A stray session id on a 2026 request is ignored, as a 2026 server ignores it.
        let stray = [("mcp-session-id", "x"), ("mcp-method", "tools/list")];
        assert_eq!(era_of(&post, &head(&stray)), Era::Modern);
        // Some 2025-era clients send Mcp-Method too: the version they claim decides.
        let both = [
            ("mcp-method", "initialize"),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        assert_eq!(era_of(&post, &head(&both)), Era::Legacy);
        // ...and before a version is known, `initialize` (which 2026 does not have) says it.
        let first = [("mcp-method", "initialize")];
        assert_eq!(era_of(&post, &head(&first)), Era::Legacy);
        let padded = [("mcp-method", " initialize ")];
        assert_eq!(era_of(&post, &head(&padded)), Era::Legacy);
        assert_eq!(era_of(&Method::GET, &head(&first)), Era::Modern);
    }

    #[test]
    fn a_legacy_call_becomes_a_2026_call_with_the_sessions_meta() {
        let params = json!({"name": "echo", "arguments": {"a": 1}, "_meta": {"progressToken": 5}});
        let caps = json!({"elicitation": {}});
        let body = to_modern(
            "tools/call",
            Some(&params),
            9,
            &caps,
            &json!({"name": "c"}),
            Some("debug"),
        );
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], 9);
        assert_eq!(v["params"]["arguments"]["a"], 1);
        let m = &v["params"]["_meta"];
        assert_eq!(m["progressToken"], 5);
        assert_eq!(m[meta::PROTOCOL_VERSION], PROTOCOL_VERSION);
        assert_eq!(m[meta::CLIENT_CAPABILITIES], caps);
        assert_eq!(m[meta::LOG_LEVEL], "debug");
        assert_eq!(
            name_of("tools/call", Some(&params)).as_deref(),
            Some("echo")
        );
        assert_eq!(name_of("tools/list", Some(&params)), None);
    }

    #[test]
    fn versions_negotiate_to_a_bridged_one() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2024-11-05")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }

    #[test]
    fn results_lose_their_2026_members_and_discover_becomes_initialize() {
        let r = to_legacy_result(json!({"resultType": "complete", "ttlMs": 0, "tools": []}));
        assert_eq!(r, json!({"tools": []}));
        let d = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "instructions": "hi",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "b", "version": "1"}}});
        let i = initialize_result("2025-11-25", &d);
        assert_eq!(i["serverInfo"]["name"], "b");
        assert_eq!(i["capabilities"], json!({"tools": {}}));
        assert_eq!(i["instructions"], "hi");
        assert!(declared(&json!({"sampling": {}}), "sampling/createMessage"));
        assert!(!declared(&json!({}), "roots/list"));
    }
}
