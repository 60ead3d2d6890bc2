//! Cache keys: what of a request decides its result.
//!
//! A key is a SHA-256 over the pool, the method, the `MCP-Protocol-Version` header and the
//! request's `params` in canonical form with numbers as written ([`crate::mcp::jcs_exact`]:
//! `1` and `1.0`, or two integers past 2^53, never share an entry), with the
//! `_meta` keys that never change a result left out (client identity, progress, trace
//! context; see [`crate::mcp::caching::META_KEYS_NOT_AFFECTING_RESULTS`]). Everything else in
//! `params` counts: `uri`, `cursor`, prompt/resource arguments, the protocol version and client
//! capabilities in `_meta`, and keys this gateway does not know. A `private` result is stored
//! under the key extended with a hash of the caller's credential ([`caller_context`]).

use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::mcp::caching::META_KEYS_NOT_AFFECTING_RESULTS;
use crate::mcp::jcs_exact::{self, Value};

/// A cache key (a SHA-256).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key(pub [u8; 32]);

impl Key {
    /// This key narrowed to one authorization context (for `private` results).
    pub(crate) fn private(&self, caller: &Caller) -> Key {
        let mut h = Sha256::new();
        h.update(b"private\0");
        h.update(self.0);
        h.update(caller.0);
        Key(h.finalize().into())
    }
}

/// A hash of the caller's authorization context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caller(pub [u8; 32]);

/// The caller's authorization context: today a hash of the `Authorization` header. When the
/// gateway verifies tokens (the auth stage), this is where the verified principal goes instead
/// (its subject and the scopes the result may depend on). `None`: the caller presented no
/// credential, and `private` results are then neither stored nor served.
pub(crate) fn caller_context(headers: &http::HeaderMap) -> Option<Caller> {
    let v = headers.get(http::header::AUTHORIZATION)?;
    let mut h = Sha256::new();
    h.update(b"authorization\0");
    h.update(v.as_bytes());
    Some(Caller(h.finalize().into()))
}

/// What the cache needs to know about a cacheable request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub key: Key,
    /// `params.cursor` was present (a later page of a list).
    pub has_cursor: bool,
    /// `params.uri`, for `resources/read`.
    pub uri: Option<String>,
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

