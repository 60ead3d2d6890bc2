//! The wire of `mcp-edge init`'s questions: the headers and body of a 2026-07-28 request (the
//! `Mcp-*` headers and the `_meta` the spec requires) or of a 2025-era one (its version header and
//! session id), one bounded exchange over the load tester's client, and its answer sorted into
//! what the report needs ([`Reply`]).

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Map, Value};

use crate::loadtest::client::{Answer, Http};
use crate::loadtest::reply::json_payload;
use crate::loadtest::template::client_capabilities;
use crate::mcp::legacy::LATEST as LEGACY_VERSION;
use crate::mcp::{self, header, meta};

/// One exchange's outcome.
pub(crate) enum Reply {
    Result(Value, HeaderMap),
    /// A JSON-RPC error (HTTP status, code, message).
    Error(u16, i64, String),
    /// 401 with its `WWW-Authenticate`.
    Unauthorized(Option<String>),
    /// Not a JSON-RPC answer (HTTP status, a clip of the body).
    NotMcp(u16, String),
    /// No answer at all (refused, timeout, reset): why.
    Failed(String),
}

fn hv(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// The headers of a request of `method`: 2026-07-28 (`Mcp-Method`, the version header), or,
/// with `session`, the 2025 era (its version, and the session id when the server gave one).
pub(crate) fn headers(method: &str, session: Option<Option<&str>>) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        http::header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    let version = HeaderName::from_static(header::PROTOCOL_VERSION);
    match session {
        None => {
            h.insert(version, HeaderValue::from_static(mcp::PROTOCOL_VERSION));
            h.insert(HeaderName::from_static(header::METHOD), hv(method));
        }
        Some(s) => {
            if method != "initialize" {
                h.insert(version, HeaderValue::from_static(LEGACY_VERSION));
            }
            if let Some(id) = s {
                h.insert(HeaderName::from_static("mcp-session-id"), hv(id));
            }
        }
    }
    h
}

/// The body of a request: `params` plus, in the 2026 era, the required `_meta`.
pub(crate) fn body(
    id: &str,
    method: &str,
    mut params: Map<String, Value>,
    modern: bool,
) -> Vec<u8> {
    if modern {
        params.insert(
            "_meta".into(),
            json!({meta::PROTOCOL_VERSION: mcp::PROTOCOL_VERSION,
                   meta::CLIENT_CAPABILITIES: client_capabilities()}),
        );
    }
    let mut v = json!({"jsonrpc": "2.0", "method": method, "params": params});
    if !id.is_empty() {
        v["id"] = json!(id);
    }
    serde_json::to_vec(&v).expect("a JSON value serializes")
}

/// Send one request and sort its answer.
pub(crate) async fn exchange(http: &Http, timeout: Duration, h: HeaderMap, b: Vec<u8>) -> Reply {
    let ans: Answer = match tokio::time::timeout(timeout, http.send(http.request(h, b))).await {
        Err(_) => return Reply::Failed(format!("timeout: no answer within {timeout:?}")),
        Ok(Err(e)) => return Reply::Failed(describe_failure(&e)),
        Ok(Ok(a)) => a,
    };
    let status = ans.status.as_u16();
    if status == 401 {
        let www = ans
            .headers
            .get(http::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        return Reply::Unauthorized(www);
    }
    let ct = ans
        .headers
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.as_bytes());
    let payload = json_payload(&ans.body, ct);
    let Ok(v) = serde_json::from_slice::<Value>(&payload) else {
        let text = String::from_utf8_lossy(&ans.body);
        return Reply::NotMcp(status, crate::loadtest::tally::clip(text.trim()));
    };
    if let Some(e) = v.get("error") {
        let msg = e["message"].as_str().unwrap_or("(no message)").to_string();
        return Reply::Error(status, e["code"].as_i64().unwrap_or(0), msg);
    }
    match v.get("result") {
        Some(r) if v.get("jsonrpc").is_some() => Reply::Result(r.clone(), ans.headers),
        _ => Reply::NotMcp(status, "a JSON answer that is not JSON-RPC".into()),
    }
}

/// "connection refused", "timeout", … from the client's error chain.
pub(crate) fn describe_failure(e: &anyhow::Error) -> String {
    for cause in e.chain() {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            let what = match io.kind() {
                K::ConnectionRefused => "connection refused (nothing listens on that port)",
                K::ConnectionReset | K::ConnectionAborted => "connection reset by the server",
                K::TimedOut => "timeout while connecting",
                _ => continue,
            };
            return what.to_string();
        }
    }
    format!("{e:#}")
}

/// One 2026-era request (`session: None`) or 2025-era one (`Some(session id)`).
pub(crate) async fn call(
    http: &Http,
    timeout: Duration,
    method: &str,
    cursor: Option<&str>,
    session: Option<Option<&str>>,
) -> Reply {
    let mut params = Map::new();
    if let Some(c) = cursor {
        params.insert("cursor".into(), json!(c));
    }
    let b = body("init-1", method, params, session.is_none());
    exchange(http, timeout, headers(method, session), b).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::methods;

    #[test]
    fn modern_requests_carry_the_headers_and_meta_legacy_ones_do_not() {
        let h = headers(methods::TOOLS_LIST, None);
        assert_eq!(h[header::METHOD], methods::TOOLS_LIST);
        assert_eq!(h[header::PROTOCOL_VERSION], mcp::PROTOCOL_VERSION);
        let b: Value = serde_json::from_slice(&body("x", "tools/list", Map::new(), true)).unwrap();
        assert_eq!(
            b["params"]["_meta"][meta::PROTOCOL_VERSION],
            mcp::PROTOCOL_VERSION
        );
        let h = headers(methods::TOOLS_LIST, Some(Some("s1")));
        assert!(h.get(header::METHOD).is_none());
        assert_eq!(h[header::PROTOCOL_VERSION], LEGACY_VERSION);
        assert_eq!(h["mcp-session-id"], "s1");
        assert!(headers("initialize", Some(None))
            .get(header::PROTOCOL_VERSION)
            .is_none());
        let n: Value =
            serde_json::from_slice(&body("", "notifications/initialized", Map::new(), false))
                .unwrap();
        assert!(n.get("id").is_none());
    }
}
