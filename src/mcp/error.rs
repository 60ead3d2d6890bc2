//! JSON-RPC error codes and error bodies. Every error body this project writes comes from
//! [`error_body`], so the shape is written once.

use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

/// JSON-RPC and MCP error codes.
///
/// `-32020..=-32099` is reserved by the spec: only the codes it defines may be sent.
/// Gateway-defined codes live outside `-32768..=-32000` (digest §3.3).
pub mod codes {
    pub const PARSE_ERROR: i32 = -32700;
    pub const INVALID_REQUEST: i32 = -32600;
    pub const METHOD_NOT_FOUND: i32 = -32601;
    pub const INVALID_PARAMS: i32 = -32602;
    pub const INTERNAL_ERROR: i32 = -32603;
    /// Headers disagree with the body, or a required header is missing or malformed.
    pub const HEADER_MISMATCH: i32 = -32020;
    /// The request needs a client capability it did not declare.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i32 = -32021;
    /// Header and body agree on a protocol version the server does not implement.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;

    /// Gateway: a rate limit was exceeded.
    pub const GATEWAY_RATE_LIMITED: i32 = -31001;
    /// Gateway: the request body is larger than the configured limit.
    pub const GATEWAY_BODY_TOO_LARGE: i32 = -31002;
    /// Gateway: no upstream instance could be reached.
    pub const GATEWAY_UPSTREAM_UNAVAILABLE: i32 = -31003;
    /// Gateway: the upstream did not answer in time.
    pub const GATEWAY_UPSTREAM_TIMEOUT: i32 = -31004;
    /// Gateway: the request did not arrive in time or was cut off.
    pub const GATEWAY_REQUEST_INCOMPLETE: i32 = -31005;
    /// Gateway: the upstream failed after the request was delivered; it is not re-sent.
    pub const GATEWAY_UPSTREAM_FAILED: i32 = -31006;
    /// Gateway: a concurrency limit is full (load shedding); retry after `Retry-After`.
    pub const GATEWAY_OVERLOADED: i32 = -31007;
}

/// Serialize a JSON-RPC error response. `id` is the raw JSON of the request id when it could be
/// read; without it the member is omitted (the request could not be identified).
pub fn error_body(
    id: Option<&RawValue>,
    code: i32,
    message: &str,
    data: Option<&Value>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + message.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","#);
    if let Some(id) = id {
        out.extend_from_slice(br#""id":"#);
        out.extend_from_slice(id.get().as_bytes());
        out.push(b',');
    }
    out.extend_from_slice(br#""error":{"code":"#);
    out.extend_from_slice(code.to_string().as_bytes());
    out.extend_from_slice(br#","message":"#);
    // Writing a str into a Vec cannot fail.
    serde_json::to_writer(&mut out, message).expect("string serializes");
    if let Some(data) = data {
        out.extend_from_slice(br#","data":"#);
        serde_json::to_writer(&mut out, data).expect("value serializes");
    }
    out.extend_from_slice(b"}}");
    out
}

/// A request refused before it reached a handler (or an upstream): what to answer and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// HTTP status of the answer.
    pub status: u16,
    /// JSON-RPC error code.
    pub code: i32,
    /// Human-readable message: what was wrong and which header or field.
    pub message: Cow<'static, str>,
    /// Optional `error.data`.
    pub data: Option<Value>,
    /// A short, bounded label for metrics and logs (e.g. `mcp-name-mismatch`).
    pub reason: &'static str,
}

impl Rejection {
    pub fn new(
        status: u16,
        code: i32,
        reason: &'static str,
        message: impl Into<Cow<'static, str>>,
    ) -> Self {
        Rejection {
            status,
            code,
            message: message.into(),
            data: None,
            reason,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// 400 / -32020: a header is missing, malformed or disagrees with the body.
    pub fn header_mismatch(reason: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(400, codes::HEADER_MISMATCH, reason, message)
    }

    /// 400 / -32602 for a missing or malformed `_meta` field.
    pub fn invalid_meta(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(400, codes::INVALID_PARAMS, "meta-invalid", message)
    }

    /// 400 / -32022 with the `supported` and `requested` data the spec requires.
    pub fn unsupported_version(supported: &[&str], requested: &str) -> Self {
        Self::new(
            400,
            codes::UNSUPPORTED_PROTOCOL_VERSION,
            "unsupported-version",
            format!(
                "Unsupported protocol version {requested:?}; supported: {}",
                supported.join(", ")
            ),
        )
        .with_data(serde_json::json!({ "supported": supported, "requested": requested }))
    }

    /// The JSON-RPC error body for this rejection.
    pub fn body(&self, id: Option<&RawValue>) -> Vec<u8> {
        error_body(id, self.code, &self.message, self.data.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_body_with_and_without_id() {
        let id = RawValue::from_string("\"c-17\"".into()).unwrap();
        let body = error_body(
            Some(&id),
            codes::HEADER_MISMATCH,
            "Mcp-Name \"x\" mismatch",
            None,
        );
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], "c-17");
        assert_eq!(v["error"]["code"], -32020);
        assert_eq!(v["error"]["message"], "Mcp-Name \"x\" mismatch");
        let body = error_body(
            None,
            codes::PARSE_ERROR,
            "bad",
            Some(&serde_json::json!({"a":1})),
        );
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert!(v.get("id").is_none());
        assert_eq!(v["error"]["data"]["a"], 1);
    }

    #[test]
    fn gateway_codes_are_outside_the_reserved_range() {
        for c in [
            codes::GATEWAY_RATE_LIMITED,
            codes::GATEWAY_BODY_TOO_LARGE,
            codes::GATEWAY_UPSTREAM_UNAVAILABLE,
            codes::GATEWAY_UPSTREAM_TIMEOUT,
            codes::GATEWAY_REQUEST_INCOMPLETE,
            codes::GATEWAY_UPSTREAM_FAILED,
            codes::GATEWAY_OVERLOADED,
        ] {
            assert!(!(-32768..=-32000).contains(&c), "{c}");
        }
    }
}
