//! A 2025-era request read from its bytes without a value tree, and written as a 2026 request's
//! body the same way: the envelope ([`envelope`]: `method`, and `id` and `params` as the JSON
//! text they are), the params' members ([`Params`]), both as checked spans of the bytes
//! ([`crate::mcp::json_spans`]), and the 2026 body ([`to_modern_raw`]: the client's members
//! copied as they were sent, the session's `_meta` members written once per session,
//! [`session_meta`]). This is the path of nearly every bridged call.
//!
//! What it does not take, the value path of [`super`] reads as before: a message that is no
//! JSON object, a member named twice (a value tree keeps the last; copying both would hand the
//! fleet a message two parsers read differently), a key written with an escape, params that
//! are no object, a client `_meta` that cannot be read the same way.

use serde_json::Value;
use std::borrow::Cow;
use std::ops::Range;

use super::super::json_spans::{self, Member};
use super::super::meta;
use super::wire::OURS;
use super::PROTOCOL_VERSION;
use crate::mcp::methods::{name_field, NameField};

/// A JSON-RPC message's envelope, borrowed from its bytes.
pub struct Envelope<'a> {
    pub method: Option<Cow<'a, str>>,
    /// The id's JSON text; `None` when absent or `null`.
    pub id: Option<&'a str>,
    /// The params' JSON text; `None` when absent or `null`.
    pub params: Option<&'a [u8]>,
    /// The params' members, read in the envelope's pass (`None`: the params are no object).
    params_members: Option<Vec<Member<'a>>>,
}

/// The envelope of `body`, when it is one JSON object naming each member once, with a string
/// method if any (`None`: the value path reads it). The params' members are read in the same
/// pass ([`Envelope::raw_params`]).
pub fn envelope(body: &[u8]) -> Option<Envelope<'_>> {
    let (top, params_members) = json_spans::members_and(body, b"params")?;
    if !json_spans::unique(&top) {
        return None;
    }
    let given = |k| json_spans::get(&top, k).filter(|v| *v != b"null");
    let method = match given("method") {
        Some(m) => Some(json_spans::string(m)?),
        None => None,
    };
    let id = match given("id") {
        Some(id) => Some(std::str::from_utf8(id).ok()?),
        None => None,
    };
    let params = given("params");
    Some(Envelope {
        method,
        id,
        params,
        params_members,
    })
}

impl<'a> Envelope<'a> {
    /// The params for the raw path, as read in the envelope's pass ([`Params::read`] of
    /// [`Envelope::params`] without a second pass); `None` when the raw path cannot take them.
    pub fn raw_params(&mut self) -> Option<Params<'a>> {
        match self.params {
            None => Some(Params(Vec::new())),
            Some(_) => self
                .params_members
                .take()
                .filter(|m| json_spans::unique(m))
                .map(Params),
        }
    }
}

/// A request's params read for the raw path: an object's members, each named once with a plain
/// key (no params: no members).
pub struct Params<'a>(Vec<Member<'a>>);

/// [`Params`] apart from the text they borrow: each member's key and value as byte ranges of
/// it, kept by a call for each of its legs ([`Params::at`]) so that the text is read once.
pub struct Spans(Vec<(Range<usize>, Range<usize>)>);