/// The key of a request body already checked by the envelope, or `None` when it must not be
/// answered from a cache (it carries `inputResponses` or `requestState`, or its `params` is not
/// an object).
pub(crate) fn of_request(pool: &str, method: &str, version: &str, body: &[u8]) -> Option<Request> {
    let Body { params } = serde_json::from_slice(body).ok()?;
    let mut params = match params {
        Some(raw) => jcs_exact::parse(raw.get().as_bytes()).ok()?,
        None => Value::Object(Vec::new()),
    };
    if !matches!(params, Value::Object(_))
        || params.get("inputResponses").is_some()
        || params.get("requestState").is_some()
    {
        return None;
    }
    if let Some(Value::Object(meta)) = params.get_mut("_meta") {
        meta.retain(|(k, _)| !META_KEYS_NOT_AFFECTING_RESULTS.contains(&k.as_str()));
    }
    let mut h = Sha256::new();
    for part in [pool, method, version] {
        h.update(part.len().to_le_bytes());
        h.update(part.as_bytes());
    }
    let has_cursor = params.get("cursor").is_some();
    let uri = params.get("uri").and_then(Value::as_str).map(str::to_owned);
    let mut canon = Vec::with_capacity(body.len());
    params.write(&mut canon);
    h.update(&canon);
    Some(Request {
        key: Key(h.finalize().into()),
        has_cursor,
        uri,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: &str = "2026-07-28";

    fn key(pool: &str, method: &str, body: &str) -> Option<Request> {
        of_request(pool, method, V, body.as_bytes())
    }

    #[test]
    fn id_order_spacing_and_client_identity_do_not_change_the_key() {
        let a = key("p", "tools/list", r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"a"},"progressToken":7}}}"#).unwrap();
        let b = key("p", "tools/list", r#"{ "id":"x", "params" : {"_meta":{"traceparent":"00-ab","io.modelcontextprotocol/protocolVersion":"2026-07-28"}},"method":"tools/list","jsonrpc":"2.0"}"#).unwrap();
        assert_eq!(a.key, b.key);
    }

    #[test]
    fn params_that_change_the_result_change_the_key() {
        let base =
            r#"{"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let k0 = key("p", "tools/list", base).unwrap().key;
        let cursor = key("p", "tools/list", r#"{"params":{"cursor":"2","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#).unwrap();
        assert!(cursor.has_cursor);
        assert_ne!(k0, cursor.key);
        assert_ne!(k0, key("q", "tools/list", base).unwrap().key, "pool");
        assert_ne!(k0, key("p", "prompts/list", base).unwrap().key, "method");
        assert_ne!(
            k0,
            of_request("p", "tools/list", "2027-01-01", base.as_bytes())
                .unwrap()
                .key,
            "version"
        );
        let caps = r#"{"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"x":{}}}}}"#;
        assert_ne!(
            k0,
            key("p", "tools/list", caps).unwrap().key,
            "capabilities"
        );
        let a = key("p", "resources/read", r#"{"params":{"uri":"file:///a"}}"#).unwrap();
        let b = key("p", "resources/read", r#"{"params":{"uri":"file:///b"}}"#).unwrap();
        assert_ne!(a.key, b.key);
        assert_eq!(a.uri.as_deref(), Some("file:///a"));
    }

    #[test]
    fn numbers_that_a_strict_reader_tells_apart_never_share_a_key() {
        let k = |page: &str| {
            let body = format!(r#"{{"params":{{"uri":"file:///a","page":{page}}}}}"#);
            key("p", "resources/read", &body).unwrap().key
        };
        // One double each, but different integers for Python, Go's json.Number, BigDecimal.
        assert_ne!(k("18446744073709551616"), k("18446744073709551617"));
        assert_ne!(k("9007199254740992"), k("9007199254740993"));
        // An int and a float for Python; different text for decimal readers.
        assert_ne!(k("1"), k("1.0"));
        assert_ne!(k("1.0"), k("1.00"));
        assert_ne!(k("100"), k("1e2"));
        assert_ne!(k("0"), k("-0"));
        assert_ne!(k("1e400"), k("1e401"));
        // The same text is the same key, whatever the spacing, order and string escapes.
        let a = key(
            "p",
            "resources/read",
            r#"{"params":{"uri":"file:///a","page":18446744073709551616}}"#,
        );
        let b = key(
            "p",
            "resources/read",
            r#"{"params":{ "page" : 18446744073709551616, "uri":"file:///\u0061"}}"#,
        );
        assert_eq!(a.unwrap().key, b.unwrap().key);
        assert_eq!(k("1e400"), k("1e400"));
    }

    #[test]
    fn params_that_are_not_an_object_have_no_key_and_null_is_none() {
        assert!(key("p", "tools/list", r#"{"params":[1]}"#).is_none());
        assert!(key("p", "tools/list", r#"{"params":"x"}"#).is_none());
        assert_eq!(
            key("p", "tools/list", r#"{"params":null}"#).unwrap().key,
            key("p", "tools/list", r#"{}"#).unwrap().key
        );
    }

    #[test]
    fn retry_legs_have_no_key() {
        assert!(key(
            "p",
            "resources/read",
            r#"{"params":{"uri":"u","requestState":"s"}}"#
        )
        .is_none());
        assert!(key(
            "p",
            "resources/read",
            r#"{"params":{"uri":"u","inputResponses":{}}}"#
        )
        .is_none());
    }

    #[test]
    fn private_keys_differ_per_caller() {
        let k = key("p", "tools/list", "{}").unwrap().key;
        let mut h = http::HeaderMap::new();
        h.insert("authorization", "Bearer a".parse().unwrap());
        let a = caller_context(&h).unwrap();
        h.insert("authorization", "Bearer b".parse().unwrap());
        let b = caller_context(&h).unwrap();
        assert_ne!(k.private(&a), k.private(&b));
        assert_ne!(k.private(&a), k);
        assert!(caller_context(&http::HeaderMap::new()).is_none());
    }
}
