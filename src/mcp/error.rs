//! JSON-RPC error codes and error bodies. Every error body this project writes comes from
//! [`error_body`], so the shape is written once.

use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

/// Declares each code with its metric label in one line, so that a new code cannot exist
/// without a label (it would otherwise count as `_other`).
macro_rules! declare_codes {
    ($($(#[$doc:meta])* $name:ident = $value:literal, $label:literal;)*) => {
        $($(#[$doc])* pub const $name: i32 = $value;)*

        #[cfg(test)]
        /// Every code this project sends, with its metric label.
        pub(crate) const ALL: &[(i32, &str)] = &[$(($value, $label)),*];

        /// The metric label of a code this project sends (`None` for foreign codes).
        pub(crate) fn label(code: i32) -> Option<&'static str> {
            match code {
                $($value => Some($label),)*
                _ => None,
            }
        }
    };
}

/// JSON-RPC and MCP error codes.
///
/// `-32020..=-32099` is reserved by the spec: only the codes it defines may be sent.
/// Gateway-defined codes live outside `-32768..=-32000` (the spec's rule for intermediaries).
pub mod codes {
    declare_codes! {
        PARSE_ERROR = -32700, "-32700";
        INVALID_REQUEST = -32600, "-32600";
        METHOD_NOT_FOUND = -32601, "-32601";
        INVALID_PARAMS = -32602, "-32602";
        INTERNAL_ERROR = -32603, "-32603";
        /// Headers disagree with the body, or a required header is missing or malformed.
        HEADER_MISMATCH = -32020, "-32020";
        /// The request needs a client capability it did not declare.
        MISSING_REQUIRED_CLIENT_CAPABILITY = -32021, "-32021";
        /// Header and body agree on a protocol version the server does not implement.
        UNSUPPORTED_PROTOCOL_VERSION = -32022, "-32022";
        /// Gateway: a rate limit was exceeded.
        GATEWAY_RATE_LIMITED = -31001, "-31001";
        /// Gateway: the request body is larger than the configured limit.
        GATEWAY_BODY_TOO_LARGE = -31002, "-31002";
        /// Gateway: no upstream instance could be reached.
        GATEWAY_UPSTREAM_UNAVAILABLE = -31003, "-31003";
        /// Gateway: the upstream did not answer in time.
        GATEWAY_UPSTREAM_TIMEOUT = -31004, "-31004";
        /// Gateway: the request did not arrive in time or was cut off.
        GATEWAY_REQUEST_INCOMPLETE = -31005, "-31005";
        /// Gateway: the upstream failed after the request was delivered; it is not re-sent.
        GATEWAY_UPSTREAM_FAILED = -31006, "-31006";
        /// Gateway: over capacity (bodies held across all connections, a concurrency limit);
        /// retry later (HTTP 503 + Retry-After).
        GATEWAY_OVERLOADED = -31007, "-31007";
        /// Gateway (auth): no valid access token (HTTP 401; 400 for a token in the query string).
        GATEWAY_UNAUTHORIZED = -31008, "-31008";
        /// Gateway (auth): the token lacks a scope, or a rule denies this method/name (HTTP 403).
        GATEWAY_FORBIDDEN = -31009, "-31009";
        /// Gateway (auth): the issuer's keys could not be obtained to verify the token (HTTP 503).
        GATEWAY_AUTH_UNAVAILABLE = -31010, "-31010";
        /// Gateway (auth): a list result could not be filtered for the caller (too large, or not
        /// JSON); sent in place of the list.
        GATEWAY_LIST_UNFILTERABLE = -31011, "-31011";
        /// Gateway (credentials): the pool's credential could not be obtained from its token
        /// endpoint (HTTP 503 + Retry-After when it is down or slow, 502 when it refused).
        GATEWAY_CREDENTIAL_UNAVAILABLE = -31012, "-31012";
        /// Gateway (argument policy): a rule over the call's arguments and the caller's claims
        /// refuses it (HTTP 403); the message and `data.rule` name the rule.
        GATEWAY_POLICY_DENIED = -31013, "-31013";
        /// Gateway (2025-era bridge): the session id is unknown, expired, altered or another
        /// caller's (HTTP 404, as a 2025-era server answers: the client opens a new session).
        GATEWAY_SESSION_NOT_FOUND = -31014, "-31014";
        /// Gateway (2025-era bridge): a request other than `initialize` without a session id
        /// (HTTP 400), or an answer to a question the gateway did not ask on that session.
        GATEWAY_SESSION_REQUIRED = -31015, "-31015";
        /// Gateway (2025-era bridge): the client did not answer the server's questions in
        /// time, refused one, or the call could not wait (too many calls waiting).
        GATEWAY_INPUT_NOT_GIVEN = -31016, "-31016";
        /// Gateway (pinned definitions): the tool's or prompt's definition changed since it was
        /// pinned and the pool's policy holds it until an operator approves the change (HTTP
        /// 403); `data` names the pool, the name and both digests.
        GATEWAY_DEFINITION_CHANGED = -31017, "-31017";
        /// Gateway: the pool is at the capacity its adaptive concurrency limit measured, and
        /// this request was shed (HTTP 503 + Retry-After); `data` says the limit, how many were
        /// in flight and whether the request was a new call or a leg of one already started.
        GATEWAY_CAPACITY_SHED = -31018, "-31018";
        /// Gateway (requestState seal, `one_time: global` with `on_store_error: deny`): Redis
        /// could not say whether the retry's state was used before (HTTP 503 + Retry-After);
        /// the state was not spent: the same retry may be sent again.
        GATEWAY_STATE_RECORD_UNAVAILABLE = -31019, "-31019";
    }
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
    pub(crate) fn new(
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

    pub(crate) fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// 400 / -32020: a header is missing, malformed or disagrees with the body.
    pub(crate) fn header_mismatch(
        reason: &'static str,
        message: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self::new(400, codes::HEADER_MISMATCH, reason, message)
    }

    /// 400 / -32602 for a missing or malformed `_meta` field.
    pub(crate) fn invalid_meta(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(400, codes::INVALID_PARAMS, "meta-invalid", message)
    }

    /// 400 / -32022 with the `supported` and `requested` data the spec requires.
    pub(crate) fn unsupported_version(supported: &[&str], requested: &str) -> Self {
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
    #[test]
    fn every_code_has_its_own_label_and_gateway_codes_stay_out_of_the_reserved_range() {
        use super::codes;
        for (code, label) in codes::ALL {
            assert_eq!(codes::label(*code), Some(*label));
            assert_eq!(label.parse::<i32>().unwrap(), *code);
            if label.starts_with("-31") {
                assert!(!(-32768..=-32000).contains(code));
            }
        }
        let mut labels: Vec<_> = codes::ALL.iter().map(|(_, l)| l).collect();
        labels.dedup();
        assert_eq!(labels.len(), codes::ALL.len());
    }

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
        ] {
            assert!(!(-32768..=-32000).contains(&c), "{c}");
        }
    }
}
