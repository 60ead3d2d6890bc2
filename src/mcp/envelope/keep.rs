//! The envelope parse for a server that acts on the body: the same strict walk as
//! [`super::parse`] (same refusals, same messages), which also hands out `params` as a JSON
//! object, so the body is parsed once.
//!
//! The gateway does not use this: it routes on the envelope alone and never builds values.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

use super::super::strict::{case_variant, case_variant_of, check_new_key, Key, SeenKeys};
use super::walk::state::State;
use super::{meta, Envelope, MAX_DEPTH, META_MEMBERS, PARAMS_MEMBERS};

/// Where a [`Build`] object sits, for the duplicate-key message.
#[derive(Clone, Copy, PartialEq)]
enum At {
    Params,
    Meta,
    Other,
}

impl At {
    fn label(self) -> &'static str {
        match self {
            At::Params => "params",
            At::Meta => "params._meta",
            At::Other => "an object",
        }
    }
}

/// Builds a value, refusing (case-folded) duplicate keys, case variants of the envelope's
/// members and excessive depth exactly as the plain walk does.
pub(super) struct Build<'s> {
    pub(super) st: &'s mut State,
    pub(super) depth: usize,
    at: At,
}

impl<'s> Build<'s> {
    /// The seed for the `params` member of the request object.
    pub(super) fn params(st: &'s mut State) -> Self {
        Build {
            st,
            depth: 1,
            at: At::Params,
        }
    }
}

impl<'de, 's> DeserializeSeed<'de> for Build<'s> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 's> Visitor<'de> for Build<'s> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(self.st.faults.fail(
                "too-deep",
                format!("nesting deeper than {MAX_DEPTH} levels"),
            ));
        }
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Build {
            st: &mut *self.st,
            depth,
            at: At::Other,
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let depth = self.depth + 1;
        // `params` and `_meta` are read without a depth check by the plain walk too.
        if depth > MAX_DEPTH && self.at == At::Other {
            return Err(self.st.faults.fail(
                "too-deep",
                format!("nesting deeper than {MAX_DEPTH} levels"),
            ));
        }
        let mut seen = SeenKeys::default();
        let mut out = Map::new();
        while let Some(Key(k)) = map.next_key()? {
            check_new_key(&mut self.st.faults, &mut seen, &k, self.at.label())?;
            let known = match self.at {
                At::Params => PARAMS_MEMBERS,
                At::Meta => META_MEMBERS,
                At::Other => &[],
            };
            if let Some(m) = case_variant_of(&k, known) {
                return Err(case_variant(&mut self.st.faults, &k, m, self.at.label()));
            }
            let at = if self.at == At::Params && k == "_meta" {
                At::Meta
            } else {
                At::Other
            };
            let v = map.next_value_seed(Build {
                st: &mut *self.st,
                depth,
                at,
            })?;
            out.insert(k.into_owned(), v);
        }
        Ok(Value::Object(out))
    }
}

/// Fill the envelope members that live in `params` from the built object (what the plain walk
/// reads while it goes).
pub(super) fn fill(env: &mut Envelope, params: &Map<String, Value>) {
    let string = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    env.name = string(params.get("name"));
    env.uri = string(params.get("uri"));
    env.task_id = string(params.get(crate::mcp::tasks::TASK_ID));
    let meta_obj = params.get("_meta").and_then(Value::as_object);
    env.has_meta = meta_obj.is_some();
    env.protocol_version = string(meta_obj.and_then(|m| m.get(meta::PROTOCOL_VERSION)));
    env.has_client_capabilities = meta_obj
        .and_then(|m| m.get(meta::CLIENT_CAPABILITIES))
        .is_some_and(Value::is_object);
    env.has_request_state = params.contains_key(crate::mcp::mrtr::REQUEST_STATE);
    env.request_state_digest = params
        .get(crate::mcp::mrtr::REQUEST_STATE)
        .and_then(Value::as_str)
        .map(crate::mcp::digest::state_digest);
    env.legacy_version = string(params.get("protocolVersion"));
    env.traceparent = string(meta_obj.and_then(|m| m.get(meta::TRACEPARENT)));
    env.tracestate = string(meta_obj.and_then(|m| m.get(meta::TRACESTATE)));
    env.has_input_responses = params.contains_key(crate::mcp::mrtr::INPUT_RESPONSES);
}

#[cfg(test)]
mod tests {
    use super::super::{parse, parse_keeping_params};

    /// Both parses agree on every body: the same envelope, or the same refusal.
    #[test]
    fn keeping_params_changes_nothing_but_the_params() {
        let bodies = [
            r#"{"jsonrpc":"2.0","id":"c-17","method":"tools/call","params":{"name":"x","arguments":{"a":[1,2.5,{"b":null}]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requestState":"s","inputResponses":{"k":{}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":2}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"k":1,"k":2}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":{"k":1,"k":2}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"\ud800"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t-1"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#,
        ];
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"a":{}{}}}}}"#,
            "[".repeat(80),
            "]".repeat(80)
        );
        for b in bodies.iter().copied().chain([deep.as_str()]) {
            let plain = parse(b.as_bytes());
            let kept = parse_keeping_params(b.as_bytes());
            match (plain, kept) {
                (Ok(p), Ok((k, params))) => {
                    assert_eq!(p, k, "{b}");
                    let v: serde_json::Value = serde_json::from_str(b).unwrap();
                    let want = v
                        .get("params")
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({}));
                    assert_eq!(serde_json::Value::Object(params), want, "{b}");
                }
                (Err(p), Err(k)) => {
                    let (p, k) = (p.rejection(), k.rejection());
                    assert_eq!(
                        (p.code, p.reason, &p.message),
                        (k.code, k.reason, &k.message),
                        "{b}"
                    );
                }
                (p, k) => panic!("the parses disagree on {b}: {p:?} vs {k:?}"),
            }
        }
    }
}