impl<'a> Params<'a> {
    /// The params `raw` (`None`: the request has none), or `None` when the raw path cannot
    /// take them.
    pub fn read(raw: Option<&'a [u8]>) -> Option<Params<'a>> {
        let Some(raw) = raw else {
            return Some(Params(Vec::new()));
        };
        json_spans::members(raw)
            .filter(|m| json_spans::unique(m))
            .map(Params)
    }

    /// Where each member stands in `text`, the params' text these were read from.
    pub fn spans(&self, text: &[u8]) -> Spans {
        let base = text.as_ptr() as usize;
        let range = |part: &[u8]| {
            let from = part.as_ptr() as usize - base;
            debug_assert!(from + part.len() <= text.len(), "a member of this text");
            from..from + part.len()
        };
        Spans(self.0.iter().map(|(k, v)| (range(k), range(v))).collect())
    }

    /// The params [`Params::spans`] located in `text` (`None`: they do not fit it).
    pub fn at(text: &'a [u8], spans: &Spans) -> Option<Params<'a>> {
        let members = spans.0.iter().map(|(k, v)| {
            let k = text.get(k.clone())?;
            Some((k, text.get(v.clone())?))
        });
        members.collect::<Option<Vec<_>>>().map(Params)
    }
}

/// [`super::name_of`] on the raw path: the `Mcp-Name` a 2026 request of `method` carries.
pub fn name_of_raw(method: &str, params: &Params) -> Option<String> {
    let field = match name_field(method)? {
        NameField::Name => "name",
        NameField::Uri => "uri",
        NameField::TaskId => "taskId",
    };
    json_spans::string(json_spans::get(&params.0, field)?).map(Cow::into_owned)
}

/// The `_meta` members the gateway writes for a session (its protocol version, the client's
/// capabilities and info) as JSON text: written once per session, copied into each request.
pub fn session_meta(capabilities: &Value, client_info: &Value) -> String {
    let mut out = Vec::with_capacity(160);
    member(&mut out, meta::PROTOCOL_VERSION, PROTOCOL_VERSION);
    out.push(b',');
    member(&mut out, meta::CLIENT_CAPABILITIES, capabilities);
    if !client_info.is_null() {
        out.push(b',');
        member(&mut out, meta::CLIENT_INFO, client_info);
    }
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// `text` as a JSON string, as serde_json writes it: copied between quotes when nothing in it
/// needs an escape (a method name always), else escaped by serde_json.
fn json_string(out: &mut Vec<u8>, text: &str) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(out, text).expect("a string serializes");
    }
}

/// `"key":value`, both written as JSON.
fn member<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, k: &str, v: &T) {
    serde_json::to_writer(&mut *out, k).expect("a string serializes");
    out.push(b':');
    serde_json::to_writer(out, v).expect("a JSON value serializes");
}

/// [`super::to_modern`] on the raw path, byte for byte what it writes for the same message:
/// `params` as read, the session's `session_meta` ([`session_meta`]) and `log_level` in its
/// `_meta`, after the client's own `_meta` members the gateway does not write. `None`: the
/// client's `_meta` is an object the raw path cannot take (the value path then).
pub fn to_modern_raw(
    method: &str,
    params: &Params,
    id: u64,
    session_meta: &str,
    log_level: Option<&str>,
) -> Option<Vec<u8>> {
    let members = &params.0;
    let theirs = match json_spans::get(members, "_meta") {
        Some(m) if m.starts_with(b"{") => Some(Params::read(Some(m))?),
        _ => None,
    };
    let size: usize = members.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
    let mut out = Vec::with_capacity(96 + method.len() + size + session_meta.len());
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    serde_json::to_writer(&mut out, &id).expect("a number serializes");
    out.extend_from_slice(b",\"method\":");
    json_string(&mut out, method);
    out.extend_from_slice(b",\"params\":{");
    for (k, v) in members.iter().filter(|(k, _)| *k != b"_meta") {
        raw_member(&mut out, k, v);
        out.push(b',');
    }
    out.extend_from_slice(b"\"_meta\":{");
    let theirs = theirs.iter().flat_map(|t| t.0.iter());
    for (k, v) in theirs.filter(|(k, _)| !OURS.iter().any(|o| o.as_bytes() == *k)) {
        raw_member(&mut out, k, v);
        out.push(b',');
    }
    out.extend_from_slice(session_meta.as_bytes());
    if let Some(l) = log_level {
        out.push(b',');
        member(&mut out, meta::LOG_LEVEL, l);
    }
    out.extend_from_slice(b"}}}");
    Some(out)
}

/// `"key":value`, the key plain (no escape: [`Members`] borrows only those) and the value as
/// it was sent.
fn raw_member(out: &mut Vec<u8>, k: &[u8], v: &[u8]) {
    out.push(b'"');
    out.extend_from_slice(k);
    out.extend_from_slice(b"\":");
    out.extend_from_slice(v);
}

#[cfg(test)]
mod tests {
    use super::super::{name_of, to_modern};
    use super::*;
    use serde_json::json;

