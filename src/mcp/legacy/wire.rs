//! The bridge's translations written straight to bytes, for the two that every bridged call
//! makes: a legacy request's body as a 2026 request from a value ([`ModernBody`]: the params as
//! they are, `_meta` merged in, no copy of the params tree; the value path, which
//! [`super::raw`] writes byte for byte from the bytes), and a 2026 `complete` result as a
//! legacy client expects it ([`legacy_result`]: the result's members copied as the spans of
//! the answer they are, [`crate::mcp::json_spans`], the 2026-only ones left out). Anything
//! else takes the value path of [`super`] (a question, an error, an event stream).

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::super::{meta, result_type};
use super::PROTOCOL_VERSION;

/// The body of a 2026 request for a legacy one: `jsonrpc`, `id`, `method`, and `params` with
/// the per-request `_meta` (protocol version, the session's client capabilities and info, its
/// log level) merged into any `_meta` the client sent (the gateway's members win).
pub(super) struct ModernBody<'a> {
    pub id: u64,
    pub method: &'a str,
    /// The client's params (anything but an object counts as none).
    pub params: Option<&'a Value>,
    pub capabilities: &'a Value,
    pub client_info: &'a Value,
    pub log_level: Option<&'a str>,
}

/// The members the gateway writes into `_meta`.
pub(super) const OURS: [&str; 4] = [
    meta::PROTOCOL_VERSION,
    meta::CLIENT_CAPABILITIES,
    meta::CLIENT_INFO,
    meta::LOG_LEVEL,
];

impl Serialize for ModernBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("jsonrpc", "2.0")?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("method", self.method)?;
        m.serialize_entry("params", &Params(self))?;
        m.end()
    }
}

/// The params: the client's members but `_meta`, then the merged `_meta`.
struct Params<'a>(&'a ModernBody<'a>);

impl Serialize for Params<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let params = self.0.params.and_then(Value::as_object);
        let mut m = s.serialize_map(None)?;
        for (k, v) in params.into_iter().flatten() {
            if k != "_meta" {
                m.serialize_entry(k, v)?;
            }
        }
        let theirs = params
            .and_then(|p| p.get("_meta"))
            .and_then(Value::as_object);
        m.serialize_entry("_meta", &Meta(self.0, theirs))?;
        m.end()
    }
}

/// `_meta`: the client's members the gateway does not write, then the gateway's.
struct Meta<'a>(&'a ModernBody<'a>, Option<&'a Map<String, Value>>);

impl Serialize for Meta<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let b = self.0;
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.1.into_iter().flatten() {
            if !OURS.contains(&k.as_str()) {
                m.serialize_entry(k, v)?;
            }
        }
        m.serialize_entry(meta::PROTOCOL_VERSION, PROTOCOL_VERSION)?;
        m.serialize_entry(meta::CLIENT_CAPABILITIES, b.capabilities)?;
        if !b.client_info.is_null() {
            m.serialize_entry(meta::CLIENT_INFO, b.client_info)?;
        }
        if let Some(l) = b.log_level {
            m.serialize_entry(meta::LOG_LEVEL, l)?;
        }
        m.end()
    }
}

/// `resultType: "complete"` as its raw JSON value.
const COMPLETE: &str = "\"complete\"";
const _: () = assert!(result_type::COMPLETE.len() + 2 == COMPLETE.len());

/// The members of a 2026 result a legacy client does not know.
const MODERN_ONLY: [&str; 3] = ["resultType", "ttlMs", "cacheScope"];