    fn raw(v: &Value) -> Vec<u8> {
        serde_json::to_vec(v).unwrap()
    }

    #[test]
    fn a_request_written_raw_is_byte_for_byte_the_one_the_value_path_writes() {
        let spoof = json!({"_meta": {"progressToken": "p", (meta::PROTOCOL_VERSION): "2099-01-01",
            (meta::CLIENT_CAPABILITIES): {"x": {}}}, "name": "t\"q", "arguments": {"k": [1, {"a": null}]}});
        let cases = [
            None,
            Some(json!({})),
            Some(json!({"name": "echo", "arguments": {"text": "hi é \u{1}"}})),
            Some(json!({"uri": "charges://c", "_meta": 7})),
            Some(json!({"_meta": {}, "name": "n"})),
            Some(spoof),
        ];
        let caps = json!({"sampling": {}, "elicitation": {"form": {}}});
        for info in [json!({"name": "c", "version": "1"}), Value::Null] {
            let tail = session_meta(&caps, &info);
            for level in [None, Some("debug")] {
                for p in &cases {
                    let r = p.as_ref().map(raw);
                    let params = Params::read(r.as_deref()).expect("taken raw");
                    let got = to_modern_raw("tools/call", &params, 3, &tail, level).unwrap();
                    let want = to_modern("tools/call", p.as_ref(), 3, &caps, &info, level);
                    assert_eq!(
                        String::from_utf8(got).unwrap(),
                        String::from_utf8(want).unwrap()
                    );
                }
            }
        }
    }

    #[test]
    fn what_two_parsers_could_read_differently_is_left_to_the_value_path() {
        for p in [
            r#"{"name":"a","name":"b"}"#,
            r#"{"n\u0061me":"a"}"#,
            r#"[1,2]"#,
            r#""name""#,
        ] {
            assert!(Params::read(Some(p.as_bytes())).is_none(), "{p}");
        }
        // A client `_meta` named twice inside: the whole request takes the value path.
        let params = Params::read(Some(br#"{"_meta":{"a":1,"a":2}}"#)).unwrap();
        assert!(to_modern_raw("tools/call", &params, 1, "", None).is_none());
        // No object, a number for a method, `method` twice: no envelope.
        for body in [
            r#"["tools/call",1,{}]"#,
            r#"{"method":7,"id":1}"#,
            r#"{"method":"a","method":"b","id":1}"#,
            "{\"id\":1,",
        ] {
            assert!(envelope(body.as_bytes()).is_none(), "{body}");
        }
    }

    #[test]
    fn the_envelope_is_read_as_the_value_path_reads_it() {
        let e = envelope(br#" {"jsonrpc":"2.0","id":null,"method":"t\/x","params":null}"#);
        let e = e.unwrap();
        assert_eq!(e.method.as_deref(), Some("t/x"));
        assert!(e.id.is_none() && e.params.is_none());
        let e = envelope(br#"{"id":"a","result":{}}"#).unwrap();
        assert_eq!((e.id, e.method), (Some("\"a\""), None));
    }

    #[test]
    fn the_name_is_read_as_the_value_path_reads_it() {
        let cases = [
            ("tools/call", json!({"name": "t\"q\u{e9}", "arguments": {}})),
            ("tools/call", json!({"name": 7})),
            ("resources/read", json!({"uri": "file:///a b"})),
            ("tasks/get", json!({"taskId": "x"})),
            ("tools/list", json!({"name": "x"})),
        ];
        for (m, p) in cases {
            let r = raw(&p);
            let params = Params::read(Some(&r)).unwrap();
            assert_eq!(name_of_raw(m, &params), name_of(m, Some(&p)), "{m} {p}");
        }
    }

    #[test]
    fn a_string_is_written_as_serde_json_writes_it() {
        for t in [
            "tools/call",
            "",
            "a\"b",
            "a\\b",
            "tab\there",
            "\u{1}",
            "\u{7f}",
            "é ☃ 😀",
            "</script>",
        ] {
            let mut out = Vec::new();
            json_string(&mut out, t);
            assert_eq!(out, serde_json::to_vec(t).unwrap(), "{t:?}");
        }
    }
}