/// A 2026 JSON-RPC answer (`body`) whose result is `complete` (or says no `resultType`), as the
/// legacy client's answer: its `id`, the result without the 2026-only members. `None` for
/// anything else (not a result, a question, a body that is not one JSON-RPC response).
pub fn legacy_result(body: &[u8], id: &RawValue) -> Option<Vec<u8>> {
    use crate::mcp::json_spans::{get, members_and, unique};
    let absent = |v: Option<&[u8]>| v.is_none_or(|v| v == b"null");
    let (top, result) = members_and(body, b"result")?;
    if !unique(&top) || !absent(get(&top, "error")) || !absent(get(&top, "method")) {
        return None;
    }
    let members = result.filter(|m| unique(m))?;
    if get(&members, "resultType").is_some_and(|v| v != COMPLETE.as_bytes()) {
        return None;
    }
    let kept = || {
        let modern = |k: &[u8]| MODERN_ONLY.iter().any(|m| m.as_bytes() == k);
        members.iter().filter(move |(k, _)| !modern(k))
    };
    // Sized exactly (each member `"k":v` and a comma): the answer becomes `Bytes` with no
    // second allocation.
    const AROUND: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":,\"result\":{}}";
    let size: usize = kept().map(|(k, v)| k.len() + v.len() + 4).sum();
    let mut out = Vec::with_capacity(AROUND.len() + id.get().len() + size.saturating_sub(1));
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(b",\"result\":{");
    let mut first = true;
    for (k, v) in kept() {
        if !first {
            out.push(b',');
        }
        first = false;
        out.push(b'"');
        out.extend_from_slice(k);
        out.extend_from_slice(b"\":");
        out.extend_from_slice(v);
    }
    out.extend_from_slice(b"}}");
    debug_assert_eq!(out.len(), out.capacity(), "sized exactly");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::super::{to_legacy_result, to_modern};
    use super::*;
    use serde_json::json;

    /// The value path these replace: the params copied, `_meta` merged, then written.
    fn modern_by_value(method: &str, params: Option<&Value>, caps: &Value, info: &Value) -> Value {
        let mut p = match params {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        let m = p.entry("_meta").or_insert_with(|| json!({}));
        if !m.is_object() {
            *m = json!({});
        }
        m[meta::PROTOCOL_VERSION] = json!(PROTOCOL_VERSION);
        m[meta::CLIENT_CAPABILITIES] = caps.clone();
        if !info.is_null() {
            m[meta::CLIENT_INFO] = info.clone();
        }
        json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": p})
    }

    #[test]
    fn a_request_written_directly_is_the_request_the_value_path_wrote() {
        let caps = json!({"sampling": {}});
        let spoof = json!({"_meta": {"progressToken": "p", (meta::PROTOCOL_VERSION): "2099-01-01",
            (meta::CLIENT_CAPABILITIES): {"x": {}}}, "name": "t\"q", "arguments": {"k": [1, {"a": null}]}});
        let cases = [
            None,
            Some(json!({})),
            Some(json!({"name": "echo", "arguments": {"text": "hi"}})),
            Some(json!({"uri": "charges://c", "_meta": 7})),
            Some(spoof),
            Some(json!([1, 2])),
        ];
        for info in [json!({"name": "c", "version": "1"}), Value::Null] {
            for p in &cases {
                let body = to_modern("tools/call", p.as_ref(), 3, &caps, &info, None);
                let got: Value = serde_json::from_slice(&body).unwrap();
                let want = modern_by_value("tools/call", p.as_ref(), &caps, &info);
                assert_eq!(got, want, "params {p:?}");
            }
        }
    }

    #[test]
    fn a_complete_result_written_directly_is_the_result_the_value_path_wrote() {
        let id = RawValue::from_string("\"client-7\"".into()).unwrap();
        let bodies = [
            json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "ttlMs": 5, "cacheScope": "public", "content": [{"type": "text", "text": "hi \"there\""}], "_meta": {"a": 1}}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "nextCursor": "c"}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        ];
        for b in &bodies {
            let bytes = serde_json::to_vec(b).unwrap();
            let got: Value = serde_json::from_slice(&legacy_result(&bytes, &id).unwrap()).unwrap();
            let want = json!({"jsonrpc": "2.0", "id": "client-7", "result": to_legacy_result(b["result"].clone())});
            assert_eq!(got, want, "{b}");
        }
    }

    #[test]
    fn anything_but_a_complete_result_takes_the_value_path() {
        let id = RawValue::from_string("1".into()).unwrap();
        let none = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"compl\u0065te"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"k\u0065y":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            "not json",
            "",
        ];
        for b in none {
            assert_eq!(legacy_result(b.as_bytes(), &id), None, "{b}");
        }
    }
}
